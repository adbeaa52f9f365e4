"""predictions.csv: the model's numbers per variant, as the findings derive their thresholds from them, for the
figures to draw (they never run the model themselves)."""

from __future__ import annotations

import numpy as np
import pytest

from test_findings import Lab
from throttlelab.analysis.findings import predictions
from throttlelab.analysis.findings.prediction_table import PREDICTIONS_COLUMNS, prediction_table
from throttlelab.model.variants import VariantSpec

BURST = {"build": "go124mod", "threads": 2, "work_ms": 20, "interval_ms": 231, "rounds": 6, "request": "100m"}


def _rows(table, experiment: str, variant: str) -> dict[str, float]:
    mine = table[(table["experiment"] == experiment) & (table["variant"] == variant)]
    return dict(zip(mine["prediction"], mine["value"]))


def test_a_burst_arm_is_predicted_on_the_node_its_processes_saw():
    spec = {**BURST, "limit": "250m", "period_ms": 20}
    lab = Lab(num_cpu=2).add("X2", "period20", spec, {"p50_wall_ms": [50.0] * 3}, period_us=20_000)
    table = prediction_table(lab.evidence())
    assert list(table.columns) == list(PREDICTIONS_COLUMNS)
    arm = predictions.burst_arm(VariantSpec.from_dict("X2", "period20", spec), 2, 20.0)
    assert _rows(table, "X2", "period20") == {
        "p50_wall_ms": arm.median_wall_ms(),
        "throttled_per_round": float(np.mean(arm.burst().throttled_periods)),
        "free_wall_ms": arm.free_wall_ms,
        "run_queues": 2.0,
        "quota_ms": 5.0,
    }
    assert set(table["backend"]) == {"local"}


def test_overlapping_pods_and_steady_arrivals_have_their_own_model():
    lab = Lab(num_cpu=2)
    for variant, stagger in (("synchronized", False), ("staggered", True)):
        lab.add("X4", variant, {**BURST, "limit": "500m", "pods": 2, "stagger": stagger}, {"p50_wall_ms": [40.0] * 3})
    steady = {"build": "go124mod", "request": "500m", "limit": "200m", "work_us": 2000, "rps": 15, "clump": 1}
    lab.add("X5", "use30", {**steady, "request_cpu_us": 4000}, {"throttled_ratio": [0.1] * 3})
    table = prediction_table(lab.evidence())
    together, apart = _rows(table, "X4", "synchronized"), _rows(table, "X4", "staggered")
    assert together["p50_wall_ms"] > apart["p50_wall_ms"]  # four busy threads on two CPUs
    x5 = _rows(table, "X5", "use30")
    assert x5["use"] == pytest.approx(0.3)
    assert 0 < x5["throttled_ratio"] < 1


def test_a_variant_without_one_node_size_and_the_lab_s_experiments_get_no_rows():
    lab = Lab(num_cpu=2)
    lab.add("X1", "budget0", {**BURST, "limit": "250m", "burst_ms": 0}, {"p50_wall_ms": [60.0] * 3})
    lab.header_rows[1]["num_cpu"] = 4  # the runs of one variant saw two CPU counts
    lab.add("E2a", "limit1", {**BURST, "limit": "250m"}, {"p50_wall_ms": [60.0] * 3})
    assert prediction_table(lab.evidence()).empty
