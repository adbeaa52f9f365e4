"""Requests become weights (E4/E5/E10, finding F8): expected shares, the share
metric, and cleanup of a pinned node after SIGKILL of the runner mid-phase."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import PROJECT, lab_cgroups, runner_arguments, workload_pids
from throttlelab.model.weight_pods import E4_PODS, PHASES, expected_shares, lab_pods
from throttlelab.analysis.findings.weights_findings import F8, SHARE_BAND
from throttlelab.analysis.metrics import share_metrics


def _expect(phase: str, runtime: str) -> dict[str, tuple[int, float]]:
    names, level = PHASES[phase]
    return expected_shares(lab_pods(names, ("spin",), "go124mod"), level, runtime)


def test_pod_level_shares_follow_kubelets_linear_weights():
    for runtime in ("runc-new", "runc-old"):  # the runtime does not touch the pod level
        got = _expect("pods", runtime)
        assert {m: w for m, (w, _) in got.items()} == {"pod-p100m": 4, "pod-p1": 39, "pod-two": 43}
        assert got["pod-p100m"][1] == pytest.approx(4 / 86)


def test_container_level_shares_follow_the_runtime():
    new, old = _expect("two-container", "runc-new"), _expect("two-container", "runc-old")
    assert {m: w for m, (w, _) in new.items()} == {"small": 17, "big": 100}
    assert {m: w for m, (w, _) in old.items()} == {"small": 4, "big": 39}
    # the lab: 0.144 : 0.847 (new) and 0.092 : 0.899 (old)
    assert new["small"][1] == pytest.approx(0.1453, abs=1e-4)
    assert old["small"][1] == pytest.approx(0.0930, abs=1e-4)


def test_the_labs_pods_are_all_there():
    assert [name for name, _ in E4_PODS] == ["p100m", "p1", "p2", "p1-limited", "two"]
    limited = lab_pods(("p1-limited",), ("info",), "go124mod")[0]
    assert limited.qos == "burstable"  # CPU only, no memory: kubelet makes it Burstable (the lab: e4-req1-limit1)


def test_share_metric_averages_readings():
    # two members; gains per reading: (10, 90) then (30, 70) -> shares 0.1/0.9 and 0.3/0.7
    samples = pd.DataFrame(
        {
            "member": ["small", "big"] * 3,
            "t_s": [1.0, 1.0, 2.0, 2.0, 3.0, 3.0],
            "usage_usec": [100, 1000, 110, 1090, 140, 1160],
            "level": "container",
        }
    )
    got = share_metrics(samples)
    assert got == {"share_small": pytest.approx(0.2), "share_big": pytest.approx(0.8)}


def test_f8_bands_sit_around_the_predicted_weight_ratios():
    """F8 compares shares as log-ratios: share_small / share_big against the runtime's weights,
    17 : 100 (runc-new) and 4 : 39 (runc-old), each within a relative band that keeps them apart."""
    checks = {c.label: c for c in F8.checks}
    new = checks["share_small / share_big E5 two-container"]
    old = checks["share_small / share_big E10 two-container"]
    assert new.threshold == pytest.approx((0.17 / SHARE_BAND, 0.17 * SHARE_BAND), rel=1e-3)
    assert old.threshold == pytest.approx((4 / 39 / SHARE_BAND, 4 / 39 * SHARE_BAND), rel=1e-3)
    assert old.threshold[1] <= new.threshold[0]  # the band tells the two conversions apart


@pytest.mark.root
def test_sigkill_of_the_runner_mid_phase_restores_everything(binaries, tmp_path):
    """The node pinned to one CPU, every container busy; the runner is SIGKILLed: the guardian
    kills the workloads and removes the cgroups, so the host's cpuset is as before."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create cgroups")
    cpuset_root = Path("/sys/fs/cgroup/cpuset/cpuset.cpus")
    before = cpuset_root.read_text() if cpuset_root.exists() else None
    spec = {"runtime": "runc-new", "phase": "pods", "cpus": "0", "settle_ms": 60_000, "sample_ms": 500, "samples": 3}
    cmd = [
        sys.executable,
        "-m",
        "throttlelab.experiments.runner",
        *runner_arguments("local", "E5", "pods", spec, binaries, tmp_path / "rep0.jsonl"),
    ]
    runner = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(PROJECT)}, stderr=subprocess.PIPE, text=True)
    mine = f"throttlelab-{runner.pid}-"

    def my_pids() -> list[int]:
        return [pid for pid in workload_pids() if mine in Path(f"/proc/{pid}/cgroup").read_text()]

    def my_cgroups() -> list[str]:
        return [p for p in lab_cgroups() if mine in p]

    try:
        deadline = time.monotonic() + 120  # another experiment may hold the machine-wide lock first
        while len(my_pids()) < 4 and time.monotonic() < deadline:  # p100m, p1, and the pod of two
            time.sleep(0.05)
        assert len(my_pids()) == 4, "the busy containers never started"
        runs = [p for p in my_cgroups() if p.startswith("/sys/fs/cgroup/cpuset/")]
        if runs:  # cgroup v1 with a cpuset hierarchy (this machine): the node is pinned to CPU 0
            assert Path(runs[0], "node", "cpuset.cpus").read_text().strip() == "0"
        runner.send_signal(signal.SIGKILL)
        runner.wait(10)
    finally:
        if runner.poll() is None:
            runner.kill()
    deadline = time.monotonic() + 15
    while (my_cgroups() or my_pids()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert my_cgroups() == []
    assert my_pids() == []
    if before is not None:
        assert cpuset_root.read_text() == before
    assert not (tmp_path / "rep0.jsonl").exists()
