"""The report's figures: tidy tables in, a matplotlib Figure out, SVG text for inlining.

Every figure follows STATS.md §7: one point per run (the run is the unit of
replication), the estimate with the interval that ``estimates.csv`` already
holds (asymmetric on the log scale; never recomputed here), and the lab's own
figure from SPEC §4 where the article gives one. Functions are pure: they take
DataFrames and return a Figure or a string; only :func:`main` touches files.

    python -m throttlelab.figures.plots --figure e2a_completion \\
        --table rounds=T/rounds.csv --table metrics=T/metrics.csv \\
        --table estimates=T/estimates.csv --table runs=T/runs.csv --out fig.svg
"""

from __future__ import annotations

import argparse
import io
import json
import math
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator

from throttlelab.model.quantities import format_cpu, parse_cpu

# The lab's measurements (SPEC §4, run 1), keyed like our tables: experiment ->
# variant -> metric. They come from other machines, so the figures mark them for
# the shape of the result, and captions say where each was measured.
LAB_REFERENCE: dict[str, dict[str, dict[str, float]]] = {
    "E2a": {
        "nolimit": {"p50_wall_ms": 34.3, "throttled_ms_per_round": 0.0},
        "limit2": {"p50_wall_ms": 34.6, "throttled_ratio": 0 / 40, "throttled_ms_per_round": 0.0},
        "limit1": {"p50_wall_ms": 84.4, "throttled_ratio": 20 / 60, "throttled_ms_per_round": 7052.5 / 20},
        "limit500m": {"p50_wall_ms": 260.4, "throttled_ratio": 60 / 100, "throttled_ms_per_round": 23981.0 / 20},
        "limit1-2threads": {"p50_wall_ms": 132.3, "throttled_ratio": 17 / 77, "throttled_ms_per_round": 1301.6 / 20},
    },
    "E3": {
        **{f"go124mod-{limit}": {"gomaxprocs": 10} for limit in ("none", "500m", "1", "1500m", "2", "2500m")},
        "go125mod-none": {"gomaxprocs": 10},
        **{f"go125mod-{limit}": {"gomaxprocs": 2} for limit in ("500m", "1", "1500m", "2")},
        "go125mod-2500m": {"gomaxprocs": 3},
        "go125mod-2-env6": {"gomaxprocs": 6},
        "go125mod-2-godebug": {"gomaxprocs": 10},
    },
    "S1": {
        "nolimit": {"gomaxprocs": 14, "nr_throttled": 0, "throttled_ms": 0.0},
        "cpus1500m": {"gomaxprocs": 2, "nr_throttled": 20, "throttled_ms": 1011.0},
        "cpus1500m-gomaxprocs8": {"gomaxprocs": 8, "nr_throttled": 21, "throttled_ms": 13658.0},
    },
}
LAB_SETUP = {
    "E2a": "a 10-CPU node, 8 threads × 20 ms per burst, 20 rounds",
    "E3": "a 10-CPU node",
    "S1": "a 14-CPU docker host, 2 s window",
}

RUN_COLOR = "0.30"
ROUND_COLOR = "0.72"
ESTIMATE_COLOR = "black"
LAB_COLOR = "#c0392b"
RULE_COLOR = "#2471a3"
FIG_WIDTH = 7.6


# --------------------------------------------------------------------------
# selecting data


def experiment_rows(table: pd.DataFrame, experiment: str, table_name: str) -> pd.DataFrame:
    """The experiment's rows; a clear error when there are none (a figure of nothing hides a bug)."""
    rows = table[table["experiment"] == experiment]
    if rows.empty:
        raise ValueError(f"{table_name}.csv has no rows for experiment {experiment}")
    return rows


def variant_specs(runs: pd.DataFrame, experiment: str) -> dict[str, dict[str, Any]]:
    """Each variant's parameters, read back from runs.csv, in the order the runs appear."""
    specs: dict[str, dict[str, Any]] = {}
    for row in experiment_rows(runs, experiment, "runs").itertuples():
        specs.setdefault(row.variant, json.loads(row.spec_json))
    return specs


