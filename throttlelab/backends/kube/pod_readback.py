"""The design of a node's pods on a real node, what its cgroup files say, and their comparison."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from throttlelab.backends.kube import manifests as mf
from throttlelab.model import node_levels as design
from throttlelab.model import quantities as q
from throttlelab.model.placement import Node, parse_cpuset

CGROUP_V2_FILES = ("/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu.weight")
CGROUP_V1_FILES = (
    "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
    "/sys/fs/cgroup/cpu/cpu.cfs_period_us",
    "/sys/fs/cgroup/cpu/cpu.shares",
)
STAT_V2 = "/sys/fs/cgroup/cpu.stat"
STAT_V1 = ("/sys/fs/cgroup/cpu/cpu.stat", "/sys/fs/cgroup/cpuacct/cpuacct.usage")


@dataclass(frozen=True)
class KubeLevel:
    """One designed level plus its cgroup v1 value (kubelet and runc write shares directly on v1)."""

    design: design.LevelDesign
    v1_shares: int


def kube_design(
    node: Node, runtime: str, others: list[dict[str, Any]] | None, period_us: int = q.DEFAULT_PERIOD_US
) -> list[KubeLevel]:
    """design.design_node for a real node: `node` already has the node's allocatable CPUs and
    defaulted requests (manifests.kube_node); `others` are the node's other live pods, whose
    requests kubelet adds to the burstable QoS level, or None when they were not asked for (the
    level is not read back): the burstable level's design then counts our pods only, and says so."""
    levels = design.design_node(node, runtime, (node.allocatable_milli or 0) // 1000, period_us)
    other_burstable = sum(mf.pod_request_milli(p) for p in others or [] if mf.pod_qos(p) == "burstable")
    others_text = (
        "not counted (this level is not read back here, and listing every namespace's pods needs cluster-wide rights)"
        if others is None
        else q.format_cpu(other_burstable)
    )
    ours = sum(p.request_milli for p in node.pods if p.qos == "burstable")
    out = []
    for level in levels:
        if level.level == "node":
            shares = q.milli_to_shares(node.allocatable_milli)
        elif level.level == "qos" and level.path.endswith("/burstable"):
            shares = q.milli_to_shares(ours + other_burstable)
            level = design.LevelDesign(
                level="qos",
                path=level.path,
                quota_us=None,
                period_us=period_us,
                weight=q.shares_to_weight_linear(shares),
                cpus=None,
                formula=(
                    f"burstable: requests of our pods {q.format_cpu(ours)} + the node's other burstable pods "
                    f"{others_text} -> shares {shares} -> linear weight"
                ),
            )
        elif level.level == "qos":
            shares = q.MIN_SHARES
        elif level.level == "pod":
            shares = q.milli_to_shares(node.pod(level.pod).request_milli)
        else:
            shares = q.milli_to_shares(node.pod(level.pod).container(level.container).request_milli)
        out.append(KubeLevel(level, shares))
    return out


def parse_settings(texts: dict[str, str | None]) -> dict[str, Any]:
    """cpu.max / cpu.weight (v2) or cfs quota / period / shares (v1) file contents -> numbers."""
    out: dict[str, Any] = {"quota_us": None, "period_us": None, "weight": None, "shares": None}
    max_text = texts.get("cpu.max")
    if max_text is not None:
        quota, _, period = max_text.strip().partition(" ")
        out["quota_us"] = None if quota == "max" else int(quota)
        out["period_us"] = int(period) if period else None
    if texts.get("cpu.weight") is not None:
        out["weight"] = int(texts["cpu.weight"].strip())
    if texts.get("cpu.cfs_quota_us") is not None:
        quota = int(texts["cpu.cfs_quota_us"].strip())
        out["quota_us"] = None if quota < 0 else quota
    if texts.get("cpu.cfs_period_us") is not None:
        out["period_us"] = int(texts["cpu.cfs_period_us"].strip())
    if texts.get("cpu.shares") is not None:
        out["shares"] = int(texts["cpu.shares"].strip())
    return out


def parse_cpu_stat(text: str, usage_ns: str | None = None) -> dict[str, int]:
    """cpu.stat (v2: usage_usec, nr_periods, nr_throttled, throttled_usec; v1: throttled_time in ns,
    usage from cpuacct.usage in ns) -> the four counters of read_stat."""
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            values[key] = int(value)
    out = {k: values.get(k) for k in ("nr_periods", "nr_throttled")}
    out["throttled_usec"] = values.get(
        "throttled_usec", values["throttled_time"] // 1000 if "throttled_time" in values else None
    )
    out["usage_usec"] = values.get(
        "usage_usec", int(usage_ns) // 1000 if usage_ns and usage_ns.strip().isdigit() else None
    )
    return out


def compare(designed: dict[str, Any], got: dict[str, Any], cgroup_version: int | None) -> list[str]:
    keys = ["quota_us", "period_us"] + (["shares"] if cgroup_version == 1 else ["weight"])
    out = [f"{k}: designed {designed[k]!r}, read {got.get(k)!r}" for k in keys if designed.get(k) != got.get(k)]
    if designed.get("cpus"):
        read = got.get("cpus")
        if read is None or parse_cpuset(read) != parse_cpuset(designed["cpus"]):
            out.append(f"cpus: designed {designed['cpus']!r}, read {read!r}")
    return out
