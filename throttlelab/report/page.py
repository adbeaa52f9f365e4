"""The HTML report: one self-contained page from the tidy tables and the figures (``throttlelab report``).

``render`` builds the page (results/report/index.html) from the tidy tables of
docs/TABLES.md (the environment too: environment.csv, never the raw logs) and the
figures' SVG files (inlined, no external resource). The first screen is the verdict
summary beside the forest plot of every decisive check (figures/forest.py, drawn from
checks.csv); the findings table follows, then one section per experiment, the
environment, and relative links to the raw logs and tables. ``publish`` and ``verify`` (the archive) are :mod:`.publish`'s;
:func:`main` takes all three, as the ``throttlelab`` command hands them over.

    throttlelab report --tables results/local/tables --raw-root results/local/raw \\
        --figures results/report/figures --config-json '{"profile": "ci"}' --out results/report/index.html
    throttlelab publish --results results --report results/report \\
        --tables results/local/tables --raw-root results/local/raw --config-json '{"profile": "ci"}' \\
        --out results/throttlelab-report-local-ci.tar.gz

The template lives in the project (``--project``, default the working directory):
no module finds the checkout through its own path.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from throttlelab.analysis.number_format import (
    fmt_interval,
    fmt_interval_outward,
    fmt_level,
    fmt_number,
    fmt_runs,
    fmt_tie,
    is_missing,
    is_true,
)
from throttlelab.analysis.tidy import ENV_PREFIX, variant_specs
from throttlelab.errors import ReportError
from throttlelab.figures.forest import forest_caption, forest_rows, forest_svg
from throttlelab.figures.registry import figures_for, resolve
from throttlelab.model.config import ConfigError, Design, load_design
from throttlelab.model.reference import LAB, lab_values
from throttlelab.model.catalogue import experiment as catalogued, is_ours
from throttlelab.report.cell_format import distinct, fmt_cell, fmt_size, setting_text, spec_settings, text
from throttlelab.report.inputs import config_text, raw_log_path, read_table, read_tables
from throttlelab.report.notes import section_notes
from throttlelab.report.publish import config_arg, publish_main, verify_main

TEMPLATE_NAME = "template.html.j2"

VERDICT_CLASSES = {
    "reproduced": "reproduced",
    "contradicted": "contradicted",
    "inconclusive": "inconclusive",
    "not testable here": "untestable",
    "direction reproduced, weaker than modelled": "weaker",
}
#: The first screen's words for a verdict too long for its one line, as the forest plot beside it tags them (the
#: full verdict is the row's tooltip and stands in the findings table below).
SHORT_VERDICTS = {
    "direction reproduced, weaker than modelled": "weaker than modelled",
    "not testable here": "not testable",
}


# --------------------------------------------------------------------------
# the page's parts, each a pure function of tables


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[str]]
    notes: list[str]


@dataclass(frozen=True)
class Finding:
    id: str
    claim: str
    experiments: list[str]
    verdict: str
    verdict_class: str
    effect: str
    reference: str
    reason: str
    p: str
    a12: str
    method: str
    #: a claim of ours beyond the lab (docs/EXPERIMENTS.md): the page marks it and calls its sentence a hypothesis
    ours: bool = False
    #: its verdict on every run where a check revised after data was judged on the later runs only and that
    #: changed the verdict ("" otherwise: findings.csv verdict_all_runs, docs/STATISTICS.md §5)
    all_runs: str = ""
    #: how many of its decisive checks hold and the one that decided otherwise (findings.csv headline)
    headline: str = ""


def findings_rows(findings: pd.DataFrame) -> list[Finding]:
    rows = []
    for r in findings.itertuples():
        experiments = [e.strip() for e in text(getattr(r, "experiments", "")).replace(";", ",").split(",") if e.strip()]
        rows.append(
            Finding(
                id=text(r.id),
                claim=text(r.claim),
                experiments=experiments,
                verdict=text(r.verdict),
                verdict_class=VERDICT_CLASSES.get(text(r.verdict), "unknown"),
                effect=fmt_interval_outward(r.effect, r.lo, r.hi),
                reference=text(r.reference),
                reason=text(r.reason),
                p=fmt_number(getattr(r, "p", math.nan)),
                a12=fmt_number(getattr(r, "a12", math.nan)),
                method=text(r.method),
                ours=bool(experiments) and all(is_ours(e) for e in experiments),
                all_runs=_all_runs(r),
                headline=text(getattr(r, "headline", "")),
            )
        )
    return rows


@dataclass(frozen=True)
class SummaryRow:
    """A finding on the first screen: its verdict, the deciding estimate with its interval and level, one line."""

    id: str
    verdict: str
    verdict_class: str
    estimate: str
    level: str
    headline: str
    ours: bool

    @property
    def verdict_short(self) -> str:
        """The verdict in the few words its one line has room for."""
        return SHORT_VERDICTS.get(self.verdict, self.verdict)

    @property
    def held(self) -> bool:
        """Reproduced: every decisive check holds, which is all its headline would add; the first screen spells
        out the headline of the others, the check that decided otherwise."""
        return self.verdict == "reproduced"


def deciding_check(finding: Any, checks: pd.DataFrame | None) -> Any | None:
    """The checks.csv row whose numbers a findings.csv row carries: the check its method names first, in
    brackets ("[p50_wall_ms limit1 / nolimit] ratio of ..."), or the finding's only check; None otherwise."""
    if checks is None or checks.empty or "check" not in checks.columns:
        return None
    mine = checks[checks["id"].astype(str) == text(finding.id)]
    method = text(getattr(finding, "method", ""))
    if method.startswith("[") and "] " in method:
        mine = mine[mine["check"].astype(str) == method[1 : method.index("] ")]]
    return next(mine.itertuples(), None) if len(mine) == 1 else None


