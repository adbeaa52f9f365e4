# The pinned cluster tools (cluster/): kubelet, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, etcdctl, containerd, its runc shim, ctr, crictl and runc v1.3.0 and
# v1.4.3, built from the Go module proxy into a cache outside the checkout (config cluster_tools,
# docs/PLATFORM.md, "Cluster tools"). One job per module of cluster/; a binary whose stamp matches its build
# key is not rebuilt, so a rerun (or a fresh clone on a machine with the cache) compiles nothing.
# The kubernetes backend's own node (cluster: local) and the vm backend's guest node run on them.
# Drives the host's Go toolchain and C compiler (cgo): no conda env.


rule build_cluster_tool:
    input:
        unpack(cluster_module_files),
    output:
        manifest=layout.CLUSTER_TOOL_MANIFEST,
    log:
        layout.job_log("build_cluster_tool", "{project}"),
    threads: 2
    params:
        cluster_dir=f"{workflow.basedir}/cluster",
        settings=PLATFORM.cluster_tools_settings_arg(),
        recipe=cluster_project_recipe,
    shell:
        "throttlelab cluster-tools build --project {wildcards.project} --cluster-dir {params.cluster_dir:q}"
        " --settings {params.settings} --jobs {threads} --out {output.manifest} 2>&1 | tee {log}"


rule cluster_tools:
    input:
        manifests=expand(rules.build_cluster_tool.output.manifest, project=NODE_PROJECT_NAMES),
    output:
        manifest=layout.TOOLS_MANIFEST,
    log:
        layout.job_log("cluster_tools"),
    shell:
        "throttlelab cluster-tools summary --out {output.manifest} {input.manifests} 2>&1 | tee {log}"


# The kind node images' tools: kind v0.30.0 and v0.33.0, kubeadm and kube-proxy, CoreDNS,
# each in its own folder of the same cache (kind-v0.30.0/bin/kind, ...); rules/platform/kind_node.smk uses them.
rule kind_tools:
    input:
        manifests=expand(rules.build_cluster_tool.output.manifest, project=KIND_PROJECT_NAMES),
    output:
        manifest=layout.KIND_TOOLS_MANIFEST,
    log:
        layout.job_log("kind_tools"),
    shell:
        "throttlelab cluster-tools summary --out {output.manifest} {input.manifests} 2>&1 | tee {log}"
