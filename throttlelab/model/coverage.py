"""Which variants a backend cannot express, and why (pure).

An existing Kubernetes cluster is used as it is: the lab may not pin its nodes'
CPUs nor switch its runc. Variants that need either are left out of the plan
before any job runs, each with its reason, instead of failing mid-run.

Beyond the lab (docs/EXPERIMENTS.md): a CFS burst budget (X1) is written by the
local backend only, and a CFS period other than the default (X2) by the local
and docker backends; the others leave those variants out the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

from throttlelab.model.quantities import DEFAULT_PERIOD_US
from throttlelab.model.variants import VariantSpec

#: kind on a cgroup v1 host: why node containers cannot be pinned.
V1_PIN_REASON = (
    "pinning a kind node container (docker update --cpuset-cpus) fails with EBUSY on a cgroup v1 host: "
    "cpuset.cpus of a v1 cgroup cannot shrink below its children's, and runc gives every container "
    "inside the node all CPUs; run pinned variants on a cgroup v2 host"
)


#: Why a backend other than local cannot write a burst budget (X1).
NO_BURST_REASON = {
    "docker": "docker cannot express a CFS burst budget: `docker run` has no flag and the Engine API's HostConfig "
              "no field for it (runc could write cpu.max.burst, but Docker never hands it one)",
    "kind": "Kubernetes cannot express a CFS burst budget: a container's resources have no such field, and kubelet "
            "writes none",
    "kubernetes": "Kubernetes cannot express a CFS burst budget: a container's resources have no such field, and "
                  "kubelet writes none",
}
#: Why a backend cannot set a CFS period other than the default (X2).
NO_PERIOD_REASON = {
    "kind": "the CFS period is kubelet's node-wide cpuCFSQuotaPeriod (behind the CustomCPUCFSQuotaPeriod feature "
            "gate), not a pod setting; the lab's kind clusters run kubelet's default",
    "kubernetes": "the CFS period is kubelet's node-wide cpuCFSQuotaPeriod (behind the CustomCPUCFSQuotaPeriod "
                  "feature gate), not a pod setting; an existing cluster is used as it is",
}


def _knob_reasons(backend: str, experiments: Mapping[str, Mapping[str, VariantSpec]]) -> dict[tuple[str, str], str]:
    """The variants that ask for a burst budget or a CFS period this backend cannot write."""
    out = {}
    for experiment, variants in experiments.items():
        for variant, spec in variants.items():
            if spec.burst_us and backend in NO_BURST_REASON:
                out[(experiment, variant)] = f"not testable on the {backend} backend: {NO_BURST_REASON[backend]}"
            elif spec.period_us not in (None, DEFAULT_PERIOD_US) and backend in NO_PERIOD_REASON:
                out[(experiment, variant)] = f"not testable on the {backend} backend: {NO_PERIOD_REASON[backend]}"
    return out


def untestable_variants(backend: str, experiments: Mapping[str, Mapping[str, VariantSpec]],
                        runtime: str, cgroup_version: int | None = None) -> dict[tuple[str, str], str]:
    """(experiment, variant) -> why ``backend`` cannot run it, for every variant it cannot.

    ``cgroup_version``: the host's (Docker's) cgroup version, when known; kind cannot pin
    its node containers on v1."""
    knobs = _knob_reasons(backend, experiments)
    return {**_placement_reasons(backend, experiments, runtime, cgroup_version), **knobs}


def _placement_reasons(backend: str, experiments: Mapping[str, Mapping[str, VariantSpec]],
                       runtime: str, cgroup_version: int | None) -> dict[tuple[str, str], str]:
    """Pinned CPUs and runtimes an existing cluster (or kind on v1) cannot give."""
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
