"""The backend interface: how a placement model becomes running workloads.

Four backends implement it: local, docker, kind and kubernetes (see
docs/ARCHITECTURE.md); `make_backend(name, ...)` makes one by name. An
experiment only ever talks to this interface:

    with backend.deploy(node, load=LoadPlacement(...)) as dep:
        dep.verify()                  # read back every level, compare with the design
        out = dep.run_job("pod", "app", timeout_s=30)
        svc = dep.start("pod", "server")
        addr = dep.wait_for_record(svc, "listening", timeout_s=10)["addr"]
        ...; dep.stop(svc)
        out = dep.run_load(args, timeout_s=90)

Leaving the `with` block removes every process and object the deployment made,
on success, on failure and on interrupt.
"""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from throttlelab.errors import BackendError, DesignMismatch  # noqa: F401 (re-exported: callers import it from here too)
from throttlelab.model.placement import LoadPlacement, Node
from throttlelab.model.coverage import NO_BURST_REASON, NO_PERIOD_REASON
from throttlelab.model.quantities import DEFAULT_PERIOD_US


@dataclass(frozen=True)
class Capabilities:
    """What a backend can express on this host; findings use it for 'not testable here'."""

    cpus: int
    cgroup_version: int | None
    can_pin_cpus: bool
    has_pause_level: bool
    runtime: str
    notes: tuple[str, ...] = ()
    #: the kubelet's cAdvisor can be scraped (`Deployment.monitoring_sample`): E6 then reads it, as
    #: the lab did, instead of emulating it (kind, kubernetes; local and docker have none)
    cadvisor: bool = False
    #: the CPU the lab's pods may request on the worker node: its allocatable CPU less what its other
    #: live pods request (kubelet refuses a pod that does not fit: OutOfcpu); None where no scheduler
    #: refuses anything (local, docker). E4 reads a node smaller than the lab's in several deployments.
    free_cpu_milli: int | None = None


@dataclass
class Output:
    """What one workload process left behind."""

    pod: str
    container: str
    returncode: int | None
    records: list[dict[str, Any]]
    stderr: str
    wall_s: float

    @property
    def source(self) -> str:
        return f"{self.pod}/{self.container}"


