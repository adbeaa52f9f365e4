"""The jobs' figures and their captions on the page: the lab's E2a burst rounds, E3 GOMAXPROCS, S1 spin,
and ours on E2a's burst (docs/EXPERIMENTS.md): X1 burst budget, X2 CFS period, X3 what throttled time sums,
X4 overlapping bursts of several pods. Ours draw no lab reference; their dotted grey marks are what the
model predicted before the data, as the findings stage wrote it (predictions.csv: the thresholds' source).

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
    MODEL_COLOR,
    ROUND_COLOR,
    RULE_COLOR,
    RUN_COLOR,
    by_limit,
    confidence_level,
    data_top,
    draw_estimates,
    draw_lab,
    draw_model,
    draw_runs,
    estimates_of,
    experiment_rows,
    legend_handles,
    level_panel,
    limit_label,
    method_sentence,
    model_legend_handles,
    model_values,
    new_figure,
    ours_caption,
    paper_style,
    per_run,
    plain_log_axis,
    series_colors,
    set_categories,
    spread,
    variant_specs,
)
from throttlelab.model.placement import parse_cpuset
from throttlelab.model.quantities import format_cpu
from throttlelab.model.reference import LAB, lab_values
from throttlelab.model.variants import VariantSpec


def e2a_tick_labels(order: list[str], specs: Mapping[str, VariantSpec]) -> list[str]:
    return [f"{limit_label(specs[v])}\n{specs[v].threads} × {specs[v].work_ms:g} ms" for v in order]


def e2a_completion_figure(
    rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame
) -> Figure:
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
        fig.legend(
            handles=legend_handles(confidence_level(est), rounds=True, lab="lab p50 (10 CPUs)"),
            loc="outside upper center",
            ncol=4,
            frameon=False,
        )
    return fig


def e2a_setting_label(spec: VariantSpec, most_threads: int) -> str:
    """'limit 1', or 'limit 1, 2 threads' for an arm with fewer threads than the others."""
    label = limit_label(spec)
    return label if spec.threads == most_threads else f"{label}, {spec.threads} threads"


def draw_throttled_share(
    ax: Axes, metrics: pd.DataFrame, est: pd.DataFrame, order: list[str], specs: Mapping[str, VariantSpec]
) -> None:
    xpos = set_categories(ax, order, e2a_tick_labels(order, specs))
    draw_runs(ax, per_run(metrics, "E2a", "throttled_ratio"), xpos, -0.1)
    draw_estimates(ax, est, xpos, 0.14)
    draw_lab(ax, lab_values("E2a", "throttled_ratio"), xpos)
    # A share lies in [0, 1], but a t interval on few runs may not: show all of it rather than clip.
    ax.set_ylim(min([-0.03, *(est["lo"].dropna() - 0.03)]), max([1.03, *(est["hi"].dropna() + 0.03)]))
    ax.set_ylabel("throttled periods / periods")
    ax.set_title("(a) share of periods throttled", loc="left")
    ax.tick_params(axis="x", labelsize=8)


def draw_throttled_vs_wall(ax: Axes, rounds: pd.DataFrame, order: list[str], specs: Mapping[str, VariantSpec]) -> None:
    most_threads = max(spec.threads for spec in specs.values())
    colors = series_colors(order)
    data = experiment_rows(rounds, "E2a", "rounds").assign(throttled_ms=lambda d: d["d_throttled_usec"] / 1000)
    for variant in order:
        rows = data[data["variant"] == variant]
        ax.scatter(
            rows["wall_ms"],
            rows["throttled_ms"],
            s=12,
            color=colors[variant],
            alpha=0.8,
            label=e2a_setting_label(specs[variant], most_threads),
            zorder=3,
        )
    lab = LAB["E2a"].values
    for variant in order:
        if "throttled_ms_per_round" in lab.get(variant, {}):
            ax.scatter(
                [lab[variant]["p50_wall_ms"]],
                [lab[variant]["throttled_ms_per_round"]],
                marker="X",
                s=60,
                color=colors[variant],
                edgecolors=LAB_COLOR,
                linewidths=1.0,
                zorder=4,
            )
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


def e2a_counters_figure(
    rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame
) -> Figure:
    """E2a: (a) share of periods throttled by limit; (b) throttled ms against wall ms, round by round."""
    specs = variant_specs(runs, "E2a")
    order = [v for v in by_limit(specs) if specs[v].limit is not None]  # no quota, no periods
    est = estimates_of(estimates, "E2a", "throttled_ratio")
    with paper_style(1.1):
        fig, (left, right) = new_figure(4.1, 2, width_ratios=(1, 1.15))
        draw_throttled_share(left, metrics, est, order, specs)
        draw_throttled_vs_wall(right, rounds, order, specs)
        fig.legend(
            handles=legend_handles(confidence_level(est), lab="lab (10 CPUs)"),
            loc="outside upper center",
            ncol=3,
            frameon=False,
        )
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
    """E3: GOMAXPROCS by limit for each module line: measured, Go's rule here (docs/LAB.md §2.6), the lab's 10-CPU value."""
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
            ax.scatter(
                [xpos[v] for v in names if v in rule.index],
                [rule[v] for v in names if v in rule.index],
                marker="s",
                s=110,
                facecolors="none",
                edgecolors=RULE_COLOR,
                linewidths=1.5,
                zorder=3,
            )
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
            Line2D([], [], ls="", marker="s", ms=8, mfc="none", mec=RULE_COLOR, mew=1.5, label="Go's rule, this node"),
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
    panels = (
        ("throttled_ms", "throttled time (ms)", "(a) throttled time in the window"),
        ("nr_throttled", "throttled periods", "(b) throttled periods in the window"),
    )
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
        fig.legend(
            handles=legend_handles(confidence_level(est), lab="book (14 CPUs, 2 s)"),
            loc="outside upper center",
            ncol=3,
            frameon=False,
        )
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
        "GOMAXPROCS each run reported (dots) for both go.mod lines, against the value Go's rule predicts (docs/LAB.md §2.6) "
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


# --------------------------------------------------------------------------
# ours on E2a's burst (X1-X4): the model before the data where the lab's figure would be


def _cpuset_size(spec: VariantSpec) -> int:
    """How many CPUs the variant runs on as designed: its cpuset's, else the node's (2 when it names neither)."""
    cpus = spec.cpus or spec.node_cpus
    return len(parse_cpuset(str(cpus))) if cpus else 2


def _wall_panel(
    ax: Axes,
    experiment: str,
    rounds: pd.DataFrame,
    metrics: pd.DataFrame,
    estimates: pd.DataFrame,
    predictions: pd.DataFrame,
    order: list[str],
    labels: list[str],
) -> None:
    xpos = set_categories(ax, order, labels)
    for variant, group in experiment_rows(rounds, experiment, "rounds").groupby("variant", sort=False):
        if variant in xpos:
            ax.scatter(
                spread(xpos[variant] - 0.2, len(group), 0.2), group["wall_ms"], s=7, color=ROUND_COLOR, lw=0, zorder=2
            )
    draw_runs(ax, per_run(metrics, experiment, "p50_wall_ms"), xpos, 0.04)
    draw_estimates(ax, estimates_of(estimates, experiment, "p50_wall_ms"), xpos, 0.22)
    draw_model(ax, model_values(predictions, experiment, "p50_wall_ms", order), xpos)
    ax.tick_params(axis="x", labelsize=8)
    plain_log_axis(ax)
    ax.set_ylabel("completion of a round (ms, log)")


def _throttled_panel(
    ax: Axes,
    experiment: str,
    metrics: pd.DataFrame,
    estimates: pd.DataFrame,
    predictions: pd.DataFrame,
    order: list[str],
    labels: list[str],
    *,
    log: bool = False,
) -> None:
    """Panel (b): throttled periods per round by variant, with the model's count."""
    predicted = model_values(predictions, experiment, "throttled_per_round", order)
    level_panel(ax, experiment, "throttled_per_round", metrics, estimates, order, labels, predicted)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel("throttled periods per round" + (" (log)" if log else ""))
    ax.set_title("(b) throttled periods per round", loc="left")


