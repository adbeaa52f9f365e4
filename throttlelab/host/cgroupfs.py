"""Direct access to the cgroup filesystem, v1 and v2 behind one small interface.

Paths handed in are relative to the hierarchy root we manage (`base`), e.g.
"throttlelab-123/node/burstable/pod-a/app". Weights are cgroup v2 weights;
the v1 flavour writes them as cpu.shares on the kernel's own scale.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass
from pathlib import Path

from throttlelab.errors import CgroupError  # noqa: F401 (re-exported: callers import it from here too)
from throttlelab.host.mounts import MOUNTINFO, cgroup_hierarchies
from throttlelab.model.quantities import weight_to_v1_shares

CGROUP_ROOT = Path("/sys/fs/cgroup")

#: Called with no argument just before :meth:`CgroupFs.remove_tree` removes a tree, while its counters
#: are still readable: the interference meter reads the lab's CPU time there instead of polling for it.
_before_remove: list = []


def add_removal_listener(listener) -> None:
    _before_remove.append(listener)


def remove_removal_listener(listener) -> None:
    if listener in _before_remove:
        _before_remove.remove(listener)


@dataclass(frozen=True)
class CpuSettings:
    quota_us: int | None
    period_us: int
    weight: int | None  # v2 only
    shares: int | None  # v1 only
    cpus: str | None
    burst_us: int | None = None  # cpu.max.burst (v2) or cpu.cfs_burst_us (v1); None: a kernel before 5.14


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise CgroupError(f"cannot read {path}: {exc.strerror}") from None


def _write(path: Path, value: str) -> None:
    try:
        with open(path, "w") as handle:
            handle.write(value)
    except OSError as exc:
        raise CgroupError(f"cannot write {value!r} to {path}: {exc.strerror}") from None


def _write_burst(path: Path, burst_us: int) -> None:
    if not path.exists():
        raise CgroupError(
            f"cannot write a burst budget of {burst_us} us: {path} does not exist (the CFS burst "
            "budget needs Linux 5.14 or later)"
        )
    _write(path, str(burst_us))


def _read_burst(path: Path) -> int | None:
    """The burst budget in us; None on a kernel without one (the file is absent before 5.14)."""
    return int(_read(path)) if path.exists() else None


def _kv(text: str) -> dict[str, int]:
    """'key value' lines (cpu.stat) -> dict of ints."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


def _rmdir_retry(path: Path, attempts: int = 50) -> None:
    # A killed process leaves its cgroup a moment later than waitpid says; retry EBUSY briefly.
    for _ in range(attempts):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise CgroupError(f"cannot remove {path}: {exc.strerror}") from None
            time.sleep(0.02)
    raise CgroupError(f"cannot remove {path}: still busy (a process is still inside)")


def mounts(mountinfo: Path = Path("/proc/self/mountinfo")) -> dict[str, Path]:
    """Controller name -> mount point for v1 hierarchies, plus 'unified' for cgroup2."""
    found: dict[str, Path] = {}
    for line in mountinfo.read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        fstype, point, options = tail[0], Path(fields[4]), tail[2].split(",")
        if fstype == "cgroup2":
            found.setdefault("unified", point)
        elif fstype == "cgroup":
            for opt in options:
                if opt in ("cpu", "cpuacct", "cpuset"):
                    found.setdefault(opt, point)
    return found


class CgroupFS:
    """Shared walking logic; subclasses know the file names of their version."""

    version: int

    def dirs(self, rel: str) -> list[Path]:
        raise NotImplementedError

    def exists(self, rel: str) -> bool:
        return all(d.is_dir() for d in self.dirs(rel))

    def children(self, rel: str) -> list[str]:
        main = self.dirs(rel)[0]
        if not main.is_dir():
            return []
        return sorted(f"{rel}/{p.name}" if rel else p.name for p in main.iterdir() if p.is_dir())

    def proc_files(self, rel: str) -> list[str]:
        """Files a process writes its pid into to enter this cgroup (every hierarchy)."""
        return [str(d / "cgroup.procs") for d in self.dirs(rel)]

    def pids(self, rel: str) -> set[int]:
        """Every process in this cgroup or below it."""
        found: set[int] = set()
        for top in self.dirs(rel):
            if not top.is_dir():
                continue
            for procs in top.rglob("cgroup.procs"):
                try:
                    found.update(int(x) for x in procs.read_text().split())
                except (OSError, ValueError):
                    continue
        return found

    def remove_tree(self, rel: str) -> None:
        """rmdir bottom-up in every hierarchy; processes must be gone already. The removal listeners
        (:func:`add_removal_listener`) are called first."""
        for listener in list(_before_remove):
            listener()
        for top in self.dirs(rel):
            if not top.is_dir():
                continue
            for sub in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                _rmdir_retry(sub)
            _rmdir_retry(top)

    def create(self, rel: str, cpus: str | None = None) -> None:
        raise NotImplementedError

    def describe(self) -> dict:
        """JSON-able description, so a guardian process can rebuild the same view."""
        raise NotImplementedError

    def write_cpu(
        self, rel: str, quota_us: int | None, period_us: int, weight: int, burst_us: int | None = None
    ) -> None:
        """Quota, period and weight; then the burst budget when one is given (the kernel checks
        it against the quota already written)."""
        raise NotImplementedError

    def read_settings(self, rel: str) -> CpuSettings:
        raise NotImplementedError

    def read_stat(self, rel: str) -> dict[str, int | None]:
        """Normalised counters: nr_periods, nr_throttled, throttled_usec, usage_usec, and nr_bursts,
        burst_usec (None on a kernel without a burst budget)."""
        raise NotImplementedError

    def host_cpus(self) -> str:
        raise NotImplementedError


