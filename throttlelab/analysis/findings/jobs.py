"""The jobs' claims F1-F5 (SPEC §5) as data: E2a's burst under limits, E3's GOMAXPROCS.

Every threshold is derived from the CFS model of :mod:`.predictions` and the variant's own
parameters (threads, work per thread, limit; the node's CPUs and period from the headers), and
its derivation is written beside the check. Evaluation is :mod:`.engine`'s; the lab's figures
each claim cites are :mod:`throttlelab.model.reference`'s (filled in by ``cite``).
"""

from __future__ import annotations

import math

import numpy as np

from throttlelab.analysis.findings import predictions as model
from throttlelab.analysis.findings.engine import Check, Derivation, Evidence, Finding, Requirement, Unmet, cite
from throttlelab.model.quantities import go_default_gomaxprocs

E2A = "E2a"
#: Band of an equivalence ("within") check of completion times: x/÷ 1.25, symmetric on the log scale.
SAME_BAND = 1.25
#: "Not faster": the fewer-threads burst may finish at most 10% sooner (a non-inferiority margin).
NOT_FASTER = 1.1
#: Counting at the edges of a round: half a period either way.
PERIOD_SLACK = 0.5


def arm(evidence: Evidence, variant: str, experiment: str = E2A) -> model.BurstArm:
    """A burst variant as the model sees it, on the node its processes saw."""
    spec = evidence.spec(experiment, variant)
    return model.burst_arm(spec, evidence.num_cpu(experiment, variant), evidence.period_ms(experiment, variant))


def _throttles(a: model.BurstArm, variant: str) -> None:
    if a.quota_ms is None or a.cpu_ms <= a.quota_ms:
        quota = "no quota" if a.quota_ms is None else f"the {a.quota_ms:g} ms quota"
        raise Unmet("a burst larger than its quota",
                    f"{variant}: {a.describe()}: {a.cpu_ms:g} ms of CPU fit in {quota}, so the model predicts "
                    "no throttling")


# --------------------------------------------------------------------------
# thresholds (derived from the model and the variant's parameters)


def slowdown(variant: str, baseline: str = "nolimit"):
    """F1: the median completion ratio the model predicts, with the overhead allowance."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, variant), arm(evidence, baseline)
        _throttles(a, variant)
        slow, free = a.median_wall_ms(), b.median_wall_ms()
        ratio = slow / free
        threshold = model.latency_threshold(ratio)
        return Derivation((round(threshold, 3),), (
            f"Model: {variant} = {a.describe()}. Over the burst's start phases (the interval is never a multiple "
            f"of the period) its median wall time is {slow:.3g} ms against {free:.3g} ms without a limit: "
            f"{ratio:.3g}x. Threshold (r + 2) / 3 = {threshold:.3g}: the same ratio once a fixed overhead of up to "
            f"twice the unthrottled burst is added to both arms (the lab's was 0.7x: 34.3 ms for its 20 ms burst)."
        ))

    return derive


def unchanged(variant: str):
    """F1: a burst within its quota is never throttled (ratio 1); an equivalence band around it."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, variant)
        if a.quota_ms is not None and a.cpu_ms > a.quota_ms:
            raise Unmet("a burst within its quota", f"{variant}: {a.describe()}: {a.cpu_ms:g} ms of CPU exceed "
                                                    f"the {a.quota_ms:g} ms quota, so the model predicts a slow-down")
        quota = "no quota" if a.quota_ms is None else f"the {a.quota_ms:g} ms quota"
        return Derivation((round(1 / SAME_BAND, 3), SAME_BAND), (
            f"Model: {variant} = {a.describe()}: {a.cpu_ms:g} ms of CPU fit in {quota} at every start phase, so it "
            f"is never throttled and the ratio is 1. Band x/÷ {SAME_BAND:g} (symmetric on the log scale); the whole "
            "interval must lie inside it (an equivalence test, no p-value)."
        ))

    return derive