def _wall_legend(fig: Figure, estimates: pd.DataFrame, experiment: str) -> None:
    """The legend of a figure around completion times: rounds, runs, the estimate and the model."""
    level = confidence_level(estimates_of(estimates, experiment, "p50_wall_ms"))
    fig.legend(handles=model_legend_handles(level), loc="outside upper center", ncol=4, frameon=False)


def _budget_label(spec: VariantSpec) -> str:
    if spec.limit is None:
        return "no limit"
    return f"{limit_label(spec)},\n+{spec.burst_ms or 0:g} ms"


def x1_budget_figure(
    rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame, predictions: pd.DataFrame
) -> Figure:
    """X1: (a) completion by burst budget; (b) throttled and over-quota periods per round."""
    specs = variant_specs(runs, "X1")
    order = sorted(specs, key=lambda v: (specs[v].limit is not None, specs[v].burst_ms or 0))
    labels = [_budget_label(specs[v]) for v in order]
    with paper_style(1.0):
        fig, (left, right) = new_figure(4.0, 2)
        _wall_panel(left, "X1", rounds, metrics, estimates, predictions, order, labels)
        left.set_title("(a) completion time (+ burst budget)", loc="left")
        limited = [v for v in order if specs[v].limit is not None]
        _throttled_panel(
            right, "X1", metrics, estimates, predictions, limited, [_budget_label(specs[v]) for v in limited]
        )
        _wall_legend(fig, estimates, "X1")
    return fig


