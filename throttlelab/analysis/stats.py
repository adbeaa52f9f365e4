"""Statistics across repeated runs, as specified in ``shared/STATS.md``.

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
    a pooled quantile (p99.9 from short runs) with whole runs resampled.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

__all__ = [
    "QUANTILE_METHOD",
    "P999_MIN_SAMPLES",
    "MIN_RUNS_INTERVAL",
    "MIN_RUNS_TRUSTED",
    "MIN_RUNS_MEDIAN_CI",
    "MIN_RUNS_BOOTSTRAP",
    "FLAG_LOW_N",
    "FLAG_N_TOO_SMALL",
    "FLAG_DEGENERATE",
    "FLAG_CLUSTER_BOOTSTRAP",
    "DegenerateWarning",
    "Estimate",
    "Comparison",
    "quantile",
    "run_latency_summary",
    "estimate",
    "compare",
    "min_mwu_p",
    "mann_whitney_exact",
    "holm",
    "bh",
    "order_statistic_ranks",
    "median_ci",
    "cluster_bootstrap_quantile",
    "bootstrap_runs",
    "verdict",
]

#: numpy's name for the sample quantile used everywhere (Hyndman & Fan type 7).
QUANTILE_METHOD = "linear"

#: A run must hold at least this many latency samples before its own p99.9 is
#: reported. 3,700 is about the smallest n for which the largest sample lies
#: above the true p99.9 with probability 0.975 (1 - 0.999**n >= 0.975 needs
#: n >= 3,688), i.e. the first n at which the sample says anything about that
#: quantile. Shorter runs get a pooled p99.9 with a cluster bootstrap instead.
P999_MIN_SAMPLES = 3700

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

Scale = Literal["log", "linear"]


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


def run_latency_summary(latencies_ms) -> dict[str, float | int]:
    """The per-run latency metrics of one run.

    ``latencies_ms``: the run's latencies after the warmup prefix, each one
    measured from the SCHEDULED send time. Returns ``n`` and the quantiles
    ``p50``, ``p90``, ``p99``, ``p99_9`` and ``max`` (all :func:`quantile`).
    ``p99_9`` is NaN unless the run has at least :data:`P999_MIN_SAMPLES`
    samples; use :func:`cluster_bootstrap_quantile` across runs instead. The
    max is a per-run value only: show it per run, never with a CI.
    """
    lat = _values(latencies_ms, "latencies_ms")
    if np.any(lat < 0):
        raise ValueError("latencies_ms contains negative latencies (clock or parsing error)")
    p50, p90, p99, p999 = quantile(lat, [0.5, 0.9, 0.99, 0.999])
    return {
        "n": int(lat.size),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "p99_9": float(p999) if lat.size >= P999_MIN_SAMPLES else math.nan,
        "max": float(lat.max()),
    }


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

    * R = 1 or all values identical: point only, NaN bounds, a
      :class:`DegenerateWarning`, flag ``"degenerate"``;
    * otherwise R = 2: point only, NaN bounds, flag ``"n too small"``;
    * 3 <= R < 5: interval with flag ``"low n"``;
    * R >= 5: interval, empty flag.

    ``label`` names the values in the method text ("per-run p99").
    """
    _check_level(level)
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


def compare(a, b, *, log: bool = True, level: float = 0.95, label: str = "per-run values") -> Comparison:
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
    effect".
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
    u, p_value = mann_whitney_exact(xa, xb)
    a12 = u / (na * nb)
    min_p = min_mwu_p(na, nb)
    note = ""
    if min_p > 1 - level:
        runs = f"R = {na}" if na == nb else f"R = {na} vs {nb}"
        note = (
            f"cannot reach significance with {runs}: the smallest exact "
            f"Mann-Whitney p is {min_p:.3g} > {1 - level:.3g}"
        )

    if log:
        method = f"ratio of geometric means, Welch t on log {label}"
    else:
        method = f"difference of means, Welch t on {label}"
    if na + nb <= MWU_EXACT_MAX_RUNS:
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


# --------------------------------------------------------------------------
# several comparisons


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
    x = np.sort(_values(values))
    n = int(x.size)
    point = float(quantile(x, 0.5))
    ranks = order_statistic_ranks(n, 0.5, level)
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
    "pooled, cluster bootstrap"; with fewer than 3 runs, NaN bounds and
    "n too small".
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
    if n < MIN_RUNS_INTERVAL:
        return Estimate(point, math.nan, math.nan, n, level, "linear", method, FLAG_N_TOO_SMALL)
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
