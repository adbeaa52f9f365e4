"""Across repeats -> estimates.csv: one row per (experiment, variant, metric).

Estimates come from :mod:`throttlelab.analysis.stats` on the per-run values (the run
is the unit of replication, docs/STATISTICS.md §1), never from pooled rounds or requests.
Latencies and completion times are estimated on the log scale (geometric mean,
asymmetric interval); quantities that can be 0 (counts, throttled time) on the linear
scale, where a metric that is 0 in every run is the result "0 in R of R runs";
throttled ratios as proportions of their counts (per-run empirical logit,
back-transformed; the pooled exact binomial interval when the counts are sparse); how
each metric is summarised is its :data:`~throttlelab.analysis.metrics.metric_catalogue.CATALOGUE`
entry. A quantile the runs are too short for stays empty with the reason (docs/STATISTICS.md §2);
a p99.9 of short runs is pooled with whole runs resampled only from R = 20 on (§3).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from throttlelab.analysis import stats
from throttlelab.analysis.metrics.metric_catalogue import CATALOGUE
from throttlelab.analysis.metrics.common import MetricSpec, Scale
from throttlelab.analysis.metrics.services_metrics import DEFAULT_LOAD_TIMEOUT_MS
from throttlelab.analysis.tidy import RUN_KEYS
from throttlelab.model import seeds

FLAG_RANGE = "range, not a CI"
FLAG_SETTING_VARIES = "differs between runs"
FLAG_UNDEFINED = "undefined"

ESTIMATES_COLUMNS = [
    "backend",
    "experiment",
    "variant",
    "metric",
    "unit",
    "point",
    "lo",
    "hi",
    "n",
    "level",
    "scale",
    "method",
    "flag",
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


def _too_small(notes: list[str], n: int) -> str | None:
    """The method text of a metric left empty because its runs were too short, or None."""
    small = [note for note in notes if "n too small" in note]
    if not small:
        return None
    distinct = sorted(set(small))
    text = distinct[0] if len(distinct) == 1 else f"{distinct[0]} ... {distinct[-1]}"
    return f"not computed in {len(small)} of {n} runs: {text}"


def _median_and_range(values: np.ndarray, method: str, flag: str) -> Summarised:
    """The per-run values' median with their range instead of an interval, on a linear scale."""
    median = float(stats.quantile(values, 0.5))
    return Summarised(median, float(values.min()), float(values.max()), int(values.size), "linear", method, flag)


def summarise(
    values: np.ndarray,
    spec: MetricSpec,
    level: float,
    notes: list[str] | None = None,
    counts: tuple[np.ndarray, np.ndarray] | None = None,
) -> Summarised:
    """Point and interval (or range, or setting) of one metric over one variant's runs.

    ``notes``: each run's reason for an empty value (metrics.csv's ``note``); ``counts``: each
    run's events and trials for a proportion (scale ``logit``).
    """
    n = int(values.size)
    missing = int(np.isnan(values).sum())
    if missing:
        # A metric the run could not define (a counter that was unreadable) is not
        # estimated from the other runs: that would silently drop runs.
        small = _too_small([note for value, note in zip(values, notes or [""] * n) if np.isnan(value)], n)
        if small:
            return Summarised(math.nan, math.nan, math.nan, n, spec.scale, small, stats.FLAG_N_TOO_SMALL)
        return Summarised(
            math.nan,
            math.nan,
            math.nan,
            n,
            spec.scale,
            f"{spec.name} undefined in {missing} of {n} runs",
            FLAG_UNDEFINED,
        )
    if spec.summary == "range":
        return _median_and_range(
            values, f"median and range of per-run {spec.name}, R = {n} (a maximum gets no CI)", FLAG_RANGE
        )
    if spec.summary == "setting":
        if np.ptp(values) == 0:
            runs = "the one run" if n == 1 else f"all {n} runs"
            return Summarised(float(values[0]), math.nan, math.nan, n, "linear", f"read back, identical in {runs}", "")
        return _median_and_range(values, f"read back; median and range over {n} runs", FLAG_SETTING_VARIES)
    if spec.scale == "logit" and counts is not None and not (np.isnan(counts[0]).any() or np.isnan(counts[1]).any()):
        est = _quietly(
            lambda: stats.estimate_proportion(counts[0], counts[1], level=level, label=f"per-run {spec.name}")
        )
        return Summarised(est.point, est.lo, est.hi, est.n, "logit", est.method, est.flag)
    log = spec.scale == "log"
    if log and np.any(values <= 0):
        zeros = int((values <= 0).sum())
        return Summarised(
            math.nan,
            math.nan,
            math.nan,
            n,
            spec.scale,
            f"{spec.name} is 0 in {zeros} of {n} runs: no geometric mean",
            FLAG_UNDEFINED,
        )
    est = _quietly(lambda: stats.estimate(values, log=log, level=level, label=f"per-run {spec.name}"))
    return Summarised(est.point, est.lo, est.hi, est.n, est.scale, est.method, est.flag)


