"""The lab's claims F1-F5 (SPEC §5) as data, evaluated on the per-run metrics.

A :class:`Finding` is a sentence plus the :class:`Check` s that would show it:
each check names an experiment, a per-run metric, the variants it compares,
the expected relation with a threshold, the lab's own figure and why the
threshold is what it is on our scaled profiles. Evaluation (shared/STATS.md
§4-5):

* a ratio check compares two variants: ratio of geometric means with a Welch
  interval on the logs (or a difference on the linear scale), exact
  Mann-Whitney p on the per-run values, A12 (:func:`stats.compare`);
* a level check compares one variant's estimate with the threshold
  (:func:`stats.estimate`);
* an agreement check counts the variants whose read-back setting equals what
  the rule predicts (deterministic, no interval);
* the verdict comes from the interval (:func:`stats.verdict`): reproduced,
  contradicted or inconclusive; "not testable here" is decided first, from the
  profile (experiment or variant absent) and from the data (what this node can
  express), with the numeric reason;
* Holm's adjustment runs over every p-value of the testable checks together.

findings.csv has one row per finding (the check that decides its verdict);
checks.csv has every check.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import pandas as pd

from throttlelab.analysis import stats
from throttlelab.model.quantities import go_default_gomaxprocs, parse_cpu
from throttlelab.model.weights import PHASES, expected_shares, lab_pods

REPRODUCED = "reproduced"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
NOT_TESTABLE = "not testable here"

Relation = Literal[">", "<", "within"]
CheckKind = Literal["ratio", "level", "agreement"]

FINDINGS_COLUMNS = [
    "id", "claim", "experiments", "metric", "expected", "effect", "lo", "hi", "p", "p_holm", "a12", "reference",
    "verdict", "reason", "method",
]
CHECKS_COLUMNS = [
    "id", "check", "experiment", "metric", "expected", "effect", "lo", "hi", "p", "p_holm", "a12", "reference",
    "verdict", "reason", "method", "why",
]


@dataclass(frozen=True)
class Evidence:
    """What the findings are evaluated on: the tidy tables and the profile's experiments."""

    metrics: pd.DataFrame
    runs: pd.DataFrame
    headers: pd.DataFrame
    profile_experiments: frozenset[str]
    level: float = 0.95

    def variants(self, experiment: str) -> set[str]:
        return set(self.runs.loc[self.runs["experiment"] == experiment, "variant"])

    def values(self, experiment: str, variant: str, metric: str) -> np.ndarray:
        """One value per run, in repeat order."""
        m = self.metrics
        rows = m[(m["experiment"] == experiment) & (m["variant"] == variant) & (m["metric"] == metric)]
        return rows.sort_values("repeat")["value"].to_numpy(dtype=float)

    def spec(self, experiment: str, variant: str) -> dict:
        """The variant's parameters (all its runs share them)."""
        rows = self.runs[(self.runs["experiment"] == experiment) & (self.runs["variant"] == variant)]
        return json.loads(rows["spec_json"].iloc[0])

    def num_cpus(self, experiment: str) -> set[int]:
        """runtime.NumCPU() as the experiment's workload processes saw it."""
        return set(self.headers.loc[self.headers["experiment"] == experiment, "num_cpu"].astype(int))


@dataclass(frozen=True)
class Check:
    """One measurable consequence of a claim.

    ``kind``: "ratio" compares ``variant`` with ``baseline``; "level" compares
    ``variant``'s own estimate with the threshold; "agreement" counts the
    variants whose ``metric`` equals ``baseline`` (a second metric) in every run.
    ``threshold`` is one number for ">" and "<", (low, high) for "within".
    """

    label: str
    kind: CheckKind
    experiment: str
    metric: str
    variant: str
    baseline: str | None
    relation: Relation
    threshold: tuple[float, ...]
    scale: stats.Scale
    reference: str
    why: str

    @property
    def expected(self) -> str:
        if self.kind == "agreement":
            return f"{self.metric} = {self.baseline} in every {self.experiment} variant"
        if self.relation == "within":
            return f"{self.label} within [{self.threshold[0]:g}, {self.threshold[1]:g}]"
        return f"{self.label} {self.relation} {self.threshold[0]:g}"

    def variants_needed(self) -> tuple[str, ...]:
        if self.kind == "agreement":
            return ()
        return tuple(v for v in (self.variant, self.baseline) if v is not None)


