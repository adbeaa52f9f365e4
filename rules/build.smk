# Stage 1: build the Go workload in its two variants (go.mod `go 1.24` and `go 1.25`).


rule build_workload:
    input:
        sources=workload_sources(),
        gomod=f"{workflow.basedir}/workload/go.mod",
    output:
        binary=layout.BINARY,
    log:
        layout.job_log("build_workload", "{build}"),
    params:
        source=input_folder("gomod"),
    shell:
        "throttlelab build-workload --variant {wildcards.build} --source {params.source:q} --out {output.binary}"
        " > {log} 2>&1"


# The docker backend's images: FROM scratch around each binary (no base image is
# pulled). The stamp records the image id and the binary's hash, so the image is
# rebuilt exactly when its binary changes. Drives the host's Docker engine: no conda env.
rule build_image:
    input:
        binary=layout.BINARY,
    output:
        stamp=layout.IMAGE_STAMP,
    log:
        layout.job_log("build_image", "{build}"),
    shell:
        "throttlelab build-image --variant {wildcards.build} --binary {input.binary}"
        " --out {output.stamp} > {log} 2>&1"
