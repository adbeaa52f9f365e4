"""The cgroup v2 code against a real v2 kernel (marker ``cgroup_v2_kernel``).

This host's cpu controller is on cgroup v1, so these tests skip here; CI runs them in a 2-vCPU
guest with cgroup v2 (``python -m throttlelab.platform.vm_guest run ... -- pytest -m cgroup_v2_kernel``,
see .ci/run and tests/platform/test_vm_guest.py). They read back what the kernel keeps (cpu.max,
cpu.weight, cpu.max.burst, cpuset.cpus), see a quota really throttle, run the local backend's
E1 and E4 (both runtime conversions) with every level read back, and check that nothing is left.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from throttlelab.backends.cgroup_tree import detect_fs
from throttlelab.backends.local import LocalBackend
from throttlelab.experiments import REGISTRY, Context
from throttlelab.host import cgroupfs
from throttlelab.host.reaper import kill_and_remove
from throttlelab.model.builds import BUILDS
from throttlelab.model.variants import VariantSpec

pytestmark = pytest.mark.cgroup_v2_kernel

#: Where a guest finds the workload builds the host made (the guest's root is read-only, and a
#: Go build on an emulated CPU takes minutes): a folder holding <build>/cpulab.
BINARIES_ENV = "THROTTLELAB_TEST_BINARIES"


@pytest.fixture
def v2() -> cgroupfs.CgroupV2:
    """This machine's cgroup v2 tree, when it is the one that holds the cpu controller and we are root."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create cgroups")
    fs = cgroupfs.detect()
    if fs.version != 2:
        pytest.skip("needs a cgroup v2 kernel (this host's cpu controller is on v1); CI runs these in a v2 guest")
    return fs


@pytest.fixture
def builds(request) -> dict[str, Path]:
    folder = os.environ.get(BINARIES_ENV)
    if folder:
        found = {b: Path(folder) / b / "cpulab" for b in BUILDS}
        missing = [str(p) for p in found.values() if not p.is_file()]
        assert not missing, f"{BINARIES_ENV}={folder} lacks {', '.join(missing)}"
        return found
    return request.getfixturevalue("binaries")


def _name(n: int) -> str:
    return f"throttlelab-{os.getpid()}-{900 + n}"


def test_limits_weights_and_burst_read_back_from_the_kernel(v2):
    rel = _name(1)
    try:
        v2.create(rel)
        v2.create(f"{rel}/pod", cpus="0")
        v2.write_cpu(rel, 250_000, 100_000, 24)
        v2.write_cpu(f"{rel}/pod", None, 100_000, 59)
        top, pod = v2.read_settings(rel), v2.read_settings(f"{rel}/pod")
        assert (top.quota_us, top.period_us, top.weight, top.shares) == (250_000, 100_000, 24, None)
        assert (pod.quota_us, pod.weight, pod.cpus) == (None, 59, "0")
        assert pod.burst_us == 0, "a fresh group carries no quota over"
        (v2.dirs(f"{rel}/pod")[0] / "cpu.max.burst").write_text("5000")
        assert v2.read_settings(f"{rel}/pod").burst_us == 5000
        assert "cpu" in (v2.dirs(rel)[0] / "cgroup.subtree_control").read_text().split()
    finally:
        v2.remove_tree(rel)
    assert not v2.exists(rel)


def test_a_quota_really_throttles(v2):
    """cpu.max 25 ms per 100 ms against a busy loop: the kernel's counters say it was throttled."""
    rel = _name(2)
    try:
        v2.create(rel)
        v2.write_cpu(rel, 25_000, 100_000, 100)
        procs = v2.proc_files(rel)

        def enter() -> None:
            for name in procs:
                Path(name).write_text(str(os.getpid()))

        busy = subprocess.Popen(
            [sys.executable, "-c", "import time\nend = time.time() + 1.0\nwhile time.time() < end: pass"],
            preexec_fn=enter,
        )
        busy.wait(60)
        stat = v2.read_stat(rel)
        assert stat["nr_periods"] > 0 and stat["nr_throttled"] > 0, stat
        assert stat["throttled_usec"] > 0 and stat["usage_usec"] > 0, stat
    finally:
        kill_and_remove(v2, rel)
    assert not v2.exists(rel)


def _context(runtime: str, builds: dict[str, Path]) -> Context:
    backend = LocalBackend(builds, runtime=runtime, fs=detect_fs())
    backend.preflight()
    return Context(backend=backend, capabilities=backend.capabilities(), node_cpus=None, seed=1)


def _lab_runs(fs: cgroupfs.CgroupFS) -> list[str]:
    top = fs.dirs("")[0]
    return sorted(p.name for p in top.iterdir() if p.is_dir() and p.name.startswith(f"throttlelab-{os.getpid()}-"))


@pytest.mark.parametrize("runtime", ["runc-new", "runc-old"])
def test_e4_reads_back_every_level_as_designed_for_both_conversions(v2, builds, runtime):
    """E4 on the local backend: node, QoS, pod and container levels read back from the kernel
    equal kubelet's and the runtime's formulas (verify() raises on any mismatch)."""
    spec = VariantSpec.from_dict("E4", runtime, {"runtime": runtime})
    result = REGISTRY["E4"](spec, _context(runtime, builds))
    levels = [r for r in result.records if r["type"] == "readback"]
    assert {r["level"] for r in levels} >= {"node", "qos", "pod", "container"}
    assert all(not r["mismatches"] for r in levels), [r for r in levels if r["mismatches"]]
    assert all(r["actual"]["weight"] is not None and r["actual"]["shares"] is None for r in levels)
    assert all(r["actual"]["burst_us"] == 0 for r in levels)
    assert not _lab_runs(v2), "E4 left cgroups behind"


def test_e4_container_weights_differ_between_the_conversions(v2, builds):
    """The same requests give other container weights under runc-new (quadratic) than runc-old (linear)."""
    weights = {}
    for runtime in ("runc-new", "runc-old"):
        spec = VariantSpec.from_dict("E4", runtime, {"runtime": runtime})
        records = REGISTRY["E4"](spec, _context(runtime, builds)).records
        weights[runtime] = {
            r["path"].split("/", 1)[-1]: r["actual"]["weight"]
            for r in records
            if r["type"] == "readback" and r["level"] == "container"
        }
    assert weights["runc-new"].keys() == weights["runc-old"].keys()
    assert weights["runc-new"] != weights["runc-old"]


def test_e1_readback_and_cleanup_on_v2(v2, builds):
    spec = VariantSpec.from_dict(
        "E1", "all-limits", {"app": {"request": "500m", "limit": "2"}, "sidecar": {"request": "100m", "limit": "500m"}}
    )
    result = REGISTRY["E1"](spec, _context("runc-new", builds))
    readback = [r for r in result.records if r["type"] == "readback"]
    pod = next(r for r in readback if r["level"] == "pod")
    assert pod["actual"]["quota_us"] == 250_000 and pod["actual"]["period_us"] == 100_000
    headers = [r for r in result.records if r["type"] == "header"]
    assert headers and all(h["cgroup"]["version"] == 2 and h["cgroup"]["quota_us"] is not None for h in headers), (
        "cpulab read its cpu.max"
    )
    deadline = time.monotonic() + 5
    while _lab_runs(v2) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _lab_runs(v2), "E1 left cgroups behind"
