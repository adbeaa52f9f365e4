"""What the pipeline's end-to-end tests share (not a test module): reading raw logs, a run started in the
background and killed at a chosen moment, and the check that nothing of a run is left behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from conftest import PROJECT, left_behind, snakemake_command, workload_pids, workload_pids_of


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def raw_runs(workdir: Path, experiment: str) -> dict[str, list[list[dict]]]:
    """variant -> the records of each of its repeats on the local backend."""
    out: dict[str, list[list[dict]]] = {}
    # rep<k>.jsonl only: a disturbed attempt kept beside it (rep<k>.disturbed-<n>.jsonl) is not a run
    for path in sorted((workdir / "results/local/raw" / experiment).glob("*/rep[0-9]*.jsonl")):
        if ".disturbed-" in path.name:
            continue
        out.setdefault(path.parent.name, []).append(read_log(path))
    return out


def cpuset_state() -> str:
    root = Path("/sys/fs/cgroup/cpuset/cpuset.cpus")
    alt = Path("/sys/fs/cgroup/cpuset.cpus.effective")
    return (root if root.exists() else alt).read_text() if (root.exists() or alt.exists()) else ""


def ci_profile() -> dict:
    return yaml.safe_load((PROJECT / "config/profiles/ci.yaml").read_text())


def long_run_workdir(done: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A fresh workdir with the builds and the host calibration of the finished run in ``done``, and a profile
    whose one E2a job runs ~20 s (40 rounds of 500 ms at 125m), to be killed on its way."""
    workdir = tmp_path / "work"
    shutil.copytree(done / "results/build", workdir / "results/build")
    if (done / "results/local/calibration").is_dir():
        shutil.copytree(done / "results/local/calibration", workdir / "results/local/calibration")
    profile = ci_profile()
    profile["experiments"] = {"E2a": profile["experiments"]["E2a"]}
    profile["experiments"]["E2a"]["variants"] = {"long": {"limit": "500m", "rounds": 40, "interval_ms": 500}}
    custom = tmp_path / "long.yaml"
    custom.write_text(yaml.safe_dump(profile))
    return workdir, custom


LONG_LOG = "results/local/raw/E2a/long/rep0.jsonl"


def start_long_run(workdir: Path, profile: Path, *config: str) -> subprocess.Popen:
    cmd = snakemake_command(workdir, LONG_LOG, "--config", f"profile={profile}", *config)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def wait_for_workload(proc: subprocess.Popen, workdir: Path, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout  # another invocation may hold the experiment lock first
    while time.monotonic() < deadline:
        pids = [p for p in workload_pids() if _in_workdir(p, workdir)]
        if pids:
            time.sleep(1.0)  # let it run into a few rounds
            return pids[0]
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.1)
    raise AssertionError("the workload never started")


def interrupted_long_run(
    done: Path, tmp_path: Path, interrupt: Callable[[subprocess.Popen, int], None], timeout: float = 60
) -> tuple[Path, subprocess.Popen, str]:
    """The long E2a job started with Snakemake in a fresh workdir (the built binaries of ``done``) and, once
    its workload runs, ``interrupt``ed (given Snakemake's process and the workload's pid); returns the
    workdir, the ended Snakemake and its output. Snakemake's group is killed if it outlives ``timeout``."""
    workdir, profile = long_run_workdir(done, tmp_path)
    proc = start_long_run(workdir, profile)
    try:
        interrupt(proc, wait_for_workload(proc, workdir))
        output, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return workdir, proc, output


def ctrl_c(proc: subprocess.Popen, _workload: int) -> None:
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group


def sigterm_to_snakemake(proc: subprocess.Popen, _workload: int) -> None:
    proc.send_signal(signal.SIGTERM)


def kill_the_workload(_proc: subprocess.Popen, workload: int) -> None:
    os.kill(workload, signal.SIGKILL)


