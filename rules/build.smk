# Stage 1: build the Go workload in its two variants (go.mod `go 1.24` and `go 1.25`).


rule build_workload:
    input:
        sources=workload_sources(),
    output:
        binary=binary_path("{build}"),
    log:
        "results/logs/build_workload/{build}.log",
    shell:
        "{PY} -m throttlelab.workload_build --variant {wildcards.build} --out {output.binary} > {log} 2>&1"