def _is_tie(check: Any | None) -> bool:
    return check is not None and is_true(getattr(check, "tie", "")) and not is_missing(getattr(check, "runs", math.nan))


def summary_rows(findings: pd.DataFrame, rows: list[Finding], checks: pd.DataFrame | None = None) -> list[SummaryRow]:
    """The verdict summary (findings.csv's deciding estimate, its level and headline), one row per finding; where
    the deciding check's runs all gave one value (checks.csv ``tie``), the line says so, with the one-sided level
    of the bound on their mean, as the checks table does."""
    out = []
    for r, f in zip(findings.itertuples(), rows):
        level = getattr(r, "level", math.nan)
        has_interval = not (is_missing(r.lo) or is_missing(r.hi))
        estimate = f.effect if not is_missing(r.effect) else "—"
        shown_level = fmt_level(level) if has_interval else ""
        decider = deciding_check(r, checks)
        if _is_tie(decider) and has_interval and not is_missing(level):
            estimate = f"all {int(float(decider.runs))}: {estimate}"
            shown_level = f"one-sided {fmt_level(1 - (1 - float(level)) / 2)}"
        if shown_level and _look(r):
            shown_level += f", look {_look(r)}"
        out.append(
            SummaryRow(
                id=f.id,
                verdict=f.verdict,
                verdict_class=f.verdict_class,
                estimate=estimate,
                level=shown_level,
                headline=f.headline or f.reason,
                ours=f.ours,
            )
        )
    return out


@dataclass(frozen=True)
class ForestView:
    svg: str
    caption: str


def forest_view(checks: pd.DataFrame | None) -> ForestView | None:
    """The forest plot of every decisive check (figures/forest.py), drawn from checks.csv."""
    if checks is None or checks.empty:
        return None
    rows = forest_rows(checks)
    return ForestView(forest_svg(rows), forest_caption(rows)) if rows else None


def _all_runs(r: Any) -> str:
    """The verdict on all runs (findings.csv or checks.csv ``verdict_all_runs``) where it differs from the verdict
    shown, which judged a check revised after data on the runs made after its revision only."""
    every = text(getattr(r, "verdict_all_runs", ""))
    return every if every and every != text(r.verdict) else ""


def _look(r: Any) -> str:
    """The look a finding or check was judged at, "1 of 2" (findings.csv, checks.csv ``look``); "" when its
    experiment is judged once, after every run."""
    return text(getattr(r, "look", ""))


def _judged_on(r: Any) -> str:
    judged = text(getattr(r, "judged_on", "")) or "all runs"
    look = _look(r)
    if not look:
        return judged
    stage = "the first stage's runs" if look.startswith("1 ") else "both stages' runs"
    return f"{judged}; look {look}, on {stage}"


def _decisive(value: Any) -> bool:
    return str(value).strip().lower() not in ("false", "0", "no")


def _role_note(r: Any) -> str:
    """A check's role beside its label: premises gate, supporting checks decide nothing (checks.csv role)."""
    role = text(getattr(r, "role", ""))
    if role == "premise":
        return " (premise: gates its checks, cannot contradict)"
    if role == "supporting":
        return " (supporting: decides nothing)"
    return "" if role or _decisive(getattr(r, "decisive", True)) else " (premise: cannot contradict)"


def check_estimate(r: Any) -> str:
    """A check's estimate as the checks table prints it: "2.18 [1.97, 2.41]" (ends rounded outward); a tie as
    "0 in all 5 runs; the mean in [0, 0.522] at one-sided 97.5%"; a proportion's pooled count beside the
    per-run logit's point that its interval belongs to."""
    level = getattr(r, "level", math.nan)
    runs = getattr(r, "runs", math.nan)
    if is_true(getattr(r, "tie", "")) and not is_missing(runs):
        return fmt_tie(r.effect, runs, r.lo, r.hi, 0.95 if is_missing(level) else level)
    shown = fmt_interval_outward(r.effect, r.lo, r.hi)
    pooled = getattr(r, "pooled", math.nan)
    if not is_missing(pooled):
        shown = f"{shown} (mean per-run logit); pooled k/n {fmt_number(pooled)}"
    return shown


