"""Which variants a backend cannot express, and why (pure).

An existing Kubernetes cluster is used as it is: the lab may not pin its nodes'
CPUs nor switch its runc. Variants that need either are left out of the plan
before any job runs, each with its reason, instead of failing mid-run.

E6 (what monitoring sees) reads the kubelet's real cAdvisor on kind and
kubernetes, as the lab did; cAdvisor reads a container only every 10-15 s, so
an E6 variant whose scrapes are closer than that, or whose job ends before the
second scrape, cannot be measured there (`cadvisor_misfit`) and is listed with
the reason. Local and docker emulate cAdvisor and run every E6 variant.

Beyond the lab (docs/EXPERIMENTS.md): a CFS burst budget (X1) is written by the
local backend only, and a CFS period other than the default (X2) by the local
and docker backends; the others leave those variants out the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from throttlelab.model.quantities import DEFAULT_PERIOD_US
from throttlelab.model.variants import VariantSpec
from throttlelab.model.weight_pods import largest_pod_milli, pod_names, requested_milli

#: kind on a cgroup v1 host: why node containers cannot be pinned.
V1_PIN_REASON = (
    "pinning a kind node container (docker update --cpuset-cpus) fails with EBUSY on a cgroup v1 host: "
    "cpuset.cpus of a v1 cgroup cannot shrink below its children's, and runc gives every container "
    "inside the node all CPUs; run pinned variants on a cgroup v2 host"
)


#: The kubelet's cAdvisor (pkg/kubelet/cadvisor) reads a container every 10 s, stretched to at most
#: 15 s while the container is quiet, each interval jittered by up to its own length.
KUBELET_HOUSEKEEPING_S = 10.0
#: The backends that run on a Kubernetes cluster: E6 scrapes the kubelet's real cAdvisor there (their
#: Capabilities.cadvisor is True), and the smoke target (docs/KIND_SMOKE.md) runs there only.
CLUSTER_BACKENDS = ("kind", "kubernetes")


def cadvisor_misfit(spec: VariantSpec) -> str | None:
    """Why this E6 variant cannot be measured against the kubelet's real cAdvisor, or None."""
    gap_s, job_s = spec.scrape_gap_ms / 1000, spec.rounds * spec.interval_ms / 1000
    if gap_s < KUBELET_HOUSEKEEPING_S:
        return (
            f"its scrapes are {gap_s:g} s apart and the kubelet's cAdvisor reads a container only every "
            f"{KUBELET_HOUSEKEEPING_S:g}-15 s, so both would mostly get the same cached reading (the lab "
            f"scraped ~20 s apart): it needs scrape_gap_ms of at least {KUBELET_HOUSEKEEPING_S * 1000:.0f} "
            "and a job that outlasts the second scrape"
        )
    second_s = (spec.first_scrape_ms + spec.scrape_gap_ms) / 1000
    if job_s <= second_s:
        return (
            f"its job lasts {job_s:g} s (rounds x interval_ms) and the second scrape comes at {second_s:g} s; "
            "cAdvisor drops a container's series when the container ends"
        )
    return None


