"""One cgroup v2 guest for every test that needs a v2 kernel: the ``cgroup_v2_kernel`` tests
(tests/platform/test_vm_guest.py) and the real node's container weights
(tests/backends/node/test_real_node_vm.py). Booting an emulated guest costs about 20 s, so the session
boots one (the ``v2_guest`` fixture of tests/conftest.py) and each test reads its own step's results.

In the guest the steps run in this order, each writing under the guest's writable folder OUT:

1. the v2 tests under the guest's pytest: ``cgroup-v2-tests.log`` and ``cgroup-v2-tests.rc``; first,
   because the real node puts a cgroup root of its own under the tree those tests read;
2. where the host has what the real node needs, ``guest_weights.py``: ``weights.json``, ``weights.log``,
   ``weights.rc`` and the node's logs.

    python tests/v2_guest.py OUT BINARIES_FOLDER [--node]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent

#: The tests the guest's pytest runs: the v2 kernel's own and the cleanup tests that hold on either version.
CGROUP_V2_TESTS = (
    "tests/host/test_cgroup_v2_kernel.py",
    "tests/host/test_cgroupfs.py::test_guardian_cleans_up_after_sigkill_of_its_owner",
    "tests/host/test_cgroupfs.py::test_sweep_removes_runs_of_dead_runners",
)
#: The guest's size: the weights' two pods request 1.2 CPUs in all; the node needs about 3 GiB.
VCPUS, MEMORY = 2, "3G"
GUEST_WEIGHTS = PROJECT / "tests" / "backends" / "node" / "guest_weights.py"


@dataclass(frozen=True)
class Step:
    """What one step of the guest left: its exit status (None: it never ran) and its output."""

    code: int | None
    log: str


@dataclass(frozen=True)
class GuestRun:
    """The shared guest's outcome: its log (the guest's console), and each step's status and log."""

    out: Path
    log: str
    cgroup_v2_tests: Step
    weights: Step
    #: why the weights step did not run (the host lacks what the real node needs), or None
    node_skipped: str | None
    took_s: float
    #: what the guest left on this host that was not there before it booted (nothing, when all is well)
    left: list[str]


def _others(name: str) -> bool:
    """Whether a node folder, cgroup or bridge belongs to another real node of this host that is running
    now (another run's supervisor: named by its pid, the bridge by its pid mod 100000)."""
    digits = "".join(c for c in name if c.isdigit())
    if not digits:
        return False
    alive = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    return any(pid == int(digits) or (name.startswith("tlnode") and pid % 100000 == int(digits)) for pid in alive)


def host_state(out: Path) -> dict:
    """What a guest running the node could leave on this host (less what other runs' live nodes hold)."""
    from throttlelab.platform import real_node as nc

    procs = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            # vng, virtme-run and QEMU name the guest's writable folder (out): this guest, not another run's
            if str(out).encode() in cmd:
                procs.append(f"{proc.name}: {cmd[:80]!r}")
    cgroups = sorted(str(p) for p in Path("/sys/fs/cgroup").glob("*/throttlelab-node-*"))
    cgroups += sorted(str(p) for p in Path("/sys/fs/cgroup").glob("throttlelab-node-*"))
    links = sorted(p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith("tlnode"))
    mounts = [
        line
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if str(nc.NODES_DIR) in line or str(out) in line
    ]
    folders = sorted(p.name for p in nc.NODES_DIR.iterdir() if p.is_dir()) if nc.NODES_DIR.is_dir() else []
    return {
        "processes": procs,
        "cgroups": [c for c in cgroups if not _others(Path(c).name)],
        "links": [link for link in links if not _others(link)],
        "mounts": mounts,
        "folders": [f for f in folders if not _others(f)],
    }


def boot(out: Path, binaries_folder: Path) -> GuestRun:
    """Boot the shared guest once and run its steps; the weights step only where the host has what the real
    node needs (``conftest.real_node_missing``). The caller has checked QEMU's tools."""
    from conftest import cluster_tool_rows, real_node_missing
    from throttlelab.platform import vm_guest

    missing = real_node_missing(cluster_tool_rows())
    out.mkdir(parents=True, exist_ok=True)
    before = host_state(out)
    started = time.monotonic()
    settings = vm_guest.VmSettings(
        vcpus=VCPUS, memory=MEMORY, node=vm_guest.NODE_CGROUPS if missing else vm_guest.NODE_KUBERNETES
    )
    command = [sys.executable, str(Path(__file__).resolve()), str(out), str(binaries_folder)]
    with open(out / "guest.log", "w") as log:
        vm_guest.run_in_guest(
            settings,
            command + ([] if missing else ["--node"]),
            [out],
            env={"PYTHONPATH": str(PROJECT)},
            stdout=log,
            timeout_s=1500,
        )
    took = time.monotonic() - started
    return GuestRun(
        out=out,
        log=(out / "guest.log").read_text(errors="replace"),
        cgroup_v2_tests=read_step(out, "cgroup-v2-tests"),
        weights=read_step(out, "weights"),
        node_skipped=missing,
        took_s=took,
        left=[f"{k}: {v}" for k, v in host_state(out).items() if v != before[k]],
    )


def read_step(out: Path, name: str) -> Step:
    rc, log = out / f"{name}.rc", out / f"{name}.log"
    code = int(rc.read_text().strip()) if rc.is_file() else None
    return Step(code, log.read_text(errors="replace") if log.is_file() else "")


def in_guest(out: Path, binaries_folder: str, node: bool) -> int:
    """The steps, run inside the guest; each step's status goes to its .rc file, and the guest's
    status is 0 only when every step that ran passed."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "THROTTLELAB_TEST_BINARIES": binaries_folder}
    steps = [
        (
            "cgroup-v2-tests",
            # --full: the cgroup_v2_kernel tests are of the full tier
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=-rs", "--full"]
            + [str(PROJECT / t) for t in CGROUP_V2_TESTS],
        )
    ]
    if node:
        steps.append(("weights", [sys.executable, str(GUEST_WEIGHTS), str(out)]))
    worst = 0
    for name, command in steps:
        with open(out / f"{name}.log", "w") as log:
            code = subprocess.run(command, cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        (out / f"{name}.rc").write_text(f"{code}\n")
        worst = worst or code
    return worst


if __name__ == "__main__":
    out_folder, binaries_folder, *flags = sys.argv[1:]
    sys.exit(in_guest(Path(out_folder), binaries_folder, node="--node" in flags))