class CgroupV1(CgroupFS):
    """cgroup v1: separate cpu, cpuacct and cpuset hierarchies (or cpu,cpuacct combined)."""

    version = 1

    def __init__(self, cpu: Path, cpuacct: Path | None, cpuset: Path | None, base: str = ""):
        self.roots = {"cpu": cpu / base if base else cpu}
        if cpuacct is not None and cpuacct != cpu:
            self.roots["cpuacct"] = cpuacct / base if base else cpuacct
        if cpuset is not None:
            self.roots["cpuset"] = cpuset / base if base else cpuset

    def dirs(self, rel: str) -> list[Path]:
        return [root / rel for root in self.roots.values()]

    def describe(self) -> dict:
        return {"version": 1, "roots": {k: str(v) for k, v in self.roots.items()}}

    def create(self, rel: str, cpus: str | None = None) -> None:
        for name, root in self.roots.items():
            path = root / rel
            path.mkdir(exist_ok=True)
            if name == "cpuset":
                # v1 cpusets start empty: a task cannot join until cpus and mems are set.
                _write(path / "cpuset.mems", _read(path.parent / "cpuset.mems"))
                _write(path / "cpuset.cpus", cpus or _read(path.parent / "cpuset.cpus"))

    def write_cpu(
        self, rel: str, quota_us: int | None, period_us: int, weight: int, burst_us: int | None = None
    ) -> None:
        path = self.roots["cpu"] / rel
        _write(path / "cpu.cfs_period_us", str(period_us))
        _write(path / "cpu.cfs_quota_us", str(-1 if quota_us is None else quota_us))
        _write(path / "cpu.shares", str(weight_to_v1_shares(weight)))
        if burst_us is not None:
            _write_burst(path / "cpu.cfs_burst_us", burst_us)

    def read_settings(self, rel: str) -> CpuSettings:
        path = self.roots["cpu"] / rel
        quota = int(_read(path / "cpu.cfs_quota_us"))
        cpus = _read(self.roots["cpuset"] / rel / "cpuset.cpus") if "cpuset" in self.roots else None
        return CpuSettings(
            quota_us=None if quota < 0 else quota,
            period_us=int(_read(path / "cpu.cfs_period_us")),
            weight=None,
            shares=int(_read(path / "cpu.shares")),
            cpus=cpus,
            burst_us=_read_burst(path / "cpu.cfs_burst_us"),
        )

    def read_stat(self, rel: str) -> dict[str, int | None]:
        raw = _kv(_read(self.roots["cpu"] / rel / "cpu.stat"))
        usage = None
        if "cpuacct" in self.roots or (self.roots["cpu"] / rel / "cpuacct.usage").exists():
            acct = self.roots.get("cpuacct", self.roots["cpu"])
            usage = int(_read(acct / rel / "cpuacct.usage")) // 1000
        return {
            "nr_periods": raw.get("nr_periods", 0),
            "nr_throttled": raw.get("nr_throttled", 0),
            "throttled_usec": raw.get("throttled_time", 0) // 1000,
            "usage_usec": usage,
            "nr_bursts": raw.get("nr_bursts"),
            "burst_usec": None if "burst_time" not in raw else raw["burst_time"] // 1000,
        }

    def host_cpus(self) -> str:
        if "cpuset" in self.roots:
            return _read(self.roots["cpuset"] / "cpuset.effective_cpus")
        return _cpus_of_process()


