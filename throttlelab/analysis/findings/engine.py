"""The findings' machinery: claims as data (:class:`Finding`, :class:`Check`), evaluated on the per-run metrics.

A :class:`Finding` is a sentence plus the :class:`Check` s that would show it. Each check
names an experiment, a per-run metric (or a function of several, ``values``), the variants it
compares, the expected relation with a threshold and the threshold's derivation (``why``):
fixed, or derived by ``derive`` from the model of docs/LAB.md §1 and the variant's own parameters (never from
what a machine measured), the lab's figure beside it, and its own :class:`Requirement` s.
Evaluation (docs/STATISTICS.md §3-5):

* a ratio check compares two variants: ratio of geometric means with a Welch interval on the
  logs (``scale="log"``), a difference of means (``"linear"``), or, for quantities that can be
  exactly 0 (throttled time), a ratio of means with Fieller's interval (``"mean-ratio"``);
  beside it A12 and, on the log and linear scales, the one-sided p against the check's own threshold
  with the interval's Welch t (:func:`stats.threshold_p`: it agrees with the interval);
* a level check compares one variant's estimate with the threshold: Student t (``"log"``,
  ``"linear"``), or a proportion of counts (``"logit"``: per-run empirical logit);
* an agreement check counts the variants whose read-back setting equals what the rule
  predicts (deterministic, no interval);
* per check: reproduced when the whole interval lies on the expected side, contradicted when it
  lies wholly on the other side, inconclusive otherwise; a "within" band holds only when the
  WHOLE interval lies inside it (TOST), and its p-value is not shown; each check estimates one
  thing fixed by its definition (``estimand``: the mean over runs, or the median run), ties or not:
  a share of counts with no event in any run is bounded by the exact bound of the periods pooled over
  its runs, once 0.5^R reaches the level the check is judged at (Bonferroni included); identical runs of
  any other mean bound it by the chance that a run differs, at that level; a check whose runs cannot
  reach it is inconclusive, naming what it needs; "not testable here" only through a named
  requirement of the check (a variant absent from the profile, a node that cannot express it,
  a model that predicts nothing to see, too few samples per run for any quantile), and only for
  the checks that need it;
* a finding is an intersection-union test: reproduced when every check holds, contradicted when
  a decisive check is contradicted, not testable when a check is (and none contradicts),
  inconclusive otherwise; a decisive check whose variants the profile leaves out (another profile
  runs them) is set aside, and the finding judged on its other decisive checks, saying so, when it
  has one (what this machine or a premise cannot test still makes the finding not testable);
* premises gate the checks that depend on them (a failed one: "not testable here: premise failed";
  an undecided one: inconclusive); directional ratio checks have three zones (reproduced, "direction
  reproduced, weaker than modelled", contradicted only when the interval excludes the claimed
  direction); "contradicted" needs the interval at the Bonferroni level over the finding's decisive
  checks, so its error rate is controlled per finding (no Holm over Mann-Whitney p-values).

findings.csv has one row per finding (the check that decides its verdict); checks.csv has every
check. The claims live one module per family (:mod:`.jobs_findings`, :mod:`.weights_findings`, :mod:`.services_findings`),
which import this module; this module imports no claim. What they cite comes from :func:`cite`: the
lab's figures (:mod:`throttlelab.model.reference`), or for a claim of ours (the catalogue's ``ours``
column, model/catalogue.py) that it is ours.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import ClassVar, Literal

import numpy as np
import pandas as pd

from throttlelab.analysis import stats
from throttlelab.analysis.metrics.metric_catalogue import CATALOGUE
from throttlelab.analysis.metrics.services_metrics import WindowQuantile, compared_window
from throttlelab.analysis.tidy import run_spec
from throttlelab.errors import CatalogueError
from throttlelab.model.catalogue import is_ours
from throttlelab.model.reference import quote
from throttlelab.model.variants import VariantSpec

REPRODUCED = "reproduced"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
NOT_TESTABLE = "not testable here"
#: The middle zone of a directional check (docs/STATISTICS.md §5): the interval excludes no effect but does not clear
#: the model's threshold. Shown, never counted as reproduced.
WEAKER = "direction reproduced, weaker than modelled"
#: The requirement a check gated by a premise names when the premise failed (docs/STATISTICS.md §5).
PREMISE_HELD = "a premise that holds"
#: The requirement of a check whose variants the profile leaves out (another profile runs them): the profile's
#: scope, not this machine's. Such a check is set aside and the finding judged on its other decisive checks
#: (docs/STATISTICS.md §5: a requirement belongs to the checks that need it, never to the whole finding), when it has one.
IN_THIS_PROFILE = "variants in this profile"
#: runs.csv's cpu_accel of a CPU that QEMU emulates (TCG): its clock is not a real node's
EMULATED_ACCEL = "tcg"
#: The requirement every timed check (ratio, level) has: a CPU whose timing is real.
REAL_TIME_CPU = "a CPU whose timing is real"
#: The requirement of a check whose threshold was revised after data (docs/STATISTICS.md §5, the threshold registry).
RUNS_AFTER_REVISION = "runs made after its threshold's revision"
#: checks.csv judged_on of a check that every run judges
ALL_RUNS = "all runs"

Relation = Literal[">", "<", "within"]
CheckKind = Literal["ratio", "level", "agreement"]
CheckScale = Literal["log", "linear", "logit", "mean-ratio"]
Estimand = Literal["mean", "median run"]

#: the columns a finding's row and a check's row share, in order: what was measured and the verdict on it
_MEASURED_COLUMNS = [
    "metric",
    "expected",
    "effect",
    "lo",
    "hi",
    "p",
    "p_holm",
    "a12",
    "reference",
    "verdict",
    "reason",
    "method",
]
FINDINGS_COLUMNS = [
    "id",
    "claim",
    "experiments",
    *_MEASURED_COLUMNS,
    #: filled by the catalogue (finding_catalogue.py): the finding's verdict on every run, beside the verdict
    #: above, which judges a check revised after data only on the runs made after its revision
    "verdict_all_runs",
    #: the level the deciding check's interval (lo, hi) was computed and judged at
    "level",
    #: one short line: how many decisive checks hold and, when not all, the check that decided otherwise
    "headline",
    #: the look the deciding check is judged at ("1 of 2", "2 of 2"; "" when its experiment is judged once)
    "look",
]
CHECKS_COLUMNS = [
    "id",
    "check",
    "experiment",
    *_MEASURED_COLUMNS,
    "why",
    "decisive",
    "requirement",
    "role",
    "end",
    "zones",
    #: filled by the catalogue from its threshold registry (finding_catalogue.py); "" from the engine alone
    "threshold_commit",
    "threshold_note",
    #: which runs judged the check: "all runs", or those made at or after its threshold's revision (docs/STATISTICS.md §5)
    "judged_on",
    #: filled by the catalogue: the check's verdict on every run ("" from the engine alone)
    "verdict_all_runs",
    #: the runs of the variant and of the baseline (empty for a level check) the estimate was made from
    "runs",
    "runs_baseline",
    #: the level the verdict was judged at and lo, hi computed at: the confidence level, or the Bonferroni
    #: level over the finding's decisive checks where that decided "contradicted"
    "level",
    #: the check's relation (">", "<", "within") and threshold (threshold_hi: the band's upper end)
    "relation",
    "threshold",
    "threshold_hi",
    #: "no effect", which separates "weaker than modelled" from "contradicted" (empty where there is none)
    "null",
    #: the scale of the estimate: log, linear, logit or mean-ratio (empty for an agreement count)
    "scale",
    #: every run gave the same value (effect): lo, hi are the bound on the mean at the one-sided level
    "tie",
    #: a proportion's count pooled over runs, sum(k) / sum(n), beside effect (the per-run logit's own point)
    "pooled",
    #: the look the check is judged at, "1 of 2" or "2 of 2" (docs/STATISTICS.md §6): the second when a variant it
    #: compares was measured in its experiment's second stage; empty for an experiment judged once, after every run
    "look",
]
#: The label and metric of a check comparing latency quantiles hold "{q}"; what the clumps of its windows
#: support replaces it (p99, p90, p75 or p50, else the maximum over the clumps: :func:`check_window`).
QUANTILE_SLOT = "{q}"
#: What stands in the slot of a check whose quantile could not be chosen (its experiment or variants absent,
#: too few requests per run): the tables never carry the slot itself.
UNCHOSEN_QUANTILE = "quantile"


def unchosen(check: Check) -> Check:
    """The check as the tables name it when its quantile was not chosen: "work quantile two-limit / one-double"."""
    return replace(
        check,
        label=check.label.replace(QUANTILE_SLOT, UNCHOSEN_QUANTILE),
        metric=check.metric.replace(QUANTILE_SLOT, UNCHOSEN_QUANTILE),
    )


class Unmet(Exception):
    """A requirement of a check does not hold on this evidence: its name and the numeric reason."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class Since:
    """A check revised after data is judged only on the runs made at or after its revision (docs/STATISTICS.md §5):
    ``when`` (aware), and the revision as the reasons name it ("a5a8721 of 2026-12-02T12:29:26+00:00")."""

    when: datetime
    revision: str

    def __post_init__(self) -> None:
        if self.when.tzinfo is None:
            raise ValueError(f"revision {self.revision}: its time {self.when} has no UTC offset")


def run_started(start: object) -> datetime | None:
    """A run's start time (runs.csv ``start``, the meta record's ISO 8601), None where it is missing or not one."""
    if not isinstance(start, str) or not start:
        return None
    try:
        when = datetime.fromisoformat(start)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Look:
    """An experiment measured in two stages (docs/STATISTICS.md §6): its two looks' levels (two-sided, as
    :attr:`Evidence.level`) and the variants whose second stage was measured, those an open check compared at
    the first look (none: the experiment stopped there)."""

    levels: tuple[float, float]
    going_on: frozenset[str] = frozenset()

    #: the looks an experiment measured in two stages has
    COUNT: ClassVar[int] = 2

    def index(self, check: Check) -> int:
        """The look ``check`` is judged at: the second when a variant it compares (any of the experiment's, for a
        check that names none) was measured in the second stage, else the first, on the same runs it was
        decided on there."""
        if not self.going_on:
            return 1
        compared = set(check.variants_needed())
        return 2 if not compared or compared & self.going_on else 1

    def level(self, check: Check) -> float:
        return self.levels[self.index(check) - 1]

    def describe(self, check: Check) -> str:
        return f"{self.index(check)} of {self.COUNT}"


