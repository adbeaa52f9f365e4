"""Statistics across repeated runs, as specified in ``docs/STATISTICS.md``.

The run is the unit of replication. Requests inside one run share that run's
conditions, so every function here that draws an interval works on ONE value
per run (a per-run p99, a per-run throttled ratio, ...), never on pooled
requests. The one exception, :func:`pooled_iid_quantile_ci`, exists only so the
tests can show how badly pooling fails.

Everything is pure: functions take numbers and return numbers or frozen
dataclasses; nothing reads or writes files, and every resampling function takes
an explicit ``numpy.random.Generator``.

Vocabulary of ``flag`` (shown beside a number in tables and figures):

``""``
    an interval with at least :data:`MIN_RUNS_TRUSTED` runs;
``"low n"``
    an interval from 3 or 4 runs (smoke profiles): usable, but wide and fragile;
``"n too small"``
    fewer runs than the method needs: a point estimate, no interval (NaN bounds);
``"degenerate"``
    no spread to measure (a single run, or all runs identical): NaN bounds and a
    :class:`DegenerateWarning`, never a zero-width interval;
``"pooled, cluster bootstrap"``
    a pooled quantile (p99.9 from short runs) with whole runs resampled, only
    from :data:`MIN_RUNS_BOOTSTRAP` runs on;
``"0 in R of R runs"`` (:func:`zeros_flag`)
    every run measured exactly zero (no throttled period): a result, not a
    missing interval; a check bounds it at its own level: a count of events in trials by the
    exact bound of the pooled trials (:func:`zero_events_bound`), any other value by the
    bound on the mean (:func:`mean_tie_bound`);
``"sparse counts"``
    a proportion whose runs hold too few events for the per-run logit: the
    exact binomial interval of the pooled count instead.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import integrate, optimize
from scipy import stats as sps

__all__ = [
    "QUANTILE_METHOD",
    "QUANTILES",
    "TAIL_MISS",
    "P999_MIN_SAMPLES",
    "one_sided_level",
    "tie_level",
    "median_runs_needed",
    "median_run_interval",
    "cannot_reach",
    "mean_tie_bound",
    "zero_events_bound",
    "trials_needed",
    "tied",
    "mann_whitney_u",
    "MIN_EVENTS_PER_RUN",
    "MIN_RUNS_INTERVAL",
    "MIN_RUNS_TRUSTED",
    "MIN_RUNS_MEDIAN_CI",
    "MIN_RUNS_BOOTSTRAP",
    "FLAG_LOW_N",
    "FLAG_N_TOO_SMALL",
    "FLAG_DEGENERATE",
    "FLAG_CLUSTER_BOOTSTRAP",
    "FLAG_SPARSE",
    "DegenerateWarning",
    "Estimate",
    "Comparison",
    "LatencySummary",
    "quantile",
    "quantile_name",
    "t_power",
    "repeats_for_power",
    "min_samples",
    "too_few_samples",
    "supported_quantile",
    "clumps_quantile",
    "run_latency_summary",
    "estimate",
    "zeros_flag",
    "empirical_logit",
    "estimate_proportion",
    "compare",
    "ratio_of_means",
    "min_mwu_p",
    "mann_whitney_exact",
    "holm",
    "holm_floor",
    "bh",
    "order_statistic_ranks",
    "median_ci",
    "cluster_bootstrap_quantile",
    "bootstrap_runs",
    "verdict",
    "threshold_p",
]

#: numpy's name for the sample quantile used everywhere (Hyndman & Fan type 7).
QUANTILE_METHOD = "linear"

#: The per-run quantiles, by the name the tables give them.
QUANTILES: dict[str, float] = {"p50": 0.5, "p75": 0.75, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p99_9": 0.999}
#: A run's q-quantile is computed only when the run's maximum lies above the true
#: q-quantile with probability 1 - TAIL_MISS: 1 - q**n >= 0.975, i.e.
#: n >= ln 0.025 / ln q (docs/STATISTICS.md §2; :func:`min_samples`).
TAIL_MISS = 0.025

#: A proportion gets the per-run empirical-logit t interval alone only when its
#: runs hold at least this many events (and non-events) per run on average; below
#: it the logit of a count of 0, 1 or 2 is biased upward and that interval covers
#: the truth too rarely (tests/analysis/test_stats.py), so the interval is widened
#: to also hold the exact binomial interval of the pooled count, which counting
#: noise dominates there.
MIN_EVENTS_PER_RUN = 5

#: Fewer runs than this: no interval at all.
MIN_RUNS_INTERVAL = 3
#: Fewer runs than this (but at least MIN_RUNS_INTERVAL): interval + "low n".
MIN_RUNS_TRUSTED = 5
#: The distribution-free 95% CI of the median needs this many runs.
MIN_RUNS_MEDIAN_CI = 6
#: Bootstrapping per-run values is allowed from this many runs on.
MIN_RUNS_BOOTSTRAP = 20

FLAG_LOW_N = "low n"
FLAG_N_TOO_SMALL = "n too small"
FLAG_DEGENERATE = "degenerate"
FLAG_CLUSTER_BOOTSTRAP = "pooled, cluster bootstrap"
FLAG_SPARSE = "sparse counts"

Scale = Literal["log", "linear", "logit", "mean-ratio"]


class DegenerateWarning(UserWarning):
    """The data show no spread, so no interval can be drawn."""


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its confidence interval across runs.

    ``lo`` and ``hi`` are NaN when no interval can be given; ``flag`` says why.
    ``scale`` is the scale on which the interval was computed: on ``"log"`` the
    point is a geometric mean and the bounds are exponentiated (hence
    asymmetric around the point). ``method`` is a caption-ready sentence such
    as ``"Student t on log per-run p99, R = 10"``.
    """

    point: float
    lo: float
    hi: float
    n: int
    level: float
    scale: Scale
    method: str
    flag: str = ""

    @property
    def has_interval(self) -> bool:
        """True when both bounds are finite numbers."""
        return math.isfinite(self.lo) and math.isfinite(self.hi)


@dataclass(frozen=True)
class Comparison:
    """Configuration A against configuration B, one value per run on each side.

    On the ``"log"`` scale ``effect`` is the ratio of geometric means A / B
    with an exponentiated Welch interval; on ``"linear"`` it is the difference
    of means A - B with a plain Welch interval. ``p_value`` is the exact
    two-sided Mann-Whitney U p-value on the per-run values, ``u`` its statistic
    for A, and ``a12 = u / (n_a * n_b)`` the Vargha-Delaney effect size (the
    chance that a run of A exceeds a run of B, ties counting one half).
    ``min_p`` is the smallest p-value the test can produce with these sample
    sizes; when it exceeds ``1 - level`` the comparison cannot reach
    significance, and ``note`` says so.
    """

    effect: float
    lo: float
    hi: float
    n_a: int
    n_b: int
    level: float
    scale: Scale
    p_value: float
    u: float
    a12: float
    min_p: float
    method: str
    flag: str = ""
    note: str = ""

    @property
    def has_interval(self) -> bool:
        """True when both bounds are finite numbers."""
        return math.isfinite(self.lo) and math.isfinite(self.hi)


# --------------------------------------------------------------------------
# validation helpers


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must lie strictly between 0 and 1, got {level!r}")