#: A requirement looks at the evidence and returns why the finding cannot be
#: tested on this node, or None when it can.
Requirement = Callable[[Evidence], "str | None"]


@dataclass(frozen=True)
class Finding:
    """A claim of the lab, with the checks that would reproduce it here."""

    id: str
    claim: str
    checks: tuple[Check, ...]
    reference: str
    requirements: tuple[Requirement, ...] = ()
    #: experiments the claim also rests on that no check here covers yet
    not_covered: tuple[str, ...] = ()

    @property
    def experiments(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.experiment for c in self.checks))

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.metric for c in self.checks))


@dataclass(frozen=True)
class CheckResult:
    finding: str
    check: Check
    effect: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    p: float = math.nan
    p_holm: float = math.nan
    a12: float = math.nan
    verdict: str = INCONCLUSIVE
    reason: str = ""
    method: str = ""


# --------------------------------------------------------------------------
# requirements that depend on the node (derived from the data, never assumed)


def parallel_threads_differ(experiment: str, variant: str, baseline: str) -> Requirement:
    """Two arms that differ in thread count must also differ in threads running at once.

    Throttled time and throttled periods accrue per CPU run queue, so T threads
    on a node with C usable CPUs behave like min(T, C) busy run queues.
    """

    def requirement(evidence: Evidence) -> str | None:
        cpus = evidence.num_cpus(experiment)
        if len(cpus) != 1:
            return None  # mixed nodes: let the data speak
        (n_cpu,) = cpus
        threads = {v: int(evidence.spec(experiment, v)["threads"]) for v in (variant, baseline)}
        busy = {v: min(t, n_cpu) for v, t in threads.items()}
        if busy[variant] != busy[baseline]:
            return None
        return (
            f"both arms keep min(threads, num_cpu) = {busy[variant]} run queues busy on num_cpu = {n_cpu} "
            f"({variant}: {threads[variant]} threads, {baseline}: {threads[baseline]}); throttling accrues per CPU "
            "run queue, so the thread count cannot change it here (needs num_cpu > "
            f"{min(threads.values())})"
        )

    return requirement


def _limit_milli(spec: dict) -> int | None:
    limit = spec.get("limit")
    return None if limit is None else parse_cpu(limit, "limit")


def go_line_can_change_default(experiment: str) -> Requirement:
    """Some limit of the profile must get a different default GOMAXPROCS from go 1.24 and go 1.25 lines.

    Only variants without a GOMAXPROCS or GODEBUG override count. Go 1.24 takes
    num_cpu; Go 1.25 takes max(2, ceil(limit)) capped at num_cpu, so on a node
    with num_cpu <= 2 the two can never differ.
    """

    def requirement(evidence: Evidence) -> str | None:
        cpus = evidence.num_cpus(experiment)
        if not cpus:
            return None
        defaults = []
        for variant in sorted(evidence.variants(experiment)):
            spec = evidence.spec(experiment, variant)
            if spec.get("gomaxprocs") is not None or spec.get("godebug"):
                continue
            limit = _limit_milli(spec)
            for n_cpu in cpus:
                defaults.append((spec.get("limit"), go_default_gomaxprocs("1.24", limit, n_cpu),
                                 go_default_gomaxprocs("1.25", limit, n_cpu)))
        if any(old != new for _, old, new in defaults):
            return None
        milli = {lim: math.inf if lim is None else parse_cpu(lim, "limit") for lim, _, _ in defaults}
        limits = ", ".join("none" if lim is None else str(lim) for lim in sorted(milli, key=milli.get))
        n_cpu = ", ".join(map(str, sorted(cpus)))
        return (
            f"the go.mod line cannot change the default here: num_cpu = {n_cpu}, and Go 1.25's "
            f"max(2, ceil(limit)) capped at num_cpu equals Go 1.24's num_cpu for every limit of this profile "
            f"({limits}); needs num_cpu > 2"
        )

    return requirement


# --------------------------------------------------------------------------
# the claims (SPEC §5). Thresholds are stated relative to each claim, for the
# scaled quick/ci profiles (4 threads x 40 ms bursts on 2 CPUs) as well as the
# lab's own (8 x 20 ms on 10 CPUs); `why` says how.