def sums_run_queues(variant: str):
    """F2: throttled time per round lies between one and all of the run queues' extra wall time per round."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, variant)
        _throttles(a, variant)
        wall = float(np.mean(a.burst().wall_ms))
        fewest, most = a.counted_queues
        low, high = round(fewest / SAME_BAND, 3), round(most * SAME_BAND, 3)
        return Derivation((low, high), (
            f"SPEC §1: the kernel adds throttled time per CPU run queue on which the group was throttled. Model: "
            f"{variant} = {a.describe()}: its waits (mean wall {wall:.3g} ms against {a.free_wall_ms:g} ms "
            f"unthrottled) are counted on each of the run queues that was throttled, at least {fewest} and at most "
            f"min(threads, CPUs) = {most} (how many depends on where the scheduler placed the threads, which "
            f"the model does not fix), so throttled ms per round / extra wall ms per round lies in "
            f"[{fewest}, {most}]. Band [{fewest}/{SAME_BAND:g}, {most} x {SAME_BAND:g}] (the equivalence margin at "
            "both ends); the whole "
            "interval must lie inside it. A value above the band would mean time counted on queues the group "
            "never had; below it, less than one clock."
        ))

    return derive


def exceeds_wall(variant: str):
    """F2: throttled time per round above the wall time needs two or more run queues."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, variant)
        _throttles(a, variant)
        wall = float(np.mean(a.burst().wall_ms))
        predicted = a.throttled_ms() / wall
        if a.queues < 2 or predicted <= 1:
            raise Unmet("two or more run queues", (
                f"{variant} keeps min({a.threads} threads, {a.cpus} CPUs) = {a.queues} run queue(s) busy: the model's "
                f"throttled time per round is {a.throttled_ms():.3g} ms against {wall:.3g} ms of wall time "
                f"({predicted:.2g}x), so it cannot exceed the wall time here"))
        return Derivation((1.0,), (
            f"The claim itself: throttled time above wall time, impossible for one clock. Model: {a.queues} run queues "
            f"x {float(np.mean(a.burst().pause_ms)):.3g} ms of waiting = {a.throttled_ms():.3g} ms per round against "
            f"{wall:.3g} ms of wall time ({predicted:.3g}x)."
        ))

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
            raise Unmet("rounds longer than the counted periods", (
                f"a round of {spec.interval_ms:g} ms spans {wall_periods:.3g} periods, inside the band "
                f"[{band[0]:g}, {band[1]:g}]: counting every period would look the same"))
        return Derivation(band, (
            f"Model: {variant} = {a.describe()}: a burst of {float(np.median(burst.wall_ms)):.3g} ms touches "
            f"{low - 1} to {high - 1} period(s) depending on where it starts, and the kernel counts one more: the "
            "period timer fires once more after the group went idle (nr_periods is incremented before the idle "
            f"check). So {low} to {high} periods per round, +/- {PERIOD_SLACK:g} at the edges; every wall-clock "
            f"period would give {wall_periods:.3g} per round (interval {spec.interval_ms:g} ms)."
        ))

    return derive


def fewer_throttled(variant: str, baseline: str):
    """F4: the model's ratio of throttled time per round (fewer run queues -> fewer waits counted)."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, variant), arm(evidence, baseline)
        _throttles(b, baseline)
        ratio = a.throttled_ms() / b.throttled_ms()
        threshold = model.rate_threshold(ratio)
        return Derivation((round(threshold, 3),), (
            f"Model: {variant} = {a.describe()}: {a.throttled_ms():.3g} ms throttled per round; {baseline} = "
            f"{b.describe()}: {b.throttled_ms():.3g} ms; ratio {ratio:.3g}. Threshold sqrt(r) = {threshold:.3g}: half "
            "the predicted reduction on the log scale. A ratio of mean throttled times (Fieller's interval): a run "
            "without any throttling is 0, which no geometric mean can hold."
        ))

    return derive


def not_faster(variant: str, baseline: str):
    """F4: "not faster" as a non-inferiority margin, with the model's ratio beside it."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = arm(evidence, variant), arm(evidence, baseline)
        ratio = a.median_wall_ms() / b.median_wall_ms()
        return Derivation((round(1 / NOT_FASTER, 3),), (
            f"'Not faster': the fewer-threads burst may finish at most {100 * (NOT_FASTER - 1):.0f}% sooner "
            f"(threshold 1/{NOT_FASTER:g}). Model: median wall {a.median_wall_ms():.3g} ms ({variant}) against "
            f"{b.median_wall_ms():.3g} ms ({baseline}): {ratio:.3g}x, the same CPU on fewer run queues."
        ))

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
                defaults.append((spec.limit, limit, go_default_gomaxprocs("1.24", limit, n_cpu),
                                 go_default_gomaxprocs("1.25", limit, n_cpu)))
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


def throttled_per_extra_wall(variant: str):
    """F2: each run's throttled ms per round / (mean wall - the model's unthrottled wall)."""

    def values(evidence: Evidence, name: str) -> np.ndarray:
        a = arm(evidence, name)
        per_round = evidence.values(E2A, name, "throttled_ms_per_round")
        extra = evidence.values(E2A, name, "mean_wall_ms") - a.free_wall_ms
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(extra > 0, per_round / extra, np.nan)

    return values


def throttled_over_wall(evidence: Evidence, name: str) -> np.ndarray:
    """F2: each run's throttled ms per round / mean wall ms per round (rounds after the first)."""
    return evidence.values(E2A, name, "throttled_ms_per_round") / evidence.values(E2A, name, "mean_wall_ms")


