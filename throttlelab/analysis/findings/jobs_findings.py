"""The jobs' claims as data: the lab's F1-F5 (docs/LAB.md §5: E2a's burst under limits, E3's GOMAXPROCS) and ours
F12-F15 (docs/EXPERIMENTS.md: E2a's burst with one more knob each, X1 burst budget, X2 CFS period, X3 run
queues against threads, and several pods bursting together, X4).

Every threshold is derived from the CFS model of :mod:`.predictions` (with the burst budget's refill) and
the variant's own parameters (threads, work per thread, limit, budget; the node's CPUs and period from the
headers), and its derivation is written beside the check. Ours share E2a's arm (:func:`arm`), its
allowances (a latency ratio r becomes (r + 2) / 3 on the slow side and 3r / (1 + 2r) on the fast side,
:func:`~.predictions.latency_threshold`; a ratio of counts sqrt(r); the equivalence band x/÷
:data:`~.predictions.SAME_BAND`) and its per-run values; each claim of ours is the sentence written in
docs/EXPERIMENTS.md before any run. Evaluation is :mod:`.engine`'s; what each claim cites (the lab's
figures, :mod:`throttlelab.model.reference`, or that it is ours) is filled in by ``cite``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from throttlelab.analysis.findings import predictions
from throttlelab.analysis.findings.engine import Check, Derivation, Evidence, Finding, Requirement, Unmet, cite
from throttlelab.analysis.findings.predictions import SAME_BAND
from throttlelab.model.quantities import go_default_gomaxprocs
from throttlelab.model.variants import (
    E2A_LIMIT1,
    E2A_LIMIT1_2THREADS,
    E2A_LIMIT2,
    E2A_LIMIT500M,
    E2A_NOLIMIT,
    X1_BUDGET0,
    X1_BUDGET_FULL,
    X1_BUDGET_HALF,
    X1_NOLIMIT,
    X2_PERIOD100,
    X2_PERIOD20,
    X2_PERIOD5,
    X3_CPUS1,
    X3_CPUS2,
    X4_STAGGERED,
    X4_SYNCHRONIZED,
)

E2A, X1, X2, X3, X4 = "E2a", "X1", "X2", "X3", "X4"
#: "Not faster": the fewer-threads burst may finish at most 10% sooner (a non-inferiority margin).
NOT_FASTER = 1.1
#: Counting at the edges of a round: half a period either way.
PERIOD_SLACK = 0.5


def arm(evidence: Evidence, variant: str, experiment: str = E2A) -> predictions.BurstArm:
    """A burst variant as the model sees it, on the node its processes saw."""
    spec = evidence.spec(experiment, variant)
    return predictions.burst_arm(spec, evidence.num_cpu(experiment, variant), evidence.period_ms(experiment, variant))


def _throttles(a: predictions.BurstArm, variant: str) -> None:
    if a.quota_ms is None or a.cpu_ms <= a.quota_ms:
        quota = "no quota" if a.quota_ms is None else f"the {a.quota_ms:g} ms quota"
        raise Unmet(
            "a burst larger than its quota",
            f"{variant}: {a.describe()}: {a.cpu_ms:g} ms of CPU fit in {quota}, so the model predicts no throttling",
        )


def _throttles_past_budget(a: predictions.BurstArm, variant: str) -> None:
    if a.quota_ms is None or a.cpu_ms <= a.quota_ms + a.budget_ms:
        room = "no quota" if a.quota_ms is None else f"quota + budget = {a.quota_ms + a.budget_ms:g} ms"
        raise Unmet(
            "a burst larger than quota + budget",
            f"{variant}: {a.describe()}: {a.cpu_ms:g} ms of CPU fit in {room}, so the model predicts no "
            "throttling to compare with",
        )


# --------------------------------------------------------------------------
# thresholds (derived from the model and the variant's parameters)


def slowdown(variant: str, baseline: str = E2A_NOLIMIT):
    """F1: the median completion ratio the model predicts, with the overhead allowance."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, variant), arm(evidence, baseline)
        _throttles(a, variant)
        slow, free = a.median_wall_ms(), b.median_wall_ms()
        ratio = slow / free
        threshold = predictions.latency_threshold(ratio)
        return Derivation(
            (round(threshold, 3),),
            (
                f"Model: {variant} = {a.describe()}. Over the burst's start phases (the interval is never a multiple "
                f"of the period) its median wall time is {slow:.3g} ms against {free:.3g} ms without a limit: "
                f"{ratio:.3g}x. Threshold (r + 2) / 3 = {threshold:.3g}: the same ratio once a fixed overhead of up to "
                f"twice the unthrottled burst is added to both arms (the lab's was 0.7x: 34.3 ms for its 20 ms burst)."
            ),
            end="the overhead at the upper end of its allowance (2x the unthrottled burst): the smallest ratio "
            "the model allows, least favourable to 'takes longer'",
        )

    return derive