def limit_milli(spec: Mapping[str, Any]) -> int | None:
    limit = spec.get("limit")
    return None if limit is None else parse_cpu(limit, "limit")


def by_limit(specs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Variants from no limit down to the tightest; ties keep their order in runs.csv."""
    rank = {name: i for i, name in enumerate(specs)}

    def key(name: str) -> tuple[float, int]:
        milli = limit_milli(specs[name])
        return (-math.inf if milli is None else -milli, rank[name])

    return sorted(specs, key=key)


def limit_label(spec: Mapping[str, Any]) -> str:
    milli = limit_milli(spec)
    return "no limit" if milli is None else f"limit {format_cpu(milli)}"


def per_run(metrics: pd.DataFrame, experiment: str, metric: str) -> pd.DataFrame:
    """One row per run: variant, repeat, value (NaN values dropped: a ratio of zero periods)."""
    rows = metrics[(metrics["experiment"] == experiment) & (metrics["metric"] == metric)]
    return rows[["variant", "repeat", "value"]].dropna()


def estimates_of(estimates: pd.DataFrame, experiment: str, metric: str) -> pd.DataFrame:
    rows = estimates[(estimates["experiment"] == experiment) & (estimates["metric"] == metric)].copy()
    rows["flag"] = rows["flag"].fillna("")
    return rows


def lab_values(experiment: str, metric: str) -> dict[str, float]:
    return {
        variant: values[metric]
        for variant, values in LAB_REFERENCE.get(experiment, {}).items()
        if metric in values
    }


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


def draw_lab(ax: Axes, refs: Mapping[str, float], xpos: Mapping[str, float], half_width: float = 0.36,
             ceiling: float | None = None) -> None:
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


def confidence_level(est: pd.DataFrame) -> float:
    levels = est["level"].dropna().unique()
    return float(levels[0]) if len(levels) else 0.95


def new_figure(height: float, ncols: int = 1, **subplot_kw: Any) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(FIG_WIDTH, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False, **subplot_kw)[0]
    return fig, list(axes)


# --------------------------------------------------------------------------
# the figures


def e2a_tick_labels(order: list[str], specs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return [f"{limit_label(specs[v])}\n{specs[v]['threads']} × {specs[v]['work_ms']:g} ms" for v in order]


def e2a_completion_figure(rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """E2a: completion time of each burst round by limit, per-run p50, its estimate, the lab's p50."""
    specs = variant_specs(runs, "E2a")
    order = by_limit(specs)
    est = estimates_of(estimates, "E2a", "p50_wall_ms")
    with sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=1.1):
        fig, (ax,) = new_figure(3.9)
        xpos = set_categories(ax, order, e2a_tick_labels(order, specs))
        for variant, group in experiment_rows(rounds, "E2a", "rounds").groupby("variant", sort=False):
            if variant in xpos:
                xs = spread(xpos[variant] - 0.2, len(group), 0.2)
                ax.scatter(xs, group["wall_ms"], s=7, color=ROUND_COLOR, lw=0, zorder=2)
        draw_runs(ax, per_run(metrics, "E2a", "p50_wall_ms"), xpos, 0.04)
        draw_estimates(ax, est, xpos, 0.22)
        draw_lab(ax, lab_values("E2a", "p50_wall_ms"), xpos)
        plain_log_axis(ax)
        ax.set_ylabel("completion time of a round (ms, log)")
        ax.set_xlabel("")
        fig.legend(handles=legend_handles(confidence_level(est), rounds=True, lab="lab p50 (10 CPUs)"),
                   loc="outside upper center", ncol=4, frameon=False)
    return fig


