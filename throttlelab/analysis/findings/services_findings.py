"""The service experiments' claims as data: the lab's F6, F7, F9, F10, F11 (docs/LAB.md §5) and ours F16 (X5,
steady arrivals near the limit) and F17 (X6, GOMAXPROCS 2 against 1), each of ours the sentence written in
docs/EXPERIMENTS.md before any run.

Variant names are the profiles' (config/profiles/*.yaml), the same in every profile; the
numbers behind them are scaled per profile, so every threshold is derived from the service
model of :mod:`.predictions` and the variant's own parameters (rate, clump, work, limit,
request, the node's CPUs) and its derivation is written beside the check. Latency checks
compare the highest quantile the independent clumps of the compared variants' windows support
(p99 needs 368 clumps per run, p90 36, p75 13, p50 6), or with fewer clumps the maximum over them,
and name it in place of ``{q}`` in their labels (engine.check_window). Evaluation is
:mod:`.engine`'s.
"""

from __future__ import annotations

import math

import numpy as np

from throttlelab.analysis.findings import predictions
from throttlelab.analysis.findings.engine import (
    Check,
    Derivation,
    Evidence,
    Finding,
    Relation,
    Requirement,
    Unmet,
    check_window,
    cite,
)
from throttlelab.analysis.findings.predictions import SAME_BAND
from throttlelab.analysis.metrics.services_metrics import WindowQuantile
from throttlelab.model.quantities import format_cpu
from throttlelab.model.reference import TALK_EXHAUST_MS
from throttlelab.model.variants import (
    E2B_CLUMPED_LIMIT,
    E2B_CLUMPED_NOLIMIT,
    E2B_STEADY_LIMIT,
    E6_LIMIT,
    E7_ONE_DOUBLE,
    E7_ONE_LIMIT,
    E7_TWO_HALF,
    E7_TWO_LIMIT,
    E8_BUSY_LIM,
    E8_BUSY_LIM2X,
    E8_BUSY_LIM2X_REQ_FULL,
    E8_IDLE_LIM2X,
    S2_THREADS_NODE,
    S2_THREADS_ONE,
    X5_USE30,
    X5_USE90,
    X6_CLOSED_500M_G1,
    X6_CLOSED_500M_G2,
    X6_CLUMPED_500M_G1,
    X6_CLUMPED_500M_G2,
)

X5, X6 = "X5", "X6"

#: An absolute bound for "not throttled": a quarter of the share of periods a clumped load of the same rate
#: must throttle by the model.
UNTHROTTLED_FRACTION = 0.25
#: "A large share of periods": half of what the model says a clumped load throttles at least.
THROTTLED_FRACTION = 0.5
#: "~30% average use": the claim's 30% of the limit, x/÷ 1.5.
AVERAGE_USE = 0.30
AVERAGE_USE_BAND = 1.5
#: The smallest predicted rise of a latency quantile worth a check (below it the model says nothing shows).
MIN_PREDICTED_RISE = 1.1


def arm(evidence: Evidence, experiment: str, variant: str) -> predictions.ServiceArm:
    return predictions.service_arm(evidence.spec(experiment, variant))


def _limit(a: predictions.ServiceArm) -> str:
    return "no limit" if a.limit_milli is None else f"limit {format_cpu(a.limit_milli)}"


def _describe(name: str, a: predictions.ServiceArm) -> str:
    quota = "" if a.quota_ms is None else f" (quota {a.quota_ms:g} ms per period)"
    return (
        f"{name}: clumps of {a.clump} x {a.cpu_per_request_ms:.3g} ms of CPU = {a.clump_cpu_ms:.3g} ms on "
        f"{a.rate:.3g} CPU, {_limit(a)}{quota}"
    )


def _over(window: WindowQuantile) -> str:
    """How the model gets what a window compares (:meth:`predictions.ServiceArm.window_latency`)."""
    if window.q is not None:
        return "Over the requests of a clump and the phases it may arrive at"
    return (
        f"Over {window.clumps} clumps at independent phases (the median over runs of their slowest request: a "
        f"clump's last request at the {0.5 ** (1 / window.clumps):.3g} quantile of the phases)"
    )


_CPU_NOTE = f"A request costs {predictions.CPU_PER_WORK:g}x its work in CPU (docs/LAB.md §4: 100 req/s of 5 ms work used ~0.6 CPU)."


# --------------------------------------------------------------------------
# thresholds