def checks_table(checks: pd.DataFrame | None) -> Table | None:
    """Every check behind the findings (checks.csv): what was compared, against what, at which level and on how
    many runs, by which method, and why that threshold."""
    if checks is None or checks.empty:
        return None
    rows = [
        [
            text(r.id),
            text(r.check) + _role_note(r),
            text(r.experiment),
            text(r.verdict) + (f" (on all runs: {_all_runs(r)})" if _all_runs(r) else ""),
            text(r.expected),
            check_estimate(r),
            fmt_level(getattr(r, "level", math.nan)) if not (is_missing(r.lo) or is_missing(r.hi)) else "—",
            fmt_runs(getattr(r, "runs", math.nan), getattr(r, "runs_baseline", math.nan)),
            fmt_number(r.p),
            text(getattr(r, "method", "")),
            _judged_on(r),
            text(getattr(r, "requirement", "")),
            text(r.reason),
            text(getattr(r, "why", ""))
            + (f" Threshold: {text(r.end)}." if text(getattr(r, "end", "")) else "")
            + (f" Zones: {text(r.zones)}." if text(getattr(r, "zones", "")) else "")
            + (f" Fixed by {text(r.threshold_commit)}." if text(getattr(r, "threshold_commit", "")) else ""),
        ]
        for r in checks.itertuples()
    ]
    columns = [
        "finding",
        "check",
        "experiment",
        "verdict",
        "expected",
        "estimate [interval]",
        "level",
        "runs (R)",
        "p (one-sided, vs threshold)",
        "method",
        "judged on",
        "unmet requirement",
        "reason",
        "derivation of the threshold",
    ]
    notes = [
        "A finding is reproduced when every one of its decisive checks holds by its own interval (premises "
        "holding), contradicted when a decisive check is contradicted at the Bonferroni level over the "
        "finding's decisive checks (the error rate of 'contradicted' is controlled per finding), not testable "
        "here when a decisive check's named requirement fails or its premise failed (a failed premise never "
        "makes a claim false), 'direction reproduced, weaker than modelled' when a directional check excludes "
        "no effect but not the model's threshold, inconclusive otherwise; supporting checks are shown and "
        "decide nothing. A 'within' check holds only when its whole interval lies inside the band; it shows "
        "no p-value. The p beside a check tests its own threshold, one-sided, with the interval's own t "
        "(below 0.025 exactly when the 95% interval clears the threshold). A check whose threshold was revised "
        "after data (the threshold registry) is judged only on the runs made after its revision; its verdict "
        "on all runs is shown beside when it differs. Each interval is drawn at the level its check was judged at "
        "(the level column: the confidence level, or the Bonferroni level where that decided 'contradicted'), its "
        "ends rounded outward at the digits shown; runs that all gave one value are written as such, with the "
        "bound on their mean at its one-sided level; a proportion's point is that of its per-run logit interval, "
        "the pooled count beside it."
    ]
    return Table(columns, rows, notes)


def verdict_counts(findings: list[Finding]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.verdict] = counts.get(f.verdict, 0) + 1
    return list(counts.items())


def variant_order(runs: pd.DataFrame, experiment: str, design: Design | None) -> list[str]:
    """The design's order of variants, then any variant that ran but the design does not name."""
    ran = list(dict.fromkeys(runs.loc[runs["experiment"] == experiment, "variant"]))
    planned = list(design.experiments[experiment].variants) if design and experiment in design.experiments else []
    return [v for v in planned if v in ran] + [v for v in ran if v not in planned]


def settings_table(runs: pd.DataFrame, experiment: str, order: list[str]) -> Table:
    """Each variant's parameters as they ran (runs.csv's ``param_*`` columns) and its number of runs.

    A column for every parameter some variant sets, in the spec's order; a variant that leaves
    it unset shows 'none' for a limit or request and '—' otherwise.
    """
    mine = runs[runs["experiment"] == experiment]
    specs = variant_specs(mine, experiment)
    settings = {v: spec_settings(specs[v]) for v in order}
    columns = list(dict.fromkeys(key for values in settings.values() for key in values))
    rows = [
        [v, *(setting_text(c, settings[v].get(c)) for c in columns), str(int((mine["variant"] == v).sum()))]
        for v in order
    ]
    return Table(["variant", *columns, "runs"], rows, [])


@dataclass(frozen=True)
class EstimateRow:
    metric: str
    unit: str
    method: str
    cells: list[str]


@dataclass(frozen=True)
class EstimatesTable:
    variants: list[str]
    rows: list[EstimateRow]
    level: float


def row_flag(flags: pd.Series) -> str:
    """The flag said once for a whole row: the most common one, provided every cell has a flag
    (a cell without one must not look as if it shared the others')."""
    if flags.eq("").any() or flags.empty:
        return ""
    return str(flags.value_counts().index[0])


def estimates_table(estimates: pd.DataFrame, experiment: str, order: list[str]) -> EstimatesTable:
    """Metrics down, variants across; each metric's method (and its flag, when every cell shares it) under its name."""
    mine = estimates[estimates["experiment"] == experiment].assign(flag=lambda d: d["flag"].fillna(""))
    variants = [v for v in order if v in set(mine["variant"])]
    rows = []
    for metric, group in mine.groupby("metric", sort=False):
        by_variant = {r.variant: r for r in group.itertuples()}
        shared_flag = row_flag(group["flag"])
        cells = []
        for v in variants:
            r = by_variant.get(v)
            if r is None:
                cells.append("—")
                continue
            cell = fmt_interval(r.point, r.lo, r.hi)
            cells.append(cell + (f" ({r.flag})" if r.flag and r.flag != shared_flag else ""))
        method = " / ".join(dict.fromkeys(text(m) for m in group["method"]))
        rows.append(
            EstimateRow(
                text(metric), text(group["unit"].iloc[0]), method + (f"; {shared_flag}" if shared_flag else ""), cells
            )
        )
    levels = mine["level"].dropna()
    return EstimatesTable(variants, rows, float(levels.iloc[0]) if len(levels) else math.nan)


READBACK_COLUMNS = {
    "variant": "variant",
    "level": "level",
    "path": "cgroup",
    "design_quota_us": "design quota µs",
    "actual_quota_us": "read quota µs",
    "design_period_us": "design period µs",
    "actual_period_us": "read period µs",
    "design_weight": "design weight",
    "actual_weight": "read weight",
    "design_shares": "design shares",
    "actual_shares": "read shares",
    "actual_cpus": "cpus",
    "mismatches": "mismatches",
    "error": "error",
    "formula": "how the design value was computed",
}