_E2A_REF = "E2a, 8 threads x 20 ms on 10 CPUs: p50 none 34.3, limit 2 34.6, limit 1 84.4, 500m 260.4 ms"

FINDINGS: tuple[Finding, ...] = (
    Finding(
        id="F1",
        claim="Same average CPU, very different completion time: the same burst takes much longer under "
              "limit 1 and 500m than without a limit, while limit 2 changes nothing.",
        reference="p50 limit 1 / none = 84.4 / 34.3 = 2.46x; 500m / none = 260.4 / 34.3 = 7.59x; "
                  "limit 2 / none = 34.6 / 34.3 = 1.01x (avg CPU about 0.165 in all)",
        checks=(
            Check(
                label="p50_wall_ms limit1 / nolimit", kind="ratio", experiment="E2a", metric="p50_wall_ms",
                variant="limit1", baseline="nolimit", relation=">", threshold=(1.2,), scale="log",
                reference="84.4 / 34.3 = 2.46x",
                why="limit 1 grants 100 ms of CPU per 100 ms period, less than the 160 ms a burst needs, so every "
                    "burst is throttled at least once: about 1.6x on 2 CPUs (80 ms unthrottled + a throttled rest "
                    "of a period), 2.5x in the lab. 1.2 asks for a slow-down clearly beyond run-to-run noise "
                    "without assuming the lab's scale.",
            ),
            Check(
                label="p50_wall_ms limit500m / nolimit", kind="ratio", experiment="E2a", metric="p50_wall_ms",
                variant="limit500m", baseline="nolimit", relation=">", threshold=(2.0,), scale="log",
                reference="260.4 / 34.3 = 7.59x",
                why="500m grants 50 ms per period, so a 160 ms burst spans at least 3 periods: about 3.8x on "
                    "2 CPUs, 7.6x in the lab. Above 2x the burst needed at least one extra period, which only "
                    "throttling can cause.",
            ),
            Check(
                label="p50_wall_ms limit2 / nolimit", kind="ratio", experiment="E2a", metric="p50_wall_ms",
                variant="limit2", baseline="nolimit", relation="within", threshold=(0.8, 1.25), scale="log",
                reference="34.6 / 34.3 = 1.01x",
                why="limit 2 grants 200 ms per period, more than the burst needs per period (all of 2 CPUs; "
                    "160 ms in the lab), so it cannot throttle; the band 0.8-1.25 is symmetric on the log scale "
                    "(1/1.25 = 0.8).",
            ),
        ),
    ),
    Finding(
        id="F2",
        claim="Throttled time is summed over threads (each CPU's run queue adds its own), so per round the "
              "throttled time exceeds the round's wall time.",
        reference="limit 1: 7052.5 ms throttled over 20 rounds = 353 ms per round vs p50 wall 84.4 ms (4.2x)",
        checks=(
            Check(
                label="throttled_over_wall limit500m", kind="level", experiment="E2a",
                metric="throttled_over_wall", variant="limit500m", baseline=None, relation=">", threshold=(1.0,),
                scale="linear", reference="limit 1: 353 / 84.4 = 4.2 (10 CPUs)",
                why="Throttled time accrues per CPU run queue, so on n CPUs it can reach n x the wall time; "
                    "above 1 is impossible for a single clock, which is the claim. On 2 CPUs at most two run "
                    "queues add up, so only an arm throttled for more than half of each burst can pass 1: 500m, "
                    "whose quota is a quarter of what 2 CPUs could use (limit 1 measured about 0.65 here); on "
                    "the lab's 10 CPUs limit 1 already gave 4.2. On 2 CPUs the test sits near its edge.",
            ),
        ),
    ),
    Finding(
        id="F3",
        claim="nr_periods counts only the periods in which the cgroup ran, not every period of wall time.",
        reference="limit 2: 40 periods in 20 s = 0.20 of the 200 wall-clock periods",
        checks=(
            Check(
                label="periods_per_wall_period limit2", kind="level", experiment="E2a",
                metric="periods_per_wall_period", variant="limit2", baseline=None, relation="<",
                threshold=(0.75,), scale="linear", reference="40 / 200 = 0.20",
                why="If every 100 ms of wall time were counted the ratio would be 1. A burst runs about 80 ms "
                    "per interval (1 s lab, 600 ms quick, 400 ms ci) and touches 1-2 periods: 0.2-0.45. "
                    "0.75 separates the two readings with a margin.",
            ),
        ),
    ),
    Finding(
        id="F4",
        claim="Fewer threads means fewer throttles but not a faster burst: at limit 1, 2 threads x 80 ms are "
              "throttled less than the many-thread burst, yet finish no sooner.",
        reference="limit 1, 8 -> 2 threads: throttled periods 20 -> 17, throttled 7052.5 -> 1301.6 ms, "
                  "p50 84.4 -> 132.3 ms; E2b clump 50 /work p99: limit2-g2 447-511 vs limit2-g10 360-370 ms",
        checks=(
            Check(
                label="throttled_ms limit1-2threads / limit1", kind="ratio", experiment="E2a",
                metric="throttled_ms", variant="limit1-2threads", baseline="limit1", relation="<",
                threshold=(0.8,), scale="log", reference="1301.6 / 7052.5 = 0.18",
                why="Fewer threads keep fewer run queues busy when the quota runs out, so less throttled time "
                    "accrues; 0.8 asks for a clear reduction (the lab: 0.18).",
            ),
            Check(
                label="p50_wall_ms limit1-2threads / limit1", kind="ratio", experiment="E2a",
                metric="p50_wall_ms", variant="limit1-2threads", baseline="limit1", relation=">",
                threshold=(0.9,), scale="log", reference="132.3 / 84.4 = 1.57",
                why="'Not faster': the 2-thread burst may not finish more than 10% sooner (the lab: 57% later).",
            ),
        ),
        requirements=(parallel_threads_differ("E2a", "limit1-2threads", "limit1"),),
        not_covered=("E2b",),
    ),
    Finding(
        id="F5",
        claim="The default GOMAXPROCS follows the go line of go.mod (1.25: the CPU limit), not the toolchain "
              "that built the binary.",
        reference="10 CPUs: go124mod 10 for every limit; go125mod none -> 10, 500m/1/1500m/2 -> 2, 2500m -> 3; "
                  "GOMAXPROCS=6 -> 6; GODEBUG=containermaxprocs=0 -> 10",
        checks=(
            Check(
                label="gomaxprocs = rule", kind="agreement", experiment="E3", metric="gomaxprocs", variant="*",
                baseline="expected_gomaxprocs", relation="within", threshold=(1.0, 1.0), scale="linear",
                reference="all 14 variants as the rule predicts",
                why="GOMAXPROCS is read back, not measured: one variant off the rule contradicts the claim. "
                    "The rule: GOMAXPROCS env wins; go >= 1.25 line: max(2, ceil(limit)) capped at num_cpu; "
                    "older line or GODEBUG=containermaxprocs=0: num_cpu.",
            ),
        ),
        requirements=(go_line_can_change_default("E3"),),
    ),
)