def unchanged(variant: str):
    """F1: a burst within its quota is never throttled (ratio 1); an equivalence band around it."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, variant)
        if a.quota_ms is not None and a.cpu_ms > a.quota_ms:
            raise Unmet(
                "a burst within its quota",
                f"{variant}: {a.describe()}: {a.cpu_ms:g} ms of CPU exceed "
                f"the {a.quota_ms:g} ms quota, so the model predicts a slow-down",
            )
        quota = "no quota" if a.quota_ms is None else f"the {a.quota_ms:g} ms quota"
        return Derivation(
            (round(1 / SAME_BAND, 3), SAME_BAND),
            (
                f"Model: {variant} = {a.describe()}: {a.cpu_ms:g} ms of CPU fit in {quota} at every start phase, so it "
                f"is never throttled and the ratio is 1. Band x/÷ {SAME_BAND:g} (symmetric on the log scale); the whole "
                "interval must lie inside it (an equivalence test, no p-value)."
            ),
            end="none: the model predicts no change (ratio 1); the band is the equivalence margin",
        )

    return derive


def sums_run_queues(variant: str):
    """F2: throttled time per round lies between one and all of the run queues' extra wall time per round."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, variant)
        _throttles(a, variant)
        wall = float(np.mean(a.burst().wall_ms))
        fewest, most = a.counted_queues
        low, high = round(fewest / SAME_BAND, 3), round(most * SAME_BAND, 3)
        return Derivation(
            (low, high),
            (
                f"docs/LAB.md §1: the kernel adds throttled time per CPU run queue on which the group was throttled. Model: "
                f"{variant} = {a.describe()}: its waits (mean wall {wall:.3g} ms against {a.free_wall_ms:g} ms "
                f"unthrottled) are counted on each of the run queues that was throttled, at least {fewest} and at most "
                f"min(threads, CPUs) = {most} (how many depends on where the scheduler placed the threads, which "
                f"the model does not fix), so throttled ms per round / extra wall ms per round lies in "
                f"[{fewest}, {most}]. Band [{fewest}/{SAME_BAND:g}, {most} x {SAME_BAND:g}] (the equivalence margin at "
                "both ends); the whole "
                "interval must lie inside it. A value above the band would mean time counted on queues the group "
                "never had; below it, less than one clock. Supporting, not decisive: the band spans both ends of "
                "k in [1, p], so it cannot tell one queue from two; X3 (F14) decides threads against run queues."
            ),
            end="both ends of k in [1, min(threads, CPUs)] (the model does not fix k): a band, supporting only",
        )

    return derive


#: F2's premise: the threads ran on two or more run queues in more than half of the rounds (a majority, fixed
#: before any data on it: a round on one queue cannot count more than its own pause)
TWO_QUEUE_MAJORITY = 0.5


def exceeds_wall(variant: str):
    """F2: throttled time per round above the wall time needs two or more run queues."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, variant)
        _throttles(a, variant)
        wall = float(np.mean(a.burst().wall_ms))
        predicted = a.throttled_ms() / wall
        if a.queues < 2 or predicted <= 1:
            raise Unmet(
                "two or more run queues",
                (
                    f"{variant} keeps min({a.threads} threads, {a.cpus} CPUs) = {a.queues} run queue(s) busy: the model's "
                    f"throttled time per round is {a.throttled_ms():.3g} ms against {wall:.3g} ms of wall time "
                    f"({predicted:.2g}x), so it cannot exceed the wall time here"
                ),
            )
        return Derivation(
            (1.0,),
            (
                f"The claim itself: throttled time above wall time, impossible for one clock. Model: {a.queues} run queues "
                f"x {float(np.mean(a.burst().pause_ms)):.3g} ms of waiting = {a.throttled_ms():.3g} ms per round against "
                f"{wall:.3g} ms of wall time ({predicted:.3g}x)."
            ),
            end="none: the threshold 1 is the claim itself (one clock's worth), whatever k; the requirement takes "
            "the upper end k = min(threads, CPUs), since the claim is that it CAN exceed",
        )

    return derive


def counted_periods(variant: str):
    """F3: periods the kernel counts per round: the periods the burst touched plus one idle period."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, variant)
        burst = a.burst()
        low, high = int(burst.touched.min()) + 1, int(burst.touched.max()) + 1
        spec = evidence.spec(E2A, variant)
        wall_periods = float(spec.interval_ms) / a.period_ms if spec.interval_ms else math.inf
        band = (low - PERIOD_SLACK, high + PERIOD_SLACK)
        if wall_periods <= band[1]:
            raise Unmet(
                "rounds longer than the counted periods",
                (
                    f"a round of {spec.interval_ms:g} ms spans {wall_periods:.3g} periods, inside the band "
                    f"[{band[0]:g}, {band[1]:g}]: counting every period would look the same"
                ),
            )
        return Derivation(
            band,
            (
                f"Model: {variant} = {a.describe()}: a burst of {float(np.median(burst.wall_ms)):.3g} ms touches "
                f"{low - 1} to {high - 1} period(s) depending on where it starts, and the kernel counts one more: the "
                "period timer fires once more after the group went idle (nr_periods is incremented before the idle "
                f"check). So {low} to {high} periods per round, +/- {PERIOD_SLACK:g} at the edges; every wall-clock "
                f"period would give {wall_periods:.3g} per round (interval {spec.interval_ms:g} ms)."
            ),
            end="both ends of the start phase (the fewest and most periods a burst touches), +/- half a period",
        )

    return derive