def series_colors(names: list[str]) -> dict[str, Any]:
    """One colour-blind-safe colour per name, skipping vermillion: red marks the lab."""
    palette = [c for i, c in enumerate(sns.color_palette("colorblind", 10)) if i != 3]
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def e2a_setting_label(spec: Mapping[str, Any], most_threads: int) -> str:
    """'limit 1', or 'limit 1, 2 threads' for an arm with fewer threads than the others."""
    label = limit_label(spec)
    return label if spec["threads"] == most_threads else f"{label}, {spec['threads']} threads"


def draw_throttled_share(ax: Axes, metrics: pd.DataFrame, est: pd.DataFrame, order: list[str],
                         specs: Mapping[str, Mapping[str, Any]]) -> None:
    xpos = set_categories(ax, order, e2a_tick_labels(order, specs))
    draw_runs(ax, per_run(metrics, "E2a", "throttled_ratio"), xpos, -0.1)
    draw_estimates(ax, est, xpos, 0.14)
    draw_lab(ax, lab_values("E2a", "throttled_ratio"), xpos)
    # A share lies in [0, 1], but a t interval on few runs may not: show all of it rather than clip.
    ax.set_ylim(min([-0.03, *(est["lo"].dropna() - 0.03)]), max([1.03, *(est["hi"].dropna() + 0.03)]))
    ax.set_ylabel("throttled periods / periods")
    ax.set_title("(a) share of periods throttled", loc="left")
    ax.tick_params(axis="x", labelsize=8)


def draw_throttled_vs_wall(ax: Axes, rounds: pd.DataFrame, order: list[str],
                           specs: Mapping[str, Mapping[str, Any]]) -> None:
    most_threads = max(spec["threads"] for spec in specs.values())
    colors = series_colors(order)
    data = experiment_rows(rounds, "E2a", "rounds").assign(throttled_ms=lambda d: d["d_throttled_usec"] / 1000)
    for variant in order:
        rows = data[data["variant"] == variant]
        ax.scatter(rows["wall_ms"], rows["throttled_ms"], s=12, color=colors[variant], alpha=0.8,
                   label=e2a_setting_label(specs[variant], most_threads), zorder=3)
    lab = LAB_REFERENCE["E2a"]
    for variant in order:
        if "throttled_ms_per_round" in lab.get(variant, {}):
            ax.scatter([lab[variant]["p50_wall_ms"]], [lab[variant]["throttled_ms_per_round"]], marker="X", s=60,
                       color=colors[variant], edgecolors=LAB_COLOR, linewidths=1.0, zorder=4)
    lab_top = max((v.get("throttled_ms_per_round", 0) for v in lab.values()), default=0)
    top = max(data["wall_ms"].max(), data["throttled_ms"].max(), lab_top) * 1.05
    ax.plot([0, top], [0, top], color="0.45", lw=1, ls=":", zorder=1)
    ax.text(top * 0.97, top * 0.9, "throttled = wall", ha="right", va="top", fontsize=8, color="0.35")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("wall time of the round (ms)")
    ax.set_ylabel("throttled time in the round (ms)")
    ax.set_title("(b) each round; X = lab per-round mean", loc="left")
    ax.legend(loc="lower right", fontsize=8, frameon=True)


def e2a_counters_figure(rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """E2a: (a) share of periods throttled by limit; (b) throttled ms against wall ms, round by round."""
    specs = variant_specs(runs, "E2a")
    order = [v for v in by_limit(specs) if limit_milli(specs[v]) is not None]  # no quota, no periods
    est = estimates_of(estimates, "E2a", "throttled_ratio")
    with sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=1.1):
        fig, (left, right) = new_figure(4.1, 2, width_ratios=(1, 1.15))
        draw_throttled_share(left, metrics, est, order, specs)
        draw_throttled_vs_wall(right, rounds, order, specs)
        fig.legend(handles=legend_handles(confidence_level(est), lab="lab (10 CPUs)"),
                   loc="outside upper center", ncol=3, frameon=False)
    return fig


AFTER_EVERY_LIMIT = 10**9  # sort key of the override arms: to the right of every limit