# --------------------------------------------------------------------------
# F8: requests become weights (E4 readback; E5/E10 shares of one CPU)

#: Allowed distance between a measured share and the share the weights predict.
SHARE_TOLERANCE = 0.02
_SHARE_WHY = (
    "On one CPU, CFS gives busy siblings time in proportion to their weights, so the share should equal "
    "w / sum(w) of the siblings. The band is +/- 0.02 (2 points of the CPU): wider than cgroup v1's integer "
    "rounding of shares = w x 1024 / 100 (at most 0.002) and than scheduler granularity over a reading, "
    "narrower than the gap between the two runtime conversions inside the two-container pod (0.145 vs 0.093), "
    "so the check tells the conversions apart."
)
_LAB_SHARES = {
    ("E5", "pods"): "pods 100m : 1 : two-container = 0.046 : 0.447 : 0.493 (weights 4 : 39 : 43)",
    ("E5", "two-container"): "containers 100m : 1 = 0.144 : 0.847 (weights 17 : 100, not 1 : 10)",
    ("E10", "pods"): "old runc: pod level unchanged (4 : 39 : 43)",
    ("E10", "two-container"): "old runc: containers 100m : 1 = 0.092 : 0.899 (weights 4 : 39)",
}


def _share_checks() -> tuple[Check, ...]:
    checks = []
    for experiment, runtime in (("E5", "runc-new"), ("E10", "runc-old")):
        for phase, (pod_names, level) in PHASES.items():
            pods = lab_pods(pod_names, ("spin",), "go124mod")
            for member, (weight, share) in expected_shares(pods, level, runtime).items():
                checks.append(Check(
                    label=f"share_{member} {experiment} {phase}", kind="level", experiment=experiment,
                    metric=f"share_{member}", variant=phase, baseline=None, relation="within",
                    threshold=(round(share - SHARE_TOLERANCE, 4), round(share + SHARE_TOLERANCE, 4)),
                    scale="linear", reference=_LAB_SHARES[(experiment, phase)],
                    why=f"{runtime}, {level} level: weight {weight} -> expected share {share:.3f}. {_SHARE_WHY}",
                ))
    return tuple(checks)


