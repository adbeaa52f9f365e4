"""The statistics the report prints beside the estimates (analysis/report_statistics.py): the contrasts
of two variants, the spread of host interference and the suspect runs of the load generator, computed in
the analysis so the page only renders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import e2b_clumped_arms
from throttlelab.analysis import report_statistics, stats, tidy


NO_RUNS = pd.DataFrame(columns=["experiment", "variant", "repeat"])


def _metrics(rows):
    return pd.DataFrame.from_records(rows, columns=["experiment", "variant", "repeat", "metric", "value"])


def _s2(one, node):
    rows = [("S2", "threads-one", r, "throughput_rps", v) for r, v in enumerate(one)]
    return _metrics(rows + [("S2", "threads-node", r, "throughput_rps", v) for r, v in enumerate(node)])


def test_a_contrast_is_the_ratio_of_geometric_means_with_its_interval():
    one, node = [120.0, 130.0, 125.0], [60.0, 65.0, 58.0]
    table = report_statistics.contrasts_table(_s2(one, node), NO_RUNS, 0.95)
    row = table[table["experiment"] == "S2"].iloc[0]
    expected = stats.compare(np.array(one), np.array(node), log=True, level=0.95, label="per-run throughput_rps")
    assert (row["effect"], row["lo"], row["hi"]) == (expected.effect, expected.lo, expected.hi)
    assert (row["n"], row["n_baseline"], row["note"]) == (3, 3, "")
    assert list(table.columns) == report_statistics.CONTRAST_COLUMNS and len(table) == len(report_statistics.CONTRASTS)


@pytest.mark.parametrize(
    ("one", "node", "note"),
    [
        ([], [60.0], "not measured: this profile has no S2 threads-one (its section says why)"),
        ([1.0], [], "not measured: this profile has no S2 threads-node (its section says why)"),
        ([0.0, 2.0], [60.0], "undefined (a run measured 0)"),
    ],
)
def test_a_contrast_that_cannot_be_drawn_says_why(one, node, note):
    row = report_statistics.contrasts_table(_s2(one, node), NO_RUNS, 0.95).iloc[0]
    assert row["note"] == note and np.isnan(row["effect"])


@pytest.mark.parametrize(
    ("window", "metric"),
    [
        # 20 req/s in clumps of 10 for 2.5 s: 5 clumps per run, too few for any quantile, though 50 requests
        # would support a p90 if they were independent
        ({"rps": 20, "clump": 10, "duration_ms": 2500}, "work_max_ms"),
        # 200 req/s in clumps of 10 for 10 s: 200 clumps support a p90, not a p99 (368)
        ({"rps": 200, "clump": 10, "duration_ms": 10000}, "work_p90_ms"),
    ],
)
def test_e2bs_contrast_compares_what_the_arms_independent_clumps_support(window, metric):
    runs, per_run = e2b_clumped_arms(**window)
    row = report_statistics.contrasts_table(per_run, runs, 0.95).iloc[1]
    assert row["metric"] == metric and row["n"] == 3 and row["note"] == ""


def test_the_interference_spread_is_over_every_run():
    runs = pd.DataFrame({"other_share": [0.01, 0.2, np.nan], "orchestrator_cpu": [0.001, 0.003, 0.002]})
    row = report_statistics.interference_table(runs).iloc[0]
    assert row["runs"] == 3 and (row["other_share_min"], row["other_share_max"]) == (0.01, 0.2)
    assert row["orchestrator_cpu_median"] == 0.002 and row["orchestrator_cpu_max"] == 0.003
    assert row["orchestrator_cpu_p95"] == pytest.approx(0.0029)
    empty = report_statistics.interference_table(pd.DataFrame({"x": [1]})).iloc[0]
    assert empty["runs"] == 1 and np.isnan(empty["orchestrator_cpu_median"])


def test_a_run_is_suspect_when_its_send_lateness_p99_is_above_the_bar():
    rows = [
        ("local", "E7", "one-limit", rep, metric, value)
        for rep, late, errors in ((0, 0.4, 0.0), (1, 7.5, 3.0), (2, np.nan, 1.0))
        for metric, value in (("late_p99_ms", late), ("work_errors", errors))
    ]
    rows.append(("local", "E2a", "limit1", 0, "work_errors", 2.0))  # no lateness: not a load-driven run
    metrics = pd.DataFrame.from_records(rows, columns=["backend", "experiment", "variant", "repeat", "metric", "value"])
    table = report_statistics.load_generator_table(metrics)
    assert list(table.columns) == report_statistics.LOAD_GENERATOR_COLUMNS
    assert table["suspect"].tolist() == [False, True, False]  # no lateness measured is not suspect
    assert table["work_errors"].tolist() == [0.0, 3.0, 1.0] and set(table["experiment"]) == {"E7"}
    assert set(table["suspect_above_ms"]) == {5.0}


# --------------------------------------------------------------------------
# setup.csv: the run as a whole, as a comparison of runs heads its column

FIXTURE_TABLES = Path(__file__).resolve().parents[1] / "fixtures" / "tables"


def _environment():
    return tidy.read_table(FIXTURE_TABLES / "environment.csv", "environment")


def _runs():
    return tidy.read_table(FIXTURE_TABLES / "runs.csv", "runs")


def test_the_setup_row_names_backend_profile_runtime_kernel_and_cpus_of_the_fixture_run():
    table = report_statistics.setup_table(_environment(), _runs(), "ci", 0.95)
    assert list(table.columns) == report_statistics.SETUP_COLUMNS and len(table) == 1
    row = table.iloc[0]
    assert (row["backend"], row["profile"], row["cgroup_version"], row["cpus"]) == ("local", "ci", "1", "2")
    assert row["kernel"] == "6.1.0-28-cloud-amd64"
    assert row["runtime"] == "none (cgroups written by the lab)" and row["runtime_version"] == "as runc-new converts"
    assert row["runs"] == len(_runs()) and row["confidence"] == 0.95


def test_a_value_that_differs_between_runs_lists_each_once():
    environment = _environment()
    environment.loc[environment.index[-1], "kernel"] = "6.12.9"
    row = report_statistics.setup_table(environment, _runs(), "ci", 0.95).iloc[0]
    assert row["kernel"] == "6.1.0-28-cloud-amd64 / 6.12.9"


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (
            {
                "env.versions.Docker engine": "27.3.1",
                "env.versions.containerd": "1.7.22",
                "env.versions.runc": "1.1.14",
            },
            ("docker", "Docker engine 27.3.1, containerd 1.7.22, runc 1.1.14"),
        ),
        (
            {"env.container_runtime": "containerd://2.3.4", "env.runc": "1.4.3", "env.kubelet": "v1.34.11"},
            ("containerd", "containerd 2.3.4, runc 1.4.3, kubelet v1.34.11"),
        ),
        ({"runtime_conversion": "runc-old"}, ("none (cgroups written by the lab)", "as runc-old converts")),
    ],
)
def test_the_runtime_and_its_versions_come_from_what_each_backend_records(facts, expected):
    assert report_statistics.runtime_of({"runtime_conversion": "runc-new", **facts}) == expected