@dataclass(frozen=True)
class Evidence:
    """What the findings are evaluated on: the tidy tables and the profile's experiments."""

    metrics: pd.DataFrame
    runs: pd.DataFrame
    headers: pd.DataFrame
    profile_experiments: frozenset[str]
    level: float = 0.95
    #: "experiment/variant" -> why the backend left it out of the plan (model/coverage.py)
    left_out: Mapping[str, str] = field(default_factory=dict)
    #: the runs the variants' parameters are read from: the design's, all the runs the tables hold, kept when
    #: a sensitivity check leaves some runs out (None: :attr:`runs`)
    design_runs: pd.DataFrame | None = None
    #: experiment -> its two looks, for the experiments measured in two stages; every other experiment is judged
    #: once, at :attr:`level`
    looks: Mapping[str, Look] = field(default_factory=dict)

    def level_of(self, check: Check) -> float:
        """The level a check is judged at: its look's (:meth:`Look.level`), else the confidence level."""
        look = self.looks.get(check.experiment)
        return self.level if look is None else look.level(check)

    def look_of(self, check: Check) -> str:
        """The look a check is judged at, in words ("1 of 2"; "" for an experiment judged once)."""
        look = self.looks.get(check.experiment)
        return "" if look is None else look.describe(check)

    def variants(self, experiment: str) -> set[str]:
        return self._variants.get(experiment, set())

    @functools.cached_property
    def _variants(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for experiment, variant in zip(self.runs["experiment"], self.runs["variant"]):
            out.setdefault(experiment, set()).add(variant)
        return out

    @functools.cached_property
    def _values(self) -> dict[tuple[str, str, str], np.ndarray]:
        m = self.metrics.sort_values("repeat", kind="stable")
        return {
            key: group["value"].to_numpy(dtype=float)
            for key, group in m.groupby(["experiment", "variant", "metric"], sort=False)
        }

    def values(self, experiment: str, variant: str, metric: str) -> np.ndarray:
        """One value per run, in repeat order."""
        return self._values.get((experiment, variant, metric), np.empty(0)).copy()

    @property
    def _design(self) -> pd.DataFrame:
        return self.runs if self.design_runs is None else self.design_runs

    @functools.cached_property
    def _specs(self) -> dict[tuple[str, str], VariantSpec]:
        first = self._design.drop_duplicates(["experiment", "variant"])
        return {(row["experiment"], row["variant"]): run_spec(row) for row in first.to_dict("records")}

    def spec(self, experiment: str, variant: str) -> VariantSpec:
        """The variant's parameters (all its runs share them), from runs.csv's ``param_*`` columns."""
        return self._specs[(experiment, variant)]

    def num_cpus(self, experiment: str, variant: str | None = None) -> set[int]:
        """runtime.NumCPU() as the experiment's (or one variant's) workload processes saw it."""
        h = self.headers[self.headers["experiment"] == experiment]
        if variant is not None and "variant" in h.columns:
            h = h[h["variant"] == variant]
        return set(h["num_cpu"].dropna().astype(int))

    def num_cpu(self, experiment: str, variant: str) -> int:
        """The one CPU count a variant's processes saw; :class:`Unmet` when it is missing or differs."""
        cpus = self._node.get((experiment, variant), (set(), None))[0]
        if len(cpus) != 1:
            seen = ", ".join(map(str, sorted(cpus))) or "none"
            raise Unmet(
                "one node size",
                f"{experiment} {variant}'s processes saw num_cpu {seen}: the model needs one number of CPUs",
            )
        return next(iter(cpus))

    def period_ms(self, experiment: str, variant: str) -> float:
        """The CFS period of a variant's cgroup (its headers' cg_period_us), 100 ms when unread."""
        period = self._node.get((experiment, variant), (set(), None))[1]
        return 100.0 if period is None else period

    @functools.cached_property
    def _node(self) -> dict[tuple[str, str], tuple[set[int], float | None]]:
        out: dict[tuple[str, str], tuple[set[int], float | None]] = {}
        h = self.headers
        if "variant" not in h.columns or h.empty:
            return out
        for (experiment, variant), group in h.groupby(["experiment", "variant"], sort=False):
            periods = group["cg_period_us"].dropna() if "cg_period_us" in group.columns else pd.Series(dtype=float)
            out[(experiment, variant)] = (
                set(group["num_cpu"].dropna().astype(int)),
                float(periods.iloc[0]) / 1000 if len(periods) else None,
            )
        return out

    @functools.cached_property
    def _disturbed(self) -> dict[tuple[str, str], int]:
        if "disturbed" not in self.runs.columns:
            return {}
        flags = self.runs.assign(d=self.runs["disturbed"].fillna(False).astype(bool))
        return {key: int(group["d"].sum()) for key, group in flags.groupby(["experiment", "variant"], sort=False)}

    def emulated(self, experiment: str, variants: Sequence[str] = ()) -> int:
        """Runs of the experiment (of ``variants`` only, when given) measured on an emulated CPU (a
        TCG guest of the vm backend, runs.csv's cpu_accel)."""
        runs = self.runs
        if "cpu_accel" not in runs.columns or runs.empty:
            return 0
        mine = runs[runs["experiment"] == experiment]
        if variants:
            mine = mine[mine["variant"].isin(list(variants))]
        return int((mine["cpu_accel"].fillna("").astype(str) == EMULATED_ACCEL).sum())

    def disturbed(self, experiment: str, variant: str) -> int:
        """Runs of the variant still disturbed after their retries (kept and marked, docs/STATISTICS.md §2)."""
        return self._disturbed.get((experiment, variant), 0)

    def attempts(self, experiment: str, variant: str) -> int:
        """Attempts measured for the variant's runs: each run's own and its disturbed earlier attempts."""
        runs = self.runs
        if runs.empty:
            return 0
        mine = runs[(runs["experiment"] == experiment) & (runs["variant"] == variant)]
        earlier = mine["disturbed_attempts"].fillna(0).astype(int).sum() if "disturbed_attempts" in mine else 0
        return len(mine) + int(earlier)

    def without_disturbed(self) -> Evidence:
        """The same evidence without the runs still disturbed after their retries (for a sensitivity check)."""
        return self._without_disturbed

    @functools.cached_property
    def _without_disturbed(self) -> Evidence:
        if "disturbed" not in self.runs.columns:
            return self
        flagged = self.runs["disturbed"].fillna(False).astype(bool)
        gone = set(
            zip(
                self.runs.loc[flagged, "experiment"],
                self.runs.loc[flagged, "variant"],
                self.runs.loc[flagged, "repeat"].astype(int),
            )
        )
        if not gone:
            return self

        def keep(frame: pd.DataFrame) -> pd.DataFrame:
            if frame.empty or "repeat" not in frame.columns:
                return frame
            keys = zip(frame["experiment"], frame["variant"], frame["repeat"].astype(int))
            return frame[[key not in gone for key in keys]]

        return replace(
            self, metrics=keep(self.metrics), runs=keep(self.runs), headers=keep(self.headers), design_runs=self._design
        )

    def made_since(self, when: datetime) -> Evidence:
        """The same evidence with only the runs made at or after ``when`` (their start time, runs.csv ``start``):
        a run without a readable start time cannot show that it was, and is left out."""
        if self.runs.empty:
            return self
        starts = self.runs["start"] if "start" in self.runs.columns else pd.Series([None] * len(self.runs))
        made = [s is not None and s >= when for s in map(run_started, starts)]
        kept = set(
            zip(
                self.runs.loc[made, "experiment"],
                self.runs.loc[made, "variant"],
                self.runs.loc[made, "repeat"].astype(int),
            )
        )

        def keep(frame: pd.DataFrame) -> pd.DataFrame:
            if frame.empty or "repeat" not in frame.columns:
                return frame
            keys = zip(frame["experiment"], frame["variant"], frame["repeat"].astype(int))
            return frame[[key in kept for key in keys]]

        return replace(
            self, metrics=keep(self.metrics), runs=keep(self.runs), headers=keep(self.headers), design_runs=self._design
        )

    def blocks(self, experiment: str, variant: str, baseline: str, metric: str) -> tuple[np.ndarray, np.ndarray, int]:
        """The two arms' values of ``metric`` paired by repeat, over the repeats both hold whose runs drew their
        arrivals from one seed (runs.csv ``arrival_seed``), in repeat order; and the number of repeats both
        hold that did not (a seed missing or different)."""

        def by_repeat(v: str) -> dict[int, float]:
            m = self.metrics
            mine = m[(m["experiment"] == experiment) & (m["variant"] == v) & (m["metric"] == metric)]
            return dict(zip(mine["repeat"].astype(int), mine["value"].astype(float)))

        def seeds_of(v: str) -> dict[int, object]:
            r = self.runs
            if "arrival_seed" not in r.columns:
                return {}
            mine = r[(r["experiment"] == experiment) & (r["variant"] == v)]
            return {int(k): s for k, s in zip(mine["repeat"], mine["arrival_seed"]) if not pd.isna(s)}

        va, vb = by_repeat(variant), by_repeat(baseline)
        sa, sb = seeds_of(variant), seeds_of(baseline)
        both = sorted(set(va) & set(vb))
        paired = [k for k in both if k in sa and k in sb and sa[k] == sb[k]]
        a = np.array([va[k] for k in paired], dtype=float)
        b = np.array([vb[k] for k in paired], dtype=float)
        return a, b, len(both) - len(paired)

    def run_count(self, experiment: str, variants: Sequence[str] = ()) -> int:
        """Runs of the experiment (of ``variants`` only, when given)."""
        mine = self.runs[self.runs["experiment"] == experiment] if not self.runs.empty else self.runs
        if variants and not mine.empty:
            mine = mine[mine["variant"].isin(list(variants))]
        return len(mine)


@dataclass(frozen=True)
class Requirement:
    """A named condition a check needs; ``test`` returns the numeric reason it fails, or None."""

    name: str
    test: Callable[[Evidence], str | None]


@dataclass(frozen=True)
class Derivation:
    """A threshold derived from the model of docs/LAB.md §1 and the variant's parameters, with its derivation."""

    threshold: tuple[float, ...]
    why: str
    #: which end of the model's range the threshold took where a parameter is not pinned down, and why
    #: (docs/STATISTICS.md §5, least-favourable end); "" where the model has no free parameter
    end: str = ""
    #: (divisor, name): the estimate is also shown as a share of it ("59% of the limit")
    share_of: tuple[float, str] | None = None


@dataclass(frozen=True)
class Check:
    """One measurable consequence of a claim.

    ``kind``: "ratio" compares ``variant`` with ``baseline``; "level" compares ``variant``'s own
    estimate with the threshold; "agreement" counts the variants whose ``metric`` equals
    ``baseline`` (a second metric) in every run. ``threshold`` is one number for ">" and "<",
    (low, high) for "within"; ``derive`` computes it (and its derivation) from the evidence's
    parameters instead (called with the check as resolved: its quantile chosen), raising
    :class:`Unmet` when the model says the check cannot show anything here. ``values`` computes each run's value from several metrics (the metric names
    the quantity). A check that is not ``decisive`` (a premise, an explanation) must hold for
    the finding to be reproduced but cannot contradict it.
    """

    label: str
    kind: CheckKind
    experiment: str
    metric: str
    variant: str
    baseline: str | None
    relation: Relation
    scale: CheckScale
    why: str
    threshold: tuple[float, ...] = ()
    derive: Callable[[Evidence, Check], Derivation] | None = None
    requirements: tuple[Requirement, ...] = ()
    decisive: bool = True
    #: the endpoint whose per-run request counts choose the quantile of "{q}" in label and metric
    quantile_of: str | None = None
    values: Callable[[Evidence, str], np.ndarray] | None = None
    #: the lab's figure the check compares with; :func:`cite` fills it (model/reference.py, or ours)
    reference: str = ""
    #: a premise of the design (not decisive): when it fails, the checks it gates are "not testable here:
    #: premise failed"; when it is undecided, they cannot decide (docs/STATISTICS.md §5)
    premise: bool = False
    #: the labels (as written, "{q}" included) of the checks a premise gates; empty: every other check
    gates: tuple[str, ...] = ()
    #: "no effect" for the three zones of a directional check (docs/STATISTICS.md §5); None: the default of its kind
    #: (1 for a ratio on the log or mean-ratio scale, 0 for a difference; none for a level check)
    null: float | None = None
    #: for a fixed threshold: which end of the model it took (a derived one says it in its Derivation)
    end: str = ""
    #: how a disturbed run can move the check's value (docs/STATISTICS.md §2: each finding may tolerate more or
    #: less): "sensitive" (a tail, a time, a level: other work on the run's CPUs delays the workload, so
    #: a verdict that hangs on disturbed runs is inconclusive) or "insensitive" (a ratio of shares of one
    #: contended CPU measured in the same run: other work there takes from every member in proportion
    #: to its weight, so the ratio's expected value does not move, and disturbed runs count as any other)
    disturbance: Literal["sensitive", "insensitive"] = "sensitive"
    #: what the check's interval estimates, fixed by its definition whatever the data (docs/STATISTICS.md §3): "mean"
    #: (the mean over runs, or a ratio of means or of geometric means: every t, Welch, Fieller and logit
    #: interval) or "median run" (the typical run's value, a claim about what each run counts: the
    #: order-statistic interval, ties or not)
    estimand: Estimand = "mean"
    #: the possible range of the per-run value, which bounds the mean when every run gave the same value
    #: (stats.mean_tie_bound); None: [0, 1] for a proportion (scale "logit"), else [0, inf)
    value_range: tuple[float, float] | None = None
    #: a ratio judged block by block (stats.compare_paired): the variant's and the baseline's runs of one repeat
    #: ran side by side on one arrival seed (model/seeds.py), and the interval is the per-block log ratio's;
    #: blocks whose two runs did not share their arrivals pair nothing (docs/STATISTICS.md §4)
    paired: bool = False

    def __post_init__(self) -> None:
        if self.paired and (self.kind != "ratio" or self.scale != "log" or self.values is not None):
            raise ValueError(
                f"check {self.label!r}: paired=True needs a ratio on the log scale of a metric's own per-run values "
                f"(kind {self.kind!r}, scale {self.scale!r}{', values computed' if self.values else ''})"
            )

    @property
    def role(self) -> str:
        """decisive, premise or supporting (shown, deciding nothing)."""
        return "premise" if self.premise else "decisive" if self.decisive else "supporting"

    def no_effect(self) -> float | None:
        """The value of "no effect" that separates "weaker than modelled" from "contradicted"."""
        if self.relation == "within" or self.kind == "agreement" or self.premise:
            return None
        if self.null is not None:
            return self.null
        if self.kind == "ratio":
            return 0.0 if self.scale == "linear" else 1.0
        return None

    def expected(self, threshold: Sequence[float] | None = None) -> str:
        bounds = tuple(self.threshold if threshold is None else threshold)
        if self.kind == "agreement":
            return f"{self.metric} = {self.baseline} in every {self.experiment} variant"
        if not bounds:
            return f"{self.label} {self.relation} (threshold not derived)"
        if self.relation == "within":
            return f"{self.label} within [{bounds[0]:.3g}, {bounds[1]:.3g}]"
        return f"{self.label} {self.relation} {bounds[0]:.3g}"

    def possible_range(self) -> tuple[float, float]:
        """The per-run value's possible range (:attr:`value_range`, or its default by scale)."""
        if self.value_range is not None:
            return self.value_range
        return (0.0, 1.0) if self.scale == "logit" else (0.0, math.inf)

    def variants_needed(self) -> tuple[str, ...]:
        if self.kind == "agreement":
            return ()
        return tuple(v for v in (self.variant, self.baseline) if v is not None)


@dataclass(frozen=True)
class Finding:
    """A claim of the lab (or, ``ours``, of the project beyond it), with the checks that would show it here."""

    id: str
    claim: str
    checks: tuple[Check, ...]
    #: the lab's figures the claim rests on; :func:`cite` fills it (model/reference.py, or ours)
    reference: str = ""
    #: experiments the claim also rests on that no check here covers yet
    not_covered: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        named = tuple(dict.fromkeys((*self.experiments, *self.not_covered)))
        try:
            sides = {is_ours(e) for e in named}
        except CatalogueError as exc:
            raise CatalogueError(f"finding {self.id}: {exc}") from None
        if len(sides) > 1:
            raise ValueError(
                f"finding {self.id} rests on experiments of the lab's and of ours ({', '.join(named)}; "
                "model/catalogue.py): a claim is one or the other"
            )

    @property
    def experiments(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.experiment for c in self.checks))

    @property
    def ours(self) -> bool:
        """A claim of ours beyond the lab (docs/EXPERIMENTS.md), its sentence written before the data: the
        experiments it rests on are ours (their catalogue rows say so)."""
        return bool(self.experiments) and all(is_ours(e) for e in self.experiments)

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.metric for c in self.checks))


