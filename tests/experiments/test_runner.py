"""The runner under interference: a disturbed run is kept beside the raw log, listed in it, and
measured again; the last attempt is kept and marked when every attempt was disturbed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import PROJECT


def _hogs(cpus: list[int]) -> list[subprocess.Popen]:
    code = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"
    return [subprocess.Popen([sys.executable, "-c", code, str(cpu)]) for cpu in cpus]


def _run_under_busy_loops(experiment: str, variant: str, spec: dict, binaries: dict, out, *options: str,
                          timeout: float = 180) -> subprocess.CompletedProcess:
    """`throttlelab run` of one job while a busy loop spins on every CPU the runner may use."""
    cmd = [sys.executable, "-m", "throttlelab", "run", "--backend", "local", "--experiment", experiment,
           "--variant", variant, "--repeat", "0", "--spec", json.dumps(spec), *options, "--out", str(out)]
    for build, path in binaries.items():
        cmd += ["--binary", f"{build}={path}"]
    hogs = _hogs(sorted(os.sched_getaffinity(0)))
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONPATH": str(PROJECT)})
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.mark.root
@pytest.mark.slow
def test_a_disturbed_run_is_kept_listed_and_measured_again(real_cgroups, binaries, tmp_path):
    # a short E2a job (a timed window of ~0.5 s); read-outs (E1, E3, E4) are metered but not judged
    spec = {"build": "go124mod", "threads": 2, "work_ms": 20, "interval_ms": 230, "rounds": 2, "request": "100m",
            "limit": "250m"}
    out = tmp_path / "E2a" / "limit1" / "rep0.jsonl"
    proc = _run_under_busy_loops("E2a", "limit1", spec, binaries, out, "--max-other-share", "0.05",
                                 "--retries", "1", "--quiet-wait-s", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = json.loads(out.read_text().splitlines()[0])
    assert meta["interference"]["disturbed"] is True  # still disturbed after its one retry: kept, marked
    assert meta["attempt"] == 1
    (earlier,) = meta["disturbed_attempts"]
    assert earlier["disturbed"] and earlier["other_share"] > 0.05
    kept = out.with_name(earlier["log"])
    assert kept.name == "rep0.disturbed-1.jsonl" and kept.is_file()
    assert json.loads(kept.read_text().splitlines()[0])["interference"]["disturbed"] is True
    assert earlier["waited_s"] >= 2  # it waited for quiet CPUs first; the busy loops outlasted the wait
    assert "still busy after" in proc.stderr and "measuring again" in proc.stderr


@pytest.mark.root
def test_a_read_out_is_metered_but_never_judged_disturbed(real_cgroups, binaries, tmp_path):
    spec = {"build": "go124mod", "request": "100m", "limit": "500m"}  # E3: values read back, nothing timed
    out = tmp_path / "rep0.jsonl"
    proc = _run_under_busy_loops("E3", "go124mod-500m", spec, binaries, out, "--max-other-share", "0.0",
                                 "--retries", "1", "--quiet-wait-s", "1", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = json.loads(out.read_text().splitlines()[0])
    assert meta["interference"]["disturbed"] is False and "not judged" in meta["interference"]["note"]
    assert meta["disturbed_attempts"] == [] and "busy_s" in meta["interference"]