def _values(values: Iterable[float], name: str = "values") -> np.ndarray:
    """A 1-D float array of finite numbers, at least one of them."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: there is nothing to estimate")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite entries")
    return arr


def _on_scale(values: Iterable[float], *, log: bool, name: str = "values") -> np.ndarray:
    """Validated per-run values, moved to the log scale when asked."""
    arr = _values(values, name)
    if log:
        bad = arr[arr <= 0]
        if bad.size:
            raise ValueError(
                f"{name} holds {bad.size} non-positive value(s) (first: {bad[0]!r}), "
                "which have no logarithm; use log=False for quantities that can be "
                "zero, such as throttled counts or ratios"
            )
        arr = np.log(arr)
    return arr


def _pvalues(pvalues: Iterable[float]) -> np.ndarray:
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"p-values must be one-dimensional, got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("p-values must be finite numbers in [0, 1]")
    return p


def _degenerate(what: str) -> None:
    warnings.warn(
        f"{what}: no spread between runs, so no interval is drawn (NaN bounds)",
        DegenerateWarning,
        stacklevel=3,
    )


# --------------------------------------------------------------------------
# per-run values


def quantile(values, q, *, axis: int | None = None):
    """The sample quantile used everywhere in throttlelab (type 7).

    Hyndman & Fan's definition 7, which is numpy's ``method="linear"``, R's
    default and a spreadsheet's PERCENTILE.INC: sort the n values as
    x[0] <= ... <= x[n-1], put h = (n - 1) * q, and interpolate linearly
    between x[floor(h)] and x[floor(h) + 1]. q = 0 gives the minimum, q = 1 the
    maximum, and q = 0.5 the ordinary median. Because the interpolation is
    linear, multiplying every value by c > 0 multiplies the quantile by c.

    ``q`` may be a scalar or an array of probabilities in [0, 1]; ``axis``
    works as in :func:`numpy.quantile` (used for simulations that hold many
    runs in one array).
    """
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("cannot take a quantile of no values")
    if not np.all(np.isfinite(arr)):
        raise ValueError("values contain NaN or infinite entries")
    qs = np.asarray(q, dtype=float)
    if np.any((qs < 0) | (qs > 1)) or not np.all(np.isfinite(qs)):
        raise ValueError(f"quantile probabilities must lie in [0, 1], got {q!r}")
    return np.quantile(arr, q, axis=axis, method=QUANTILE_METHOD)


def min_samples(q: float) -> int:
    """The fewest samples a run needs before its own q-quantile is computed (docs/STATISTICS.md §2).

    With n samples the run's maximum lies above the true q-quantile with
    probability 1 - q**n; we ask for 1 - :data:`TAIL_MISS` = 97.5%, so
    n >= ln 0.025 / ln q: p50 6, p75 13, p90 36, p95 72, p99 368, p99.9 3,688.
    Below that the sample quantile is mostly an interpolation between the few
    largest values and says little about the tail it is named after. The rule
    counts independent samples: for a run's requests, which arrive in clumps
    that share their fate, that is its clumps (:func:`clumps_quantile`).
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"a quantile's probability must lie strictly between 0 and 1, got {q!r}")
    return math.ceil(math.log(TAIL_MISS) / math.log(q) - 1e-9)


def quantile_name(q: float) -> str:
    """``0.99`` -> ``"p99"``, ``0.999`` -> ``"p99.9"`` (as text; tables write ``p99_9``)."""
    return f"p{100 * q:g}"


#: The fewest samples per run for each named quantile (:func:`min_samples`).
P999_MIN_SAMPLES = min_samples(QUANTILES["p99_9"])


def too_few_samples(q: float, n: int, what: str = "requests") -> str | None:
    """Why a run of ``n`` samples gets no q-quantile ("n too small for p99: 60 requests (needs 368)"), or None."""
    need = min_samples(q)
    if n >= need:
        return None
    return f"n too small for {quantile_name(q)}: {n} {what} (needs {need:,})"


def supported_quantile(counts, candidates=(0.99, 0.9, 0.5)) -> float | None:
    """The highest of ``candidates`` that every run supports, given each run's sample count; None if none.

    The service findings name the quantile they compare with it, so a profile
    that cannot afford the samples for p99 compares p90 (or p50) and says so.
    """
    n = np.asarray(counts, dtype=float)
    if n.size == 0 or not np.all(np.isfinite(n)):
        return None
    fewest = float(n.min())
    for q in sorted(candidates, reverse=True):
        if fewest >= min_samples(q):
            return q
    return None


def clumps_quantile(clumps: int, candidates=(0.99, 0.9, 0.75, 0.5)) -> float | None:
    """The highest of ``candidates`` that a window of ``clumps`` independent clumps supports; None if none
    (docs/STATISTICS.md §2, "How many clumps a quantile needs").

    The requests of one clump arrive together, queue behind one another and meet the quota at the same
    phase of the period, so a window holds as many independent draws as clumps, whatever its requests.
    :func:`min_samples` is a rule about independent draws, so it is applied to the clumps: the q-quantile
    needs ``min_samples(q)`` of them (p50 6, p75 13, p90 36, p99 368), the fewest for which at least one
    clump lies above the true q-quantile with probability 97.5%. With fewer, a run's q-quantile is in
    too many runs a value from inside its worst clump (with 5 clumps and p90: 1 - 0.9^5 = 41% of runs
    have a clump above it, 59% do not); the window can then show its maximum over its clumps.
    """
    if isinstance(clumps, bool) or not isinstance(clumps, (int, np.integer)) or clumps < 0:
        raise ValueError(f"clumps must be a count of 0 or more, got {clumps!r}")
    return supported_quantile([int(clumps)], candidates)


@dataclass(frozen=True)
class LatencySummary:
    """The latency metrics of one run: ``values`` by name (``p50``, ``p75``, ``p90``, ``p99``, ``p99_9``, ``max``),
    NaN where ``notes`` says why; ``n`` requests of which ``errors`` failed (counted at the timeout).
    ``summary["p99"]`` reads ``values``."""

    n: int
    errors: int
    values: Mapping[str, float]
    notes: Mapping[str, str]

    def __getitem__(self, key: str) -> float:
        return self.values[key]


def run_latency_summary(latencies_ms, *, ok=None, timeout_ms: float | None = None) -> LatencySummary:
    """The per-run latency metrics of one run (docs/STATISTICS.md §2).

    ``latencies_ms``: the run's latencies after the warmup prefix, each one
    measured from the SCHEDULED send time. ``ok``: which requests succeeded
    (default: all). A failed or timed-out request enters every quantile AT THE
    CLIENT TIMEOUT ``timeout_ms`` (wrk2 / HdrHistogram practice: the worst arms
    must not lose their tail by losing their slowest requests) and is counted
    in ``errors``; ``timeout_ms`` is required when any request failed.

    Each quantile q is computed only when the run holds at least
    :func:`min_samples` (q) requests; otherwise it is NaN and ``notes`` says
    why ("n too small for p99: 60 requests (needs 368)"). The max is a per-run
    value only: show it per run, never with a CI.
    """
    lat = np.array(latencies_ms, dtype=float, ndmin=1)
    if lat.ndim != 1:
        raise ValueError(f"latencies_ms must be one-dimensional, got shape {lat.shape}")
    if not np.all(np.isfinite(lat)):
        raise ValueError("latencies_ms contains NaN or infinite entries")
    if np.any(lat < 0):
        raise ValueError("latencies_ms contains negative latencies (clock or parsing error)")
    good = np.ones(lat.size, dtype=bool) if ok is None else np.asarray(ok, dtype=bool)
    if good.shape != lat.shape:
        raise ValueError(f"ok has shape {good.shape}, latencies_ms {lat.shape}")
    errors = int(lat.size - good.sum())
    if errors:
        if timeout_ms is None or not math.isfinite(timeout_ms) or timeout_ms <= 0:
            raise ValueError(
                f"{errors} request(s) failed: their latency is the client timeout, so timeout_ms "
                f"must be a positive number, got {timeout_ms!r}"
            )
        lat[~good] = timeout_ms
    n = int(lat.size)
    values: dict[str, float] = {}
    notes: dict[str, str] = {}
    supported = [name for name, q in QUANTILES.items() if name != "p95" and n >= min_samples(q)]
    picked = quantile(lat, [QUANTILES[name] for name in supported]) if supported else []
    for name in ("p50", "p75", "p90", "p99", "p99_9"):
        values[name] = math.nan
        reason = "no requests" if n == 0 else too_few_samples(QUANTILES[name], n)
        if reason:
            notes[name] = reason
    for name, value in zip(supported, picked):
        values[name] = float(value)
    values["max"] = float(lat.max()) if n else math.nan
    if not n:
        notes["max"] = "no requests"
    return LatencySummary(n=n, errors=errors, values=values, notes=notes)