def readback_rows(readback: pd.DataFrame | None, experiment: str) -> pd.DataFrame:
    if readback is None:
        return pd.DataFrame()
    return readback[readback["experiment"] == experiment]


def readback_table(readback: pd.DataFrame | None, experiment: str) -> Table | None:
    """What the design wrote at each cgroup level next to what was read back (E1's result)."""
    mine = readback_rows(readback, experiment)
    if mine.empty:
        return None
    if "repeat" in mine.columns:
        mine = mine[mine["repeat"] == mine["repeat"].min()]  # a deterministic readout: the first repeat shows it
    columns = [
        c for c in READBACK_COLUMNS if c in mine.columns and (c in ("variant", "level") or mine[c].notna().any())
    ]
    rows = [[fmt_cell(getattr(r, c)) for c in columns] for r in mine.itertuples()]
    notes = ["Levels without design values (run-root, host-root) are the ancestors of the run, shown as read."]
    return Table([READBACK_COLUMNS[c] for c in columns], rows, notes)


#: Read-outs whose every cell the lab reported: the report puts the lab's value beside each of ours.
LAB_CELL_METRICS = {"E3": "gomaxprocs"}


def lab_cells_table(
    metrics: pd.DataFrame | None, runs: pd.DataFrame, experiment: str, order: list[str]
) -> Table | None:
    """The lab's read-out beside ours, cell by cell (E3: GOMAXPROCS per module line and limit):
    every run's value, Go's rule on this node (docs/LAB.md §2.6), and whether each run equals the lab's figure."""
    metric = LAB_CELL_METRICS.get(experiment)
    lab = lab_values(experiment, metric) if metric else {}
    if metrics is None or not lab:
        return None
    mine = metrics[(metrics["experiment"] == experiment)]
    values = mine[mine["metric"] == metric]
    rule = mine[mine["metric"] == f"expected_{metric}"].groupby("variant")["value"].first()
    specs = variant_specs(runs, experiment)
    rows, same, compared = [], 0, 0
    for variant in order:
        got = sorted(values.loc[values["variant"] == variant, "value"].dropna().unique())
        theirs = lab.get(variant)
        if theirs is None or not got:
            equal = "—"
        else:
            compared += 1
            ok = all(v == theirs for v in got)
            same += ok
            equal = "yes" if ok else "no"
        spec = specs.get(variant)
        rows.append(
            [
                variant,
                text(spec.build) if spec else "—",
                _limit_setting(spec) if spec else "—",
                fmt_cell(theirs),
                "/".join(f"{v:g}" for v in got) or "—",
                fmt_cell(rule.get(variant)),
                equal,
            ]
        )
    cpus = distinct(runs.loc[runs["experiment"] == experiment, "cpus"])
    notes = [
        f"The lab: {LAB[experiment].setup} ({LAB[experiment].source}); here: {cpus} CPUs. "
        f"{same} of {compared} cells equal the lab's."
    ]
    return Table(
        [
            "variant",
            "module line",
            "setting",
            f"lab {metric}",
            f"ours ({metric}, each run)",
            "Go's rule here",
            "same as the lab",
        ],
        rows,
        notes,
    )


def _limit_setting(spec: Any) -> str:
    """'limit 2, GOMAXPROCS=6': the CPU limit and the overrides a variant sets."""
    parts = [f"limit {spec.limit if spec.limit is not None else 'none'}"]
    if spec.gomaxprocs is not None:
        parts.append(f"GOMAXPROCS={spec.gomaxprocs}")
    if spec.godebug:
        parts.append(f"GODEBUG={spec.godebug}")
    return ", ".join(parts)


def readback_summary(readback: pd.DataFrame | None, experiment: str) -> str:
    """One sentence on the read-back check of an experiment whose result is not the read-back itself."""
    mine = readback_rows(readback, experiment)
    if mine.empty:
        return ""
    bad = mine[mine["mismatches"].notna() & (mine["mismatches"].astype(str) != "")]
    runs = mine.groupby(["variant", "repeat"]).ngroups if "repeat" in mine.columns else mine["variant"].nunique()
    opening = f"Before measuring, every run read back its cgroup settings: {len(mine)} levels in {runs} runs, "
    if bad.empty:
        return opening + "all as designed."
    listed = "; ".join(f"{r.variant} rep{r.repeat} {r.level}: {r.mismatches}" for r in bad.head(5).itertuples())
    return opening + f"{len(bad)} not as designed ({listed}{'; ...' if len(bad) > 5 else ''})."


@dataclass(frozen=True)
class FigureView:
    name: str
    title: str
    svg: str
    caption: str


def figure_views(experiment: str, figures_dir: Path, estimates: pd.DataFrame, runs: pd.DataFrame) -> list[FigureView]:
    """The experiment's figures (the registry's, in its order): the SVG the draw_figures rule drew, and its caption."""
    views = []
    for entry in figures_for([experiment]):
        path = figures_dir / entry.svg
        if not path.is_file():
            raise ReportError(
                f"{path}: missing; run `throttlelab figure --figure {entry.name} ... --out-dir {figures_dir}`"
                " (the draw_figures rule draws every figure of a profile so)"
            )
        views.append(FigureView(entry.name, entry.title, path.read_text(), resolve(entry.caption)(estimates, runs)))
    return views