@dataclass(frozen=True)
class CheckResult:
    finding: str
    check: Check
    label: str = ""
    metric: str = ""
    threshold: tuple[float, ...] = ()
    why: str = ""
    effect: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    p: float = math.nan
    p_holm: float = math.nan
    min_p: float = math.nan
    a12: float = math.nan
    verdict: str = INCONCLUSIVE
    reason: str = ""
    method: str = ""
    #: the named requirements that failed ("" when none)
    requirement: str = ""
    #: which end of the model the threshold took (Derivation.end, or the check's own)
    end: str = ""
    share_of: tuple[float, str] | None = None
    #: which runs judged it: :data:`ALL_RUNS`, or those made after its threshold's revision
    judged_on: str = ALL_RUNS
    #: the level lo, hi were computed and the verdict judged at (NaN where nothing was evaluated)
    level: float = math.nan
    #: the runs of the variant and of the baseline the estimate was made from (0: none, or no baseline)
    runs: int = 0
    runs_baseline: int = 0
    #: every run gave ``effect``: lo, hi are the bound on the mean (stats.mean_tie_bound)
    tie: bool = False
    #: a proportion's pooled count sum(k) / sum(n), beside ``effect``, the per-run logit's own point
    pooled: float = math.nan
    #: the look it is judged at ("1 of 2"; "" for an experiment judged once)
    look: str = ""

    @property
    def zones(self) -> str:
        """The zones of this check's verdict, in words (docs/STATISTICS.md §5)."""
        c, t = self.check, self.threshold
        if c.kind == "agreement":
            return "deterministic: every variant on the rule, or contradicted"
        if not t:
            return ""
        if c.relation == "within":
            return f"reproduced: the whole interval inside {_bounds('within', t)}; contradicted: wholly outside"
        null = c.no_effect()
        other = ">" if c.relation == "<" else "<"
        if null is None or null == t[0] or (c.relation == ">") != (null < t[0]):
            return f"reproduced: the interval {c.relation} {t[0]:.3g}; contradicted: {other} {t[0]:.3g}"
        return (
            f"reproduced: the interval {c.relation} {t[0]:.3g}; {WEAKER}: between {null:g} and {t[0]:.3g}; "
            f"contradicted: {other} {null:g}"
        )

    @property
    def expected(self) -> str:
        return replace(self.check, label=self.label or self.check.label).expected(self.threshold)


