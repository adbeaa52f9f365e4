"""What every figure shares: colours, the axes helpers, the data it selects, the method sentence.

Every figure follows docs/STATISTICS.md §7: one point per run (the run is the unit of
replication), the estimate with the interval that ``estimates.csv`` already
holds (asymmetric on the log scale; never recomputed here), and the lab's own
figure (:mod:`throttlelab.model.reference`) in dashed red where the article
gives one; for an experiment of ours (no lab figure), the model's prediction
written before the data in dotted grey. The family modules (:mod:`.jobs_figures`,
:mod:`.weights_figures`, :mod:`.services_figures`) import this module and nothing of each other.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator

from throttlelab.analysis import tidy
from throttlelab.model.quantities import format_cpu
from throttlelab.model.variants import VariantSpec

RUN_COLOR = "0.30"
ROUND_COLOR = "0.72"
ESTIMATE_COLOR = "black"
LAB_COLOR = "#c0392b"
RULE_COLOR = "#2471a3"
#: the model's prediction, written before the data, where an experiment of ours has no lab figure
MODEL_COLOR = "0.35"
FIG_WIDTH = 7.6


@contextmanager
def paper_style(font_scale: float = 1.1) -> Iterator[None]:
    """seaborn's white grid in its paper context, for the figure drawn inside ``with paper_style():``."""
    with sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=font_scale):
        yield


# --------------------------------------------------------------------------
# selecting data


def experiment_rows(table: pd.DataFrame, experiment: str, table_name: str) -> pd.DataFrame:
    """The experiment's rows; a clear error when there are none (a figure of nothing hides a bug)."""
    rows = table[table["experiment"] == experiment]
    if rows.empty:
        raise ValueError(f"{table_name}.csv has no rows for experiment {experiment}")
    return rows


def variant_specs(runs: pd.DataFrame, experiment: str) -> dict[str, VariantSpec]:
    """Each variant's parameters, read back from runs.csv, in the order the runs appear."""
    return tidy.variant_specs(experiment_rows(runs, experiment, "runs"), experiment)


def by_limit(specs: Mapping[str, VariantSpec]) -> list[str]:
    """Variants from no limit down to the tightest; ties keep their order in runs.csv."""
    rank = {name: i for i, name in enumerate(specs)}

    def key(name: str) -> tuple[float, int]:
        milli = specs[name].milli("limit")
        return (-math.inf if milli is None else -milli, rank[name])

    return sorted(specs, key=key)


def limit_label(spec: VariantSpec, key: str = "limit") -> str:
    """'no limit' or 'limit 1500m' (a limit of the spec's field ``key``)."""
    milli = spec.milli(key)
    return "no limit" if milli is None else f"limit {format_cpu(milli)}"


def ordered(specs: Mapping[str, Any], preferred: tuple[str, ...]) -> list[str]:
    """The preferred order of the variants that ran, then any others in runs.csv order."""
    return [v for v in preferred if v in specs] + [v for v in specs if v not in preferred]


def per_run(metrics: pd.DataFrame, experiment: str, metric: str) -> pd.DataFrame:
    """One row per run: variant, repeat, value (NaN values dropped: a ratio of zero periods)."""
    rows = metrics[(metrics["experiment"] == experiment) & (metrics["metric"] == metric)]
    return rows[["variant", "repeat", "value"]].dropna()


def model_values(predictions: pd.DataFrame, experiment: str, prediction: str, variants: list[str]) -> dict[str, float]:
    """The model's ``prediction`` for each of the variants that has one, in their order (predictions.csv,
    written by the findings stage from the numbers its thresholds came from)."""
    rows = predictions[(predictions["experiment"] == experiment) & (predictions["prediction"] == prediction)]
    found = dict(zip(rows["variant"].astype(str), rows["value"].astype(float)))
    return {v: found[v] for v in variants if v in found}


def estimates_of(estimates: pd.DataFrame, experiment: str, metric: str) -> pd.DataFrame:
    rows = estimates[(estimates["experiment"] == experiment) & (estimates["metric"] == metric)].copy()
    rows["flag"] = rows["flag"].fillna("")
    return rows


# --------------------------------------------------------------------------
# drawing


def spread(center: float, count: int, width: float) -> list[float]:
    """Deterministic jitter: `count` positions evenly across `width` around `center`."""
    if count <= 1:
        return [center] * count
    return [center - width / 2 + width * k / (count - 1) for k in range(count)]


def draw_runs(ax: Axes, runs: pd.DataFrame, xpos: Mapping[str, float], offset: float) -> None:
    for variant, group in runs.groupby("variant", sort=False):
        if variant in xpos:
            xs = spread(xpos[variant] + offset, len(group), 0.12)
            ax.scatter(xs, group["value"], s=26, facecolors="white", edgecolors=RUN_COLOR, linewidths=1.2, zorder=3)


def draw_estimates(ax: Axes, est: pd.DataFrame, xpos: Mapping[str, float], offset: float) -> None:
    """Point and interval as estimates.csv gives them; no interval when the table has none."""
    for row in est.itertuples():
        if row.variant not in xpos:
            continue
        x = xpos[row.variant] + offset
        if math.isfinite(row.lo) and math.isfinite(row.hi):
            yerr = [[row.point - row.lo], [row.hi - row.point]]
            ax.errorbar([x], [row.point], yerr=yerr, fmt="D", color=ESTIMATE_COLOR, ms=5, capsize=3, lw=1.4, zorder=4)
        else:
            ax.plot([x], [row.point], "D", color=ESTIMATE_COLOR, ms=5, mfc="white", zorder=4)


