"""The forest plot of the report's first screen: every decisive check against its threshold and its zones.

Drawn as SVG text by hand, from checks.csv alone (the findings stage writes each check's estimate, interval,
level, runs, relation, threshold, no effect and scale; nothing is recomputed here). Checks measure different
quantities (ratios, differences, shares), so each row has its own axis: the row's zones are shaded behind its
interval (reproduced where the whole interval must lie, "weaker than modelled" between no effect and the
threshold, contradicted beyond no effect or the threshold), its threshold is a dark tick, the interval a line
at the level the check was judged at (dashed for a tie's bound on the mean), the point a dot. The numbers,
the level and the runs are printed beside each row, so no axis labels are needed.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import pandas as pd

from throttlelab.analysis.number_format import fmt_bound, fmt_level, fmt_number, fmt_runs, is_missing, is_true

#: verdict -> (colour of the point and the tag, the tag)
VERDICT_MARKS = {
    "reproduced": ("#16643a", "reproduced"),
    "contradicted": ("#9c2317", "contradicted"),
    "inconclusive": ("#7a5a00", "inconclusive"),
    "direction reproduced, weaker than modelled": ("#45612a", "weaker"),
    "not testable here": ("#5b6470", "not testable"),
}
ZONE_COLOURS = {"reproduced": "#d8efdf", "weaker": "#fbefcf", "contradicted": "#f8dcd8"}

WIDTH = 770
LABEL_W, PLOT_W, NUMBERS_W = 262, 196, 210
PLOT_X = LABEL_W + 6
NUMBERS_X = PLOT_X + PLOT_W + 10
TAG_X = NUMBERS_X + NUMBERS_W
ROW_H = 14
HEAD_H = 34
LABEL_CHARS = 46


@dataclass(frozen=True)
class ForestRow:
    finding: str
    label: str
    verdict: str
    effect: float
    lo: float
    hi: float
    level: float
    runs: float
    runs_baseline: float
    relation: str
    threshold: float
    threshold_hi: float
    null: float
    scale: str
    tie: bool


def _float(value: object) -> float:
    return math.nan if is_missing(value) or value == "" else float(value)


def forest_rows(checks: pd.DataFrame) -> list[ForestRow]:
    """The decisive checks of checks.csv (role "decisive"), in its order."""
    if "role" not in checks.columns:
        return []
    rows = []
    for r in checks[checks["role"] == "decisive"].itertuples():
        rows.append(
            ForestRow(
                finding=str(r.id),
                label=str(r.check),
                verdict=str(r.verdict),
                effect=_float(r.effect),
                lo=_float(r.lo),
                hi=_float(r.hi),
                level=_float(getattr(r, "level", math.nan)),
                runs=_float(getattr(r, "runs", math.nan)),
                runs_baseline=_float(getattr(r, "runs_baseline", math.nan)),
                relation="" if is_missing(getattr(r, "relation", "")) else str(r.relation),
                threshold=_float(getattr(r, "threshold", math.nan)),
                threshold_hi=_float(getattr(r, "threshold_hi", math.nan)),
                null=_float(getattr(r, "null", math.nan)),
                scale="" if is_missing(getattr(r, "scale", "")) else str(r.scale),
                tie=is_true(getattr(r, "tie", "")),
            )
        )
    return rows


def threshold_text(row: ForestRow) -> str:
    """What the check's interval is judged against: '> 1.12', 'within [0.8, 1.25]', or '' without a threshold."""
    if row.relation == "within" and math.isfinite(row.threshold) and math.isfinite(row.threshold_hi):
        return f"within [{fmt_number(row.threshold)}, {fmt_number(row.threshold_hi)}]"
    if row.relation in (">", "<") and math.isfinite(row.threshold):
        return f"{row.relation} {fmt_number(row.threshold)}"
    return ""


def _against(row: ForestRow) -> str:
    """' > 1.12', ' within [0.800, 1.25]': the threshold after a label ('' without one)."""
    against = threshold_text(row)
    return f" {against}" if against else ""


def row_label(row: ForestRow) -> str:
    """'F1 p50_wall_ms limit1 / nolimit > 1.12': the finding, the check and what it is judged against."""
    return f"{row.finding} {row.label}{_against(row)}"


def fitted_label(row: ForestRow, limit: int = LABEL_CHARS) -> str:
    """:func:`row_label` in at most ``limit`` characters: a long check name is cut ("…"), never the finding or
    the threshold it is judged against (the whole label is the row's tooltip)."""
    whole = row_label(row)
    if len(whole) <= limit:
        return whole
    head, tail = f"{row.finding} ", _against(row)
    room = limit - len(head) - len(tail) - 1
    return f"{head}{row.label[:room].rstrip()}…{tail}" if room >= 8 else _short(whole, limit)


