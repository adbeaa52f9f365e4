"""The service experiments' analysis: a load run's records become latencies and window counters,
and the service findings (F6, F7, F9, F10, F11) are data with reasons and node requirements."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from conftest import after_every_revision
from load_records import META, header, write_log
from throttlelab.analysis import findings, metrics, tidy
from throttlelab.analysis.metrics import services_metrics as service_metrics
from throttlelab.model.variants import VariantSpec

# --------------------------------------------------------------------------
# a load run, by hand: known latencies and counters


def _stats(when: str, periods: int, throttled: int, throttled_usec: int, usage: int, gc: int) -> dict:
    cg = {
        "quota_us": 20000,
        "period_us": 100000,
        "nr_periods": periods,
        "nr_throttled": throttled,
        "throttled_usec": throttled_usec,
        "usage_usec": usage,
    }
    return {
        "type": "stats",
        "src": "load/generator",
        "when": when,
        "target": 0,
        "stats": {"cgroup": cg, "gomaxprocs": 1, "num_gc": gc, "requests": 0, "time_ns": 1},
    }


WORK_LAT = [10.0, 30.0, 20.0, 40.0, 250.0, 120.0]  # ok /work latencies, from the scheduled send


def _load_records() -> list[dict]:
    src = "load/generator"
    reqs = []
    for i, lat in enumerate(WORK_LAT):
        sched = 100.0 * (i // 3)  # clumps of 3 at 0 and 100 ms
        reqs.append(
            {
                "type": "req",
                "src": src,
                "ep": "work",
                "target": 0,
                "conn": i % 3,
                "sched_ms": sched,
                "lat_ms": lat,
                "late_ms": 0.1 * i,
                "ok": True,
                "status": 200,
                "err": "",
            }
        )
    reqs.append(
        {
            "type": "req",
            "src": src,
            "ep": "work",
            "target": -1,
            "conn": -1,
            "sched_ms": 300.0,
            "lat_ms": 10000.0,
            "late_ms": 0.0,
            "ok": False,
            "status": 0,
            "err": "timeout",
        }
    )
    reqs.append(
        {
            "type": "req",
            "src": src,
            "ep": "ping",
            "target": 0,
            "conn": 3,
            "sched_ms": 50.0,
            "lat_ms": 1.0,
            "late_ms": 0.0,
            "ok": True,
            "status": 200,
            "err": "",
        }
    )
    summary = {
        "type": "summary",
        "src": src,
        "window_s": 2.0,
        "work": {"sent": 7, "ok": 6, "errors": 1, "achieved_rps": 3.0},
        "ping": {"sent": 1, "ok": 1, "errors": 0, "achieved_rps": 0.5},
        "late_p99_ms": 0.5,
    }
    server = "e2b/server"
    return [
        META,
        header(server, "serve"),
        {"type": "listening", "src": server, "addr": "127.0.0.1:1234"},
        header(src, "load"),
        _stats("before", 10, 2, 5000, 100_000, 3),
        *reqs,
        _stats("after", 30, 8, 45_000, 300_000, 7),
        summary,
        {"type": "process", "src": src, "returncode": 0, "wall_s": 2.5, "stderr_tail": ""},
        {"type": "summary", "src": server, "requests": 7, "num_gc": 7, "cgroup": {}},
        {"type": "process", "src": server, "returncode": 0, "wall_s": 3.0, "stderr_tail": ""},
        *(
            {
                "type": "podstat",
                "pod": "e2b",
                "container": "server",
                "when": "sample",
                "seq": k,
                "t_ms": t,
                "at_ms": t,
                "nr_periods": k,
                "nr_throttled": 0,
                "throttled_usec": 0,
                "usage_usec": 1000 * k,
            }
            for k, t in enumerate((-50.0, 0.0, 100.0, 2000.0, 2100.0))
        ),
    ]


def test_load_records_become_latencies_and_window_counters(tmp_path):
    tables = tidy.parse_runs([write_log(tmp_path, _load_records())])
    requests = tables["requests"]
    assert len(requests) == 8 and requests["ep"].value_counts().to_dict() == {"work": 7, "ping": 1}
    per_run = metrics.run_metrics(tables)
    got = dict(zip(per_run["metric"], per_run["value"]))
    # latency from the scheduled send, quantiles of type 7 (numpy's "linear"); the timed-out request
    # counts at the client timeout (the header predates params.timeout: cpulab's default 10 s)
    every = np.array([*WORK_LAT, metrics.DEFAULT_LOAD_TIMEOUT_MS])
    assert got["work_p50_ms"] == pytest.approx(np.quantile(every, 0.5))
    # 7 requests: p50 needs 6, p99 needs 368 (docs/STATISTICS.md §2): not computed, and the note says why
    assert math.isnan(got["work_p99_ms"]) and math.isnan(got["work_p90_ms"])
    notes = dict(zip(per_run["metric"], per_run["note"]))
    assert notes["work_p99_ms"] == "/work: n too small for p99: 7 requests (needs 368)"
    assert got["work_max_ms"] == metrics.DEFAULT_LOAD_TIMEOUT_MS and got["work_requests"] == 7
    assert got["work_errors"] == 1
    assert got["late_p99_ms"] == pytest.approx(np.quantile([0.1 * i for i in range(6)] + [0.0, 0.0], 0.99))
    # counters: /stats after minus before, over the window
    assert got["nr_periods"] == 20 and got["nr_throttled"] == 6 and got["throttled_ratio"] == pytest.approx(0.3)
    assert got["throttled_ms"] == 40 and got["avg_cores"] == pytest.approx(0.2 / 2.0)
    assert got["gc_cycles"] == 4 and got["gomaxprocs"] == 1 and got["work_rps"] == 3.0
    stats = tables["target_stats"]
    assert stats[["when", "nr_periods", "num_gc", "quota_us"]].values.tolist() == [
        ["before", 10, 3, 20000],
        ["after", 30, 7, 20000],
    ]
    pods = tables["podstats"]
    assert len(pods) == 5 and pods["t_ms"].tolist() == [-50.0, 0.0, 100.0, 2000.0, 2100.0]


def test_a_target_without_its_stats_leaves_the_counters_undefined(tmp_path):
    records = [r for r in _load_records() if not (r["type"] == "stats" and r["when"] == "after")]
    records.insert(
        5,
        {
            "type": "stats",
            "src": "load/generator",
            "when": "after",
            "target": 0,
            "stats": None,
            "err": "connection refused",
        },
    )
    per_run = metrics.run_metrics(tidy.parse_runs([write_log(tmp_path, records)]))
    got = dict(zip(per_run["metric"], per_run["value"]))
    assert math.isnan(got["throttled_ratio"]) and math.isnan(got["avg_cores"])
    every = [*WORK_LAT, metrics.DEFAULT_LOAD_TIMEOUT_MS]
    assert got["work_p50_ms"] == pytest.approx(np.quantile(every, 0.5))  # latencies do not depend on it


def test_window_delta_takes_the_readings_inside_the_window():
    samples = pd.DataFrame(
        {
            "t_ms": [-50.0, 0.0, 100.0, 2000.0, 2100.0],
            "nr_periods": [0, 1, 2, 3, 4],
            "nr_throttled": [0] * 5,
            "throttled_usec": [0] * 5,
            "usage_usec": [0, 1000, 2000, 3000, 4000],
        }
    )
    deltas, span = service_metrics.window_delta(samples, 2000.0)
    assert span == 2.0 and deltas["usage_usec"] == 2000 and deltas["nr_periods"] == 2


def test_busy_cores_counts_only_intervals_with_requests_outstanding():
    # readings every 10 ms; the pod gains 5 ms of CPU per 10 ms while busy (0-40 ms), nothing after
    t = np.arange(0, 101, 10, dtype=float)
    usage = np.minimum(t, 40) / 10 * 5000
    samples = pd.DataFrame({"t_ms": t, "usage_usec": usage})
    requests = pd.DataFrame(
        {"ep": ["work", "work", "ping"], "sched_ms": [0.0, 5.0, 60.0], "lat_ms": [30.0, 35.0, 40.0]}
    )
    assert service_metrics.busy_intervals(requests) == [(0.0, 40.0)]
    assert service_metrics.busy_cores(samples, requests, 100.0) == pytest.approx(0.5)


# --------------------------------------------------------------------------
# findings: data, and the node requirements


def test_service_findings_are_data_with_reasons():
    ids = [f.id for f in findings.FINDINGS]
    assert {"F6", "F7", "F9", "F10", "F11"} <= set(ids) and ids == sorted(ids, key=lambda i: int(i[1:]))
    for finding in findings.FINDINGS:
        if finding.id in ("F6", "F7", "F9", "F10", "F11"):
            for check in finding.checks:
                # a latency check names its quantile once the runs say which they support ("{q}")
                metric = check.metric.replace("{q}", "p99")
                assert check.why and check.reference and (metric in metrics.CATALOGUE or check.values)


#: when these made-up runs were made: after every revision of the threshold registry, so every check judges them
MADE = after_every_revision()


def _evidence(
    num_cpu: int, rows: list[tuple[str, str, dict, dict[str, list[float]]]], experiments
) -> findings.Evidence:
    metric_rows, run_rows, header_rows = [], [], []
    for experiment, variant, spec, values in rows:
        for rep in range(len(next(iter(values.values())))):
            run_rows.append(
                {
                    "experiment": experiment,
                    "variant": variant,
                    "repeat": rep,
                    "start": MADE,
                    **VariantSpec.from_dict(experiment, variant, spec).columns(),
                }
            )
            header_rows.append({"experiment": experiment, "variant": variant, "repeat": rep, "num_cpu": num_cpu})
            metric_rows += [("local", experiment, variant, rep, m, v[rep], "") for m, v in values.items()]
    return findings.Evidence(
        metrics=pd.DataFrame.from_records(
            metric_rows, columns=["backend", "experiment", "variant", "repeat", "metric", "value", "unit"]
        ),
        runs=pd.DataFrame(run_rows),
        headers=pd.DataFrame(header_rows),
        profile_experiments=frozenset(experiments),
    )


def _by_id(evidence: findings.Evidence) -> dict[str, pd.Series]:
    rows, _ = findings.evaluate(evidence)
    return {r["id"]: r for _, r in rows.iterrows()}


def _s2(procs: int, one=(300, 310, 305, 298, 302), node=(100, 104, 98, 101, 99)):
    return [
        ("S2", "threads-node", {"limit": "250m"}, {"throughput_rps": list(node), "gomaxprocs": [procs] * 5}),
        ("S2", "threads-one", {"limit": "250m", "gomaxprocs": 1}, {"throughput_rps": list(one), "gomaxprocs": [1] * 5}),
    ]


def test_f11_needs_threads_that_drain_the_quota_fast():
    got = _by_id(_evidence(2, _s2(2), ("S2",)))["F11"]
    assert got["verdict"] == findings.NOT_TESTABLE
    assert "GOMAXPROCS 2 drains the 25 ms quota in 12.5 ms" in got["reason"] and ">= 8" in got["reason"]
    assert got["effect"] == pytest.approx(3.0, rel=0.05)  # measured anyway, shown beside the reason
    assert _by_id(_evidence(8, _s2(8), ("S2",)))["F11"]["verdict"] == findings.REPRODUCED


E6 = {"threads": 2, "work_ms": 20, "interval_ms": 330, "rounds": 20, "limit": "250m"}


def test_f10_on_one_cpu_cannot_overstate():
    rows = [("E6", "limit", E6, {"overstatement": [1.8, 1.9, 1.7, 1.85, 1.75]})]
    assert _by_id(_evidence(2, rows, ("E6",)))["F10"]["verdict"] == findings.REPRODUCED
    one = _by_id(_evidence(1, rows, ("E6",)))["F10"]
    assert one["verdict"] == findings.NOT_TESTABLE and "1 run queue" in one["reason"]


LAB_E2B = {"work_us": 5000, "rps": 100, "duration_ms": 60000, "node_cpus": "0-7", "request": "500m"}


def _counts(throttled: list[int], periods: int = 600) -> dict[str, list[float]]:
    return {
        "nr_throttled": throttled,
        "nr_periods": [periods] * len(throttled),
        "throttled_ratio": [k / periods if periods else 0.0 for k in throttled],
    }


def test_f6_reproduced_on_the_labs_shape():
    """The paper profile's parameters (the lab's: 100 req/s of 5 ms work, limit 2, clumps of 50, 8 CPUs),
    60 s windows of 6,000 requests in 120 clumps of 50: F6 compares p90 (a p99 needs 368 clumps)."""
    requests = {"work_requests": [6000] * 5}
    clumped = {
        **_counts([180, 190, 170, 185, 175]),
        **requests,
        "work_p90_ms": [300, 320, 280, 310, 290],
        "avg_cores": [0.62, 0.6, 0.58, 0.61, 0.6],
    }
    rows = [
        ("E2b", "clumped-limit", {**LAB_E2B, "limit": 2, "clump": 50}, clumped),
        (
            "E2b",
            "steady-limit",
            {**LAB_E2B, "limit": 2, "clump": 1},
            {**_counts([0, 1, 0, 2, 0]), **requests, "work_p90_ms": [5] * 5},
        ),
        (
            "E2b",
            "clumped-nolimit",
            {**LAB_E2B, "limit": None, "clump": 50},
            {**_counts([0] * 5, 0), **requests, "work_p90_ms": [60, 70, 65, 62, 68]},
        ),
    ]
    got = _by_id(_evidence(8, rows, ("E2b",)))["F6"]
    assert got["verdict"] == findings.REPRODUCED, got["reason"]
    _, checks = findings.evaluate(_evidence(8, rows, ("E2b",)))
    assert "work p90 clumped-limit / clumped-nolimit" in set(checks["check"])


def test_a_variant_without_the_models_parameters_is_not_testable_by_name():
    rows = [
        (
            "E2b",
            v,
            {},
            {
                "throttled_ratio": [0.3] * 5,
                "nr_throttled": [3] * 5,
                "nr_periods": [10] * 5,
                "work_requests": [6000] * 5,
                "work_p99_ms": [300] * 5,
                "avg_cores": [0.6] * 5,
            },
        )
        for v in ("clumped-limit", "steady-limit", "clumped-nolimit")
    ]
    rows_, checks = findings.evaluate(_evidence(8, rows, ("E2b",)))
    f6 = checks[checks["id"] == "F6"]
    assert (f6["requirement"] == "the variant's parameters").all()
    assert rows_.set_index("id").loc["F6", "verdict"] == findings.NOT_TESTABLE