# --------------------------------------------------------------------------
# one configuration


def estimate(values, *, log: bool, level: float = 0.95, label: str = "per-run values") -> Estimate:
    """Point estimate and Student t interval from one value per run.

    With ``log=True`` (latencies, times) the interval is computed on the logs
    and mapped back: the point is the geometric mean and the bounds are
    exp(mean(log x) -/+ t * sd(log x) / sqrt(R)). With ``log=False`` it is the
    arithmetic mean with the plain t interval (use it for quantities that can
    be zero, such as throttled counts).

    Outcomes by the number of runs R:

    * every value exactly 0 (``log=False``): point 0, NaN bounds, flag
      ``"0 in R of R runs"`` (:func:`zeros_flag`): a result, not a failure;
    * R = 1 or all values identical: point only, NaN bounds, a
      :class:`DegenerateWarning`, flag ``"degenerate"``;
    * otherwise R = 2: point only, NaN bounds, flag ``"n too small"``;
    * 3 <= R < 5: interval with flag ``"low n"``;
    * R >= 5: interval, empty flag.

    ``label`` names the values in the method text ("per-run p99").
    """
    _check_level(level)
    if not log and np.all(_values(values) == 0):
        n_zero = int(np.asarray(values).size)
        return Estimate(
            0.0,
            math.nan,
            math.nan,
            n_zero,
            level,
            "linear",
            f"{label}: exactly 0 in every run, R = {n_zero}",
            zeros_flag(n_zero),
        )
    x = _on_scale(values, log=log)
    n = int(x.size)
    scale: Scale = "log" if log else "linear"
    method = f"Student t on {'log ' if log else ''}{label}, R = {n}"
    center = float(np.mean(x))
    point = math.exp(center) if log else center

    if n == 1 or np.ptp(x) == 0:
        _degenerate(f"{label}: R = {n}" if n == 1 else f"{label}: all {n} runs identical")
        return Estimate(point, math.nan, math.nan, n, level, scale, method, FLAG_DEGENERATE)
    if n < MIN_RUNS_INTERVAL:
        return Estimate(point, math.nan, math.nan, n, level, scale, method, FLAG_N_TOO_SMALL)

    t = float(sps.t.ppf(0.5 + level / 2, n - 1))
    half = t * float(np.std(x, ddof=1)) / math.sqrt(n)
    lo, hi = center - half, center + half
    if log:
        lo, hi = math.exp(lo), math.exp(hi)
    flag = FLAG_LOW_N if n < MIN_RUNS_TRUSTED else ""
    return Estimate(point, lo, hi, n, level, scale, method, flag)


def one_sided_level(level: float) -> float:
    """The one-sided error of a two-sided interval at ``level``: (1 - level) / 2 (0.025 at 95%)."""
    _check_level(level)
    return (1 - level) / 2


def tie_level(n: int) -> float:
    """One-sided level of the median run's interval [v, v] when all ``n`` runs gave v: the chance that
    every run lies on one side of the median run's value, 0.5**n (0.031 at n = 5, 0.016 at n = 6)."""
    return 0.5**n


def median_runs_needed(level: float) -> int:
    """The fewest runs whose order statistics bound the median run at ``level`` (both sides at
    :func:`one_sided_level`): 6 at 95%, 7 at 97.5%, 8 at 99% (a Bonferroni level over five checks)."""
    n = 1
    while order_statistic_ranks(n, 0.5, level) is None:
        n += 1
    return n


def median_run_interval(values, *, level: float = 0.95, label: str = "per-run values") -> Estimate:
    """The median run with its distribution-free interval [x(l), x(u)] (:func:`order_statistic_ranks`),
    valid for discrete data: identical runs give [v, v]. With fewer runs than :func:`median_runs_needed`
    the bounds are NaN and the flag says how many the level needs."""
    x, n, point, ranks = _median_and_ranks(values, level)
    if ranks is None:
        method = f"the median run of {label}, order statistics, R = {n}"
        return Estimate(point, math.nan, math.nan, n, level, "linear", method, cannot_reach(n, level))
    low, high = ranks
    method = f"the median run of {label}: order statistics x({low})..x({high}), R = {n}"
    return Estimate(point, float(x[low - 1]), float(x[high - 1]), n, level, "linear", method, "")


def cannot_reach(runs: int, level: float, needed: int | None = None) -> str:
    """The reason a check's runs cannot decide at its one-sided level: "5 runs cannot reach level 0.025
    (needs R >= 6)" (``needed`` None: the median run's count, :func:`median_runs_needed`; 0: no number
    of runs can)."""
    needed = median_runs_needed(level) if needed is None else needed
    need = "no number of runs can" if needed == 0 else f"needs R >= {needed}"
    return f"{runs} runs cannot reach level {one_sided_level(level):.3g} ({need})"


def mean_tie_bound(
    v: float, n: int, low: float = 0.0, high: float = math.inf, level: float = 0.95
) -> tuple[float, float]:
    """The bound on the mean when all ``n`` runs of an exact counter gave ``v`` (docs/STATISTICS.md §3).

    At the one-sided level a of ``level`` (:func:`one_sided_level`), the chance that a run differs from v
    is at most pi = 1 - a**(1/n) (Clopper-Pearson of 0 differing runs in n; 0.46 at n = 6 and a = 0.025),
    so the mean lies within v - pi (v - low) and v + pi (high - v), ``low`` and ``high`` the counter's
    possible range: a counter without an upper end has no finite upper bound, whatever n."""
    if n < 1:
        raise ValueError(f"a tie needs at least one run, got {n}")
    pi = 1 - one_sided_level(level) ** (1 / n)
    lo = v - pi * (v - low)
    hi = v + pi * (high - v) if math.isfinite(high) else math.inf
    return lo, hi


def zero_events_bound(trials: float, level: float = 0.95) -> float:
    """The exact (Clopper-Pearson) upper bound on an event's rate when none occurred in ``trials`` trials, at the
    one-sided level a of ``level`` (:func:`one_sided_level`): the rate p at which 0 of ``trials`` has probability a,
    (1 - p)**trials = a, so p = 1 - a**(1/trials) (docs/STATISTICS.md §3: 0.024 for 150 periods at a = 0.025).
    No trial at all bounds nothing: 1."""
    if trials < 0:
        raise ValueError(f"a count of trials cannot be negative, got {trials}")
    if trials == 0:
        return 1.0
    return 1 - one_sided_level(level) ** (1 / trials)