def throttled_share(experiment: str, variant: str):
    """F6: clumps that exceed the quota throttle at least one period each."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, experiment, variant)
        if not a.throttles():
            raise Unmet("a clump larger than the quota", f"{_describe(variant, a)}: the model never throttles it")
        least = a.clumps_per_period()
        threshold = least * THROTTLED_FRACTION
        return Derivation(
            (round(threshold, 4),),
            (
                f"Model: {_describe(variant, a)} > the quota, so every clump throttles at least one period: "
                f"{a.rps:g} req/s / {a.clump} = {a.rps / a.clump:g} clumps/s x {a.period_ms:g} ms = {least:.3g} of all "
                f"wall-clock periods, hence at least that share of the counted ones. Threshold: half of it "
                f"({threshold:.3g}), for clumps that start late in a period and escape. {_CPU_NOTE} A proportion of "
                "counts: per-run empirical logit, back-transformed."
            ),
            end="the lower end: one throttled period per clump (the fewest the model allows), halved",
        )

    return derive


def unthrottled_bound(experiment: str, variant: str, clumped: str | None = None):
    """F6, F9: an absolute bound for "not throttled" / "throttling looks fine"."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, experiment, variant)
        # the same rate in the clumps of the clumped arm (its parameters, not its measurements)
        reference = arm(evidence, experiment, clumped) if clumped and clumped in evidence.variants(experiment) else a
        share = reference.clumps_per_period()
        bound = share * UNTHROTTLED_FRACTION
        if a.quota_ms is None:
            raise Unmet("a limit", f"{variant} has no limit: nothing can be throttled")
        reach = a.rate * a.period_ms
        if reach <= a.quota_ms:
            why_zero = (
                f"it can run on {a.rate:.3g} CPU, {reach:.3g} ms per period, below its {a.quota_ms:g} ms "
                "quota: the model never throttles it"
            )
        else:
            # steady arrivals: a period throttles only when more requests land in it than the quota holds
            per_period = a.rps * a.period_ms / 1000
            fit = math.floor(a.quota_ms / a.cpu_per_request_ms / max(a.clump, 1))
            tail = predictions.poisson_tail(fit + 1, per_period / max(a.clump, 1))  # P(N > fit)
            if a.clump_cpu_ms > a.quota_ms:
                raise Unmet(
                    "a load that stays under the quota",
                    f"{_describe(variant, a)} exceeds the quota: the model throttles it",
                )
            why_zero = (
                f"a period throttles only when more than {fit} arrivals land in it (quota {a.quota_ms:g} ms "
                f"/ {a.clump_cpu_ms:.3g} ms), which a Poisson({per_period / max(a.clump, 1):.3g}) count "
                f"exceeds with probability {tail:.2g}"
            )
        return Derivation(
            (round(bound, 4),),
            (
                f"Model: {_describe(variant, a)}; {why_zero}. An absolute bound, not a comparison with another arm: "
                f"{UNTHROTTLED_FRACTION:g} x the {share:.3g} of periods a clumped load at this rate must throttle "
                f"= {bound:.3g}. 0 throttled periods in every run is a result once the runs reach the check's level "
                "(0.5^R at most its one-sided level) and the periods they pooled bound the share below it "
                f"(docs/STATISTICS.md §3). {_CPU_NOTE}"
            ),
            end="an absolute bound: a quarter of the share a clumped load at this rate must throttle at least",
        )

    return derive


def average_use(experiment: str, variant: str):
    """F6's premise: the load is ~30% of the limit."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = arm(evidence, experiment, variant)
        if a.limit_milli is None:
            raise Unmet("a limit", f"{variant} has no limit to use 30% of")
        limit = a.limit_milli / 1000
        centre = AVERAGE_USE * limit
        predicted = a.rps * a.cpu_per_request_ms / 1000
        return Derivation(
            (round(centre / AVERAGE_USE_BAND, 4), round(centre * AVERAGE_USE_BAND, 4)),
            (
                f"The claim's premise: ~{AVERAGE_USE:.0%} of the {limit:g}-CPU limit = {centre:.3g} cores, band x/÷ "
                f"{AVERAGE_USE_BAND:g}. Model: {a.rps:g} req/s x {a.cpu_per_request_ms:.3g} ms = {predicted:.3g} cores "
                f"({predicted / limit:.0%} of the limit). {_CPU_NOTE} A premise: when it fails the finding's checks "
                "are not testable here; undecided, they cannot decide; it never contradicts the claim."
            ),
            share_of=(limit, f"the {limit:g}-CPU limit"),
        )

    return derive


def latency_rise(experiment: str, variant: str, baseline: str):
    """F6, F9: the quantile ratio the service model predicts, with the overhead allowance."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        window = check_window(check, evidence)
        a, b = arm(evidence, experiment, variant), arm(evidence, experiment, baseline)
        qa, qb = a.window_latency(window.q, window.clumps), b.window_latency(window.q, window.clumps)
        ratio = qa / qb
        name = window.shown
        if (check.relation == ">" and ratio < MIN_PREDICTED_RISE) or (
            check.relation == "<" and ratio > 1 / MIN_PREDICTED_RISE
        ):
            raise Unmet(
                f"a predicted change at {name}",
                (
                    f"the model puts {name} of {variant} at {qa:.3g} ms against {qb:.3g} ms ({ratio:.3g}x): at this "
                    f"quantile the requests of a clump finish before the limit or the neighbor matters "
                    f"({_describe(variant, a)}; {_describe(baseline, b)})"
                ),
            )
        threshold = predictions.latency_threshold(ratio)
        form = "(r + 2) / 3" if ratio >= 1 else "3r / (1 + 2r)"
        return Derivation(
            (round(threshold, 3),),
            (
                f"Model: {_describe(variant, a)}; {_describe(baseline, b)}. {_over(window)}, {name} is {qa:.3g} ms "
                f"against {qb:.3g} ms: {ratio:.3g}x. Threshold {form} = "
                f"{threshold:.3g}: the same ratio once a fixed overhead of up to twice the faster arm's time is added "
                f"to both. {_CPU_NOTE}"
            ),
            end="the overhead at the upper end of its allowance (2x the faster arm): the ratio nearest 1 the model "
            "allows, least favourable to the claimed change",
        )

    return derive


