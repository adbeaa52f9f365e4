"""predictions.csv: what the model predicts for each variant of our experiments, as the findings derive it.

The figures of our experiments (X1-X5) draw the model where the lab's figure would be; they read these
rows instead of running the model again, so a figure shows the very numbers the thresholds came from: each
variant's arm on the node its processes saw (:meth:`Evidence.num_cpu`, :meth:`Evidence.period_ms`), as
the family modules build it. A variant the model cannot be set up for (its processes saw no single CPU
count) has no rows, and its figure no model mark.

One row per (variant, prediction): ``prediction`` names the quantity, a per-run metric of metrics.csv where
it predicts one (``p50_wall_ms``, ``throttled_per_round``, ``throttled_ratio``), else what the figures need
beside it (``free_wall_ms``, ``run_queues``, ``quota_ms``, ``use``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd

from throttlelab.analysis.findings import predictions
from throttlelab.analysis.findings.engine import Evidence, Unmet

PREDICTIONS_COLUMNS = ("backend", "experiment", "variant", "prediction", "value", "unit")

#: (prediction, value, unit) of one variant
Rows = list[tuple[str, float, str]]


def burst_rows(evidence: Evidence, experiment: str, variant: str) -> Rows:
    """A burst under CFS (X1-X3): the median completion of a round, throttled periods per round, the burst
    without a limit, its run queues and its quota."""
    arm = predictions.burst_arm(
        evidence.spec(experiment, variant),
        evidence.num_cpu(experiment, variant),
        evidence.period_ms(experiment, variant),
    )
    burst = arm.burst()
    rows = [
        ("p50_wall_ms", float(np.median(burst.wall_ms)), "ms"),
        ("throttled_per_round", float(np.mean(burst.throttled_periods)), "periods"),
        ("free_wall_ms", arm.free_wall_ms, "ms"),
        ("run_queues", float(arm.queues), "queues"),
    ]
    if arm.quota_ms is not None:
        rows.append(("quota_ms", arm.quota_ms, "ms"))
    return rows


def overlap_rows(evidence: Evidence, experiment: str, variant: str) -> Rows:
    """One pod's burst among several (X4), bursting together unless the variant staggers them."""
    spec = evidence.spec(experiment, variant)
    arm = predictions.burst_arm(spec, evidence.num_cpu(experiment, variant), evidence.period_ms(experiment, variant))
    burst = predictions.overlap_burst(arm, int(spec.pods or 2), not spec.stagger)
    return [
        ("p50_wall_ms", float(np.median(burst.wall_ms)), "ms"),
        ("throttled_per_round", float(np.mean(burst.throttled_periods)), "periods"),
    ]


def steady_rows(evidence: Evidence, experiment: str, variant: str) -> Rows:
    """Steady Poisson arrivals under a quota (X5): the share of active periods throttled, and the average use
    of the limit."""
    arm = predictions.steady_arm(evidence.spec(experiment, variant), evidence.period_ms(experiment, variant))
    return [("throttled_ratio", arm.throttled_share(), "share"), ("use", arm.use, "share of the limit")]


#: the model of each experiment whose figure draws it, as its findings use it
MODEL_OF: dict[str, Callable[[Evidence, str, str], Rows]] = {
    "X1": burst_rows,
    "X2": burst_rows,
    "X3": burst_rows,
    "X4": overlap_rows,
    "X5": steady_rows,
}


def _variant_rows(evidence: Evidence) -> Iterator[tuple[str, str, str, str, float, str]]:
    design = evidence.runs.drop_duplicates(["experiment", "variant"])
    for backend, experiment, variant in zip(design["backend"], design["experiment"], design["variant"]):
        model = MODEL_OF.get(experiment)
        if model is None:
            continue
        try:
            rows = model(evidence, experiment, variant)
        except Unmet:  # no single node size: the model has nothing to say for this variant
            continue
        for prediction, value, unit in rows:
            yield backend, experiment, variant, prediction, value, unit


def prediction_table(evidence: Evidence) -> pd.DataFrame:
    """predictions.csv: every prediction of the model for the variants the runs hold, in the runs' order."""
    return pd.DataFrame(list(_variant_rows(evidence)), columns=list(PREDICTIONS_COLUMNS))
