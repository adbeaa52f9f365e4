"""Several runs side by side: the matrix of findings by runs, and where the runs disagree and why.

Pure functions of each run's tables (findings.csv, checks.csv and setup.csv, docs/TABLES.md): nothing is
recomputed, a run's verdicts and estimates are printed as its analysis wrote them. A run is
:class:`RunTables`; :func:`matrix` gives one row per finding with a cell per run and the lab's own result
beside them, :func:`disagreements` the findings on which the runs' verdicts differ, each with the reasons
the tables give: a run where the finding was not testable (and why), a premise that held in one run and not
in the other, a setup that differs (backend, runtime, cgroup version, kernel, CPUs, profile), a threshold
derived differently, or the same threshold and an estimate that landed elsewhere.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from throttlelab.analysis.number_format import is_missing
from throttlelab.figures.forest import ForestRow, forest_rows, row_numbers, threshold_text
from throttlelab.model.reference import LAB_SETUP
from throttlelab.report.cell_format import text
from throttlelab.report.page import VERDICT_CLASSES, findings_rows, summary_rows

#: setup.csv's columns a column of the matrix is headed by, with the words the page uses for them.
SETUP_FIELDS: tuple[tuple[str, str], ...] = (
    ("backend", "backend"),
    ("runtime", "runtime"),
    ("runtime_version", "runtime version"),
    ("cgroup_version", "cgroup version"),
    ("kernel", "kernel"),
    ("cpus", "CPUs"),
    ("profile", "profile"),
)
HELD = "reproduced"
NOT_TESTABLE = "not testable here"


@dataclass(frozen=True)
class RunTables:
    """One run to compare: its label (unique among the runs), where it came from, its setup (setup.csv's row,
    as text), its findings and checks, and the link to its own report (empty when there is none)."""

    label: str
    source: str
    setup: Mapping[str, str]
    findings: pd.DataFrame
    checks: pd.DataFrame | None = None
    report_href: str = ""


@dataclass(frozen=True)
class Cell:
    """A finding in one run: its verdict, the deciding check's estimate with its interval and level, one line."""

    verdict: str
    verdict_class: str
    estimate: str
    level: str
    headline: str
    href: str

    @property
    def held(self) -> bool:
        """Reproduced: every decisive check holds, all its headline would say (the matrix prints the others')."""
        return self.verdict == HELD


@dataclass(frozen=True)
class MatrixRow:
    finding: str
    claim: str
    ours: bool
    #: the lab's own result: the figure the finding cites, or that the claim is ours, not the lab's
    lab: str
    #: one per run, in the runs' order; None where that run's analysis has no such finding
    cells: tuple[Cell | None, ...]
    #: where it held and where it did not, in one line
    held: str
    #: on how many runs it held, in a few words: "held on 1 of 6 runs" (the matrix's finding column)
    held_count: str = ""


@dataclass(frozen=True)
class Reason:
    """Why two runs' verdicts differ: its kind ("not testable", "premise", a setup field such as "runtime",
    "threshold", "estimate") and the sentence the page prints."""

    kind: str
    text: str


@dataclass(frozen=True)
class Against:
    """One run off the most common verdict, set against the first run on it, and the reasons they differ."""

    run: str
    verdict: str
    reference: str
    reference_verdict: str
    reasons: tuple[Reason, ...]


@dataclass(frozen=True)
class Disagreement:
    finding: str
    #: (verdict, the runs that gave it), the most common verdict first
    verdicts: tuple[tuple[str, tuple[str, ...]], ...]
    #: each run off the most common verdict, with its reasons
    runs: tuple[Against, ...] = field(default_factory=tuple)

    @property
    def reasons(self) -> tuple[Reason, ...]:
        """Every reason given, each once."""
        return tuple({r.text: r for against in self.runs for r in against.reasons}.values())


def _by_id(frame: pd.DataFrame) -> dict[str, object]:
    return {text(r.id): r for r in frame.itertuples()}