def cpu_ratio(experiment: str, variant: str, baseline: str, same: bool = False):
    """F9: the CPU a service gets on a busy node is its weight's share (capped by its limit)."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        specs = {v: evidence.spec(experiment, v) for v in (variant, baseline)}
        got = {}
        for v, spec in specs.items():
            a = predictions.service_arm(spec)
            cap = math.inf if a.limit_milli is None else a.limit_milli / 1000
            if same and a.rate >= cap:
                raise Unmet(
                    "a share below the limit",
                    (
                        f"{v}'s weight buys {a.rate:.3g} CPU, at or above its limit {cap:g}: the limit, not the "
                        "weight, sets its CPU"
                    ),
                )
            got[v] = (min(a.rate, cap), predictions.node_share(spec))
        ratio = got[variant][0] / got[baseline][0]
        shares = "; ".join(
            f"{v}: pod weight share {share:.3g} of the node -> {cpu:.3g} CPU" for v, (cpu, share) in got.items()
        )
        if same:
            return Derivation(
                (round(1 / SAME_BAND, 3), SAME_BAND),
                (
                    f"Model (kubelet's pod weights, docs/LAB.md §2; the neighbor keeps the node busy): {shares}; the limit "
                    f"changes nothing while the weight's share stays below it (ratio {ratio:.3g}). Band x/÷ "
                    f"{SAME_BAND:g}; the whole interval must lie inside it."
                ),
                end="no free parameter (kubelet's weights); sqrt(r) or the equivalence margin",
            )
        threshold = predictions.rate_threshold(ratio)
        return Derivation(
            (round(threshold, 3),),
            (
                f"Model (kubelet's pod weights, docs/LAB.md §2): {shares}: {ratio:.3g}x. Threshold sqrt(r) = {threshold:.3g}: "
                "half the predicted change on the log scale."
            ),
            end="no free parameter (kubelet's weights); sqrt(r) or the equivalence margin",
        )

    return derive


def overstatement(experiment: str, variant: str):
    """F10: throttled time over the pause it caused = the run queues that were throttled (1 to q)."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        spec = evidence.spec(experiment, variant)
        a = predictions.burst_arm(spec, evidence.num_cpu(experiment, variant), evidence.period_ms(experiment, variant))
        if a.queues < 2:
            raise Unmet(
                "two or more run queues",
                (
                    f"the job keeps min(threads {a.threads}, num_cpu {a.cpus}) = 1 run queue busy: throttled time then "
                    "equals the pause and cannot overstate it"
                ),
            )
        fewest, most = a.counted_queues
        return Derivation(
            (float(fewest),),
            (
                f"docs/LAB.md §1: the throttled time is added per run queue on which the group was throttled. Model: "
                f"{a.describe()}: every pause is counted once per throttled run queue, at least {fewest} and at most "
                f"min(threads, CPUs) = {most} (how many depends on where the scheduler put the threads, which the "
                f"model does not fix; F2 measures it), so Δthrottled / the pause in the same window lies in "
                f"[{fewest}, {most}]. The claim is the overstatement itself: above 1 holds it, below 1 contradicts it "
                "(the threshold is the least favourable end, k = 1). "
                "Both sides cover the window between the two readings the scrapes returned (each round's wall minus "
                "the unlimited median round, for its part inside the window), compared on the log scale."
            ),
            end="the least favourable end of k in [1, min(threads, CPUs)], k = 1: the claim itself",
        )

    return derive


# --------------------------------------------------------------------------
# requirements that depend on the node


