"""Our own claims beyond the lab, F12-F14 (docs/EXPERIMENTS.md), as data: X1's burst budget, X2's
CFS period, X3's sum of throttled time over run queues.

These are the project's hypotheses, not the lab's: each claim is the sentence written in
docs/EXPERIMENTS.md before any run, and every threshold comes from the same CFS model as F1-F5
(:mod:`.predictions`, with the burst budget's refill) and the variant's own parameters: threads,
work, limit, budget, the node's CPUs and period (headers.csv). The allowances are F1's: a latency
ratio r becomes (r + 2) / 3 on the slow side and 3r / (1 + 2r) on the fast side
(:func:`~.predictions.latency_threshold`), a ratio of counts sqrt(r), an equivalence band x/÷ 1.25.
"""

from __future__ import annotations

import numpy as np

from throttlelab.analysis.findings import predictions as model
from throttlelab.analysis.findings.engine import Check, Derivation, Evidence, Finding, Requirement, Unmet
from throttlelab.analysis.findings.jobs import SAME_BAND

X1, X2, X3 = "X1", "X2", "X3"
#: What a check of ours cites in place of the lab's figure.
OURS = "none: ours, not the lab's (hypothesis written before the data, docs/EXPERIMENTS.md)"


def arm(evidence: Evidence, experiment: str, variant: str) -> model.BurstArm:
    """A burst variant of X1-X3 as the model sees it, on the node its processes saw (CPUs, period)."""
    spec = evidence.spec(experiment, variant)
    return model.burst_arm(spec, evidence.num_cpu(experiment, variant), evidence.period_ms(experiment, variant))


def _throttled(a: model.BurstArm, variant: str) -> None:
    if a.quota_ms is None or a.cpu_ms <= a.quota_ms + a.budget_ms:
        room = "no quota" if a.quota_ms is None else f"quota + budget = {a.quota_ms + a.budget_ms:g} ms"
        raise Unmet("a burst larger than quota + budget",
                    f"{variant}: {a.describe()}: {a.cpu_ms:g} ms of CPU fit in {room}, so the model predicts no "
                    "throttling to compare with")


# --------------------------------------------------------------------------
# F12: the burst budget (X1)


def budget_speedup(variant: str, baseline: str):
    """Completion with a budget against the same job without one: the model's ratio, F1's allowance."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, X1, variant), arm(evidence, X1, baseline)
        _throttled(b, baseline)
        ratio = a.median_wall_ms() / b.median_wall_ms()
        if ratio >= 1:
            raise Unmet("a budget the model says helps", f"{variant}: {a.describe()}: the model's median wall time "
                                                         f"{a.median_wall_ms():.3g} ms is no shorter than {baseline}'s")
        threshold = model.latency_threshold(ratio)
        return Derivation((round(threshold, 3),), (
            f"Model (the budget's refill: the pool starts a burst with quota + budget after idle periods): "
            f"{variant} = {a.describe()}: median wall {a.median_wall_ms():.3g} ms; {baseline} = {b.describe()}: "
            f"{b.median_wall_ms():.3g} ms; r = {ratio:.3g}. Threshold 3r / (1 + 2r) = {threshold:.3g}: F1's allowance "
            "of a fixed overhead up to twice the faster arm, added to both."
        ))

    return derive


def back_to_unlimited(variant: str, baseline: str = "nolimit"):
    """A burst that fits in quota + budget finishes as without a limit: an equivalence band around 1."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, X1, variant)
        if a.quota_ms is None or a.cpu_ms > a.quota_ms + a.budget_ms:
            raise Unmet("a burst within quota + budget", f"{variant}: {a.describe()}: {a.cpu_ms:g} ms of CPU exceed "
                                                         "quota + budget, so the model predicts a slow-down")
        return Derivation((round(1 / SAME_BAND, 3), SAME_BAND), (
            f"Model: {variant} = {a.describe()}: {a.cpu_ms:g} ms of CPU fit in quota + budget = "
            f"{a.quota_ms + a.budget_ms:g} ms, so after the idle interval the burst is never throttled and takes "
            f"what it takes without a limit ({a.free_wall_ms:g} ms): ratio 1. F1's band x/÷ {SAME_BAND:g}; the "
            "whole interval must lie inside it (an equivalence test, no p-value)."
        ))

    return derive


