"""The calibration step for real (experiments/pilots.py, `throttlelab calibrate`): a quiet host's floor
sampled, X5's service piloted in real cgroups, and a measured run of a calibrated arm taking its rate from the
pilot and its disturbance threshold from the floor; nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROJECT, X5_ARM, left_behind, runner_arguments, workload_pids_of
from throttlelab.model import calibration
from throttlelab.model.variants import VariantSpec

X5 = {"build": "go124mod", **X5_ARM, "duration_ms": 1000, "node_cpus": "0", "load_cpus": "1"}


def _throttlelab(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "throttlelab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
    )


def _binary_args(binaries: dict[str, Path]) -> list[str]:
    return [word for build, path in binaries.items() for word in ("--binary", f"{build}={path}")]


@pytest.mark.slow  # it holds the machine-wide experiment lock, so it waits for any measurement on this host
def test_a_quiet_host_calibration_samples_every_cpu(tmp_path):
    """Sampled while a busy loop holds the last CPU: every sample shows that CPU busy, and a threshold over it
    is the ceiling given, where one over the first CPU follows that CPU's own floor."""
    out = tmp_path / "host.json"
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or cpus[-1] != os.cpu_count() - 1:
        pytest.skip(f"needs two CPUs or more, the last of them this test's to pin a busy loop on: {cpus}")
    hog = subprocess.Popen(
        [sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpus[-1]}}})\nwhile True: pass"]
    )
    try:
        proc = _throttlelab("calibrate", "host", "--duration-s", "0.5", "--quiet-wait-s", "1", "--out", str(out))
    finally:
        hog.kill()
        hog.wait()
    assert proc.returncode == 0, proc.stderr
    host = json.loads(out.read_text())["host"]
    assert host["duration_s"] == 0.5 and len(host["ticks"]) == 5
    assert host["quiet_before"] is False and host["waited_s"] >= 1  # the busy loop was there all along
    assert {len(row) for row in host["ticks"]} == {os.cpu_count()}
    # the busy loop's CPU is busy all along: its ticks over the samples are those of the whole duration (a
    # sample read late on a loaded host holds more, the next one fewer)
    per_sample = 0.1 * host["hz"]
    assert sum(row[cpus[-1]] for row in host["ticks"]) >= 0.8 * 0.5 * host["hz"], host["ticks"]
    # started by hand on the local backend: no orchestrator, no runtime processes to take idle levels of; the
    # kernel's threads idle at a small share of a CPU
    own = host["own"]
    assert own["orchestrator_cpu"] is None and own["runtime_cpu"] is None and 0 <= own["kernel_cpu"] < 0.5
    # over the busy CPU the floor is about a whole CPU: the threshold is the ceiling, said so
    busy = calibration.threshold_of(host, [cpus[-1]], 0.3, ceiling=0.5)
    assert busy["floor"] >= 0.8 and busy["threshold"] == 0.5 and "capped at max_other_share 0.5" in busy["rule"], busy
    rule = calibration.threshold_of(host, [0], 0.3, ceiling=1.0)
    # 5 samples hold 5 disjoint windows of one sample (calibration.QUIET_DISJOINT_WINDOWS), so 0.1 s, not 0.3
    assert rule["window_s"] == pytest.approx(0.1) and rule["windows"] == 5
    shares = [row[0] / per_sample for row in host["ticks"]]
    floor = sum(shares) / 5
    sd = (sum((x - floor) ** 2 for x in shares) / 4) ** 0.5
    assert rule["floor"] == pytest.approx(floor, abs=1e-5) and rule["sd"] == pytest.approx(sd, abs=1e-5)
    # never below what 0.3 s of one CPU's ticks can tell from zero: 9 of its 30 ticks at 100 Hz
    resolution = calibration.tick_resolution(0.3, 1, host["hz"])
    assert rule["threshold"] == pytest.approx(min(max(floor + 3 * sd, resolution), 1.0), abs=1e-5)


def test_a_bad_calibrate_command_says_what_is_missing(tmp_path):
    proc = _throttlelab("calibrate", "service", "--out", str(tmp_path / "x.json"))
    assert proc.returncode == 2 and "--experiment is required" in proc.stderr
    proc = _throttlelab("calibrate", "host", "--duration-s", "0", "--out", str(tmp_path / "x.json"))
    assert proc.returncode == 2 and "--duration-s must be positive" in proc.stderr