def draw_lab(
    ax: Axes,
    refs: Mapping[str, float],
    xpos: Mapping[str, float],
    half_width: float = 0.36,
    ceiling: float | None = None,
) -> None:
    """Dashed red bars at the lab's values; one far above `ceiling` becomes an arrow with its number,
    so a reference from a bigger machine does not squash our own data flat."""
    for variant, value in refs.items():
        if variant not in xpos:
            continue
        x = xpos[variant]
        if ceiling is not None and value > ceiling:
            ax.annotate(f"{value:g} ↑", (x, ceiling), ha="center", va="top", color=LAB_COLOR, fontsize=8)
        else:
            ax.hlines(value, x - half_width, x + half_width, colors=LAB_COLOR, linestyles="--", lw=1.4, zorder=2)


def data_top(runs: pd.DataFrame, est: pd.DataFrame) -> float:
    """The highest per-run value or interval bound: where our own data ends."""
    return float(pd.concat([runs["value"], est["point"], est["hi"]]).max(skipna=True))


def set_categories(ax: Axes, order: list[str], labels: list[str]) -> dict[str, float]:
    """Put `order` on the x axis at 0, 1, ... with the given tick labels; return the positions."""
    ax.set_xticks(range(len(order)), labels)
    ax.set_xlim(-0.6, len(order) - 0.4)
    ax.grid(axis="x", visible=False)
    return {name: float(i) for i, name in enumerate(order)}


def plain_log_axis(ax: Axes) -> None:
    """A log y axis labelled 20, 50, 100 rather than 10^2 (times read better plain)."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: ""))


def legend_handles(level: float, *, rounds: bool = False, lab: str = "lab reference") -> list[Line2D]:
    handles = []
    if rounds:
        handles.append(Line2D([], [], ls="", marker="o", ms=3, color=ROUND_COLOR, label="each round"))
    handles += [
        Line2D([], [], ls="", marker="o", ms=5, mfc="white", mec=RUN_COLOR, label="each run"),
        Line2D([], [], ls="-", marker="D", ms=5, color=ESTIMATE_COLOR, label=f"estimate, {level:.0%} CI"),
    ]
    handles.append(Line2D([], [], ls="--", color=LAB_COLOR, label=lab))
    return handles


def model_legend_handles(level: float) -> list[Line2D]:
    """The lab figures' legend (:func:`legend_handles`) with the model's prediction where the lab's figure stands."""
    *ours, _lab = legend_handles(level, rounds=True)
    return [*ours, Line2D([], [], ls=":", color=MODEL_COLOR, label="model, before the data")]


def draw_model(ax: Axes, values: Mapping[str, float], xpos: Mapping[str, float]) -> None:
    """Dotted grey bars at the model's values (an experiment of ours: no lab figure to draw)."""
    for variant, value in values.items():
        if variant in xpos and np.isfinite(value):
            ax.hlines(
                value, xpos[variant] - 0.36, xpos[variant] + 0.36, colors=MODEL_COLOR, linestyles=":", lw=1.6, zorder=2
            )


def level_panel(
    ax: Axes,
    experiment: str,
    metric: str,
    metrics: pd.DataFrame,
    estimates: pd.DataFrame,
    order: list[str],
    labels: list[str],
    predicted: Mapping[str, float],
) -> None:
    """Each run's value and the estimate of one metric by variant, with the model's prediction."""
    xpos = set_categories(ax, order, labels)
    draw_runs(ax, per_run(metrics, experiment, metric), xpos, -0.1)
    draw_estimates(ax, estimates_of(estimates, experiment, metric), xpos, 0.14)
    draw_model(ax, predicted, xpos)
    ax.tick_params(axis="x", labelsize=8)


def confidence_level(est: pd.DataFrame) -> float:
    levels = est["level"].dropna().unique()
    return float(levels[0]) if len(levels) else 0.95


def new_figure(height: float, ncols: int = 1, **subplot_kw: Any) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(FIG_WIDTH, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False, **subplot_kw)[0]
    return fig, list(axes)


def series_colors(names: list[str]) -> dict[str, Any]:
    """One colour-blind-safe colour per name, skipping vermillion: red marks the lab."""
    palette = [c for i, c in enumerate(sns.color_palette("colorblind", 10)) if i != 3]
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


# --------------------------------------------------------------------------
# captions: the method as the tables state it


def method_sentence(est: pd.DataFrame) -> str:
    """'Student t on log per-run p50, R = 3, low n', naming the variants when they differ."""
    est = est.assign(flag=est["flag"].fillna(""))
    groups = list(est.groupby(["method", "flag"], sort=False))
    parts = []
    for (method, flag), group in groups:
        text = method + (f", {flag}" if flag else "")
        if len(groups) > 1:
            text += f" ({', '.join(group['variant'])})"
        parts.append(text)
    return "; ".join(parts) if parts else "no estimates in estimates.csv"


def ours_caption(text: str, est: pd.DataFrame | None = None) -> str:
    """The caption of one of our figures beyond the lab: where its design is written, ``text``, and the
    method of the intervals of ``est`` (the figure's estimates; None where it draws none)."""
    intervals = "" if est is None else f" Intervals: {method_sentence(est)}."
    return f"Ours (docs/EXPERIMENTS.md). {text}{intervals}"
