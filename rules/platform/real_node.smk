# The lab's own real node (kubernetes: {cluster: local}; backends/node): its workload images and its end.
# The node itself starts with the first experiment that needs it (its runner starts it for this Snakemake
# process) and goes when Snakemake ends: onsuccess and onerror wait until it is down; a Snakemake
# killed with SIGKILL is noticed by the node's supervisor, which takes the node down by itself.
# These rules drive this host's cgroups, network and processes as root: no conda env.


rule build_node_image:
    input:
        cpulab=layout.BINARY,
        podgate=rules.build_podgate.output.binary,
    output:
        archive=layout.NODE_IMAGE_ARCHIVE,
    log:
        layout.job_log("build_node_image", "{build}"),
    shell:
        "throttlelab node build-image --build {wildcards.build} --cpulab {input.cpulab} --podgate {input.podgate}"
        " --out {output.archive} > {log} 2>&1"


onsuccess:
    stop_local_node()


onerror:
    stop_local_node()