#: What a claim of ours beyond the lab, and each of its checks, cites in place of the lab's figures.
OURS_REFERENCE = "none: ours, not the lab's (hypothesis written before the data, docs/EXPERIMENTS.md)"


def cite(finding: Finding) -> Finding:
    """The finding with what it cites, by the catalogue's ``ours`` column of its experiments
    (:attr:`Finding.ours`): a claim of ours cites :data:`OURS_REFERENCE`, the claim and every check;
    a claim of the lab's its figures (model/reference.py QUOTES), its sentence, and each check's figure
    by the check's label. A check that already names its figure keeps it."""
    if finding.ours:
        checks = tuple(
            check if check.reference else replace(check, reference=OURS_REFERENCE) for check in finding.checks
        )
        return replace(finding, reference=finding.reference or OURS_REFERENCE, checks=checks)
    quoted = quote(finding.id)
    checks = tuple(
        check if check.reference else replace(check, reference=quoted.checks[check.label]) for check in finding.checks
    )
    return replace(finding, reference=finding.reference or quoted.claim, checks=checks)


# --------------------------------------------------------------------------
# evaluating one check


def interval_verdict(
    lo: float, hi: float, relation: Relation, threshold: Sequence[float], null: float | None = None
) -> str:
    """stats.verdict for ">" and "<"; "within [a, b]" holds only when the whole interval lies inside
    the band (both one-sided relations hold: TOST), and is contradicted when it lies wholly outside.

    With ``null`` (no effect) on the other side of a directional threshold, three zones (docs/STATISTICS.md §5):
    reproduced when the interval clears the threshold, :data:`WEAKER` when it lies wholly between
    no effect and the threshold, contradicted only when it excludes the claimed direction (wholly
    on the other side of no effect); inconclusive otherwise."""
    if relation != "within":
        plain = stats.verdict(lo, hi, threshold[0], relation)
        zoned = null is not None and ((null < threshold[0]) if relation == ">" else (null > threshold[0]))
        if not zoned or plain == REPRODUCED:
            return plain
        if stats.verdict(lo, hi, null, relation) == REPRODUCED:
            return WEAKER if plain == CONTRADICTED else INCONCLUSIVE
        if stats.verdict(lo, hi, null, relation) == CONTRADICTED:
            return CONTRADICTED
        return INCONCLUSIVE
    above = stats.verdict(lo, hi, threshold[0], ">")
    below = stats.verdict(lo, hi, threshold[1], "<")
    if CONTRADICTED in (above, below):
        return CONTRADICTED
    if above == below == REPRODUCED:
        return REPRODUCED
    return INCONCLUSIVE


def runs_to_decide(
    v: float,
    runs: int,
    relation: Relation,
    threshold: Sequence[float],
    level: float,
    value_range: tuple[float, float] = (0.0, math.inf),
    null: float | None = None,
) -> int:
    """The fewest runs, all at ``v``, whose bound on the mean (stats.mean_tie_bound) decides the check at
    ``level``; 0 when no number of runs can (an upper end the counter does not have). The bound shrinks as
    runs are added, so the first count that decides is found by bisection."""

    def decided(n: int) -> bool:
        lo, hi = stats.mean_tie_bound(v, n, *value_range, level=level)
        return interval_verdict(lo, hi, relation, threshold, null) != INCONCLUSIVE

    most = 10**7
    if not decided(most):
        return 0
    low, high = runs, most
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if decided(mid) else (mid, high)
    return high


def tie_verdict(
    v: float,
    runs: int,
    relation: Relation,
    threshold: Sequence[float],
    level: float = 0.95,
    value_range: tuple[float, float] = (0.0, math.inf),
    null: float | None = None,
) -> tuple[str, float, float, str]:
    """The verdict of a mean whose every one of ``runs`` runs gave exactly ``v`` (an exact counter's tie, or
    an exact zero), at the check's ``level`` (docs/STATISTICS.md §3): the bound on the mean (stats.mean_tie_bound)
    judged as any interval; when it cannot decide, inconclusive, naming the runs the level needs. Returns
    (verdict, lo, hi, reason)."""
    lo, hi = stats.mean_tie_bound(v, runs, *value_range, level=level)
    verdict = interval_verdict(lo, hi, relation, threshold, null)
    seen = f"{v:g} in all {runs} runs"
    if verdict == INCONCLUSIVE:
        needed = runs_to_decide(v, runs, relation, threshold, level, value_range, null)
        why = (
            f"{seen}: {stats.cannot_reach(runs, level, needed)}: the mean lies in [{lo:.3g}, {hi:.3g}] "
            f"(a run may differ with probability up to {1 - stats.one_sided_level(level) ** (1 / runs):.3g})"
        )
        if needed == 0:
            why += "; the value has no upper end, so identical runs never bound the mean from above"
        return verdict, lo, hi, why
    reason = _interval_reason(verdict, "", lo, hi, relation, threshold, "the mean", null)
    return verdict, lo, hi, "; ".join(x for x in (f"{seen} (the bound on the mean at level {level:.4g})", reason) if x)


def _bounds(relation: Relation, threshold: Sequence[float]) -> str:
    if relation == "within":
        return "[" + ", ".join(f"{t:.3g}" for t in threshold) + "]"
    return f"{threshold[0]:.3g}"


def _interval_reason(
    verdict: str,
    flag: str,
    lo: float,
    hi: float,
    relation: Relation,
    threshold: Sequence[float],
    what: str,
    null: float | None = None,
) -> str:
    """Why an interval did not reproduce the check (empty when it did)."""
    if verdict == REPRODUCED:
        return ""
    if math.isnan(lo) or math.isnan(hi):
        return f"no interval for {what} ({flag or 'no spread'})"
    bounds = _bounds(relation, threshold)
    if verdict == WEAKER:
        return (
            f"the interval [{lo:.3g}, {hi:.3g}] of {what} lies between no effect ({null:g}) and the model's "
            f"threshold {bounds}: the direction holds, the size the model predicts does not"
        )
    zoned = null is not None and relation != "within" and null != threshold[0]
    if verdict == CONTRADICTED and zoned:
        return f"the interval [{lo:.3g}, {hi:.3g}] of {what} lies wholly on the other side of no effect ({null:g})"
    if verdict == CONTRADICTED:
        return f"the interval [{lo:.3g}, {hi:.3g}] of {what} lies wholly on the other side of {bounds}"
    if relation == "within":
        return f"the interval [{lo:.3g}, {hi:.3g}] of {what} is not wholly inside {bounds}"
    return f"the interval [{lo:.3g}, {hi:.3g}] of {what} reaches {bounds}"


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateWarning)
        return fn()


def run_values(check: Check, evidence: Evidence, variant: str, metric: str) -> np.ndarray:
    if check.values is not None:
        return np.asarray(check.values(evidence, variant), dtype=float)
    return evidence.values(check.experiment, variant, metric)


def _undefined(values: np.ndarray, metric: str, variant: str) -> str | None:
    if values.size == 0:
        return f"no runs of {variant} with {metric}"
    bad = int(np.isnan(values).sum())
    if bad:
        return f"{metric} of {variant} is undefined in {bad} of {values.size} runs"
    return None


def evaluate_ratio(base: CheckResult, evidence: Evidence, level: float | None = None) -> CheckResult:
    level = evidence.level_of(base.check) if level is None else level
    check, metric, threshold = base.check, base.metric, base.threshold
    if check.paired:
        a, b, unpaired = evidence.blocks(check.experiment, check.variant, check.baseline, metric)
        if unpaired:
            return replace(
                base,
                reason=f"{unpaired} repeat(s) ran {check.variant} and {check.baseline} on different or unrecorded "
                "arrival seeds (runs.csv arrival_seed): the check compares blocks that shared their arrivals",
            )
    else:
        a = run_values(check, evidence, check.variant, metric)
        b = run_values(check, evidence, check.baseline, metric)
    problem = _undefined(a, metric, check.variant) or _undefined(b, metric, check.baseline)
    if problem:
        return replace(base, reason=problem)
    label = f"per-run {metric}"
    if check.scale == "log" and (a.min() <= 0 or b.min() <= 0):  # a paired check is on the log scale too
        zeros = int((a <= 0).sum() + (b <= 0).sum())
        return replace(base, reason=f"{metric} is 0 in {zeros} runs, so no ratio of geometric means exists")
    if check.paired:
        cmp = _quiet(lambda: stats.compare_paired(a, b, level=level, label=label))
        what = "the ratio"
    elif check.scale == "mean-ratio":
        cmp = _quiet(lambda: stats.ratio_of_means(a, b, level=level, label=label, test=False))
        what = "the ratio of means"
    elif check.scale in ("log", "linear"):
        log = check.scale == "log"
        cmp = _quiet(lambda: stats.compare(a, b, log=log, level=level, label=label, test=False))
        what = "the ratio" if log else "the difference"
    else:
        raise ValueError(f"a ratio check cannot use scale {check.scale!r}")
    shown_p = check.relation != "within" and not check.premise and check.scale in ("log", "linear")
    # the p shown tests the check's own threshold, one-sided, with the interval's own Welch t (docs/STATISTICS.md §4);
    # a Mann-Whitney p of "equal distributions" decides nothing, so none is shown
    p = (
        (
            stats.threshold_p(a / b, threshold=threshold[0], relation=check.relation, log=True)
            if check.paired
            else stats.threshold_p(a, b, threshold=threshold[0], relation=check.relation, log=check.scale == "log")
        )
        if shown_p and threshold
        else math.nan
    )
    out = replace(
        base,
        runs=a.size,
        runs_baseline=b.size,
        effect=cmp.effect,
        lo=cmp.lo,
        hi=cmp.hi,
        p=p,
        min_p=math.nan,
        a12=cmp.a12 if check.relation != "within" and not check.premise else math.nan,
        method=cmp.method + (f" ({cmp.flag})" if cmp.flag else "") + f"; {estimand(check)}",
    )
    if cmp.flag.startswith("0 in "):
        if not np.all(b > 0):
            return replace(
                out,
                reason=f"{check.variant} is 0 in every run, and so is {check.baseline} in "
                f"{int((b <= 0).sum())} of {b.size}: no ratio to judge",
            )
        return _zero_ratio(out, a.size, stats.estimate(b, log=False, level=level, label=label), level)
    null = check.no_effect()
    verdict = interval_verdict(cmp.lo, cmp.hi, check.relation, threshold, null)
    reasons = [_interval_reason(verdict, cmp.flag, cmp.lo, cmp.hi, check.relation, threshold, what, null)]
    reasons += [part for part in cmp.note.split("; ") if "baseline" in part]
    return replace(out, verdict=verdict, reason="; ".join(r for r in reasons if r))