def parse_records(stdout: str, source: str) -> list[dict[str, Any]]:
    """JSON lines from a workload; a line that is not JSON is an error naming the source."""
    records = []
    for number, line in enumerate(stdout.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BackendError(
                f"{source}: line {number} of its output is not JSON ({exc.msg}): {line[:120]!r}"
            ) from None
        if not isinstance(record, dict) or "type" not in record:
            raise BackendError(f"{source}: line {number} is not a cpulab record: {line[:120]!r}")
        records.append(record)
    return records


@dataclass
class Readback:
    """One level of the hierarchy: designed versus read back."""

    level: str
    path: str
    design: dict[str, Any]
    actual: dict[str, Any]
    mismatches: list[str] = field(default_factory=list)

    def as_record(self) -> dict[str, Any]:
        return {
            "type": "readback",
            "level": self.level,
            "path": self.path,
            "design": self.design,
            "actual": self.actual,
            "mismatches": self.mismatches,
        }


class Deployment(ABC):
    """A node with its pods, live on a backend; a context manager that cleans up."""

    @abstractmethod
    def __enter__(self) -> "Deployment": ...

    @abstractmethod
    def __exit__(self, *exc: object) -> None: ...

    @abstractmethod
    def verify(self) -> list[Readback]:
        """Read every level back; raise DesignMismatch showing both when they differ."""

    def verify_before_start(self) -> list[Readback]:
        """What is read back before the experiment starts anything: every level by default. A backend whose
        container cgroups exist only while a container runs reads those from the experiment's own
        containers as they start instead, and hands them over in :meth:`readbacks_after`."""
        return self.verify()

    def readbacks_after(self) -> list[Readback]:
        """The levels :meth:`verify_before_start` left to the containers' start, read back (a mismatch raises);
        none by default."""
        return []

    def ancestors(self) -> list[dict[str, Any]]:
        """Informational readings of the levels above the node (none by default)."""
        return []

    @abstractmethod
    def run_job(self, pod: str, container: str, timeout_s: float) -> Output: ...

    @abstractmethod
    def start(self, pod: str, container: str) -> Any: ...

    @abstractmethod
    def stop(self, handle: Any, timeout_s: float = 10.0) -> Output: ...

    @abstractmethod
    def run_load(self, args: list[str], timeout_s: float) -> Output: ...

    @abstractmethod
    def read_stat(self, pod: str, container: str | None = None) -> dict[str, Any]:
        """A pod's (or one container's) counters now: nr_periods, nr_throttled,
        throttled_usec, usage_usec, and `t_ns` (monotonic time of the reading), for
        per-pod deltas and fine-grained sampling while services run."""

    @abstractmethod
    def wait_for_record(self, handle: Any, record_type: str, timeout_s: float) -> dict[str, Any]:
        """The first record of this type a running workload wrote (e.g. serve's
        `listening`, which carries the address to send load to)."""

    def monitoring_sample(self, pod: str, container: str) -> dict[str, Any]:
        """One scrape of the kubelet's cAdvisor for one container, where the backend has one
        (`Capabilities.cadvisor`): cAdvisor's cached counters under their metric names
        (container_cpu_cfs_periods_total, ..._throttled_periods_total, ..._throttled_seconds_total,
        container_cpu_usage_seconds_total) and `t_ms`, cAdvisor's own sample time (Unix ms)."""
        raise BackendError(
            f"{type(self).__name__}: this backend has no cAdvisor to scrape "
            "(E6 emulates one from the container's counters here)"
        )


class Backend(ABC):
    name: str

    @abstractmethod
    def preflight(self) -> None:
        """Fail at once, with what is missing and how to fix it, before any experiment."""

    @abstractmethod
    def capabilities(self) -> Capabilities: ...

    @abstractmethod
    def environment(self) -> dict[str, Any]:
        """Facts for the run's metadata and the report (kernel, versions, runtime...)."""

    @abstractmethod
    def deploy(self, node: Node, load: LoadPlacement | None = None) -> Deployment: ...

    def keep_failure_evidence(self, folder: Path) -> list[str]:
        """After a failed run: write into ``folder`` what explains it on this backend (the pods' events, a
        node's component logs) and return the files written; [] where the backend has nothing to add.
        Never raises: the run's own error is the news."""
        return []

    def leftovers(self) -> list[str]:
        """What the lab's deployments left on this backend's nodes (pods, pinned or paused nodes), one
        line each; [] when nothing is left, or where the backend has no way to look (the smoke test
        of kind and kubernetes checks it after its deployments)."""
        return []


def refuse_knobs(backend: str, node: Node) -> None:
    """A node that asks for a CFS burst budget or period this backend cannot write raises
    BackendError with the reason (model/coverage.py), rather than running with the default."""
    if backend in NO_BURST_REASON and any(c.burst_us for p in node.pods for c in p.containers):
        raise BackendError(f"{backend} backend: {NO_BURST_REASON[backend]}")
    if backend in NO_PERIOD_REASON and node.period_us not in (None, DEFAULT_PERIOD_US):
        raise BackendError(f"{backend} backend: a CFS period of {node.period_us} us: {NO_PERIOD_REASON[backend]}")


# -- the registry ----------------------------------------------------------------------------

#: Backend name -> the module that makes it: each has `from_config(binaries, runtime, settings,
#: progress)`. Imported only when that backend is made, so naming one never loads another's
#: libraries (the Docker SDK, the Kubernetes client).
BACKENDS: dict[str, str] = {
    "local": "throttlelab.backends.local",
    "docker": "throttlelab.backends.docker",
    "kind": "throttlelab.backends.kind.kind_backend",
    "kubernetes": "throttlelab.backends.kube.kube_backend",
    "vm": "throttlelab.backends.vm",
}

#: ``kubernetes: {cluster: local}``: the kubernetes backend on the lab's own node (backends/node).
LOCAL_NODE_BACKEND = "throttlelab.backends.node.node_backend"


#: The kubelet's cAdvisor series E6 reads -> the cgroup counter each is, and the factor to its unit
#: (the backends that scrape cAdvisor ask for these; E6 converts them).
CADVISOR_COUNTERS: dict[str, tuple[str, float]] = {
    "container_cpu_cfs_periods_total": ("nr_periods", 1),
    "container_cpu_cfs_throttled_periods_total": ("nr_throttled", 1),
    "container_cpu_cfs_throttled_seconds_total": ("throttled_usec", 1e6),
    "container_cpu_usage_seconds_total": ("usage_usec", 1e6),
}


def make_backend(
    name: str,
    binaries: Mapping[str, Path],
    runtime: str,
    settings: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] = lambda message: None,
) -> Backend:
    """The backend called `name`. `binaries`: build name -> workload binary (local, docker);
    `runtime`: the conversion of shares to weights the design assumes (runc-new / runc-old);
    `settings`: config.yaml's section of that backend (kind, kubernetes), None for none;
    `progress`: where a long step says it is still going."""
    module = BACKENDS.get(name)
    if name == "kubernetes" and (settings or {}).get("cluster") == "local":
        module = LOCAL_NODE_BACKEND  # the lab's own real node on this host, not an existing cluster
    if module is None:
        raise BackendError(f"backend {name!r} is not implemented; use one of {', '.join(BACKENDS)}")
    make = importlib.import_module(module).from_config
    return make({k: Path(v) for k, v in binaries.items()}, runtime, dict(settings or {}), progress)