def fewer_throttled(variant: str, baseline: str):
    """F4: the model's ratio of throttled time per round at its end least favourable to "fewer"."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, variant), arm(evidence, baseline)
        _throttles(b, baseline)
        pause_a, pause_b = (float(np.mean(x.burst().pause_ms)) for x in (a, b))
        # each wait is counted on k run queues, k in [1, queues] per arm, as the scheduler placed the threads; on
        # one node the many-threads arm never counts fewer queues than the fewer-threads arm (k_b >= k_a)
        favourable = a.throttled_ms() / b.throttled_ms()
        ratio = pause_a / pause_b  # k_b = k_a: the end least favourable to "fewer"
        if ratio >= 1:
            raise Unmet(
                "a reduction at the model's least favourable end",
                f"{variant} = {a.describe()} waits {pause_a:.3g} ms per round; {baseline} = {b.describe()} waits "
                f"{pause_b:.3g} ms: counted on as many queues each, the model's ratio lies in "
                f"[{favourable:.3g}, {ratio:.3g}], which reaches 1, so it does not say 'fewer' here",
            )
        threshold = predictions.rate_threshold(ratio)
        return Derivation(
            (round(threshold, 3),),
            (
                f"Model: {variant} = {a.describe()}: it waits {pause_a:.3g} ms per round, counted on 1 to {a.queues} "
                f"run queue(s); {baseline} = {b.describe()}: {pause_b:.3g} ms, counted on 1 to {b.queues}. The ratio "
                f"of throttled times lies in [{favourable:.3g}, {ratio:.3g}] as the scheduler placed the threads (the "
                f"data do not pin k down; on one node the many-threads arm counts at least as many queues as the "
                f"fewer-threads arm, k_b >= k_a, so the upper end is k_b = k_a, the waits alone). Threshold sqrt(r) "
                f"at the end least favourable to 'fewer', r = {ratio:.3g}: "
                f"{threshold:.3g} (half the smallest predicted reduction on the log scale); below 1 but above it: "
                "fewer, weaker than modelled. A ratio of mean throttled times (Fieller's interval): a run without any "
                "throttling is 0, which no geometric mean can hold."
            ),
            end="the end least favourable to 'fewer' (both arms counted on as many run queues, k_b = k_a): the "
            f"smallest reduction the model allows ({ratio:.3g}, not {favourable:.3g}), so a kernel counting fewer "
            "queues cannot read as 'weaker' or 'false'",
        )

    return derive


def not_faster(variant: str, baseline: str):
    """F4: "not faster" as a non-inferiority margin, with the model's ratio beside it."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, variant), arm(evidence, baseline)
        ratio = a.median_wall_ms() / b.median_wall_ms()
        return Derivation(
            (round(1 / NOT_FASTER, 3),),
            (
                f"'Not faster': the fewer-threads burst may finish at most {100 * (NOT_FASTER - 1):.0f}% sooner "
                f"(threshold 1/{NOT_FASTER:g}). Model: median wall {a.median_wall_ms():.3g} ms ({variant}) against "
                f"{b.median_wall_ms():.3g} ms ({baseline}): {ratio:.3g}x, the same CPU on fewer run queues."
            ),
            end="a non-inferiority margin (10%), not a model end: 'not faster' is the claim",
        )

    return derive


# --------------------------------------------------------------------------
# requirements that depend on the node (derived from the data, never assumed)


def parallel_threads_differ(experiment: str, variant: str, baseline: str) -> Requirement:
    """Two arms that differ in thread count must also differ in threads running at once.

    Throttled time and throttled periods accrue per CPU run queue, so T threads
    on a node with C usable CPUs behave like min(T, C) busy run queues.
    """

    def test(evidence: Evidence) -> str | None:
        a, b = arm(evidence, variant, experiment), arm(evidence, baseline, experiment)
        if a.queues < b.queues:
            return None
        return (
            f"both arms keep min(threads, num_cpu) = {b.queues} run queues busy on num_cpu = {b.cpus} "
            f"({variant}: {a.threads} threads, {baseline}: {b.threads}); throttling accrues per CPU "
            f"run queue, so the thread count cannot change it here (needs num_cpu > {a.threads})"
        )

    return Requirement("fewer run queues in the fewer-threads arm", test)


def go_line_can_change_default(experiment: str) -> Requirement:
    """Some limit of the profile must get a different default GOMAXPROCS from go 1.24 and go 1.25 lines.

    Only variants without a GOMAXPROCS or GODEBUG override count. Go 1.24 takes
    num_cpu; Go 1.25 takes max(2, ceil(limit)) capped at num_cpu, so on a node
    with num_cpu <= 2 the two can never differ.
    """

    def test(evidence: Evidence) -> str | None:
        cpus = evidence.num_cpus(experiment)
        if not cpus:
            return None
        defaults = []
        for variant in sorted(evidence.variants(experiment)):
            spec = evidence.spec(experiment, variant)
            if spec.gomaxprocs is not None or spec.godebug:
                continue
            limit = spec.milli("limit")
            for n_cpu in cpus:
                defaults.append(
                    (
                        spec.limit,
                        limit,
                        go_default_gomaxprocs("1.24", limit, n_cpu),
                        go_default_gomaxprocs("1.25", limit, n_cpu),
                    )
                )
        if any(old != new for _, _, old, new in defaults):
            return None
        milli = {lim: math.inf if m is None else m for lim, m, _, _ in defaults}
        limits = ", ".join("none" if lim is None else str(lim) for lim in sorted(milli, key=milli.get))
        n_cpu = ", ".join(map(str, sorted(cpus)))
        return (
            f"the go.mod line cannot change the default here: num_cpu = {n_cpu}, and Go 1.25's "
            f"max(2, ceil(limit)) capped at num_cpu equals Go 1.24's num_cpu for every limit of this profile "
            f"({limits}); needs num_cpu > 2"
        )

    return Requirement("a node where the go line can matter", test)


# --------------------------------------------------------------------------
# per-run values computed from several metrics


def throttled_per_extra_wall(experiment: str):
    """F2, F14: each run's throttled ms per round / (mean wall - the model's unthrottled wall); +inf where the
    run was throttled with no extra wall time (censored above: it counts against a band, engine), NaN only
    where it was neither throttled nor slower."""

    def values(evidence: Evidence, name: str) -> np.ndarray:
        per_round = evidence.values(experiment, name, "throttled_ms_per_round")
        extra = evidence.values(experiment, name, "mean_wall_ms") - arm(evidence, name, experiment).free_wall_ms
        # a run throttled without extra wall time is evidence above any band (+inf, censored); 0/0 is undefined
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(extra > 0, per_round / extra, np.where(per_round > 0, np.inf, np.nan))

    return values


def throttled_over_wall(evidence: Evidence, name: str) -> np.ndarray:
    """F2: each run's throttled ms per round / mean wall ms per round (rounds after the first)."""
    return evidence.values(E2A, name, "throttled_ms_per_round") / evidence.values(E2A, name, "mean_wall_ms")