def finding_order(runs: Sequence[RunTables]) -> list[str]:
    """Every finding of any run: the first run's order, then those only later runs have."""
    return list(dict.fromkeys(text(i) for run in runs for i in run.findings["id"]))


def _cells(run: RunTables) -> dict[str, Cell]:
    rows = findings_rows(run.findings)
    summary = summary_rows(run.findings, rows, run.checks)
    return {s.id: Cell(s.verdict, s.verdict_class, s.estimate, s.level, s.headline, run.report_href) for s in summary}


def held_line(finding: str, runs: Sequence[RunTables], cells: Sequence[Cell | None]) -> str:
    """'held on A, B; not on C (contradicted), D (not testable here)': where the finding was reproduced."""
    held = [run.label for run, cell in zip(runs, cells) if cell is not None and cell.verdict == HELD]
    other = [
        f"{run.label} ({cell.verdict if cell is not None else 'not evaluated'})"
        for run, cell in zip(runs, cells)
        if cell is None or cell.verdict != HELD
    ]
    parts = [f"held on {', '.join(held)}" if held else "held on no run"]
    if other:
        parts.append(f"not on {', '.join(other)}")
    return "; ".join(parts)


def held_count(cells: Sequence[Cell | None]) -> str:
    """'held on 1 of 6 runs': the count behind :func:`held_line`, short enough for the matrix's first column."""
    held = sum(cell is not None and cell.verdict == HELD for cell in cells)
    return f"held on {held} of {len(cells)} run" + ("" if len(cells) == 1 else "s")


def lab_result(reference: str, ours: bool) -> str:
    """The lab's column: what the lab measured for the claim (findings.csv ``reference``), or that it is ours."""
    if ours:
        return "not a claim of the lab: ours, a hypothesis written before the data"
    return f"claimed; the lab measured {reference}" if reference else "claimed"


def matrix(runs: Sequence[RunTables]) -> list[MatrixRow]:
    """One row per finding: its claim, the lab's own result, and its cell in every run."""
    per_run = [_cells(run) for run in runs]
    shown_by_run = [{f.id: f for f in findings_rows(run.findings)} for run in runs]
    out = []
    for finding in finding_order(runs):
        shown = next(rows[finding] for rows in shown_by_run if finding in rows)
        cells = tuple(cells.get(finding) for cells in per_run)
        out.append(
            MatrixRow(
                finding=finding,
                claim=shown.claim,
                ours=shown.ours,
                lab=lab_result(shown.reference, shown.ours),
                cells=cells,
                held=held_line(finding, runs, cells),
                held_count=held_count(cells),
            )
        )
    return out


def lab_setup() -> dict[str, str]:
    """The lab's own column's setup, keyed like a run's."""
    return {key: LAB_SETUP.get(key, "") for key, _ in SETUP_FIELDS}


# --------------------------------------------------------------------------
# where runs disagree, and why


def _decisive_rows(run: RunTables, finding: str) -> dict[str, ForestRow]:
    if run.checks is None or run.checks.empty:
        return {}
    return {row.label: row for row in forest_rows(run.checks) if row.finding == finding}


def _premises(run: RunTables, finding: str) -> dict[str, str]:
    """The finding's premises in this run: check -> verdict (checks.csv rows of role "premise")."""
    checks = run.checks
    if checks is None or checks.empty or "role" not in checks.columns:
        return {}
    mine = checks[(checks["id"].astype(str) == finding) & (checks["role"] == "premise")]
    return {text(r.check): text(r.verdict) for r in mine.itertuples()}


def _same_threshold(a: ForestRow, b: ForestRow) -> bool:
    def key(row: ForestRow) -> tuple[str, object, object]:
        ends = tuple(None if not math.isfinite(v) else round(v, 9) for v in (row.threshold, row.threshold_hi))
        return (row.relation, *ends)

    return key(a) == key(b)


def _reason_of(finding: object | None) -> str:
    return text(getattr(finding, "reason", "")) if finding is not None else ""