def e3_setting(spec: Mapping[str, Any]) -> tuple[int, str]:
    """Sort key and tick label of an E3 variant: limits first, then the env and GODEBUG arms."""
    milli = limit_milli(spec)
    label = "none" if milli is None else format_cpu(milli)
    if spec.get("gomaxprocs"):
        return (AFTER_EVERY_LIMIT, f"{label}\n+ env {spec['gomaxprocs']}")
    if spec.get("godebug"):
        return (AFTER_EVERY_LIMIT + 1, f"{label}\n+ GODEBUG")
    return (-1 if milli is None else milli, label)


def e3_gomaxprocs_figure(metrics: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """E3: GOMAXPROCS by limit for each module line: measured, the SPEC rule here, the lab's 10-CPU value."""
    specs = variant_specs(runs, "E3")
    builds = sorted({spec["build"] for spec in specs.values()})
    measured = per_run(metrics, "E3", "gomaxprocs")
    expected = per_run(metrics, "E3", "expected_gomaxprocs")
    rule = expected.drop_duplicates("variant").set_index("variant")["value"]
    lab = lab_values("E3", "gomaxprocs")
    top = max([*measured["value"], *expected["value"], *lab.values(), 2]) + 1
    widths = [sum(spec["build"] == b for spec in specs.values()) for b in builds]
    with sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=1.1):
        fig, axes = new_figure(3.7, len(builds), sharey=True, width_ratios=widths)
        for ax, build in zip(axes, builds):
            names = sorted((v for v, s in specs.items() if s["build"] == build), key=lambda v: e3_setting(specs[v])[0])
            xpos = set_categories(ax, names, [e3_setting(specs[v])[1] for v in names])
            ax.scatter([xpos[v] for v in names if v in rule.index], [rule[v] for v in names if v in rule.index],
                       marker="s", s=110, facecolors="none", edgecolors=RULE_COLOR, linewidths=1.5, zorder=3)
            for variant, group in measured.groupby("variant", sort=False):
                if variant in xpos:
                    xs = spread(xpos[variant], len(group), 0.16)
                    ax.scatter(xs, group["value"], s=26, color=RUN_COLOR, zorder=4)
            draw_lab(ax, lab, xpos, half_width=0.3)
            ax.set_title(f"module line {build}", loc="left")
            ax.set_ylim(0, top)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax.tick_params(axis="x", labelsize=8)
            ax.set_xlabel("CPU limit")
        axes[0].set_ylabel("GOMAXPROCS")
        handles = [
            Line2D([], [], ls="", marker="o", ms=5, color=RUN_COLOR, label="measured, each run"),
            Line2D([], [], ls="", marker="s", ms=8, mfc="none", mec=RULE_COLOR, mew=1.5, label="SPEC rule, this node"),
            Line2D([], [], ls="--", color=LAB_COLOR, label="lab (10 CPUs)"),
        ]
        fig.legend(handles=handles, loc="outside upper center", ncol=3, frameon=False)
    return fig


def s1_tick_labels(order: list[str], specs: Mapping[str, Mapping[str, Any]], gomaxprocs: pd.DataFrame) -> list[str]:
    """The setting, then the GOMAXPROCS the runs reported ('limit 1500m, env 8' / 'GOMAXPROCS 8')."""
    measured = gomaxprocs.groupby("variant")["value"].agg(lambda s: "/".join(f"{v:g}" for v in sorted(s.unique())))
    labels = []
    for variant in order:
        spec = specs[variant]
        setting = limit_label(spec)
        if spec.get("gomaxprocs"):
            setting += f", env {spec['gomaxprocs']}"
        if spec.get("build") and spec["build"] != "go125mod":
            setting += f", {spec['build']}"
        labels.append(f"{setting}\nGOMAXPROCS {measured.get(variant, '?')}")
    return labels


