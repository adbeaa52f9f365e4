"""The runner under interference: a disturbed run is kept beside the raw log, listed in it, and
measured again once the CPUs are quiet; when they stay busy through the wait, the attempt is kept
and marked, and the next jobs on that host check once instead of waiting again, measuring again
only if the CPUs are quiet then."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import PROJECT, runner_arguments


def _hogs(cpus: list[int]) -> list[subprocess.Popen]:
    code = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"
    return [subprocess.Popen([sys.executable, "-c", code, str(cpu)]) for cpu in cpus]


def _run_under_busy_loops(
    experiment: str,
    variant: str,
    spec: dict,
    binaries: dict,
    out,
    *,
    max_other_share: str,
    retries: int,
    quiet_wait_s: int,
    timeout: float = 180,
    stop_hogs_on: str | None = None,
) -> subprocess.CompletedProcess:
    """`throttlelab run` of one job while a busy loop spins on every CPU the runner may use; the loops
    stop when the runner prints ``stop_hogs_on`` (a passing disturbance), else when it ends."""
    options = ("--max-other-share", max_other_share, "--retries", str(retries), "--quiet-wait-s", str(quiet_wait_s))
    cmd = _runner_command(experiment, variant, spec, binaries, out, *options)
    hogs = _hogs(sorted(os.sched_getaffinity(0)))
    stderr: list[str] = []
    try:
        with subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_runner_env(),
        ) as proc:
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
            try:
                for line in proc.stderr:
                    stderr.append(line)
                    if stop_hogs_on and stop_hogs_on in line:
                        _stop(hogs)
                stdout = proc.stdout.read()
                proc.wait()
            finally:
                timer.cancel()
        return subprocess.CompletedProcess(cmd, proc.returncode, stdout, "".join(stderr))
    finally:
        _stop(hogs)


def _runner_command(experiment: str, variant: str, spec: dict, binaries: dict, out, *options: str) -> list[str]:
    """`throttlelab run` of repeat 0 of one job on the local backend, in a process of its own."""
    return [
        sys.executable,
        "-m",
        "throttlelab",
        "run",
        *runner_arguments("local", experiment, variant, spec, binaries, out, *options),
    ]


def _runner_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(PROJECT)}


def _stop(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        if hog.poll() is None:
            hog.kill()
        hog.wait()


@pytest.fixture()
def no_busy_note():
    """The runner's note that the host stayed busy through a wait (host-wide): none before, none after."""
    from throttlelab.experiments.runner import host_busy_path

    path = host_busy_path()
    path.unlink(missing_ok=True)
    yield path
    path.unlink(missing_ok=True)


#: The disturbance threshold the tests judge at: a busy loop on every CPU the runner may use is other work on
#: nearly all of them (the job's E2a arm takes at most 1/8 of two CPUs), a host without them far less; half the
#: CPUs lies between the two, fixed so that what one test judges does not move with the host's noise.
THRESHOLD = "0.5"
#: What the busy loops must show as other work in a disturbed attempt: they take the CPUs the job leaves.
HOGS_SEEN = 0.75


E2A_SHORT = {
    "build": "go124mod",
    "threads": 2,
    "work_ms": 20,
    "interval_ms": 230,
    "rounds": 2,
    "request": "100m",
    "limit": "250m",
}  # a timed window of ~0.5 s; read-outs (E1, E3, E4) are metered but not judged


