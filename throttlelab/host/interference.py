"""How much CPU other work on this host took from a run's CPUs while it measured.

A run is measured on some CPUs (the node's cpuset and the load generator's, or
every CPU the runner may use). Any CPU time spent on them by processes outside
the lab during the run's window is interference: it delays the workload and the
generator, and a verdict must not hang on such a run (docs/STATISTICS.md §2, §6).

The meter samples at start(), just before the runner removes a cgroup tree
(``cgroupfs.add_removal_listener``: a removed cgroup's counters are gone), every
``interval_s`` (1 s: a safety net, cheap; the meter is the runner's own work and
must not disturb what it measures) and at stop():
- the busy time of each of the run's CPUs (``/proc/stat``: user, nice, system,
  irq, softirq and steal; steal counts, since the hypervisor took the CPU);
- the CPU time of the lab's own cgroups of this runner (``throttlelab-<pid>-*``
  at the top of the cpuacct hierarchy on v1, per CPU; of the unified hierarchy
  on v2, in total), summed over consecutive samples: a cgroup made inside the
  window counts from its creation, and one removed inside it is read just before
  (removed by another process, it would lose at most one interval of its time);
- the runner's own CPU time (``os.times``) and that of the guardians it reaped
  inside the window (``processes.guardians_cpu_s``), kept apart: the lab's too.

- the orchestrator's CPU time: the Snakemake process that started the runner
  (``THROTTLELAB_ORCHESTRATOR_PID``, exported by the rules' shell prelude) and
  its other children (the job's shell, ``tee``), not the runner's own subtree:
  each process's CPU clock (nanoseconds, every thread) at start() and stop().

- the interrupt and softirq time of the run's CPUs (``/proc/stat``'s irq and softirq): the lab's own
  (its loopback traffic between the load generator and the services is softirq work the kernel
  accounts to no cgroup), so it is counted with the lab (``irq_s``), not as interference.

Only the workload's busy intervals weigh (docs/STATISTICS.md §2): an experiment marks them with
``Context.busy`` (the load generator's run, a burst job's rounds), the meter takes a snapshot of
every counter at each mark, and the judged figures are summed over the marked intervals; deploying,
reading back and tearing down are metered over the whole attempt (``attempt_*``) but not judged. An
experiment that marks nothing is judged over the whole attempt (``judged: attempt``).

- the runtime's CPU time: the processes of the backend's runtime that the lab does not own (the Docker
  engine, containerd and its shims: ``model/calibration.RUNTIME_PROCESSES``), found by their command name
  at every snapshot, each process's CPU clock as for the orchestrator; one that started inside an interval
  counts from its start.
- the kernel's threads' CPU time (kthreadd's children: workqueues, softirq, RCU), the same way: the
  work the kernel does for the lab and its runtime (writing back the engine's files, freeing the cgroups
  the lab removes) runs there, charged to no cgroup and no process of theirs.

``outside = busy(run CPUs) - lab - irq - runner`` is every process's time on the run's CPUs that is not
the lab's. A run is judged by ``other``: the outside time less what the lab's own system used above its
idle level, the orchestrator (it starts and waits on the runner), the runtime (it starts, stops and
accounts the lab's containers) and the kernel's threads. Their idle levels come from the quiet-host
calibration, which sampled the host with them up and idle, so their idle noise is in the threshold's
floor and only their work beyond it is taken out. Their times are per process, not per CPU: where they
may run on CPUs outside the run's (their affinity is wider: ``orchestrator_apart``, ``runtime_apart``,
``kernel_apart`` false), what is taken out is all of their time above idle, an upper bound of their part
on the run's CPUs, and the record says so; ``outside_share`` keeps the plain figure beside it. Busy
time is in clock ticks (USER_HZ, 10 ms here), so small values are coarse: the threshold is never below
what a window's tick count can tell from zero (``model/calibration.tick_resolution``).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from throttlelab.host import cgroupfs, processes
from throttlelab.model.calibration import OWN_SYSTEM

PROC_STAT = Path("/proc/stat")
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (idle 3, iowait 4 are not busy)
_IRQ_FIELDS = (5, 6)  # irq softirq: the lab's own interrupt work (its loopback traffic)


def _ticks_per_cpu(text: str, fields: tuple[int, ...]) -> dict[int, int]:
    """CPU number -> the sum of ``fields`` (indices into the counters after the name) of /proc/stat's
    ``cpuN`` lines; a field the kernel does not print counts 0."""
    ticks = {}
    for line in text.splitlines():
        match = re.match(r"^cpu(\d+)\s+(.*)$", line)
        if match:
            values = [int(v) for v in match[2].split()]
            ticks[int(match[1])] = sum(values[i] for i in fields if i < len(values))
    return ticks


def parse_proc_stat(text: str) -> dict[int, int]:
    """CPU number -> busy clock ticks since boot, from /proc/stat's ``cpuN`` lines."""
    return _ticks_per_cpu(text, _BUSY_FIELDS)


