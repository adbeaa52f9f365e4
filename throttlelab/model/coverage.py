"""Which variants a backend cannot express, and why (pure).

An existing Kubernetes cluster is used as it is: the lab may not pin its nodes'
CPUs nor switch its runc. Variants that need either are left out of the plan
before any job runs, each with its reason, instead of failing mid-run. The
other backends express every variant of the bundled profiles.
"""

from __future__ import annotations

from collections.abc import Mapping

from throttlelab.model.variants import VariantSpec

#: kind on a cgroup v1 host: why node containers cannot be pinned.
V1_PIN_REASON = (
    "pinning a kind node container (docker update --cpuset-cpus) fails with EBUSY on a cgroup v1 host: "
    "cpuset.cpus of a v1 cgroup cannot shrink below its children's, and runc gives every container "
    "inside the node all CPUs; run pinned variants on a cgroup v2 host"
)


def untestable_variants(backend: str, experiments: Mapping[str, Mapping[str, VariantSpec]],
                        runtime: str, cgroup_version: int | None = None) -> dict[tuple[str, str], str]:
    """(experiment, variant) -> why ``backend`` cannot run it, for every variant it cannot.

    ``cgroup_version``: the host's (Docker's) cgroup version, when known; kind cannot pin
    its node containers on v1."""
    if backend == "kind":
        if cgroup_version != 1:
            return {}
        return {(experiment, variant): f"not testable on the kind backend on this cgroup v1 host: {V1_PIN_REASON}"
                for experiment, variants in experiments.items() for variant, spec in variants.items()
                if spec.cpus or spec.node_cpus or spec.load_cpus}
    if backend != "kubernetes":
        return {}
    out = {}
    for experiment, variants in experiments.items():
        for variant, spec in variants.items():
            if spec.cpus:
                reason = (f"it pins the worker node to CPU {spec.cpus} (a cpuset on the node), which needs the "
                          "node itself")
            elif spec.node_cpus or spec.load_cpus:
                reason = (f"it pins the node to CPUs {spec.node_cpus or 'all'} and the load generator to "
                          f"{spec.load_cpus or 'any'} (cpusets on the nodes); on an existing cluster use a "
                          "profile without node_cpus/load_cpus: separate worker and load nodes keep them apart")
            elif (spec.runtime or runtime) != runtime:
                reason = (f"it asks for the {spec.runtime} conversion, and this cluster's runc is configured "
                          f"as {runtime} (one cluster, one runc; see the runtime setting)")
            else:
                continue
            out[(experiment, variant)] = f"not testable on the kubernetes backend: {reason}"
    return out
