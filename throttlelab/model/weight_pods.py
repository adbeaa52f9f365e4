"""The lab's weight experiments as a model: its pods (E4, E5, E10) and the shares of one
contended CPU that kubelet's and runc's weights predict for them (docs/LAB.md §2, §4).

Pure: the experiments build their nodes from it, and the findings derive F8's expected
shares from the same function, so the prediction lives in one place.
"""

from __future__ import annotations

from throttlelab.model import quantities as q
from throttlelab.model.placement import Container, Pod
from throttlelab.model.variants import (
    WEIGHTS_PODS,
    WEIGHTS_TWO_CONTAINER,
)

# The lab's pods, as (pod name, ((container, request, limit), ...)).
E4_PODS: tuple[tuple[str, tuple[tuple[str, str, str | None], ...]], ...] = (
    ("p100m", (("spin", "100m", None),)),
    ("p1", (("spin", "1", None),)),
    ("p2", (("spin", "2", None),)),
    ("p1-limited", (("spin", "1", "1"),)),
    ("two", (("small", "100m", None), ("big", "1", None))),
)
PHASES = {
    # phase -> (pods that run, level at which shares are compared)
    WEIGHTS_PODS: (("p100m", "p1", "two"), "pod"),
    WEIGHTS_TWO_CONTAINER: (("two",), "container"),
}


def pod_names(experiment: str, phase: str | None) -> tuple[str, ...]:
    """The lab's pods a weight experiment deploys: E4 every one, E5 and E10 those of their phase."""
    if experiment == "E4":
        return tuple(name for name, _ in E4_PODS)
    return PHASES[phase][0]


def _pod_requests_milli(names: tuple[str, ...]) -> list[int]:
    """What each of these pods requests in all its containers, in the lab's order."""
    return [
        sum(q.parse_cpu(req, "request") for _, req, _ in containers) for name, containers in E4_PODS if name in names
    ]


def requested_milli(names: tuple[str, ...]) -> int:
    """The CPU these pods request in all (what a scheduler must find free on one node)."""
    return sum(_pod_requests_milli(names))


def largest_pod_milli(names: tuple[str, ...]) -> int:
    """The CPU the largest of these pods requests (what one node must have free to hold it alone)."""
    return max(_pod_requests_milli(names))


def deployment_waves(pods: tuple[Pod, ...], free_milli: int | None) -> list[tuple[Pod, ...]]:
    """The pods in as few deployments as each fit ``free_milli`` of requestable CPU, for a read-out
    (E4) on a node smaller than the lab's: kubelet refuses a pod whose request does not fit what the
    node's allocatable CPU leaves (OutOfcpu), and each level's weight depends only on the requests
    of the pods present, which each deployment's design counts. First fit, largest first; each
    deployment keeps the lab's order. ``free_milli`` None: no scheduler refuses anything (local,
    docker), all at once. A pod larger than ``free_milli`` is a ValueError naming it (the plan
    leaves such a variant out: coverage.untestable_variants)."""
    if free_milli is None or sum(p.request_milli for p in pods) <= free_milli:
        return [tuple(pods)]
    too_big = [p for p in pods if p.request_milli > free_milli]
    if too_big:
        names = ", ".join(f"{p.name} ({q.format_cpu(p.request_milli)})" for p in too_big)
        raise ValueError(
            f"pod(s) {names} request more CPU than the node leaves free ({q.format_cpu(free_milli)}): "
            "no deployment can hold them"
        )
    bins: list[list[Pod]] = []
    for pod in sorted(pods, key=lambda p: -p.request_milli):  # sorted() is stable: ties keep the lab's order
        for wave in bins:
            if sum(p.request_milli for p in wave) + pod.request_milli <= free_milli:
                wave.append(pod)
                break
        else:
            bins.append([pod])
    order = {p.name: k for k, p in enumerate(pods)}
    return [tuple(sorted(wave, key=lambda p: order[p.name])) for wave in bins]


def lab_pods(names: tuple[str, ...], args: tuple[str, ...], build: str) -> tuple[Pod, ...]:
    """The lab's pods named in ``names`` (in the lab's order), each container running ``args``."""
    pods = []
    for pod_name, containers in E4_PODS:
        if pod_name not in names:
            continue
        pods.append(
            Pod(
                pod_name,
                tuple(
                    Container(
                        c,
                        args,
                        variant=build,
                        request_milli=q.parse_cpu(req, "request"),
                        limit_milli=None if lim is None else q.parse_cpu(lim, "limit"),
                    )
                    for c, req, lim in containers
                ),
            )
        )
    return tuple(pods)


def expected_shares(pods: tuple[Pod, ...], level: str, runtime: str) -> dict[str, tuple[int, float]]:
    """member -> (weight, expected share of one contended CPU): w_i / sum of the siblings' w.

    Pod level: kubelet's linear weights of the pods' summed requests (all three are
    burstable siblings). Container level: the runtime's weights of the containers.
    """
    if level == "pod":
        weights = {f"pod-{p.name}": q.shares_to_weight_linear(q.milli_to_shares(p.request_milli)) for p in pods}
    else:
        (pod,) = pods
        weights = {c.name: q.container_weight(q.milli_to_shares(c.request_milli), runtime) for c in pod.containers}
    total = sum(weights.values())
    return {member: (w, w / total) for member, w in weights.items()}