def threads_drain_quota_fast(experiment: str, variant: str, factor: float = 2.0) -> Requirement:
    """The many-threads arm must drain its quota about as fast as the talk's 16 threads did."""

    def test(evidence: Evidence) -> str | None:
        procs = evidence.values(experiment, variant, "gomaxprocs")
        limit = evidence.spec(experiment, variant).milli("limit")
        if len(procs) == 0 or np.isnan(procs).any() or limit is None:
            return None
        threads = int(np.min(procs))
        quota_ms = limit / 1000 * 100  # per 100 ms period
        drain = quota_ms / threads
        if drain <= factor * TALK_EXHAUST_MS:
            return None
        needed = math.ceil(quota_ms / (factor * TALK_EXHAUST_MS))
        return (
            f"GOMAXPROCS {threads} drains the {quota_ms:g} ms quota in {drain:.3g} ms of wall time per period; the "
            f"talk's 16 threads drained theirs in {TALK_EXHAUST_MS:.2f} ms, and the effect needs the quota to go in "
            f"at most {factor * TALK_EXHAUST_MS:.2g} ms, i.e. GOMAXPROCS (node CPUs) >= {needed}"
        )

    return Requirement("a quota drained within a few ms", test)


# --------------------------------------------------------------------------
# F16: steady arrivals near the limit (X5)


def _steady(evidence: Evidence, variant: str) -> predictions.SteadyArm:
    return predictions.steady_arm(evidence.spec(X5, variant), evidence.period_ms(X5, variant))


def _cost_source(evidence: Evidence, variant: str) -> str:
    """Where an arm's CPU per request came from: the calibration step's pilot (its rate was set from it before
    the measured runs) or the profile's statement (a variant with a fixed rate, or no pilot ran)."""
    spec = evidence.spec(X5, variant)
    if spec.target_use is None:
        return "the CPU per request as the profile states it"
    return (
        f"designed at {spec.target_use:.0%} of the limit: the rate from the calibration step's CPU per request, "
        "fixed before the measured runs (each raw log's meta.calibration says whether a pilot ran)"
    )


#: "90% of the limit": the design's direction (docs/STATISTICS.md §5): at least 80% of the limit, and below it (a
#: service cannot use more than its limit on average).
NEAR_LIMIT = (0.8, 1.0)


def designed_use(variant: str, near_limit: bool = False):
    """A premise: the service used about the designed share of its limit (rps x CPU per request). For an arm
    meant to run near the limit the band is one-sided, [0.8, 1.0) of the limit (:data:`NEAR_LIMIT`)."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a = _steady(evidence, variant)
        limit = a.limit_milli / 1000
        cores = a.use * limit
        if near_limit:
            band = (round(NEAR_LIMIT[0] * limit, 4), round(NEAR_LIMIT[1] * limit, 4))
            how = (
                f"Band [{NEAR_LIMIT[0]:.0%}, {NEAR_LIMIT[1]:.0%}) of the limit = [{band[0]:.3g}, {band[1]:.3g}) "
                "cores, one-sided as the design is ('near the limit': below 80% the arm does not test the bend)"
            )
        else:
            band = (round(cores / AVERAGE_USE_BAND, 4), round(cores * AVERAGE_USE_BAND, 4))
            how = f"Band x/÷ {AVERAGE_USE_BAND:g} (F6's premise)"
        return Derivation(
            band,
            (
                f"The design: {variant} = {a.describe()}, {cores:.3g} CPU on average ({_cost_source(evidence, variant)}). "
                f"{how}. A premise: when it fails, the checks it gates are not testable here "
                "(never contradicted); undecided, they cannot decide."
            ),
            share_of=(limit, f"the {format_cpu(a.limit_milli)} limit"),
        )

    return derive


def steady_share(variant: str, loud: str, quiet: bool):
    """The throttled share of active periods: below a quarter (``quiet``) or above half of the loud arm's model share."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        a, b = _steady(evidence, variant), _steady(evidence, loud)
        share = b.throttled_share()
        bound = share * (UNTHROTTLED_FRACTION if quiet else THROTTLED_FRACTION)
        return Derivation(
            (round(bound, 4),),
            (
                f"Model: a period throttles when its Poisson arrivals need more than the quota; {loud} = "
                f"{b.describe()}: P(N > {b.fits}) / P(N >= 1) = {share:.3g} of active periods. {variant} = "
                f"{a.describe()}: {a.throttled_share():.3g}. "
                + (
                    f"'Stays rare': an absolute bound, a quarter of the {loud} share (F6's bound for 'not throttled'), "
                    f"{bound:.3g}."
                    if quiet
                    else f"'Bends near the limit': above half of it, {bound:.3g}."
                )
            ),
            end="the design's own use (the premise checks that it was reached); no free parameter",
        )

    return derive