def _zero_ratio(out: CheckResult, runs: int, baseline: stats.Estimate, level: float) -> CheckResult:
    """A ratio of means whose numerator arm was exactly 0 in every run: its mean lies in [0, pi x its upper end]
    (stats.mean_tie_bound), so the ratio lies in [0, that / the baseline's lower bound]."""
    check = out.check
    low, high = check.possible_range()
    _, top = stats.mean_tie_bound(0.0, runs, low, high, level)
    hi = top / baseline.lo if math.isfinite(top) and baseline.has_interval and baseline.lo > 0 else math.inf
    verdict = interval_verdict(0.0, hi, check.relation, out.threshold, check.no_effect())
    seen = f"{check.variant}: 0 in all {runs} runs"
    if verdict == INCONCLUSIVE:
        reason = f"{seen}: the ratio lies in [0, {hi:.3g}]: " + (
            stats.cannot_reach(runs, level, 0)
            + " (the value has no upper end, so identical runs never bound its mean from above)"
            if not math.isfinite(top)
            else "not decided at this level"
        )
    else:
        reason = f"{seen}: the ratio lies in [0, {hi:.3g}] (the bound on the mean at level {level:.4g})"
    return replace(out, lo=0.0, hi=hi, verdict=verdict, reason=reason, tie=True)


#: the method text of each estimand (checks.csv ``method``): what the interval estimates, fixed by the check
ESTIMAND_MEAN = "estimand: the mean over runs (ties: the bound on the mean)"
ESTIMAND_MEDIAN = "estimand: the median run (order statistics, ties or not)"
_ESTIMAND_OF_SCALE = {
    "log": "estimand: the geometric mean over runs (a ratio of them for two arms)",
    "linear": ESTIMAND_MEAN,
    "mean-ratio": "estimand: the ratio of the arms' means over runs",
    "logit": "estimand: the share over runs (per-run logit; no event in any run: the exact bound of the pooled share)",
}


def estimand(check: Check) -> str:
    """What a check's interval estimates, fixed by its definition (docs/STATISTICS.md §3), as its method text says it."""
    return ESTIMAND_MEDIAN if check.estimand == "median run" else _ESTIMAND_OF_SCALE[check.scale]


def evaluate_level(base: CheckResult, evidence: Evidence, level: float | None = None) -> CheckResult:
    level = evidence.level_of(base.check) if level is None else level
    check, metric, threshold = base.check, base.metric, base.threshold
    label = f"per-run {metric}"
    null = check.no_effect()
    if check.scale == "logit":
        counts = CATALOGUE[metric].counts if metric in CATALOGUE else None
        if counts is None:
            raise ValueError(f"{metric} has no counts: a logit check needs a proportion of counts")
        k = evidence.values(check.experiment, check.variant, counts[0])
        n = evidence.values(check.experiment, check.variant, counts[1])
        problem = _undefined(k, counts[0], check.variant) or _undefined(n, counts[1], check.variant)
        if problem:
            return replace(base, reason=problem)
        est = _quiet(lambda: stats.estimate_proportion(k, n, level=level, label=label))
        if est.flag.startswith("0 in "):
            return _zero_count_result(base, n, level, "periods" if counts[1] == "nr_periods" else "trials")
        base = replace(base, runs=k.size)
        values = np.empty(0)
        centre = stats.mean_logit_share(k, n)
        if est.has_interval and est.lo <= centre <= est.hi:
            # the interval is the per-run logit's (or holds it): the point of that estimand is the back-transformed
            # mean logit; the pooled count (est.point) estimates another quantity, may fall outside, and is kept
            # beside it. Where only the pooled count's exact interval exists, its point stays.
            base = replace(base, pooled=est.point)
            est = replace(
                est,
                point=centre,
                method=est.method + "; the check's point: the back-transformed mean logit (the pooled ratio beside it)",
            )
    else:
        values = run_values(check, evidence, check.variant, metric)
        problem = _undefined(values, metric, check.variant)
        if problem:
            return replace(base, reason=problem)
        base = replace(base, runs=values.size)
        if check.estimand == "median run":
            return _median_run(base, values, level, label)
        censored = np.isinf(values).any() or (check.scale == "log" and values.min() <= 0 and values.max() > 0)
        if check.scale == "log" and censored:
            return _censored(base, values, level, label)
        v = stats.tied(values)
        if v is not None and (_exact(check, metric) or v == 0):
            return _tie_result(base, v, values.size, level, f"{label}, R = {values.size}")
        est = _quiet(lambda: stats.estimate(values, log=check.scale == "log", level=level, label=label))
    method = est.method + (f" ({est.flag})" if est.flag else "")
    p = math.nan
    if check.relation != "within" and not check.premise and check.scale in ("log", "linear") and threshold:
        p = _quiet(
            lambda: stats.threshold_p(values, threshold=threshold[0], relation=check.relation, log=check.scale == "log")
        )
        method += "; one-sided t against the threshold"
    else:
        method += "; one configuration, no test"
    out = replace(base, effect=est.point, lo=est.lo, hi=est.hi, method=f"{method}; {estimand(check)}", p=p)
    verdict = interval_verdict(est.lo, est.hi, check.relation, threshold, null)
    return replace(
        out,
        verdict=verdict,
        reason=_interval_reason(verdict, est.flag, est.lo, est.hi, check.relation, threshold, "the estimate", null),
    )


def _exact(check: Check, metric: str) -> bool:
    """An exact counter (metrics' catalogue), measured directly: the tie rule applies (docs/STATISTICS.md §3)."""
    return check.values is None and metric in CATALOGUE and CATALOGUE[metric].exact


def _tie_result(base: CheckResult, v: float, runs: int, level: float, what: str) -> CheckResult:
    """A mean whose every run gave ``v``: :func:`tie_verdict` at the check's level."""
    check = base.check
    verdict, lo, hi, reason = tie_verdict(
        v, runs, check.relation, base.threshold, level, check.possible_range(), check.no_effect()
    )
    method = (
        f"tie rule for the mean: {v:g} in all {runs} runs of {what}; a run differs with probability at most "
        f"1 - {stats.one_sided_level(level):.3g}^(1/{runs}); {ESTIMAND_MEAN}"
    )
    return replace(base, effect=v, lo=lo, hi=hi, verdict=verdict, reason=reason, method=method, tie=True, runs=runs)


def zero_count_verdict(
    runs: int,
    trials: float,
    relation: Relation,
    threshold: Sequence[float],
    level: float = 0.95,
    null: float | None = None,
    unit: str = "trials",
) -> tuple[str, float, float, str]:
    """The verdict of a share of counts (events in trials) with no event in any of ``runs`` runs, ``trials`` pooled
    over them, at the check's ``level`` (docs/STATISTICS.md §3). Two conditions, both at the one-sided level a of
    ``level`` (Bonferroni included where the check is judged at it): the runs must reach a (0.5^R <= a, the median
    run's level: all R runs at 0 is then no accident of a run-level mode that half the runs would show), and the
    share's exact upper bound over the pooled trials (stats.zero_events_bound, [0, 1 - a^(1/N)]) is judged as any
    interval. Short of either: inconclusive, naming what the level needs. Returns (verdict, lo, hi, reason)."""
    a = stats.one_sided_level(level)
    hi = stats.zero_events_bound(trials, level)
    verdict = interval_verdict(0.0, hi, relation, threshold, null)
    seen = (
        f"0 in all {runs} runs (0 of {trials:g} {unit} pooled; exact upper bound {hi:.3g} at one-sided level {a:.3g})"
    )
    needed = stats.median_runs_needed(level)
    short = []
    if runs < needed:
        short.append(stats.cannot_reach(runs, level, needed))
    if verdict == INCONCLUSIVE:
        bound = threshold[0]  # "within": its lower end, which 0 events can only fall short of
        reason = _interval_reason(verdict, "", 0.0, hi, relation, threshold, "the pooled share", null)
        if 0 < bound <= 1:
            reason += (
                f" (0 events bound it below {bound:.3g} only from {stats.trials_needed(bound, level):,} {unit} pooled)"
            )
        short.append(reason)
    if short:
        return INCONCLUSIVE, 0.0, hi, f"{seen}: " + "; ".join(short)
    reason = _interval_reason(verdict, "", 0.0, hi, relation, threshold, "the pooled share", null)
    return verdict, 0.0, hi, "; ".join(x for x in (seen, reason) if x)


def _zero_count_result(base: CheckResult, trials: np.ndarray, level: float, unit: str) -> CheckResult:
    """A share of counts with no event in any run: :func:`zero_count_verdict` on the runs that counted a trial and
    the trials they pooled."""
    check = base.check
    counted = int((trials > 0).sum())
    pooled = float(trials.sum())
    verdict, lo, hi, reason = zero_count_verdict(
        counted, pooled, check.relation, base.threshold, level, check.no_effect(), unit
    )
    if counted < trials.size:
        reason += f"; {trials.size - counted} of {trials.size} runs counted no {unit} and are no evidence either way"
    a = stats.one_sided_level(level)
    method = (
        f"exact bound of the pooled count: no event in any of {counted} runs, {pooled:g} {unit} pooled as trials; "
        f"the share lies in [0, 1 - {a:.3g}^(1/{pooled:g})] (Clopper-Pearson), decided only from 0.5^R <= {a:.3g} "
        f"(R >= {stats.median_runs_needed(level)}); {estimand(check)}"
    )
    return replace(
        base, effect=0.0, lo=lo, hi=hi, verdict=verdict, reason=reason, method=method, tie=True, runs=counted
    )


