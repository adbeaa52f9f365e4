# The lab's kind node images, built on this machine (kind.node_images: local): a base
# debootstrapped as kind's base image is (kept in the tool cache, not the checkout), then per role
# the cluster tools, the control plane's images made here and the lab's pod network, `docker
# import`ed (throttlelab/platform/kind_node_image.py). Each job is a no-op when its image is current.
# Drives debootstrap, chroot, containerd and the Docker engine of this host: no conda env.


rule build_podnet:
    input:
        sources=podnet_sources(),
        gomod=f"{workflow.basedir}/workload/podnet/go.mod",
    output:
        binary=layout.PODNET_BINARY,
    log:
        layout.job_log("build_podnet"),
    params:
        source=input_folder("gomod"),
    shell:
        "throttlelab kind-node build-podnet --source {params.source:q} --out {output.binary} > {log} 2>&1"


rule kind_node_base:
    input:
        gomod=kind_module_gomod,
    output:
        stamp=layout.KIND_NODE_BASE_STAMP,
    log:
        layout.job_log("kind_node_base", "{role}"),
    params:
        cluster_dir=f"{workflow.basedir}/cluster",
        settings=PLATFORM.kind_node_settings_arg(),
    shell:
        "throttlelab kind-node base --role {wildcards.role} --cluster-dir {params.cluster_dir:q}"
        " --settings {params.settings} --out {output.stamp} 2>&1 | tee {log}"


rule kind_node_image:
    input:
        base=rules.kind_node_base.output.stamp,
        podnet=rules.build_podnet.output.binary,
        tools=kind_node_tool_manifests,
    output:
        stamp=layout.KIND_NODE_STAMP,
    log:
        layout.job_log("kind_node_image", "{role}"),
    params:
        revision=KIND_NODE_REVISION,
        cluster_dir=f"{workflow.basedir}/cluster",
        settings=PLATFORM.kind_node_settings_arg(),
    shell:
        "throttlelab kind-node build --role {wildcards.role} --cluster-dir {params.cluster_dir:q}"
        " --settings {params.settings} --base-stamp {input.base} --podnet {input.podnet}"
        " --out {output.stamp} 2>&1 | tee {log}"


# `snakemake --cores 2 kind_node_images`: both node images (the clusters' rules ask for them under local).
rule kind_node_images:
    input:
        expand(rules.kind_node_image.output.stamp, role=["new", "old"]),