def s1_throttling_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """S1: throttled time and number of throttled periods in the window, by variant."""
    specs = variant_specs(runs, "S1")
    order = by_limit(specs)
    labels = s1_tick_labels(order, specs, per_run(metrics, "S1", "gomaxprocs"))
    panels = (("throttled_ms", "throttled time (ms)", "(a) throttled time in the window"),
              ("nr_throttled", "throttled periods", "(b) throttled periods in the window"))
    with sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=1.1):
        fig = Figure(figsize=(FIG_WIDTH, 5.6), layout="constrained")
        axes = fig.subplots(2, 1, sharex=True)
        for ax, (metric, ylabel, title) in zip(axes, panels):
            est = estimates_of(estimates, "S1", metric)
            values = per_run(metrics, "S1", metric)
            xpos = set_categories(ax, order, labels)
            draw_runs(ax, values, xpos, -0.1)
            draw_estimates(ax, est, xpos, 0.14)
            refs = lab_values("S1", metric)
            ours = max(data_top(values, est), 1.0)
            top = max([ours, *(v for v in refs.values() if v <= 3 * ours)]) * 1.15
            draw_lab(ax, refs, xpos, ceiling=top)
            ax.set_ylim(0, top)
            ax.set_ylabel(ylabel)
            ax.set_title(title, loc="left")
        fig.legend(handles=legend_handles(confidence_level(est), lab="book (14 CPUs, 2 s)"),
                   loc="outside upper center", ncol=3, frameon=False)
    return fig


# E5/E10: the lab's measured shares of the one CPU (SPEC §4), by (experiment, phase) and member.
LAB_SHARES = {
    ("E5", "pods"): {"pod-p100m": 0.046, "pod-p1": 0.447, "pod-two": 0.493},
    ("E5", "two-container"): {"small": 0.144, "big": 0.847},
    ("E10", "two-container"): {"small": 0.092, "big": 0.899},
}
SHARE_PANELS = (("E5", "new runc"), ("E10", "old runc"))
PHASE_TITLES = {"pods": "between pods", "two-container": "inside the two-container pod"}


def _member_frame(frame: pd.DataFrame, member: str) -> pd.DataFrame:
    """Rows of one share metric, with the member standing in for the variant (the x category)."""
    out = frame.copy()
    out["variant"] = member
    return out


def weights_shares_figure(metrics: pd.DataFrame, estimates: pd.DataFrame,
                          share_expectations: pd.DataFrame) -> Figure:
    """E5 beside E10: each member's measured share of one CPU, the weights' prediction, the lab's share."""
    phases = [p for p in PHASE_TITLES if (share_expectations["variant"] == p).any()]
    panels = [(e, label) for e, label in SHARE_PANELS if (share_expectations["experiment"] == e).any()]
    with sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=1.05):
        fig = Figure(figsize=(FIG_WIDTH, 2.7 * max(len(phases), 1) + 0.6), layout="constrained")
        axes = fig.subplots(max(len(phases), 1), max(len(panels), 1), squeeze=False, sharey="row")
        level = 0.95
        for row, phase in enumerate(phases):
            for col, (experiment, label) in enumerate(panels):
                ax = axes[row][col]
                expect = share_expectations[(share_expectations["experiment"] == experiment)
                                            & (share_expectations["variant"] == phase)]
                expect = expect.drop_duplicates("member")
                members = list(expect["member"])
                labels = [f"{m}\nw={w}" for m, w in zip(expect["member"], expect["weight"])]
                xpos = set_categories(ax, members, labels)
                for member in members:
                    metric = f"share_{member}"
                    runs = per_run(metrics, experiment, metric)
                    draw_runs(ax, _member_frame(runs[runs["variant"] == phase], member), xpos, -0.12)
                    est = estimates_of(estimates, experiment, metric)
                    est = est[est["variant"] == phase]
                    if not est.empty:
                        level = confidence_level(est)
                    draw_estimates(ax, _member_frame(est, member), xpos, 0.14)
                for member, share in zip(expect["member"], expect["share"]):
                    x = xpos[member]
                    ax.hlines(share, x - 0.36, x + 0.36, colors=RULE_COLOR, lw=2.0, zorder=1)
                draw_lab(ax, LAB_SHARES.get((experiment, phase), {}), xpos)
                ax.set_ylim(0, 1)
                ax.set_title(f"{experiment} ({label}): {PHASE_TITLES[phase]}", loc="left", fontsize=9)
                if col == 0:
                    ax.set_ylabel("share of the one CPU")
        handles = legend_handles(level, lab="lab (10-CPU kind node, 1 CPU pinned)")
        handles.append(Line2D([], [], color=RULE_COLOR, lw=2.0, label="w / sum(w) of the siblings"))
        fig.legend(handles=handles, loc="outside upper center", ncol=2, frameon=False)
    return fig


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