@dataclass(frozen=True)
class RawLink:
    label: str
    href: str


def relative_href(target: Path, page_dir: Path) -> str:
    return Path(os.path.relpath(target.resolve(), page_dir.resolve())).as_posix()


def raw_links(
    runs: pd.DataFrame, experiment: str, order: list[str], raw_root: Path, page_dir: Path
) -> list[tuple[str, list[RawLink]]]:
    mine = runs[runs["experiment"] == experiment]
    out = []
    for variant in order:
        reps = sorted(int(r) for r in mine.loc[mine["variant"] == variant, "repeat"])
        out.append(
            (
                variant,
                [
                    RawLink(f"rep{r}", relative_href(raw_log_path(raw_root, experiment, variant, r), page_dir))
                    for r in reps
                ],
            )
        )
    return out


def table_links(tables_dir: Path, page_dir: Path) -> list[tuple[str, str, str]]:
    """(name, href, size) of every tidy table, so readers can start from the data."""
    return [(p.name, relative_href(p, page_dir), fmt_size(p.stat().st_size)) for p in sorted(tables_dir.glob("*.csv"))]


def repeats_text(runs: pd.DataFrame, order_of_experiments: list[str]) -> str:
    parts = []
    for experiment in order_of_experiments:
        per_variant = runs[runs["experiment"] == experiment].groupby("variant").size()
        if len(per_variant):
            low, high = int(per_variant.min()), int(per_variant.max())
            parts.append(f"{experiment} {low}" if low == high else f"{experiment} {low}–{high}")
    return ", ".join(parts)


#: environment.csv's columns of the software versions a backend reports (docker: Docker engine, containerd, runc).
VERSION_PREFIX = f"{ENV_PREFIX}versions."


def environment_rows(
    environment: pd.DataFrame,
    runs: pd.DataFrame,
    headers: pd.DataFrame,
    design: Design,
    experiments: list[str],
    interference: pd.DataFrame | None = None,
) -> list[tuple[str, str]]:
    """The machine and software the runs saw: environment.csv (one row per run, from its meta record);
    the spread of host interference from interference.csv."""
    env = environment
    cpus = distinct(env["cpu_count"])
    usable = distinct(env["usable_cpus"])
    versions = [c.removeprefix(VERSION_PREFIX) for c in env.columns if c.startswith(VERSION_PREFIX)]
    return [
        ("Backend", distinct(env["backend"])),
        *((name, distinct(env[f"{VERSION_PREFIX}{name}"])) for name in versions),
        (
            "Runtime conversion",
            distinct(env["runtime_conversion"]) + " (how CPU shares become cgroup v2 weights, docs/LAB.md §2)",
        ),
        ("Kernel", distinct(env["kernel"])),
        ("cgroup version", distinct(env["cgroup_version"])),
        ("CPU model", distinct(env["cpu_model"])),
        ("CPUs", cpus if usable in (cpus, "—") else f"{cpus} ({usable} usable by the lab)"),
        ("Go version", distinct(headers["go_version"])),
        ("Module lines", distinct(headers["variant_build"], expect_one=False) if "variant_build" in headers else "—"),
        ("Profile", f"{design.profile}: {design.description.strip()}"),
        ("Repeats", repeats_text(runs, experiments)),
        ("Confidence level", f"{design.confidence:.0%}"),
        ("Measured", f"{min(runs['start'])} to {max(runs['end'])} (UTC), {len(runs)} runs"),
        ("Host interference", interference_text(runs, interference)),
        ("Calibration", calibration_text(env)),
        *node_image_rows(env),
        ("Seed", seed_text(runs)),
    ]


def node_image_rows(environment: pd.DataFrame) -> list[tuple[str, str]]:
    """kind's node images (environment.csv's env.node_images.* columns): the setting, and per cluster the
    image built here or the published one; none for a backend without them."""
    prefix = f"{ENV_PREFIX}node_images."
    columns = [c for c in environment.columns if c.startswith(prefix) and environment[c].notna().any()]
    rows = []
    for column in sorted(columns, key=lambda c: (c != f"{prefix}setting", c)):
        key = column.removeprefix(prefix)
        label = "Node images" if key == "setting" else f"Node image ({key} cluster)"
        rows.append((label, distinct(environment[column], expect_one=False)))
    return rows


def calibration_text(environment: pd.DataFrame) -> str:
    """The calibration step's pilots and quiet-host sampling the runs were fixed by (environment.csv's
    env.calibration.* columns, from each raw log's meta; docs/EXPERIMENTS.md, "The calibration step")."""
    parts = []
    for column, label in (("pilot", "pilot"), ("quiet_host", "quiet host")):
        name = f"env.calibration.{column}"
        if name in environment.columns and environment[name].notna().any():
            parts.append(f"{label}: {distinct(environment[name], expect_one=False)}")
    if not parts:
        return "none recorded (no calibrated quantity, or raw logs that predate the calibration step)"
    return "; ".join(parts) + " (made before the measured runs, recorded, never analysed as measurements)"