def row_numbers(row: ForestRow) -> str:
    """'2.18 [1.97, 2.41] 95% R = 3 vs 3'; a tie 'all 5: 0 [0, 0.522] 95%'; '—' without an estimate."""
    if not math.isfinite(row.effect):
        return "no estimate"
    if math.isfinite(row.lo) or math.isfinite(row.hi):
        interval = f" [{fmt_bound(row.lo, 'lower')}, {fmt_bound(row.hi, 'upper')}]"
    else:
        interval = ""
    level = f" {fmt_level(row.level)}" if interval else ""
    if row.tie:
        return f"all {int(row.runs)}: {fmt_number(row.effect)}{interval}{level}"
    runs = fmt_runs(row.runs, row.runs_baseline)
    return f"{fmt_number(row.effect)}{interval}{level}" + (f" {runs}" if runs != "—" else "")


def _on_log(row: ForestRow) -> bool:
    return row.scale in ("log", "mean-ratio")


def axis_span(rows: list[ForestRow]) -> tuple[float, float] | None:
    """The span the rows share on their scale (log10 for ratios, the first row's scale): every finite number
    they draw, padded. One row alone is the first screen's plot; the same check over several runs shares one."""
    values = [
        v
        for row in rows
        for v in (row.effect, row.lo, row.hi, row.threshold, row.threshold_hi, row.null)
        if math.isfinite(v)
    ]
    if rows and _on_log(rows[0]):
        values = [math.log10(v) for v in values if v > 0]
    if not values:
        return None
    low, high = min(values), max(values)
    pad = (high - low) * 0.15 or (abs(high) * 0.2 if high else 0.5)
    return low - pad, high + pad


def x_position(row: ForestRow, value: float, span: tuple[float, float]) -> float:
    """The value's position in the plot band, clamped to it (an end outside the band, or infinite, sits on the edge)."""
    if math.isinf(value):
        return PLOT_X + (PLOT_W if value > 0 else 0)
    if _on_log(row):
        if value <= 0:
            return PLOT_X
        value = math.log10(value)
    low, high = span
    share = (value - low) / (high - low)
    return PLOT_X + min(1.0, max(0.0, share)) * PLOT_W


def zones(row: ForestRow) -> list[tuple[str, float, float]]:
    """The row's zones as (name, from, to) on its own values: where the whole interval must lie for each verdict
    (reproduced, weaker than modelled, contradicted); none without a threshold."""
    t, null, inf = row.threshold, row.null, math.inf
    if not math.isfinite(t):
        return []
    if row.relation == "within":
        if not math.isfinite(row.threshold_hi):
            return []
        return [("contradicted", -inf, t), ("reproduced", t, row.threshold_hi), ("contradicted", row.threshold_hi, inf)]
    middle = math.isfinite(null) and ((null < t) if row.relation == ">" else (null > t))
    if row.relation == ">":
        if middle:
            return [("contradicted", -inf, null), ("weaker", null, t), ("reproduced", t, inf)]
        return [("contradicted", -inf, t), ("reproduced", t, inf)]
    if row.relation == "<":
        if middle:
            return [("reproduced", -inf, t), ("weaker", t, null), ("contradicted", null, inf)]
        return [("reproduced", -inf, t), ("contradicted", t, inf)]
    return []