def trials_needed(threshold: float, level: float = 0.95) -> int:
    """The fewest trials whose :func:`zero_events_bound` lies below ``threshold`` (a rate in (0, 1]):
    ln a / ln(1 - threshold), and one more where that is whole (72 for 0.05 at a = 0.025)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"a rate's bound must lie in (0, 1], got {threshold}")
    if threshold == 1:
        return 1
    needed = math.log(one_sided_level(level)) / math.log(1 - threshold)
    return math.floor(needed) + 1


def tied(values) -> float | None:
    """The one value every run gave, or None when the runs differ (or there are none)."""
    x = _values(values)
    if x.size == 0 or np.ptp(x) != 0:
        return None
    return float(x[0])


def zeros_flag(n: int) -> str:
    """The flag of a quantity that was exactly 0 in all ``n`` runs: "0 in 5 of 5 runs"."""
    return f"0 in {n} of {n} runs"


def _counts(k, n) -> tuple[np.ndarray, np.ndarray]:
    ks, ns = _values(k, "k"), _values(n, "n")
    if ks.shape != ns.shape:
        raise ValueError(f"k and n must have one value per run each, got {ks.size} and {ns.size}")
    if np.any(ks < 0) or np.any(ks > ns) or np.any(ks != np.round(ks)) or np.any(ns != np.round(ns)):
        raise ValueError("counts must be whole numbers with 0 <= k <= n in every run")
    return ks, ns


def empirical_logit(k, n) -> np.ndarray:
    """Per-run empirical logit log((k + 1/2) / (n - k + 1/2)) of k events in n trials (docs/STATISTICS.md §3)."""
    ks, ns = _counts(k, n)
    return np.log((ks + 0.5) / (ns - ks + 0.5))


def _expit(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def mean_logit_share(k, n) -> float:
    """The share at the runs' mean empirical logit (:func:`empirical_logit`), back-transformed: the point of the
    per-run logit's interval in :func:`estimate_proportion` (runs that counted no trial left out)."""
    ks, ns = _counts(k, n)
    counted = ns > 0
    return _expit(float(np.mean(empirical_logit(ks[counted], ns[counted]))))


def estimate_proportion(k, n, *, level: float = 0.95, label: str = "per-run throttled ratio") -> Estimate:
    """A proportion (throttled periods / counted periods) across runs, its interval inside [0, 1].

    ``k`` and ``n``: each run's event count and trials (Δnr_throttled, Δnr_periods).

    * every run without an event (runs with n = 0, where no period was counted,
      included): point 0, no interval, flag ``"0 in R of R runs"``: a result
      that a check bounds by the exact bound of the trials pooled over its runs
      (:func:`zero_events_bound`), once its runs reach its level (:func:`tie_level`);
    * at least :data:`MIN_EVENTS_PER_RUN` events and non-events per run on
      average: per-run empirical logit, Student t interval across runs,
      back-transformed; the point is the pooled ratio sum(k) / sum(n) (docs/STATISTICS.md
      §3: the back-transformed mean logit is biased high at 25-30 counted
      periods per run);
    * sparser counts: the union of that interval and the exact (Clopper-Pearson)
      interval of the count pooled over runs, flag ``"sparse counts"``: at a
      handful of events per run the logit is biased and counting noise dominates
      run-to-run variation (at well under one event per run no interval can cover
      near 95%: this one then covers up to 99.8%, never less than 92%);
    * fewer than 3 runs: point only, flag ``"n too small"``.
    """
    _check_level(level)
    ks, ns = _counts(k, n)
    runs = int(ks.size)
    if np.all(ks == 0):
        return Estimate(
            0.0, math.nan, math.nan, runs, level, "logit", f"{label}: no event in any run, R = {runs}", zeros_flag(runs)
        )
    counted = ns > 0
    ks, ns = ks[counted], ns[counted]
    big_k, big_n = float(ks.sum()), float(ns.sum())
    r = int(ks.size)
    if r < MIN_RUNS_INTERVAL:
        return Estimate(
            big_k / big_n, math.nan, math.nan, r, level, "logit", f"{label}: pooled count, R = {r}", FLAG_N_TOO_SMALL
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateWarning)
        est = estimate(empirical_logit(ks, ns), log=False, level=level, label=label)
    method = (
        f"Student t on the per-run empirical logit log((k+1/2)/(n-k+1/2)) of {label}, back-transformed, R = {r}; "
        f"point: the pooled ratio {big_k:g}/{big_n:g} (the back-transformed mean logit is biased high at a few "
        "dozen counted periods per run)"
    )
    lo = _expit(est.lo) if math.isfinite(est.lo) else math.nan
    hi = _expit(est.hi) if math.isfinite(est.hi) else math.nan
    if min(big_k, big_n - big_k) < MIN_EVENTS_PER_RUN * r:
        tail = (1 - level) / 2
        exact_lo = float(sps.beta.ppf(tail, big_k, big_n - big_k + 1)) if big_k > 0 else 0.0
        exact_hi = float(sps.beta.ppf(1 - tail, big_k + 1, big_n - big_k)) if big_k < big_n else 1.0
        if math.isfinite(lo) and math.isfinite(hi):
            exact_lo, exact_hi = min(lo, exact_lo), max(hi, exact_hi)
        method = (
            f"union of that interval and the exact binomial (Clopper-Pearson) interval of {big_k:g} events in "
            f"{big_n:g} pooled over R = {r} runs: fewer than {MIN_EVENTS_PER_RUN} per run, too sparse for "
            "the per-run logit alone; " + method
        )
        return Estimate(big_k / big_n, exact_lo, exact_hi, r, level, "logit", method, FLAG_SPARSE)
    if est.flag == FLAG_DEGENERATE:
        _degenerate(f"{label}: every run has the same logit")
    return Estimate(big_k / big_n, lo, hi, r, level, "logit", method, est.flag)


# --------------------------------------------------------------------------
# two configurations


def min_mwu_p(n_a: int, n_b: int) -> float:
    """Smallest two-sided p-value the exact Mann-Whitney U test can return.

    It occurs when the two samples do not overlap at all: one arrangement out
    of C(n_a + n_b, n_a) on each side, so p = 2 / C(n_a + n_b, n_a) (capped at
    1). With 3 runs on each side this is 2 / 20 = 0.1, so no result of such a
    comparison can be significant at the 5% level.
    """
    if int(n_a) != n_a or int(n_b) != n_b or n_a < 1 or n_b < 1:
        raise ValueError(f"sample sizes must be positive integers, got {n_a!r}, {n_b!r}")
    return min(1.0, 2.0 / math.comb(int(n_a) + int(n_b), int(n_a)))


#: Above this many runs in total the tie-aware exact test would be slow; the
#: normal approximation with tie correction is accurate there.
MWU_EXACT_MAX_RUNS = 100


def _mwu_tied_exact_p(xa: np.ndarray, xb: np.ndarray) -> float:
    """Exact two-sided Mann-Whitney p-value given the observed ties.

    The permutation distribution of A's rank sum, with tied values sharing
    their mid-rank, counted exactly by dynamic programming: doubled mid-ranks
    are integers, and counts[k, s] is the number of ways to choose k of the
    values processed so far with doubled rank sum s. Two-sided p = twice the
    smaller tail, capped at 1 (scipy's convention).
    """
    pooled = np.concatenate([xa, xb])
    doubled = np.rint(2 * sps.rankdata(pooled)).astype(int)
    na = xa.size
    top = int(doubled.sum())
    counts = np.zeros((na + 1, top + 1))
    counts[0, 0] = 1.0
    for d in doubled:
        counts[1:, d:] = counts[1:, d:] + counts[:-1, : top + 1 - d]
    dist = counts[na] / counts[na].sum()
    observed = int(doubled[:na].sum())
    upper = dist[observed:].sum()
    lower = dist[: observed + 1].sum()
    return float(min(1.0, 2 * min(upper, lower)))


