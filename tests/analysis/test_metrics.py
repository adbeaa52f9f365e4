"""Per-run metrics and estimates across repeats, against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from conftest import FIXTURE_ROOT
from throttlelab.analysis import metrics, stats, tidy

FIXTURES = FIXTURE_ROOT / "raw_logs"


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    return tidy.parse_runs(sorted(FIXTURES.glob("*/*/rep*.jsonl")))


@pytest.fixture(scope="module")
def per_run(tables) -> pd.DataFrame:
    return metrics.run_metrics(tables)


def _values(per_run: pd.DataFrame, experiment: str, variant: str) -> dict[str, float]:
    mine = per_run[(per_run["experiment"] == experiment) & (per_run["variant"] == variant)]
    return dict(zip(mine["metric"], mine["value"]))


def test_metrics_table_is_long_form_with_units(per_run):
    assert list(per_run.columns) == metrics.METRICS_COLUMNS
    assert set(per_run["metric"]) <= set(metrics.CATALOGUE)
    for row in per_run.itertuples():
        assert row.unit == metrics.CATALOGUE[row.metric].unit
    assert "E1" not in set(per_run["experiment"])  # E1's table is readback.csv


def test_burst_metrics_known_answers(per_run):
    # limit1 rounds: wall 200 | 100 130 120; throttled ms 50 | 100 150 132; periods 2 2 3 2; throttled 1 1 2 1
    got = _values(per_run, "E2a", "limit1")
    assert got["p50_wall_ms"] == 120  # median of the rounds after the first
    assert got["max_wall_ms"] == 130  # the first round's 200 ms is left out
    assert got["nr_periods"] == 9 and got["nr_throttled"] == 5
    assert got["throttled_ratio"] == pytest.approx(5 / 9)
    assert got["throttled_ms"] == 432  # summed over ALL rounds, and never clipped to wall time
    assert got["throttled_over_wall"] == pytest.approx(1.1)  # median of 1.0, 1.1538, 1.1
    assert got["periods_per_wall_period"] == pytest.approx(9 / (2.4 / 0.1))
    assert got["periods_per_round"] == pytest.approx(9 / 4)  # every round's counters
    assert got["throttled_ms_per_round"] == pytest.approx((100 + 150 + 132) / 3)  # rounds after the first
    assert got["mean_wall_ms"] == pytest.approx((100 + 130 + 120) / 3)
    assert got["avg_cores"] == pytest.approx(0.2667)


def test_no_limit_counts_no_periods_and_reports_zero_throttling(per_run):
    got = _values(per_run, "E2a", "nolimit")
    assert got["p50_wall_ms"] == 82  # rounds 80 and 84
    assert got["nr_periods"] == 0 and got["throttled_ratio"] == 0
    assert math.isnan(got["avg_cores"])  # usage unreadable: missing, not 0


def test_unreadable_counter_gives_nan_never_a_partial_sum():
    rounds = pd.DataFrame(
        {
            "round": [0, 1, 2],
            "wall_ms": [10.0, 10.0, 10.0],
            "d_nr_periods": pd.array([1, None, 1], dtype="Int64"),
            "d_nr_throttled": pd.array([0, 0, 0], dtype="Int64"),
            "d_throttled_usec": pd.array([0, 0, 0], dtype="Int64"),
            "d_usage_usec": pd.array([1, 1, 1], dtype="Int64"),
        }
    )
    got = metrics.burst_metrics(rounds, {"elapsed_s": 0.3, "avg_cores": 0.1}, 100_000)
    assert math.isnan(got["nr_periods"]) and math.isnan(got["periods_per_wall_period"])
    assert got["nr_throttled"] == 0


def test_spin_and_gomaxprocs_metrics(per_run):
    assert _values(per_run, "S1", "cpus1500m") == {
        "gomaxprocs": 2,
        "nr_throttled": 9,
        "throttled_ms": 220,
        "avg_cores": 1.495,
        "nr_periods": 10,
    }
    assert _values(per_run, "E3", "go125mod-500m") == {"gomaxprocs": 2, "expected_gomaxprocs": 2, "num_cpu": 2}


def test_latency_metrics_from_requests(per_run):
    got = _values(per_run, "E2b", "clump50")
    # /work: 10, 30, 20, 40 ms and one timed-out request, which counts at the client timeout
    # (the header predates params.timeout: cpulab's default 10 s)
    assert got["work_requests"] == 5 and got["work_errors"] == 1
    assert got["work_max_ms"] == metrics.DEFAULT_LOAD_TIMEOUT_MS
    for q in ("p50", "p75", "p90", "p99", "p99_9"):  # 5 requests: even p50 needs 6
        assert math.isnan(got[f"work_{q}_ms"])
    notes = per_run[(per_run["variant"] == "clump50")].set_index("metric")["note"]
    assert notes["work_p50_ms"] == "/work: n too small for p50: 5 requests (needs 6)"
    assert notes["work_p99_ms"] == "/work: n too small for p99: 5 requests (needs 368)"
    assert notes["work_requests"] == ""
    assert got["ping_errors"] == 0 and math.isnan(got["ping_p50_ms"])
    late = [0.1, 0.2, 0.0, 0.3, 0.4, 0.0, 0.5]
    assert got["late_p99_ms"] == pytest.approx(np.quantile(late, 0.99))


def test_failed_requests_count_at_the_client_timeout():
    lat = [float(x) for x in range(1, 61)]
    ok = [True] * 57 + [False] * 3  # three requests failed (their recorded latency is whatever the client saw)
    requests = pd.DataFrame({"ep": ["work"] * 60, "lat_ms": lat, "ok": ok, "late_ms": [0.0] * 60})
    values, notes = metrics.latency_metrics(requests, timeout_ms=5000.0)
    assert values["work_errors"] == 3 and values["work_requests"] == 60
    assert values["work_max_ms"] == 5000.0
    expected = np.quantile(lat[:57] + [5000.0] * 3, 0.9)
    assert values["work_p90_ms"] == pytest.approx(expected)  # the timeouts sit in the tail
    assert math.isnan(values["work_p99_ms"]) and notes["work_p99_ms"].endswith("60 requests (needs 368)")


def test_the_timeout_comes_from_the_load_header():
    headers = pd.DataFrame({"command": ["serve", "load"], "timeout_ms": [math.nan, 2500.0]})
    assert metrics.load_timeout_ms(headers) == 2500.0
    assert metrics.load_timeout_ms(headers.iloc[:1]) == metrics.DEFAULT_LOAD_TIMEOUT_MS
    assert metrics.load_timeout_ms(None) == metrics.DEFAULT_LOAD_TIMEOUT_MS


def test_a_window_names_what_its_clumps_support():
    """What a window compares, from the design alone (docs/STATISTICS.md §2): the clumps decide, not the requests."""
    e7 = metrics.window_quantile(20, 200)  # quick's E7: 10 s at 20 req/s in clumps of 10
    assert (e7.q, e7.shown, e7.metric()) == (0.75, "p75", "work_p75_ms")
    assert e7.explain().startswith("p75: a p90 needs at least 36 clumps (p99 368). ")
    assert "200 /work requests per run in 20 clumps of 10" in e7.explain()
    e2b = metrics.window_quantile(5, 50)  # quick's E2b and X6: 2.5 s; 50 requests would support p90 (36)
    assert (e2b.q, e2b.shown, e2b.metric()) == (None, "max over 5 clumps", "work_max_ms")
    assert e2b.explain().startswith("max over 5 clumps: a p50 needs at least 6 clumps (p75 13, p90 36, p99 368). ")
    assert "the maximum over its 5 clumps" in e2b.explain()
    steady = metrics.window_quantile(45, 45)  # clump 1: every request its own clump, as the rule for requests
    assert (steady.q, steady.metric("ping")) == (0.9, "ping_p90_ms")
    assert metrics.window_quantile(368, 3680).explain().startswith("p99. ")  # nothing above it to need
    with pytest.raises(ValueError, match="at least one clump"):
        metrics.window_quantile(0, 0)


def test_a_variants_window_comes_from_its_parameters():
    from throttlelab.model.variants import VariantSpec

    quick = {"rps": 20, "clump": 10, "ping_rps": 4}
    e2b = VariantSpec.from_dict("E2b", "clumped-limit", {**quick, "duration_ms": 2500})
    assert metrics.design_window_quantile(e2b).shown == "max over 5 clumps"
    assert metrics.design_window_quantile(e2b, "ping").shown == "p50"  # 10 /ping requests, each its own
    e7 = VariantSpec.from_dict("E7", "one-limit", {**quick, "duration_ms": 10_000})
    assert metrics.design_window_quantile(e7).shown == "p75"
    paper = VariantSpec.from_dict("E2b", "clumped-limit", {"rps": 100, "clump": 50, "duration_ms": 60_000})
    assert metrics.design_window_quantile(paper).shown == "p90"  # 120 clumps of 50: 6,000 requests, no p99
    closed = VariantSpec.from_dict("X6", "closed-500m-g1", {"workers": 16, "duration_ms": 1000})
    assert metrics.design_window_quantile(closed) is None
    short = VariantSpec.from_dict("E7", "one-limit", {**quick, "duration_ms": 200})  # 0.4 clumps round to 0
    assert metrics.design_window_quantile(short) is None


# --------------------------------------------------------------------------
# estimates across repeats


def _metric_frame(variant_values: dict[str, list[float]], metric: str = "p50_wall_ms") -> pd.DataFrame:
    rows = [
        ("local", "E2a", variant, rep, metric, value, metrics.CATALOGUE[metric].unit, "")
        for variant, values in variant_values.items()
        for rep, value in enumerate(values)
    ]
    return pd.DataFrame.from_records(rows, columns=metrics.METRICS_COLUMNS)


def _estimate(values: list[float], metric: str = "p50_wall_ms", level: float = 0.95) -> pd.Series:
    table = metrics.estimates_table(_metric_frame({"v": values}, metric), None, level=level, seed=1)
    assert list(table.columns) == metrics.ESTIMATES_COLUMNS
    return table.iloc[0]


def test_latency_estimate_is_a_geometric_mean_with_a_log_t_interval():
    row = _estimate([10.0, 20.0, 40.0])
    half = sps.t.ppf(0.975, 2) * math.log(2) / math.sqrt(3)  # sd of ln 10, ln 20, ln 40 is ln 2
    assert row["point"] == pytest.approx(20.0)
    assert row["lo"] == pytest.approx(20 * math.exp(-half)) and row["hi"] == pytest.approx(20 * math.exp(half))
    assert (row["scale"], row["n"], row["flag"], row["level"]) == ("log", 3, stats.FLAG_LOW_N, 0.95)
    assert "Student t on log per-run p50_wall_ms, R = 3" in row["method"]


def test_counts_use_the_linear_scale_and_may_be_zero():
    row = _estimate([0.0, 2.0, 4.0, 2.0, 2.0], "nr_throttled")
    half = sps.t.ppf(0.975, 4) * np.std([0, 2, 4, 2, 2], ddof=1) / math.sqrt(5)
    assert row["scale"] == "linear" and row["point"] == pytest.approx(2.0)
    assert row["hi"] - row["point"] == pytest.approx(half) and row["flag"] == ""


def test_confidence_level_comes_from_the_caller():
    wide, narrow = _estimate([10.0, 20.0, 40.0], level=0.95), _estimate([10.0, 20.0, 40.0], level=0.80)
    assert narrow["level"] == 0.80
    assert wide["lo"] < narrow["lo"] < narrow["hi"] < wide["hi"]


@pytest.mark.parametrize(
    "values, flag",
    [
        ([10.0, 12.0], stats.FLAG_N_TOO_SMALL),
        ([10.0, 10.0, 10.0], stats.FLAG_DEGENERATE),
        ([10.0], stats.FLAG_DEGENERATE),
    ],
)
def test_too_few_or_identical_runs_get_no_interval(values, flag):
    row = _estimate(values)
    assert row["flag"] == flag and math.isnan(row["lo"]) and math.isnan(row["hi"])


def test_a_maximum_gets_its_range_not_a_ci():
    row = _estimate([130.0, 150.0, 140.0], "max_wall_ms")
    assert (row["point"], row["lo"], row["hi"], row["flag"]) == (140.0, 130.0, 150.0, metrics.FLAG_RANGE)


def test_settings_are_read_back_values():
    same = _estimate([2.0, 2.0], "gomaxprocs")
    assert (same["point"], same["flag"]) == (2.0, "") and math.isnan(same["lo"])
    differs = _estimate([2.0, 3.0, 2.0], "gomaxprocs")
    assert differs["flag"] == metrics.FLAG_SETTING_VARIES and (differs["lo"], differs["hi"]) == (2.0, 3.0)


def test_a_run_without_the_metric_is_not_dropped_silently():
    row = _estimate([0.2, math.nan, 0.3], "avg_cores")
    assert row["flag"] == metrics.FLAG_UNDEFINED and math.isnan(row["point"])
    assert "undefined in 1 of 3 runs" in row["method"]


def _short_load_runs(seed: int, n_runs: int = 4, size: int = 500) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    req_rows, metric_rows = [], []
    for rep in range(n_runs):
        lat = rng.lognormal(3, 0.5, size)
        req_rows += [("local", "E2b", "v", rep, "load/generator", "work", 0, 1, 0.0, x, 0.0, True, 200) for x in lat]
        metric_rows.append(
            ("local", "E2b", "v", rep, "work_p99_9_ms", math.nan, "ms", stats.too_few_samples(0.999, size))
        )
    columns = [*tidy.RUN_KEYS, *tidy.TABLE_COLUMNS["requests"]]
    return (
        pd.DataFrame.from_records(metric_rows, columns=metrics.METRICS_COLUMNS),
        pd.DataFrame.from_records(req_rows, columns=columns),
    )


def test_p999_of_short_runs_is_pooled_only_from_20_runs():
    per_run, requests = _short_load_runs(seed=3, n_runs=20, size=200)
    first = metrics.estimates_table(per_run, requests, level=0.95, seed=11).iloc[0]
    again = metrics.estimates_table(per_run, requests, level=0.95, seed=11).iloc[0]
    assert first["flag"] == stats.FLAG_CLUSTER_BOOTSTRAP
    assert first["point"] == pytest.approx(np.quantile(requests["lat_ms"], 0.999))
    assert first["lo"] < first["point"] < first["hi"]
    assert (first["lo"], first["hi"]) == (again["lo"], again["hi"])  # seeded: reruns give the same table


def test_p999_of_few_short_runs_says_why_it_is_empty():
    per_run, requests = _short_load_runs(seed=3, n_runs=5)
    row = metrics.estimates_table(per_run, requests, level=0.95, seed=11).iloc[0]
    assert row["flag"] == stats.FLAG_N_TOO_SMALL and math.isnan(row["point"]) and math.isnan(row["lo"])
    assert row["method"] == "not computed in 5 of 5 runs: n too small for p99.9: 500 requests (needs 3,688)"


def test_a_throttled_ratio_is_estimated_from_its_counts():
    rows = []
    for rep, (k, n) in enumerate([(30, 100), (25, 100), (35, 100), (28, 100), (32, 100)]):
        rows += [
            ("local", "E2a", "v", rep, "throttled_ratio", k / n, "ratio", ""),
            ("local", "E2a", "v", rep, "nr_throttled", k, "count", ""),
            ("local", "E2a", "v", rep, "nr_periods", n, "count", ""),
        ]
    frame = pd.DataFrame.from_records(rows, columns=metrics.METRICS_COLUMNS)
    table = metrics.estimates_table(frame, None, level=0.95, seed=1).set_index("metric")
    expected = stats.estimate_proportion([30, 25, 35, 28, 32], [100] * 5)
    assert table.loc["throttled_ratio", "scale"] == "logit"
    assert (table.loc["throttled_ratio", "lo"], table.loc["throttled_ratio", "hi"]) == (expected.lo, expected.hi)
    zeros = frame.assign(value=np.where(frame["metric"] == "nr_periods", 100, 0))
    row = metrics.estimates_table(zeros, None, level=0.95, seed=1).set_index("metric").loc["throttled_ratio"]
    assert (row["point"], row["flag"]) == (0.0, "0 in 5 of 5 runs")


def test_the_scrape_window_pause_counts_each_round_inside_it():
    rounds = pd.DataFrame({"t_s": [0.0, 0.33, 0.66, 0.99], "wall_ms": [100.0, 100.0, 60.0, 100.0]})
    # unlimited median 20 ms; window 300..1000 ms: round 1 (80 extra) whole, round 2 (40) whole,
    # round 3 (80) for 10 of its 100 ms
    pause = metrics.services_metrics.window_pause_ms(rounds, 20.0, 300.0, 1000.0)
    assert pause == pytest.approx(80 + 40 + 8)


def test_estimates_from_fixture_runs_cover_every_metric(per_run, tables):
    table = metrics.estimates_table(per_run, tables["requests"], level=0.95, seed=1)
    assert len(table) == len(per_run)  # one run per variant in the fixtures
    p50 = table[(table["variant"] == "limit1") & (table["metric"] == "p50_wall_ms")].iloc[0]
    assert p50["point"] == pytest.approx(120) and p50["flag"] == stats.FLAG_DEGENERATE  # one run: no interval


def test_a_burst_run_without_its_process_names_the_run(tables):
    broken = dict(tables)
    broken["headers"] = tables["headers"][tables["headers"]["command"] != "burst"]
    with pytest.raises(tidy.InputError, match="run local/E2a/limit1/0: expected exactly one burst process"):
        metrics.run_metrics(broken)


def test_periods_per_round_counts_the_whole_runs_periods_not_only_the_bursts():
    """The kernel also counts the idle period after each burst (docs/LAB.md §1, F3): the rounds' own deltas
    end with the burst, the summary's span the run. 27 periods over 12 rounds (a quick-profile run)."""
    from throttlelab.analysis.metrics.jobs_metrics import burst_metrics

    rounds = pd.DataFrame(
        {
            "round": range(12),
            "wall_ms": [20.0] * 12,
            "d_nr_periods": [0, 1] * 6,
            "d_nr_throttled": [0] * 12,
            "d_throttled_usec": [0] * 12,
        }
    )
    summary = {"nr_periods": 27, "elapsed_s": 6.36, "avg_cores": 0.08}
    got = burst_metrics(rounds, summary, 100_000)
    assert got["periods_per_round"] == pytest.approx(27 / 12)


