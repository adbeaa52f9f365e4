"""Our own claims beyond the lab (docs/EXPERIMENTS.md) as data: F12 (X1's burst budget), F13 (X2's
CFS period), F14 (X3's sum of throttled time over run queues), F15 (X4, overlapping bursts), F16 (X5, steady arrivals near the
limit) and F17 (X6, GOMAXPROCS 2 against 1 under a small limit).

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
from throttlelab.analysis.findings.engine import (
    Check,
    Derivation,
    Evidence,
    Finding,
    Requirement,
    Unmet,
    cite,
)
from throttlelab.analysis.findings.jobs import SAME_BAND, arm
from throttlelab.analysis.findings.services import latency_rise
from throttlelab.model.quantities import format_cpu

X1, X2, X3, X4, X5, X6 = "X1", "X2", "X3", "X4", "X5", "X6"
#: F6's bounds on a throttled share: "not throttled" below a quarter of what the throttling arm must show,
#: "throttled" above half of it.
QUIET_SHARE, LOUD_SHARE = 0.25, 0.5
#: F6's band around the designed average use (a premise).
USE_BAND = 1.5
LATENCY = "Latency from the scheduled send; failed and timed-out requests count at the client timeout."


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
        a, b = arm(evidence, variant, X1), arm(evidence, baseline, X1)
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
        a = arm(evidence, variant, X1)
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
        a, b = arm(evidence, variant, X1), arm(evidence, reference, X1)
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
        a = arm(evidence, variant, X1)
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
        a, b = arm(evidence, variant, X2), arm(evidence, baseline, X2)
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
        a, b = arm(evidence, variant, X2), arm(evidence, baseline, X2)
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
        a, b = arm(evidence, variant, X2), arm(evidence, baseline, X2)
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
        extra = evidence.values(experiment, name, "mean_wall_ms") - arm(evidence, name, experiment).free_wall_ms
        throttles = evidence.values(experiment, name, "throttled_per_round")
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where((throttles > 0) & (extra > 0), extra / throttles, np.nan)

    return values


# --------------------------------------------------------------------------
# F14: what throttled time sums (X3)


def per_run_queue(variant: str):
    """Throttled time per round over the extra wall time per round: 1 to min(threads, CPUs), never threads."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, variant, X3)
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
        a = arm(evidence, variant, X3)
        if a.queues >= 2:
            return None
        return (f"{variant}'s processes saw num_cpu = {a.cpus}: {a.threads} threads keep min({a.threads}, {a.cpus}) = "
                f"{a.queues} run queue busy, so it cannot show a sum over two (needs a node with 2 CPUs to pin)")

    return Requirement("two CPUs to pin", test)


def throttled_per_extra_wall(experiment: str):
    """Each run's throttled ms per round / (mean wall - the model's unthrottled wall), as F2's."""

    def values(evidence: Evidence, name: str) -> np.ndarray:
        per_round = evidence.values(experiment, name, "throttled_ms_per_round")
        extra = evidence.values(experiment, name, "mean_wall_ms") - arm(evidence, name, experiment).free_wall_ms
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(extra > 0, per_round / extra, np.nan)

    return values


# --------------------------------------------------------------------------
# F15: overlapping bursts of several pods (X4)


def _pods(evidence: Evidence, variant: str) -> int:
    return int(evidence.spec(X4, variant).pods or 2)


def contention(variant: str, baseline: str):
    """Completion together over apart: the model's ratio of CPUs per pod, F1's allowance."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, variant, X4), arm(evidence, baseline, X4)
        pods = _pods(evidence, variant)
        together = float(np.median(model.overlap_burst(a, pods, True).wall_ms))
        apart = float(np.median(model.overlap_burst(b, pods, False).wall_ms))
        ratio = together / apart
        if ratio <= 1:
            raise Unmet("more busy threads than CPUs", (
                f"{pods} pods x {a.threads} threads = {pods * a.threads} busy threads on {a.cpus} CPUs: together they "
                "do not contend, so the model predicts no slow-down"))
        threshold = model.latency_threshold(ratio)
        quota = "no quota" if a.quota_ms is None else f"its own {a.quota_ms:g} ms quota"
        return Derivation((round(threshold, 3),), (
            f"Model: each pod = {a.describe()}, within {quota}. Apart, a burst runs on min(threads, CPUs) = "
            f"{a.queues} CPUs: {apart:.3g} ms; together, {pods} x {a.threads} busy threads share {a.cpus} CPUs, "
            f"{model.overlap_rate(a, pods, True):.3g} per pod: {together:.3g} ms; r = {ratio:.3g}, which no per-pod "
            f"quota predicts. Threshold (r + 2) / 3 = {threshold:.3g} (F1's allowance)."
        ))

    return derive


def quota_alone(variant: str):
    """'Not throttled': the pods' quotas alone explain no slow-down (an absolute bound)."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, variant, X4)
        pods = _pods(evidence, variant)
        throttled = float(np.mean(model.overlap_burst(a, pods, True).throttled_periods))
        if throttled > 0:
            raise Unmet("bursts within their quotas", f"{a.describe()}: the model throttles each pod's burst "
                                                      f"({throttled:.3g} periods per round) even together")
        return Derivation((0.5,), (
            f"Model: each pod's {a.cpu_ms:g} ms of CPU fit in its {a.quota_ms:g} ms quota even at "
            f"{model.overlap_rate(a, pods, True):.3g} CPUs: 0 throttled periods per round. Absolute bound: half a "
            "period per round (most rounds unthrottled): the slow-down is contention, not throttling."
        ))

    return derive