def pause_per_throttle(experiment: str):
    """Each run's extra wall time per round (mean wall minus the model's unthrottled wall) per throttled period."""

    def values(evidence: Evidence, name: str) -> np.ndarray:
        extra = evidence.values(experiment, name, "mean_wall_ms") - arm(evidence, name, experiment).free_wall_ms
        throttles = evidence.values(experiment, name, "throttled_per_round")
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where((throttles > 0) & (extra > 0), extra / throttles, np.nan)

    return values


# --------------------------------------------------------------------------
# F12: the burst budget (X1)


def budget_speedup(variant: str, baseline: str):
    """Completion with a budget against the same job without one: the model's ratio, F1's allowance."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, variant, X1), arm(evidence, baseline, X1)
        _throttles_past_budget(b, baseline)
        ratio = a.median_wall_ms() / b.median_wall_ms()
        if ratio >= 1:
            raise Unmet(
                "a budget the model says helps",
                f"{variant}: {a.describe()}: the model's median wall time "
                f"{a.median_wall_ms():.3g} ms is no shorter than {baseline}'s",
            )
        threshold = predictions.latency_threshold(ratio)
        return Derivation(
            (round(threshold, 3),),
            (
                f"Model (the budget's refill: the pool starts a burst with quota + budget after idle periods): "
                f"{variant} = {a.describe()}: median wall {a.median_wall_ms():.3g} ms; {baseline} = {b.describe()}: "
                f"{b.median_wall_ms():.3g} ms; r = {ratio:.3g}. Threshold 3r / (1 + 2r) = {threshold:.3g}: F1's allowance "
                "of a fixed overhead up to twice the faster arm, added to both."
            ),
            end="the overhead at the upper end of its allowance (2x the faster arm): the ratio nearest 1 the model allows, least favourable to 'sooner'",
        )

    return derive


def back_to_unlimited(variant: str, baseline: str = X1_NOLIMIT):
    """A burst that fits in quota + budget finishes as without a limit: an equivalence band around 1."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, variant, X1)
        if a.quota_ms is None or a.cpu_ms > a.quota_ms + a.budget_ms:
            raise Unmet(
                "a burst within quota + budget",
                f"{variant}: {a.describe()}: {a.cpu_ms:g} ms of CPU exceed "
                "quota + budget, so the model predicts a slow-down",
            )
        return Derivation(
            (round(1 / SAME_BAND, 3), SAME_BAND),
            (
                f"Model: {variant} = {a.describe()}: {a.cpu_ms:g} ms of CPU fit in quota + budget = "
                f"{a.quota_ms + a.budget_ms:g} ms, so after the idle interval the burst is never throttled and takes "
                f"what it takes without a limit ({a.free_wall_ms:g} ms): ratio 1. F1's band x/÷ {SAME_BAND:g}; the "
                "whole interval must lie inside it (an equivalence test, no p-value)."
            ),
            end="none: the model predicts the unlimited time (ratio 1); the band is the equivalence margin",
        )

    return derive


def throttled_in_few_rounds(variant: str, reference: str):
    """The absolute bound for "not throttled" as a share of rounds: half the reference arm's model share.

    A share lies in [0, 1], so runs that were never throttled bound its mean (the tie rule with the share's
    upper end, docs/STATISTICS.md §3); a count of periods per round has no such end."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, variant, X1), arm(evidence, reference, X1)
        mine, theirs = a.burst().throttled_round_share, b.burst().throttled_round_share
        if mine > 0 or theirs <= 0:
            raise Unmet(
                "a budget that lifts all throttling",
                f"the model throttles {variant} in {mine:.3g} and {reference} in {theirs:.3g} of the rounds: no "
                "absolute bound separates them",
            )
        bound = theirs / 2
        return Derivation(
            (round(bound, 3),),
            (
                f"Model: {variant} ({a.describe()}) is throttled in none of its rounds; the same job without a budget "
                f"({reference}) in {theirs:.3g} of them (over the start phases). Absolute bound: half of that, a share "
                f"of {bound:.3g} of the rounds (more means the budget did not lift the throttling)."
            ),
            end="an absolute bound at half the unbudgeted arm's model share, the model's own 0 far below it",
        )

    return derive


def counted_bursts(variant: str, what: str):
    """nr_bursts (or burst time) per round: above half the model's."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, variant, X1)
        burst = a.burst()
        assert burst.bursts is not None and burst.excess_ms is not None
        predicted = float(np.mean(burst.bursts if what == "count" else burst.excess_ms))
        if predicted <= 0:
            raise Unmet("a burst over the quota", f"{variant}: {a.describe()}: no period uses more than the quota")
        unit = "periods over quota" if what == "count" else "ms borrowed"
        return Derivation(
            (round(predicted / 2, 3),),
            (
                f"Model: {variant} = {a.describe()}: {predicted:.3g} {unit} per round (a burst straddling a period "
                f"boundary uses at most the quota in each). Threshold: half of it (the kernel counts what the group "
                "took from the pool, slices included, so more is no contradiction)."
            ),
            end="half the model's count: the kernel counts at least what the model does (slices included)",
        )

    return derive


# --------------------------------------------------------------------------
# F13: the CFS period (X2)