def seed_text(runs: pd.DataFrame) -> str:
    """The config seed the runs were measured with, as their raw logs record it (runs.csv config_seed),
    not the config's now; each job's own seed derives from it (model/seeds.py, runs.csv job_seed)."""
    if "config_seed" not in runs.columns or runs["config_seed"].isna().all():
        return "not recorded (raw logs that predate it)"
    seed = distinct(runs["config_seed"]) + " (each job's seed derives from it and the job: runs.csv job_seed)"
    missing = int(runs["config_seed"].isna().sum())
    return seed + (f"; {missing} of {len(runs)} runs do not record it" if missing else "")


def interference_table(runs: pd.DataFrame, experiment: str, order: list[str]) -> Table | None:
    """Host interference per run (runs.csv): what other processes took of the run's CPUs, the runs still
    disturbed after their retries (kept and marked, never dropped) and the disturbed attempts kept beside
    the raw log (not analysed)."""
    if "other_share" not in runs.columns:
        return None
    mine = runs[runs["experiment"] == experiment]
    known = mine["other_share"].notna() | mine["disturbed"].notna() | mine["disturbed_attempts"].notna()
    if not known.any():
        return None
    body = []
    for variant in [v for v in order if v in set(mine["variant"])]:
        for r in mine[mine["variant"] == variant].sort_values("repeat").itertuples():
            disturbed = r.disturbed is True or str(r.disturbed) == "True"
            attempts = 0 if pd.isna(r.disturbed_attempts) else int(r.disturbed_attempts)
            body.append(
                [
                    variant,
                    f"rep{int(r.repeat)}",
                    text(r.interference) or "not recorded",
                    "DISTURBED (kept, marked)" if disturbed else ("ok" if pd.notna(r.disturbed) else "—"),
                    f"{attempts}: {text(r.disturbed_logs)}" if attempts else "0",
                ]
            )
    still = int(mine["disturbed"].fillna(False).astype(bool).sum())
    earlier = int(mine["disturbed_attempts"].fillna(0).sum())
    note = (
        f"CPU time outside the lab on the run's CPUs during its window (docs/STATISTICS.md §2): other processes', judged "
        "against the threshold, and apart the lab's own system's (the orchestrator: Snakemake and its children "
        "but the runner; the runtime: the backend's engine and shims; the kernel's threads; in CPUs, on any "
        f"CPU), whose work above its idle level on the quiet host is not counted as interference. {still} of {len(mine)} "
        f"runs were still disturbed after their retries: they are kept and marked, never dropped; {earlier} "
        "disturbed earlier attempts were measured again and are kept beside the raw log, not analysed."
    )
    return Table(
        ["variant", "run", "host interference", "status", "disturbed attempts (logs, not analysed)"], body, [note]
    )


def interference_text(runs: pd.DataFrame, interference: pd.DataFrame | None = None) -> str:
    """One line on host interference over all runs: which runs (runs.csv) and its spread (interference.csv,
    analysis/report_statistics.py; left out when the analysis wrote none), or why there is none."""
    if "disturbed" not in runs.columns or not (runs["disturbed"].notna() | runs["other_share"].notna()).any():
        return "not recorded (raw logs that predate the interference meter)"
    still = runs[runs["disturbed"].fillna(False).astype(bool)]
    earlier = int(runs["disturbed_attempts"].fillna(0).sum())
    spread = interference.iloc[0] if interference is not None and len(interference) else None
    text_ = (
        f"{len(still)} of {len(runs)} runs still disturbed after their retries (kept and marked in their "
        f"experiment's section); {earlier} disturbed attempts measured again (kept beside the raw logs, not "
        "analysed)"
    )
    if spread is not None and pd.notna(spread["other_share_min"]):
        text_ += (
            f"; other processes took {spread['other_share_min']:.1%} to {spread['other_share_max']:.1%} "
            "of the runs' CPUs"
        )
    if spread is not None and pd.notna(spread["orchestrator_cpu_median"]):
        text_ += (
            f"; the orchestrator (Snakemake and its children but the runner) used a median "
            f"{spread['orchestrator_cpu_median']:.2%} of a CPU per window (p95 {spread['orchestrator_cpu_p95']:.2%}, "
            f"max {spread['orchestrator_cpu_max']:.2%})"
        )
    for who, what in (
        ("runtime", "the runtime (the backend's engine and its shims)"),
        ("kernel", "the kernel's threads"),
    ):
        if spread is not None and pd.notna(spread.get(f"{who}_cpu_median", math.nan)):
            text_ += (
                f"; {what} used a median {spread[f'{who}_cpu_median']:.2%} of a CPU per window (p95 "
                f"{spread[f'{who}_cpu_p95']:.2%}, max {spread[f'{who}_cpu_max']:.2%})"
            )
    if len(still):
        text_ += ": " + ", ".join(f"{r.experiment} {r.variant} rep{int(r.repeat)}" for r in still.itertuples())
    return text_


