"""The service experiments (E2b, E7, E8, E6, S2): the measuring window, per-connection
balancing with real processes, and a short real E2b run on loopback whose log parses and
that leaves nothing behind. Their analysis: tests/analysis/test_service_analysis.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import lab_cgroups, workload_pids
from load_records import META, header
from throttlelab.analysis import metrics, tidy
from throttlelab.experiments.services_experiments import wall_ns_of, window_start_ns
from throttlelab.backends.base import Output


def test_window_start_is_the_header_time_plus_the_warmup():
    assert wall_ns_of("2026-01-01T00:00:01.250000999Z") == wall_ns_of("2026-01-01T00:00:01Z") + 250_000_000
    out = Output("load", "generator", 0, [header("load/generator", "load")], "", 1.0)
    assert window_start_ns(out) == wall_ns_of("2026-01-01T00:00:01.25Z") + 500_000_000


# --------------------------------------------------------------------------
# real processes


def _serve(binary: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [str(binary), "serve", "-addr=127.0.0.1:0", "-work=200us", "-alloc=0", "-live-mb=0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    for line in proc.stdout:
        record = json.loads(line)
        if record["type"] == "listening":
            return proc, record["addr"]
    raise AssertionError("serve never said where it listens")


def test_per_connection_balancing_spreads_connections_over_targets(binaries):
    servers = []
    try:
        for _ in range(3):
            servers.append(_serve(binaries["go124mod"]))
        targets = ",".join(f"http://{addr}" for _, addr in servers)
        done = subprocess.run(
            [
                str(binaries["go124mod"]),
                "load",
                f"-target={targets}",
                "-rps=60",
                "-clump=12",
                "-ping-rps=10",
                "-warmup=300ms",
                "-duration=1500ms",
                "-seed=7",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        for proc, _ in servers:
            proc.send_signal(signal.SIGTERM)
        for proc, _ in servers:
            proc.wait(timeout=15)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    summary = next(r for r in records if r["type"] == "summary")
    conns = summary["connections_per_target"]
    assert len(conns) == 3 and all(c >= 1 for c in conns), conns  # every target got connections
    reqs = [r for r in records if r["type"] == "req"]
    assert reqs and all(r["ok"] for r in reqs)
    bound: dict[int, int] = {}
    for r in reqs:  # a connection belongs to one target for its whole life
        assert bound.setdefault(r["conn"], r["target"]) == r["target"]
    served = {r["target"] for r in reqs if r["ep"] == "work"}
    assert served == {0, 1, 2}
    assert sum(summary["requests_per_target"]) == len(reqs)


@pytest.mark.root
def test_short_e2b_run_on_loopback_has_no_errors_and_leaves_nothing(real_cgroups, binaries, tmp_path):
    from throttlelab.backends.local import LocalBackend
    from throttlelab.experiments import REGISTRY, Context
    from throttlelab.experiments.runner import experiment_lock, write_atomically
    from throttlelab.model.variants import VariantSpec

    backend = LocalBackend(binaries)
    backend.preflight()
    caps = backend.capabilities()
    two = caps.cpus >= 2
    spec = {
        "build": "go124mod",
        "request": "500m",
        "limit": "200m",
        "work_us": 1000,
        "alloc_bytes": 204800,
        "live_mb": 12,
        "rps": 40,
        "clump": 10,
        "ping_rps": 8,
        "warmup_ms": 300,
        "duration_ms": 1500,
        "node_cpus": "0" if two else None,
        "load_cpus": "1" if two else None,
    }
    ctx = Context(backend=backend, capabilities=caps, node_cpus=None, seed=11)
    with experiment_lock():
        result = REGISTRY["E2b"](VariantSpec.from_dict("E2b", "short", spec), ctx)
    # Other work on this host may run lab processes of its own: look at this run's only.
    mine = f"throttlelab-{os.getpid()}-"
    assert [c for c in lab_cgroups() if mine in c] == []
    started = {r["pid"] for r in result.records if r["type"] == "header"}
    assert len(started) == 2 and not started & set(workload_pids())
    summary = next(r for r in result.records if r["type"] == "summary" and r["src"] == "load/generator")
    assert summary["work"]["errors"] == 0 and summary["ping"]["errors"] == 0
    assert summary["work"]["ok"] > 0 and summary["late_p99_ms"] is not None
    samples = [r for r in result.records if r["type"] == "podstat"]
    assert samples and min(r["t_ms"] for r in samples) < 0 < max(r["t_ms"] for r in samples)
    # the log the runner would write parses, and its metrics are defined
    meta = {**META, "spec": spec, "window_s": result.window_s}
    path = tmp_path / "raw" / "E2b" / "clumped-limit" / "rep0.jsonl"
    write_atomically(path, [meta, *result.records])
    per_run = metrics.run_metrics(tidy.parse_runs([path]))
    got = dict(zip(per_run["metric"], per_run["value"]))
    assert got["work_errors"] == 0 and got["nr_periods"] > 0 and 0 <= got["throttled_ratio"] <= 1
    assert got["gomaxprocs"] == (1 if two else caps.cpus)
    assert os.path.exists(path)