def e2a_completion_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    est = estimates_of(estimates, "E2a", "p50_wall_ms")
    return (
        "Completion time of every burst round (grey dots), each run's median round (open circles) and the "
        "geometric mean of the per-run medians with its interval (diamond and bar; no bar where the table "
        f"gives none). Dashed red: the lab's p50 on {LAB_SETUP['E2a']}; it sets the shape to compare, not "
        f"the level. Interval: {method_sentence(est)}."
    )


def e2a_counters_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    specs = variant_specs(runs, "E2a")
    est = estimates_of(estimates, "E2a", "throttled_ratio")
    est = est[est["variant"].map(lambda v: v in specs and limit_milli(specs[v]) is not None)]  # as plotted
    return (
        "(a) Share of CFS periods in which the job was throttled, per run (open circles) with the estimate and "
        "its interval; variants without a limit have no periods and are left out. Dashed red: the lab's "
        f"throttled / periods on {LAB_SETUP['E2a']}. Interval: {method_sentence(est)}. "
        "(b) Throttled time against wall time for every round; points above the dotted diagonal were "
        "throttled for longer than the round lasted, because the kernel adds up throttled time over CPUs "
        "(and so over threads). X: the lab's throttled ms per round (total / 20) against its p50."
    )


def e3_gomaxprocs_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    est = estimates_of(estimates, "E3", "gomaxprocs")
    runs = int(est["n"].max()) if len(est) else 0
    return (
        "GOMAXPROCS each run reported (dots) for both go.mod lines, against the value the SPEC rule predicts "
        "for this node's CPUs (open squares) and the lab's measurement on its 10-CPU node (dashed red). "
        f"A deterministic readout with R = {runs} per variant: the dots are the data, there is no interval."
    )


def s1_throttling_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    times = estimates_of(estimates, "S1", "throttled_ms")
    counts = estimates_of(estimates, "S1", "nr_throttled")
    return (
        "Throttling while every P spins for the window: (a) throttled time, (b) throttled periods, per run "
        "(open circles) with the estimate and its interval (diamond; hollow without an interval). Tick labels "
        f"give the GOMAXPROCS the runs reported. Dashed red: the book's figures ({LAB_SETUP['S1']}), for "
        f"direction only. Intervals: (a) {method_sentence(times)}; (b) {method_sentence(counts)}."
    )


# --------------------------------------------------------------------------
# the registry the rules and the report use


def weights_shares_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    est = estimates[estimates["experiment"].isin(["E5", "E10"]) & estimates["metric"].str.startswith("share_")]
    return (
        "Each busy container is one spinning thread; the node is pinned to one CPU. A share is a member's CPU "
        "gain over all members' gain between two readings, averaged over the readings of a run. Blue: the "
        "share the weights predict (pods: kubelet's linear weights; containers: the runtime's conversion); "
        "red dashes: the lab's measurement. " + method_sentence(est)
    )


@dataclass(frozen=True)
class FigureSpec:
    name: str
    experiment: str
    title: str
    tables: tuple[str, ...]
    draw: Callable[..., Figure]
    caption: Callable[[pd.DataFrame, pd.DataFrame], str]  # (estimates, runs) -> text


