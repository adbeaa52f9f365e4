"""Tests of throttlelab.analysis.stats: the checks of docs/STATISTICS.md §8, plus known answers.

Everything random is drawn from seeded numpy Generators, so every number
below is the same on every run. The simulations are vectorised (trials x runs
x requests arrays, generated in chunks) to keep the file fast.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from throttlelab.analysis import stats
from throttlelab.analysis.stats import (
    DegenerateWarning,
    bh,
    bootstrap_runs,
    cluster_bootstrap_quantile,
    compare,
    estimate,
    holm,
    median_ci,
    min_mwu_p,
    order_statistic_ranks,
    pooled_iid_quantile_ci,
    quantile,
    run_latency_summary,
    verdict,
)

# t quantiles copied from a printed table (two-sided 95%), not from scipy.
T975_DF2 = 4.302653
T975_DF4 = 2.776445


# ==========================================================================
# The two-level lognormal model of docs/STATISTICS.md §8
#
#   latency of request j in run r of a trial = exp(MU + sigma * u_r + S_REQ * e_rj)
#
# with u_r and e_rj independent standard normals: sigma is the run-to-run
# variation (0 or 10%), S_REQ the spread of requests inside a run.

MU = math.log(10.0)  # median request latency 10 ms
S_REQ = 0.5
N_REQ = 2000  # requests per run
Q = 0.99
R_MAX = 20
RS = (5, 10, 20)
SIGMAS = (0.0, 0.1)
N_TRIALS = 1000  # simulated experiments per (sigma, R) cell; docs/STATISTICS.md asks >= 400
CHUNK = 50  # trials generated at once: 50 x 20 x 2000 doubles = 16 MB
POOLED_CELLS = ((0.1, 5), (0.1, 10), (0.1, 20), (0.0, 10))


def sample_quantile_position(n: int, q: float) -> tuple[int, float]:
    """0-based index k and weight f of the type-7 quantile: (1-f) x[k] + f x[k+1]."""
    h = (n - 1) * q
    k = math.floor(h)
    return k, h - k


def expected_log_sample_quantile(n: int, q: float, s: float, rng: np.random.Generator, draws: int) -> float:
    """E[log Qhat], Qhat the type-7 sample q-quantile of n draws of exp(s * N(0, 1)).

    Simulating runs of n requests would need draws * n normals; we draw the
    two order statistics that the quantile interpolates between directly.
    For n i.i.d. uniforms, U(k) ~ Beta(k, n - k + 1) (1-based k) and, given
    U(k) = v, the next one is v + (1 - v) * Beta(1, n - k): the n - k larger
    values are uniform on (v, 1) and U(k+1) is their minimum. Mapping through
    the normal quantile function gives the normal order statistics. The test
    `test_true_value_matches_brute_force` checks this against full runs.
    """
    k0, f = sample_quantile_position(n, q)
    k = k0 + 1  # 1-based rank of the lower order statistic
    u_k = rng.beta(k, n - k + 1, size=draws)
    u_next = u_k + (1 - u_k) * rng.beta(1, n - k, size=draws)
    low = np.exp(s * special.ndtri(u_k))
    high = np.exp(s * special.ndtri(u_next))
    return float(np.mean(np.log((1 - f) * low + f * high)))


@pytest.fixture(scope="module")
def true_p99() -> float:
    """The quantity that "Student t on log per-run p99" estimates.

    The method averages log(per-run p99) over runs, so its target is
    exp(E[log p99_run]): the geometric mean of the per-run p99 over the
    population of runs, NOT the p99 of the latency distribution (the sample
    p99 of 2,000 requests is biased, and the log adds a bit more).

    Because the type-7 quantile scales with its data, a run's p99 is
    exp(MU + sigma * u_r) * Qhat_r where Qhat_r is the sample p99 of 2,000
    draws of exp(S_REQ * e). Since E[u_r] = 0,

        log target = MU + E[log Qhat],

    the same for sigma = 0 and 0.1 and for every R. E[log Qhat] comes from 4
    million exactly simulated runs (fixed seed); its Monte Carlo error is
    about 2e-5 on the log scale, a thousandth of the narrowest interval's
    half-width.
    """
    rng = np.random.default_rng(20240601)
    return math.exp(MU + expected_log_sample_quantile(N_REQ, Q, S_REQ, rng, draws=4_000_000))


def pooled_target(sigma: float) -> float:
    """The p99 of the pooled (marginal) latency distribution.

    It is what the pooled i.i.d. method estimates: marginally log latency is
    N(MU, S_REQ**2 + sigma**2), so the target is exact. Judging the pooled
    method against its own target gives it every chance; it still fails.
    """
    return math.exp(MU + math.hypot(S_REQ, sigma) * sps.norm.ppf(Q))


@dataclass(frozen=True)
class Simulation:
    p99: dict[float, np.ndarray]  # sigma -> (N_TRIALS, R_MAX) per-run p99 in ms
    pooled_covered: dict[tuple[float, int], np.ndarray]  # (sigma, R) -> bool per trial
    pooled_mwu_p: np.ndarray  # requests pooled, A vs B identical, sigma 0.1, R 5


@pytest.fixture(scope="module")
def simulation() -> Simulation:
    """N_TRIALS simulated experiments of R_MAX runs x N_REQ requests each.

    Shortcuts that keep the file fast without changing any cell's answer:
    * one set of request draws e serves both sigma cells (the sigma = 0.1 run
      factors multiply the same e), and the runs of R = 5 and 10 are the first
      runs of the R = 20 trial. The cells are therefore correlated with each
      other, but each one is an honest estimate from N_TRIALS independent
      experiments, which is all that the tests read.
    * the per-run p99 is computed for all runs at once with quantile(axis=-1),
      the same definition run_latency_summary uses (tested separately).
    """
    rng = np.random.default_rng(8)
    p99 = {s: np.empty((N_TRIALS, R_MAX)) for s in SIGMAS}
    covered = {cell: np.empty(N_TRIALS, dtype=bool) for cell in POOLED_CELLS}
    mwu_p = []
    for start in range(0, N_TRIALS, CHUNK):
        stop = start + CHUNK
        request_factor = rng.standard_normal((CHUNK, R_MAX, N_REQ))
        np.multiply(request_factor, S_REQ, out=request_factor)
        np.exp(request_factor, out=request_factor)
        run_effect = rng.standard_normal((CHUNK, R_MAX))
        for sigma in SIGMAS:
            latency = request_factor * np.exp(MU + sigma * run_effect)[..., None]
            p99[sigma][start:stop] = quantile(latency, Q, axis=-1)
            for cell_sigma, r in POOLED_CELLS:
                if cell_sigma != sigma:
                    continue
                target = pooled_target(sigma)
                for t in range(CHUNK):
                    est = pooled_iid_quantile_ci(latency[t, :r], Q)
                    covered[(sigma, r)][start + t] = est.lo <= target <= est.hi
            if sigma == 0.1:
                # The wrong test: Mann-Whitney on pooled requests of two
                # identical configurations (trials 2i and 2i + 1), R = 5.
                for t in range(0, CHUNK, 2):
                    res = sps.mannwhitneyu(latency[t, :5].ravel(), latency[t + 1, :5].ravel())
                    mwu_p.append(res.pvalue)
    return Simulation(p99=p99, pooled_covered=covered, pooled_mwu_p=np.asarray(mwu_p))


# ==========================================================================
# Coverage


def test_true_value_matches_brute_force(true_p99):
    """The order-statistic shortcut agrees with full simulated runs."""
    rng = np.random.default_rng(99)
    runs = np.exp(S_REQ * rng.standard_normal((4000, N_REQ)))
    log_q = np.log(quantile(runs, Q, axis=-1))
    brute = MU + log_q.mean()
    se = log_q.std(ddof=1) / math.sqrt(log_q.size)
    assert abs(brute - math.log(true_p99)) < 4 * se
    # and the target really differs from the population p99 (the sample p99
    # of 2,000 requests is biased low, about 0.5% here)
    assert true_p99 != pytest.approx(pooled_target(0.0), rel=1e-3)


@pytest.mark.parametrize("r", RS)
@pytest.mark.parametrize("sigma", SIGMAS)
def test_coverage_of_student_t_on_log_per_run_p99(simulation, true_p99, sigma, r):
    hits = 0
    for per_run in simulation.p99[sigma][:, :r]:
        est = estimate(per_run, log=True, label="per-run p99")
        assert est.has_interval and est.flag == ""
        hits += est.lo <= true_p99 <= est.hi
    coverage = hits / N_TRIALS
    print(f"coverage sigma={sigma} R={r}: {coverage:.3f}")
    assert 0.92 <= coverage <= 0.98, f"coverage {coverage:.3f} at sigma={sigma}, R={r}"


@pytest.mark.parametrize("r", RS)
def test_pooled_iid_interval_fails_with_run_to_run_variation(simulation, r):
    coverage = simulation.pooled_covered[(0.1, r)].mean()
    print(f"pooled i.i.d. coverage sigma=0.1 R={r}: {coverage:.3f}")
    assert coverage < 0.80, f"pooled i.i.d. coverage {coverage:.3f} at R={r}"


def test_pooled_iid_interval_is_fine_without_run_effects(simulation):
    """Control: with sigma = 0 pooling is legitimate, so the failure above is
    caused by run-to-run variation and not by a broken interval."""
    coverage = simulation.pooled_covered[(0.0, 10)].mean()
    print(f"pooled i.i.d. coverage sigma=0 R=10: {coverage:.3f}")
    assert coverage >= 0.92


# ==========================================================================
# Null calibration


@pytest.mark.parametrize("r", RS)
@pytest.mark.parametrize("sigma", SIGMAS)
def test_identical_configurations_rarely_declared_different(simulation, sigma, r):
    """Criterion: the Welch 95% CI of the ratio of geometric means excludes 1.

    We judge "declared different" by the Welch interval on the logs, the
    interval the findings use; it is a continuous-data method, so its error
    rate should sit near 5%. The exact Mann-Whitney test is discrete (at R = 5
    its attainable size below 0.05 is 8/252 = 0.032), so for it we only check
    that it is not anti-conservative. Pairs: trials 2i and 2i + 1.
    """
    values = simulation.p99[sigma][:, :r]
    declared, mwu_rejects = 0, 0
    pairs = N_TRIALS // 2
    for i in range(pairs):
        c = compare(values[2 * i], values[2 * i + 1], log=True, label="per-run p99")
        declared += c.lo > 1 or c.hi < 1
        mwu_rejects += c.p_value < 0.05
    rate = declared / pairs
    print(f"null: Welch declares different sigma={sigma} R={r}: {rate:.3f}; MWU {mwu_rejects / pairs:.3f}")
    assert 0.02 <= rate <= 0.08, f"false difference rate {rate:.3f}"
    assert mwu_rejects / pairs <= 0.08


def test_mann_whitney_on_pooled_requests_rejects_identical_configurations(simulation):
    """The wrong unit of replication: two identical configurations look different."""
    rate = float(np.mean(simulation.pooled_mwu_p < 0.05))
    print(f"null: MWU on pooled requests rejects {rate:.3f}")
    assert rate > 0.5


# ==========================================================================
# Known answers


def test_quantile_is_type_7():
    assert quantile([10, 20, 30, 40, 50], 0.9) == pytest.approx(46.0)  # h = 3.6
    assert quantile([4, 1, 3, 2], 0.5) == pytest.approx(2.5)
    assert quantile([1, 2, 3, 4], 1 / 3) == pytest.approx(2.0)  # h = 1 exactly
    assert quantile([7, 3], 0.0) == 3 and quantile([7, 3], 1.0) == 7
    np.testing.assert_allclose(quantile([[1, 2, 3], [10, 20, 30]], 0.5, axis=-1), [2, 20])


def test_run_latency_summary_known_values():
    summary = run_latency_summary(np.arange(1.0, 401.0)[::-1])
    assert summary.n == 400 and summary.errors == 0
    assert summary["p50"] == pytest.approx(200.5)
    assert summary["p90"] == pytest.approx(360.1)  # h = 359.1
    assert summary["p99"] == pytest.approx(396.01)  # h = 395.01
    assert summary["max"] == 400
    assert math.isnan(summary["p99_9"])
    assert summary.notes == {"p99_9": "n too small for p99.9: 400 requests (needs 3,688)"}


@pytest.mark.parametrize(
    ("name", "q", "need"),
    [
        ("p50", 0.5, 6),
        ("p75", 0.75, 13),
        ("p90", 0.9, 36),
        ("p95", 0.95, 72),
        ("p99", 0.99, 368),
        ("p99_9", 0.999, 3688),
    ],
)
def test_minimum_samples_per_quantile(name, q, need):
    """docs/STATISTICS.md §2: n >= ln 0.025 / ln q, so that the run's maximum lies above the true quantile
    with probability 97.5%."""
    assert stats.min_samples(q) == need and stats.QUANTILES[name] == q
    assert 1 - q**need >= 0.975 > 1 - q ** (need - 1)
    assert stats.too_few_samples(q, need) is None
    assert stats.too_few_samples(q, need - 1) == (
        f"n too small for {stats.quantile_name(q)}: {need - 1} requests (needs {need:,})"
    )


def test_a_quantile_is_not_computed_below_its_minimum():
    rng = np.random.default_rng(3)
    for name in ("p50", "p75", "p90", "p99", "p99_9"):
        need = stats.min_samples(stats.QUANTILES[name])
        few, enough_values = run_latency_summary(rng.exponential(size=need - 1)), rng.exponential(size=need)
        assert math.isnan(few[name]) and few.notes[name].startswith(f"n too small for {name.replace('_', '.')}")
        assert run_latency_summary(enough_values)[name] == pytest.approx(
            np.quantile(enough_values, stats.QUANTILES[name])
        )
    sixty = run_latency_summary(rng.exponential(size=60))
    assert sixty.notes["p99"] == "n too small for p99: 60 requests (needs 368)"
    assert math.isfinite(sixty["p90"]) and math.isnan(sixty["p99"])


def test_supported_quantile_is_the_highest_every_run_affords():
    assert stats.supported_quantile([6000, 5800, 6100]) == 0.99
    assert stats.supported_quantile([60, 58, 64]) == 0.9  # the quick profile's service runs
    assert stats.supported_quantile([30, 29, 31]) == 0.5  # the ci profile's
    assert stats.supported_quantile([400, 35]) == 0.5  # one short run decides
    assert stats.supported_quantile([5, 60]) is None


@pytest.mark.parametrize(
    ("clumps", "q"),
    [(0, None), (4, None), (5, None), (6, 0.5), (12, 0.5), (13, 0.75), (20, 0.75), (35, 0.75), (36, 0.9)]
    + [(120, 0.9), (367, 0.9), (368, 0.99)],
)
def test_a_window_supports_the_quantile_its_clumps_afford(clumps, q):
    """docs/STATISTICS.md §2: the rule for samples counted in independent clumps, not requests: quick's E2b
    and X6 windows (5 clumps) support no quantile at all, E7's (20) p75, the paper profile's (120) p90."""
    assert stats.clumps_quantile(clumps) == q


def test_a_clumps_quantile_has_a_clump_above_it_in_975_of_1000_runs():
    # what the rule promises, by simulation: runs of N clumps, each clump one draw of its fate (its requests share
    # it); the share of runs with no clump above the true q-quantile is q^N, at most 2.5% from min_samples(q) on
    rng = np.random.default_rng(11)
    trials = 40_000
    for q in (0.5, 0.75, 0.9):
        need = stats.min_samples(q)
        assert q**need <= 0.025 < q ** (need - 1)
        for n in (need - 1, need, 5):
            missed = float(np.mean(rng.random((trials, n)).max(axis=1) <= q))
            assert abs(missed - q**n) < 4 * math.sqrt(q**n * (1 - q**n) / trials), (q, n, missed)
        assert stats.clumps_quantile(need, (q,)) == q and stats.clumps_quantile(need - 1, (q,)) is None
    # quick's 5 clumps and p90: no clump above the true p90 in 59% of runs
    assert 0.9**5 == pytest.approx(0.59, abs=0.005)


@pytest.mark.parametrize("bad", [-1, 2.5, True, "5"])
def test_clumps_must_be_a_count(bad):
    with pytest.raises(ValueError, match="clumps must be a count"):
        stats.clumps_quantile(bad)


def test_estimate_log_of_1_2_4_by_hand():
    # logs 0, ln2, 2 ln2: mean ln2 (geometric mean 2), sample sd ln2
    est = estimate([1, 2, 4], log=True)
    half = T975_DF2 * math.log(2) / math.sqrt(3)
    assert est.point == pytest.approx(2.0)
    assert est.lo == pytest.approx(2 * math.exp(-half), rel=1e-6)
    assert est.hi == pytest.approx(2 * math.exp(half), rel=1e-6)
    assert (est.n, est.scale, est.flag) == (3, "log", "low n")
    assert est.method == "Student t on log per-run values, R = 3"


def test_estimate_linear_by_hand():
    est = estimate([1, 2, 3, 4, 5], log=False)
    half = T975_DF4 * math.sqrt(2.5) / math.sqrt(5)  # sample sd sqrt(2.5)
    assert est.point == pytest.approx(3.0)
    assert (est.lo, est.hi) == (pytest.approx(3 - half, rel=1e-6), pytest.approx(3 + half, rel=1e-6))
    assert (est.scale, est.flag) == ("linear", "")


def test_estimate_method_text_names_the_metric():
    est = estimate(np.arange(1.0, 11.0), log=True, label="per-run p99")
    assert est.method == "Student t on log per-run p99, R = 10"


def test_compare_by_hand():
    a, b = [2, 4, 8], [1, 2, 4]
    c = compare(a, b, log=True)
    # Welch on the logs: both groups have sd ln2, so se = ln2 sqrt(2/3) and
    # the Welch-Satterthwaite df is exactly 4.
    half = T975_DF4 * math.log(2) * math.sqrt(2 / 3)
    assert c.effect == pytest.approx(2.0)
    assert c.lo == pytest.approx(2 * math.exp(-half), rel=1e-6)
    assert c.hi == pytest.approx(2 * math.exp(half), rel=1e-6)
    # U counts pairs with a > b, ties one half: 2 -> 1.5, 4 -> 2.5, 8 -> 3
    assert c.u == 7 and c.a12 == pytest.approx(7 / 9)
    # the values tie (2 and 4 appear twice), so the exact p comes from the
    # 20 ways to split the six values: U >= 7 in 5 of them, U <= 7 in 19,
    # two-sided p = 2 * 5/20 (scipy's method="exact" ignores ties and says 0.4)
    assert enumerated_mwu_p(a, b) == pytest.approx(0.5)
    assert c.p_value == pytest.approx(0.5)
    assert (c.scale, c.flag, c.min_p) == ("log", "low n", pytest.approx(0.1))


def test_compare_paired_by_hand():
    # blocks 2/1, 6/2, 8/4: ratios 2, 3, 2; on the logs mean (2 ln2 + ln3) / 3 and sd s, t with 2 df
    a, b = [2, 6, 8], [1, 2, 4]
    c = stats.compare_paired(a, b)
    logs = [math.log(2), math.log(3), math.log(2)]
    mean = sum(logs) / 3
    s = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    half = T975_DF2 * s / math.sqrt(3)
    assert c.effect == pytest.approx(math.exp(mean))
    assert (c.lo, c.hi) == (pytest.approx(math.exp(mean - half)), pytest.approx(math.exp(mean + half)))
    # A exceeded B in every block; Welch on the same numbers treats the blocks' common level as noise
    assert c.a12 == 1.0 and (c.n_a, c.n_b, c.flag) == (3, 3, "low n") and "R = 3 blocks" in c.method
    welch = compare(a, b, log=True)
    assert welch.hi - welch.lo > c.hi - c.lo
    # the p the verdicts show agrees with the interval: one-sample t on the ratios
    assert stats.threshold_p(np.divide(a, b), threshold=c.lo, relation=">", log=True) == pytest.approx(0.025)
    with pytest.raises(ValueError, match="each block holds one of each"):
        stats.compare_paired([1, 2, 3], [1, 2])


def u_statistic(xs, ys) -> float:
    """Pairs with x > y, ties counting one half."""
    return sum((x > y) + 0.5 * (x == y) for x in xs for y in ys)


def enumerated_mwu_p(a, b) -> float:
    """Two-sided exact Mann-Whitney p by listing every split of the pooled values."""
    pooled = list(a) + list(b)
    n = len(pooled)
    us = []
    for chosen in itertools.combinations(range(n), len(a)):
        rest = [pooled[i] for i in range(n) if i not in chosen]
        us.append(u_statistic([pooled[i] for i in chosen], rest))
    u = u_statistic(a, b)
    upper = sum(v >= u for v in us) / len(us)
    lower = sum(v <= u for v in us) / len(us)
    return min(1.0, 2 * min(upper, lower))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([0, 0, 0, 1, 2], [0, 0, 0, 0, 0]),  # throttled counts: mostly zero
        ([3, 3, 5, 7], [1, 3, 3, 3, 9]),
        ([1, 1, 2], [1, 2, 2, 2]),
        ([4, 4, 4], [4, 4, 4]),
    ],
)
def test_mann_whitney_with_ties_matches_enumeration(a, b):
    u, p = stats.mann_whitney_exact(a, b)
    assert u == u_statistic(a, b)
    assert p == pytest.approx(enumerated_mwu_p(a, b))


@pytest.mark.parametrize(("n_a", "n_b"), [(3, 3), (4, 6), (5, 5), (8, 7)])
def test_mann_whitney_without_ties_is_scipy_exact(n_a, n_b):
    rng = np.random.default_rng(n_a * 10 + n_b)
    a, b = rng.standard_normal(n_a) + 0.5, rng.standard_normal(n_b)
    u, p = stats.mann_whitney_exact(a, b)
    ref = sps.mannwhitneyu(a, b, method="exact")
    assert (u, p) == (ref.statistic, ref.pvalue)
    # and the tie-aware counting agrees with scipy where both apply
    assert stats._mwu_tied_exact_p(a, b) == pytest.approx(ref.pvalue)
    if n_a + n_b <= 10:
        assert p == pytest.approx(enumerated_mwu_p(a, b))


def test_compare_linear_is_difference_of_means():
    c = compare([3, 5, 7, 9, 11], [1, 2, 3, 4, 5], log=False)
    assert c.effect == pytest.approx(4.0) and c.scale == "linear"
    # Welch by hand: variances 10 and 2.5, se^2 = 10/5 + 2.5/5 = 2.5,
    # df = 2.5^2 / (2^2/4 + 0.5^2/4) = 5.88
    se2, df = 2.5, 2.5**2 / (2.0**2 / 4 + 0.5**2 / 4)
    half = sps.t.ppf(0.975, df) * math.sqrt(se2)
    assert (c.lo, c.hi) == (pytest.approx(4 - half), pytest.approx(4 + half))


def test_mann_whitney_minimum_p_is_0_1_at_r3():
    assert min_mwu_p(3, 3) == pytest.approx(0.1)
    c = compare([5, 6, 7], [1, 2, 3])
    assert c.p_value == pytest.approx(0.1) and c.a12 == 1.0
    assert "cannot reach significance with R = 3" in c.note
    for n_a, n_b in [(3, 3), (3, 4), (4, 4), (5, 5), (2, 7)]:
        separated = sps.mannwhitneyu(np.arange(n_a) + 100, np.arange(n_b), method="exact").pvalue
        assert min_mwu_p(n_a, n_b) == pytest.approx(separated)
    assert min_mwu_p(4, 4) == pytest.approx(2 / 70)
    assert compare([5, 6, 7, 8], [1, 2, 3, 4]).note == ""
    assert "R = 3 vs 4" in compare([5, 6, 7], [1, 2, 3, 4]).note


def test_order_statistic_ci_at_n10_is_x2_x9():
    rng = np.random.default_rng(10)
    values = rng.permutation(np.array([0.3, 1.0, 1.5, 2.6, 3.0, 4.0, 5.3, 5.8, 9.0, 9.7]))
    est = median_ci(values)
    assert (est.lo, est.hi) == (1.0, 9.0)  # x(2), x(9)
    assert est.point == pytest.approx(3.5)
    assert order_statistic_ranks(10, 0.5, 0.95) == (2, 9)
    scipy_ci = sps.quantile_test(values, q=3.5, p=0.5).confidence_interval(0.95)
    assert (scipy_ci.low, scipy_ci.high) == (est.lo, est.hi)


@pytest.mark.parametrize("n", range(1, 41))
def test_order_statistic_ranks_agree_with_scipy(n):
    x = np.arange(1.0, n + 1)
    ci = sps.quantile_test(x, q=np.median(x), p=0.5).confidence_interval(0.95)
    ranks = order_statistic_ranks(n, 0.5, 0.95)
    if ranks is None:
        assert n < 6 and math.isnan(ci.low)
    else:
        assert (x[ranks[0] - 1], x[ranks[1] - 1]) == (ci.low, ci.high)


def test_holm_and_bh_by_hand():
    # Holm: sorted 0.01, 0.03, 0.04 times 3, 2, 1 -> 0.03, 0.06, 0.04 -> running max
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    np.testing.assert_allclose(holm([0.5, 0.6]), [1.0, 1.0])  # capped at 1
    # BH: 0.01*3/1, 0.03*3/2, 0.04*3/3 -> 0.03, 0.045, 0.04 -> running min from the top
    np.testing.assert_allclose(bh([0.01, 0.04, 0.03]), [0.03, 0.04, 0.04])
    assert holm([]).size == 0 and bh([]).size == 0
    with pytest.raises(ValueError):
        holm([0.1, 1.5])


# ==========================================================================
# Invariances


@pytest.fixture
def runs() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [np.exp(MU + 0.1 * rng.standard_normal() + S_REQ * rng.standard_normal(400)) for _ in range(20)]


C = 7.3


def test_scaling_latencies_scales_everything(runs):
    scaled = [C * r for r in runs]
    for plain, big in zip(runs, scaled):
        s, t = run_latency_summary(plain), run_latency_summary(big)
        for key in ("p50", "p90", "p99", "max"):
            assert t[key] == pytest.approx(C * s[key], rel=1e-12)
    p99 = np.array([run_latency_summary(r)["p99"] for r in runs])
    for log in (True, False):
        e, f = estimate(p99, log=log), estimate(C * p99, log=log)
        assert (f.point, f.lo, f.hi) == (
            pytest.approx(C * e.point, rel=1e-12),
            pytest.approx(C * e.lo, rel=1e-12),
            pytest.approx(C * e.hi, rel=1e-12),
        )
    m, n = median_ci(p99), median_ci(C * p99)
    assert (n.point, n.lo, n.hi) == (pytest.approx(C * m.point), pytest.approx(C * m.lo), pytest.approx(C * m.hi))
    g = cluster_bootstrap_quantile(runs, 0.999, rng=np.random.default_rng(1), n_boot=300)
    h = cluster_bootstrap_quantile(scaled, 0.999, rng=np.random.default_rng(1), n_boot=300)
    assert (h.point, h.lo, h.hi) == (
        pytest.approx(C * g.point, rel=1e-12),
        pytest.approx(C * g.lo, rel=1e-12),
        pytest.approx(C * g.hi, rel=1e-12),
    )


def test_scaling_both_sides_leaves_ratios_unchanged(runs):
    p99 = np.array([run_latency_summary(r)["p99"] for r in runs])
    a, b = p99[:4] * 1.8, p99[4:]
    plain, scaled = compare(a, b), compare(C * a, C * b)
    assert (scaled.effect, scaled.lo, scaled.hi) == (
        pytest.approx(plain.effect, rel=1e-12),
        pytest.approx(plain.lo, rel=1e-12),
        pytest.approx(plain.hi, rel=1e-12),
    )
    assert (scaled.p_value, scaled.a12) == (plain.p_value, plain.a12)
    diff, diff_scaled = compare(a, b, log=False), compare(C * a, C * b, log=False)
    assert diff_scaled.effect == pytest.approx(C * diff.effect, rel=1e-12)


def test_shuffling_runs_and_requests_changes_nothing(runs):
    rng = np.random.default_rng(11)
    shuffled_requests = [rng.permutation(r) for r in runs]
    shuffled_runs = [shuffled_requests[i] for i in rng.permutation(len(runs))]
    for plain, mixed in zip(runs, shuffled_requests):
        assert run_latency_summary(plain) == run_latency_summary(mixed)
    p99 = np.array([run_latency_summary(r)["p99"] for r in runs])
    p99_mixed = np.array([run_latency_summary(r)["p99"] for r in shuffled_runs])
    e, f = estimate(p99, log=True), estimate(p99_mixed, log=True)
    assert (f.point, f.lo, f.hi) == (
        pytest.approx(e.point, rel=1e-12),
        pytest.approx(e.lo, rel=1e-12),
        pytest.approx(e.hi, rel=1e-12),
    )
    assert median_ci(p99) == median_ci(p99_mixed)
    c, d = compare(p99[:4], p99[4:]), compare(rng.permutation(p99[:4]), rng.permutation(p99[4:]))
    assert (d.effect, d.lo, d.p_value) == (pytest.approx(c.effect), pytest.approx(c.lo), c.p_value)
    # the bootstraps put runs in a canonical order, so even the seeded
    # resamples are unchanged
    g = cluster_bootstrap_quantile(runs, 0.999, rng=np.random.default_rng(2), n_boot=300)
    h = cluster_bootstrap_quantile(shuffled_runs, 0.999, rng=np.random.default_rng(2), n_boot=300)
    assert g == h
    many = np.exp(np.random.default_rng(4).standard_normal(25))
    k = bootstrap_runs(many, np.median, np.random.default_rng(3), n_boot=500)
    m = bootstrap_runs(many[::-1], np.median, np.random.default_rng(3), n_boot=500)
    assert k == m


# ==========================================================================
# Coordinated omission


STALL = (10.0, 12.0)  # the server does no work for 2 s from t = 10 s
RATE = 200.0  # requests per second: one scheduled every 5 ms
DURATION = 30.0


def finish_time(start: float, work: float, stall: tuple[float, float]) -> float:
    """When `work` seconds of service begun at `start` end, on a server frozen during `stall`."""
    stall_start, stall_end = stall
    if start >= stall_end or start + work <= stall_start:
        return start + work
    if start >= stall_start:
        return stall_end + work
    return start + work + (stall_end - stall_start)  # paused part-way through


def open_loop_latencies(scheduled, service, stall) -> np.ndarray:
    """The truth: every request arrives at its scheduled time and queues (FIFO)
    at a single server; latency = completion - arrival."""
    done = np.empty_like(scheduled)
    server_free = -math.inf
    for i, (arrive, work) in enumerate(zip(scheduled, service)):
        server_free = finish_time(max(arrive, server_free), work, stall)
        done[i] = server_free
    return done - scheduled


def closed_loop_client(scheduled, service, stall) -> tuple[np.ndarray, np.ndarray]:
    """A rate-limited closed-loop client with one connection (hey's design):
    it sends request i at its scheduled time or, if the previous one has not
    come back yet, the moment it does. Returns actual send and completion times."""
    sent = np.empty_like(scheduled)
    done = np.empty_like(scheduled)
    previous_done = -math.inf
    for i, (when, work) in enumerate(zip(scheduled, service)):
        sent[i] = max(when, previous_done)
        done[i] = previous_done = finish_time(sent[i], work, stall)
    return sent, done


def test_latency_from_scheduled_send_time_survives_a_stall():
    rng = np.random.default_rng(21)
    scheduled = np.arange(0.0, DURATION, 1 / RATE)
    service = 0.001 * np.exp(0.3 * rng.standard_normal(scheduled.size))  # ~1 ms
    true_p99 = run_latency_summary(1000 * open_loop_latencies(scheduled, service, STALL))["p99"]

    sent, done = closed_loop_client(scheduled, service, STALL)
    from_schedule = run_latency_summary(1000 * (done - scheduled))["p99"]
    from_send = run_latency_summary(1000 * (done - sent))["p99"]

    # About 400 of 6,000 requests fall due during the stall, so the true p99 is
    # well over a second; seen from the actual send time, only the one request
    # in flight during the stall is slow and the p99 stays near the service time.
    assert true_p99 > 1000
    assert from_schedule == pytest.approx(true_p99, rel=1e-9)
    assert from_send < 0.01 * true_p99
    assert from_send < 5  # ms


def test_no_stall_no_difference():
    rng = np.random.default_rng(22)
    scheduled = np.arange(0.0, 5.0, 1 / RATE)
    service = 0.001 * np.exp(0.3 * rng.standard_normal(scheduled.size))
    sent, done = closed_loop_client(scheduled, service, (-2.0, -1.0))
    np.testing.assert_allclose(done - sent, done - scheduled)


# ==========================================================================
# Edge cases


def test_estimate_r2_has_no_interval():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = estimate([1.0, 2.0], log=True)
    assert est.flag == "n too small"
    assert math.isnan(est.lo) and math.isnan(est.hi) and not est.has_interval
    assert est.point == pytest.approx(math.sqrt(2))


@pytest.mark.parametrize("n", [3, 4])
def test_estimate_low_n(n):
    est = estimate(np.arange(1.0, n + 1), log=False)
    assert est.flag == "low n" and est.has_interval


def test_estimate_r1_is_degenerate():
    with pytest.warns(DegenerateWarning):
        est = estimate([5.0], log=True)
    assert (est.point, est.flag) == (pytest.approx(5.0), "degenerate")
    assert math.isnan(est.lo) and math.isnan(est.hi)


@pytest.mark.parametrize("log", [True, False])
def test_identical_values_never_give_a_zero_width_interval(log):
    with pytest.warns(DegenerateWarning, match="identical"):
        est = estimate([4.0] * 6, log=log)
    assert est.flag == "degenerate"
    assert math.isnan(est.lo) and math.isnan(est.hi)
    assert est.point == pytest.approx(4.0)


def test_non_positive_values_on_log_scale_raise():
    with pytest.raises(ValueError, match="non-positive"):
        estimate([0.0, 1.0, 2.0], log=True)
    with pytest.raises(ValueError, match="non-positive"):
        compare([1.0, 2.0, 3.0], [-1.0, 2.0, 3.0])
    # throttled counts can be zero: the linear scale accepts them
    assert estimate([0.0, 1.0, 2.0], log=False).point == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [[], [1.0, math.nan, 2.0], [[1.0, 2.0]]])
def test_bad_input_raises(bad):
    with pytest.raises(ValueError):
        estimate(bad, log=False)


def test_compare_edge_cases():
    small = compare([1.0, 2.0], [3.0, 4.0, 5.0])
    assert small.flag == "n too small" and not small.has_interval
    with pytest.warns(DegenerateWarning):
        flat = compare([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    assert flat.flag == "degenerate" and not flat.has_interval
    assert flat.effect == pytest.approx(2.0)


def test_median_ci_needs_six_runs():
    five = median_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    assert five.flag == "n too small" and not five.has_interval and five.point == 3.0
    six = median_ci([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert (six.lo, six.hi) == (1.0, 6.0)


def test_bootstrap_over_runs_refused_below_20():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="R >= 20"):
        bootstrap_runs(np.arange(1.0, 20.0), np.mean, rng)
    est = bootstrap_runs(np.arange(1.0, 21.0), np.mean, rng, n_boot=400)
    assert est.lo < 10.5 < est.hi and est.n == 20


def test_cluster_bootstrap_flags_and_is_wider_than_pooled_iid():
    rng = np.random.default_rng(6)
    # strong run effect (sigma = 0.3), 20 runs of 2,000: the pooled i.i.d.
    # interval ignores the run effect and comes out much narrower
    many = [np.exp(0.3 * rng.standard_normal() + S_REQ * rng.standard_normal(N_REQ)) for _ in range(20)]
    cluster = cluster_bootstrap_quantile(many, 0.99, rng=np.random.default_rng(7), n_boot=500)
    naive = pooled_iid_quantile_ci(many, 0.99)
    assert cluster.flag == "pooled, cluster bootstrap" and cluster.has_interval
    assert cluster.point == naive.point
    assert cluster.hi - cluster.lo > 1.5 * (naive.hi - naive.lo)
    assert "R = 20" in cluster.method
    boot = pooled_iid_quantile_ci(many[:3], 0.99, method="bootstrap", rng=np.random.default_rng(8), n_boot=200)
    assert boot.lo < boot.point < boot.hi


@pytest.mark.parametrize("r", [2, 3, 5, 10, 19])
def test_no_bootstrap_below_20_runs(r):
    """docs/STATISTICS.md §3: a cluster bootstrap of a pooled p99.9 covers 0.26-0.82 at R = 3-5. No exceptions."""
    rng = np.random.default_rng(6)
    few = [np.exp(S_REQ * rng.standard_normal(500)) for _ in range(r)]
    est = cluster_bootstrap_quantile(few, 0.999, rng=np.random.default_rng(7))
    assert est.flag == "n too small" and not est.has_interval
    assert "p99.9 of requests pooled" in est.method and "needs R >= 20" in est.method


@pytest.mark.parametrize(
    ("lo", "hi", "threshold", "expect", "expected"),
    [
        (2.5, 3.0, 2.0, ">", "reproduced"),
        (1.0, 1.5, 2.0, ">", "contradicted"),
        (1.5, 2.5, 2.0, ">", "inconclusive"),
        (2.0, 3.0, 2.0, ">", "inconclusive"),  # touching is not "whole CI above"
        (0.5, 0.9, 1.0, "<", "reproduced"),
        (1.1, 1.3, 1.0, "<", "contradicted"),
        (0.9, 1.1, 1.0, "<", "inconclusive"),
        (math.nan, math.nan, 2.0, ">", "inconclusive"),
        (math.nan, 3.0, 2.0, ">", "inconclusive"),
    ],
)
def test_verdict(lo, hi, threshold, expect, expected):
    assert verdict(lo, hi, threshold, expect) == expected


def test_verdict_rejects_nonsense():
    with pytest.raises(ValueError):
        verdict(1.0, 2.0, 1.5, ">=")
    with pytest.raises(ValueError):
        verdict(2.0, 1.0, 1.5, ">")
    with pytest.raises(ValueError):
        verdict(1.0, 2.0, math.nan, ">")


def test_quantile_rejects_bad_probability():
    with pytest.raises(ValueError):
        quantile([1.0, 2.0], 1.5)
    with pytest.raises(ValueError):
        run_latency_summary([1.0, -2.0])


def test_public_names():
    assert "pooled_iid_quantile_ci" not in stats.__all__
    assert all(hasattr(stats, name) for name in stats.__all__)


# ==========================================================================
# docs/STATISTICS.md §8 as now written: the profiles' samples per run (60 to 6,000), R in {3, 5, 8, 10, 20},
# run effects sigma 0 and 0.1 (normal) and a heavy-tailed t3 run effect; each cell >= 400 trials,
# vectorised (trials x runs arrays) so the whole grid takes seconds. The per-run quantile is the one
# the samples support (stats.supported_quantile: 60 -> p90, 600 and 6,000 -> p99), drawn exactly
# through its order statistics (see expected_log_sample_quantile).

GRID_TRIALS = 1000
GRID_RS = (3, 5, 8, 10, 20)
RUN_EFFECTS = ("none", "normal 0.1", "t3 0.1")
SAMPLES = (60, 600, 6000)


def per_run_log_quantile(n: int, q: float, rng: np.random.Generator, shape) -> np.ndarray:
    """log of the type-7 sample q-quantile of n draws of exp(S_REQ * N(0, 1)), drawn exactly."""
    k0, f = sample_quantile_position(n, q)
    k = k0 + 1
    u_k = rng.beta(k, n - k + 1, size=shape)
    u_next = u_k + (1 - u_k) * rng.beta(1, n - k, size=shape) if f > 0 else u_k
    return np.log((1 - f) * np.exp(S_REQ * special.ndtri(u_k)) + f * np.exp(S_REQ * special.ndtri(u_next)))


def run_effect(kind: str, rng: np.random.Generator, shape) -> np.ndarray:
    if kind == "none":
        return np.zeros(shape)
    if kind == "normal 0.1":
        return 0.1 * rng.standard_normal(shape)
    return 0.1 * rng.standard_t(3, shape)


def t_intervals(x: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Student t interval of each row's mean (what stats.estimate draws on the log scale)."""
    r = x.shape[1]
    half = sps.t.ppf(0.5 + level / 2, r - 1) * x.std(axis=1, ddof=1) / math.sqrt(r)
    return x.mean(axis=1) - half, x.mean(axis=1) + half


@pytest.fixture(scope="module")
def grid() -> dict[tuple[int, str], tuple[np.ndarray, float]]:
    """(samples per run, run effect) -> (GRID_TRIALS x 20 per-run log quantiles, the log target)."""
    rng = np.random.default_rng(20261201)
    out = {}
    for n in SAMPLES:
        q = stats.supported_quantile([n])
        target = MU + float(np.mean(per_run_log_quantile(n, q, rng, 2_000_000)))
        for kind in RUN_EFFECTS:
            shape = (GRID_TRIALS, max(GRID_RS))
            out[(n, kind)] = (MU + per_run_log_quantile(n, q, rng, shape) + run_effect(kind, rng, shape), target)
    return out


def test_the_vectorised_interval_is_the_estimate(grid):
    logs, _ = grid[(60, "t3 0.1")]
    for row in logs[:20, :5]:
        est = estimate(np.exp(row), log=True)
        lo, hi = t_intervals(row[None, :])
        assert (est.lo, est.hi) == (
            pytest.approx(math.exp(lo[0]), rel=1e-10),
            pytest.approx(math.exp(hi[0]), rel=1e-10),
        )


@pytest.mark.parametrize("r", GRID_RS)
@pytest.mark.parametrize("kind", RUN_EFFECTS)
@pytest.mark.parametrize("n", SAMPLES)
def test_coverage_over_the_profiles_samples_and_run_effects(grid, n, kind, r):
    logs, target = grid[(n, kind)]
    lo, hi = t_intervals(logs[:, :r])
    coverage = float(np.mean((lo <= target) & (target <= hi)))
    print(f"coverage {stats.quantile_name(stats.supported_quantile([n]))} n={n} {kind} R={r}: {coverage:.3f}")
    assert 0.92 <= coverage <= 0.98, f"coverage {coverage:.3f}"


@pytest.mark.parametrize("r", GRID_RS)
@pytest.mark.parametrize("kind", RUN_EFFECTS)
def test_null_calibration_over_the_grid(grid, kind, r):
    """Two identical configurations (trials 2i and 2i + 1): the Welch interval of the ratio excludes 1
    in 2-8% of pairs."""
    logs, _ = grid[(600, kind)]
    a, b = logs[0::2, :r], logs[1::2, :r]
    va, vb = a.var(axis=1, ddof=1) / r, b.var(axis=1, ddof=1) / r
    df = (va + vb) ** 2 / (va**2 / (r - 1) + vb**2 / (r - 1))
    half = sps.t.ppf(0.975, df) * np.sqrt(va + vb)
    diff = a.mean(axis=1) - b.mean(axis=1)
    rate = float(np.mean(np.abs(diff) > half))
    print(f"null: declared different {kind} R={r}: {rate:.3f}")
    assert 0.02 <= rate <= 0.08
    c = compare(np.exp(a[0]), np.exp(b[0]))
    assert math.log(c.hi) - math.log(c.effect) == pytest.approx(half[0], rel=1e-9)


# --------------------------------------------------------------------------
# proportions near 0 (throttled ratio 0.01-0.05) and shares near 0.05

PERIODS = (30, 100, 600)  # counted periods per run: the ci/quick E2b windows, the paper's 60 s
RATIOS = (0.01, 0.02, 0.05)


def proportion_intervals(k: np.ndarray, n: int, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """stats.estimate_proportion for every row at once: (lo, hi, sparse) per trial."""
    trials, r = k.shape
    big_k = k.sum(axis=1)
    big_n = n * r
    sparse = np.minimum(big_k, big_n - big_k) < stats.MIN_EVENTS_PER_RUN * r
    x = np.log((k + 0.5) / (n - k + 0.5))
    lo_l, hi_l = t_intervals(x, level)
    flat = x.std(axis=1, ddof=1) == 0
    lo_l, hi_l = np.where(flat, np.nan, special.expit(lo_l)), np.where(flat, np.nan, special.expit(hi_l))
    tail = (1 - level) / 2
    lo_e = np.where(big_k > 0, sps.beta.ppf(tail, np.maximum(big_k, 1e-9), big_n - big_k + 1), 0.0)
    hi_e = np.where(big_k < big_n, sps.beta.ppf(1 - tail, big_k + 1, np.maximum(big_n - big_k, 1e-9)), 1.0)
    lo = np.where(sparse, np.fmin(lo_e, lo_l), lo_l)
    hi = np.where(sparse, np.fmax(hi_e, hi_l), hi_l)
    zero = big_k == 0  # "0 in R of R runs": no interval, a result (the exact bound shown for coverage)
    return np.where(zero, 0.0, lo), hi, sparse


@pytest.fixture(scope="module")
def proportion_grid() -> dict[tuple[int, float, str, int], tuple[float, float]]:
    rng = np.random.default_rng(20261202)
    out = {}
    for n in PERIODS:
        for p in RATIOS:
            for kind in RUN_EFFECTS:
                shape = (GRID_TRIALS, max(GRID_RS))
                p_run = special.expit(special.logit(p) + run_effect(kind, rng, shape))
                k = rng.binomial(n, p_run)
                for r in GRID_RS:
                    lo, hi, sparse = proportion_intervals(k[:, :r], n)
                    out[(n, p, kind, r)] = (float(np.mean((lo <= p) & (p <= hi))), float(np.mean(sparse)))
                if (n, p, kind) == (100, 0.05, "t3 0.1"):
                    for row in k[:30, :5]:  # the vectorised rule is estimate_proportion
                        est = stats.estimate_proportion(row, [n] * 5)
                        lo, hi, _ = proportion_intervals(row[None, :], n)
                        if est.flag.startswith("0 in"):
                            continue
                        assert (est.lo, est.hi) == (pytest.approx(lo[0], rel=1e-9), pytest.approx(hi[0], rel=1e-9))
    return out


def test_proportion_coverage_never_falls_below_092(proportion_grid):
    """Proportions near 0: the per-run empirical logit where each run holds enough events, the exact
    binomial interval of the pooled count where it does not; coverage >= 0.92 in every cell."""
    worst = min(proportion_grid.items(), key=lambda item: item[1][0])
    print("worst proportion cell", worst)
    assert worst[1][0] >= 0.92


@pytest.mark.parametrize("r", GRID_RS)
@pytest.mark.parametrize("kind", RUN_EFFECTS)
@pytest.mark.parametrize("p", RATIOS)
def test_proportion_coverage_at_the_paper_windows(proportion_grid, p, kind, r):
    """600 counted periods per run (the paper profile's 60 s windows): coverage in [0.92, 0.98]."""
    coverage, sparse = proportion_grid[(600, p, kind, r)]
    print(f"proportion coverage p={p} n=600 {kind} R={r}: {coverage:.3f} (sparse in {sparse:.0%})")
    assert 0.92 <= coverage <= 0.98


def test_proportion_coverage_where_the_logit_is_used_stays_in_range(proportion_grid):
    """Cells where the logit interval is drawn alone in (almost) every trial cover 0.92-0.98; sparse
    cells (well under one throttled period per run) are conservative: no interval can cover near 95% when
    most runs count 0 (the exact bound then covers up to 0.998)."""
    logit_cells = {key: cov for key, (cov, sparse) in proportion_grid.items() if sparse < 0.05}
    assert logit_cells and all(0.92 <= cov <= 0.98 for cov in logit_cells.values()), logit_cells
    assert max(cov for cov, _ in proportion_grid.values()) <= 0.999


@pytest.mark.parametrize("r", GRID_RS)
@pytest.mark.parametrize("kind", RUN_EFFECTS)
def test_share_log_ratio_coverage_near_005(kind, r):
    """F8's comparison: the share of a 100m pod (weight 4 of 4 : 39 : 43, ~0.0465 of the CPU) over the
    two-container pod's, per run the mean of 3 readings, as a log-ratio with a t interval."""
    rng = np.random.default_rng(hash((kind, r)) % 2**32)
    w = np.array([4.0, 39.0, 43.0])
    effect = run_effect(kind, rng, (GRID_TRIALS, r, 3))
    readings = rng.gamma(np.broadcast_to((w * np.exp(effect))[..., None, :] * 50, (GRID_TRIALS, r, 3, 3)))
    shares = (readings / readings.sum(axis=-1, keepdims=True)).mean(axis=-2)
    assert abs(float(shares[..., 0].mean()) - 4 / 86) < 0.002  # shares near 0.05
    lo, hi = t_intervals(np.log(shares[..., 0] / shares[..., 2]))
    truth = math.log(4 / 43)
    coverage = float(np.mean((lo <= truth) & (truth <= hi)))
    print(f"share log-ratio coverage {kind} R={r}: {coverage:.3f}")
    assert 0.92 <= coverage <= 0.98


def test_estimate_proportion_known_answers():
    zero = stats.estimate_proportion([0, 0, 0, 0, 0], [30, 31, 29, 30, 30])
    assert (zero.point, zero.flag, zero.has_interval) == (0.0, "0 in 5 of 5 runs", False)
    # no quota, no period counted: also an exact zero
    assert stats.estimate_proportion([0, 0, 0], [0, 0, 0]).flag == "0 in 3 of 3 runs"
    sparse = stats.estimate_proportion([1, 0, 2, 1, 0], [40] * 5)
    exact = sps.binomtest(4, 200).proportion_ci(0.95, method="exact")
    logit = stats.estimate(stats.empirical_logit([1, 0, 2, 1, 0], [40] * 5), log=False)
    # the point is the pooled ratio (docs/STATISTICS.md §3, the back-transformed mean logit is biased high)
    assert sparse.flag == "sparse counts" and sparse.point == pytest.approx(4 / 200)
    assert sparse.lo == pytest.approx(min(exact.low, special.expit(logit.lo)))
    assert sparse.hi == pytest.approx(max(exact.high, special.expit(logit.hi)))
    k, n = np.array([30, 25, 35, 28, 32]), np.array([100] * 5)
    est = stats.estimate_proportion(k, n)
    x = np.log((k + 0.5) / (n - k + 0.5))
    half = T975_DF4 * x.std(ddof=1) / math.sqrt(5)
    assert est.point == pytest.approx(150 / 500)
    assert (est.lo, est.hi) == (
        pytest.approx(special.expit(x.mean() - half), rel=1e-5),
        pytest.approx(special.expit(x.mean() + half), rel=1e-5),
    )
    assert 0 < est.lo < est.point < est.hi < 1 and est.scale == "logit" and est.flag == ""
    with pytest.raises(ValueError):
        stats.estimate_proportion([5], [3])


def test_estimate_of_exact_zeros_is_a_result():
    est = estimate([0.0] * 5, log=False)
    assert (est.point, est.flag) == (0.0, "0 in 5 of 5 runs") and not est.has_interval


# --------------------------------------------------------------------------
# ratio of means (Fieller) for quantities that can be 0; Holm's floor


def test_ratio_of_means_by_hand_and_with_zeros():
    a, b = np.array([0.0, 0.0, 0.0, 0.0, 300.0]), np.array([600.0, 610.0, 590.0, 605.0, 600.0])
    c = stats.ratio_of_means(a, b)
    ma, mb = a.mean(), b.mean()
    va, vb = a.var(ddof=1) / 5, b.var(ddof=1) / 5
    se2 = va + (ma / mb) ** 2 * vb
    df = se2**2 / (va**2 / 4 + ((ma / mb) ** 2 * vb) ** 2 / 4)
    t2 = sps.t.ppf(0.975, df) ** 2
    roots = np.roots([mb**2 - t2 * vb, -2 * ma * mb, ma**2 - t2 * va])
    assert c.effect == pytest.approx(ma / mb) and (c.lo, c.hi) == tuple(pytest.approx(x) for x in sorted(roots))
    assert c.hi < 0.5 and c.scale == "mean-ratio"
    zero = stats.ratio_of_means([0.0] * 5, b)
    assert (zero.effect, zero.flag) == (0.0, "0 in 5 of 5 runs")
    unbounded = stats.ratio_of_means([1.0, 2.0, 3.0], [0.0, 0.1, 5.0])
    assert not unbounded.has_interval and "not clearly above 0" in unbounded.note
    # with positive values and little spread it agrees closely with the ratio of geometric means
    x, y = np.array([10.0, 10.5, 9.8, 10.2, 10.1]), np.array([5.0, 5.1, 4.9, 5.05, 5.0])
    assert stats.ratio_of_means(x, y).lo == pytest.approx(compare(x, y).lo, rel=0.02)


def test_ratio_of_means_coverage():
    rng = np.random.default_rng(9)
    hits = 0
    for _ in range(400):
        a = rng.gamma(2.0, 50.0, 5)  # mean 100, often small
        b = rng.gamma(20.0, 30.0, 5)  # mean 600
        c = stats.ratio_of_means(a, b)
        hits += c.lo <= 100 / 600 <= c.hi
    assert 0.92 <= hits / 400 <= 0.985


def test_holm_floor_after_the_adjustment():
    # R = 5 vs 5: the smallest exact p is 2 / 252 = 0.0079; alone it can reach 0.05 ...
    p_min = min_mwu_p(5, 5)
    assert p_min == pytest.approx(0.0079, abs=1e-4)
    assert stats.holm_floor([0.3], [p_min])[0] == pytest.approx(p_min)
    # ... among 7 comparisons whose other p-values are large, Holm multiplies it by 7: out of reach
    floors = stats.holm_floor([0.3] * 7, [p_min] * 7)
    assert floors == pytest.approx([7 * p_min] * 7) and all(f > 0.05 for f in floors)
    # when the others are tiny, the comparison comes last and keeps its own smallest p
    assert stats.holm_floor([0.001, 0.001, 0.5], [p_min] * 3)[2] == pytest.approx(max(3 * 0.001, p_min))


# --------------------------------------------------------------------------
# coordinated omission: failed and timed-out requests stay in the tail


def test_timed_out_requests_stay_in_the_tail():
    rng = np.random.default_rng(23)
    lat = np.exp(MU + S_REQ * rng.standard_normal(2000))
    ok = np.ones(2000, dtype=bool)
    ok[rng.choice(2000, 60, replace=False)] = False  # 3% timed out (their recorded latency is whatever)
    lat[~ok] = rng.uniform(0, 5, (~ok).sum())  # e.g. a connection refused at once
    kept = run_latency_summary(lat, ok=ok, timeout_ms=10_000.0)
    assert kept.errors == 60 and kept.n == 2000
    assert kept["p99"] == 10_000.0 and kept["max"] == 10_000.0  # the tail is the timeout
    dropped = run_latency_summary(lat[ok])
    assert dropped["p99"] < 100  # dropping failures loses the tail
    with pytest.raises(ValueError, match="timeout_ms"):
        run_latency_summary(lat, ok=ok)


def test_the_median_run_interval_at_its_level():
    # R = 6 reaches a one-sided 0.025 ([x(1), x(6)]), R = 5 does not and says how many it needs
    x = [3.0, 1.0, 2.0, 5.0, 4.0, 6.0]
    est = stats.median_run_interval(x)
    assert (est.lo, est.hi, est.point) == (1.0, 6.0, 3.5)
    assert stats.median_run_interval([2.0] * 6).lo == stats.median_run_interval([2.0] * 6).hi == 2.0
    short = stats.median_run_interval(x[:5])
    assert not short.has_interval and short.flag == "5 runs cannot reach level 0.025 (needs R >= 6)"
    assert stats.cannot_reach(5, 0.95, 0) == "5 runs cannot reach level 0.025 (no number of runs can)"


def test_u_alone_is_the_mann_whitney_statistic():
    rng = np.random.default_rng(9)
    a, b = rng.integers(0, 4, 7).astype(float), rng.integers(0, 4, 5).astype(float)
    assert stats.mann_whitney_u(a, b) == pytest.approx(sps.mannwhitneyu(a, b).statistic)
    plain = stats.compare(a + 1, b + 1, log=True, test=False)
    assert math.isnan(plain.p_value) and plain.a12 == stats.compare(a + 1, b + 1, log=True).a12