def mann_whitney_u(a, b) -> float:
    """Mann-Whitney U of A alone: the pairs in which A's value is larger, a tie counting one half."""
    xa, xb = _values(a, "a"), _values(b, "b")
    return float(np.sum(xa[:, None] > xb[None, :]) + 0.5 * np.sum(xa[:, None] == xb[None, :]))


def mann_whitney_exact(a, b) -> tuple[float, float]:
    """Mann-Whitney U statistic of A and its exact two-sided p-value.

    Without ties this is ``scipy.stats.mannwhitneyu(method="exact")``. scipy's
    exact method ignores ties, which per-run values such as throttled counts
    (often zero) do have, so with ties the p-value comes from the exact
    permutation distribution of the tied ranks instead. U counts the pairs
    in which A's value is larger, a tie counting one half. Above
    :data:`MWU_EXACT_MAX_RUNS` runs in total, the tie-corrected normal
    approximation is used.
    """
    xa, xb = _values(a, "a"), _values(b, "b")
    tied = np.unique(np.concatenate([xa, xb])).size < xa.size + xb.size
    if xa.size + xb.size > MWU_EXACT_MAX_RUNS:
        res = sps.mannwhitneyu(xa, xb, alternative="two-sided", method="asymptotic")
        return float(res.statistic), float(res.pvalue)
    res = sps.mannwhitneyu(xa, xb, alternative="two-sided", method="exact")
    p_value = _mwu_tied_exact_p(xa, xb) if tied else float(res.pvalue)
    return float(res.statistic), p_value


def _unreachable_significance_note(na: int, nb: int, min_p: float, level: float) -> str:
    """The note of a comparison whose run counts cannot give a p below 1 - level; empty when they can."""
    if min_p <= 1 - level:
        return ""
    runs = f"R = {na}" if na == nb else f"R = {na} vs {nb}"
    return f"cannot reach significance with {runs}: the smallest exact Mann-Whitney p is {min_p:.3g} > {1 - level:.3g}"


def compare(
    a, b, *, log: bool = True, level: float = 0.95, label: str = "per-run values", test: bool = True
) -> Comparison:
    """Compare configuration A with configuration B using one value per run.

    Effect and interval: with ``log=True`` the ratio of geometric means A / B
    with a Welch t interval on the logs, exponentiated; with ``log=False`` the
    difference of means A - B with a Welch t interval. The interval follows
    the same rules as :func:`estimate` applied to the smaller group: fewer
    than 3 runs on either side gives NaN bounds ("n too small"), 3 or 4 gives
    "low n", and two groups without any spread give NaN bounds, a
    :class:`DegenerateWarning` and "degenerate".

    Test: exact two-sided Mann-Whitney U on the per-run values
    (:func:`mann_whitney_exact`: scipy's ``method="exact"``, tie-aware when
    values tie), with A12 = U / (n_a * n_b). When even perfectly
    separated samples could not reach p <= 1 - level, ``note`` says that the
    comparison cannot reach significance, which is not evidence of "no
    effect". ``test=False``: no Mann-Whitney p (NaN), A12 still given (the
    verdicts' interval needs no test).
    """
    _check_level(level)
    xa = _on_scale(a, log=log, name="a")
    xb = _on_scale(b, log=log, name="b")
    na, nb = int(xa.size), int(xb.size)
    scale: Scale = "log" if log else "linear"

    diff = float(np.mean(xa) - np.mean(xb))
    effect = math.exp(diff) if log else diff

    # Ranks do not change under the log, so the test sees the same ordering
    # whichever scale the interval uses.
    u, p_value = mann_whitney_exact(xa, xb) if test else (mann_whitney_u(xa, xb), math.nan)
    a12 = u / (na * nb)
    min_p = min_mwu_p(na, nb)
    note = _unreachable_significance_note(na, nb, min_p, level)

    if log:
        method = f"ratio of geometric means, Welch t on log {label}"
    else:
        method = f"difference of means, Welch t on {label}"
    if not test:
        method += f"; R = {na} vs {nb}"
    elif na + nb <= MWU_EXACT_MAX_RUNS:
        method += f"; exact Mann-Whitney U; R = {na} vs {nb}"
    else:
        method += f"; Mann-Whitney U (normal approximation); R = {na} vs {nb}"

    lo = hi = math.nan
    n_min = min(na, nb)
    if n_min < MIN_RUNS_INTERVAL:
        flag = FLAG_N_TOO_SMALL
    else:
        va_n = float(np.var(xa, ddof=1)) / na
        vb_n = float(np.var(xb, ddof=1)) / nb
        se2 = va_n + vb_n
        if se2 == 0:
            _degenerate(f"{label}: both configurations constant")
            flag = FLAG_DEGENERATE
        else:
            # Welch-Satterthwaite degrees of freedom.
            df = se2**2 / (va_n**2 / (na - 1) + vb_n**2 / (nb - 1))
            half = float(sps.t.ppf(0.5 + level / 2, df)) * math.sqrt(se2)
            lo, hi = diff - half, diff + half
            if log:
                lo, hi = math.exp(lo), math.exp(hi)
            flag = FLAG_LOW_N if n_min < MIN_RUNS_TRUSTED else ""

    return Comparison(
        effect=effect,
        lo=lo,
        hi=hi,
        n_a=na,
        n_b=nb,
        level=level,
        scale=scale,
        p_value=p_value,
        u=u,
        a12=a12,
        min_p=min_p,
        method=method,
        flag=flag,
        note=note,
    )


def compare_paired(a, b, *, level: float = 0.95, label: str = "per-run values") -> Comparison:
    """Compare A with B block by block: ``a[i]`` and ``b[i]`` ran in the same block (one repeat of every arm, side
    by side, on a common arrival seed: model/seeds.py), so what the block shared cancels in their ratio.

    Effect and interval: the geometric mean of the per-block ratios a[i] / b[i] with a Student t interval on
    their logs (df = blocks - 1), exponentiated; the same rules as :func:`estimate` on those ratios (fewer
    than 3 blocks: NaN bounds, "n too small"; 3 or 4: "low n"; every ratio the same: "degenerate").
    ``a12`` is the share of blocks in which A exceeded B (ties counting one half). No test beside it: the
    verdicts' p is :func:`threshold_p` on the ratios."""
    _check_level(level)
    xa = _on_scale(a, log=True, name="a")
    xb = _on_scale(b, log=True, name="b")
    if xa.size != xb.size:
        raise ValueError(
            f"paired comparison: {xa.size} values of A against {xb.size} of B; each block holds one of each"
        )
    n = int(xa.size)
    d = xa - xb
    est = estimate(np.exp(d), log=True, level=level, label=f"per-block ratios of {label}")
    a12 = float((np.sum(d > 0) + 0.5 * np.sum(d == 0)) / n) if n else math.nan
    return Comparison(
        effect=est.point,
        lo=est.lo,
        hi=est.hi,
        n_a=n,
        n_b=n,
        level=level,
        scale="log",
        p_value=math.nan,
        u=math.nan,
        a12=a12,
        min_p=math.nan,
        method=f"ratio of geometric means, paired: Student t on the log of the per-block ratios of {label}; "
        f"R = {n} blocks",
        flag=est.flag,
    )