def bends(quiet: str, loud: str) -> Requirement:
    """The model must tell the two arms apart: the loud arm's share above 4x the quiet arm's."""

    def test(evidence: Evidence) -> str | None:
        a, b = _steady(evidence, quiet), _steady(evidence, loud)
        if b.throttled_share() > a.throttled_share() / UNTHROTTLED_FRACTION:
            return None
        return (
            f"the model gives {loud} {b.throttled_share():.3g} and {quiet} {a.throttled_share():.3g} of active "
            f"periods throttled: no bound a quarter of the first lies above the second"
        )

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
        return (
            f"X6's services saw num_cpu = {seen}: two threads share one CPU like one thread does (needs a "
            f"node with 2 CPUs; variants {', '.join(variants)})"
        )

    return Requirement("two CPUs for two threads", test)


#: "Costs nothing": Go's two threads may be at most 10% worse than one (a non-inferiority margin).
NO_COST = 1.1
#: The share of the service's second CPU the load generator may take while a clump is served, where it runs on
#: that CPU (X6 on a 2-CPU node, load_cpus inside node_cpus): CFS gives two runnable tasks of equal weight half a
#: CPU each, so at most half while the generator is busy throughout the clump (the end least favourable to the
#: two threads' gain).
GENERATOR_SHARE = 0.5


def _cpu_set(cpus: str | None) -> set[int]:
    """The CPUs a cpuset list names ("0-1" -> {0, 1}); empty when unset."""
    out: set[int] = set()
    for part in str(cpus or "").split(","):
        low, _, high = part.strip().partition("-")
        if low:
            out.update(range(int(low), int(high or low) + 1))
    return out


def no_cost(variant: str, baseline: str, what: str):
    """F17: "costs nothing" as non-inferiority: g2 no more than :data:`NO_COST` worse than g1."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        if what == "latency":
            bound = NO_COST
            how = f"{variant}'s {check_window(check, evidence).shown} at most {NO_COST:g}x {baseline}'s (10% slower)"
        else:
            bound = round(1 / NO_COST, 3)
            how = f"{variant}'s throughput at least 1/{NO_COST:g} = {bound:g} of {baseline}'s (10% lower)"
        return Derivation(
            (bound,),
            (
                f"'Costs neither latency nor throughput' is a non-inferiority claim (docs/STATISTICS.md §5): {how}. Reproduced "
                "when the whole interval lies on the no-cost side of the margin, contradicted when it lies wholly "
                "beyond it; never a demand that two threads be faster (that is the supporting check's magnitude)."
            ),
            end="a non-inferiority margin (10%) fixed by the claim's wording, not a model end",
        )

    return derive


def two_threads_gain(variant: str, baseline: str):
    """F17's magnitude (supporting): one thread's clump latency over two threads', with the load generator's share
    of the second CPU (:data:`GENERATOR_SHARE`) taken from the two-thread arm where they share it."""

    def derive(evidence: Evidence, check: Check) -> Derivation:
        window = check_window(check, evidence)
        spec_b = evidence.spec(X6, baseline)
        a, b = arm(evidence, X6, variant), arm(evidence, X6, baseline)
        node = predictions.cpuset_size(spec_b.node_cpus) or 1
        shared = bool(_cpu_set(spec_b.load_cpus) & _cpu_set(spec_b.node_cpus))
        rate = b.rate - (GENERATOR_SHARE if shared and b.rate > 1 else 0.0)
        b = predictions.ServiceArm(b.clump, b.cpu_per_request_ms, rate, b.limit_milli, b.period_ms, b.rps)
        qa, qb = a.window_latency(window.q, window.clumps), b.window_latency(window.q, window.clumps)
        ratio = qa / qb
        name = window.shown
        if ratio < MIN_PREDICTED_RISE:
            raise Unmet(
                f"a predicted change at {name}",
                f"with the generator on the second CPU the model puts {name} of {variant} at {qa:.3g} ms against "
                f"{qb:.3g} ms ({ratio:.3g}x): nothing to see at this quantile",
            )
        threshold = predictions.latency_threshold(ratio)
        gen = (
            f"the load generator shares the second of the {node} CPUs, so the two threads get {rate:.3g} CPU "
            f"(it may take up to {GENERATOR_SHARE:g} of a CPU, CFS's fair share of two runnable tasks)"
            if shared
            else f"the load generator runs off the service's {node} CPU(s)"
        )
        return Derivation(
            (round(threshold, 3),),
            (
                f"Model: {_describe(variant, a)}; {_describe(baseline, b)}; {gen}. {_over(window)}, {name} is "
                f"{qa:.3g} ms against {qb:.3g} ms: {ratio:.3g}x. Threshold (r + 2) / 3 = {threshold:.3g} (the overhead allowance). "
                f"Supporting: the claim is no cost, not a gain. {_CPU_NOTE}"
            ),
            end="the generator's share at its upper end (half a CPU) and the overhead at its allowance's upper end: "
            "the smallest gain the model allows",
        )

    return derive


def same_throughput(variant: str, baseline: str):
    def derive(evidence: Evidence, check: Check) -> Derivation:
        spec = evidence.spec(X6, variant)
        limit = spec.milli("limit")
        if limit is None:
            raise Unmet("a limit", f"{variant} has no limit: nothing caps both arms alike")
        per_request = (spec.work_us or 0) / 1000 * predictions.CPU_PER_WORK
        cap = limit / per_request
        return Derivation(
            (round(1 / SAME_BAND, 3), SAME_BAND),
            (
                f"Model: a closed loop keeps the service saturated, so both arms are capped by the quota: "
                f"limit {format_cpu(limit)} / {per_request:.3g} ms per request = {cap:.3g} req/s whatever GOMAXPROCS is (ratio "
                f"1). Band x/÷ {SAME_BAND:g}; the whole interval must lie inside it."
            ),
            end="none: the model predicts the same cap (ratio 1); the band is the equivalence margin",
        )

    return derive


# --------------------------------------------------------------------------
# the claims: the lab's (docs/LAB.md §5), then ours (docs/EXPERIMENTS.md, as written before the data)

_LATENCY = "Latency from the scheduled send, failed requests at the client timeout."
#: The same as :data:`_LATENCY`, in the words the claims of ours were written with (checks.csv keeps each as written).
_LATENCY_OURS = "Latency from the scheduled send; failed and timed-out requests count at the client timeout."


def not_throttled_check(experiment: str, variant: str, clumped: str, why: str) -> Check:
    """An absolute "not throttled" bound on the variant's throttled share (:func:`unthrottled_bound`): on the
    mean share over runs, so identical zero runs decide only where their bound reaches the level."""
    return Check(
        label=f"throttled_ratio {variant}",
        kind="level",
        experiment=experiment,
        metric="throttled_ratio",
        variant=variant,
        baseline=None,
        relation="<",
        scale="logit",
        derive=unthrottled_bound(experiment, variant, clumped=clumped),
        why=why,
    )


def latency_rise_check(experiment: str, variant: str, baseline: str, relation: Relation, why: str) -> Check:
    """The model's change of the work latency quantile between two arms (:func:`latency_rise`)."""
    return Check(
        label=f"work {{q}} {variant} / {baseline}",
        kind="ratio",
        experiment=experiment,
        metric="work_{q}_ms",
        variant=variant,
        baseline=baseline,
        relation=relation,
        scale="log",
        quantile_of="work",
        derive=latency_rise(experiment, variant, baseline),
        why=why,
    )