# --------------------------------------------------------------------------
# F16: steady arrivals near the limit (X5)


def _steady(evidence: Evidence, variant: str) -> model.SteadyArm:
    return model.steady_arm(evidence.spec(X5, variant), evidence.period_ms(X5, variant))


def designed_use(variant: str):
    """A premise: the service used about the designed share of its limit (rps x CPU per request)."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = _steady(evidence, variant)
        cores = a.use * a.limit_milli / 1000
        return Derivation((round(cores / USE_BAND, 4), round(cores * USE_BAND, 4)), (
            f"The design: {variant} = {a.describe()}, {cores:.3g} CPU on average (the CPU per request as the "
            f"profile states it). Band x/÷ {USE_BAND:g} (F6's premise); a premise, it cannot contradict the finding."
        ))

    return derive


def steady_share(variant: str, loud: str, quiet: bool):
    """The throttled share of active periods: below a quarter (``quiet``) or above half of the loud arm's model share."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = _steady(evidence, variant), _steady(evidence, loud)
        share = b.throttled_share()
        bound = share * (QUIET_SHARE if quiet else LOUD_SHARE)
        return Derivation((round(bound, 4),), (
            f"Model: a period throttles when its Poisson arrivals need more than the quota; {loud} = "
            f"{b.describe()}: P(N > {b.fits}) / P(N >= 1) = {share:.3g} of active periods. {variant} = "
            f"{a.describe()}: {a.throttled_share():.3g}. "
            + (f"'Stays rare': an absolute bound, a quarter of the {loud} share (F6's bound for 'not throttled'), "
               f"{bound:.3g}." if quiet else f"'Bends near the limit': above half of it, {bound:.3g}.")
        ))

    return derive


def bends(quiet: str, loud: str) -> Requirement:
    """The model must tell the two arms apart: the loud arm's share above 4x the quiet arm's."""

    def test(evidence: Evidence) -> str | None:
        a, b = _steady(evidence, quiet), _steady(evidence, loud)
        if b.throttled_share() > a.throttled_share() / QUIET_SHARE:
            return None
        return (f"the model gives {loud} {b.throttled_share():.3g} and {quiet} {a.throttled_share():.3g} of active "
                f"periods throttled: no bound a quarter of the first lies above the second")

    return Requirement("a bend the model can show", test)


# --------------------------------------------------------------------------
# F17: GOMAXPROCS 2 against 1 (X6)


def two_threads(variants: tuple[str, ...]) -> Requirement:
    """GOMAXPROCS 2 against 1 differs in run queues only when the service's node has two CPUs (the load
    generator's own header, pinned to its CPU, does not count)."""

    def test(evidence: Evidence) -> str | None:
        h = evidence.headers[evidence.headers["experiment"] == X6]
        if "command" in h.columns:
            h = h[h["command"] == "serve"]
        cpus = set(h["num_cpu"].dropna().astype(int))
        if cpus and min(cpus) >= 2:
            return None
        seen = ", ".join(map(str, sorted(cpus))) or "unknown"
        return (f"X6's services saw num_cpu = {seen}: two threads share one CPU like one thread does (needs a "
                f"node with 2 CPUs; variants {', '.join(variants)})")

    return Requirement("two CPUs for two threads", test)


def same_throughput(variant: str, baseline: str):
    def derive(evidence: Evidence, check: Check) -> Derivation:
        spec = evidence.spec(X6, variant)
        limit = spec.milli("limit")
        if limit is None:
            raise Unmet("a limit", f"{variant} has no limit: nothing caps both arms alike")
        per_request = (spec.work_us or 0) / 1000 * model.CPU_PER_WORK
        cap = limit / per_request
        return Derivation((round(1 / SAME_BAND, 3), SAME_BAND), (
            f"Model: a closed loop keeps the service saturated, so both arms are capped by the quota: "
            f"limit {format_cpu(limit)} / {per_request:.3g} ms per request = {cap:.3g} req/s whatever GOMAXPROCS is (ratio "
            f"1). Band x/÷ {SAME_BAND:g}; the whole interval must lie inside it."
        ))

    return derive