def ratio_of_means(a, b, *, level: float = 0.95, label: str = "per-run values", test: bool = True) -> Comparison:
    """Ratio of arithmetic means A / B with Fieller's interval, for quantities that can be exactly 0.

    Throttled time is 0 in a run that was never throttled, so a ratio of
    geometric means (logs) does not exist there. Fieller's interval is the set
    of ratios rho for which the contrast mean(A) - rho * mean(B) is not
    rejected by a Welch t test: (mA - rho mB)^2 <= t^2 (vA + rho^2 vB), with
    vX = var(X) / nX and Welch's degrees of freedom at the estimate. It needs
    mean(B) clearly above 0 (else the set is unbounded: NaN bounds, flag
    ``"n too small"`` with a note). Every run of A at exactly 0 gives the point
    0 and the flag ``"0 in R of R runs"`` (the check decides from the exact zero).
    The test beside it is the exact Mann-Whitney U, as in :func:`compare` (``test=False``: none).
    """
    _check_level(level)
    xa, xb = _values(a, "a"), _values(b, "b")
    na, nb = int(xa.size), int(xb.size)
    u, p_value = mann_whitney_exact(xa, xb) if test else (mann_whitney_u(xa, xb), math.nan)
    min_p = min_mwu_p(na, nb)
    note = _unreachable_significance_note(na, nb, min_p, level)
    method = f"ratio of means, Fieller interval (Welch) on {label}; " + (
        f"exact Mann-Whitney U; R = {na} vs {nb}" if test else f"R = {na} vs {nb}"
    )
    ma, mb = float(xa.mean()), float(xb.mean())
    base = dict(
        n_a=na,
        n_b=nb,
        level=level,
        scale="mean-ratio",
        p_value=p_value,
        u=u,
        a12=u / (na * nb),
        min_p=min_p,
        method=method,
        note=note,
    )
    if mb <= 0:
        return Comparison(
            effect=math.nan,
            lo=math.nan,
            hi=math.nan,
            flag=FLAG_DEGENERATE,
            **{**base, "note": "; ".join(x for x in (note, "the baseline's mean is 0") if x)},
        )
    effect = ma / mb
    if np.all(xa == 0):
        return Comparison(effect=0.0, lo=math.nan, hi=math.nan, flag=zeros_flag(na), **base)
    if min(na, nb) < MIN_RUNS_INTERVAL:
        return Comparison(effect=effect, lo=math.nan, hi=math.nan, flag=FLAG_N_TOO_SMALL, **base)
    va, vb = float(np.var(xa, ddof=1)) / na, float(np.var(xb, ddof=1)) / nb
    se2 = va + effect**2 * vb
    if se2 == 0:
        _degenerate(f"{label}: both configurations constant")
        return Comparison(effect=effect, lo=math.nan, hi=math.nan, flag=FLAG_DEGENERATE, **base)
    terms = (va**2 / (na - 1) if na > 1 else 0.0) + ((effect**2 * vb) ** 2 / (nb - 1) if nb > 1 else 0.0)
    df = se2**2 / terms if terms > 0 else float(min(na, nb) - 1)
    t2 = float(sps.t.ppf(0.5 + level / 2, df)) ** 2
    qa = mb**2 - t2 * vb
    qb = ma * mb
    qc = ma**2 - t2 * va
    disc = qb**2 - qa * qc
    if qa <= 0 or disc < 0:
        return Comparison(
            effect=effect,
            lo=math.nan,
            hi=math.nan,
            flag=FLAG_N_TOO_SMALL,
            **{
                **base,
                "note": "; ".join(
                    x
                    for x in (note, "the baseline's mean is not clearly above 0, so the ratio has no bounded interval")
                    if x
                ),
            },
        )
    root = math.sqrt(disc)
    lo, hi = (qb - root) / qa, (qb + root) / qa
    flag = FLAG_LOW_N if min(na, nb) < MIN_RUNS_TRUSTED else ""
    return Comparison(effect=effect, lo=lo, hi=hi, flag=flag, **base)


def threshold_p(a, b=None, *, threshold: float, relation: Literal[">", "<"], log: bool) -> float:
    """One-sided p of a check against its own threshold, the same t as its interval (docs/STATISTICS.md §4).

    H0: the effect lies on the wrong side of (or at) ``threshold``; a small p says the claim's side. With
    ``b`` the Welch t of mean(a) - mean(b) (on the logs for ``log``, against log(threshold)); without it the
    one-sample t of mean(a) against the threshold. The two-sided interval at level 1 - 2 alpha clears the
    threshold exactly when p < alpha, so the p agrees with the verdict. NaN without spread or below
    :data:`MIN_RUNS_INTERVAL` runs a side."""
    if relation not in (">", "<"):
        raise ValueError(f"relation must be '>' or '<', got {relation!r}")
    xa = _on_scale(a, log=log, name="a")
    t0 = math.log(threshold) if log else float(threshold)
    if b is None:
        n = int(xa.size)
        if n < MIN_RUNS_INTERVAL or np.ptp(xa) == 0:
            return math.nan
        se = float(np.std(xa, ddof=1)) / math.sqrt(n)
        df = float(n - 1)
        d = float(np.mean(xa)) - t0
    else:
        xb = _on_scale(b, log=log, name="b")
        na, nb = int(xa.size), int(xb.size)
        if min(na, nb) < MIN_RUNS_INTERVAL:
            return math.nan
        va, vb = float(np.var(xa, ddof=1)) / na, float(np.var(xb, ddof=1)) / nb
        se2 = va + vb
        if se2 == 0:
            return math.nan
        df = se2**2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
        se = math.sqrt(se2)
        d = float(np.mean(xa) - np.mean(xb)) - t0
    t = d / se
    return float(sps.t.sf(t, df)) if relation == ">" else float(sps.t.cdf(t, df))


# --------------------------------------------------------------------------
# several comparisons


def t_power(runs: int, sd: float, effect: float, *, two_sample: bool, level: float = 0.95) -> float:
    """Power of the one-sided t test the intervals decide by (docs/STATISTICS.md §6: plan R from the per-run spread):
    the chance that the ``level`` interval clears a threshold lying ``effect`` away from the true value, with
    per-run values of standard deviation ``sd`` on the check's scale (the log for ratios), ``runs`` per arm;
    ``two_sample``: a ratio of two arms (Welch with equal spreads and runs, df 2R - 2), else one arm (df R - 1).
    Noncentral t, exact under the normal model."""
    _check_level(level)
    if runs < 2 or not (sd > 0) or not math.isfinite(effect):
        raise ValueError(f"t_power: runs {runs} (at least 2), sd {sd} (above 0), effect {effect} (finite)")
    df = 2 * runs - 2 if two_sample else runs - 1
    se = sd * math.sqrt((2 if two_sample else 1) / runs)
    crit = float(sps.t.ppf(1 - (1 - level) / 2, df))
    return float(sps.nct.sf(crit, df, abs(effect) / se))


def repeats_for_power(
    sd: float, effect: float, *, two_sample: bool, power: float = 0.8, level: float = 0.95, most: int = 1000
) -> int:
    """The fewest runs per arm whose :func:`t_power` reaches ``power`` (docs/STATISTICS.md §6: power >= 80% at the effect
    the check must see); ValueError past ``most``."""
    if not 0 < power < 1:
        raise ValueError(f"repeats_for_power: power {power} is not in (0, 1)")
    for runs in range(2, most + 1):
        if t_power(runs, sd, effect, two_sample=two_sample, level=level) >= power:
            return runs
    raise ValueError(f"repeats_for_power: more than {most} runs per arm for effect {effect} at sd {sd}")