def not_throttled(variant: str, reference: str):
    """The absolute bound for "not throttled": half the reference arm's model count per round."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, X1, variant), arm(evidence, X1, reference)
        mine = float(np.mean(a.burst().throttled_periods))
        theirs = float(np.mean(b.burst().throttled_periods))
        if mine > 0 or theirs <= 0:
            raise Unmet("a budget that lifts all throttling",
                        f"the model gives {variant} {mine:.3g} and {reference} {theirs:.3g} throttled periods per "
                        "round: no absolute bound separates them")
        bound = theirs / 2
        return Derivation((round(bound, 3),), (
            f"Model: {variant} ({a.describe()}) is throttled in 0 periods per round; the same job without a budget "
            f"({reference}) in {theirs:.3g}. Absolute bound: half of that, {bound:.3g} per round (more means the "
            "budget did not lift the throttling)."
        ))

    return derive


def counted_bursts(variant: str, what: str):
    """nr_bursts (or burst time) per round: above half the model's."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, X1, variant)
        burst = a.burst()
        assert burst.bursts is not None and burst.excess_ms is not None
        predicted = float(np.mean(burst.bursts if what == "count" else burst.excess_ms))
        if predicted <= 0:
            raise Unmet("a burst over the quota", f"{variant}: {a.describe()}: no period uses more than the quota")
        unit = "periods over quota" if what == "count" else "ms borrowed"
        return Derivation((round(predicted / 2, 3),), (
            f"Model: {variant} = {a.describe()}: {predicted:.3g} {unit} per round (a burst straddling a period "
            f"boundary uses at most the quota in each). Threshold: half of it (the kernel counts what the group "
            "took from the pool, slices included, so more is no contradiction)."
        ))

    return derive


# --------------------------------------------------------------------------
# F13: the CFS period (X2)


def slower_with_shorter_period(variant: str, baseline: str):
    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, X2, variant), arm(evidence, X2, baseline)
        _throttled(a, variant)
        _throttled(b, baseline)
        ratio = a.median_wall_ms() / b.median_wall_ms()
        if ratio <= 1:
            raise Unmet("a predicted slow-down", f"the model's median wall {a.median_wall_ms():.3g} ms ({variant}) "
                                                 f"is no longer than {b.median_wall_ms():.3g} ms ({baseline})")
        threshold = model.latency_threshold(ratio)
        return Derivation((round(threshold, 3),), (
            f"Model: {variant} = {a.describe()}: median wall {a.median_wall_ms():.3g} ms; {baseline} = "
            f"{b.describe()}: {b.median_wall_ms():.3g} ms; r = {ratio:.3g} (the burst runs at full parallelism "
            f"only until each period's quota is spent, so it approaches cpu / limit = "
            f"{a.cpu_ms / (a.limit_milli / 1000):.3g} ms as the period shrinks). Threshold (r + 2) / 3 = "
            f"{threshold:.3g} (F1's allowance)."
        ))

    return derive


def more_throttles(variant: str, baseline: str):
    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, X2, variant), arm(evidence, X2, baseline)
        _throttled(b, baseline)
        mine, theirs = (float(np.mean(x.burst().throttled_periods)) for x in (a, b))
        ratio = mine / theirs
        threshold = model.rate_threshold(ratio)
        return Derivation((round(threshold, 3),), (
            f"Model: {mine:.3g} throttled periods per round at {a.period_ms:g} ms ({variant}) against {theirs:.3g} "
            f"at {b.period_ms:g} ms ({baseline}); r = {ratio:.3g} (about cpu / quota - 1 each). Threshold sqrt(r) = "
            f"{threshold:.3g}: half the effect on the log scale. A ratio of means (Fieller): a run may count 0."
        ))

    return derive


def shorter_pauses(variant: str, baseline: str):
    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, X2, variant), arm(evidence, X2, baseline)
        _throttled(a, variant)
        _throttled(b, baseline)
        mine, theirs = (_pause_per_throttle(x) for x in (a, b))
        ratio = mine / theirs
        threshold = model.rate_threshold(ratio)
        return Derivation((round(threshold, 3),), (
            f"Model: the wait per throttled period is {mine:.3g} ms at {a.period_ms:g} ms ({variant}) and "
            f"{theirs:.3g} ms at {b.period_ms:g} ms ({baseline}): r = {ratio:.3g} (about period - quota / run "
            f"queues). Threshold sqrt(r) = {threshold:.3g}."
        ))

    return derive


