"""The jobs' figures (E2a burst rounds, E3 GOMAXPROCS, S1 spin) and their captions on the page.

Each ``*_figure`` takes the tidy tables the registry lists for it and returns a
matplotlib Figure; each ``*_caption`` takes (estimates, runs) and returns the text
under the figure on the page. Pure: only :mod:`.draw` touches files.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from throttlelab.figures.style import (
    FIG_WIDTH,
    LAB_COLOR,
    ROUND_COLOR,
    RULE_COLOR,
    RUN_COLOR,
    by_limit,
    confidence_level,
    data_top,
    draw_estimates,
    draw_lab,
    draw_runs,
    estimates_of,
    experiment_rows,
    legend_handles,
    limit_label,
    method_sentence,
    new_figure,
    paper_style,
    per_run,
    plain_log_axis,
    series_colors,
    set_categories,
    spread,
    variant_specs,
)
from throttlelab.model.quantities import format_cpu
from throttlelab.model.reference import LAB, lab_values
from throttlelab.model.variants import VariantSpec


def e2a_tick_labels(order: list[str], specs: Mapping[str, VariantSpec]) -> list[str]:
    return [f"{limit_label(specs[v])}\n{specs[v].threads} × {specs[v].work_ms:g} ms" for v in order]


def e2a_completion_figure(rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """E2a: completion time of each burst round by limit, per-run p50, its estimate, the lab's p50."""
    specs = variant_specs(runs, "E2a")
    order = by_limit(specs)
    est = estimates_of(estimates, "E2a", "p50_wall_ms")
    with paper_style(1.1):
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


def e2a_setting_label(spec: VariantSpec, most_threads: int) -> str:
    """'limit 1', or 'limit 1, 2 threads' for an arm with fewer threads than the others."""
    label = limit_label(spec)
    return label if spec.threads == most_threads else f"{label}, {spec.threads} threads"


def draw_throttled_share(ax: Axes, metrics: pd.DataFrame, est: pd.DataFrame, order: list[str],
                         specs: Mapping[str, VariantSpec]) -> None:
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
                           specs: Mapping[str, VariantSpec]) -> None:
    most_threads = max(spec.threads for spec in specs.values())
    colors = series_colors(order)
    data = experiment_rows(rounds, "E2a", "rounds").assign(throttled_ms=lambda d: d["d_throttled_usec"] / 1000)
    for variant in order:
        rows = data[data["variant"] == variant]
        ax.scatter(rows["wall_ms"], rows["throttled_ms"], s=12, color=colors[variant], alpha=0.8,
                   label=e2a_setting_label(specs[variant], most_threads), zorder=3)
    lab = LAB["E2a"].values
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
    order = [v for v in by_limit(specs) if specs[v].limit is not None]  # no quota, no periods
    est = estimates_of(estimates, "E2a", "throttled_ratio")
    with paper_style(1.1):
        fig, (left, right) = new_figure(4.1, 2, width_ratios=(1, 1.15))
        draw_throttled_share(left, metrics, est, order, specs)
        draw_throttled_vs_wall(right, rounds, order, specs)
        fig.legend(handles=legend_handles(confidence_level(est), lab="lab (10 CPUs)"),
                   loc="outside upper center", ncol=3, frameon=False)
    return fig


AFTER_EVERY_LIMIT = 10**9  # sort key of the override arms: to the right of every limit


def e3_setting(spec: VariantSpec) -> tuple[int, str]:
    """Sort key and tick label of an E3 variant: limits first, then the env and GODEBUG arms."""
    milli = spec.milli("limit")
    label = "none" if milli is None else format_cpu(milli)
    if spec.gomaxprocs:
        return (AFTER_EVERY_LIMIT, f"{label}\n+ env {spec.gomaxprocs}")
    if spec.godebug:
        return (AFTER_EVERY_LIMIT + 1, f"{label}\n+ GODEBUG")
    return (-1 if milli is None else milli, label)


def e3_gomaxprocs_figure(metrics: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """E3: GOMAXPROCS by limit for each module line: measured, the SPEC rule here, the lab's 10-CPU value."""
    specs = variant_specs(runs, "E3")
    builds = sorted({spec.build for spec in specs.values()})
    measured = per_run(metrics, "E3", "gomaxprocs")
    expected = per_run(metrics, "E3", "expected_gomaxprocs")
    rule = expected.drop_duplicates("variant").set_index("variant")["value"]
    lab = lab_values("E3", "gomaxprocs")
    top = max([*measured["value"], *expected["value"], *lab.values(), 2]) + 1
    widths = [sum(spec.build == b for spec in specs.values()) for b in builds]
    with paper_style(1.1):
        fig, axes = new_figure(3.7, len(builds), sharey=True, width_ratios=widths)
        for ax, build in zip(axes, builds):
            names = sorted((v for v, s in specs.items() if s.build == build), key=lambda v: e3_setting(specs[v])[0])
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


def s1_tick_labels(order: list[str], specs: Mapping[str, VariantSpec], gomaxprocs: pd.DataFrame) -> list[str]:
    """The setting, then the GOMAXPROCS the runs reported ('limit 1500m, env 8' / 'GOMAXPROCS 8')."""
    measured = gomaxprocs.groupby("variant")["value"].agg(lambda s: "/".join(f"{v:g}" for v in sorted(s.unique())))
    labels = []
    for variant in order:
        spec = specs[variant]
        setting = limit_label(spec)
        if spec.gomaxprocs:
            setting += f", env {spec.gomaxprocs}"
        if spec.build and spec.build != "go125mod":
            setting += f", {spec.build}"
        labels.append(f"{setting}\nGOMAXPROCS {measured.get(variant, '?')}")
    return labels


def s1_throttling_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """S1: throttled time and number of throttled periods in the window, by variant."""
    specs = variant_specs(runs, "S1")
    order = by_limit(specs)
    labels = s1_tick_labels(order, specs, per_run(metrics, "S1", "gomaxprocs"))
    panels = (("throttled_ms", "throttled time (ms)", "(a) throttled time in the window"),
              ("nr_throttled", "throttled periods", "(b) throttled periods in the window"))
    with paper_style(1.1):
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


# --------------------------------------------------------------------------
# captions under each figure on the page: the method as the tables state it


def e2a_completion_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    est = estimates_of(estimates, "E2a", "p50_wall_ms")
    return (
        "Completion time of every burst round (grey dots), each run's median round (open circles) and the "
        "geometric mean of the per-run medians with its interval (diamond and bar; no bar where the table "
        f"gives none). Dashed red: the lab's p50 on {LAB['E2a'].setup}; it sets the shape to compare, not "
        f"the level. Interval: {method_sentence(est)}."
    )


def e2a_counters_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    specs = variant_specs(runs, "E2a")
    est = estimates_of(estimates, "E2a", "throttled_ratio")
    est = est[est["variant"].map(lambda v: v in specs and specs[v].limit is not None)]  # as plotted
    return (
        "(a) Share of CFS periods in which the job was throttled, per run (open circles) with the estimate and "
        "its interval; variants without a limit have no periods and are left out. Dashed red: the lab's "
        f"throttled / periods on {LAB['E2a'].setup}. Interval: {method_sentence(est)}. "
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
        f"give the GOMAXPROCS the runs reported. Dashed red: the book's figures ({LAB['S1'].setup}), for "
        f"direction only. Intervals: (a) {method_sentence(times)}; (b) {method_sentence(counts)}."
    )


