"""What kubelet and the runtime would write for a node, level by level (docs/LAB.md §2).

The local backend writes exactly these values and then reads them back; the
readback is compared with this design before anything is measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from throttlelab.model import quantities as q
from throttlelab.model.placement import Node, Pod


@dataclass(frozen=True)
class LevelDesign:
    """Expected CPU settings of one cgroup level.

    `path` is relative to the run's root cgroup; `weight` is always the cgroup
    v2 weight (on v1 it is written as shares = weight * 1024 / 100).
    """

    level: str  # node | qos | pod | container
    path: str
    quota_us: int | None
    period_us: int
    weight: int
    cpus: str | None
    formula: str
    pod: str | None = None
    container: str | None = None
    #: burst budget in us, written after the quota; None: not written (the kernel's 0)
    burst_us: int | None = None


def pod_path(node: Node, pod: Pod) -> str:
    """kubelet's layout: guaranteed pods under kubepods, others under their QoS level."""
    qos = pod.qos
    if qos == "guaranteed":
        return f"{node.name}/pod-{pod.name}"
    return f"{node.name}/{qos}/pod-{pod.name}"


def container_path(node: Node, pod: Pod, container_name: str) -> str:
    return f"{pod_path(node, pod)}/{container_name}"


def _check_burst(burst_us: int | None, quota_us: int | None, where: str) -> None:
    # the kernel refuses a budget larger than the quota (tg_set_cfs_bandwidth: EINVAL)
    if burst_us and quota_us is not None and burst_us > quota_us:
        raise ValueError(
            f"{where}: a burst budget of {burst_us} us exceeds the quota of {quota_us} us; "
            "the kernel accepts at most the quota"
        )


def _burst_formula(burst_us: int | None) -> str:
    return "" if burst_us is None else f"; burst budget {burst_us} us"


def design_node(node: Node, runtime: str, host_cpus: int, period_us: int | None = None) -> list[LevelDesign]:
    """Every level of the node's hierarchy, parents before children. The CFS period is the
    node's (``node.period_us``, else the kernel's default) unless ``period_us`` is given."""
    period_us = period_us or node.period_us or q.DEFAULT_PERIOD_US
    allocatable = node.allocatable_milli or host_cpus * 1000
    node_shares = q.milli_to_shares(allocatable)
    levels = [
        LevelDesign(
            level="node",
            path=node.name,
            quota_us=None,
            period_us=period_us,
            weight=q.shares_to_weight_linear(node_shares),
            cpus=node.cpus,
            formula=f"kubepods: allocatable {q.format_cpu(allocatable)} -> shares {node_shares} -> linear weight",
        )
    ]
    for qos in ("burstable", "besteffort"):
        members = [p for p in node.pods if p.qos == qos]
        if not members:
            continue
        # kubelet: burstable shares = sum of its pods' requests; besteffort gets the minimum.
        shares = q.milli_to_shares(sum(p.request_milli for p in members)) if qos == "burstable" else q.MIN_SHARES
        levels.append(
            LevelDesign(
                level="qos",
                path=f"{node.name}/{qos}",
                quota_us=None,
                period_us=period_us,
                weight=q.shares_to_weight_linear(shares),
                cpus=None,
                formula=f"{qos}: shares {shares} -> linear weight",
            )
        )
    for pod in node.pods:
        shares = q.milli_to_shares(pod.request_milli)
        limit = pod.limit_milli
        quota = q.milli_to_quota(limit, period_us)
        _check_burst(pod.burst_us, quota, f"pod {pod.name}")
        levels.append(
            LevelDesign(
                level="pod",
                path=pod_path(node, pod),
                quota_us=quota,
                period_us=period_us,
                weight=q.shares_to_weight_linear(shares),
                cpus=None,
                formula=(
                    f"pod: request {q.format_cpu(pod.request_milli)} -> shares {shares} -> linear weight; "
                    f"limit {'sum ' + q.format_cpu(limit) if limit else 'max (a container has no limit)'}"
                    + _burst_formula(pod.burst_us)
                ),
                pod=pod.name,
                burst_us=pod.burst_us,
            )
        )
        for container in pod.containers:
            c_shares = q.milli_to_shares(container.request_milli)
            c_quota = q.milli_to_quota(container.limit_milli, period_us)
            _check_burst(container.burst_us, c_quota, f"container {pod.name}/{container.name}")
            levels.append(
                LevelDesign(
                    level="container",
                    path=container_path(node, pod, container.name),
                    quota_us=c_quota,
                    period_us=period_us,
                    weight=q.container_weight(c_shares, runtime),
                    cpus=None,
                    formula=(
                        f"container: request {q.format_cpu(container.request_milli)} -> shares {c_shares} "
                        f"-> {runtime} weight; limit {q.format_cpu(container.limit_milli)}"
                        + _burst_formula(container.burst_us or None)
                    ),
                    pod=pod.name,
                    container=container.name,
                    burst_us=container.burst_us or None,
                )
            )
    return levels