FIGURES: dict[str, FigureSpec] = {
    spec.name: spec
    for spec in (
        FigureSpec("e2a_completion", "E2a", "Per-round completion time by limit",
                   ("rounds", "metrics", "estimates", "runs"), e2a_completion_figure, e2a_completion_caption),
        FigureSpec("e2a_counters", "E2a", "cgroup counters: throttled share and throttled time per round",
                   ("rounds", "metrics", "estimates", "runs"), e2a_counters_figure, e2a_counters_caption),
        FigureSpec("e3_gomaxprocs", "E3", "GOMAXPROCS by limit and module line",
                   ("metrics", "runs"), e3_gomaxprocs_figure, e3_gomaxprocs_caption),
        FigureSpec("s1_throttling", "S1", "Throttling by GOMAXPROCS and limit",
                   ("metrics", "estimates", "runs"), s1_throttling_figure, s1_throttling_caption),
        FigureSpec("weights_shares", "E5", "Shares of one CPU: measured, predicted by the weights, and the lab's",
                   ("metrics", "estimates", "share_expectations"), weights_shares_figure, weights_shares_caption),
    )
}

# The service experiments' figures (E2b, E7, E8, E6, S2) build on the helpers above.
from throttlelab.figures import services as plots_services  # noqa: E402

FIGURES.update({spec.name: spec for spec in plots_services.figure_specs(FigureSpec)})


def draw(name: str, tables: Mapping[str, pd.DataFrame]) -> Figure:
    spec = FIGURES[name]
    missing = [t for t in spec.tables if t not in tables]
    if missing:
        raise ValueError(f"figure {name} needs the tables {', '.join(missing)}")
    return spec.draw(**{t: tables[t] for t in spec.tables})


# --------------------------------------------------------------------------
# SVG for inlining


_XML_PROLOG = re.compile(r"^\s*<\?xml[^>]*\?>\s*(<!DOCTYPE[^>]*>\s*)?", re.S)
_ID_USES = (
    (re.compile(r'\bid="([^"]+)"'), 'id="{p}-{0}"'),
    (re.compile(r"url\(#([^)]+)\)"), "url(#{p}-{0})"),
    (re.compile(r'href="#([^"]+)"'), 'href="#{p}-{0}"'),
)


def namespace_ids(svg: str, prefix: str) -> str:
    """Prefix every id and reference to it, so several SVGs can share one HTML page."""
    for pattern, template in _ID_USES:
        svg = pattern.sub(lambda m: template.format(m.group(1), p=prefix), svg)
    return svg


def figure_to_svg(fig: Figure, name: str, title: str = "") -> str:
    """The figure as an inline <svg> element: text kept as text, ids unique to `name`, no date stamp."""
    buffer = io.StringIO()
    # A fixed hash salt makes the clip-path ids, and so the file, the same on every run.
    with mpl.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    svg = namespace_ids(_XML_PROLOG.sub("", buffer.getvalue()), name)
    if title:
        head_end = svg.index(">", svg.index("<svg")) + 1
        svg = f'{svg[:head_end]}<title>{_escape(title)}</title>{svg[head_end:]}'
    return svg


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# --------------------------------------------------------------------------
# command line: one figure from its tables


def parse_table_args(items: list[str]) -> dict[str, Path]:
    tables = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--table expects NAME=PATH, got {item!r}")
        tables[name] = Path(path)
    return tables


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m throttlelab.figures.plots", description=__doc__.splitlines()[0])
    p.add_argument("--figure", required=True, choices=sorted(FIGURES))
    p.add_argument("--table", action="append", default=[], help="NAME=PATH of a tidy table (rounds, metrics, ...)")
    p.add_argument("--out", required=True, help="the SVG file to write")
    args = p.parse_args(argv)
    tables = {name: pd.read_csv(path) for name, path in parse_table_args(args.table).items()}
    spec = FIGURES[args.figure]
    try:
        fig = draw(args.figure, tables)
    except ValueError as exc:
        print(f"throttlelab.figures.plots: {args.figure}: {exc}", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(figure_to_svg(fig, args.figure, f"{spec.experiment}: {spec.title}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