def runtime_conversion_applied(experiment: str) -> Requirement:
    """The backend must write the runtime conversion the variant names (local does, on v1 and v2).

    Docker on cgroup v1 hands kubelet's shares to the host's runc unchanged (100m -> 102, 1 CPU -> 1024);
    no v2 weight conversion happens, so neither runc-new nor runc-old can be chosen or measured there.
    """

    def requirement(evidence: Evidence) -> str | None:
        runs = evidence.runs[evidence.runs["experiment"] == experiment]
        backends = set(runs["backend"]) if "backend" in runs.columns else set()
        if backends <= {"local", "kind", "kubernetes"}:
            return None
        return (
            f"backend {', '.join(sorted(backends))} does not apply a chosen runtime conversion: on cgroup v1 the "
            "engine's runc writes kubelet's shares as they are (100m -> 102, 1 CPU -> 1024), so the weights of "
            "runc-new (17 : 100) and runc-old (4 : 39) cannot be set there; the measured shares are in the tables"
        )

    return requirement


F8 = Finding(
    id="F8",
    claim="Pod-level and container-level weights follow kubelet's and runc's formulas, and busy containers "
          "pinned to one CPU share it in the ratio of those weights, for the new and the old runtime conversion.",
    reference="pods 0.046 : 0.447 : 0.493 (4 : 39 : 43); new runc containers 0.144 : 0.847 (17 : 100); "
              "old runc containers 0.092 : 0.899 (4 : 39)",
    checks=(
        Check(
            label="read back = design (E4)", kind="agreement", experiment="E4", metric="readback_levels_ok",
            variant="*", baseline="readback_levels", relation="within", threshold=(1.0, 1.0), scale="linear",
            reference="every level as the formulas say (E4/E10)",
            why="Weights and quotas are read back, not measured: one level off the SPEC §2 formulas "
                "contradicts the claim. Both runtime conversions are variants of E4.",
        ),
        *_share_checks(),
    ),
    requirements=(runtime_conversion_applied("E5"),),
)

FINDINGS = (*FINDINGS, F8)

# The service experiments' claims (F6, F7, F9, F10, F11) live in findings_services.py, which
# builds on the classes above; the table lists findings by number.
from throttlelab.analysis.findings.services import SERVICE_FINDINGS  # noqa: E402

FINDINGS = tuple(sorted((*FINDINGS, *SERVICE_FINDINGS), key=lambda f: int(f.id[1:])))


# --------------------------------------------------------------------------
# evaluating one check


def interval_verdict(lo: float, hi: float, relation: Relation, threshold: Sequence[float]) -> str:
    """stats.verdict for ">" and "<"; "within [a, b]" holds when both one-sided relations do."""
    if relation != "within":
        return stats.verdict(lo, hi, threshold[0], relation)
    above = stats.verdict(lo, hi, threshold[0], ">")
    below = stats.verdict(lo, hi, threshold[1], "<")
    if CONTRADICTED in (above, below):
        return CONTRADICTED
    if above == below == REPRODUCED:
        return REPRODUCED
    return INCONCLUSIVE