def _in_workdir(pid: int, workdir: Path) -> bool:
    """Is this cpulab process in a cgroup of a runner working in `workdir`?"""
    try:
        cgroup = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False
    for part in cgroup.replace("\n", "/").split("/"):
        if part.startswith("throttlelab-") and part.split("-")[1].isdigit():
            try:
                if os.readlink(f"/proc/{part.split('-')[1]}/cwd") == str(workdir.resolve()):
                    return True
            except OSError:
                continue
    return False


def assert_clean(cpuset_before: str, workdir: Path) -> None:
    deadline = time.monotonic() + 10
    while (left_behind(workdir) or workload_pids_of(workdir)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left_behind(workdir) == []
    assert workload_pids_of(workdir) == []
    assert cpuset_state() == cpuset_before


def rounds(records: list[dict]) -> list[dict]:
    return [r for r in records if r["type"] == "round"]


def assert_the_quota_decides_throttling(runs: dict[str, list[list[dict]]]) -> None:
    """E2a's unlimited arm and its 125m arm: the `ci` profile's burst is 2 threads x 20 ms of CPU, and 125m grants
    12.5 ms of it per 100 ms period. Without a quota no round of any run is throttled. With it every round of a
    run the meter saw undisturbed is; other work on the CPUs spreads a burst over more periods, and one starved
    below 12.5 ms in each of them escapes (seen with 91% of both CPUs taken by other work), so over every run,
    disturbed ones included, most rounds still are."""
    assert runs["nolimit"] and runs["limit500m"], sorted(runs)
    for records in runs["nolimit"]:
        assert rounds(records) and all(r["d_nr_throttled"] == 0 for r in rounds(records)), "nolimit was throttled"
    every = []
    for records in runs["limit500m"]:
        throttled = [r["d_nr_throttled"] for r in rounds(records)]
        assert throttled, "limit500m ran no round"
        if not records[0]["interference"].get("disturbed"):
            assert all(n > 0 for n in throttled), f"limit500m must throttle every round of a quiet run: {throttled}"
        every += throttled
    assert sum(n > 0 for n in every) > len(every) / 2, f"limit500m's rounds were mostly not throttled: {every}"


def assert_e1_reads_back_the_design(runs: dict[str, list[list[dict]]]) -> None:
    """E1 as the `ci` profile designs it: the limits written at the container and pod levels and read back there,
    and with the sidecar unlimited no quota on the pod, the levels above read too."""
    levels = {r["path"]: r for r in runs["all-limits"][0] if r["type"] == "readback"}
    assert levels["node/burstable/pod-e1"]["actual"]["quota_us"] == 250_000
    assert levels["node/burstable/pod-e1/app"]["actual"]["quota_us"] == 200_000
    assert levels["node/burstable/pod-e1/sidecar"]["actual"]["quota_us"] == 50_000
    partial = {r["path"]: r for r in runs["partial"][0] if r["type"] == "readback"}
    assert partial["node/burstable/pod-e1"]["actual"]["quota_us"] is None
    assert any(r["type"] == "ancestor" and r["level"] == "host-root" for r in runs["partial"][0])
    infos = [r for r in runs["all-limits"][0] if r["type"] == "header"]
    assert {r["src"] for r in infos} == {"e1/app", "e1/sidecar"}


def planned_jobs(proc: subprocess.CompletedProcess) -> dict[str, list[str]]:
    """rule name -> the outputs a dry run plans for it."""
    plan: dict[str, list[str]] = {}
    rule = None
    for line in (proc.stdout + proc.stderr).splitlines():
        stripped = line.strip()
        if stripped.startswith(("rule ", "localrule ", "checkpoint ")) and stripped.endswith(":"):
            rule = stripped.split()[1].rstrip(":")
            plan.setdefault(rule, [])
        elif rule and stripped.startswith("output:"):
            plan[rule] += [p.strip() for p in stripped[len("output:") :].split(",")]
    return plan