def test_several_pods_bursts_add_their_counts_and_average_the_rest():
    """X4: one value per run from every pod's burst process; counts are summed (the throttled share is
    their ratio), times are the pods' mean."""
    from throttlelab.analysis.metrics.jobs_metrics import pods_burst_metrics

    def pod(src: str, walls: list[float], throttled: list[int]) -> tuple[dict, dict, list[dict]]:
        rounds = [
            {
                "src": src,
                "round": k,
                "wall_ms": w,
                "d_nr_periods": 2,
                "d_nr_throttled": t,
                "d_throttled_usec": 1000 * t,
                "d_usage_usec": 40_000,
            }
            for k, (w, t) in enumerate(zip(walls, throttled))
        ]
        return (
            {"src": src, "command": "burst", "cg_period_us": 100_000},
            {"src": src, "command": "burst", "elapsed_s": 1.3, "nr_periods": 6, "avg_cores": 0.1},
            rounds,
        )

    parts = [pod("burst-0/burst", [50, 40, 40], [1, 0, 0]), pod("burst-1/burst", [50, 30, 30], [1, 1, 1])]
    got = pods_burst_metrics(
        {
            "headers": pd.DataFrame([p[0] for p in parts]),
            "summaries": pd.DataFrame([p[1] for p in parts]),
            "rounds": pd.DataFrame([r for p in parts for r in p[2]]),
        }
    )
    assert got["p50_wall_ms"] == 35.0  # (40 + 30) / 2: each pod's median round after the first
    assert (got["nr_throttled"], got["nr_periods"]) == (4.0, 12.0)
    assert got["throttled_ratio"] == 4 / 12
    assert got["throttled_per_round"] == 0.5  # pod 0: 0 of 2 later rounds, pod 1: 2 of 2
    assert got["throttled_round_share"] == 0.5  # the pods' mean: 0 and 1


