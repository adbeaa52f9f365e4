"""Across repeats -> estimates.csv: one row per (experiment, variant, metric).

Estimates come from :func:`throttlelab.analysis.stats.estimate` on the per-run values
(the run is the unit of replication, shared/STATS.md §1), never from pooled rounds or
requests; the one exception is a p99.9 from runs too short for their own, pooled with
whole runs resampled (STATS.md §2). Latencies and completion times are estimated on the
log scale (geometric mean, asymmetric interval); quantities that can be 0 (counts,
throttled time, ratios) on the linear scale; how each metric is summarised is its
:data:`~throttlelab.analysis.metrics.catalogue.CATALOGUE` entry.
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from throttlelab.analysis import stats
from throttlelab.analysis.metrics.catalogue import CATALOGUE
from throttlelab.analysis.metrics.common import MetricSpec, Scale
from throttlelab.analysis.tidy import RUN_KEYS

FLAG_RANGE = "range, not a CI"
FLAG_SETTING_VARIES = "differs between runs"
FLAG_UNDEFINED = "undefined"

ESTIMATES_COLUMNS = [
    "backend", "experiment", "variant", "metric", "unit", "point", "lo", "hi", "n", "level", "scale", "method", "flag",
]


@dataclass(frozen=True)
class Summarised:
    """One row of estimates.csv, before the identifiers are added."""

    point: float
    lo: float
    hi: float
    n: int
    scale: Scale
    method: str
    flag: str


def _quietly(fn: Callable[[], stats.Estimate]) -> stats.Estimate:
    """Run a stats call whose DegenerateWarning is already carried by the returned flag."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateWarning)
        return fn()


def summarise(values: np.ndarray, spec: MetricSpec, level: float) -> Summarised:
    """Point and interval (or range, or setting) of one metric over one variant's runs."""
    n = int(values.size)
    missing = int(np.isnan(values).sum())
    if missing:
        # A metric the run could not define (a counter that was unreadable) is not
        # estimated from the other runs: that would silently drop runs.
        return Summarised(math.nan, math.nan, math.nan, n, spec.scale,
                          f"{spec.name} undefined in {missing} of {n} runs", FLAG_UNDEFINED)
    if spec.summary == "range":
        return Summarised(float(stats.quantile(values, 0.5)), float(values.min()), float(values.max()), n, "linear",
                          f"median and range of per-run {spec.name}, R = {n} (a maximum gets no CI)", FLAG_RANGE)
    if spec.summary == "setting":
        if np.ptp(values) == 0:
            runs = "the one run" if n == 1 else f"all {n} runs"
            return Summarised(float(values[0]), math.nan, math.nan, n, "linear", f"read back, identical in {runs}", "")
        return Summarised(float(stats.quantile(values, 0.5)), float(values.min()), float(values.max()), n, "linear",
                          f"read back; median and range over {n} runs", FLAG_SETTING_VARIES)
    est = _quietly(lambda: stats.estimate(values, log=spec.scale == "log", level=level, label=f"per-run {spec.name}"))
    return Summarised(est.point, est.lo, est.hi, est.n, est.scale, est.method, est.flag)


def pooled_p999(latency_runs: list[np.ndarray], level: float, rng: np.random.Generator) -> Summarised:
    """p99.9 from runs too short for their own: pooled, with whole runs resampled (STATS.md §2)."""
    est = _quietly(lambda: stats.cluster_bootstrap_quantile(latency_runs, 0.999, rng=rng, level=level))
    return Summarised(est.point, est.lo, est.hi, est.n, est.scale, est.method, est.flag)


def _group_seed(seed: int, key: tuple[Any, ...]) -> np.random.Generator:
    """A generator per (experiment, variant, metric): the same numbers whatever else is in the table."""
    return np.random.default_rng([seed, zlib.crc32("/".join(map(str, key)).encode())])


def _ok_latencies(requests: pd.DataFrame, ep: str) -> list[np.ndarray]:
    mine = requests[(requests["ep"] == ep) & requests["ok"].astype(bool)]
    return [group["lat_ms"].to_numpy(dtype=float) for _, group in mine.groupby(list(RUN_KEYS), sort=True)]


def estimates_table(metrics: pd.DataFrame, requests: pd.DataFrame | None, *, level: float, seed: int) -> pd.DataFrame:
    """estimates.csv: one row per (experiment, variant, metric) across that variant's runs."""
    requests_by_variant = {}
    if requests is not None and not requests.empty:
        requests_by_variant = dict(iter(requests.groupby(["backend", "experiment", "variant"], sort=False)))
    rows = []
    keys = ["backend", "experiment", "variant", "metric"]
    for key, group in metrics.groupby(keys, sort=False):
        backend, experiment, variant, metric = key
        spec = CATALOGUE[metric]
        values = group.sort_values("repeat")["value"].to_numpy(dtype=float)
        runs = []
        if metric.endswith("_p99_9_ms") and np.isnan(values).any():
            variant_requests = requests_by_variant.get((backend, experiment, variant))
            ep = metric.split("_", 1)[0]
            runs = [] if variant_requests is None else _ok_latencies(variant_requests, ep)
        if runs and len(runs) == len(values):
            # Runs too short for their own p99.9 (STATS.md §2); every run must contribute.
            row = pooled_p999(runs, level, _group_seed(seed, key))
        else:
            row = summarise(values, spec, level)
        rows.append((*key, spec.unit, row.point, row.lo, row.hi, row.n, level, row.scale, row.method, row.flag))
    frame = pd.DataFrame.from_records(rows, columns=ESTIMATES_COLUMNS)
    return frame.astype({"point": "float64", "lo": "float64", "hi": "float64", "n": "int64", "level": "float64"})