# --------------------------------------------------------------------------
# the claims (SPEC §5)

FINDINGS: tuple[Finding, ...] = tuple(cite(finding) for finding in (
    Finding(
        id="F1",
        claim="Same average CPU, very different completion time: the same burst takes much longer under "
              "limit 1 and 500m than without a limit, while limit 2 changes nothing.",
        checks=(
            Check(label="p50_wall_ms limit1 / nolimit", kind="ratio", experiment=E2A, metric="p50_wall_ms",
                  variant="limit1", baseline="nolimit", relation=">", scale="log", derive=slowdown("limit1"),
                  why="Completion under a limit from the CFS model."),
            Check(label="p50_wall_ms limit500m / nolimit", kind="ratio", experiment=E2A, metric="p50_wall_ms",
                  variant="limit500m", baseline="nolimit", relation=">", scale="log", derive=slowdown("limit500m"),
                  why="Completion under a limit from the CFS model."),
            Check(label="p50_wall_ms limit2 / nolimit", kind="ratio", experiment=E2A, metric="p50_wall_ms",
                  variant="limit2", baseline="nolimit", relation="within", scale="log", derive=unchanged("limit2"),
                  why="A limit the burst fits in changes nothing."),
        ),
    ),
    Finding(
        id="F2",
        claim="Throttled time is summed over the CPU run queues on which the group was throttled, so per round "
              "it can exceed the round's wall time.",
        checks=(
            Check(label="throttled_ms_per_round / extra wall limit500m", kind="level",
                  experiment=E2A, metric="throttled_per_extra_wall", variant="limit500m", baseline=None,
                  relation="within", scale="log", derive=sums_run_queues("limit500m"),
                  values=throttled_per_extra_wall("limit500m"),
                  why="What the kernel sums (SPEC §1), per run: throttled ms per round (rounds after the first) "
                      "over the extra wall ms per round (mean wall minus the model's unthrottled wall): one "
                      "run queue's waiting counts 1, each further throttled run queue adds up to 1 more."),
            Check(label="throttled_ms_per_round / mean_wall_ms limit500m", kind="level", experiment=E2A,
                  metric="throttled_over_wall", variant="limit500m", baseline=None, relation=">", scale="log",
                  derive=exceeds_wall("limit500m"), values=throttled_over_wall,
                  why="The claim's consequence, per run: throttled ms per round over the wall ms per round."),
        ),
    ),
    Finding(
        id="F3",
        claim="nr_periods counts only the periods in which the cgroup ran (and the one after), not every "
              "period of wall time.",
        checks=(
            Check(label="periods_per_round limit2", kind="level", experiment=E2A, metric="periods_per_round",
                  variant="limit2", baseline=None, relation="within", scale="linear",
                  derive=counted_periods("limit2"),
                  why="nr_periods over the rounds, per round."),
        ),
    ),
    Finding(
        id="F4",
        claim="Fewer threads means fewer throttles but not a faster burst: at limit 1, the same CPU on fewer "
              "threads is throttled less than the many-thread burst, yet finishes no sooner.",
        checks=(
            Check(label="throttled_ms limit1-2threads / limit1", kind="ratio", experiment=E2A,
                  metric="throttled_ms", variant="limit1-2threads", baseline="limit1", relation="<",
                  scale="mean-ratio", derive=fewer_throttled("limit1-2threads", "limit1"),
                  requirements=(parallel_threads_differ(E2A, "limit1-2threads", "limit1"),),
                  why="Fewer threads keep fewer run queues busy when the quota runs out."),
            Check(label="p50_wall_ms limit1-2threads / limit1", kind="ratio", experiment=E2A,
                  metric="p50_wall_ms", variant="limit1-2threads", baseline="limit1", relation=">", scale="log",
                  derive=not_faster("limit1-2threads", "limit1"),
                  why="The same CPU on fewer threads takes as long or longer."),
        ),
        not_covered=("E2b",),
    ),
    Finding(
        id="F5",
        claim="The default GOMAXPROCS follows the go line of go.mod (1.25: the CPU limit), not the toolchain "
              "that built the binary.",
        checks=(
            Check(label="gomaxprocs = rule", kind="agreement", experiment="E3", metric="gomaxprocs", variant="*",
                  baseline="expected_gomaxprocs", relation="within", threshold=(1.0, 1.0), scale="linear",
                  requirements=(go_line_can_change_default("E3"),),
                  why="GOMAXPROCS is read back, not measured: one variant off the rule contradicts the claim. "
                      "The rule: GOMAXPROCS env wins; go >= 1.25 line: max(2, ceil(limit)) capped at num_cpu; "
                      "older line or GODEBUG=containermaxprocs=0: num_cpu."),
        ),
    ),
))