def slower_with_shorter_period(variant: str, baseline: str):
    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, variant, X2), arm(evidence, baseline, X2)
        _throttles_past_budget(a, variant)
        _throttles_past_budget(b, baseline)
        ratio = a.median_wall_ms() / b.median_wall_ms()
        if ratio <= 1:
            raise Unmet(
                "a predicted slow-down",
                f"the model's median wall {a.median_wall_ms():.3g} ms ({variant}) "
                f"is no longer than {b.median_wall_ms():.3g} ms ({baseline})",
            )
        threshold = predictions.latency_threshold(ratio)
        return Derivation(
            (round(threshold, 3),),
            (
                f"Model: {variant} = {a.describe()}: median wall {a.median_wall_ms():.3g} ms; {baseline} = "
                f"{b.describe()}: {b.median_wall_ms():.3g} ms; r = {ratio:.3g} (the burst runs at full parallelism "
                f"only until each period's quota is spent, so it approaches cpu / limit = "
                f"{a.cpu_ms / (a.limit_milli / 1000):.3g} ms as the period shrinks). Threshold (r + 2) / 3 = "
                f"{threshold:.3g} (F1's allowance)."
            ),
            end="the overhead at the upper end of its allowance: the smallest slow-down the model allows",
        )

    return derive


def _half_the_model_ratio(
    variant: str,
    baseline: str,
    per_arm: Callable[[predictions.BurstArm], float],
    explain: Callable[[predictions.BurstArm, predictions.BurstArm, float, float, float, float], str],
    end: str,
    throttled_arms: tuple[str, ...],
):
    """X2: the model's ratio r of a per-arm quantity (``per_arm``) between two periods, threshold sqrt(r), half the
    predicted effect on the log scale; ``throttled_arms`` must throttle past their budget for r to exist."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, variant, X2), arm(evidence, baseline, X2)
        for name, x in ((variant, a), (baseline, b)):
            if name in throttled_arms:
                _throttles_past_budget(x, name)
        mine, theirs = per_arm(a), per_arm(b)
        ratio = mine / theirs
        threshold = predictions.rate_threshold(ratio)
        return Derivation((round(threshold, 3),), explain(a, b, mine, theirs, ratio, threshold), end=end)

    return derive


def more_throttles(variant: str, baseline: str):
    return _half_the_model_ratio(
        variant,
        baseline,
        lambda x: float(np.mean(x.burst().throttled_periods)),
        lambda a, b, mine, theirs, ratio, threshold: (
            f"Model: {mine:.3g} throttled periods per round at {a.period_ms:g} ms ({variant}) against {theirs:.3g} "
            f"at {b.period_ms:g} ms ({baseline}); r = {ratio:.3g} (about cpu / quota - 1 each). Threshold sqrt(r) = "
            f"{threshold:.3g}: half the effect on the log scale. A ratio of means (Fieller): a run may count 0."
        ),
        "no free parameter (counts of periods); sqrt(r), half the predicted effect on the log scale",
        (baseline,),
    )


def shorter_pauses(variant: str, baseline: str):
    return _half_the_model_ratio(
        variant,
        baseline,
        _pause_per_throttle,
        lambda a, b, mine, theirs, ratio, threshold: (
            f"Model: the wait per throttled period is {mine:.3g} ms at {a.period_ms:g} ms ({variant}) and "
            f"{theirs:.3g} ms at {b.period_ms:g} ms ({baseline}): r = {ratio:.3g} (about period - quota / run "
            f"queues). Threshold sqrt(r) = {threshold:.3g}."
        ),
        "no free parameter; sqrt(r), half the predicted effect on the log scale",
        (variant, baseline),
    )


def _pause_per_throttle(a: predictions.BurstArm) -> float:
    burst = a.burst()
    return float(np.mean(burst.pause_ms)) / float(np.mean(burst.throttled_periods))


# --------------------------------------------------------------------------
# F14: what throttled time sums (X3)


def per_run_queue(variant: str):
    """Throttled time per round over the extra wall time per round: 1 to min(threads, CPUs), never threads."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, variant, X3)
        _throttles_past_budget(a, variant)
        fewest, most = a.counted_queues
        pause = float(np.mean(a.burst().pause_ms))
        overhead = predictions.OVERHEAD_ALLOWANCE * a.free_wall_ms
        low = fewest * pause / (pause + overhead)
        return Derivation(
            (round(low, 3), round(most * SAME_BAND, 3)),
            (
                f"docs/LAB.md §1: the kernel adds throttled time once per CPU run queue on which the group was throttled. "
                f"Model: {variant} = {a.describe()}: each wait (mean pause {pause:.3g} ms per round) is counted on "
                f"{fewest} to min(threads, CPUs) = {most} run queue(s), so the ratio lies in [{fewest}, {most}]; summed "
                f"over threads it would be {a.threads}. Upper end {most} x {SAME_BAND:g} (F1's equivalence margin). "
                f"Lower end: the extra wall time also holds the round's fixed overhead, which F1's allowance puts at up "
                f"to {predictions.OVERHEAD_ALLOWANCE:g} x the unthrottled burst ({overhead:.3g} ms), so one queue's count can "
                f"read as low as {fewest} x {pause:.3g} / ({pause:.3g} + {overhead:.3g}) = {low:.3g} (amendment of "
                "docs/EXPERIMENTS.md, made before any X3 data). The whole interval must lie inside the band."
            ),
            end="both ends of k in [1, min(threads, CPUs)]: the band holds every placement, and excludes threads",
        )

    return derive


def two_cpus(variant: str):
    """A cpuset of two CPUs needs a node that gives the burst two run queues."""

    def test(evidence: Evidence) -> str | None:
        a = arm(evidence, variant, X3)
        if a.queues >= 2:
            return None
        return (
            f"{variant}'s processes saw num_cpu = {a.cpus}: {a.threads} threads keep min({a.threads}, {a.cpus}) = "
            f"{a.queues} run queue busy, so it cannot show a sum over two (needs a node with 2 CPUs to pin)"
        )

    return Requirement("two CPUs to pin", test)


# --------------------------------------------------------------------------
# F15: overlapping bursts of several pods (X4)


def _pods(evidence: Evidence, variant: str) -> int:
    return int(evidence.spec(X4, variant).pods or 2)