# --------------------------------------------------------------------------
# the claims (docs/EXPERIMENTS.md, as written before the data)

FINDINGS: tuple[Finding, ...] = tuple(cite(finding) for finding in (
    Finding(
        id="F12",
        claim="A burst that fits in quota + budget after an idle interval is not throttled: its completion time "
              "falls back to the unlimited one, and nr_bursts / burst_time count the borrowed CPU; a budget too "
              "small for the burst shortens the wait only by what it lends.",
        checks=(
            Check(label="p50_wall_ms budget-full / budget0", kind="ratio", experiment=X1, metric="p50_wall_ms",
                  variant="budget-full", baseline="budget0", relation="<", scale="log",
                  derive=budget_speedup("budget-full", "budget0"),
                  why="Completion with a budget of the whole quota against none."),
            Check(label="p50_wall_ms budget-full / nolimit", kind="ratio", experiment=X1, metric="p50_wall_ms",
                  variant="budget-full", baseline="nolimit", relation="within", scale="log",
                  derive=back_to_unlimited("budget-full"),
                  why="A burst within quota + budget finishes as without a limit."),
            Check(label="throttled_per_round budget-full", kind="level", experiment=X1, metric="throttled_per_round",
                  variant="budget-full", baseline=None, relation="<", scale="linear",
                  derive=not_throttled("budget-full", "budget0"),
                  why="Throttled periods per round after the first: an absolute bound for 'not throttled'."),
            Check(label="bursts_per_round budget-full", kind="level", experiment=X1, metric="bursts_per_round",
                  variant="budget-full", baseline=None, relation=">", scale="linear",
                  derive=counted_bursts("budget-full", "count"),
                  why="cpu.stat nr_bursts over the run, per round: the kernel counts the periods over quota."),
            Check(label="burst_ms_per_round budget-full", kind="level", experiment=X1, metric="burst_ms_per_round",
                  variant="budget-full", baseline=None, relation=">", scale="linear",
                  derive=counted_bursts("budget-full", "time"),
                  why="cpu.stat burst_time (v1) / burst_usec (v2) over the run, per round: the CPU borrowed."),
            Check(label="p50_wall_ms budget-half / budget0", kind="ratio", experiment=X1, metric="p50_wall_ms",
                  variant="budget-half", baseline="budget0", relation="<", scale="log",
                  derive=budget_speedup("budget-half", "budget0"), decisive=False,
                  why="A budget too small for the burst still shortens it by what it lends (supporting)."),
        ),
    ),
    Finding(
        id="F13",
        claim="A shorter CFS period shortens each throttled pause but multiplies them: a burst larger than its "
              "quota completes later, towards CPU / limit, and nr_throttled rises about as CPU / quota.",
        checks=(
            Check(label="p50_wall_ms period20 / period100", kind="ratio", experiment=X2, metric="p50_wall_ms",
                  variant="period20", baseline="period100", relation=">", scale="log",
                  derive=slower_with_shorter_period("period20", "period100"),
                  why="Completion at a 20 ms period against the default 100 ms."),
            Check(label="p50_wall_ms period5 / period100", kind="ratio", experiment=X2, metric="p50_wall_ms",
                  variant="period5", baseline="period100", relation=">", scale="log",
                  derive=slower_with_shorter_period("period5", "period100"),
                  why="Completion at a 5 ms period against the default 100 ms."),
            Check(label="throttled_per_round period5 / period100", kind="ratio", experiment=X2,
                  metric="throttled_per_round", variant="period5", baseline="period100", relation=">",
                  scale="mean-ratio", derive=more_throttles("period5", "period100"),
                  why="Throttled periods per round after the first."),
            Check(label="pause per throttle period5 / period100", kind="ratio", experiment=X2,
                  metric="pause_per_throttle", variant="period5", baseline="period100", relation="<", scale="log",
                  derive=shorter_pauses("period5", "period100"), values=pause_per_throttle(X2), decisive=False,
                  why="Per run: extra wall ms per round (mean wall minus the model's unthrottled wall) per "
                      "throttled period (supporting)."),
        ),
    ),
    Finding(
        id="F14",
        claim="Throttled time is summed over the CPU run queues on which the group was throttled, not over its "
              "threads: with 8 threads it is about one pause per round on one CPU and between one and two on "
              "two CPUs, never eight.",
        checks=(
            Check(label="throttled_ms_per_round / extra wall cpus1", kind="level", experiment=X3,
                  metric="throttled_per_extra_wall", variant="cpus1", baseline=None, relation="within", scale="log",
                  derive=per_run_queue("cpus1"), values=throttled_per_extra_wall(X3),
                  why="Per run: throttled ms per round (rounds after the first) over the extra wall ms per round "
                      "(mean wall minus the model's unthrottled wall), on a cpuset of one CPU."),
            Check(label="throttled_ms_per_round / extra wall cpus2", kind="level", experiment=X3,
                  metric="throttled_per_extra_wall", variant="cpus2", baseline=None, relation="within", scale="log",
                  derive=per_run_queue("cpus2"), values=throttled_per_extra_wall(X3),
                  requirements=(two_cpus("cpus2"),),
                  why="The same on a cpuset of two CPUs."),
        ),
    ),
    Finding(
        id="F15",
        claim="Synchronized bursts of pods that each fit their own quota contend for the node's CPUs: each takes "
              "about (sum of bursts) / CPUs instead of its own CPU / run queues, which no per-pod quota predicts.",
        checks=(
            Check(label="p50_wall_ms synchronized / staggered", kind="ratio", experiment=X4, metric="p50_wall_ms",
                  variant="synchronized", baseline="staggered", relation=">", scale="log",
                  derive=contention("synchronized", "staggered"),
                  why="Per run: the mean over the pods of each pod's median round after the first."),
            Check(label="throttled_per_round synchronized", kind="level", experiment=X4,
                  metric="throttled_per_round", variant="synchronized", baseline=None, relation="<", scale="linear",
                  derive=quota_alone("synchronized"), decisive=False,
                  why="Throttled periods per round, mean over the pods (supporting)."),
        ),
    ),
    Finding(
        id="F16",
        claim="Without clumps, throttling stays rare until average use nears the limit; it bends where Poisson "
              "bunching of one period exceeds the quota.",
        checks=(
            Check(label="avg_cores use30", kind="level", experiment=X5, metric="avg_cores", variant="use30",
                  baseline=None, relation="within", scale="log", decisive=False, derive=designed_use("use30"),
                  why="The service's CPU over the window (/stats): the design holds (premise)."),
            Check(label="avg_cores use90", kind="level", experiment=X5, metric="avg_cores", variant="use90",
                  baseline=None, relation="within", scale="log", decisive=False, derive=designed_use("use90"),
                  why="The service's CPU over the window (/stats): the design holds (premise)."),
            Check(label="throttled_ratio use30", kind="level", experiment=X5, metric="throttled_ratio",
                  variant="use30", baseline=None, relation="<", scale="logit",
                  derive=steady_share("use30", "use90", quiet=True), requirements=(bends("use30", "use90"),),
                  why="Steady arrivals at 30% of the limit: throttled periods / active periods."),
            Check(label="throttled_ratio use90", kind="level", experiment=X5, metric="throttled_ratio",
                  variant="use90", baseline=None, relation=">", scale="logit",
                  derive=steady_share("use90", "use90", quiet=False), requirements=(bends("use30", "use90"),),
                  why="Steady arrivals at 90% of the limit: throttled periods / active periods."),
            Check(label="work {q} use90 / use30", kind="ratio", experiment=X5, metric="work_{q}_ms", variant="use90",
                  baseline="use30", relation=">", threshold=(1.0,), scale="log", quantile_of="work", decisive=False,
                  why=f"{LATENCY} The claim's direction: latency rises where throttling starts (supporting)."),
        ),
    ),
    Finding(
        id="F17",
        claim="Go's minimum of 2 threads under a limit at or below 1.5 CPUs costs neither latency (open-loop clumps "
              "finish sooner on 2 threads while a clump fits the quota) nor closed-loop throughput (both capped by "
              "the quota).",
        checks=(
            Check(label="work {q} clumped-500m-g1 / clumped-500m-g2", kind="ratio", experiment=X6,
                  metric="work_{q}_ms", variant="clumped-500m-g1", baseline="clumped-500m-g2", relation=">",
                  scale="log", quantile_of="work", derive=latency_rise(X6, "clumped-500m-g1", "clumped-500m-g2"),
                  requirements=(two_threads(("clumped-500m-g1", "clumped-500m-g2")),),
                  why=f"{LATENCY} One thread serves a clump serially; Go's default two in parallel."),
            Check(label="throughput_rps closed-500m-g2 / closed-500m-g1", kind="ratio", experiment=X6,
                  metric="throughput_rps", variant="closed-500m-g2", baseline="closed-500m-g1", relation="within",
                  scale="log", derive=same_throughput("closed-500m-g2", "closed-500m-g1"),
                  requirements=(two_threads(("closed-500m-g2", "closed-500m-g1")),),
                  why="Closed loop, 16 workers: successful /work requests per second."),
        ),
    ),
))