@pytest.mark.root
@pytest.mark.slow
def test_a_disturbed_run_is_kept_listed_and_measured_again(real_cgroups, binaries, tmp_path, no_busy_note):
    # the busy loops pass while the runner waits for quiet CPUs: the retry is measured undisturbed
    out = tmp_path / "E2a" / "limit1" / "rep0.jsonl"
    proc = _run_under_busy_loops(
        "E2a",
        "limit1",
        E2A_SHORT,
        binaries,
        out,
        max_other_share=THRESHOLD,
        retries=2,
        quiet_wait_s=60,
        stop_hogs_on="waiting for the CPUs",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "quiet after" in proc.stderr, (
        f"the CPUs were not below {THRESHOLD} of other work within 60 s of the busy loops' end: something else "
        f"on this host keeps them busy (the runner's lines say how busy), and the retry cannot be tested\n"
        + proc.stderr[-3000:]
    )
    meta = json.loads(out.read_text().splitlines()[0])
    assert meta["interference"]["disturbed"] is False, proc.stderr[-3000:]
    # the first attempt is the busy loops'; other work on this host may disturb a retry too (up to two here),
    # and every disturbed attempt is kept beside the log, in order, and listed in it
    earlier = meta["disturbed_attempts"]
    assert meta["attempt"] == len(earlier) >= 1, proc.stderr[-3000:]
    assert earlier[0]["other_share"] >= HOGS_SEEN and earlier[0]["threshold"] == float(THRESHOLD), earlier[0]
    for k, attempt in enumerate(earlier, 1):
        kept = out.with_name(attempt["log"])
        assert attempt["disturbed"] and kept.name == f"rep0.disturbed-{k}.jsonl" and kept.is_file()
        assert json.loads(kept.read_text().splitlines()[0])["interference"]["disturbed"] is True
    assert "measuring again" in proc.stderr
    assert not no_busy_note.exists()


@pytest.mark.root
@pytest.mark.slow
def test_a_persistently_busy_host_marks_the_run_and_the_next_jobs_do_not_wait(
    real_cgroups, binaries, tmp_path, no_busy_note
):
    out = tmp_path / "first" / "rep0.jsonl"
    proc = _run_under_busy_loops(
        "E2a", "limit1", E2A_SHORT, binaries, out, max_other_share=THRESHOLD, retries=1, quiet_wait_s=3
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = json.loads(out.read_text().splitlines()[0])
    # the loops outlast the wait and the retry: the last attempt is kept and marked, the first beside it
    assert meta["attempt"] == 1 and meta["interference"]["disturbed"] is True
    assert meta["interference"]["other_share"] >= HOGS_SEEN
    assert [a["log"] for a in meta["disturbed_attempts"]] == ["rep0.disturbed-1.jsonl"]
    assert meta["disturbed_attempts"][0]["waited_s"] >= 3
    assert "still busy after" in proc.stderr and no_busy_note.exists()
    # a job that starts on the still busy host checks the CPUs once instead of waiting the whole time
    out = tmp_path / "second" / "rep0.jsonl"
    proc = _run_under_busy_loops(
        "E2a", "limit1", E2A_SHORT, binaries, out, max_other_share=THRESHOLD, retries=1, quiet_wait_s=30
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the host has been busy since" in proc.stderr and "at most 30 s" not in proc.stderr
    # ... and, finding them still busy, keeps its one attempt (marked) instead of measuring again
    assert "this attempt is kept as the run, marked disturbed" in proc.stderr
    meta = json.loads(out.read_text().splitlines()[0])
    assert meta["attempt"] == 0 and meta["interference"]["disturbed"] is True
    assert meta["disturbed_attempts"] == [] and list(out.parent.glob("*disturbed*")) == []


@pytest.mark.root
def test_a_read_out_is_metered_but_never_judged_disturbed(real_cgroups, binaries, tmp_path):
    spec = {"build": "go124mod", "request": "100m", "limit": "500m"}  # E3: values read back, nothing timed
    out = tmp_path / "rep0.jsonl"
    proc = _run_under_busy_loops(
        "E3", "go124mod-500m", spec, binaries, out, max_other_share="0.0", retries=1, quiet_wait_s=1, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = json.loads(out.read_text().splitlines()[0])
    assert meta["interference"]["disturbed"] is False and "not judged" in meta["interference"]["note"]
    assert meta["disturbed_attempts"] == [] and "busy_s" in meta["interference"]


@pytest.mark.root
def test_a_read_out_on_a_busy_host_keeps_the_note_that_it_is_busy(real_cgroups, binaries, tmp_path, no_busy_note):
    # a read-out is never judged disturbed, and its few clock ticks cannot say the host is quiet: the note stays
    no_busy_note.write_text(f"{time.time():.3f}\n")
    spec = {"build": "go124mod", "request": "100m", "limit": "500m"}
    proc = _run_under_busy_loops(
        "E3",
        "go124mod-500m",
        spec,
        binaries,
        tmp_path / "rep0.jsonl",
        max_other_share=THRESHOLD,
        retries=1,
        quiet_wait_s=1,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert no_busy_note.exists()


@pytest.mark.root
def test_a_read_out_on_a_quiet_host_leaves_the_note_to_a_timed_run(real_cgroups, binaries, tmp_path, no_busy_note):
    # without busy loops too: only a run with a timed window the meter saw quiet removes the note
    no_busy_note.write_text(f"{time.time():.3f}\n")
    out = tmp_path / "rep0.jsonl"
    spec = {"build": "go124mod", "request": "100m", "limit": "500m"}
    cmd = _runner_command("E3", "go124mod-500m", spec, binaries, out, "--max-other-share", THRESHOLD)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_runner_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(out.read_text().splitlines()[0])["interference"]["disturbed"] is False
    assert no_busy_note.exists()