def look_levels(fraction: float, level: float = 0.95) -> tuple[float, float]:
    """The levels of two looks at one experiment (docs/STATISTICS.md §6), the first after the share ``fraction``
    of its runs, the second after all: the one-sided error a = (1 - ``level``) / 2 of one look is spent over
    both by the O'Brien-Fleming-type function of Lan and DeMets, a(t) = 1 - Phi(z_(1 - a) / sqrt(t)). The first
    look spends a(fraction); the second look's boundary takes the rest, from the bivariate normal of the two
    looks' statistics (correlation sqrt(fraction)). Returned as two-sided confidence levels, as the engine takes
    a level: 1 - 2 a_k for each look."""
    _check_level(level)
    if not 0 < fraction < 1:
        raise ValueError(f"look_levels: fraction {fraction} is not in (0, 1)")
    alpha = (1 - level) / 2
    z_first = float(sps.norm.isf(alpha)) / math.sqrt(fraction)
    rho = math.sqrt(fraction)
    spread = math.sqrt(1 - rho * rho)

    def excess(z: float) -> float:
        # the chance, with no effect, that either look crosses its boundary, less the error to spend; the joint
        # cdf integrated over the first look's statistic (deterministic, unlike a sampled multivariate cdf)
        below, _ = integrate.quad(lambda x: sps.norm.pdf(x) * sps.norm.cdf((z - rho * x) / spread), -12.0, z_first)
        return 1 - below - alpha

    z_second = optimize.brentq(excess, float(sps.norm.isf(alpha)) - 1e-9, 10.0, xtol=1e-10)
    return 1 - 2 * float(sps.norm.sf(z_first)), 1 - 2 * float(sps.norm.sf(z_second))


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjustment (family-wise error), in the input order.

    Sort the m p-values ascending, multiply the i-th smallest (i from 0) by
    m - i, make the sequence non-decreasing with a running maximum and cap it
    at 1. Reject at level alpha wherever the adjusted value is <= alpha. Used
    for the planned comparisons of the findings table.
    """
    p = _pvalues(pvalues)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def holm_floor(pvalues, min_pvalues) -> np.ndarray:
    """The smallest Holm-adjusted p each comparison could reach, the others' p-values as they are.

    Comparison i's own p is replaced by the smallest p its test can produce
    (``min_pvalues[i]``, e.g. :func:`min_mwu_p`) and the family adjusted again.
    When the result stays above alpha, the comparison cannot reach significance
    AFTER Holm's adjustment whatever its data (R = 5 vs 5: smallest exact p
    0.0079; in a family of k comparisons Holm multiplies it by up to k).
    """
    p, floor = _pvalues(pvalues), _pvalues(min_pvalues)
    if p.shape != floor.shape:
        raise ValueError("one smallest p-value per comparison")
    out = np.empty(p.size)
    for i in range(p.size):
        best = p.copy()
        best[i] = floor[i]
        out[i] = holm(best)[i]
    return out


def bh(pvalues) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (false discovery rate), for sweeps.

    A thin wrapper around :func:`scipy.stats.false_discovery_control` that
    validates its input and accepts an empty list.
    """
    p = _pvalues(pvalues)
    if p.size == 0:
        return p.copy()
    return np.asarray(sps.false_discovery_control(p, method="bh"), dtype=float)


# --------------------------------------------------------------------------
# distribution-free intervals


@functools.lru_cache(maxsize=256)
def order_statistic_ranks(n: int, q: float, level: float = 0.95) -> tuple[int, int] | None:
    """1-based ranks (l, u) such that [x(l), x(u)] covers the q-quantile.

    For n i.i.d. continuous values, the number B of values below the true
    q-quantile is Binomial(n, q); x(l) misses from above when B <= l - 1 and
    x(u) misses from below when B >= u. We take the largest l and the smallest
    u that keep each of those probabilities at or below (1 - level) / 2, so
    the coverage is at least ``level`` whatever the distribution. Returns None
    when n is too small for such ranks to exist (for the median at 95%: n < 6).
    At n = 10 and the median this gives (2, 9).
    """
    _check_level(level)
    if n < 1:
        return None
    tail = (1 - level) / 2
    # Largest j with P(B <= j) <= tail; l = j + 1.
    j = int(sps.binom.ppf(tail, n, q))
    if sps.binom.cdf(j, n, q) > tail:
        j -= 1
    low = j + 1
    # Smallest j with P(B <= j) >= 1 - tail, i.e. P(B >= j + 1) <= tail; u = j + 1.
    high = int(sps.binom.ppf(1 - tail, n, q)) + 1
    if low < 1 or high > n:
        return None
    return low, high


def _median_and_ranks(values, level: float) -> tuple[np.ndarray, int, float, tuple[int, int] | None]:
    """The sorted runs, their number, the median run and the ranks of its interval at ``level`` (None when
    the runs are too few for it)."""
    x = np.sort(_values(values))
    n = int(x.size)
    return x, n, float(quantile(x, 0.5)), order_statistic_ranks(n, 0.5, level)


def median_ci(values, level: float = 0.95, *, label: str = "per-run values") -> Estimate:
    """Distribution-free confidence interval for the median run.

    The point is the sample median; the bounds are order statistics chosen by
    :func:`order_statistic_ranks` (the same interval as
    ``scipy.stats.quantile_test(...).confidence_interval``). It assumes
    nothing about the shape of the per-run distribution, at the price of
    needing at least 6 runs for a 95% interval; with fewer the bounds are NaN
    and the flag is "n too small". At R = 10 the interval is [x(2), x(9)].
    Bounds that coincide (heavy ties) count as degenerate.
    """
    x, n, point, ranks = _median_and_ranks(values, level)
    if ranks is None:
        method = f"distribution-free median CI (order statistics) of {label}, R = {n}"
        return Estimate(point, math.nan, math.nan, n, level, "linear", method, FLAG_N_TOO_SMALL)
    low, high = ranks
    method = f"distribution-free median CI, order statistics x({low})..x({high}) of {label}, R = {n}"
    lo, hi = float(x[low - 1]), float(x[high - 1])
    if lo == hi:
        _degenerate(f"{label}: the bounding order statistics are equal")
        return Estimate(point, math.nan, math.nan, n, level, "linear", method, FLAG_DEGENERATE)
    flag = FLAG_LOW_N if n < MIN_RUNS_TRUSTED else ""
    return Estimate(point, lo, hi, n, level, "linear", method, flag)


# --------------------------------------------------------------------------
# bootstraps


def _canonical_runs(runs) -> list[np.ndarray]:
    """Each run sorted, runs in a canonical order.

    Sorting makes the result independent of the order of requests within a
    run and of the order in which runs are listed, so a seeded bootstrap gives
    the very same numbers for shuffled input. Multiplying all values by c > 0
    keeps this order, so bootstrap bounds scale exactly with c.
    """
    sorted_runs = [np.sort(_values(r, f"run {i}")) for i, r in enumerate(runs)]
    sorted_runs.sort(key=lambda r: (r.size, r.tolist()))
    return sorted_runs


