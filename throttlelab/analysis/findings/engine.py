"""The findings' machinery: claims as data (:class:`Finding`, :class:`Check`), evaluated on the per-run metrics.

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
checks.csv has every check. The claims themselves live one module per family
(:mod:`.jobs`, :mod:`.weights`, :mod:`.services`), which import this module; this
module imports no claim. The lab's figures they cite come from
:mod:`throttlelab.model.reference` (:func:`cite`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import pandas as pd

from throttlelab.analysis import stats
from throttlelab.analysis.tidy import run_spec
from throttlelab.model.reference import quote
from throttlelab.model.variants import VariantSpec

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

    def spec(self, experiment: str, variant: str) -> VariantSpec:
        """The variant's parameters (all its runs share them), from runs.csv's ``param_*`` columns."""
        rows = self.runs[(self.runs["experiment"] == experiment) & (self.runs["variant"] == variant)]
        return run_spec(rows.iloc[0].to_dict())

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
    why: str
    #: the lab's figure the check compares with; :func:`cite` fills it from model/reference.py
    reference: str = ""

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
    #: the lab's figures the claim rests on; :func:`cite` fills it from model/reference.py
    reference: str = ""
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


def cite(finding: Finding) -> Finding:
    """The finding with the lab's figures it cites (model/reference.py QUOTES): its sentence, and
    each check's figure by the check's label (a check that already names its figure keeps it)."""
    quoted = quote(finding.id)
    checks = tuple(check if check.reference else replace(check, reference=quoted.checks[check.label])
                   for check in finding.checks)
    return replace(finding, reference=finding.reference or quoted.claim, checks=checks)


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


def evaluate(evidence: Evidence, findings: Sequence[Finding]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(findings.csv, checks.csv) of the given findings on the given evidence."""
    results = evaluate_checks(findings, evidence)
    return finding_rows(findings, results), check_rows(results)