def _pause_per_throttle(a: model.BurstArm) -> float:
    burst = a.burst()
    return float(np.mean(burst.pause_ms)) / float(np.mean(burst.throttled_periods))


def pause_per_throttle(experiment: str):
    """Each run's extra wall time per round (mean wall minus the model's unthrottled wall) per throttled period."""

    def values(evidence: Evidence, name: str) -> np.ndarray:
        extra = evidence.values(experiment, name, "mean_wall_ms") - arm(evidence, experiment, name).free_wall_ms
        throttles = evidence.values(experiment, name, "throttled_per_round")
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where((throttles > 0) & (extra > 0), extra / throttles, np.nan)

    return values


# --------------------------------------------------------------------------
# F14: what throttled time sums (X3)


def per_run_queue(variant: str):
    """Throttled time per round over the extra wall time per round: 1 to min(threads, CPUs), never threads."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, X3, variant)
        _throttled(a, variant)
        fewest, most = a.counted_queues
        pause = float(np.mean(a.burst().pause_ms))
        overhead = model.OVERHEAD_ALLOWANCE * a.free_wall_ms
        low = fewest * pause / (pause + overhead)
        return Derivation((round(low, 3), round(most * SAME_BAND, 3)), (
            f"SPEC §1: the kernel adds throttled time once per CPU run queue on which the group was throttled. "
            f"Model: {variant} = {a.describe()}: each wait (mean pause {pause:.3g} ms per round) is counted on "
            f"{fewest} to min(threads, CPUs) = {most} run queue(s), so the ratio lies in [{fewest}, {most}]; summed "
            f"over threads it would be {a.threads}. Upper end {most} x {SAME_BAND:g} (F1's equivalence margin). "
            f"Lower end: the extra wall time also holds the round's fixed overhead, which F1's allowance puts at up "
            f"to {model.OVERHEAD_ALLOWANCE:g} x the unthrottled burst ({overhead:.3g} ms), so one queue's count can "
            f"read as low as {fewest} x {pause:.3g} / ({pause:.3g} + {overhead:.3g}) = {low:.3g} (amendment of "
            "docs/EXPERIMENTS.md, made before any X3 data). The whole interval must lie inside the band."
        ))

    return derive


def two_cpus(variant: str):
    """A cpuset of two CPUs needs a node that gives the burst two run queues."""

    def test(evidence: Evidence) -> str | None:
        a = arm(evidence, X3, variant)
        if a.queues >= 2:
            return None
        return (f"{variant}'s processes saw num_cpu = {a.cpus}: {a.threads} threads keep min({a.threads}, {a.cpus}) = "
                f"{a.queues} run queue busy, so it cannot show a sum over two (needs a node with 2 CPUs to pin)")

    return Requirement("two CPUs to pin", test)


def throttled_per_extra_wall(experiment: str):
    """Each run's throttled ms per round / (mean wall - the model's unthrottled wall), as F2's."""

    def values(evidence: Evidence, name: str) -> np.ndarray:
        per_round = evidence.values(experiment, name, "throttled_ms_per_round")
        extra = evidence.values(experiment, name, "mean_wall_ms") - arm(evidence, experiment, name).free_wall_ms
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(extra > 0, per_round / extra, np.nan)

    return values


# --------------------------------------------------------------------------
# the claims (docs/EXPERIMENTS.md, as written before the data)