def pooled_p999(latency_runs: list[np.ndarray], level: float, rng: np.random.Generator) -> Summarised:
    """p99.9 from runs too short for their own: pooled, with whole runs resampled (docs/STATISTICS.md §2),
    only from stats.MIN_RUNS_BOOTSTRAP runs on; with fewer the point stands alone, flagged."""
    est = _quietly(lambda: stats.cluster_bootstrap_quantile(latency_runs, 0.999, rng=rng, level=level))
    return Summarised(est.point, est.lo, est.hi, est.n, est.scale, est.method, est.flag)


def _group_seed(seed: int, key: tuple[Any, ...]) -> np.random.Generator:
    """A generator per (experiment, variant, metric): the same numbers whatever else is in the table."""
    return np.random.default_rng(seeds.bootstrap_entropy(seed, key))


def _latency_runs(requests: pd.DataFrame, ep: str, timeout_ms: float) -> list[np.ndarray]:
    """Each run's latencies of ``ep``, failed requests at the client timeout (as in metrics.csv)."""
    mine = requests[requests["ep"] == ep]
    out = []
    for _, group in mine.groupby(list(RUN_KEYS), sort=True):
        lat = group["lat_ms"].to_numpy(dtype=float).copy()
        lat[~group["ok"].to_numpy(dtype=bool)] = timeout_ms
        out.append(lat)
    return out


def estimates_table(
    metrics: pd.DataFrame,
    requests: pd.DataFrame | None,
    *,
    level: float,
    seed: int,
    timeout_ms: float = DEFAULT_LOAD_TIMEOUT_MS,
) -> pd.DataFrame:
    """estimates.csv: one row per (experiment, variant, metric) across that variant's runs.

    A p99.9 that runs too short for their own leave empty is pooled with a cluster bootstrap only
    when the variant has at least stats.MIN_RUNS_BOOTSTRAP runs; with fewer it stays empty and the
    method says why (docs/STATISTICS.md §3: no bootstrap below R = 20).
    """
    requests_by_variant = {}
    if requests is not None and not requests.empty:
        requests_by_variant = dict(iter(requests.groupby(["backend", "experiment", "variant"], sort=False)))
    if "note" not in metrics.columns:
        metrics = metrics.assign(note="")
    by_variant = {key: group for key, group in metrics.groupby(["backend", "experiment", "variant"], sort=False)}
    rows = []
    keys = ["backend", "experiment", "variant", "metric"]
    for key, group in metrics.groupby(keys, sort=False):
        backend, experiment, variant, metric = key
        spec = CATALOGUE[metric]
        group = group.sort_values("repeat")
        values = group["value"].to_numpy(dtype=float)
        notes = group["note"].fillna("").astype(str).tolist()
        counts = None
        if spec.counts is not None:
            counts = _counts(by_variant[(backend, experiment, variant)], group["repeat"], spec.counts)
        runs = []
        if metric.endswith("_p99_9_ms") and np.isnan(values).any() and values.size >= stats.MIN_RUNS_BOOTSTRAP:
            variant_requests = requests_by_variant.get((backend, experiment, variant))
            ep = metric.split("_", 1)[0]
            runs = [] if variant_requests is None else _latency_runs(variant_requests, ep, timeout_ms)
        if runs and len(runs) == len(values):
            # Runs too short for their own p99.9 (docs/STATISTICS.md §2); every run must contribute.
            row = pooled_p999(runs, level, _group_seed(seed, key))
        else:
            row = summarise(values, spec, level, notes, counts)
        rows.append((*key, spec.unit, row.point, row.lo, row.hi, row.n, level, row.scale, row.method, row.flag))
    frame = pd.DataFrame.from_records(rows, columns=ESTIMATES_COLUMNS)
    return frame.astype({"point": "float64", "lo": "float64", "hi": "float64", "n": "int64", "level": "float64"})


def _counts(
    variant_metrics: pd.DataFrame, repeats: pd.Series, names: tuple[str, str]
) -> tuple[np.ndarray, np.ndarray] | None:
    """The runs' (events, trials) of a proportion, in the order of ``repeats``; None when absent."""
    wide = variant_metrics[variant_metrics["metric"].isin(names)].pivot_table(
        index="repeat", columns="metric", values="value", aggfunc="first", dropna=False
    )
    if any(name not in wide.columns for name in names) or not set(repeats) <= set(wide.index):
        return None
    picked = wide.loc[list(repeats)]
    return picked[names[0]].to_numpy(dtype=float), picked[names[1]].to_numpy(dtype=float)