def generator_table(load_generator: pd.DataFrame | None, experiment: str, order: list[str]) -> Table | None:
    """The load generator's health: every run's send lateness p99, the runs the analysis found suspect marked
    (load_generator.csv)."""
    if load_generator is None:
        return None
    mine = load_generator[load_generator["experiment"] == experiment]
    if mine.empty:
        return None
    by_variant: dict[str, list[tuple[int, float, float, bool]]] = {}
    for r in mine.itertuples():
        by_variant.setdefault(str(r.variant), []).append((int(r.repeat), r.late_p99_ms, r.work_errors, bool(r.suspect)))
    body = []
    for variant in [v for v in order if v in by_variant] + [v for v in by_variant if v not in order]:
        runs = sorted(by_variant[variant])
        cells = [f"rep{r}: {fmt_number(late)}" + (" SUSPECT" if bad else "") for r, late, _, bad in runs]
        errors = [f"rep{r}: {fmt_number(e)}" for r, _, e, _ in runs]
        flagged = sum(bad for *_, bad in runs)
        body.append([variant, ", ".join(cells), ", ".join(errors), f"{flagged} suspect" if flagged else "ok"])
    total = int(mine["suspect"].astype(bool).sum())
    note = (
        f"Send lateness is the actual minus the scheduled send time of each request; a run whose p99 exceeds "
        f"{float(mine['suspect_above_ms'].iloc[0]):g} ms is flagged SUSPECT: its latencies may include the "
        f"generator's own delay. {total} of {len(mine)} runs flagged. A failed or timed-out /work request is counted "
        "per run and enters the latency quantiles at the client timeout, so the worst runs keep their tail."
    )
    return Table(["variant", "send lateness p99 per run (ms)", "/work errors per run", "status"], body, [note])


@dataclass(frozen=True)
class ExperimentSection:
    name: str
    about: str
    scaling: str
    settings: Table
    figures: list[FigureView]
    estimates: EstimatesTable | None
    readback: Table | None
    readback_note: str
    raw: list[tuple[str, list[RawLink]]]
    #: runs with load records: every run's send lateness p99, suspect ones marked (generator_table)
    generator: Table | None = None
    #: host interference per run, disturbed runs and attempts marked (interference_table)
    interference: Table | None = None
    #: paragraphs computed from the tables (notes.section_notes)
    notes: tuple[str, ...] = ()
    #: the lab's read-out beside ours, cell by cell (lab_cells_table; E3)
    lab_cells: Table | None = None
    #: an experiment of ours beyond the lab (docs/EXPERIMENTS.md): shown under "Beyond the lab"
    ours: bool = False


def experiment_sections(
    tables: Mapping[str, pd.DataFrame], design: Design, figures_dir: Path, raw_root: Path, page_dir: Path
) -> list[ExperimentSection]:
    runs, estimates = tables["runs"], tables["estimates"]
    ran = list(dict.fromkeys(runs["experiment"]))
    names = [e for e in design.experiments if e in ran] + [e for e in ran if e not in design.experiments]
    sections = []
    for name in names:
        order = variant_order(runs, name, design)
        exp = design.experiments.get(name)
        has_estimates = (estimates["experiment"] == name).any()
        # E1 IS its read-back and E4's result is every level's weight: both show the whole table (their
        # catalogue rows say so); the other experiments only report on their read-back check.
        shows_readback = not has_estimates or catalogued(name).shows_readback
        sections.append(
            ExperimentSection(
                name=name,
                about=exp.about if exp else "",
                scaling=exp.scaling.strip() if exp else "",
                settings=settings_table(runs, name, order),
                figures=figure_views(name, figures_dir, estimates, runs),
                estimates=estimates_table(estimates, name, order) if has_estimates else None,
                # An experiment without estimates (E1) IS its read-back; the others only report on it.
                readback=readback_table(tables.get("readback"), name) if shows_readback else None,
                readback_note="" if shows_readback else readback_summary(tables.get("readback"), name),
                raw=raw_links(runs, name, order, raw_root, page_dir),
                generator=generator_table(tables.get("load_generator"), name, order),
                interference=interference_table(runs, name, order),
                notes=tuple(section_notes(name, tables)),
                lab_cells=lab_cells_table(tables.get("metrics"), runs, name, order),
                ours=is_ours(name),
            )
        )
    # the lab's experiments first, then ours under "Beyond the lab" (docs/EXPERIMENTS.md)
    return [s for s in sections if not s.ours] + [s for s in sections if s.ours]


def findings_display(findings: list[Finding]) -> pd.DataFrame:
    """The findings table as the page shows it, for a spreadsheet or Snakemake's report."""
    return pd.DataFrame(
        [
            (
                f.id,
                f.claim,
                f.verdict,
                f.effect,
                f.reference,
                f.reason,
                f.p,
                f.a12,
                f.method,
                "ours" if f.ours else "the lab's",
            )
            for f in findings
        ],
        columns=[
            "id",
            "claim",
            "verdict",
            "effect [CI]",
            "lab reference",
            "reason",
            "p (one-sided, vs threshold)",
            "A12",
            "method",
            "claim of",
        ],
    )


def estimates_display(estimates: pd.DataFrame) -> pd.DataFrame:
    """Every estimate in one long table, formatted as on the page."""
    rows = estimates.assign(flag=estimates["flag"].fillna(""))
    return pd.DataFrame(
        {
            "experiment": rows["experiment"],
            "metric": rows["metric"],
            "unit": rows["unit"],
            "variant": rows["variant"],
            "estimate [CI]": [fmt_interval(r.point, r.lo, r.hi) for r in rows.itertuples()],
            "runs": rows["n"],
            "flag": rows["flag"],
            "method": rows["method"],
        }
    )


# --------------------------------------------------------------------------
# the page


def render_page(context: Mapping[str, Any], template_dir: Path) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a misspelt name in the template fails the build, not the reader
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template(TEMPLATE_NAME).render(**context)