F6 = cite(
    Finding(
        id="F6",
        claim="Clumped arrivals at ~30% average use are throttled in a large share of periods and their tail latency "
        "rises several-fold over no limit, while the same load arriving steadily is not throttled.",
        checks=(
            Check(
                label="throttled_ratio clumped-limit",
                kind="level",
                experiment="E2b",
                metric="throttled_ratio",
                variant=E2B_CLUMPED_LIMIT,
                baseline=None,
                relation=">",
                scale="logit",
                derive=throttled_share("E2b", E2B_CLUMPED_LIMIT),
                why="Clumps larger than the quota.",
            ),
            not_throttled_check("E2b", E2B_STEADY_LIMIT, E2B_CLUMPED_LIMIT, "Steady arrivals are not throttled."),
            latency_rise_check("E2b", E2B_CLUMPED_LIMIT, E2B_CLUMPED_NOLIMIT, ">", _LATENCY),
            Check(
                label="avg_cores clumped-limit",
                kind="level",
                experiment="E2b",
                metric="avg_cores",
                variant=E2B_CLUMPED_LIMIT,
                baseline=None,
                relation="within",
                scale="log",
                decisive=False,
                premise=True,
                derive=average_use("E2b", E2B_CLUMPED_LIMIT),
                why="The service's CPU over the window (/stats).",
            ),
        ),
    )
)

F7 = cite(
    Finding(
        id="F7",
        claim="Splitting a limit across replicas is worse than one pod holding the total: behind per-connection "
        "balancing the replicas get uneven shares of each clump, and each pays its own throttling.",
        checks=(
            Check(
                label="work {q} two-half / one-limit",
                kind="ratio",
                experiment="E7",
                metric="work_{q}_ms",
                variant=E7_TWO_HALF,
                baseline=E7_ONE_LIMIT,
                relation=">",
                threshold=(1.0,),
                scale="log",
                quantile_of="work",
                paired=True,
                why=f"{_LATENCY} 'Worse' is the claim: the whole interval of the ratio above 1. Model: with an even "
                "split each replica gets half of every clump with half the quota, which throttles the same "
                "share of each clump as the single pod (ratio 1); the uneven split of per-connection balancing "
                "is what makes the busier replica need more periods.",
            ),
            Check(
                label="work {q} two-limit / one-double",
                kind="ratio",
                experiment="E7",
                metric="work_{q}_ms",
                variant=E7_TWO_LIMIT,
                baseline=E7_ONE_DOUBLE,
                relation=">",
                threshold=(1.0,),
                scale="log",
                quantile_of="work",
                paired=True,
                why=f"{_LATENCY} The same comparison with twice the quota (2 replicas x L against 1 pod x 2L): "
                "'worse' means the whole interval above 1 (model with an even split: 1).",
            ),
        ),
    )
)