def x2_period_figure(
    rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame, predictions: pd.DataFrame
) -> Figure:
    """X2: (a) completion by CFS period; (b) throttled periods per round (log)."""
    specs = variant_specs(runs, "X2")
    order = sorted(specs, key=lambda v: -(specs[v].period_ms or 100.0))
    quota = model_values(predictions, "X2", "quota_ms", order)
    labels = [
        f"period {specs[v].period_ms or 100:g} ms" + (f"\nquota {quota[v]:g} ms" if v in quota else "") for v in order
    ]
    with paper_style(1.0):
        fig, (left, right) = new_figure(4.0, 2)
        _wall_panel(left, "X2", rounds, metrics, estimates, predictions, order, labels)
        left.set_title("(a) completion time", loc="left")
        _throttled_panel(right, "X2", metrics, estimates, predictions, order, labels, log=True)
        _wall_legend(fig, estimates, "X2")
    return fig


def x3_queues_figure(
    rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame, predictions: pd.DataFrame
) -> Figure:
    """X3: throttled ms per round over the extra wall ms per round, round by round, on 1 and 2 CPUs,
    against the run-queue range and the per-thread sum."""
    specs = variant_specs(runs, "X3")
    order = sorted(specs, key=lambda v: _cpuset_size(specs[v]))
    free_wall = model_values(predictions, "X3", "free_wall_ms", order)
    queues = model_values(predictions, "X3", "run_queues", order)
    labels = [f"cpuset {specs[v].cpus}\n{specs[v].threads} threads" for v in order]
    with paper_style(1.0):
        fig, (ax,) = new_figure(3.8)
        xpos = set_categories(ax, order, labels)
        data = experiment_rows(rounds, "X3", "rounds")
        data = data[data["round"] > 0]
        for variant, group in data.groupby("variant", sort=False):
            if variant not in xpos or variant not in free_wall:
                continue
            extra = group["wall_ms"] - free_wall[variant]
            ratio = (group["d_throttled_usec"] / 1000 / extra.where(extra > 0)).dropna()
            ratio = ratio[ratio > 0]
            ax.scatter(spread(xpos[variant] - 0.2, len(ratio), 0.2), ratio, s=7, color=ROUND_COLOR, lw=0, zorder=2)
        for variant in [v for v in order if v in queues]:
            x, threads = xpos[variant], int(specs[variant].threads or 0)
            ax.fill_between([x - 0.36, x + 0.36], 1, queues[variant], color=MODEL_COLOR, alpha=0.15, lw=0, zorder=1)
            ax.hlines([1, queues[variant]], x - 0.36, x + 0.36, colors=MODEL_COLOR, lw=0.8, zorder=1)
            ax.hlines(threads, x - 0.36, x + 0.36, colors=MODEL_COLOR, linestyles="--", lw=1.2, zorder=2)
            ax.annotate("per thread", (x + 0.36, threads), ha="right", va="bottom", fontsize=7, color=MODEL_COLOR)
        plain_log_axis(ax)
        ax.set_ylabel("throttled ms / extra wall ms (log)")
        fig.legend(
            handles=[
                Line2D([], [], ls="", marker="o", ms=3, color=ROUND_COLOR, label="each round"),
                Line2D(
                    [],
                    [],
                    ls="",
                    marker="s",
                    ms=8,
                    color=MODEL_COLOR,
                    alpha=0.3,
                    label="1 to min(threads, CPUs) run queues",
                ),
                Line2D([], [], ls="--", color=MODEL_COLOR, label="summed over threads"),
            ],
            loc="outside upper center",
            ncol=3,
            frameon=False,
        )
    return fig


