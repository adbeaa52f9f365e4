"""The forest plot of one finding across several runs: each decisive check, one row per run, on one axis.

The first screen's plot (figures/forest.py) gives every check its own axis, since checks measure different
quantities. Across runs the same check measures the same quantity, so its rows share an axis: a reader sees
the estimates move from run to run, and, where a run's threshold was derived from another node (its CPUs
set the model's prediction), the zones move with it. Each row keeps what the first screen draws: the zones
of its own threshold, the threshold as a dark tick, no effect dotted, the interval at the level its check
was judged at, the estimate as a dot, and beside it the numbers and the verdict. Drawn from checks.csv of
each run (forest.forest_rows), nothing recomputed.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from throttlelab.figures.forest import (
    HEAD_H,
    ROW_H,
    ForestRow,
    axis_span,
    draw_row,
    row_label,
    svg_head,
    svg_text,
)


@dataclass(frozen=True)
class CheckAcrossRuns:
    """One decisive check of a finding: its name and its row in every run that evaluated it (run label, row)."""

    check: str
    rows: tuple[tuple[str, ForestRow], ...]


def checks_across_runs(runs: Sequence[tuple[str, Sequence[ForestRow]]], finding: str) -> list[CheckAcrossRuns]:
    """The decisive checks of ``finding`` in the order the runs list them (the first run's first), each with its
    row of every run that has it; ``runs`` is (run label, that run's forest rows)."""
    order: dict[str, list[tuple[str, ForestRow]]] = {}
    for label, rows in runs:
        for row in rows:
            if row.finding == finding:
                order.setdefault(row.label, []).append((label, row))
    return [CheckAcrossRuns(check, tuple(rows)) for check, rows in order.items()]


def _shared_span(rows: Sequence[ForestRow]) -> tuple[float, float] | None:
    """One axis for the check's rows when they share a scale (they do unless the runs' analyses differ)."""
    scales = {row.scale for row in rows}
    return axis_span(list(rows)) if len(scales) == 1 else None


def compare_forest_svg(finding: str, checks: Sequence[CheckAcrossRuns]) -> str:
    """The finding's plot as an inline <svg>: per check a heading (the check and its relation), then a row per run."""
    lines = sum(1 + len(c.rows) for c in checks)
    height = HEAD_H + ROW_H * max(1, lines) + 4
    parts = svg_head(
        height,
        f"{finding}: its decisive checks in every run",
        first_heading="check; run",
        scale_heading="one scale per check",
    )
    if not checks:
        parts.append(svg_text(0, HEAD_H + 11, "no decisive check of this finding in any run", font_size="10.5"))
    y, index = float(HEAD_H), 0
    for check in checks:
        # the check and what it is judged against; where runs judged it against different thresholds, each
        # run's row says its own
        against = {label: row_label(row).removeprefix(f"{row.finding} {row.label}") for label, row in check.rows}
        shared = len(set(against.values())) == 1
        heading = check.check + (next(iter(against.values())) if shared else " (threshold per run)")
        parts.append(f'<g class="check-heading" data-finding="{html.escape(finding)}">')
        parts.append(svg_text(0, y + ROW_H / 2 + 3.5, heading, font_size="10.5", font_weight="600"))
        parts.append("</g>")
        y += ROW_H
        span = _shared_span([row for _, row in check.rows])
        for label, row in check.rows:
            parts += draw_row(
                row, y, index, span=span, label=label if shared else f"({against[label].strip()}) {label}"
            )
            y += ROW_H
            index += 1
    parts.append("</svg>")
    return "".join(parts)


def compare_forest_caption(checks: Sequence[CheckAcrossRuns]) -> str:
    """What the plot shows, and where a check's threshold differs between runs."""
    moved = [
        c.check
        for c in checks
        if len(
            {
                (r.threshold, r.threshold_hi if math.isfinite(r.threshold_hi) else None)
                for _, r in c.rows
                if math.isfinite(r.threshold)
            }
        )
        > 1
    ]
    text = (
        "Each check on one scale for all runs (log for ratios); per row the zones of that run's own threshold "
        "(where the whole interval must lie for each verdict), the threshold as a tick, the interval at the "
        "level the check was judged at, the estimate as a dot; numbers and verdict beside it."
    )
    if moved:
        text += f" The threshold differs between runs for {', '.join(moved)} (derived from each run's node)."
    return text
