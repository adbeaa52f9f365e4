"""Processes of the host (alive, killed, the guardian's package path) and the run names the
stale sweeps read, judged on a fixture tree: no root and no real cgroup needed."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import PROJECT
from throttlelab.host import cgroupfs
from throttlelab.host.processes import kill_all, package_parent, pid_alive
from throttlelab.host.reaper import run_name, run_owner, sweep_stale


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_process_is_alive_until_it_is_killed():
    proc = subprocess.Popen(["sleep", "60"])
    try:
        assert pid_alive(proc.pid) and pid_alive(os.getpid())
        assert kill_all([proc.pid, _dead_pid()]) == [proc.pid]  # one already gone is skipped
        proc.wait(10)
    finally:
        proc.kill()
    assert not pid_alive(proc.pid)


def test_the_guardian_finds_the_package_this_process_imported():
    assert package_parent() == str(PROJECT.resolve())


def test_run_names_carry_their_runner():
    assert run_name(3) == f"throttlelab-{os.getpid()}-3" and run_owner(run_name(3)) == os.getpid()
    assert run_owner("throttlelab-12-1000") == 12
    assert run_owner("throttlelab-kindtest") is None and run_owner("system.slice") is None


def test_the_sweep_removes_dead_runs_in_every_hierarchy(tmp_path):
    """A run a dead runner left, even where only one hierarchy still has it; a live run stays."""
    cpu, cpuset = tmp_path / "cpu", tmp_path / "cpuset"
    dead, live = run_name(0, _dead_pid()), run_name(0)
    for path in (cpu / live / "node", cpuset / live, cpuset / dead / "node" / "pod", cpu / "system.slice"):
        path.mkdir(parents=True)
    fs = cgroupfs.CgroupV1(cpu, None, cpuset)
    assert sweep_stale(fs) == [dead]
    assert not (cpuset / dead).exists()
    assert (cpu / live / "node").is_dir() and (cpuset / live).is_dir() and (cpu / "system.slice").is_dir()
