"""The cgroup tree the lab writes itself on this host, for the local and docker backends.

A run is `throttlelab-<pid>-<n>` (host.reaper.run_name) holding the node level,
its QoS levels and pods with the values of model/node_levels.py, and `loadgen` for
the load generator. The local backend writes every level down to the
containers; the docker backend writes the levels above the containers and lets
Docker make those. Both read the levels back here and compare them with the
design the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from throttlelab.errors import BackendError, DesignMismatch
from throttlelab.host import cgroupfs
from throttlelab.model.node_levels import LevelDesign
from throttlelab.model.placement import LoadPlacement, Node, format_cpuset, parse_cpuset
from throttlelab.model.quantities import weight_to_v1_shares
from throttlelab.backends.base import Backend, Readback

SETTINGS = ("quota_us", "period_us", "burst_us", "weight", "shares", "cpus")


def detect_fs() -> cgroupfs.CgroupFS:
    """This host's cgroup flavour; none usable is a BackendError saying why."""
    try:
        return cgroupfs.detect()
    except cgroupfs.CgroupError as exc:
        raise BackendError(str(exc)) from None


class CgroupTreeBackend(Backend):
    """A backend that writes its nodes' cgroup trees on this host itself (local, docker): the workload
    builds it runs, the runtime conversion it was asked for, and this host's cgroups, found on first use."""

    def __init__(
        self,
        binaries: dict[str, Path],
        runtime: str = "runc-new",
        fs: cgroupfs.CgroupFS | None = None,
        progress: Callable[[str], None] = lambda message: None,
    ):
        self.binaries = {k: Path(v) for k, v in binaries.items()}
        self.runtime = runtime
        self.progress = progress
        self._fs = fs

    @property
    def fs(self) -> cgroupfs.CgroupFS:
        if self._fs is None:
            self._fs = detect_fs()
        return self._fs


def host_cpu_count(fs: cgroupfs.CgroupFS) -> int:
    return len(parse_cpuset(fs.host_cpus()))


def can_pin_cpus(fs: cgroupfs.CgroupFS) -> bool:
    """cgroup v2 always has cpusets; v1 when the cpuset hierarchy is mounted."""
    return fs.version == 2 or "cpuset" in getattr(fs, "roots", {})


def load_rel(root: str) -> str:
    """The load generator's cgroup in a run."""
    return f"{root}/loadgen"


def check_cpus(fs: cgroupfs.CgroupFS, node: Node, load: LoadPlacement | None) -> None:
    """The node's and the load generator's CPUs must exist here."""
    host = set(parse_cpuset(fs.host_cpus()))
    for label, spec in (("node", node.cpus), ("load generator", load.cpus if load else None)):
        if spec and not set(parse_cpuset(spec)) <= host:
            raise BackendError(
                f"{label} cpuset {spec} is not available: this host offers {format_cpuset(sorted(host))}; "
                "choose CPUs from that set in the profile"
            )


def create_tree(
    fs: cgroupfs.CgroupFS, root: str, levels: list[LevelDesign], load: LoadPlacement | None, containers: bool = True
) -> None:
    """Create the run's root, every designed level with its values (without the container levels
    when `containers` is False) and the load generator's cgroup."""
    fs.create(root)
    for level in levels:
        if level.level == "container" and not containers:
            continue
        fs.create(f"{root}/{level.path}", cpus=level.cpus)
        fs.write_cpu(f"{root}/{level.path}", level.quota_us, level.period_us, level.weight, level.burst_us)
    fs.create(load_rel(root), cpus=load.cpus if load else None)


def designed(level: LevelDesign, version: int) -> dict[str, Any]:
    """What a level the lab writes must read back as: on cgroup v1 its weight is written as shares."""
    out: dict[str, Any] = {"quota_us": level.quota_us, "period_us": level.period_us, "weight": level.weight}
    if version == 1:
        out["shares"] = weight_to_v1_shares(level.weight)
    else:
        out["burst_us"] = 0  # neither kubelet nor runc writes cpu.max.burst: no quota carried over (X1 sets one)
    if level.cpus:
        out["cpus"] = level.cpus
    if level.burst_us is not None:
        out["burst_us"] = level.burst_us
    return out


def read_level(fs: cgroupfs.CgroupFS, rel: str) -> dict[str, Any]:
    s = fs.read_settings(rel)
    return {
        "quota_us": s.quota_us,
        "period_us": s.period_us,
        "weight": s.weight,
        "shares": s.shares,
        "cpus": s.cpus,
        "burst_us": s.burst_us,
    }


def compare(want: dict[str, Any], got: dict[str, Any], version: int) -> list[str]:
    """The settings that differ, each as 'key: designed X, read Y'. v1 has no weight file and v2
    no shares, so those are not compared there; a cpuset compares as a set of CPUs; v2's
    cpu.max.burst must read 0 where the kernel has it."""
    out = []
    for key in SETTINGS:
        if key not in want:
            continue
        wanted, have = want[key], got.get(key)
        if key == "weight" and version == 1:
            continue
        if key == "shares" and version == 2:
            continue
        if key == "burst_us" and have is None:
            continue  # a kernel before 5.14 has no cpu.max.burst
        if key == "cpus" and have is not None and parse_cpuset(have) == parse_cpuset(wanted):
            continue
        if wanted != have:
            out.append(f"{key}: designed {wanted!r}, read {have!r}")
    return out


def read_back(fs: cgroupfs.CgroupFS, root: str, level: LevelDesign) -> Readback:
    """One level the lab wrote, read back and compared with its design."""
    want = designed(level, fs.version)
    got = read_level(fs, f"{root}/{level.path}")
    return Readback(
        level=level.level,
        path=level.path,
        design={**want, "formula": level.formula, "pod": level.pod, "container": level.container},
        actual=got,
        mismatches=compare(want, got, fs.version),
    )


def raise_on_mismatch(results: list[Readback], where: str = "") -> list[Readback]:
    """The readback, or a DesignMismatch listing every level that differs from the design."""
    bad = [r for r in results if r.mismatches]
    if bad:
        lines = [f"  {r.path}: " + "; ".join(r.mismatches) for r in bad]
        raise DesignMismatch(f"cgroup readback differs from the docs/LAB.md §2 design{where}:\n" + "\n".join(lines))
    return results


def ancestors(fs: cgroupfs.CgroupFS, root: str) -> list[dict[str, Any]]:
    """The levels above the node (run root, host root): informational, not designed."""
    out = []
    for rel, label in ((root, "run-root"), ("", "host-root")):
        try:
            s = fs.read_settings(rel)
        except cgroupfs.CgroupError as exc:
            out.append({"type": "ancestor", "level": label, "path": rel or "/", "error": str(exc)})
            continue
        out.append(
            {
                "type": "ancestor",
                "level": label,
                "path": rel or "/",
                "quota_us": s.quota_us,
                "period_us": s.period_us,
                "weight": s.weight,
                "shares": s.shares,
                "cpus": s.cpus,
            }
        )
    return out
