"""What every family of per-run metrics shares: how a metric is described, and small helpers.

The families (:mod:`.jobs_metrics`, :mod:`.weights_metrics`, :mod:`.services_metrics`) import this module and
nothing of each other; :mod:`.catalogue`, :mod:`.per_run` and :mod:`.estimates` put them
together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from throttlelab.analysis.tidy import InputError
from throttlelab.model import records

#: log: geometric mean, t interval on the logs; linear: arithmetic mean, t interval;
#: logit: a proportion of counts (``counts`` names the per-run event and trial metrics):
#: per-run empirical logit, t interval, back-transformed (stats.estimate_proportion).
Scale = Literal["log", "linear", "logit"]
#: interval: a Student t interval across runs; range: min..max of the per-run
#: values, never a CI (docs/STATISTICS.md §2 for maxima); setting: a value the run reads
#: back rather than measures (GOMAXPROCS), the same in every run or flagged.
Summary = Literal["interval", "range", "setting"]

USEC_PER_MS = 1000.0
#: The cgroup's CPU counters, as the records and the tables name them (model/records.py).
COUNTERS = records.COUNTERS


@dataclass(frozen=True)
class MetricSpec:
    """What a per-run metric is, and how it is summarised across runs."""

    name: str
    unit: str
    scale: Scale
    summary: Summary
    about: str
    #: for scale "logit": the metrics holding each run's events and trials (nr_throttled, nr_periods)
    counts: tuple[str, str] | None = None
    #: an exact counter (or one over a fixed number of rounds): identical runs decide by the tie rule
    #: (the engine's tie rule, stats.mean_tie_bound, docs/STATISTICS.md §3) instead of being "degenerate"
    exact: bool = False


def number(value: Any) -> float:
    """A table's or a summary's value as float; null, NaN and a missing key -> NaN."""
    if value is None or pd.isna(value):
        return math.nan
    return float(value)


def total(column: pd.Series) -> float:
    """Sum of a counter column; NaN when any value is missing (never a partial sum)."""
    if column.isna().any():
        return math.nan
    return float(column.sum())


def throttled_ratio(throttled: float, periods: float) -> float:
    """Throttled / counted periods; 0 when no period was counted and nothing was throttled (no quota)."""
    if math.isnan(throttled) or math.isnan(periods):
        return math.nan
    if periods > 0:
        return throttled / periods
    return 0.0 if throttled == 0 else math.nan


def exactly_one(frame: pd.DataFrame | None, what: str) -> pd.DataFrame:
    """The frame, which must hold exactly one row of ``what``."""
    if frame is None or len(frame) != 1:
        found = 0 if frame is None else len(frame)
        raise InputError(f"expected exactly one {what}, found {found}")
    return frame