def _interval_reason(verdict: str, flag: str, lo: float, hi: float, check: Check, what: str) -> str:
    """Why an interval did not reproduce the check (empty when it did)."""
    if verdict == REPRODUCED:
        return ""
    if math.isnan(lo) or math.isnan(hi):
        return f"no interval for {what} ({flag or 'no spread'})"
    if check.relation == "within":
        bounds = "[" + ", ".join(f"{t:g}" for t in check.threshold) + "]"
    else:
        bounds = f"{check.threshold[0]:g}"
    if verdict == CONTRADICTED:
        return f"the interval [{lo:.3g}, {hi:.3g}] of {what} lies wholly on the other side of {bounds}"
    return f"the interval [{lo:.3g}, {hi:.3g}] of {what} reaches {bounds}"


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateWarning)
        return fn()


def evaluate_ratio(finding: str, check: Check, evidence: Evidence) -> CheckResult:
    a = evidence.values(check.experiment, check.variant, check.metric)
    b = evidence.values(check.experiment, check.baseline, check.metric)
    base = CheckResult(finding, check)
    if np.isnan(a).any() or np.isnan(b).any():
        return replace(base, reason=f"{check.metric} is undefined in some runs")
    log = check.scale == "log"
    if log and (a.min() <= 0 or b.min() <= 0):
        return replace(base, reason=f"{check.metric} is 0 in some run, so no ratio of geometric means exists")
    cmp = _quiet(lambda: stats.compare(a, b, log=log, level=evidence.level, label=f"per-run {check.metric}"))
    verdict = interval_verdict(cmp.lo, cmp.hi, check.relation, check.threshold)
    what = "the ratio" if log else "the difference"
    reasons = [_interval_reason(verdict, cmp.flag, cmp.lo, cmp.hi, check, what)]
    if cmp.note:
        reasons.append(cmp.note)
    method = cmp.method + (f" ({cmp.flag})" if cmp.flag else "")
    return replace(base, effect=cmp.effect, lo=cmp.lo, hi=cmp.hi, p=cmp.p_value, a12=cmp.a12, verdict=verdict,
                   reason="; ".join(r for r in reasons if r), method=method)


def evaluate_level(finding: str, check: Check, evidence: Evidence) -> CheckResult:
    values = evidence.values(check.experiment, check.variant, check.metric)
    base = CheckResult(finding, check)
    if np.isnan(values).any():
        return replace(base, reason=f"{check.metric} is undefined in some runs")
    est = _quiet(lambda: stats.estimate(values, log=check.scale == "log", level=evidence.level,
                                        label=f"per-run {check.metric}"))
    verdict = interval_verdict(est.lo, est.hi, check.relation, check.threshold)
    reason = _interval_reason(verdict, est.flag, est.lo, est.hi, check, "the estimate")
    method = est.method + (f" ({est.flag})" if est.flag else "") + "; one configuration, no test"
    return replace(base, effect=est.point, lo=est.lo, hi=est.hi, verdict=verdict, reason=reason, method=method)


def evaluate_agreement(finding: str, check: Check, evidence: Evidence) -> CheckResult:
    m = evidence.metrics[evidence.metrics["experiment"] == check.experiment]
    wide = m.pivot_table(index=["variant", "repeat"], columns="metric", values="value", aggfunc="first")
    run_ok = wide[check.metric] == wide[check.baseline]
    per_variant = run_ok.groupby(level="variant").all()
    matched, total = int(per_variant.sum()), int(per_variant.size)
    off = sorted(per_variant.index[~per_variant])
    verdict = REPRODUCED if matched == total else CONTRADICTED
    reason = f"{matched} of {total} variants ({int(run_ok.sum())} of {run_ok.size} runs) matched the rule"
    if off:
        reason += "; off the rule: " + ", ".join(off)
    return CheckResult(finding, check, effect=matched / total if total else math.nan, verdict=verdict,
                       reason=reason, method="exact count of variants whose every run reads back the "
                                             "predicted value; deterministic, no interval")


_EVALUATORS = {"ratio": evaluate_ratio, "level": evaluate_level, "agreement": evaluate_agreement}


# --------------------------------------------------------------------------
# findings -> tables


def _missing_reason(finding: Finding, evidence: Evidence) -> str | None:
    """Why the profile cannot test the finding at all (experiment or variant absent), or None."""
    absent = [e for e in finding.experiments if e not in evidence.profile_experiments]
    if absent:
        return f"experiment not in this profile: {', '.join(absent)}"
    for check in finding.checks:
        present = evidence.variants(check.experiment)
        if check.kind == "agreement" and not present:
            return f"no {check.experiment} runs in the tables"
        lacking = [v for v in check.variants_needed() if v not in present]
        if lacking:
            return f"variant not in this profile: {check.experiment} {', '.join(lacking)}"
    return None