def parse_proc_irq(text: str) -> dict[int, int]:
    """CPU number -> interrupt and softirq clock ticks since boot, from /proc/stat's ``cpuN`` lines."""
    return _ticks_per_cpu(text, _IRQ_FIELDS)


def parse_usage_percpu(text: str) -> dict[int, int]:
    """cpuacct.usage_percpu (v1): CPU number -> nanoseconds."""
    return {cpu: int(v) for cpu, v in enumerate(text.split())}


@dataclass(frozen=True)
class Interference:
    """What the meter saw over one run's judged window (its busy intervals, else the whole attempt)."""

    cpus: tuple[int, ...]
    window_s: float
    busy_s: float  # every process's CPU time on the run's CPUs
    lab_s: float  # the lab's own cgroups (workload, load generator)
    runner_s: float  # the runner process itself (deploying, sampling counters)
    outside_s: float  # everything but the lab and the runner: interference, what a run is judged by
    lab_scope: str  # "per-cpu" (v1 cpuacct), "total" (v2) or "none" (no lab cgroup readable)
    # the orchestrator's CPU time (Snakemake and its children but the runner; on any CPU), None when the
    # runner was not started by the rules; apart: whether it could only run on the run's CPUs
    orchestrator_s: float | None = None
    orchestrator_apart: bool = False
    irq_s: float = 0.0  # interrupt and softirq time on the run's CPUs: the lab's own (its loopback traffic)
    judged: str = "attempt"  # "busy intervals" (the workload's, marked by the experiment) or "attempt"
    intervals: int = 0  # how many busy intervals were marked
    attempt_window_s: float | None = None  # the whole attempt, metered (deploy, read-back, teardown too)
    attempt_outside_s: float | None = None
    # the runtime's CPU time (the backend's engine and shims; on any CPU), None where the backend names none;
    # apart: whether all of it could only run on the run's CPUs
    runtime_s: float | None = None
    runtime_apart: bool = False
    runtime_by: str | None = None  # how it was read: RuntimeCounter.by
    # the kernel's threads' CPU time (on any CPU), None where they were not metered
    kernel_s: float | None = None
    kernel_apart: bool = False
    # the CPUs the orchestrator, the runtime and the kernel's threads took on the quiet host, by name
    # (model/calibration.idle_levels); a name missing is 0
    idle_cpu: Mapping[str, float] = field(default_factory=dict)

    def _share(self, seconds: float, window_s: float | None = None) -> float:
        capacity = (self.window_s if window_s is None else window_s) * len(self.cpus)
        return seconds / capacity if capacity > 0 else 0.0

    def _excess_s(self, seconds: float | None, idle_cpu: float) -> float:
        """What a process group of the lab's own system used above its calibrated idle level."""
        return 0.0 if seconds is None else max(0.0, seconds - idle_cpu * self.window_s)

    def excess_s(self, who: str) -> float:
        """What one part of the lab's own system (``orchestrator``, ``runtime``, ``kernel``) used above its
        idle level."""
        return self._excess_s(getattr(self, f"{who}_s"), float(self.idle_cpu.get(who, 0.0)))

    @property
    def other_s(self) -> float:
        """Interference by processes that are neither the lab nor its own system (the orchestrator, the
        runtime, the kernel's threads) above their idle levels: what a run is judged by."""
        return max(0.0, self.outside_s - sum(self.excess_s(who) for who in OWN_SYSTEM))

    @property
    def outside_share(self) -> float:
        """Interference (the orchestrator's included) as a share of the window's capacity on the run's CPUs."""
        return self._share(self.outside_s)

    @property
    def other_share(self) -> float:
        """The part of :attr:`outside_share` that is not the lab's own system's work: what a run is judged by."""
        return self._share(self.other_s)

    def cpu(self, who: str) -> float | None:
        """One part of the lab's own system's CPU time over the window, in CPUs (None: not metered)."""
        seconds = getattr(self, f"{who}_s")
        if seconds is None or self.window_s <= 0:
            return None
        return seconds / self.window_s

    @property
    def orchestrator_cpu(self) -> float | None:
        """The orchestrator's CPU time over the window, in CPUs (0.01: 1% of one CPU)."""
        return self.cpu("orchestrator")

    def as_record(self, threshold: float, rule: dict | None = None) -> dict:
        """The record of the attempt, judged against ``threshold``; ``rule``: how that threshold was found
        (model/calibration.threshold_of: the quiet host's floor and SD over this window, or fixed)."""
        orchestrator = (
            {"orchestrator_s": None, "orchestrator_note": "not started by the rules' orchestrator"}
            if self.orchestrator_s is None
            else {
                "orchestrator_s": round(self.orchestrator_s, 4),
                "orchestrator_cpu": round(self.orchestrator_cpu or 0.0, 4),
                "orchestrator_apart": self.orchestrator_apart,
            }
        )
        system = {
            key: value
            for who in ("runtime", "kernel")
            if getattr(self, f"{who}_s") is not None
            for key, value in (
                (f"{who}_s", round(getattr(self, f"{who}_s"), 4)),
                (f"{who}_cpu", round(self.cpu(who) or 0.0, 4)),
                (f"{who}_apart", getattr(self, f"{who}_apart")),
            )
        }
        if self.runtime_s is not None and self.runtime_by is not None:
            system["runtime_by"] = self.runtime_by
        attempt = {}
        if self.attempt_window_s is not None and self.attempt_outside_s is not None:
            attempt = {
                "attempt_window_s": round(self.attempt_window_s, 3),
                "attempt_outside_share": round(self._share(self.attempt_outside_s, self.attempt_window_s), 4),
            }
        return {
            "cpus": list(self.cpus),
            "window_s": round(self.window_s, 3),
            "busy_s": round(self.busy_s, 3),
            "lab_s": round(self.lab_s, 3),
            "irq_s": round(self.irq_s, 3),
            "runner_s": round(self.runner_s, 3),
            "outside_s": round(self.outside_s, 3),
            "outside_share": round(self.outside_share, 4),
            "other_s": round(self.other_s, 3),
            "other_share": round(self.other_share, 4),
            **orchestrator,
            **system,
            "idle_cpu": {who: float(self.idle_cpu.get(who, 0.0)) for who in OWN_SYSTEM},
            "lab_scope": self.lab_scope,
            "judged": self.judged,
            "intervals": self.intervals,
            **attempt,
            "threshold": threshold,
            **({"threshold_rule": dict(rule)} if rule else {}),
            "disturbed": self.other_share > threshold,
        }