def svg_text(x: float, y: float, body: str, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}"{extra}>{html.escape(body, quote=False)}</text>'


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def draw_row(
    row: ForestRow, y: float, index: int, span: tuple[float, float] | None = None, label: str | None = None
) -> list[str]:
    """One row of the plot: its label, zones, threshold, no effect, interval, point, numbers and verdict. ``span``:
    an axis shared with other rows (the row's own when None); ``label``: what the row is called (its check)."""
    colour, tag = VERDICT_MARKS.get(row.verdict, ("#5b6470", row.verdict))
    mid = y + ROW_H / 2
    shown = fitted_label(row) if label is None else _short(label)
    label = row_label(row) if label is None else label
    parts = [
        f'<g class="forest-row" data-finding="{html.escape(row.finding)}">',
        f"<title>{html.escape(label)}: {html.escape(row.verdict)}; {html.escape(row_numbers(row))}</title>",
    ]
    if index % 2:
        parts.append(f'<rect x="0" y="{y:.1f}" width="{WIDTH}" height="{ROW_H}" fill="#f6f7f9"/>')
    parts.append(svg_text(0, mid + 3.5, shown, font_size="10"))
    span = axis_span([row]) if span is None else span
    if span is not None:
        for name, start, end in zones(row):
            x0, x1 = x_position(row, start, span), x_position(row, end, span)
            if x1 > x0:
                parts.append(
                    f'<rect class="zone {name}" x="{x0:.1f}" y="{y + 2:.1f}" width="{x1 - x0:.1f}" '
                    f'height="{ROW_H - 4}" fill="{ZONE_COLOURS[name]}"/>'
                )
        for edge in (row.threshold, row.threshold_hi):
            if math.isfinite(edge):
                xt = x_position(row, edge, span)
                parts.append(
                    f'<line class="threshold" x1="{xt:.1f}" x2="{xt:.1f}" y1="{y + 1:.1f}" y2="{y + ROW_H - 1:.1f}" '
                    'stroke="#1b1f24" stroke-width="1.2"/>'
                )
        if math.isfinite(row.null) and row.null != row.threshold:
            xn = x_position(row, row.null, span)
            parts.append(
                f'<line class="null" x1="{xn:.1f}" x2="{xn:.1f}" y1="{y + 2:.1f}" y2="{y + ROW_H - 2:.1f}" '
                'stroke="#8a929c" stroke-width="1" stroke-dasharray="2 2"/>'
            )
        if not math.isnan(row.lo) and not math.isnan(row.hi):
            x0, x1 = x_position(row, row.lo, span), x_position(row, row.hi, span)
            dash = ' stroke-dasharray="3 2"' if row.tie else ""
            parts.append(
                f'<line class="interval" x1="{x0:.1f}" x2="{x1:.1f}" y1="{mid:.1f}" y2="{mid:.1f}" '
                f'stroke="{colour}" stroke-width="2"{dash}/>'
            )
        if math.isfinite(row.effect):
            parts.append(
                f'<circle class="point" cx="{x_position(row, row.effect, span):.1f}" cy="{mid:.1f}" r="3.2" fill="{colour}"/>'
            )
    parts.append(
        svg_text(NUMBERS_X, mid + 3.8, row_numbers(row), font_size="10.5", font_variant_numeric="tabular-nums")
    )
    parts.append(svg_text(TAG_X, mid + 3.8, tag, font_size="10.5", fill=colour, font_weight="600"))
    parts.append("</g>")
    return parts


def svg_head(
    height: float,
    title: str,
    first_heading: str = "finding, check, threshold",
    scale_heading: str = "each row on its own scale",
) -> list[str]:
    """The opening <svg> element, the column headings and the key of the zones and marks."""
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="forest" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" font-family="system-ui, \'DejaVu Sans\', sans-serif" '
        f'fill="#1b1f24"><title>{html.escape(title)}</title>',
        svg_text(0, 12, first_heading, font_size="10.5", font_weight="600"),
        svg_text(PLOT_X, 12, scale_heading, font_size="10.5", font_weight="600"),
        svg_text(NUMBERS_X, 12, "estimate [interval] level, runs", font_size="10.5", font_weight="600"),
        svg_text(TAG_X, 12, "verdict", font_size="10.5", font_weight="600"),
    ]
    key_x = 0.0
    for name in ("reproduced", "weaker", "contradicted"):
        parts.append(
            f'<rect x="{key_x:.1f}" y="19" width="10" height="9" fill="{ZONE_COLOURS[name]}" stroke="#c9ced6"/>'
        )
        parts.append(svg_text(key_x + 13, 27, name, font_size="9.5", fill="#5b6470"))
        key_x += 22 + 5.4 * len(name)
    parts.append(svg_text(PLOT_X, 27, "| threshold  ┆ no effect  - - tie bound", font_size="9.5", fill="#5b6470"))
    return parts


def forest_svg(rows: list[ForestRow], title: str = "Every decisive check against its threshold") -> str:
    """The forest plot as an inline <svg> element (no script, no external resource)."""
    height = HEAD_H + ROW_H * max(1, len(rows)) + 4
    parts = svg_head(height, title)
    if not rows:
        parts.append(svg_text(0, HEAD_H + 11, "no decisive check in checks.csv", font_size="10.5"))
    for i, row in enumerate(rows):
        parts += draw_row(row, HEAD_H + i * ROW_H, i)
    parts.append("</svg>")
    return "".join(parts)


def forest_caption(rows: list[ForestRow]) -> str:
    """What the plot shows, with the levels its intervals were drawn at and the runs behind them."""
    levels = sorted({fmt_level(r.level) for r in rows if math.isfinite(r.level) and math.isfinite(r.lo)})
    runs = sorted({int(r.runs) for r in rows if math.isfinite(r.runs) and r.runs > 0})
    measured = sum(math.isfinite(r.effect) for r in rows)
    return (
        f"{len(rows)} decisive checks, {measured} with an estimate, each on its own scale (log for ratios). "
        "Shading: where the whole interval must lie for each verdict; tick: the threshold; line: the interval at "
        "the level its check was judged at"
        + (f" ({', '.join(levels)})" if levels else "")
        + "; dot: the estimate; dashed: the bound on the mean of runs that all gave one value"
        + (f"; R = {', '.join(map(str, runs))} runs per arm." if runs else ".")
    )