def _median_run(base: CheckResult, values: np.ndarray, level: float, label: str) -> CheckResult:
    """A check on the median run: its order-statistic interval at the check's level, ties or not (identical
    runs give [v, v]); with too few runs for that level, inconclusive naming the runs it needs."""
    check = base.check
    est = stats.median_run_interval(values, level=level, label=label)
    v = stats.tied(values)
    seen = f"{v:g} in all {values.size} runs; " if v is not None else ""
    method = f"{est.method}; {ESTIMAND_MEDIAN}"
    out = replace(base, effect=est.point, lo=est.lo, hi=est.hi, method=method)
    if not est.has_interval:
        return replace(out, verdict=INCONCLUSIVE, reason=f"{seen}{est.flag}")
    null = check.no_effect()
    verdict = interval_verdict(est.lo, est.hi, check.relation, base.threshold, null)
    reason = _interval_reason(verdict, "", est.lo, est.hi, check.relation, base.threshold, "the median run", null)
    return replace(out, verdict=verdict, reason="; ".join(x for x in (seen.rstrip("; "), reason) if x))


def _censored(base: CheckResult, values: np.ndarray, level: float, label: str) -> CheckResult:
    """A check on the log scale whose runs include values censored at an end (stats: ``+inf`` where the
    numerator was positive and the denominator not, 0 where the numerator was 0): such a run is evidence on
    its side, not an undefined value. It counts at the farther of the other runs' extreme and the threshold's
    end on its side, and leaves the interval open there: a run above the band never lets it be reproduced,
    and together with the others it can contradict it."""
    check, threshold = base.check, base.threshold
    above, below = int(np.isinf(values).sum()), int((values == 0).sum())
    seen = "; ".join(
        x
        for x in (
            f"{above} of {values.size} runs censored above (a numerator without a denominator)" if above else "",
            f"{below} of {values.size} runs at 0" if below else "",
        )
        if x
    )
    if above and below:
        return replace(base, reason=f"{seen}: the runs lie at both ends, no interval")
    finite = values[np.isfinite(values) & (values > 0)]
    if above:
        fill = max([*finite, *threshold]) if threshold else (finite.max() if finite.size else math.nan)
    else:
        fill = min([*finite, *threshold]) if threshold else (finite.min() if finite.size else math.nan)
    filled = np.where(np.isinf(values) | (values == 0), fill, values)
    est = _quiet(lambda: stats.estimate(filled, log=True, level=level, label=label))
    if above:
        lo, hi = (est.lo if est.has_interval else fill), math.inf
    else:
        lo, hi = 0.0, (est.hi if est.has_interval else fill)
    verdict = interval_verdict(lo, hi, check.relation, threshold, check.no_effect())
    reason = _interval_reason(verdict, est.flag, lo, hi, check.relation, threshold, "the estimate", check.no_effect())
    method = (
        f"{est.method}, each censored run counted at {fill:.3g} and the interval left open on its side; "
        f"{estimand(check)}"
    )
    return replace(
        base,
        effect=est.point,
        lo=lo,
        hi=hi,
        verdict=verdict,
        method=method,
        reason="; ".join(x for x in (seen, reason) if x),
    )


def evaluate_agreement(base: CheckResult, evidence: Evidence, level: float | None = None) -> CheckResult:
    check = base.check
    m = evidence.metrics[evidence.metrics["experiment"] == check.experiment]
    wide = m.pivot_table(index=["variant", "repeat"], columns="metric", values="value", aggfunc="first", dropna=False)
    absent = [name for name in (check.metric, check.baseline) if name not in wide.columns]
    if absent:
        return replace(base, reason=f"no {check.experiment} run reports {' or '.join(absent)}")
    unread = wide[check.metric].isna() | wide[check.baseline].isna()
    if unread.any():
        runs = ", ".join(f"{v} rep{int(r)}" for v, r in wide.index[unread])
        return replace(
            base,
            reason=f"{int(unread.sum())} of {len(wide)} runs lack {check.metric} or "
            f"{check.baseline} ({runs}): the count cannot be made",
            method="exact count of variants whose every run reads back the predicted value",
        )
    run_ok = wide[check.metric] == wide[check.baseline]
    per_variant = run_ok.groupby(level="variant").all()
    matched, total = int(per_variant.sum()), int(per_variant.size)
    off = sorted(per_variant.index[~per_variant])
    verdict = REPRODUCED if matched == total else CONTRADICTED
    reason = f"{matched} of {total} variants ({int(run_ok.sum())} of {run_ok.size} runs) matched the rule"
    if off:
        reason += "; off the rule: " + ", ".join(off)
    return replace(
        base,
        effect=matched / total if total else math.nan,
        verdict=verdict,
        reason=reason,
        method="exact count of variants whose every run reads back the predicted value; deterministic, no interval",
    )


_EVALUATORS = {"ratio": evaluate_ratio, "level": evaluate_level, "agreement": evaluate_agreement}


# --------------------------------------------------------------------------
# requirements every check has


def _presence(check: Check, evidence: Evidence) -> Unmet | None:
    """The check's experiment and variants must be in this profile's tables."""
    if check.experiment not in evidence.profile_experiments:
        # a backend that can run none of an experiment's variants leaves the whole experiment out of the plan:
        # its reasons, not the profile's scope, say why
        backend = _left_out_reasons(check, evidence)
        if backend:
            return Unmet("variants this backend can run", backend)
        return Unmet(
            "experiment in this profile",
            f"{check.experiment} is not in this run (its profile, or the experiments setting, leaves it out)",
        )
    present = evidence.variants(check.experiment)
    if check.kind == "agreement" and not present:
        return Unmet("runs in the tables", f"no {check.experiment} runs in the tables")
    lacking = [v for v in check.variants_needed() if v not in present]
    reasons = [evidence.left_out.get(f"{check.experiment}/{v}") for v in lacking]
    if lacking and all(reasons):
        return Unmet(
            "variants this backend can run",
            "; ".join(f"{check.experiment} {v}: {reason}" for v, reason in zip(lacking, reasons)),
        )
    if lacking:
        return Unmet(IN_THIS_PROFILE, f"variant not in this profile: {check.experiment} {', '.join(lacking)}")
    return None


def _left_out_reasons(check: Check, evidence: Evidence) -> str:
    """Why the backend left out the variants this check needs (an agreement check: every variant of its
    experiment), as "E2b steady-limit: <reason>; ..."; empty unless the backend left out each of them."""
    prefix = f"{check.experiment}/"
    needed = check.variants_needed() or tuple(
        key[len(prefix) :] for key in sorted(evidence.left_out) if key.startswith(prefix)
    )
    reasons = [evidence.left_out.get(f"{prefix}{v}") for v in needed]
    if not needed or not all(reasons):
        return ""
    return "; ".join(f"{check.experiment} {v}: {reason}" for v, reason in zip(needed, reasons))


def _real_time(check: Check, evidence: Evidence) -> Unmet | None:
    """Ratio and level checks compare what was timed (durations, throttled time, CPU shares over
    a window); on an emulated CPU (TCG) those are QEMU's, not a node's. Agreement checks compare
    settings read back (GOMAXPROCS, weights) and hold on any CPU."""
    if check.kind == "agreement":
        return None
    emulated = evidence.emulated(check.experiment, check.variants_needed())
    if not emulated:
        return None
    return Unmet(
        REAL_TIME_CPU,
        f"emulated CPU (TCG): {emulated} {check.experiment} run(s) of "
        f"{', '.join(check.variants_needed())} ran in a QEMU guest without KVM, where "
        "wall-clock timing is not a real node's; run the vm backend with KVM "
        "(vm.accel: kvm) or on a host",
    )


def check_window(check: Check, evidence: Evidence) -> WindowQuantile:
    """What a latency check compares, chosen from the design before any data (docs/STATISTICS.md §2): the
    highest quantile the independent clumps of its windows support, or the maximum over them, for the variant
    whose window holds the fewest clumps (both sides are compared at the same statistic). :class:`Unmet` when
    the design fixes no count (a closed loop) or its window holds no clump."""
    if check.quantile_of is None:
        raise ValueError(f"{check.label}: not a latency check (no quantile_of)")
    specs = {v: evidence.spec(check.experiment, v) for v in check.variants_needed()}
    clumps = {v: spec.window_clumps(check.quantile_of) for v, spec in specs.items()}
    unset = [v for v, n in clumps.items() if n is None]
    if unset:
        raise Unmet(
            "the variant's parameters",
            f"{', '.join(unset)}: no open-loop rate and window, so the design fixes no count of clumps to choose "
            "a quantile from",
        )
    window = compared_window(specs, check.quantile_of)
    if window is None:
        fewest = min(clumps, key=lambda v: clumps[v])
        raise Unmet(
            "clumps per run for a quantile",
            f"the design schedules no /{check.quantile_of} clump in {fewest}'s window (rate x window / clump "
            "rounds to 0): there is no latency to compare",
        )
    return window


def _resolve_quantile(check: Check, evidence: Evidence) -> tuple[Check, str]:
    """The check with "{q}" replaced by what its windows support (:func:`check_window`: "p75", or "max over 5
    clumps" in the label and ``work_max_ms`` as the metric), and the derivation of that choice. A run that ends
    up with fewer requests than that quantile needs has no value for it, and the check says so."""
    if check.quantile_of is None:
        return check, ""
    window = check_window(check, evidence)
    resolved = replace(
        check,
        label=check.label.replace(QUANTILE_SLOT, window.shown),
        metric=check.metric.replace(QUANTILE_SLOT, window.name.replace(".", "_")),
    )
    return resolved, window.explain(check.quantile_of) + " "