FINDINGS: tuple[Finding, ...] = (
    Finding(
        id="F12",
        claim="A burst that fits in quota + budget after an idle interval is not throttled: its completion time "
              "falls back to the unlimited one, and nr_bursts / burst_time count the borrowed CPU; a budget too "
              "small for the burst shortens the wait only by what it lends.",
        reference=OURS,
        ours=True,
        checks=(
            Check(label="p50_wall_ms budget-full / budget0", kind="ratio", experiment=X1, metric="p50_wall_ms",
                  variant="budget-full", baseline="budget0", relation="<", scale="log",
                  derive=budget_speedup("budget-full", "budget0"), reference=OURS,
                  why="Completion with a budget of the whole quota against none."),
            Check(label="p50_wall_ms budget-full / nolimit", kind="ratio", experiment=X1, metric="p50_wall_ms",
                  variant="budget-full", baseline="nolimit", relation="within", scale="log",
                  derive=back_to_unlimited("budget-full"), reference=OURS,
                  why="A burst within quota + budget finishes as without a limit."),
            Check(label="throttled_per_round budget-full", kind="level", experiment=X1, metric="throttled_per_round",
                  variant="budget-full", baseline=None, relation="<", scale="linear",
                  derive=not_throttled("budget-full", "budget0"), reference=OURS,
                  why="Throttled periods per round after the first: an absolute bound for 'not throttled'."),
            Check(label="bursts_per_round budget-full", kind="level", experiment=X1, metric="bursts_per_round",
                  variant="budget-full", baseline=None, relation=">", scale="linear",
                  derive=counted_bursts("budget-full", "count"), reference=OURS,
                  why="cpu.stat nr_bursts over the run, per round: the kernel counts the periods over quota."),
            Check(label="burst_ms_per_round budget-full", kind="level", experiment=X1, metric="burst_ms_per_round",
                  variant="budget-full", baseline=None, relation=">", scale="linear",
                  derive=counted_bursts("budget-full", "time"), reference=OURS,
                  why="cpu.stat burst_time (v1) / burst_usec (v2) over the run, per round: the CPU borrowed."),
            Check(label="p50_wall_ms budget-half / budget0", kind="ratio", experiment=X1, metric="p50_wall_ms",
                  variant="budget-half", baseline="budget0", relation="<", scale="log",
                  derive=budget_speedup("budget-half", "budget0"), decisive=False, reference=OURS,
                  why="A budget too small for the burst still shortens it by what it lends (supporting)."),
        ),
    ),
    Finding(
        id="F13",
        claim="A shorter CFS period shortens each throttled pause but multiplies them: a burst larger than its "
              "quota completes later, towards CPU / limit, and nr_throttled rises about as CPU / quota.",
        reference=OURS,
        ours=True,
        checks=(
            Check(label="p50_wall_ms period20 / period100", kind="ratio", experiment=X2, metric="p50_wall_ms",
                  variant="period20", baseline="period100", relation=">", scale="log",
                  derive=slower_with_shorter_period("period20", "period100"), reference=OURS,
                  why="Completion at a 20 ms period against the default 100 ms."),
            Check(label="p50_wall_ms period5 / period100", kind="ratio", experiment=X2, metric="p50_wall_ms",
                  variant="period5", baseline="period100", relation=">", scale="log",
                  derive=slower_with_shorter_period("period5", "period100"), reference=OURS,
                  why="Completion at a 5 ms period against the default 100 ms."),
            Check(label="throttled_per_round period5 / period100", kind="ratio", experiment=X2,
                  metric="throttled_per_round", variant="period5", baseline="period100", relation=">",
                  scale="mean-ratio", derive=more_throttles("period5", "period100"), reference=OURS,
                  why="Throttled periods per round after the first."),
            Check(label="pause per throttle period5 / period100", kind="ratio", experiment=X2,
                  metric="pause_per_throttle", variant="period5", baseline="period100", relation="<", scale="log",
                  derive=shorter_pauses("period5", "period100"), values=pause_per_throttle(X2), decisive=False,
                  reference=OURS,
                  why="Per run: extra wall ms per round (mean wall minus the model's unthrottled wall) per "
                      "throttled period (supporting)."),
        ),
    ),
    Finding(
        id="F14",
        claim="Throttled time is summed over the CPU run queues on which the group was throttled, not over its "
              "threads: with 8 threads it is about one pause per round on one CPU and between one and two on "
              "two CPUs, never eight.",
        reference=OURS,
        ours=True,
        checks=(
            Check(label="throttled_ms_per_round / extra wall cpus1", kind="level", experiment=X3,
                  metric="throttled_per_extra_wall", variant="cpus1", baseline=None, relation="within", scale="log",
                  derive=per_run_queue("cpus1"), values=throttled_per_extra_wall(X3), reference=OURS,
                  why="Per run: throttled ms per round (rounds after the first) over the extra wall ms per round "
                      "(mean wall minus the model's unthrottled wall), on a cpuset of one CPU."),
            Check(label="throttled_ms_per_round / extra wall cpus2", kind="level", experiment=X3,
                  metric="throttled_per_extra_wall", variant="cpus2", baseline=None, relation="within", scale="log",
                  derive=per_run_queue("cpus2"), values=throttled_per_extra_wall(X3),
                  requirements=(two_cpus("cpus2"),), reference=OURS,
                  why="The same on a cpuset of two CPUs."),
        ),
    ),
)