def build_context(
    tables_dir: Path, raw_root: Path, figures_dir: Path, config: Mapping[str, Any], design: Design, page_dir: Path
) -> dict[str, Any]:
    tables = read_tables(tables_dir)
    runs = tables["runs"]
    if runs.empty:
        raise ReportError(f"{tables_dir / 'runs.csv'}: no runs to report")
    sections = experiment_sections(tables, design, figures_dir, raw_root, page_dir)
    findings = findings_rows(tables["findings"])
    checks = tables.get("checks")
    effective_config, profile_yaml = config_text(config, design)
    backend = distinct(runs["backend"]) if "backend" in runs else design.backend
    return {
        "title": f"throttlelab: {Path(design.profile).stem} profile on the {backend} backend",
        "backend": backend,
        "design": design,
        "findings": findings,
        "summary": summary_rows(tables["findings"], findings, checks),
        "forest": forest_view(checks),
        "verdict_counts": verdict_counts(findings),
        "checks": checks_table(checks),
        "sections": sections,
        "beyond": [s.name for s in sections if s.ours],
        "environment": environment_rows(
            tables["environment"],
            runs,
            tables["headers"],
            design,
            [s.name for s in sections],
            tables.get("interference"),
        ),
        "tables": table_links(tables_dir, page_dir),
        "effective_config": effective_config,
        "profile_yaml": profile_yaml,
        "profile_file": design.profile_path.name,
        "other_reports": [],  # every run's report, filled in by render_report
    }


def write_atomically(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(content)
    tmp.replace(path)  # never leave half a file behind


@dataclass(frozen=True)
class ReportLink:
    label: str
    href: str
    current: bool


def report_links(reports_root: Path, current: Path, page_dir: Path) -> list[ReportLink]:
    """Every run's report under ``reports_root`` (``<backend>-<profile>/index.html``), newest
    first, as links from a page in ``page_dir``; ``current`` is the one being written."""
    pages = {p.resolve(): p for p in reports_root.glob("*/index.html")}
    pages.setdefault(current.resolve(), current)

    def mtime(p: Path) -> float:
        return p.stat().st_mtime if p.exists() else float("inf")  # the page being written is the newest

    ordered = sorted(pages.values(), key=mtime, reverse=True)
    return [ReportLink(p.parent.name, relative_href(p, page_dir), p.resolve() == current.resolve()) for p in ordered]


def render_report(
    tables_dir: Path,
    raw_root: Path,
    figures_dir: Path,
    config: Mapping[str, Any],
    out: Path,
    findings_table: Path | None = None,
    estimates_table_path: Path | None = None,
    project: Path = Path("."),
    front_page: Path | None = None,
) -> Path:
    """Write the self-contained report page (and, if asked, its two tables as CSV); returns the page.

    ``project`` is the checkout holding config/ and report/ (the template). ``front_page``: also
    write the same report there (links made relative to it), the page a user opens first; both
    list every run's report found beside ``out`` (``results/report/<backend>-<profile>/``)."""
    design = load_design(dict(config), project / "config")
    reports_root = out.parent.parent
    context = build_context(tables_dir, raw_root, figures_dir, config, design, out.parent)
    context["other_reports"] = report_links(reports_root, out, out.parent)
    write_atomically(out, render_page(context, project / "report"))
    if front_page is not None:
        front = build_context(tables_dir, raw_root, figures_dir, config, design, front_page.parent)
        front["other_reports"] = report_links(reports_root, out, front_page.parent)
        write_atomically(front_page, render_page(front, project / "report"))
    if findings_table is not None:
        write_atomically(findings_table, findings_display(context["findings"]).to_csv(index=False))
    if estimates_table_path is not None:
        estimates = read_table(tables_dir, "estimates")
        write_atomically(estimates_table_path, estimates_display(estimates).to_csv(index=False))
    return out


# --------------------------------------------------------------------------
# command line


def render_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="throttlelab report", description="Render the HTML report.")
    p.add_argument("--tables", required=True, type=Path, help="directory of the tidy tables (docs/TABLES.md)")
    p.add_argument("--raw-root", required=True, type=Path, help="results/<backend>/raw")
    p.add_argument("--figures", required=True, type=Path, help="directory of the figures' SVG files")
    p.add_argument(
        "--config-json", type=config_arg, default={}, help="Snakemake's config as JSON (default: config.yaml defaults)"
    )
    p.add_argument("--out", required=True, type=Path, help="the page to write, e.g. results/report/index.html")
    p.add_argument("--findings-table", type=Path, help="also write the findings table as shown, as CSV")
    p.add_argument(
        "--front-page",
        type=Path,
        help="also write the page here (results/report/index.html: the latest run, linking to the others)",
    )
    p.add_argument(
        "--project", type=Path, default=Path("."), help="the checkout holding config/ and report/ (default: .)"
    )
    p.add_argument("--estimates-table", type=Path, help="also write every estimate as shown, as CSV")
    return p


def main(argv: list[str] | None = None) -> int:
    """``render`` (the default), ``publish`` or ``verify``, then that command's options."""
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and argv[0] in ("render", "publish", "verify") else "render"
    rest = argv[1:] if argv and argv[0] == command else argv
    try:
        if command == "publish":
            return publish_main(rest)
        if command == "verify":
            return verify_main(rest)
        a = render_parser().parse_args(rest)
        out = render_report(
            a.tables,
            a.raw_root,
            a.figures,
            a.config_json,
            a.out,
            a.findings_table,
            a.estimates_table,
            a.project,
            a.front_page,
        )
        print(f"throttlelab report: wrote {out}")
    except (ReportError, ConfigError) as exc:
        print(f"throttlelab {command if command != 'render' else 'report'}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