@pytest.mark.root
@pytest.mark.slow
def test_a_calibrated_arm_runs_at_the_rate_its_pilot_measured(real_cgroups, binaries, tmp_path):
    if not {0, 1} <= set(os.sched_getaffinity(0)):
        pytest.skip("needs CPUs 0 and 1 (the service's node and the load generator)")
    arm = {**X5, "target_use": 0.9}
    pilots = calibration.pilot_specs([VariantSpec.from_dict("X5", "use90", arm)])
    pilot_file, host_file = tmp_path / "X5.json", tmp_path / "host.json"
    proc = _throttlelab(
        "calibrate",
        "service",
        "--backend",
        "local",
        "--experiment",
        "X5",
        "--spec",
        json.dumps([p.to_dict() for p in pilots]),
        "--seed",
        "3",
        *_binary_args(binaries),
        "--out",
        str(pilot_file),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    service = json.loads(pilot_file.read_text())["service"]
    # the first pilot at the stated cost, the second aimed at 90% by the cost the first measured
    first = service["points"][0]
    assert [p["pilot_rps"] for p in service["points"]] == [
        15.0,
        calibration.rate_for(0.9, 200, first["cpu_per_request_us"]),
    ]
    assert [s["rps"] for s in service["specs"]] == [p["pilot_rps"] for p in service["points"]]
    assert [s["rps"] for s in service["planned"]] == [15.0, 45.0]
    assert all(p["requests"] > 0 and p["cores"] > 0 for p in service["points"])
    assert service["marginal_us"] > 0
    assert left_behind(tmp_path) == [] and workload_pids_of(tmp_path) == []
    assert (
        _throttlelab(
            "calibrate", "host", "--duration-s", "2", "--quiet-wait-s", "1", "--out", str(host_file)
        ).returncode
        == 0
    )

    out = tmp_path / "rep0.jsonl"
    calibrations = ("--calibration", str(pilot_file), "--host-calibration", str(host_file))
    proc = _throttlelab(
        "run",
        *runner_arguments(
            "local", "X5", "use90", arm, binaries, out, *calibrations, "--max-other-share", "1.0", "--retries", "0"
        ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = json.loads(out.read_text().splitlines()[0])
    rate = calibration.rate_on_line(0.9, 200, service)
    assert meta["spec"]["rps"] == rate and meta["spec"]["request_cpu_us"] == round(0.18 / rate * 1e6, 1)
    assert meta["calibration"]["service"]["source"] == "pilot" and meta["calibration"]["service"]["rps"] == rate
    assert meta["calibration"]["host"]["duration_s"] == 2
    assert "ms of CPU per /work request" in meta["environment"]["calibration"]["pilot"]
    seen = meta["interference"]
    assert seen["judged"] == "busy intervals" and seen["intervals"] == 1
    assert seen["window_s"] < seen["attempt_window_s"]  # deploying and tearing down are not judged
    rule = seen["threshold_rule"]
    # its floor and SD are the host calibration's, over the run's CPUs and the window it judged: not a reading
    # taken at run time, and not another CPU's
    quiet = calibration.quiet_threshold(json.loads(host_file.read_text())["host"], seen["cpus"], seen["window_s"])
    assert (rule["floor"], rule["sd"]) == pytest.approx((quiet["floor"], quiet["sd"]), abs=1e-4), (rule, quiet)
    assert rule["resolution"] == pytest.approx(
        calibration.tick_resolution(seen["window_s"], len(seen["cpus"]), meta["calibration"]["host"]["hz"]), rel=1e-3
    )  # the record's window is rounded to the millisecond
    ceiling = 1.0  # --max-other-share above
    assert seen["threshold"] == rule["threshold"] == min(max(rule["calibrated"], rule["resolution"]), ceiling)
    assert ("floor + 3 SD" if rule["calibrated"] >= rule["resolution"] else "resolution") in rule["rule"]
    loads = [json.loads(line) for line in out.read_text().splitlines()]
    header = next(r for r in loads if r.get("type") == "header" and r.get("command") == "load")
    assert float(header["params"]["rps"]) == rate
    assert left_behind(tmp_path) == [] and workload_pids_of(tmp_path) == []