def test_the_throttled_round_share_counts_rounds_not_periods():
    """Rounds after the first with one throttled period or more, over those rounds: a share in [0, 1], however
    many periods a round was throttled in."""

    def rounds(throttled):
        n = len(throttled)
        return pd.DataFrame(
            {
                "round": range(n),
                "wall_ms": [10.0] * n,
                "d_nr_periods": pd.array([3] * n, dtype="Int64"),
                "d_nr_throttled": pd.array(throttled, dtype="Int64"),
                "d_throttled_usec": pd.array([0] * n, dtype="Int64"),
                "d_usage_usec": pd.array([1] * n, dtype="Int64"),
            }
        )

    summary = {"elapsed_s": 0.5, "avg_cores": 0.1}
    # the first round (throttled 3 times) is left out; 2 of the 4 later rounds were throttled, one of them twice
    got = metrics.burst_metrics(rounds([3, 0, 2, 0, 1]), summary, 100_000)
    assert (got["throttled_round_share"], got["throttled_per_round"]) == (0.5, 0.75)
    assert metrics.burst_metrics(rounds([0, 0, 0]), summary, 100_000)["throttled_round_share"] == 0
    # an unreadable counter leaves the share undefined, never a share of the rounds that were read
    assert math.isnan(metrics.burst_metrics(rounds([0, 1, None, 0]), summary, 100_000)["throttled_round_share"])


def test_two_queue_share_counts_the_rounds_whose_threads_ran_on_two_cpus():
    def rounds(spread):
        n = len(spread)
        return pd.DataFrame(
            {
                "round": range(n),
                "wall_ms": [10.0] * n,
                "thread_cpus": pd.array(spread, dtype="Int64"),
                **{c: pd.array([1] * n, dtype="Int64") for c in ("d_nr_periods", "d_nr_throttled", "d_throttled_usec")},
                "d_usage_usec": pd.array([1] * n, dtype="Int64"),
            }
        )

    summary = {"elapsed_s": 0.5, "avg_cores": 0.1}
    # the first round is left out, as for completion times: 2 of the 4 later rounds ran on two CPUs or more
    assert metrics.burst_metrics(rounds([1, 2, 1, 3, 1]), summary, 100_000)["two_queue_share"] == 0.5
    # a round without the reading (a log that predates it) leaves the share undefined, not a partial one
    assert math.isnan(metrics.burst_metrics(rounds([2, 2, None, 2]), summary, 100_000)["two_queue_share"])
    older = rounds([2, 2, 2]).drop(columns="thread_cpus")
    assert math.isnan(metrics.burst_metrics(older, summary, 100_000)["two_queue_share"])