def _cadvisor_reason(backend: str, spec: VariantSpec) -> str | None:
    """Why E6 cannot scrape the kubelet's cAdvisor for this variant on `backend`, or None (also for
    every variant that scrapes nothing: only E6's have scrape_gap_ms)."""
    if backend not in CLUSTER_BACKENDS or spec.scrape_gap_ms is None:
        return None
    misfit = cadvisor_misfit(spec)
    return (
        None
        if misfit is None
        else (f"it is measured against the kubelet's real cAdvisor on the {backend} backend, and {misfit}")
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


def untestable_variants(
    backend: str,
    experiments: Mapping[str, Mapping[str, VariantSpec]],
    runtime: str,
    cgroup_version: int | None = None,
    cluster: str | None = None,
    node_cpus: int | None = None,
) -> dict[tuple[str, str], str]:
    """(experiment, variant) -> why ``backend`` cannot run it, for every variant it cannot.

    ``cgroup_version``: the host's (Docker's) cgroup version, when known; kind cannot pin
    its node containers on v1. On kind and kubernetes, E6 variants that do not fit the kubelet's
    cAdvisor (`cadvisor_misfit`) are listed too, and everywhere the variants asking for a burst
    budget or a CFS period the backend cannot write (X1, X2). On kind, ``node_cpus`` is this host's: the
    lab's weight pods that request more (E4) are left out. ``cluster``: the kubernetes backend's
    (``local``: the lab's real node, which has both runc releases and ``node_cpus`` CPUs). On the vm
    backend ``cluster="local"`` is ``vm: {node: kubernetes}``: the real node in each guest of
    ``node_cpus`` vCPUs leaves out what the real node does, for the same reasons (timed checks are
    the findings' to judge: "not testable: emulated CPU" on TCG, from the raw logs)."""
    if backend == "vm" and cluster == "local":
        return _vm_node_reasons(experiments, runtime, node_cpus)
    return {
        **_placement_reasons(backend, experiments, runtime, cgroup_version, cluster, node_cpus),
        **_knob_reasons(backend, experiments),
    }


def _vm_node_reasons(
    experiments: Mapping[str, Mapping[str, VariantSpec]], runtime: str, node_cpus: int | None
) -> dict[tuple[str, str], str]:
    """What the real node in a vm guest cannot run: the real node's reasons, said of the guest."""
    out = {}
    for key, reason in untestable_variants("kubernetes", experiments, runtime, None, "local", node_cpus).items():
        _, _, why = reason.partition(": ")
        out[key] = f"not testable on the real node in the vm guest ({node_cpus} vCPUs): {why}"
    return out


def request_over_limit(spec: VariantSpec) -> str | None:
    """A container of this variant whose CPU request exceeds its limit, as "500m > 200m", or None. The
    Kubernetes API server refuses such a pod (a request must not exceed its limit); cgroups can hold it."""
    from throttlelab.model.quantities import parse_cpu

    pairs = [(spec.request, spec.limit), (spec.upstream_request, spec.upstream_limit)]
    pairs += [(r.request, r.limit) for r in (spec.app, spec.sidecar) if r is not None]
    for request, limit in pairs:
        if request is not None and limit is not None and parse_cpu(request, "request") > parse_cpu(limit, "limit"):
            return f"{request} > {limit}"
    return None


class _WeightFit(NamedTuple):
    """What of the lab's weight pods one node must hold at once, and how a reason says it."""

    milli: int  # the CPU they request, in millicores
    what: str  # "its pods request 5.2 CPUs"
    refused: str  # the pronoun for what a scheduler refuses: "them" or "it"


def _weight_fit(experiment: str, spec: VariantSpec, a_few_at_a_time: bool) -> _WeightFit | None:
    """What of the lab's weight pods of this variant (E4, E5, E10) one node must hold at once; else None.
    E4's read-out deploys its pods a few at a time where the backend does (weight_pods.deployment_waves):
    then only its largest pod must fit. E5 and E10 compare their pods running together: all of them."""
    if experiment == "E4" and a_few_at_a_time:
        largest = largest_pod_milli(pod_names("E4", None))
        return _WeightFit(largest, f"its largest pod requests {largest / 1000:g} CPUs", "it")
    if experiment == "E4" or (experiment in ("E5", "E10") and spec.phase):
        asked = requested_milli(pod_names(experiment, spec.phase))
        return _WeightFit(asked, f"its pods request {asked / 1000:g} CPUs", "them")
    return None


def _refused_for_cpu(fit: _WeightFit | None, node: str, node_cpus: int | None) -> str | None:
    """Why the scheduler refuses the weight pods of ``fit`` on ``node`` of ``node_cpus`` CPUs: they request
    more than it has; None where they fit (or the node's size is not known)."""
    if not (node_cpus and fit and fit.milli > node_cpus * 1000):
        return None
    return (
        f"{fit.what} and {node} has {node_cpus} (the lab's nodes had more): the scheduler refuses {fit.refused} "
        "(Insufficient cpu)"
    )


def _placement_reasons(
    backend: str,
    experiments: Mapping[str, Mapping[str, VariantSpec]],
    runtime: str,
    cgroup_version: int | None,
    cluster: str | None = None,
    node_cpus: int | None = None,
) -> dict[tuple[str, str], str]:
    """Pinned CPUs, runtimes and cAdvisor timings an existing cluster (or kind) cannot give."""
    if backend not in CLUSTER_BACKENDS:
        return {}
    out = {}
    for experiment, variants in experiments.items():
        for variant, spec in variants.items():
            if over := request_over_limit(spec):
                out[(experiment, variant)] = (
                    f"not testable on the {backend} backend: a container requests more CPU "
                    f"than its limit ({over}), which the Kubernetes API server refuses (a "
                    "scaled-down profile kept the lab's request; the real node showed it)"
                )
                continue
            if backend == "kind":
                fit = _weight_fit(experiment, spec, a_few_at_a_time=False)
                if cgroup_version == 1 and (spec.cpus or spec.node_cpus or spec.load_cpus):
                    out[(experiment, variant)] = (
                        f"not testable on the kind backend on this cgroup v1 host: {V1_PIN_REASON}"
                    )
                # a kind node is a container of this host: its kubelet counts the host's CPUs
                elif refused := _refused_for_cpu(fit, "a kind worker of this host", node_cpus):
                    out[(experiment, variant)] = f"not testable on the kind backend here: {refused}"
                elif reason := _cadvisor_reason(backend, spec):
                    out[(experiment, variant)] = f"not testable on the kind backend: {reason}"
                continue
            if cluster == "local":
                # the real node pins its own cgroup root and runs a pinned load generator on this host, and
                # both runc releases are on it: what cAdvisor cannot see is left out, and the lab's weight
                # pods that ask for more CPU than the node has (a real scheduler refuses them). E4's read-out
                # deploys them a few at a time (weight_pods.deployment_waves): only a pod larger than the
                # node leaves it out; E5/E10 compare their pods running together
                fit = _weight_fit(experiment, spec, a_few_at_a_time=True)
                reason = _refused_for_cpu(fit, "the real node", node_cpus) or _cadvisor_reason(backend, spec)
                if not reason:
                    continue
                out[(experiment, variant)] = f"not testable on the real node: {reason}"
                continue
            if spec.cpus:
                reason = (
                    f"it pins the worker node to CPU {spec.cpus} (a cpuset on the node), which needs the node itself"
                )
            elif spec.node_cpus or spec.load_cpus:
                reason = (
                    f"it pins the node to CPUs {spec.node_cpus or 'all'} and the load generator to "
                    f"{spec.load_cpus or 'any'} (cpusets on the nodes); on an existing cluster use a "
                    "profile without node_cpus/load_cpus: separate worker and load nodes keep them apart"
                )
            elif (spec.runtime or runtime) != runtime:
                reason = (
                    f"it asks for the {spec.runtime} conversion, and this cluster's runc is configured "
                    f"as {runtime} (one cluster, one runc; see the runtime setting)"
                )
            elif not (reason := _cadvisor_reason(backend, spec)):
                continue
            out[(experiment, variant)] = f"not testable on the kubernetes backend: {reason}"
    return out