def usage_usec_v2(folder: Path) -> int:
    """A v2 cgroup's CPU time so far, its children's included (``cpu.stat``'s usage_usec)."""
    stat = dict(line.split() for line in (folder / "cpu.stat").read_text().splitlines() if line)
    return int(stat["usage_usec"])


def grown_s(before: Mapping[int | str, float], after: Mapping[int | str, float]) -> float:
    """What running totals (CPU clocks, cgroup usages) grew by between two readings; one absent before
    started in between and counts from zero."""
    return sum(max(0.0, now - before.get(key, 0.0)) for key, now in after.items())


class RuntimeCounter:
    """The runtime's CPU time, read as one running total per source.

    A runtime starts short-lived helpers for every container (``runc create``, ``start``, ``delete``; the
    shim's own start): they come and go between two snapshots, so their CPU time is lost to a reading of
    the processes alive at each snapshot (about half of the engine's work per short container, measured).
    A cgroup keeps it: a cgroup's usage counts its processes' children, ended ones too. So every
    daemon found by name whose cgroup is the runtime's own (not the root; nothing in it but the runtime's
    processes and their children; no child cgroup that could hold someone else's work) is read through that
    cgroup (key ``"cgroup:<path>"``); any other is read through its own CPU clock (key: its pid), as are the
    ones found later. The cgroups are chosen once, at :meth:`find`."""

    def __init__(
        self,
        names: tuple[str, ...] | frozenset[str],
        proc: Path = Path("/proc"),
        hierarchy: Path | None = None,
        unified: bool = False,
    ):
        self.names = frozenset(names)
        self.proc = proc
        self.hierarchy = hierarchy  # v1: the cpuacct mount; v2: the unified mount
        self.unified = unified
        self.cgroups: dict[str, Path] = {}  # cgroup path -> its folder, the runtime's own
        self._outside_cgroups = False  # whether some daemon was read through its own clock
        self._path_of: dict[int, str | None] = {}  # daemon -> its cgroup path, read once per daemon

    @classmethod
    def on_this_host(cls, names, proc: Path = Path("/proc"), mountinfo: Path = Path("/proc/self/mountinfo")):
        found = cgroupfs.mounts(mountinfo)
        if found.get("cpuacct") is not None:
            return cls(names, proc, found["cpuacct"], unified=False)
        return cls(names, proc, found.get("unified"), unified=found.get("unified") is not None)

    @property
    def by(self) -> str:
        """How the runtime was read: ``cgroup`` (every daemon through its own cgroup), ``processes`` (none)
        or ``cgroup and processes``."""
        if not self.cgroups:
            return "processes"
        return "cgroup" if not self._outside_cgroups else "cgroup and processes"

    def _cgroup_of(self, pid: int) -> str | None:
        """A daemon's cgroup path in the hierarchy read (a daemon does not move: read once)."""
        if pid not in self._path_of:
            self._path_of[pid] = None
            try:
                text = (self.proc / str(pid) / "cgroup").read_text()
            except OSError:
                return None
            for line in text.splitlines():
                _, controllers, path = line.split(":", 2)
                if (self.unified and controllers == "") or (not self.unified and "cpuacct" in controllers.split(",")):
                    self._path_of[pid] = path
                    break
        return self._path_of[pid]

    def _own(self, path: str, daemons: set[int], parents: dict[int, int]) -> Path | None:
        """The folder of ``path`` when it is the runtime's own cgroup, else None."""
        if self.hierarchy is None or path in ("", "/"):
            return None
        folder = self.hierarchy / path.lstrip("/")
        try:
            members = [int(x) for x in (folder / "cgroup.procs").read_text().split()]
            nested = any(child.is_dir() for child in folder.iterdir())
        except (OSError, ValueError):
            return None
        if nested:
            return None

        def the_runtimes(pid: int) -> bool:
            seen = 0
            while pid > 1 and seen < 64:
                if pid in daemons:
                    return True
                pid, seen = parents.get(pid, 0), seen + 1
            return False

        return folder if all(the_runtimes(pid) for pid in members) else None

    def find(self, tasks: list[tuple[int, str, int]]) -> None:
        """Choose the cgroups to read (once, before the first reading)."""
        daemons = {pid for pid, comm, _ in tasks if comm in self.names}
        parents = {pid: parent for pid, _, parent in tasks}
        self.cgroups = {}
        for pid in sorted(daemons):
            path = self._cgroup_of(pid)
            if path is not None and path not in self.cgroups:
                folder = self._own(path, daemons, parents)
                if folder is not None:
                    self.cgroups[path] = folder

    def _usage_s(self, folder: Path) -> float | None:
        try:
            if self.unified:
                return usage_usec_v2(folder) / 1e6
            return int((folder / "cpuacct.usage").read_text()) / 1e9
        except (OSError, KeyError, ValueError):
            return None

    def clocks(self, tasks: list[tuple[int, str, int]]) -> dict[int | str, float]:
        """The running totals now: one per chosen cgroup, one per daemon outside them."""
        out: dict[int | str, float] = {}
        for path, folder in self.cgroups.items():
            usage = self._usage_s(folder)
            if usage is not None:
                out[f"cgroup:{path}"] = usage
        for pid, comm, _ in tasks:
            if comm not in self.names:
                continue
            if self.cgroups and self._cgroup_of(pid) in self.cgroups:
                continue
            clock = processes.cpu_clock_s(pid)
            if clock is not None:
                out[pid] = clock
                self._outside_cgroups = True
        return out

    def pids(self, tasks: list[tuple[int, str, int]]) -> set[int]:
        """The daemons by name (their CPU affinity says whether the runtime is apart)."""
        return {pid for pid, comm, _ in tasks if comm in self.names}