def explain(finding: str, run: RunTables, other: RunTables, verdict: str, other_verdict: str) -> list[Reason]:
    """Why ``run`` gave ``verdict`` where ``other`` gave ``other_verdict``, from the two runs' tables: a verdict
    "not testable" with its reason, a premise judged otherwise, a decisive check judged otherwise (against
    another threshold, or the same one), a check only one run has, then each setup field that differs."""
    mine, theirs = _by_id(run.findings).get(finding), _by_id(other.findings).get(finding)
    reasons: list[Reason] = []
    for who, said, row in ((run, verdict, mine), (other, other_verdict, theirs)):
        if said == NOT_TESTABLE:
            why = _reason_of(row)
            reasons.append(Reason("not testable", f"not testable on {who.label}" + (f": {why}" if why else "")))
    premises, other_premises = _premises(run, finding), _premises(other, finding)
    for check in [c for c in premises if c in other_premises and premises[c] != other_premises[c]]:
        reasons.append(
            Reason(
                "premise",
                f"premise {check}: {premises[check]} on {run.label}, {other_premises[check]} on {other.label}",
            )
        )
    rows, other_rows = _decisive_rows(run, finding), _decisive_rows(other, finding)
    for check in [c for c in rows if c in other_rows and rows[c].verdict != other_rows[c].verdict]:
        a, b = rows[check], other_rows[check]
        said = (
            f"{check}: {a.verdict} on {run.label} ({row_numbers(a)}, against {threshold_text(a) or 'no threshold'}), "
            f"{b.verdict} on {other.label} ({row_numbers(b)}, against {threshold_text(b) or 'no threshold'})"
        )
        if _same_threshold(a, b):
            reasons.append(Reason("estimate", said + "; the same threshold: the estimates differ"))
        else:
            reasons.append(Reason("threshold", said + "; the thresholds differ (each derived for its run's node)"))
    only = [c for c in rows if c not in other_rows] + [c for c in other_rows if c not in rows]
    if only:
        reasons.append(Reason("checks", f"checks evaluated in one run only: {', '.join(only)}"))
    # what else differs between the two runs, after what their own checks say
    for key, words in SETUP_FIELDS:
        here, there = run.setup.get(key, ""), other.setup.get(key, "")
        if here and there and here != there:
            reasons.append(Reason(words, f"different {words}: {here} on {run.label}, {there} on {other.label}"))
    if not reasons:
        reasons.append(
            Reason("estimate", f"{run.label} and {other.label} share setup and thresholds; their estimates differ")
        )
    return reasons


def disagreements(runs: Sequence[RunTables]) -> list[Disagreement]:
    """The findings whose verdicts differ between runs: the runs by verdict (the most common first, a tie
    going to the earlier run's), and for each run off that verdict the reasons against the first run on it."""
    out = []
    rows_by_run = [_by_id(run.findings) for run in runs]
    for finding in finding_order(runs):
        given = [(run, text(rows[finding].verdict)) for run, rows in zip(runs, rows_by_run) if finding in rows]
        counts = Counter(verdict for _, verdict in given)
        if len(counts) < 2:
            continue
        first_seen = {verdict: i for i, (_, verdict) in reversed(list(enumerate(given)))}
        ranked = sorted(counts, key=lambda v: (-counts[v], first_seen[v]))
        reference_verdict = ranked[0]
        reference = next(run for run, verdict in given if verdict == reference_verdict)
        against = tuple(
            Against(
                run.label,
                verdict,
                reference.label,
                reference_verdict,
                tuple(explain(finding, run, reference, verdict, reference_verdict)),
            )
            for run, verdict in given
            if verdict != reference_verdict
        )
        grouped = tuple((v, tuple(run.label for run, verdict in given if verdict == v)) for v in ranked)
        out.append(Disagreement(finding, grouped, against))
    return out


def verdict_class(verdict: str) -> str:
    return VERDICT_CLASSES.get(verdict, "unknown")


def setup_row(values: Mapping[str, object]) -> dict[str, str]:
    """A setup.csv row as text (empty for a missing cell), keyed like :data:`SETUP_FIELDS`."""
    return {key: "" if is_missing(values.get(key)) else str(values.get(key)) for key, _ in SETUP_FIELDS}