# --------------------------------------------------------------------------
# findings -> tables


def _unmet_before_measuring(finding: str, check: Check, unmet: Unmet) -> CheckResult:
    """A check not testable here before anything is measured: its requirement and the numeric reason."""
    shown = unchosen(check)
    return CheckResult(
        finding,
        check,
        label=shown.label,
        metric=shown.metric,
        threshold=check.threshold,
        why=check.why,
        verdict=NOT_TESTABLE,
        requirement=unmet.name,
        reason=f"needs {unmet.name}: {unmet.reason}",
    )


def evaluate_check(finding: str, check: Check, evidence: Evidence, level: float | None = None) -> CheckResult:
    """One check: its requirements, its threshold, its measurement and its verdict (its interval at
    ``level``, the level of the look it is judged at unless told otherwise)."""
    unmet: list[Unmet] = []
    absent = _presence(check, evidence)
    if absent:
        return _unmet_before_measuring(finding, check, absent)
    resolved, why = check, check.why
    timing = _real_time(check, evidence)
    if timing:
        unmet.append(timing)
    try:
        resolved, chosen = _resolve_quantile(check, evidence)
        why = chosen + why
    except Unmet as exc:
        unmet.append(exc)
    for requirement in check.requirements:
        try:
            problem = requirement.test(evidence)
        except Unmet as exc:
            problem = exc.reason
        except ValueError as exc:
            problem = f"the variant's parameters: {exc}"
        if problem:
            unmet.append(Unmet(requirement.name, problem))
    threshold = check.threshold
    end, share_of = check.end, None
    if check.derive is not None and QUANTILE_SLOT not in resolved.metric:
        try:
            derived = check.derive(evidence, resolved)
            threshold, why = derived.threshold, why + (" " if why else "") + derived.why
            end, share_of = derived.end or end, derived.share_of
        except Unmet as exc:
            unmet.append(exc)
        except ValueError as exc:  # the model lacks a parameter it needs (a variant from an older profile)
            unmet.append(Unmet("the variant's parameters", str(exc)))
    shown = unchosen(resolved)  # the check itself when its quantile was chosen (or it has none)
    base = CheckResult(
        finding,
        check,
        label=shown.label,
        metric=shown.metric,
        threshold=threshold,
        why=why,
        end=end,
        share_of=share_of,
        level=evidence.level_of(check) if level is None else level,
        look=evidence.look_of(check),
    )
    result = base
    if threshold or check.kind == "agreement":
        if not (unmet and check.quantile_of and QUANTILE_SLOT in resolved.metric):
            result = _EVALUATORS[check.kind](base, evidence, level)
    if unmet:
        names = "; ".join(dict.fromkeys(u.name for u in unmet))
        reason = "; ".join(f"needs {u.name}: {u.reason}" for u in unmet)
        if result.reason:
            reason += f"; measured: {result.reason}"
        elif math.isfinite(result.effect):
            shown = f"{result.effect:.3g}" + (
                f" [{result.lo:.3g}, {result.hi:.3g}]" if math.isfinite(result.lo) and math.isfinite(result.hi) else ""
            )
            reason += f"; measured: {shown}"
        return replace(result, verdict=NOT_TESTABLE, reason=reason, requirement=names, p=math.nan, min_p=math.nan)
    disturbed = sum(evidence.disturbed(check.experiment, v) for v in check.variants_needed())
    if disturbed and check.disturbance != "insensitive":
        # no undisturbed run to weigh the verdict against: it cannot be trusted, whatever it would be
        every = [
            v
            for v in check.variants_needed()
            if 0 < evidence.disturbed(check.experiment, v) == evidence.run_count(check.experiment, [v])
        ]
        if every:
            reason = "; ".join(
                f"every run of {check.experiment} {v} was disturbed ({evidence.attempts(check.experiment, v)} attempts)"
                for v in every
            )
            return replace(result, verdict=INCONCLUSIVE, reason=reason, p=math.nan, min_p=math.nan)
    if disturbed and check.disturbance == "insensitive":
        note = (
            f"{disturbed} disturbed run(s) kept and counted (runs.csv): a ratio of shares of one CPU in the same "
            "run is insensitive to other work there (it takes from every member in proportion)"
        )
        return replace(result, reason="; ".join(r for r in (result.reason, note) if r))
    if disturbed:
        # docs/STATISTICS.md §6: a verdict must not hang on a disturbed run. Kept and marked, never dropped; but
        # when leaving them out changes the verdict, the verdict is not one to trust.
        without = evaluate_check(finding, check, evidence.without_disturbed(), level)
        note = f"{disturbed} disturbed run(s) kept and marked (runs.csv); without them: {without.verdict}"
        if without.verdict != result.verdict and result.verdict in (REPRODUCED, CONTRADICTED):
            note = (
                f"the verdict hangs on {disturbed} disturbed run(s) (kept and marked, runs.csv): with them "
                f"{result.verdict}, without them {without.verdict}"
            )
            result = replace(result, verdict=INCONCLUSIVE)
        result = replace(result, reason="; ".join(r for r in (result.reason, note) if r))
    return result


def evaluate_checks(
    findings: Iterable[Finding], evidence: Evidence, since: Mapping[tuple[str, str], Since] | None = None
) -> list[CheckResult]:
    """Every check of every finding: "contradicted" at the Bonferroni level over each finding's decisive
    checks, then its premises gating the checks that depend on them. A finding's verdicts depend on its
    own checks only (the lab's claims never on how many experiments the project adds beyond it).

    ``since``: (finding id, check label as written) -> :class:`Since` for the checks revised after data
    (the threshold registry): each is judged only on the runs made at or after its revision, and is not
    testable here when there are none (docs/STATISTICS.md §5)."""
    findings = list(findings)
    since = since or {}
    results = []
    for finding in findings:
        of = {c.label: since[(finding.id, c.label)] for c in finding.checks if (finding.id, c.label) in since}
        evidence_of = {label: evidence.made_since(s.when) for label, s in of.items()}
        mine = [
            _evaluate_since(finding.id, check, evidence, evidence_of.get(check.label), of.get(check.label))
            for check in finding.checks
        ]
        results += _gate_premises(_bonferroni(finding, mine, evidence, evidence_of))
    # no Holm over Mann-Whitney p-values: "contradicted" is controlled per finding
    # (Bonferroni over its decisive checks) and "reproduced" by the intersection-union test
    return results


def _evaluate_since(
    finding: str, check: Check, evidence: Evidence, later: Evidence | None, since: Since | None
) -> CheckResult:
    """One check, on every run, or (``since``) only on the runs made at or after its threshold's revision."""
    if later is None or since is None:
        return evaluate_check(finding, check, evidence)
    variants = check.variants_needed()
    total, kept = evidence.run_count(check.experiment, variants), later.run_count(check.experiment, variants)
    judged = (
        f"the {kept} of {total} runs made at or after its threshold's revision ({since.revision})"
        if total
        else f"the runs made at or after its threshold's revision ({since.revision}): none of its variants ran"
    )
    if total and not kept:
        none = Unmet(
            RUNS_AFTER_REVISION,
            f"none of the {total} runs of {check.experiment}"
            + "".join(f" {v}" if k == 0 else f" and {v}" for k, v in enumerate(variants))
            + f" was made at or after {since.revision} (a threshold revised after data is judged only on runs "
            "made after it; the verdict on all runs is shown beside)",
        )
        return replace(_unmet_before_measuring(finding, check, none), judged_on=judged)
    result = evaluate_check(finding, check, later)
    if not total:
        return replace(result, judged_on=judged)
    note = f"judged on {judged}"
    return replace(result, reason="; ".join(r for r in (result.reason, note) if r), judged_on=judged)


def decisive_count(finding: Finding) -> int:
    """k of the Bonferroni level: the finding's decisive checks, as designed (not as testable here)."""
    return sum(1 for c in finding.checks if c.decisive and not c.premise)


def _bonferroni(
    finding: Finding, mine: list[CheckResult], evidence: Evidence, evidence_of: Mapping[str, Evidence] | None = None
) -> list[CheckResult]:
    """ "Contradicted" is a union over the finding's k decisive checks (docs/STATISTICS.md §4): a decisive check
    contradicted at the confidence level stays so only when its interval at 1 - alpha/k is wholly on the
    other side too; else it is inconclusive, and its reason gives both intervals."""
    k = decisive_count(finding)
    evidence_of = evidence_of or {}
    if k < 2:
        return mine
    out = []
    for r in mine:
        strict = 1 - (1 - evidence.level_of(r.check)) / k
        if r.check.decisive and not r.check.premise and r.verdict == CONTRADICTED and r.check.kind != "agreement":
            again = evaluate_check(finding.id, r.check, evidence_of.get(r.check.label, evidence), strict)
            shown = f"[{again.lo:.3g}, {again.hi:.3g}]" if math.isfinite(again.lo) else "no interval"
            # judged at the Bonferroni level, the check shows that level's interval (the confidence level's
            # stays in the reason)
            at_strict = {"effect": again.effect, "lo": again.lo, "hi": again.hi, "level": strict, "tie": again.tie}
            if again.verdict == CONTRADICTED:
                r = replace(
                    r,
                    **at_strict,
                    reason=f"{r.reason}; contradicted also at the Bonferroni level {strict:.4g} over the finding's "
                    f"{k} decisive checks ({shown})",
                )
            else:
                r = replace(
                    r,
                    **at_strict,
                    verdict=INCONCLUSIVE,
                    reason=f"{r.reason}; not contradicted at the Bonferroni level {strict:.4g} over the finding's {k} "
                    f"decisive checks ({shown}: {again.verdict}), which 'contradicted' needs",
                )
        out.append(r)
    return out


