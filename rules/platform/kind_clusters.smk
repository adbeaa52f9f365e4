# kind's clusters (throttlelab/platform/kind_clusters.py): the lab's two clusters (config/kind/new.yaml,
# old.yaml; docs/LAB.md §4), each created once by a rule of its own (its kubeconfig is the output, so a
# rerun reuses it), the kind image (the docker backend's cpulab:<build> plus podgate) loaded into each, and
# `clean`, which deletes them and what a dead real node left. podgate is the real node's images' too.
# These rules drive the host's Docker engine and kind binaries: they cannot have a conda env.


wildcard_constraints:
    role="new|old",


rule build_podgate:
    input:
        sources=podgate_sources(),
        gomod=f"{workflow.basedir}/workload/podgate/go.mod",
    output:
        binary=layout.PODGATE_BINARY,
    log:
        layout.job_log("build_podgate"),
    params:
        source=input_folder("gomod"),
    shell:
        "throttlelab kind build-podgate --podgate-source {params.source:q} --out {output.binary} > {log} 2>&1"


rule build_kind_image:
    input:
        base=rules.build_image.output.stamp,
        podgate=rules.build_podgate.output.binary,
    output:
        stamp=layout.KIND_IMAGE_STAMP,
    log:
        layout.job_log("build_kind_image", "{build}"),
    shell:
        "throttlelab kind build-image --variant {wildcards.build} --base-stamp {input.base}"
        " --podgate {input.podgate} --out {output.stamp} > {log} 2>&1"


rule create_cluster:
    input:
        config=f"{workflow.basedir}/config/kind/{{role}}.yaml",
        node_image=kind_node_inputs,
    output:
        kubeconfig=layout.KIND_KUBECONFIG,
        stamp=layout.KIND_CLUSTER_STAMP,
    log:
        layout.job_log("create_cluster", "{role}"),
    params:
        settings=kind_settings_arg,
        config_dir=input_folder("config"),
    shell:
        "throttlelab kind create --role {wildcards.role} --settings {params.settings} --config-dir {params.config_dir:q}"
        " --kubeconfig {output.kubeconfig} --stamp {output.stamp} > {log} 2>&1"


rule load_image:
    input:
        kubeconfig=ancient(rules.create_cluster.output.kubeconfig),
        cluster=rules.create_cluster.output.stamp,
        image=rules.build_kind_image.output.stamp,
    output:
        stamp=layout.KIND_LOADED_IMAGE,
    log:
        layout.job_log("load_image", "{role}-{build}"),
    params:
        settings=kind_settings_arg,
    shell:
        "throttlelab kind load --role {wildcards.role} --settings {params.settings} --variant {wildcards.build}"
        " --image-stamp {input.image} --stamp {output.stamp} > {log} 2>&1"


# Both of the lab's clusters, whichever the profile's experiments need (a run makes only those).
rule create_clusters:
    input:
        [layout.kind_kubeconfig(role) for role in PLATFORM.lab_kind_roles()],
        [layout.kind_loaded_image(role, build) for role in PLATFORM.lab_kind_roles() for build in BUILDS],


# `snakemake --cores 1 clean`: take down what a dead real node left, then delete the lab's kind
# clusters (and their kubeconfigs).
rule clean:
    log:
        layout.job_log("clean"),
    params:
        settings=kind_settings_arg,
    shell:
        "(throttlelab node-sweep && throttlelab kind delete --settings {params.settings}) 2>&1 | tee {log}"