def contention(variant: str, baseline: str):
    """Completion together over apart: the model's ratio of CPUs per pod, F1's allowance."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, variant, X4), arm(evidence, baseline, X4)
        pods = _pods(evidence, variant)
        together = float(np.median(predictions.overlap_burst(a, pods, True).wall_ms))
        apart = float(np.median(predictions.overlap_burst(b, pods, False).wall_ms))
        ratio = together / apart
        if ratio <= 1:
            raise Unmet(
                "more busy threads than CPUs",
                (
                    f"{pods} pods x {a.threads} threads = {pods * a.threads} busy threads on {a.cpus} CPUs: together they "
                    "do not contend, so the model predicts no slow-down"
                ),
            )
        threshold = predictions.latency_threshold(ratio)
        quota = "no quota" if a.quota_ms is None else f"its own {a.quota_ms:g} ms quota"
        return Derivation(
            (round(threshold, 3),),
            (
                f"Model: each pod = {a.describe()}, within {quota}. Apart, a burst runs on min(threads, CPUs) = "
                f"{a.queues} CPUs: {apart:.3g} ms; together, {pods} x {a.threads} busy threads share {a.cpus} CPUs, "
                f"{predictions.overlap_rate(a, pods, True):.3g} per pod: {together:.3g} ms; r = {ratio:.3g}, which no per-pod "
                f"quota predicts. Threshold (r + 2) / 3 = {threshold:.3g} (F1's allowance)."
            ),
            end="the overhead at the upper end of its allowance: the smallest slow-down the model allows",
        )

    return derive


def unthrottled_rounds(variant: str):
    """'Not throttled' as a share: the pods' quotas alone throttle no round, so most rounds stay unthrottled (an
    absolute bound on the share of rounds throttled, which ends at 1 where a count per round has no end)."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, variant, X4)
        pods = _pods(evidence, variant)
        share = predictions.overlap_burst(a, pods, True).throttled_round_share
        if share > 0:
            raise Unmet(
                "bursts within their quotas",
                f"{a.describe()}: the model throttles each pod's burst in {share:.3g} of the rounds even together",
            )
        return Derivation(
            (0.5,),
            (
                f"Model: each pod's {a.cpu_ms:g} ms of CPU fit in its {a.quota_ms:g} ms quota even at "
                f"{predictions.overlap_rate(a, pods, True):.3g} CPUs: no round throttled. Absolute bound: throttled in "
                "under half the rounds (most rounds unthrottled): the slow-down is contention, not throttling."
            ),
            end="an absolute bound (half the rounds) against the model's 0",
        )

    return derive


# --------------------------------------------------------------------------
# the claims: the lab's (docs/LAB.md §5), then ours (docs/EXPERIMENTS.md, as written before the data)