class CgroupV2(CgroupFS):
    """cgroup v2: one unified tree; controllers are enabled per parent."""

    version = 2

    def __init__(self, root: Path, base: str = ""):
        self.root = root / base if base else root

    def dirs(self, rel: str) -> list[Path]:
        return [self.root / rel]

    def describe(self) -> dict:
        return {"version": 2, "root": str(self.root)}

    def _enable_controllers(self, parent: Path) -> None:
        wanted = {"cpu", "cpuset"}
        available = set(_read(parent / "cgroup.controllers").split())
        missing = {"cpu"} - available
        if missing:
            raise CgroupError(
                f"{parent}: the cpu controller is not available here ({parent / 'cgroup.controllers'}); "
                "enable it in the parent's cgroup.subtree_control or delegate it (systemd: Delegate=yes)"
            )
        enabled = set(_read(parent / "cgroup.subtree_control").split())
        missing_here = sorted((wanted & available) - enabled)
        if missing_here:
            _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in missing_here))

    def create(self, rel: str, cpus: str | None = None) -> None:
        path = self.root / rel
        self._enable_controllers(path.parent)
        path.mkdir(exist_ok=True)
        if cpus is not None:
            _write(path / "cpuset.cpus", cpus)

    def write_cpu(
        self, rel: str, quota_us: int | None, period_us: int, weight: int, burst_us: int | None = None
    ) -> None:
        path = self.root / rel
        _write(path / "cpu.max", f"{'max' if quota_us is None else quota_us} {period_us}")
        _write(path / "cpu.weight", str(weight))
        if burst_us is not None:
            _write_burst(path / "cpu.max.burst", burst_us)

    def read_settings(self, rel: str) -> CpuSettings:
        path = self.root / rel
        quota, period = _read(path / "cpu.max").split()
        cpus_file = path / "cpuset.cpus"
        return CpuSettings(
            quota_us=None if quota == "max" else int(quota),
            period_us=int(period),
            weight=int(_read(path / "cpu.weight")),
            shares=None,
            cpus=(_read(cpus_file) or None) if cpus_file.exists() else None,
            burst_us=_read_burst(path / "cpu.max.burst"),
        )

    def read_stat(self, rel: str) -> dict[str, int | None]:
        raw = _kv(_read(self.root / rel / "cpu.stat"))
        return {
            "nr_periods": raw.get("nr_periods", 0),
            "nr_throttled": raw.get("nr_throttled", 0),
            "throttled_usec": raw.get("throttled_usec", 0),
            "usage_usec": raw.get("usage_usec"),
            "nr_bursts": raw.get("nr_bursts"),
            "burst_usec": raw.get("burst_usec"),
        }

    def host_cpus(self) -> str:
        effective = self.root / "cpuset.cpus.effective"
        return _read(effective) if effective.exists() else _cpus_of_process()


def _cpus_of_process() -> str:
    from throttlelab.model.placement import format_cpuset

    return format_cpuset(sorted(os.sched_getaffinity(0)))


def detect(root: Path = CGROUP_ROOT, mountinfo: Path = Path("/proc/self/mountinfo")) -> CgroupFS:
    """The cgroup flavour that holds the cpu controller on this host."""
    found = mounts(mountinfo)
    if "cpu" in found:
        return CgroupV1(found["cpu"], found.get("cpuacct"), found.get("cpuset"))
    if "unified" in found and (found["unified"] / "cgroup.controllers").exists():
        return CgroupV2(found["unified"])
    if (root / "cgroup.controllers").exists():
        return CgroupV2(root)
    raise CgroupError(
        "no cgroup cpu controller found (neither a v1 'cpu' mount nor cgroup v2) in "
        f"{mountinfo}; the local backend needs one: mount cgroups or use backend=docker"
    )


def from_description(desc: dict) -> CgroupFS:
    """Inverse of CgroupFS.describe()."""
    if desc["version"] == 2:
        return CgroupV2(Path(desc["root"]))
    roots = {k: Path(v) for k, v in desc["roots"].items()}
    return CgroupV1(roots["cpu"], roots.get("cpuacct"), roots.get("cpuset"))


def all_hierarchies(fs: CgroupFS, mountinfo: Path = MOUNTINFO) -> CgroupFS:
    """The lab's cgroup view plus every other hierarchy mounted here.

    On cgroup v1, runc creates a container's parents in EVERY hierarchy (memory,
    pids, the named systemd one, and the unified one of a hybrid setup), so
    removing a run of the docker backend must walk them all. cgroup v2 is one tree already.
    """
    if not isinstance(fs, CgroupV1):
        return fs
    full = CgroupV1(fs.roots["cpu"], fs.roots.get("cpuacct"), fs.roots.get("cpuset"))
    known = set(full.roots.values())
    for point in cgroup_hierarchies(mountinfo):
        if point not in known and point.is_dir():
            full.roots[f"other:{point}"] = point
            known.add(point)
    return full


def all_hierarchies_from_description(desc: dict) -> CgroupFS:
    """Inverse of all_hierarchies(...).describe(), keeping the extra hierarchies."""
    fs = from_description(desc)
    if isinstance(fs, CgroupV1):
        fs.roots.update({k: Path(v) for k, v in desc["roots"].items() if k not in fs.roots})
    return fs