def _percentile_bounds(boot: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = quantile(boot, [0.5 - level / 2, 0.5 + level / 2])
    return float(lo), float(hi)


def cluster_bootstrap_quantile(
    runs,
    q: float,
    *,
    rng: np.random.Generator,
    n_boot: int = 2000,
    level: float = 0.95,
) -> Estimate:
    """Pooled q-quantile over runs with a cluster (whole-run) bootstrap CI.

    For quantiles too far in the tail to estimate per run (p99.9 from runs with
    fewer than :data:`P999_MIN_SAMPLES` samples): the point is the quantile of
    all requests pooled; the interval is the percentile interval of that
    pooled quantile over ``n_boot`` resamples that draw R whole runs with
    replacement, so run-to-run variation stays in the interval. Flagged
    "pooled, cluster bootstrap". Below :data:`MIN_RUNS_BOOTSTRAP` runs there
    is no interval (NaN bounds, "n too small"): with few runs a bootstrap
    covers the truth far too rarely (docs/STATISTICS.md §3).
    """
    _check_level(level)
    sorted_runs = _canonical_runs(runs)
    n = len(sorted_runs)
    if n == 0:
        raise ValueError("no runs given")
    if n_boot < 1:
        raise ValueError(f"n_boot must be positive, got {n_boot}")
    point = float(quantile(np.concatenate(sorted_runs), q))
    method = (
        f"p{100 * q:g} of requests pooled over runs, percentile cluster bootstrap "
        f"(whole runs resampled, {n_boot} resamples), R = {n}"
    )
    if n < MIN_RUNS_BOOTSTRAP:
        # docs/STATISTICS.md §3: no bootstrap below R = 20 (at R = 3-5 it covers 0.26-0.82). No exceptions.
        return Estimate(
            point,
            math.nan,
            math.nan,
            n,
            level,
            "linear",
            method + f": no interval, a bootstrap over runs needs R >= {MIN_RUNS_BOOTSTRAP}",
            FLAG_N_TOO_SMALL,
        )
    picks = rng.integers(0, n, size=(n_boot, n))
    boot = np.empty(n_boot)
    for b, row in enumerate(picks):
        boot[b] = quantile(np.concatenate([sorted_runs[i] for i in row]), q)
    lo, hi = _percentile_bounds(boot, level)
    if lo == hi:
        _degenerate(f"pooled p{100 * q:g}: every resample gives the same value")
        return Estimate(point, math.nan, math.nan, n, level, "linear", method, FLAG_DEGENERATE)
    return Estimate(point, lo, hi, n, level, "linear", method, FLAG_CLUSTER_BOOTSTRAP)


def bootstrap_runs(
    values,
    stat: Callable[[np.ndarray], float],
    rng: np.random.Generator,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    label: str = "per-run values",
) -> Estimate:
    """Percentile bootstrap of ``stat`` over per-run values; needs R >= 20.

    With few runs a bootstrap resamples from too few distinct values to see
    the real spread and its intervals are too narrow (about 83% coverage for a
    nominal 95% at R = 5), so below :data:`MIN_RUNS_BOOTSTRAP` runs this
    raises ValueError; use :func:`estimate` there. ``stat`` maps a 1-D array to
    a number and should not depend on the order of its input.
    """
    _check_level(level)
    x = np.sort(_values(values))
    n = int(x.size)
    if n < MIN_RUNS_BOOTSTRAP:
        raise ValueError(
            f"bootstrap over runs needs R >= {MIN_RUNS_BOOTSTRAP}, got R = {n}: with few "
            "runs the resamples understate the spread (about 83% coverage for a nominal "
            "95% at R = 5); use estimate() (Student t on per-run values) instead"
        )
    if n_boot < 1:
        raise ValueError(f"n_boot must be positive, got {n_boot}")
    point = float(stat(x))
    picks = rng.integers(0, n, size=(n_boot, n))
    boot = np.fromiter((float(stat(x[row])) for row in picks), dtype=float, count=n_boot)
    method = f"percentile bootstrap over runs ({n_boot} resamples) of {label}, R = {n}"
    if not np.all(np.isfinite(boot)):
        raise ValueError("stat returned a non-finite value on a resample")
    lo, hi = _percentile_bounds(boot, level)
    if lo == hi:
        _degenerate(f"{label}: every resample gives the same value")
        return Estimate(point, math.nan, math.nan, n, level, "linear", method, FLAG_DEGENERATE)
    return Estimate(point, lo, hi, n, level, "linear", method, "")


# --------------------------------------------------------------------------
# findings


def verdict(lo: float, hi: float, threshold: float, expect: Literal[">", "<"]) -> str:
    """Verdict of a finding "effect <expect> threshold" from its interval.

    ``"reproduced"`` when the whole interval lies strictly on the expected
    side of the threshold, ``"contradicted"`` when it lies strictly on the
    other side, ``"inconclusive"`` when it contains or touches the threshold
    or has a NaN bound (no interval). "Not testable here" is decided before
    any statistics, by the caller.
    """
    if expect not in (">", "<"):
        raise ValueError(f"expect must be '>' or '<', got {expect!r}")
    if math.isnan(threshold):
        raise ValueError("threshold is NaN")
    if math.isnan(lo) or math.isnan(hi):
        return "inconclusive"
    if lo > hi:
        raise ValueError(f"interval bounds are reversed: lo = {lo!r} > hi = {hi!r}")
    above, below = lo > threshold, hi < threshold
    if (above and expect == ">") or (below and expect == "<"):
        return "reproduced"
    if above or below:
        return "contradicted"
    return "inconclusive"


# --------------------------------------------------------------------------
# the wrong method, kept as a counter-example


def pooled_iid_quantile_ci(
    runs,
    q: float,
    *,
    level: float = 0.95,
    method: Literal["order", "bootstrap"] = "order",
    rng: np.random.Generator | None = None,
    n_boot: int = 2000,
) -> Estimate:
    """WRONG ON PURPOSE: a quantile CI that treats pooled requests as i.i.d.

    Never use it for reporting. It pools every request of every run and draws
    either the distribution-free order-statistic interval
    (``method="order"``) or a percentile bootstrap over requests
    (``method="bootstrap"``, needs ``rng``). Requests of one run share that
    run's conditions, so the interval ignores run-to-run variation and covers
    the truth far too rarely; the tests keep it to demonstrate exactly that.
    """
    _check_level(level)
    run_list = [_values(r, f"run {i}") for i, r in enumerate(runs)]
    if not run_list:
        raise ValueError("no runs given")
    pooled = np.concatenate(run_list)
    n_runs = len(run_list)
    total = int(pooled.size)
    point = float(quantile(pooled, q))
    text = f"WRONG: {total} requests of {n_runs} runs pooled as i.i.d.,"
    if method == "order":
        ranks = order_statistic_ranks(total, q, level)
        if ranks is None:
            return Estimate(point, math.nan, math.nan, n_runs, level, "linear", text, FLAG_N_TOO_SMALL)
        # Two order statistics are enough; a partial sort keeps this O(N).
        picked = np.partition(pooled, [ranks[0] - 1, ranks[1] - 1])
        lo, hi = float(picked[ranks[0] - 1]), float(picked[ranks[1] - 1])
        text += " order-statistic CI"
    elif method == "bootstrap":
        if rng is None:
            raise ValueError("method='bootstrap' needs rng")
        boot = np.empty(n_boot)
        for b in range(n_boot):
            boot[b] = quantile(pooled[rng.integers(0, total, size=total)], q)
        lo, hi = _percentile_bounds(boot, level)
        text += f" bootstrap CI ({n_boot} resamples)"
    else:
        raise ValueError(f"method must be 'order' or 'bootstrap', got {method!r}")
    return Estimate(point, lo, hi, n_runs, level, "linear", text, "pooled i.i.d.")