def evaluate_checks(findings: Iterable[Finding], evidence: Evidence) -> list[CheckResult]:
    """Every check of every finding, with Holm's adjustment across the testable ones."""
    results: list[CheckResult] = []
    for finding in findings:
        missing = _missing_reason(finding, evidence)
        if missing:
            results += [CheckResult(finding.id, c, verdict=NOT_TESTABLE, reason=missing) for c in finding.checks]
            continue
        node_reason = next((r for r in (req(evidence) for req in finding.requirements) if r), None)
        for check in finding.checks:
            result = _EVALUATORS[check.kind](finding.id, check, evidence)
            if node_reason:
                # Still measured and shown, but it cannot decide anything: out of the Holm family too.
                reason = node_reason + (f"; measured: {result.reason}" if result.reason else "")
                result = replace(result, verdict=NOT_TESTABLE, reason=reason)
            results.append(result)
    family = [i for i, r in enumerate(results) if r.verdict != NOT_TESTABLE and math.isfinite(r.p)]
    adjusted = stats.holm([results[i].p for i in family])
    for i, p_holm in zip(family, adjusted):
        method = results[i].method + f"; Holm over {len(family)} comparisons"
        results[i] = replace(results[i], p_holm=float(p_holm), method=method)
    return results


def _deciding(results: Sequence[CheckResult]) -> tuple[str, CheckResult]:
    """A finding's verdict and the check that decides it: any contradiction, else any doubt, else all hold.

    Among checks with the deciding verdict, one with a measured effect is shown first.
    """
    for verdict in (NOT_TESTABLE, CONTRADICTED, INCONCLUSIVE):
        same = [r for r in results if r.verdict == verdict]
        if same:
            return verdict, next((r for r in same if math.isfinite(r.effect)), same[0])
    return REPRODUCED, results[0]


def _finding_reason(finding: Finding, verdict: str, decider: CheckResult, n_checks: int) -> str:
    parts = []
    if verdict == REPRODUCED:
        parts.append("the check holds" if n_checks == 1 else f"all {n_checks} checks hold")
        if decider.reason:
            parts.append(decider.reason)
    elif n_checks > 1 and verdict != NOT_TESTABLE:
        parts.append(f"{decider.check.label}: {decider.reason or verdict}")
    else:
        parts.append(decider.reason)
    if finding.not_covered:
        parts.append(f"its {', '.join(finding.not_covered)} part needs an experiment not in this pipeline yet")
    return "; ".join(p for p in parts if p)


def check_rows(results: Sequence[CheckResult]) -> pd.DataFrame:
    """checks.csv: one row per check."""
    rows = [
        (r.finding, r.check.label, r.check.experiment, r.check.metric, r.check.expected, r.effect, r.lo, r.hi, r.p,
         r.p_holm, r.a12, r.check.reference, r.verdict, r.reason, r.method, r.check.why)
        for r in results
    ]
    return pd.DataFrame.from_records(rows, columns=CHECKS_COLUMNS)


def finding_rows(findings: Sequence[Finding], results: Sequence[CheckResult]) -> pd.DataFrame:
    """findings.csv: one row per finding, the numbers of the check that decides its verdict."""
    rows = []
    for finding in findings:
        mine = [r for r in results if r.finding == finding.id]
        verdict, decider = _deciding(mine)
        rows.append((
            finding.id, finding.claim, ", ".join(finding.experiments + finding.not_covered),
            "; ".join(finding.metrics), "; ".join(r.check.expected for r in mine), decider.effect, decider.lo,
            decider.hi, decider.p, decider.p_holm, decider.a12, finding.reference, verdict,
            _finding_reason(finding, verdict, decider, len(mine)),
            (f"[{decider.check.label}] " if len(mine) > 1 else "") + decider.method,
        ))
    return pd.DataFrame.from_records(rows, columns=FINDINGS_COLUMNS)


def evaluate(evidence: Evidence, findings: Sequence[Finding] = FINDINGS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(findings.csv, checks.csv) for the given evidence."""
    results = evaluate_checks(findings, evidence)
    return finding_rows(findings, results), check_rows(results)