FINDINGS: tuple[Finding, ...] = tuple(
    cite(finding)
    for finding in (
        Finding(
            id="F1",
            claim="Same average CPU, very different completion time: the same burst takes much longer under "
            "limit 1 and 500m than without a limit, while limit 2 changes nothing.",
            checks=(
                Check(
                    label="p50_wall_ms limit1 / nolimit",
                    kind="ratio",
                    experiment=E2A,
                    metric="p50_wall_ms",
                    variant=E2A_LIMIT1,
                    baseline=E2A_NOLIMIT,
                    relation=">",
                    scale="log",
                    derive=slowdown(E2A_LIMIT1),
                    why="Completion under a limit from the CFS model.",
                ),
                Check(
                    label="p50_wall_ms limit500m / nolimit",
                    kind="ratio",
                    experiment=E2A,
                    metric="p50_wall_ms",
                    variant=E2A_LIMIT500M,
                    baseline=E2A_NOLIMIT,
                    relation=">",
                    scale="log",
                    derive=slowdown(E2A_LIMIT500M),
                    why="Completion under a limit from the CFS model.",
                ),
                Check(
                    label="p50_wall_ms limit2 / nolimit",
                    kind="ratio",
                    experiment=E2A,
                    metric="p50_wall_ms",
                    variant=E2A_LIMIT2,
                    baseline=E2A_NOLIMIT,
                    relation="within",
                    scale="log",
                    derive=unchanged(E2A_LIMIT2),
                    why="A limit the burst fits in changes nothing.",
                ),
            ),
        ),
        Finding(
            id="F2",
            claim="Throttled time is summed over the CPU run queues on which the group was throttled, so per round "
            "it can exceed the round's wall time.",
            checks=(
                Check(
                    label="throttled_ms_per_round / extra wall limit500m",
                    kind="level",
                    experiment=E2A,
                    metric="throttled_per_extra_wall",
                    variant=E2A_LIMIT500M,
                    baseline=None,
                    relation="within",
                    scale="log",
                    derive=sums_run_queues(E2A_LIMIT500M),
                    values=throttled_per_extra_wall(E2A),
                    decisive=False,
                    why="What the kernel sums (docs/LAB.md §1), per run: throttled ms per round (rounds after the first) "
                    "over the extra wall ms per round (mean wall minus the model's unthrottled wall): one "
                    "run queue's waiting counts 1, each further throttled run queue adds up to 1 more.",
                ),
                Check(
                    label="two_queue_share limit500m",
                    kind="level",
                    experiment=E2A,
                    metric="two_queue_share",
                    variant=E2A_LIMIT500M,
                    baseline=None,
                    relation=">",
                    scale="linear",
                    threshold=(TWO_QUEUE_MAJORITY,),
                    value_range=(0.0, 1.0),
                    decisive=False,
                    premise=True,
                    gates=("throttled_ms_per_round / mean_wall_ms limit500m",),
                    end=(
                        "fixed, not derived: one queue's count is at most the round's pause, below its wall time, "
                        "so the claim needs the threads on two run queues in most rounds"
                    ),
                    why="The premise, measured apart from the throttling counters (the workload's getcpu readings): "
                    "the share of rounds (after the first) whose threads mainly ran on two or more CPUs. Only then "
                    "can two run queues be throttled at once; where the scheduler kept the threads on one queue, "
                    "the claim is not tested, not false.",
                ),
                Check(
                    label="throttled_ms_per_round / mean_wall_ms limit500m",
                    kind="level",
                    experiment=E2A,
                    metric="throttled_over_wall",
                    variant=E2A_LIMIT500M,
                    baseline=None,
                    relation=">",
                    scale="log",
                    derive=exceeds_wall(E2A_LIMIT500M),
                    values=throttled_over_wall,
                    why="The claim's consequence, per run: throttled ms per round over the wall ms per round.",
                ),
            ),
        ),
        Finding(
            id="F3",
            claim="nr_periods counts only the periods in which the cgroup ran (and the one after), not every "
            "period of wall time.",
            checks=(
                Check(
                    label="periods_per_round limit2",
                    kind="level",
                    experiment=E2A,
                    metric="periods_per_round",
                    variant=E2A_LIMIT2,
                    baseline=None,
                    relation="within",
                    scale="linear",
                    derive=counted_periods(E2A_LIMIT2),
                    estimand="median run",
                    why="nr_periods over the rounds, per round: what a run counts, so the median run (order "
                    "statistics; identical runs give [v, v]).",
                ),
            ),
        ),
        Finding(
            id="F4",
            claim="Fewer threads means fewer throttles but not a faster burst: at limit 1, the same CPU on fewer "
            "threads is throttled less than the many-thread burst, yet finishes no sooner.",
            checks=(
                Check(
                    label="throttled_ms limit1-2threads / limit1",
                    kind="ratio",
                    experiment=E2A,
                    metric="throttled_ms",
                    variant=E2A_LIMIT1_2THREADS,
                    baseline=E2A_LIMIT1,
                    relation="<",
                    scale="mean-ratio",
                    derive=fewer_throttled(E2A_LIMIT1_2THREADS, E2A_LIMIT1),
                    requirements=(parallel_threads_differ(E2A, E2A_LIMIT1_2THREADS, E2A_LIMIT1),),
                    why="Fewer threads keep fewer run queues busy when the quota runs out.",
                ),
                Check(
                    label="p50_wall_ms limit1-2threads / limit1",
                    kind="ratio",
                    experiment=E2A,
                    metric="p50_wall_ms",
                    variant=E2A_LIMIT1_2THREADS,
                    baseline=E2A_LIMIT1,
                    relation=">",
                    scale="log",
                    derive=not_faster(E2A_LIMIT1_2THREADS, E2A_LIMIT1),
                    why="The same CPU on fewer threads takes as long or longer.",
                ),
            ),
            not_covered=("E2b",),
        ),
        Finding(
            id="F5",
            claim="The default GOMAXPROCS follows the go line of go.mod (1.25: the CPU limit), not the toolchain "
            "that built the binary.",
            checks=(
                Check(
                    label="gomaxprocs = rule",
                    kind="agreement",
                    experiment="E3",
                    metric="gomaxprocs",
                    variant="*",
                    baseline="expected_gomaxprocs",
                    relation="within",
                    threshold=(1.0, 1.0),
                    scale="linear",
                    requirements=(go_line_can_change_default("E3"),),
                    why="GOMAXPROCS is read back, not measured: one variant off the rule contradicts the claim. "
                    "The rule: GOMAXPROCS env wins; go >= 1.25 line: max(2, ceil(limit)) capped at num_cpu; "
                    "older line or GODEBUG=containermaxprocs=0: num_cpu.",
                ),
            ),
        ),
        # ours, on E2a's burst with one more knob each (docs/EXPERIMENTS.md)
        Finding(
            id="F12",
            claim="A burst that fits in quota + budget after an idle interval is not throttled: its completion time "
            "falls back to the unlimited one, and nr_bursts / burst_time count the borrowed CPU; a budget too "
            "small for the burst shortens the wait only by what it lends.",
            checks=(
                Check(
                    label="p50_wall_ms budget-full / budget0",
                    kind="ratio",
                    experiment=X1,
                    metric="p50_wall_ms",
                    variant=X1_BUDGET_FULL,
                    baseline=X1_BUDGET0,
                    relation="<",
                    scale="log",
                    derive=budget_speedup(X1_BUDGET_FULL, X1_BUDGET0),
                    why="Completion with a budget of the whole quota against none.",
                ),
                Check(
                    label="p50_wall_ms budget-full / nolimit",
                    kind="ratio",
                    experiment=X1,
                    metric="p50_wall_ms",
                    variant=X1_BUDGET_FULL,
                    baseline=X1_NOLIMIT,
                    relation="within",
                    scale="log",
                    derive=back_to_unlimited(X1_BUDGET_FULL),
                    why="A burst within quota + budget finishes as without a limit.",
                ),
                Check(
                    label="throttled_round_share budget-full",
                    kind="level",
                    experiment=X1,
                    metric="throttled_round_share",
                    variant=X1_BUDGET_FULL,
                    baseline=None,
                    relation="<",
                    scale="linear",
                    value_range=(0.0, 1.0),
                    derive=throttled_in_few_rounds(X1_BUDGET_FULL, X1_BUDGET0),
                    why="The share of rounds after the first that were throttled at all: an absolute bound for "
                    "'not throttled'.",
                ),
                Check(
                    label="bursts_per_round budget-full",
                    kind="level",
                    experiment=X1,
                    metric="bursts_per_round",
                    variant=X1_BUDGET_FULL,
                    baseline=None,
                    relation=">",
                    scale="linear",
                    derive=counted_bursts(X1_BUDGET_FULL, "count"),
                    why="cpu.stat nr_bursts over the run, per round: the kernel counts the periods over quota.",
                ),
                Check(
                    label="burst_ms_per_round budget-full",
                    kind="level",
                    experiment=X1,
                    metric="burst_ms_per_round",
                    variant=X1_BUDGET_FULL,
                    baseline=None,
                    relation=">",
                    scale="linear",
                    derive=counted_bursts(X1_BUDGET_FULL, "time"),
                    why="cpu.stat burst_time (v1) / burst_usec (v2) over the run, per round: the CPU borrowed.",
                ),
                Check(
                    label="p50_wall_ms budget-half / budget0",
                    kind="ratio",
                    experiment=X1,
                    metric="p50_wall_ms",
                    variant=X1_BUDGET_HALF,
                    baseline=X1_BUDGET0,
                    relation="<",
                    scale="log",
                    derive=budget_speedup(X1_BUDGET_HALF, X1_BUDGET0),
                    decisive=False,
                    why="A budget too small for the burst still shortens it by what it lends (supporting).",
                ),
            ),
        ),
        Finding(
            id="F13",
            claim="A shorter CFS period shortens each throttled pause but multiplies them: a burst larger than its "
            "quota completes later, towards CPU / limit, and nr_throttled rises about as CPU / quota.",
            checks=(
                Check(
                    label="p50_wall_ms period20 / period100",
                    kind="ratio",
                    experiment=X2,
                    metric="p50_wall_ms",
                    variant=X2_PERIOD20,
                    baseline=X2_PERIOD100,
                    relation=">",
                    scale="log",
                    derive=slower_with_shorter_period(X2_PERIOD20, X2_PERIOD100),
                    why="Completion at a 20 ms period against the default 100 ms.",
                ),
                Check(
                    label="p50_wall_ms period5 / period100",
                    kind="ratio",
                    experiment=X2,
                    metric="p50_wall_ms",
                    variant=X2_PERIOD5,
                    baseline=X2_PERIOD100,
                    relation=">",
                    scale="log",
                    derive=slower_with_shorter_period(X2_PERIOD5, X2_PERIOD100),
                    why="Completion at a 5 ms period against the default 100 ms.",
                ),
                Check(
                    label="throttled_per_round period5 / period100",
                    kind="ratio",
                    experiment=X2,
                    metric="throttled_per_round",
                    variant=X2_PERIOD5,
                    baseline=X2_PERIOD100,
                    relation=">",
                    scale="mean-ratio",
                    derive=more_throttles(X2_PERIOD5, X2_PERIOD100),
                    why="Throttled periods per round after the first.",
                ),
                Check(
                    label="pause per throttle period5 / period100",
                    kind="ratio",
                    experiment=X2,
                    metric="pause_per_throttle",
                    variant=X2_PERIOD5,
                    baseline=X2_PERIOD100,
                    relation="<",
                    scale="log",
                    derive=shorter_pauses(X2_PERIOD5, X2_PERIOD100),
                    values=pause_per_throttle(X2),
                    decisive=False,
                    why="Per run: extra wall ms per round (mean wall minus the model's unthrottled wall) per "
                    "throttled period (supporting).",
                ),
            ),
        ),
        Finding(
            id="F14",
            claim="Throttled time is summed over the CPU run queues on which the group was throttled, not over its "
            "threads: with 8 threads it is about one pause per round on one CPU and between one and two on "
            "two CPUs, never eight.",
            checks=(
                Check(
                    label="throttled_ms_per_round / extra wall cpus1",
                    kind="level",
                    experiment=X3,
                    metric="throttled_per_extra_wall",
                    variant=X3_CPUS1,
                    baseline=None,
                    relation="within",
                    scale="log",
                    derive=per_run_queue(X3_CPUS1),
                    values=throttled_per_extra_wall(X3),
                    why="Per run: throttled ms per round (rounds after the first) over the extra wall ms per round "
                    "(mean wall minus the model's unthrottled wall), on a cpuset of one CPU.",
                ),
                Check(
                    label="throttled_ms_per_round / extra wall cpus2",
                    kind="level",
                    experiment=X3,
                    metric="throttled_per_extra_wall",
                    variant=X3_CPUS2,
                    baseline=None,
                    relation="within",
                    scale="log",
                    derive=per_run_queue(X3_CPUS2),
                    values=throttled_per_extra_wall(X3),
                    requirements=(two_cpus(X3_CPUS2),),
                    why="The same on a cpuset of two CPUs.",
                ),
            ),
        ),
        Finding(
            id="F15",
            claim="Synchronized bursts of pods that each fit their own quota contend for the node's CPUs: each takes "
            "about (sum of bursts) / CPUs instead of its own CPU / run queues, which no per-pod quota predicts.",
            checks=(
                Check(
                    label="p50_wall_ms synchronized / staggered",
                    kind="ratio",
                    experiment=X4,
                    metric="p50_wall_ms",
                    variant=X4_SYNCHRONIZED,
                    baseline=X4_STAGGERED,
                    relation=">",
                    scale="log",
                    derive=contention(X4_SYNCHRONIZED, X4_STAGGERED),
                    why="Per run: the mean over the pods of each pod's median round after the first.",
                ),
                Check(
                    label="throttled_round_share synchronized",
                    kind="level",
                    experiment=X4,
                    metric="throttled_round_share",
                    variant=X4_SYNCHRONIZED,
                    baseline=None,
                    relation="<",
                    scale="linear",
                    value_range=(0.0, 1.0),
                    derive=unthrottled_rounds(X4_SYNCHRONIZED),
                    decisive=False,
                    why="The share of rounds throttled at all, mean over the pods (supporting).",
                ),
            ),
        ),
    )
)