@dataclass(frozen=True)
class Snapshot:
    """Every counter the meter reads, at one instant."""

    t: float
    busy: dict[int, int]  # ticks per CPU
    irq: dict[int, int]  # interrupt and softirq ticks per CPU
    lab_ns: int  # the lab's cgroups, accumulated since start()
    own_s: float  # the runner's and its reaped guardians' CPU
    orchestrator: dict[int, float]  # process -> CPU clock
    runtime: dict[int | str, float]  # the runtime's running totals (RuntimeCounter.clocks)
    kernel: dict[int, float]  # kernel thread -> CPU clock


class InterferenceMeter:
    """Samples the run's CPUs in a background thread between start() and stop(); :meth:`busy` marks the
    workload's busy intervals, the only ones judged."""

    def __init__(
        self,
        cpus: list[int],
        runner_pid: int | None = None,
        interval_s: float = 1.0,
        proc_stat: Path = PROC_STAT,
        mountinfo: Path = Path("/proc/self/mountinfo"),
        orchestrator_pid: int | None = None,
        runtime_names: tuple[str, ...] = (),
        kernel: bool = False,
        idle_cpu: Mapping[str, float] | None = None,
        proc: Path = Path("/proc"),
    ):
        self.cpus = tuple(sorted(set(cpus)))
        self.runtime_names = frozenset(runtime_names)
        self.kernel = kernel
        self.idle_cpu = dict(idle_cpu or {})
        self.proc = proc
        self._pids: dict[str, set[int]] = {"runtime": set(), "kernel": set()}
        self.orchestrator_pid = orchestrator_pid
        self._orchestrator_pids: list[int] = []
        self.prefix = f"throttlelab-{runner_pid if runner_pid is not None else os.getpid()}-"
        self.interval_s = interval_s
        self.proc_stat = proc_stat
        found = cgroupfs.mounts(mountinfo)
        self.v1_acct = found.get("cpuacct")
        self.unified = None if self.v1_acct else found.get("unified")
        self.runtime = (
            RuntimeCounter(runtime_names, proc, self.v1_acct or self.unified, unified=self.v1_acct is None)
            if runtime_names
            else None
        )
        self.ticks = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._lab_ns = 0
        self._last: dict[str, int] = {}
        self._scope = "none"
        self._start: Snapshot | None = None
        self._open: Snapshot | None = None
        self._intervals: list[tuple[Snapshot, Snapshot]] = []
        self._last_clock: dict[int, float] = {}

    # -- one sample of the lab's own cgroups: directory -> ns on the run's CPUs
    def _lab_sample(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if self.v1_acct is not None:
            for d in self.v1_acct.glob(self.prefix + "*"):
                try:
                    per_cpu = parse_usage_percpu((d / "cpuacct.usage_percpu").read_text())
                except OSError:
                    continue
                out[d.name] = sum(ns for cpu, ns in per_cpu.items() if cpu in self.cpus)
                self._scope = "per-cpu"
        elif self.unified is not None:
            for d in self.unified.glob(self.prefix + "*"):
                try:
                    out[d.name] = usage_usec_v2(d) * 1000
                except (OSError, KeyError, ValueError):
                    continue
                self._scope = "total"
        return out

    def _accumulate(self) -> None:
        now = self._lab_sample()
        for name, ns in now.items():
            before = self._last.get(name)
            if before is None:
                # made inside the window (the ones there at start() are the baseline): all its time is
                # the lab's, from its creation on
                self._lab_ns += ns
            elif ns >= before:
                self._lab_ns += ns - before
        self._last = now

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        with self._lock:  # the loop's thread and a removal in the runner's
            self._accumulate()

    def _snapshot(self) -> Snapshot:
        with self._lock:
            self._accumulate()
            lab_ns = self._lab_ns
        text = self.proc_stat.read_text()
        return Snapshot(
            time.monotonic(),
            parse_proc_stat(text),
            parse_proc_irq(text),
            lab_ns,
            _own_cpu_s(),
            self._clocks(),
            *self._system_clocks(),
        )

    def start(self) -> None:
        self._last = self._lab_sample()
        if self.runtime is not None:
            self.runtime.find(processes.scan(self.proc))
        self._orchestrator_pids = self._orchestrator_tree()
        self._start = Snapshot(
            time.monotonic(),
            *(lambda text: (parse_proc_stat(text), parse_proc_irq(text)))(self.proc_stat.read_text()),
            0,
            _own_cpu_s(),
            self._clocks(),
            *self._system_clocks(),
        )
        cgroupfs.add_removal_listener(self._sample)
        self._thread = threading.Thread(target=self._loop, name="interference-meter", daemon=True)
        self._thread.start()

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Mark one busy interval of the workload (nested or repeated marks add intervals, never overlap)."""
        if self._start is None or self._open is not None:
            yield
            return
        self._open = self._snapshot()
        try:
            yield
        finally:
            opened, self._open = self._open, None
            self._intervals.append((opened, self._snapshot()))

    def stop(self) -> Interference:
        cgroupfs.remove_removal_listener(self._sample)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        end = self._snapshot()
        assert self._start is not None, "stop() before start()"
        whole = self._over([(self._start, end)])
        judged = self._over(self._intervals) if self._intervals else whole
        orchestrator_s = judged["orchestrator_s"]
        return Interference(
            self.cpus,
            judged["window_s"],
            judged["busy_s"],
            judged["lab_s"],
            judged["runner_s"],
            judged["outside_s"],
            self._scope,
            orchestrator_s,
            orchestrator_s is not None and self._orchestrator_confined(),
            irq_s=judged["irq_s"],
            judged="busy intervals" if self._intervals else "attempt",
            intervals=len(self._intervals),
            attempt_window_s=whole["window_s"],
            attempt_outside_s=whole["outside_s"],
            runtime_s=judged["runtime_s"],
            runtime_apart=self._confined("runtime"),
            runtime_by=None if self.runtime is None else self.runtime.by,
            kernel_s=judged["kernel_s"],
            kernel_apart=self._confined("kernel"),
            idle_cpu=self.idle_cpu,
        )

    def _over(self, intervals: list[tuple[Snapshot, Snapshot]]) -> dict:
        """The meter's figures summed over some intervals between snapshots."""
        out = dict.fromkeys(("window_s", "busy_s", "irq_s", "lab_s", "runner_s"), 0.0)
        orchestrator = runtime = kernel = 0.0
        for a, b in intervals:
            out["window_s"] += b.t - a.t
            out["busy_s"] += sum(b.busy.get(c, 0) - a.busy.get(c, 0) for c in self.cpus) / self.ticks
            out["irq_s"] += sum(b.irq.get(c, 0) - a.irq.get(c, 0) for c in self.cpus) / self.ticks
            out["lab_s"] += (b.lab_ns - a.lab_ns) / 1e9
            out["runner_s"] += b.own_s - a.own_s
            orchestrator += sum(max(0.0, b.orchestrator[p] - a.orchestrator[p]) for p in a.orchestrator)
            # a runtime process absent at ``a`` started after it (every snapshot looks for new ones)
            runtime += grown_s(a.runtime, b.runtime)
            kernel += grown_s(a.kernel, b.kernel)
        out["outside_s"] = max(0.0, out["busy_s"] - out["lab_s"] - out["irq_s"] - out["runner_s"])
        out["orchestrator_s"] = orchestrator if self._orchestrator_pids else None
        out["runtime_s"] = runtime if self.runtime_names else None
        out["kernel_s"] = kernel if self.kernel else None
        return out

    # -- the orchestrator: Snakemake's process tree less this runner's subtree, per process
    def _orchestrator_tree(self) -> list[int]:
        if self.orchestrator_pid is None:
            return []
        pids = processes.tree_without(self.orchestrator_pid, os.getpid(), processes.parent_pids())
        return [pid for pid in pids if processes.cpu_clock_s(pid) is not None]

    def _clocks(self) -> dict[int, float]:
        """The CPU clock of each process of the orchestrator's tree found at start(); one that ended keeps
        its last reading (it loses its time since then)."""
        for pid in self._orchestrator_pids:
            now = processes.cpu_clock_s(pid)
            if now is not None:
                self._last_clock[pid] = now
        return {pid: self._last_clock[pid] for pid in self._orchestrator_pids if pid in self._last_clock}

    def _orchestrator_confined(self) -> bool:
        try:
            return set(os.sched_getaffinity(self.orchestrator_pid)) <= set(self.cpus)
        except OSError:
            return False

    # -- the runtime's processes (by name) and the kernel's threads, found again at every snapshot
    def _system_clocks(self) -> tuple[dict[int, float], dict[int, float]]:
        if self.runtime is None and not self.kernel:
            return {}, {}
        tasks = processes.scan(self.proc)
        runtime: dict[int | str, float] = {}
        if self.runtime is not None:
            runtime = self.runtime.clocks(tasks)
            self._pids["runtime"] = self.runtime.pids(tasks)
        kernel = {}
        if self.kernel:
            threads = processes.kernel_threads(tasks=tasks)
            kernel = {pid: clock for pid in threads if (clock := processes.cpu_clock_s(pid)) is not None}
            self._pids["kernel"] = set(kernel)
        return runtime, kernel

    def _confined(self, who: str) -> bool:
        """Whether every process of that part of the lab's own system may run on the run's CPUs only."""
        try:
            return all(set(os.sched_getaffinity(pid)) <= set(self.cpus) for pid in self._pids[who])
        except OSError:
            return False


def orchestrator_named(environ: dict[str, str] | None = None) -> int | None:
    """The pid the rules exported as THROTTLELAB_ORCHESTRATOR_PID, alive or not (None: not started by them)."""
    value = (os.environ if environ is None else environ).get("THROTTLELAB_ORCHESTRATOR_PID", "")
    return int(value) if value.isdigit() else None


def orchestrator_from_env(environ: dict[str, str] | None = None) -> int | None:
    """The orchestrator that started this runner (the rules export THROTTLELAB_ORCHESTRATOR_PID), if alive."""
    pid = orchestrator_named(environ)
    return pid if pid is not None and processes.pid_alive(pid) else None


def _own_cpu_s() -> float:
    """The runner's CPU time and its guardians' (processes.wait_guardian): both are the lab's."""
    t = os.times()
    return t.user + t.system + processes.guardians_cpu_s()


def busy_share(cpus: list[int], window_s: float = 1.0, proc_stat: Path = PROC_STAT) -> float:
    """The share of ``cpus``' capacity that processes other than this one used over the next
    ``window_s`` (nothing of the lab runs then: it is all other work)."""
    before, own = parse_proc_stat(proc_stat.read_text()), _own_cpu_s()
    t0 = time.monotonic()
    time.sleep(window_s)
    after, own_after = parse_proc_stat(proc_stat.read_text()), _own_cpu_s()
    elapsed = time.monotonic() - t0
    busy_s = sum(after.get(c, 0) - before.get(c, 0) for c in cpus) / os.sysconf("SC_CLK_TCK")
    return max(0.0, busy_s - (own_after - own)) / (elapsed * max(1, len(cpus)))


def wait_for_quiet(
    cpus: list[int], threshold: float, timeout_s: float = 60.0, window_s: float = 1.0, proc_stat: Path = PROC_STAT
) -> tuple[bool, float]:
    """Between attempts (nothing of the lab runs): wait until other processes use at most
    ``threshold`` of ``cpus`` over one ``window_s`` window, at most ``timeout_s``. Returns whether the
    host got quiet and how long it took, so a retry is not measured inside the same disturbance."""
    started = time.monotonic()
    while True:
        share = busy_share(cpus, window_s, proc_stat)
        waited = time.monotonic() - started
        if share <= threshold:
            return True, waited
        if waited >= timeout_s:
            return False, waited


def quiet_ticks(
    duration_s: float,
    step_s: float = 0.1,
    proc_stat: Path = PROC_STAT,
    runtime_names: tuple[str, ...] = (),
    orchestrator_pid: int | None = None,
    kernel: bool = False,
) -> dict:
    """A quiet host's busy clock ticks, every CPU, every ``step_s`` for ``duration_s`` (the calibration step:
    nothing of the lab runs meanwhile). Returns the model's calibration input (model/calibration.quiet_threshold):
    ``step_s``, ``hz``, ``ticks`` (one row per step: busy ticks of CPU 0, 1, ...), this process's own CPU
    over it (``own_s``: the sampling's cost, which the rows include), and ``own``: the CPUs that the lab's own
    system took meanwhile, their idle levels (model/calibration.idle_levels): the orchestrator
    (``orchestrator_pid``'s tree but this process), the runtime's processes (``runtime_names``) and, with
    ``kernel``, the kernel's threads; None for a part not metered."""
    steps = max(2, int(round(duration_s / step_s)))
    tasks = processes.scan()
    groups = {
        "orchestrator": []
        if orchestrator_pid is None
        else processes.tree_without(orchestrator_pid, os.getpid(), processes.parent_pids()),
        "kernel": processes.kernel_threads(tasks=tasks) if kernel else None,
    }
    clocks0 = {pid: processes.cpu_clock_s(pid) for pids in groups.values() for pid in pids or ()}
    runtime = RuntimeCounter.on_this_host(runtime_names) if runtime_names else None
    if runtime is not None:
        runtime.find(tasks)
        runtime0 = runtime.clocks(tasks)
    own0 = _own_cpu_s()
    before = parse_proc_stat(proc_stat.read_text())
    cpus = range(max(before) + 1) if before else range(0)
    rows = []
    started = next_at = time.monotonic()
    for _ in range(steps):
        next_at += step_s
        time.sleep(max(0.0, next_at - time.monotonic()))
        now = parse_proc_stat(proc_stat.read_text())
        rows.append([now.get(c, 0) - before.get(c, 0) for c in cpus])
        before = now
    elapsed = time.monotonic() - started
    clocks1 = {pid: processes.cpu_clock_s(pid) for pid in clocks0}
    runtime1 = runtime.clocks(processes.scan()) if runtime is not None else {}

    def cpu(pids: list[int]) -> float:
        used = sum(clocks1[p] - clocks0[p] for p in pids if clocks0[p] is not None and clocks1[p] is not None)
        return round(max(0.0, used) / elapsed, 5) if elapsed > 0 else 0.0

    # None: not metered (no orchestrator started this process, no runtime named, the kernel not asked for)
    own: dict[str, float | int | str | None] = {
        f"{who}_cpu": None if pids is None or (who == "orchestrator" and not pids) else cpu(pids)
        for who, pids in groups.items()
    }
    own["runtime_cpu"] = None
    if runtime is not None:
        used = grown_s(runtime0, runtime1)
        own["runtime_cpu"] = round(used / elapsed, 5) if elapsed > 0 else 0.0
        own["runtime_processes"] = len(runtime.pids(tasks))
        own["runtime_by"] = runtime.by
    return {
        "step_s": step_s,
        "hz": os.sysconf("SC_CLK_TCK"),
        "ticks": rows,
        "own_s": round(_own_cpu_s() - own0, 4),
        "own": own,
    }