F9 = cite(
    Finding(
        id="F9",
        claim="On a busy node the service gets its request's share of the CPU, not its limit: throttling metrics "
        "look fine while latency explodes, raising the limit does not help, raising the request does.",
        checks=(
            not_throttled_check(
                "E8",
                E8_BUSY_LIM2X,
                E8_IDLE_LIM2X,
                "'Throttling looks fine' on the busy node (the lab: 'throttled ratio 0!').",
            ),
            latency_rise_check("E8", E8_BUSY_LIM2X, E8_IDLE_LIM2X, ">", f"While latency explodes. {_LATENCY}"),
            Check(
                label="busy_cores busy-lim2x / busy-lim",
                kind="ratio",
                experiment="E8",
                metric="busy_cores",
                variant=E8_BUSY_LIM2X,
                baseline=E8_BUSY_LIM,
                relation="within",
                scale="log",
                derive=cpu_ratio("E8", E8_BUSY_LIM2X, E8_BUSY_LIM, same=True),
                why="Raising the limit does not help: the CPU the service got while its requests waited (pod "
                "counters read every few ms).",
            ),
            latency_rise_check(
                "E8", E8_BUSY_LIM2X_REQ_FULL, E8_BUSY_LIM2X, "<", f"Raising the request does. {_LATENCY}"
            ),
            Check(
                label="busy_cores busy-lim2x-req-full / busy-lim2x",
                kind="ratio",
                experiment="E8",
                metric="busy_cores",
                variant=E8_BUSY_LIM2X_REQ_FULL,
                baseline=E8_BUSY_LIM2X,
                relation=">",
                scale="log",
                derive=cpu_ratio("E8", E8_BUSY_LIM2X_REQ_FULL, E8_BUSY_LIM2X),
                why="And why: the CPU the service got while its requests waited.",
            ),
        ),
    )
)

F10 = cite(
    Finding(
        id="F10",
        claim="The throttled seconds a scraper sees (between two readings, divided by the readings' own time "
        "difference) overstate the pause the limit caused: throttled time is summed over run queues.",
        checks=(
            Check(
                label="throttled / pause in the scrape window, limit",
                kind="level",
                experiment="E6",
                metric="overstatement",
                variant=E6_LIMIT,
                baseline=None,
                relation=">",
                scale="log",
                derive=overstatement("E6", E6_LIMIT),
                why="Per run: Δthrottled between the two scraped readings over the pause of the rounds in the same "
                "window.",
            ),
        ),
    )
)

F11 = cite(
    Finding(
        id="F11",
        claim="Under a small limit, a thread count matched to the limit (GOMAXPROCS 1) raises closed-loop throughput "
        "over GOMAXPROCS = node CPUs.",
        checks=(
            Check(
                label="throughput_rps threads-one / threads-node",
                kind="ratio",
                experiment="S2",
                metric="throughput_rps",
                variant=S2_THREADS_ONE,
                baseline=S2_THREADS_NODE,
                relation=">",
                threshold=(1.2,),
                scale="log",
                requirements=(threads_drain_quota_fast("S2", S2_THREADS_NODE),),
                why="docs/LAB.md §2's model says only when the effect can exist (many threads drain a small quota in "
                "quota / threads of wall time, then all wait out the period; the requirement checks that the "
                "drain is as fast as the talk's), not how large it is. 1.2 is the smallest gain the claim "
                "can mean, far below the talk's 21.7x.",
            ),
        ),
    )
)

# ours (docs/EXPERIMENTS.md)

