"""The service experiments (E2b, E7, E8, E6, S2): parsing the load's records into
latencies and counters, per-connection balancing with real processes, their
findings' requirements, and a short real E2b run on loopback that leaves nothing
behind."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import lab_cgroups, workload_pids
from throttlelab.analysis import findings, metrics, tidy
from throttlelab.analysis.metrics import services as service_metrics
from throttlelab.model.variants import VariantSpec
from throttlelab.experiments.services import wall_ns_of, window_start_ns
from throttlelab.backends.base import Output

# --------------------------------------------------------------------------
# a load run, by hand: known latencies and counters

META = {"type": "meta", "schema": 1, "experiment": "E2b", "variant": "clumped-limit", "repeat": 0, "backend": "local",
        "spec": {"clump": 3}, "runtime": "runc-new", "environment": {"kernel": "test"},
        "capabilities": {"cpus": 2, "cgroup_version": 1}, "start": "2026-01-01T00:00:00+00:00",
        "end": "2026-01-01T00:00:05+00:00", "wall_s": 5.0, "window_s": 2.0}


def _header(src: str, command: str, extra: dict | None = None) -> dict:
    return {"type": "header", "src": src, "program": "cpulab", "variant": "go124mod", "go_version": "go1.25",
            "gomaxprocs": 1, "num_cpu": 1, "env": {"GOMAXPROCS": "", "GODEBUG": ""}, "default_godebug": "",
            "cgroup": {}, "command": command, "params": {"warmup": 500.0}, "time": "2026-01-01T00:00:01.25Z",
            **(extra or {})}


def _stats(when: str, periods: int, throttled: int, throttled_usec: int, usage: int, gc: int) -> dict:
    cg = {"quota_us": 20000, "period_us": 100000, "nr_periods": periods, "nr_throttled": throttled,
          "throttled_usec": throttled_usec, "usage_usec": usage}
    return {"type": "stats", "src": "load/generator", "when": when, "target": 0,
            "stats": {"cgroup": cg, "gomaxprocs": 1, "num_gc": gc, "requests": 0, "time_ns": 1}}


WORK_LAT = [10.0, 30.0, 20.0, 40.0, 250.0, 120.0]  # ok /work latencies, from the scheduled send


def _load_records() -> list[dict]:
    src = "load/generator"
    reqs = []
    for i, lat in enumerate(WORK_LAT):
        sched = 100.0 * (i // 3)  # clumps of 3 at 0 and 100 ms
        reqs.append({"type": "req", "src": src, "ep": "work", "target": 0, "conn": i % 3, "sched_ms": sched,
                     "lat_ms": lat, "late_ms": 0.1 * i, "ok": True, "status": 200, "err": ""})
    reqs.append({"type": "req", "src": src, "ep": "work", "target": -1, "conn": -1, "sched_ms": 300.0,
                 "lat_ms": 10000.0, "late_ms": 0.0, "ok": False, "status": 0, "err": "timeout"})
    reqs.append({"type": "req", "src": src, "ep": "ping", "target": 0, "conn": 3, "sched_ms": 50.0, "lat_ms": 1.0,
                 "late_ms": 0.0, "ok": True, "status": 200, "err": ""})
    summary = {"type": "summary", "src": src, "window_s": 2.0,
               "work": {"sent": 7, "ok": 6, "errors": 1, "achieved_rps": 3.0},
               "ping": {"sent": 1, "ok": 1, "errors": 0, "achieved_rps": 0.5}, "late_p99_ms": 0.5}
    server = "e2b/server"
    return [
        META,
        _header(server, "serve"),
        {"type": "listening", "src": server, "addr": "127.0.0.1:1234"},
        _header(src, "load"),
        _stats("before", 10, 2, 5000, 100_000, 3),
        *reqs,
        _stats("after", 30, 8, 45_000, 300_000, 7),
        summary,
        {"type": "process", "src": src, "returncode": 0, "wall_s": 2.5, "stderr_tail": ""},
        {"type": "summary", "src": server, "requests": 7, "num_gc": 7, "cgroup": {}},
        {"type": "process", "src": server, "returncode": 0, "wall_s": 3.0, "stderr_tail": ""},
        *({"type": "podstat", "pod": "e2b", "container": "server", "when": "sample", "seq": k, "t_ms": t,
           "at_ms": t, "nr_periods": k, "nr_throttled": 0, "throttled_usec": 0, "usage_usec": 1000 * k}
          for k, t in enumerate((-50.0, 0.0, 100.0, 2000.0, 2100.0))),
    ]


def _write_log(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "raw" / "E2b" / "clumped-limit" / "rep0.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_load_records_become_latencies_and_window_counters(tmp_path):
    tables = tidy.tidy_tables([_write_log(tmp_path, _load_records())])
    requests = tables["requests"]
    assert len(requests) == 8 and requests["ep"].value_counts().to_dict() == {"work": 7, "ping": 1}
    per_run = metrics.run_metrics(tables)
    got = dict(zip(per_run["metric"], per_run["value"]))
    ok = np.array(WORK_LAT)
    # latency from the scheduled send, ok requests only, quantiles of type 7 (numpy's "linear")
    assert got["work_p50_ms"] == pytest.approx(np.quantile(ok, 0.5))
    assert got["work_p99_ms"] == pytest.approx(np.quantile(ok, 0.99))
    assert got["work_max_ms"] == 250 and got["work_requests"] == 7 and got["work_errors"] == 1
    assert got["late_p99_ms"] == pytest.approx(np.quantile([0.1 * i for i in range(6)] + [0.0, 0.0], 0.99))
    # counters: /stats after minus before, over the window
    assert got["nr_periods"] == 20 and got["nr_throttled"] == 6 and got["throttled_ratio"] == pytest.approx(0.3)
    assert got["throttled_ms"] == 40 and got["avg_cores"] == pytest.approx(0.2 / 2.0)
    assert got["gc_cycles"] == 4 and got["gomaxprocs"] == 1 and got["work_rps"] == 3.0
    stats = tables["target_stats"]
    assert stats[["when", "nr_periods", "num_gc", "quota_us"]].values.tolist() == [["before", 10, 3, 20000],
                                                                                    ["after", 30, 7, 20000]]
    pods = tables["podstats"]
    assert len(pods) == 5 and pods["t_ms"].tolist() == [-50.0, 0.0, 100.0, 2000.0, 2100.0]


def test_a_target_without_its_stats_leaves_the_counters_undefined(tmp_path):
    records = [r for r in _load_records() if not (r["type"] == "stats" and r["when"] == "after")]
    records.insert(5, {"type": "stats", "src": "load/generator", "when": "after", "target": 0, "stats": None,
                       "err": "connection refused"})
    per_run = metrics.run_metrics(tidy.tidy_tables([_write_log(tmp_path, records)]))
    got = dict(zip(per_run["metric"], per_run["value"]))
    assert math.isnan(got["throttled_ratio"]) and math.isnan(got["avg_cores"])
    assert got["work_p50_ms"] == pytest.approx(np.quantile(WORK_LAT, 0.5))  # latencies do not depend on it


def test_window_delta_takes_the_readings_inside_the_window():
    samples = pd.DataFrame({"t_ms": [-50.0, 0.0, 100.0, 2000.0, 2100.0], "nr_periods": [0, 1, 2, 3, 4],
                            "nr_throttled": [0] * 5, "throttled_usec": [0] * 5, "usage_usec": [0, 1000, 2000, 3000, 4000]})
    deltas, span = service_metrics.window_delta(samples, 2000.0)
    assert span == 2.0 and deltas["usage_usec"] == 2000 and deltas["nr_periods"] == 2


def test_busy_cores_counts_only_intervals_with_requests_outstanding():
    # readings every 10 ms; the pod gains 5 ms of CPU per 10 ms while busy (0-40 ms), nothing after
    t = np.arange(0, 101, 10, dtype=float)
    usage = np.minimum(t, 40) / 10 * 5000
    samples = pd.DataFrame({"t_ms": t, "usage_usec": usage})
    requests = pd.DataFrame({"ep": ["work", "work", "ping"], "sched_ms": [0.0, 5.0, 60.0], "lat_ms": [30.0, 35.0, 40.0]})
    assert service_metrics.busy_intervals(requests) == [(0.0, 40.0)]
    assert service_metrics.busy_cores(samples, requests, 100.0) == pytest.approx(0.5)


def test_window_start_is_the_header_time_plus_the_warmup():
    assert wall_ns_of("2026-01-01T00:00:01.250000999Z") == wall_ns_of("2026-01-01T00:00:01Z") + 250_000_000
    out = Output("load", "generator", 0, [_header("load/generator", "load")], "", 1.0)
    assert window_start_ns(out) == wall_ns_of("2026-01-01T00:00:01.25Z") + 500_000_000


# --------------------------------------------------------------------------
# findings: data, and the node requirements


def test_service_findings_are_data_with_reasons():
    ids = [f.id for f in findings.FINDINGS]
    assert {"F6", "F7", "F9", "F10", "F11"} <= set(ids) and ids == sorted(ids, key=lambda i: int(i[1:]))
    for finding in findings.FINDINGS:
        if finding.id in ("F6", "F7", "F9", "F10", "F11"):
            for check in finding.checks:
                assert check.why and check.reference and check.metric in metrics.CATALOGUE


def _evidence(num_cpu: int, rows: list[tuple[str, str, dict, dict[str, list[float]]]], experiments) -> findings.Evidence:
    metric_rows, run_rows, header_rows = [], [], []
    for experiment, variant, spec, values in rows:
        for rep in range(len(next(iter(values.values())))):
            run_rows.append({"experiment": experiment, "variant": variant, "repeat": rep, **VariantSpec.from_dict(experiment, variant, spec).columns()})
            header_rows.append({"experiment": experiment, "variant": variant, "repeat": rep, "num_cpu": num_cpu})
            metric_rows += [("local", experiment, variant, rep, m, v[rep], "") for m, v in values.items()]
    return findings.Evidence(
        metrics=pd.DataFrame.from_records(metric_rows, columns=["backend", "experiment", "variant", "repeat", "metric",
                                                                "value", "unit"]),
        runs=pd.DataFrame(run_rows), headers=pd.DataFrame(header_rows), profile_experiments=frozenset(experiments))


def _by_id(evidence: findings.Evidence) -> dict[str, pd.Series]:
    rows, _ = findings.evaluate(evidence)
    return {r["id"]: r for _, r in rows.iterrows()}


def _s2(procs: int, one=(300, 310, 305, 298, 302), node=(100, 104, 98, 101, 99)):
    return [("S2", "threads-node", {"limit": "250m"}, {"throughput_rps": list(node), "gomaxprocs": [procs] * 5}),
            ("S2", "threads-one", {"limit": "250m", "gomaxprocs": 1}, {"throughput_rps": list(one),
                                                                       "gomaxprocs": [1] * 5})]


def test_f11_needs_threads_that_drain_the_quota_fast():
    got = _by_id(_evidence(2, _s2(2), ("S2",)))["F11"]
    assert got["verdict"] == findings.NOT_TESTABLE
    assert "GOMAXPROCS 2 drains the 25 ms quota in 12.5 ms" in got["reason"] and ">= 8" in got["reason"]
    assert got["effect"] == pytest.approx(3.0, rel=0.05)  # measured anyway, shown beside the reason
    assert _by_id(_evidence(8, _s2(8), ("S2",)))["F11"]["verdict"] == findings.REPRODUCED


def test_f10_on_one_cpu_cannot_overstate():
    rows = [("E6", "limit", {"threads": 2}, {"overstatement": [1.8, 1.9, 1.7, 1.85, 1.75]})]
    assert _by_id(_evidence(2, rows, ("E6",)))["F10"]["verdict"] == findings.REPRODUCED
    one = _by_id(_evidence(1, rows, ("E6",)))["F10"]
    assert one["verdict"] == findings.NOT_TESTABLE and "1 run queue" in one["reason"]


def test_f6_reproduced_on_the_labs_shape():
    clumped = {"throttled_ratio": [0.3, 0.32, 0.28, 0.31, 0.29], "work_p99_ms": [300, 320, 280, 310, 290]}
    rows = [("E2b", "clumped-limit", {}, clumped),
            ("E2b", "steady-limit", {}, {"throttled_ratio": [0.0, 0.01, 0.0, 0.02, 0.0], "work_p99_ms": [5] * 5}),
            ("E2b", "clumped-nolimit", {}, {"throttled_ratio": [0.0] * 5, "work_p99_ms": [60, 70, 65, 62, 68]})]
    got = _by_id(_evidence(1, rows, ("E2b",)))["F6"]
    assert got["verdict"] == findings.REPRODUCED, got["reason"]


# --------------------------------------------------------------------------
# real processes


def _serve(binary: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([str(binary), "serve", "-addr=127.0.0.1:0", "-work=200us", "-alloc=0", "-live-mb=0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
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
        done = subprocess.run([str(binaries["go124mod"]), "load", f"-target={targets}", "-rps=60", "-clump=12",
                               "-ping-rps=10", "-warmup=300ms", "-duration=1500ms", "-seed=7"],
                              capture_output=True, text=True, timeout=60)
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
    spec = {"build": "go124mod", "request": "500m", "limit": "200m", "work_us": 1000, "alloc_bytes": 204800,
            "live_mb": 12, "rps": 40, "clump": 10, "ping_rps": 8, "warmup_ms": 300, "duration_ms": 1500,
            "node_cpus": "0" if two else None, "load_cpus": "1" if two else None}
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
    per_run = metrics.run_metrics(tidy.tidy_tables([path]))
    got = dict(zip(per_run["metric"], per_run["value"]))
    assert got["work_errors"] == 0 and got["nr_periods"] > 0 and 0 <= got["throttled_ratio"] <= 1
    assert got["gomaxprocs"] == (1 if two else caps.cpus)
    assert os.path.exists(path)
