"""The design of a node's pods on a real node, read back and compared, and their counters.

The container level is read by exec in the container (`podgate cat` of its own
/sys/fs/cgroup). The pod, QoS and node levels live outside every container's
cgroup namespace: where the backend sees the node (`NodeAccess`: kind, the real
node) they are read there, else recorded as unreadable, not as matching.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from throttlelab.backends.base import DesignMismatch, Readback
from throttlelab.backends.kube import manifests as mf
from throttlelab.backends.kube.run_pods import NodeAccess, NotTestable, RunPods
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
            level = replace(
                level,
                weight=q.shares_to_weight_linear(shares),
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


def container_counters(pods: RunPods, pod: str, container: str, cgroup_version: int | None) -> dict[str, Any]:
    """A container's counters, read by exec in it (its own cpu.stat; on v1 with cpuacct.usage)."""
    if cgroup_version == 1:
        texts = pods.cat(pod, container, STAT_V1)
        return parse_cpu_stat(texts[STAT_V1[0]] or "", texts[STAT_V1[1]])
    return parse_cpu_stat(pods.cat(pod, container, (STAT_V2,))[STAT_V2] or "")


class PodReadback:
    """The run's levels as designed for the worker (docs/LAB.md §2 with what a real node adds: its allocatable
    CPUs, the other pods' requests at the burstable level, a systemd driver's rounding), read back
    and compared; and the counters of a pod or container."""

    def __init__(self, pods: RunPods, access: NodeAccess, runtime: str, unreadable_reason: str):
        self.pods, self.access = pods, access
        self.runtime = runtime
        self.unreadable_reason = unreadable_reason
        self.levels: list[KubeLevel] = []
        self._version: int | None = None  # as the container's own files showed it

    @property
    def cgroup_version(self) -> int | None:
        return self.access.cgroup_version or self._version

    def design(self) -> None:
        """The levels of the node as deployed (RunPods.node, with the worker's allocatable CPUs)."""
        self.levels = kube_design(self.pods.node, self.runtime, self._other_pods())

    def _other_pods(self) -> list[dict[str, Any]] | None:
        """The worker's other live pods, whose requests kubelet adds to the burstable level: asked for
        only where that level is read back (listing the pods of every namespace needs cluster-wide
        rights); None otherwise."""
        if not self.access.strict:
            return None
        return [
            p
            for p in self.pods.kc.pods_on_node(self.pods.settings.worker_node)
            if (p["metadata"].get("labels") or {}).get(mf.LABEL_RUN) != self.pods.ident.run
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]

    def _container_settings(self, pod: str, container: str) -> dict[str, Any]:
        texts = self.pods.cat(pod, container, CGROUP_V2_FILES + CGROUP_V1_FILES)
        named = {path.rsplit("/", 1)[1]: value for path, value in texts.items()}
        if self.cgroup_version is None:
            self._version = (
                2 if named.get("cpu.max") is not None else 1 if named.get("cpu.shares") is not None else None
            )
        return {**parse_settings(named), "cgroup": "/sys/fs/cgroup (the container's own, read by exec)"}

    def _driver_quota(self, designed: dict[str, Any], level: Any, actual: dict[str, Any] | None) -> str:
        """A systemd cgroup driver rounds a quota up to whole 10 ms per second (quantities.systemd_quota):
        under it the design's quota is the rounded one (also where the driver is unknown and the quota read
        is exactly that rounding). Returns what to add to the level's formula."""
        quota = designed["quota_us"]
        rounded = q.systemd_quota(quota, level.period_us)
        if quota is None or rounded == quota:
            return ""
        driver = self.access.cgroup_driver()
        if driver == "systemd" or (driver is None and actual is not None and actual.get("quota_us") == rounded):
            designed["quota_us"] = rounded
            how = "systemd cgroup driver" if driver else "a systemd cgroup driver's rounding, as read"
            return f"; {how}: quota rounded up to whole 10 ms per second, {quota} -> {rounded} us"
        return ""

    def verify(self) -> list[Readback]:
        containers = {lv.design.path for lv in self.levels if lv.design.level == "container"}
        upper = self.access.upper_levels(self.pods, containers)
        results = []
        for kl in self.levels:
            level = kl.design
            designed: dict[str, Any] = {
                "quota_us": level.quota_us,
                "period_us": level.period_us,
                "weight": level.weight,
            }
            if level.cpus:
                designed["cpus"] = level.cpus
            if level.level == "container":
                actual = self._container_settings(level.pod, level.container)
            else:
                actual = upper.get(level.path)
            if self.cgroup_version == 1:
                designed["shares"] = kl.v1_shares
            formula = level.formula + self._driver_quota(designed, level, actual)
            info = {**designed, "formula": formula, "pod": level.pod, "container": level.container}
            if actual is None:
                missing = [f"not found: {self.unreadable_reason}"] if self.access.strict else []
                results.append(Readback(level.level, level.path, info, {"unreadable": self.unreadable_reason}, missing))
                continue
            results.append(
                Readback(level.level, level.path, info, actual, compare(designed, actual, self.cgroup_version))
            )
        for path, actual in upper.items():  # the pause containers: kubelet gives them no request (weight 1)
            if path.endswith("/pause"):
                designed = {"quota_us": None, "period_us": q.DEFAULT_PERIOD_US, "weight": 1, "shares": q.MIN_SHARES}
                info = {**designed, "formula": "pause container: no request -> shares 2 -> weight 1"}
                results.append(Readback("pause", path, info, actual, compare(designed, actual, self.cgroup_version)))
        bad = [r for r in results if r.mismatches]
        if bad:
            lines = [f"  {r.path}: " + "; ".join(r.mismatches) for r in bad]
            hint = ""
            if any(r.level == "container" and any(m.startswith("weight") for m in r.mismatches) for r in bad):
                hint = (
                    f"\n(the design assumed the {self.runtime} conversion of shares to weights; if this cluster's "
                    "runc converts the other way, set runtime accordingly)"
                )
            raise DesignMismatch(
                f"cgroup readback on {self.pods.settings.worker_node} differs from the docs/LAB.md §2 design:\n"
                + "\n".join(lines)
                + hint
            )
        return results

    def read_stat(self, pod: str, container: str | None = None) -> dict[str, Any]:
        """The counters, stamped with the middle of the read: an exec takes tens of milliseconds on
        a real cluster, and the files are read somewhere inside it, not when it has returned."""
        before = time.monotonic_ns()
        stat = self.access.counters(self.pods, pod, container)
        if stat is None:
            stat = self._counters_by_exec(pod, container)
        return {**stat, "t_ns": (before + time.monotonic_ns()) // 2}

    def _counters_by_exec(self, pod: str, container: str | None) -> dict[str, Any]:
        if container:
            return container_counters(self.pods, pod, container, self.cgroup_version)
        p = self.pods.node.pod(pod)
        if len(p.containers) == 1:
            return {
                **container_counters(self.pods, pod, p.containers[0].name, self.cgroup_version),
                "level": "container (the pod level is not readable without node access)",
            }
        raise NotTestable(f"pod-level counters of {pod} need node access: {self.unreadable_reason}")
