"""The placement model every backend maps: node -> pod -> container (docs/LAB.md §6).

Frozen dataclasses only; the expected cgroup values derived from them live in
`design.py`, so this module stays a plain description of what is asked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from throttlelab.model import quantities as q

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _check_name(kind: str, name: str) -> None:
    # DNS-1123 labels: valid as cgroup directory, docker container and pod names alike.
    if not _NAME.match(name) or len(name) > 50:
        raise ValueError(f"{kind} name {name!r}: use lower-case letters, digits and '-' (at most 50)")


@dataclass(frozen=True)
class Container:
    """One workload process: which build, what it runs, its CPU request/limit and its
    memory request/limit in bytes (None: not set; the lab's pods set CPU only)."""

    name: str
    args: tuple[str, ...]
    variant: str = "go124mod"
    request_milli: int | None = None
    limit_milli: int | None = None
    env: tuple[tuple[str, str], ...] = ()
    role: str = "job"  # job: runs to completion; service: runs until stopped
    request_memory: int | None = None
    limit_memory: int | None = None
    #: CFS burst budget in us (cpu.max.burst / cpu.cfs_burst_us): CPU the container may borrow
    #: beyond its quota from periods it left unused; None or 0: not written (the kernel's 0)
    burst_us: int | None = None

    def __post_init__(self) -> None:
        _check_name("container", self.name)
        if self.role not in ("job", "service"):
            raise ValueError(f"container {self.name}: role must be job or service, not {self.role!r}")
        if self.burst_us is not None:
            if self.burst_us < 0:
                raise ValueError(f"container {self.name}: a burst budget cannot be negative ({self.burst_us} us)")
            if self.burst_us and self.limit_milli is None:
                raise ValueError(
                    f"container {self.name}: a burst budget of {self.burst_us} us needs a CPU limit "
                    "(it lends CPU beyond a quota)"
                )

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


@dataclass(frozen=True)
class Pod:
    name: str
    containers: tuple[Container, ...]

    def __post_init__(self) -> None:
        _check_name("pod", self.name)
        if not self.containers:
            raise ValueError(f"pod {self.name}: needs at least one container")
        names = [c.name for c in self.containers]
        if len(set(names)) != len(names):
            raise ValueError(f"pod {self.name}: container names repeat: {names}")

    @property
    def limit_milli(self) -> int | None:
        return q.pod_limit([c.limit_milli for c in self.containers])

    @property
    def burst_us(self) -> int | None:
        """The pod level's burst budget: the sum of its containers' (as its quota is the sum of their
        limits), only when it has a quota; None when no container asks for one."""
        total = sum(c.burst_us or 0 for c in self.containers)
        return total if total and self.limit_milli is not None else None

    @property
    def request_milli(self) -> int:
        return q.pod_request([c.request_milli for c in self.containers])

    @property
    def qos(self) -> str:
        """Kubernetes QoS class, which decides where kubelet puts the pod's cgroup."""
        return qos_class(
            [((c.request_milli, c.limit_milli), (c.request_memory, c.limit_memory)) for c in self.containers]
        )

    def container(self, name: str) -> Container:
        for c in self.containers:
            if c.name == name:
                return c
        raise KeyError(f"pod {self.name} has no container {name!r}")


def qos_class(containers: list[tuple[tuple[int | None, int | None], tuple[int | None, int | None]]]) -> str:
    """kubelet's GetPodQOS for containers given as ((cpu request, cpu limit), (memory request, memory limit)).

    A request left out defaults to its limit (the API server's defaulting); zero counts as unset.
    BestEffort: no container sets any request or limit. Guaranteed: EVERY container limits
    both cpu and memory, and every request equals its limit. Otherwise Burstable, so a pod
    that sets CPU only, however equal its request and limit, is Burstable.
    """
    any_set = False
    guaranteed = True
    for resources in containers:
        for request, limit in resources:
            request = request or None
            limit = limit or None
            if request is None:
                request = limit
            if request is not None or limit is not None:
                any_set = True
            if limit is None or request != limit:
                guaranteed = False
    if not any_set:
        return "besteffort"
    return "guaranteed" if guaranteed else "burstable"


@dataclass(frozen=True)
class Node:
    """A worker node: which CPUs it owns and which pods it runs.

    `cpus` is a cpuset list ("0-1", "0") or None for every CPU of the host;
    `allocatable_milli` sets the node-level (kubepods) weight as kubelet would;
    `runtime` is the node's container runtime conversion of shares to weights
    (runc-new / runc-old; None: the backend's default), a property of the node as
    on Kubernetes, where the old-runc cluster is another set of nodes.
    `period_us` is the CFS period of every quota on the node (kubelet's node-wide
    cpuCFSQuotaPeriod; None: the kernel's default 100 ms).
    """

    name: str
    pods: tuple[Pod, ...]
    cpus: str | None = None
    allocatable_milli: int | None = None
    runtime: str | None = None
    period_us: int | None = None

    def __post_init__(self) -> None:
        _check_name("node", self.name)
        if self.period_us is not None and not q.MIN_PERIOD_US <= self.period_us <= q.MAX_PERIOD_US:
            raise ValueError(
                f"node {self.name}: a CFS period of {self.period_us} us is outside the kernel's "
                f"[{q.MIN_PERIOD_US}, {q.MAX_PERIOD_US}] us"
            )
        names = [p.name for p in self.pods]
        if len(set(names)) != len(names):
            raise ValueError(f"node {self.name}: pod names repeat: {names}")

    def pod(self, name: str) -> Pod:
        for p in self.pods:
            if p.name == name:
                return p
        raise KeyError(f"node {self.name} has no pod {name!r}")


@dataclass(frozen=True)
class LoadPlacement:
    """Where the load generator runs: outside the node, on CPUs of its own when possible."""

    cpus: str | None = None
    extra: dict = field(default_factory=dict)


def parse_cpuset(spec: str) -> list[int]:
    """'0-2,5' -> [0, 1, 2, 5]; the kernel's list format."""
    cpus: list[int] = []
    for part in spec.strip().split(","):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return sorted(set(cpus))


def format_cpuset(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    cpus = sorted(set(cpus))
    parts: list[str] = []
    start = prev = None
    for cpu in cpus:
        if start is None:
            start = prev = cpu
        elif cpu == prev + 1:
            prev = cpu
        else:
            parts.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = cpu
    if start is not None:
        parts.append(f"{start}-{prev}" if start != prev else str(start))
    return ",".join(parts)