def x1_budget_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    return ours_caption(
        "(a) Completion time of every round (grey dots), each run's median round (open circles) and the estimate "
        "with its interval (diamond), by burst budget; dotted grey: the CFS model's median with the budget's "
        "refill, written before the data. (b) Throttled periods per round after the first, with the model's count.",
        estimates_of(estimates, "X1", "p50_wall_ms"),
    )


def x2_period_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    return ours_caption(
        "(a) Completion time by CFS period (the quota follows the period); dotted grey: the model's median, which "
        "rises towards CPU / limit as the period shrinks. (b) Throttled periods per round with the model's count.",
        estimates_of(estimates, "X2", "p50_wall_ms"),
    )


def x3_queues_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    return ours_caption(
        "Each throttled round's throttled time over its extra wall time (wall minus the model's unthrottled burst; "
        "rounds after the first). Shaded: what a sum over the run queues that were throttled allows (1 to "
        "min(threads, CPUs)); dashed: what a sum over threads would give. The verdict uses each run's mean round "
        "(F14 in the findings table)."
    )


def x4_overlap_figure(
    rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame, predictions: pd.DataFrame
) -> Figure:
    """X4: completion of every pod's rounds, bursting together against staggered, with the model's medians."""
    specs = variant_specs(runs, "X4")
    order = sorted(specs, key=lambda v: bool(specs[v].stagger))
    labels = [
        f"{specs[v].pods} pods {'staggered' if specs[v].stagger else 'together'}\n"
        f"{specs[v].threads} x {specs[v].work_ms:g} ms at {limit_label(specs[v])}"
        for v in order
    ]
    with paper_style(1.0):
        fig, (ax,) = new_figure(3.8)
        xpos = set_categories(ax, order, labels)
        for variant, group in experiment_rows(rounds, "X4", "rounds").groupby("variant", sort=False):
            if variant in xpos:
                later = group[group["round"] > 0]
                ax.scatter(
                    spread(xpos[variant] - 0.2, len(later), 0.2),
                    later["wall_ms"],
                    s=7,
                    color=ROUND_COLOR,
                    lw=0,
                    zorder=2,
                )
        draw_runs(ax, per_run(metrics, "X4", "p50_wall_ms"), xpos, 0.04)
        draw_estimates(ax, estimates_of(estimates, "X4", "p50_wall_ms"), xpos, 0.22)
        draw_model(ax, model_values(predictions, "X4", "p50_wall_ms", order), xpos)
        ax.tick_params(axis="x", labelsize=8)
        plain_log_axis(ax)
        ax.set_ylabel("completion of a round (ms, log)")
        _wall_legend(fig, estimates, "X4")
    return fig


def x4_overlap_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    return ours_caption(
        "Each pod's rounds after the first (grey dots; every pod of a run), each run's mean over its pods of their "
        "median round (open circles) and the estimate (diamond); dotted grey: the model's median, each pod's burst "
        "on the CPUs it gets (alone: min(threads, CPUs); together: the node's CPUs shared by all busy threads).",
        estimates_of(estimates, "X4", "p50_wall_ms"),
    )