F16 = cite(
    Finding(
        id="F16",
        claim="Without clumps, throttling stays rare until average use nears the limit; it bends where Poisson "
        "bunching of one period exceeds the quota.",
        checks=(
            Check(
                label="avg_cores use30",
                kind="level",
                experiment=X5,
                metric="avg_cores",
                variant=X5_USE30,
                baseline=None,
                relation="within",
                scale="log",
                decisive=False,
                premise=True,
                gates=("throttled_ratio use30",),
                derive=designed_use(X5_USE30),
                why="The service's CPU over the window (/stats): the design holds (premise).",
            ),
            Check(
                label="avg_cores use90",
                kind="level",
                experiment=X5,
                metric="avg_cores",
                variant=X5_USE90,
                baseline=None,
                relation="within",
                scale="log",
                decisive=False,
                premise=True,
                gates=("throttled_ratio use90", "work {q} use90 / use30"),
                derive=designed_use(X5_USE90, near_limit=True),
                why="The service's CPU over the window (/stats): the design holds (premise).",
            ),
            Check(
                label="throttled_ratio use30",
                kind="level",
                experiment=X5,
                metric="throttled_ratio",
                variant=X5_USE30,
                baseline=None,
                relation="<",
                scale="logit",
                derive=steady_share(X5_USE30, X5_USE90, quiet=True),
                requirements=(bends(X5_USE30, X5_USE90),),
                why="Steady arrivals at 30% of the limit: throttled periods / active periods.",
            ),
            Check(
                label="throttled_ratio use90",
                kind="level",
                experiment=X5,
                metric="throttled_ratio",
                variant=X5_USE90,
                baseline=None,
                relation=">",
                scale="logit",
                derive=steady_share(X5_USE90, X5_USE90, quiet=False),
                requirements=(bends(X5_USE30, X5_USE90),),
                why="Steady arrivals at 90% of the limit: throttled periods / active periods.",
            ),
            Check(
                label="work {q} use90 / use30",
                kind="ratio",
                experiment=X5,
                metric="work_{q}_ms",
                variant=X5_USE90,
                baseline=X5_USE30,
                relation=">",
                threshold=(1.0,),
                scale="log",
                quantile_of="work",
                decisive=False,
                why=f"{_LATENCY_OURS} The claim's direction: latency rises where throttling starts (supporting).",
            ),
        ),
    )
)

F17 = cite(
    Finding(
        id="F17",
        claim="Go's minimum of 2 threads under a limit at or below 1.5 CPUs costs neither latency (open-loop clumps "
        "finish sooner on 2 threads while a clump fits the quota) nor closed-loop throughput (both capped by "
        "the quota).",
        checks=(
            Check(
                label="work {q} clumped-500m-g2 / clumped-500m-g1",
                kind="ratio",
                experiment=X6,
                metric="work_{q}_ms",
                variant=X6_CLUMPED_500M_G2,
                baseline=X6_CLUMPED_500M_G1,
                relation="<",
                scale="log",
                quantile_of="work",
                paired=True,
                derive=no_cost(X6_CLUMPED_500M_G2, X6_CLUMPED_500M_G1, "latency"),
                requirements=(two_threads((X6_CLUMPED_500M_G1, X6_CLUMPED_500M_G2)),),
                why=f"{_LATENCY_OURS} No latency cost: Go's default two threads no more than 10% slower than one.",
            ),
            Check(
                label="throughput_rps closed-500m-g2 / closed-500m-g1",
                kind="ratio",
                experiment=X6,
                metric="throughput_rps",
                variant=X6_CLOSED_500M_G2,
                baseline=X6_CLOSED_500M_G1,
                relation=">",
                scale="log",
                null=1.0 / NO_COST,
                derive=no_cost(X6_CLOSED_500M_G2, X6_CLOSED_500M_G1, "throughput"),
                requirements=(two_threads((X6_CLOSED_500M_G2, X6_CLOSED_500M_G1)),),
                why="Closed loop, 16 workers: successful /work requests per second; no throughput cost.",
            ),
            Check(
                label="work {q} clumped-500m-g1 / clumped-500m-g2",
                kind="ratio",
                experiment=X6,
                metric="work_{q}_ms",
                variant=X6_CLUMPED_500M_G1,
                baseline=X6_CLUMPED_500M_G2,
                relation=">",
                scale="log",
                quantile_of="work",
                paired=True,
                derive=two_threads_gain(X6_CLUMPED_500M_G1, X6_CLUMPED_500M_G2),
                requirements=(two_threads((X6_CLUMPED_500M_G1, X6_CLUMPED_500M_G2)),),
                decisive=False,
                why=f"{_LATENCY_OURS} The magnitude (supporting): one thread serves a clump serially; Go's default "
                "two in parallel, beside the load generator.",
            ),
            Check(
                label="throughput_rps closed-500m-g2 / closed-500m-g1 (same)",
                kind="ratio",
                experiment=X6,
                metric="throughput_rps",
                variant=X6_CLOSED_500M_G2,
                baseline=X6_CLOSED_500M_G1,
                relation="within",
                scale="log",
                derive=same_throughput(X6_CLOSED_500M_G2, X6_CLOSED_500M_G1),
                requirements=(two_threads((X6_CLOSED_500M_G2, X6_CLOSED_500M_G1)),),
                decisive=False,
                why="The model's 'both capped by the quota' (supporting): the same throughput within the band.",
            ),
        ),
    )
)

FINDINGS: tuple[Finding, ...] = (F6, F7, F9, F10, F11, F16, F17)