def _shown(r: CheckResult) -> str:
    if not math.isfinite(r.effect):
        return "no estimate"
    text = f"{r.effect:.3g}"
    if math.isfinite(r.lo) and math.isfinite(r.hi):
        text += f" [{r.lo:.3g}, {r.hi:.3g}]"
    if r.share_of is not None and r.share_of[0] > 0:
        d, name = r.share_of
        text += f" = {r.effect / d:.0%} of {name}"
        if r.threshold and r.check.relation == "within":
            text += f" (the design's band: [{r.threshold[0] / d:.0%}, {r.threshold[1] / d:.0%}) of it)"
    return text


def _gate_premises(mine: list[CheckResult]) -> list[CheckResult]:
    """Premises gate the checks that depend on them (docs/STATISTICS.md §5): a failed premise (its interval wholly
    outside its band) makes each gated check "not testable here: premise failed" with the numbers; an
    undecided one (inconclusive, or itself not testable) leaves them unable to decide (inconclusive).
    A failed premise never makes a claim false."""
    premises = [r for r in mine if r.check.premise]
    if not premises:
        return mine
    out = []
    for r in mine:
        if r.check.premise:
            out.append(r)
            continue
        mine_p = [p for p in premises if not p.check.gates or r.check.label in p.check.gates]
        failed = [p for p in mine_p if p.verdict == CONTRADICTED]
        undecided = [p for p in mine_p if p.verdict not in (REPRODUCED, CONTRADICTED)]
        if failed:
            why = "; ".join(f"{p.label} = {_shown(p)}" for p in failed)
            if r.verdict == NOT_TESTABLE:
                r = replace(
                    r,
                    requirement="; ".join(x for x in (r.requirement, PREMISE_HELD) if x),
                    reason=f"{r.reason}; needs {PREMISE_HELD}: premise failed too: {why}",
                )
            else:
                r = replace(
                    r,
                    verdict=NOT_TESTABLE,
                    requirement=PREMISE_HELD,
                    reason=f"premise failed: {why}; measured: {_shown(r)} (alone: {r.verdict}; a failed premise "
                    "never makes a claim false)",
                    p=math.nan,
                    min_p=math.nan,
                )
        elif undecided and r.verdict in (REPRODUCED, CONTRADICTED, WEAKER):
            why = "; ".join(f"{p.label} = {_shown(p)} ({p.verdict})" for p in undecided)
            r = replace(r, verdict=INCONCLUSIVE, reason=f"premise undecided: {why}; alone the check reads {r.verdict}")
        out.append(r)
    return out


def finding_verdict(results: Sequence[CheckResult]) -> tuple[str, CheckResult]:
    """The intersection-union verdict of a finding and the check that decides it (docs/STATISTICS.md §4-5).

    Only decisive checks decide, less those set aside (:func:`set_aside`: variants the profile leaves out);
    premises gate them (:func:`_gate_premises`, already applied) and supporting checks are shown. Contradicted when a decisive check is (at the Bonferroni level,
    :func:`_bonferroni`); else not testable when a decisive check is; else inconclusive when a
    decisive check is neither reproduced nor weaker than modelled, or a premise does not hold;
    else :data:`WEAKER` when one is weaker than modelled; else reproduced. Among the checks with
    the deciding verdict, one with a measured effect is shown first.
    """

    def first(same: list[CheckResult]) -> CheckResult:
        return next((r for r in same if math.isfinite(r.effect)), same[0])

    decisive = _judged(results)
    contradicted = [r for r in decisive if r.verdict == CONTRADICTED]
    if contradicted:
        return CONTRADICTED, first(contradicted)
    untestable = [r for r in decisive if r.verdict == NOT_TESTABLE]
    if untestable:
        return NOT_TESTABLE, first(untestable)
    doubtful = [r for r in decisive if r.verdict not in (REPRODUCED, WEAKER)]
    if doubtful:
        return INCONCLUSIVE, first(doubtful)
    premises = [r for r in results if r.check.premise and r.verdict != REPRODUCED]
    if premises:
        return INCONCLUSIVE, first(premises)
    weaker = [r for r in decisive if r.verdict == WEAKER]
    if weaker:
        return WEAKER, first(weaker)
    return REPRODUCED, decisive[0]


def set_aside(results: Sequence[CheckResult]) -> list[CheckResult]:
    """The decisive checks a finding is not judged on: those whose variants the profile leaves out, as long as
    another decisive check of the finding is testable (else the finding is not testable, as they are)."""
    decisive = [r for r in results if r.check.decisive and not r.check.premise]
    out = [r for r in decisive if r.verdict == NOT_TESTABLE and r.requirement == IN_THIS_PROFILE]
    return out if len(out) < len(decisive) else []


def _judged(results: Sequence[CheckResult]) -> list[CheckResult]:
    """The decisive checks that judge a finding (all its checks when none is decisive), less those set aside."""
    aside = set_aside(results)
    decisive = [r for r in results if r.check.decisive and not r.check.premise and r not in aside]
    return decisive or list(results)


def _finding_reason(finding: Finding, verdict: str, decider: CheckResult, mine: Sequence[CheckResult]) -> str:
    parts = []
    aside = set_aside(mine)
    decisive = [r for r in mine if r.check.decisive and not r.check.premise and r not in aside]
    n_checks = len(decisive)
    if verdict == REPRODUCED:
        parts.append("the decisive check holds" if n_checks == 1 else f"all {n_checks} decisive checks hold")
        if decider.reason:
            parts.append(decider.reason)
    elif verdict == NOT_TESTABLE:
        untestable = [r for r in decisive if r.verdict == NOT_TESTABLE]
        held = sum(r.verdict == REPRODUCED for r in decisive)
        parts.append("; ".join(f"{r.label}: {r.reason}" for r in untestable) if len(mine) > 1 else decider.reason)
        if n_checks > len(untestable):
            parts.append(f"{held} of the other {n_checks - len(untestable)} decisive checks hold")
    elif decider.check.premise:
        parts.append(f"{decider.label} (a premise) does not hold: {decider.reason or decider.verdict}")
    elif len(mine) > 1:
        parts.append(f"{decider.label}: {decider.reason or verdict}")
    else:
        parts.append(decider.reason)
    if aside:
        parts.append(
            f"judged on the {n_checks} decisive check{'s' if n_checks > 1 else ''} this profile measures; set aside: "
            + "; ".join(f"{r.label} ({r.reason})" for r in aside)
        )
    if verdict == CONTRADICTED and n_checks > 1:
        parts.append(
            f"the error rate of 'contradicted' is controlled per finding: Bonferroni over its {n_checks} decisive checks"
        )
    if finding.not_covered:
        parts.append(f"its {', '.join(finding.not_covered)} part needs an experiment not in this pipeline yet")
    return "; ".join(p for p in parts if p)


def headline(verdict: str, decider: CheckResult, mine: Sequence[CheckResult]) -> str:
    """A finding's verdict in one short line: how many of the decisive checks it is judged on hold, and the
    check that decided otherwise ("2 of 3 decisive checks hold; p50_wall_ms limit1 / nolimit: inconclusive")."""
    judged = _judged(mine)
    held = sum(r.verdict == REPRODUCED for r in judged)
    line = f"{held} of {len(judged)} decisive " + ("check holds" if len(judged) == 1 else "checks hold")
    if verdict == REPRODUCED:
        return line
    if verdict == NOT_TESTABLE and decider.requirement:
        return f"{line}; {decider.label}: needs {decider.requirement.split('; ')[0]}"
    return f"{line}; {decider.label}: {decider.verdict}"


def check_rows(results: Sequence[CheckResult]) -> pd.DataFrame:
    """checks.csv: one row per check."""
    rows = [
        (
            r.finding,
            r.label,
            r.check.experiment,
            r.metric,
            r.expected,
            r.effect,
            r.lo,
            r.hi,
            r.p,
            r.p_holm,
            r.a12,
            r.check.reference,
            r.verdict,
            r.reason,
            r.method,
            r.why,
            r.check.decisive,
            r.requirement,
            r.check.role,
            r.end,
            r.zones,
            "",
            "",
            r.judged_on,
            "",
            r.runs or math.nan,
            r.runs_baseline or math.nan,
            r.level if r.check.kind != "agreement" else math.nan,  # a count decides without a level
            r.check.relation if r.check.kind != "agreement" else "",
            r.threshold[0] if r.threshold and r.check.kind != "agreement" else math.nan,
            r.threshold[1] if len(r.threshold) > 1 and r.check.kind != "agreement" else math.nan,
            math.nan if r.check.no_effect() is None else r.check.no_effect(),
            r.check.scale if r.check.kind != "agreement" else "",
            r.tie,
            r.pooled,
            r.look,
        )
        for r in results
    ]
    return pd.DataFrame.from_records(rows, columns=CHECKS_COLUMNS)


def finding_rows(findings: Sequence[Finding], results: Sequence[CheckResult]) -> pd.DataFrame:
    """findings.csv: one row per finding, the numbers of the check that decides its verdict."""
    rows = []
    for finding in findings:
        mine = [r for r in results if r.finding == finding.id]
        verdict, decider = finding_verdict(mine)
        rows.append(
            (
                finding.id,
                finding.claim,
                ", ".join(finding.experiments + finding.not_covered),
                "; ".join(dict.fromkeys(r.metric for r in mine)),
                "; ".join(r.expected for r in mine),
                decider.effect,
                decider.lo,
                decider.hi,
                decider.p,
                decider.p_holm,
                decider.a12,
                finding.reference,
                verdict,
                _finding_reason(finding, verdict, decider, mine),
                (f"[{decider.label}] " if len(mine) > 1 else "") + decider.method,
                "",
                decider.level,
                headline(verdict, decider, mine),
                decider.look,
            )
        )
    return pd.DataFrame.from_records(rows, columns=FINDINGS_COLUMNS)


def evaluate(
    evidence: Evidence, findings: Sequence[Finding], since: Mapping[tuple[str, str], Since] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(findings.csv, checks.csv) of the given findings on the given evidence (``since``: the checks judged
    only on runs made after their threshold's revision, :func:`evaluate_checks`)."""
    results = evaluate_checks(findings, evidence, since)
    return finding_rows(findings, results), check_rows(results)
