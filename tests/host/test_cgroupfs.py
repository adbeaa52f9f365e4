"""cgroup access: v2 against a tree that mirrors the kernel's files, v1 for real here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PROJECT
from throttlelab.host import cgroupfs
from throttlelab.host.reaper import sweep_stale

V2_FILES = {
    "cgroup.controllers": "cpuset cpu io memory pids\n",
    "cgroup.subtree_control": "\n",
    "cgroup.procs": "",
    "cpu.max": "max 100000\n",
    "cpu.max.burst": "0\n",
    "cpu.weight": "100\n",
    "cpu.stat": (
        "usage_usec 2511\nuser_usec 1200\nsystem_usec 1311\nnr_periods 40\nnr_throttled 20\n"
        "throttled_usec 7052500\nnr_bursts 3\nburst_usec 37500\n"
    ),
    "cpuset.cpus": "\n",
    "cpuset.cpus.effective": "0-3\n",
}


def _kernel_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in V2_FILES.items():
        (path / name).write_text(text)


@pytest.fixture
def v2_tree(tmp_path):
    _kernel_dir(tmp_path)
    return tmp_path


def test_v2_create_enables_controllers_and_writes_limits(v2_tree):
    _kernel_dir(v2_tree / "run")
    _kernel_dir(v2_tree / "run" / "node")  # mkdir on cgroupfs creates these files; here we play the kernel
    fs = cgroupfs.CgroupV2(v2_tree)
    fs.create("run")
    fs.create("run/node", cpus="0-1")
    assert (v2_tree / "run" / "cgroup.subtree_control").read_text() == "+cpu +cpuset"
    assert (v2_tree / "run/node/cpuset.cpus").read_text() == "0-1"
    fs.write_cpu("run/node", 250_000, 100_000, 24)
    assert (v2_tree / "run/node/cpu.max").read_text() == "250000 100000"
    assert (v2_tree / "run/node/cpu.weight").read_text() == "24"
    got = fs.read_settings("run/node")
    assert (got.quota_us, got.period_us, got.weight, got.shares, got.cpus) == (250_000, 100_000, 24, None, "0-1")
    fs.write_cpu("run/node", None, 100_000, 39)
    assert fs.read_settings("run/node").quota_us is None


def test_v2_stat_is_normalised(v2_tree):
    stat = cgroupfs.CgroupV2(v2_tree).read_stat("")
    assert stat == {
        "nr_periods": 40,
        "nr_throttled": 20,
        "throttled_usec": 7_052_500,
        "usage_usec": 2511,
        "nr_bursts": 3,
        "burst_usec": 37_500,
    }


def test_v2_writes_period_and_burst_budget(v2_tree):
    _kernel_dir(v2_tree / "run")
    fs = cgroupfs.CgroupV2(v2_tree)
    fs.write_cpu("run", 1_250, 5_000, 39, burst_us=625)
    assert (v2_tree / "run/cpu.max").read_text() == "1250 5000"
    assert (v2_tree / "run/cpu.max.burst").read_text() == "625"
    got = fs.read_settings("run")
    assert (got.quota_us, got.period_us, got.burst_us) == (1_250, 5_000, 625)
    fs.write_cpu("run", 25_000, 100_000, 39)  # no budget asked: the file is left as it is
    assert fs.read_settings("run").burst_us == 625


def test_v2_burst_budget_on_a_kernel_without_one_names_the_file(v2_tree):
    _kernel_dir(v2_tree / "old")
    (v2_tree / "old/cpu.max.burst").unlink()  # kernels before 5.14
    fs = cgroupfs.CgroupV2(v2_tree)
    assert fs.read_settings("old").burst_us is None
    with pytest.raises(cgroupfs.CgroupError, match=r"cpu.max.burst does not exist.*5\.14"):
        fs.write_cpu("old", 25_000, 100_000, 39, burst_us=12_500)


def test_v2_without_cpu_controller_says_how_to_fix(v2_tree):
    (v2_tree / "cgroup.controllers").write_text("memory pids\n")
    with pytest.raises(cgroupfs.CgroupError, match="cpu controller is not available"):
        cgroupfs.CgroupV2(v2_tree).create("x")


def test_detect_reads_mountinfo(tmp_path):
    v2 = tmp_path / "unified"
    _kernel_dir(v2)
    info = tmp_path / "mountinfo"
    info.write_text(f"30 23 0:26 / {v2} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")
    assert cgroupfs.detect(mountinfo=info).version == 2
    info.write_text(
        f"30 23 0:26 / {v2} rw - cgroup2 cgroup2 rw\n"
        "31 23 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
    )
    fs = cgroupfs.detect(mountinfo=info)
    assert fs.version == 1 and list(fs.roots) == ["cpu"]  # cpuacct shares the cpu mount
    info.write_text("")
    with pytest.raises(cgroupfs.CgroupError, match="no cgroup cpu controller"):
        cgroupfs.detect(root=tmp_path / "none", mountinfo=info)


@pytest.fixture
def v1_run(real_cgroups):
    """A run's cgroup of this process on this host's cgroup v1, created for the test and removed after it,
    which must leave nothing; skips where the cpu controller is v2, tested against the fixture tree."""
    fs = real_cgroups
    if fs.version != 1:
        pytest.skip("this host's cpu controller is v2; v2 is tested against the fixture tree")
    rel = f"throttlelab-{os.getpid()}-900"
    fs.create(rel)
    yield fs, rel
    fs.remove_tree(rel)
    assert not fs.exists(rel)


def test_v1_real_create_write_read_remove(v1_run):
    fs, rel = v1_run
    fs.create(f"{rel}/pod", cpus="0")
    fs.write_cpu(rel, 250_000, 100_000, 24)
    fs.write_cpu(f"{rel}/pod", 200_000, 100_000, 59)
    got = fs.read_settings(f"{rel}/pod")
    assert (got.quota_us, got.period_us, got.shares, got.cpus) == (200_000, 100_000, 604, "0")
    assert fs.read_stat(f"{rel}/pod")["nr_periods"] == 0


def test_v1_real_period_and_burst_budget_read_back(v1_run):
    fs, rel = v1_run
    fs.write_cpu(rel, 5_000, 20_000, 39, burst_us=2_500)  # X2's 20 ms period, X1's half-quota budget
    got = fs.read_settings(rel)
    assert (got.quota_us, got.period_us, got.burst_us) == (5_000, 20_000, 2_500)
    stat = fs.read_stat(rel)
    assert (stat["nr_bursts"], stat["burst_usec"]) == (0, 0)
    with pytest.raises(cgroupfs.CgroupError, match="cpu.cfs_burst_us"):
        fs.write_cpu(rel, 5_000, 20_000, 39, burst_us=6_000)  # more than the quota: the kernel refuses


def test_guardian_cleans_up_after_sigkill_of_its_owner(real_cgroups, tmp_path):
    """A runner killed with SIGKILL: its guardian kills the workload and removes the cgroups."""
    script = tmp_path / "owner.py"
    script.write_text(
        "import os, subprocess, sys, time\n"
        "from throttlelab.host import cgroupfs\n"
        "from throttlelab.host.reaper import Guardian\n"
        "fs = cgroupfs.detect(); rel = f'throttlelab-{os.getpid()}-0'\n"
        "g = Guardian(fs, rel); fs.create(rel)\n"
        "def enter():\n"
        "    for f in fs.proc_files(rel): open(f, 'w').write(str(os.getpid()))\n"
        "p = subprocess.Popen(['sleep', '300'], preexec_fn=enter)\n"
        "print(rel, p.pid, flush=True); time.sleep(300)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    rel, pid = owner.stdout.readline().split()
    assert real_cgroups.exists(rel)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    deadline = time.monotonic() + 10
    while real_cgroups.exists(rel) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not real_cgroups.exists(rel), "the guardian did not remove the run's cgroups"
    state = Path(f"/proc/{pid}/stat")
    assert not state.exists() or state.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_sweep_removes_runs_of_dead_runners(real_cgroups):
    dead = subprocess.Popen(["true"])
    dead.wait()
    rel = f"throttlelab-{dead.pid}-0"
    real_cgroups.create(rel)
    removed = sweep_stale(real_cgroups)
    assert rel in removed and not real_cgroups.exists(rel)
