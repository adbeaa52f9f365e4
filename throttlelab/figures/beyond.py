"""Figures of the experiments beyond the lab (docs/EXPERIMENTS.md): X1 burst budget, X2 CFS period,
X3 what throttled time sums, X4 overlapping bursts of several pods, X5 steady arrivals near the limit, X6 GOMAXPROCS 2 against 1. Ours, not the lab's: no lab reference is drawn; the dotted grey marks
are what the model predicted before the data (the thresholds' source, analysis/findings/beyond.py).

Each ``*_figure`` takes the tidy tables the registry lists and returns a matplotlib Figure; each
``*_caption`` takes (estimates, runs) and returns the text under it. Pure: only :mod:`.draw` writes.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from throttlelab.analysis.findings import predictions as model
from throttlelab.analysis.metrics.services import supported_latency_metric
from throttlelab.figures.style import (
    ROUND_COLOR,
    confidence_level,
    draw_estimates,
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
    set_categories,
    spread,
    variant_specs,
)
from throttlelab.model.variants import VariantSpec

MODEL_COLOR = "0.35"


def _handles(level: float) -> list[Line2D]:
    """The lab figures' legend (style.legend_handles) with the model's prediction where the lab's figure stands."""
    *ours, _lab = legend_handles(level, rounds=True)
    return [*ours, Line2D([], [], ls=":", color=MODEL_COLOR, label="model, before the data")]


def _model_marks(ax: Axes, values: Mapping[str, float], xpos: Mapping[str, float]) -> None:
    for variant, value in values.items():
        if variant in xpos and np.isfinite(value):
            ax.hlines(value, xpos[variant] - 0.36, xpos[variant] + 0.36, colors=MODEL_COLOR, linestyles=":", lw=1.6,
                      zorder=2)


def _cpus(spec: VariantSpec, runs: pd.DataFrame) -> int:
    """The CPUs the model uses for a variant: its cpuset's size, else the node's (2 when unknown)."""
    return model.cpuset_size(spec.cpus) or model.cpuset_size(spec.node_cpus) or 2


def _arm(spec: VariantSpec, runs: pd.DataFrame) -> model.BurstArm:
    return model.burst_arm(spec, _cpus(spec, runs), (spec.period_ms or 100.0))


def _wall_panel(ax: Axes, experiment: str, rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame,
                specs: Mapping[str, VariantSpec], order: list[str], labels: list[str], runs: pd.DataFrame) -> None:
    xpos = set_categories(ax, order, labels)
    for variant, group in experiment_rows(rounds, experiment, "rounds").groupby("variant", sort=False):
        if variant in xpos:
            ax.scatter(spread(xpos[variant] - 0.2, len(group), 0.2), group["wall_ms"], s=7, color=ROUND_COLOR, lw=0,
                       zorder=2)
    draw_runs(ax, per_run(metrics, experiment, "p50_wall_ms"), xpos, 0.04)
    draw_estimates(ax, estimates_of(estimates, experiment, "p50_wall_ms"), xpos, 0.22)
    _model_marks(ax, {v: _arm(specs[v], runs).median_wall_ms() for v in order}, xpos)
    ax.tick_params(axis="x", labelsize=8)
    plain_log_axis(ax)
    ax.set_ylabel("completion of a round (ms, log)")


def _level_panel(ax: Axes, experiment: str, metric: str, metrics: pd.DataFrame, estimates: pd.DataFrame,
                 order: list[str], labels: list[str], predicted: Mapping[str, float]) -> None:
    xpos = set_categories(ax, order, labels)
    draw_runs(ax, per_run(metrics, experiment, metric), xpos, -0.1)
    draw_estimates(ax, estimates_of(estimates, experiment, metric), xpos, 0.14)
    _model_marks(ax, predicted, xpos)
    ax.tick_params(axis="x", labelsize=8)


def _budget_label(spec: VariantSpec) -> str:
    if spec.limit is None:
        return "no limit"
    return f"{limit_label(spec)},\n+{spec.burst_ms or 0:g} ms"


def x1_budget_figure(rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame,
                     runs: pd.DataFrame) -> Figure:
    """X1: (a) completion by burst budget; (b) throttled and over-quota periods per round."""
    specs = variant_specs(runs, "X1")
    order = sorted(specs, key=lambda v: (specs[v].limit is not None, specs[v].burst_ms or 0))
    labels = [_budget_label(specs[v]) for v in order]
    with paper_style(1.0):
        fig, (left, right) = new_figure(4.0, 2)
        _wall_panel(left, "X1", rounds, metrics, estimates, specs, order, labels, runs)
        left.set_title("(a) completion time (+ burst budget)", loc="left")
        limited = [v for v in order if specs[v].limit is not None]
        arms = {v: _arm(specs[v], runs).burst() for v in limited}
        _level_panel(right, "X1", "throttled_per_round", metrics, estimates, limited,
                     [_budget_label(specs[v]) for v in limited],
                     {v: float(np.mean(b.throttled_periods)) for v, b in arms.items()})
        right.set_ylabel("throttled periods per round")
        right.set_title("(b) throttled periods per round", loc="left")
        fig.legend(handles=_handles(confidence_level(estimates_of(estimates, "X1", "p50_wall_ms"))),
                   loc="outside upper center", ncol=4, frameon=False)
    return fig


def x2_period_figure(rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame,
                     runs: pd.DataFrame) -> Figure:
    """X2: (a) completion by CFS period; (b) throttled periods per round (log)."""
    specs = variant_specs(runs, "X2")
    order = sorted(specs, key=lambda v: -(specs[v].period_ms or 100.0))
    labels = [f"period {specs[v].period_ms or 100:g} ms\nquota {_arm(specs[v], runs).quota_ms:g} ms" for v in order]
    with paper_style(1.0):
        fig, (left, right) = new_figure(4.0, 2)
        _wall_panel(left, "X2", rounds, metrics, estimates, specs, order, labels, runs)
        left.set_title("(a) completion time", loc="left")
        _level_panel(right, "X2", "throttled_per_round", metrics, estimates, order, labels,
                     {v: float(np.mean(_arm(specs[v], runs).burst().throttled_periods)) for v in order})
        right.set_yscale("log")
        right.set_ylabel("throttled periods per round (log)")
        right.set_title("(b) throttled periods per round", loc="left")
        fig.legend(handles=_handles(confidence_level(estimates_of(estimates, "X2", "p50_wall_ms"))),
                   loc="outside upper center", ncol=4, frameon=False)
    return fig


def x3_queues_figure(rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame,
                     runs: pd.DataFrame) -> Figure:
    """X3: throttled ms per round over the extra wall ms per round, round by round, on 1 and 2 CPUs,
    against the run-queue range and the per-thread sum."""
    specs = variant_specs(runs, "X3")
    order = sorted(specs, key=lambda v: _cpus(specs[v], runs))
    labels = [f"cpuset {specs[v].cpus}\n{specs[v].threads} threads" for v in order]
    with paper_style(1.0):
        fig, (ax,) = new_figure(3.8)
        xpos = set_categories(ax, order, labels)
        data = experiment_rows(rounds, "X3", "rounds")
        data = data[data["round"] > 0]
        for variant, group in data.groupby("variant", sort=False):
            if variant not in xpos:
                continue
            extra = group["wall_ms"] - _arm(specs[variant], runs).free_wall_ms
            ratio = (group["d_throttled_usec"] / 1000 / extra.where(extra > 0)).dropna()
            ratio = ratio[ratio > 0]
            ax.scatter(spread(xpos[variant] - 0.2, len(ratio), 0.2), ratio, s=7, color=ROUND_COLOR, lw=0, zorder=2)
        for variant in order:
            a = _arm(specs[variant], runs)
            x = xpos[variant]
            ax.fill_between([x - 0.36, x + 0.36], 1, a.queues, color=MODEL_COLOR, alpha=0.15, lw=0, zorder=1)
            ax.hlines([1, a.queues], x - 0.36, x + 0.36, colors=MODEL_COLOR, lw=0.8, zorder=1)
            ax.hlines(a.threads, x - 0.36, x + 0.36, colors=MODEL_COLOR, linestyles="--", lw=1.2, zorder=2)
            ax.annotate("per thread", (x + 0.36, a.threads), ha="right", va="bottom", fontsize=7, color=MODEL_COLOR)
        plain_log_axis(ax)
        ax.set_ylabel("throttled ms / extra wall ms (log)")
        fig.legend(handles=[
            Line2D([], [], ls="", marker="o", ms=3, color=ROUND_COLOR, label="each round"),
            Line2D([], [], ls="", marker="s", ms=8, color=MODEL_COLOR, alpha=0.3, label="1 to min(threads, CPUs) run queues"),
            Line2D([], [], ls="--", color=MODEL_COLOR, label="summed over threads"),
        ], loc="outside upper center", ncol=3, frameon=False)
    return fig


# --------------------------------------------------------------------------
# captions


def x1_budget_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    return (
        "Ours (docs/EXPERIMENTS.md). (a) Completion time of every round (grey dots), each run's median round "
        "(open circles) and the estimate with its interval (diamond), by burst budget; dotted grey: the CFS "
        "model's median with the budget's refill, written before the data. (b) Throttled periods per round after "
        "the first, with the model's count. Intervals: "
        f"{method_sentence(estimates_of(estimates, 'X1', 'p50_wall_ms'))}."
    )


def x2_period_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    return (
        "Ours (docs/EXPERIMENTS.md). (a) Completion time by CFS period (the quota follows the period); dotted "
        "grey: the model's median, which rises towards CPU / limit as the period shrinks. (b) Throttled periods per "
        f"round with the model's count. Intervals: {method_sentence(estimates_of(estimates, 'X2', 'p50_wall_ms'))}."
    )


def x3_queues_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    return (
        "Ours (docs/EXPERIMENTS.md). Each throttled round's throttled time over its extra wall time (wall minus "
        "the model's unthrottled burst; rounds after the first). Shaded: what a sum over the run queues that were "
        "throttled allows (1 to min(threads, CPUs)); dashed: what a sum over threads would give. The verdict "
        "uses each run's mean round (F14 in the findings table)."
    )


def x4_overlap_figure(rounds: pd.DataFrame, metrics: pd.DataFrame, estimates: pd.DataFrame,
                      runs: pd.DataFrame) -> Figure:
    """X4: completion of every pod's rounds, bursting together against staggered, with the model's medians."""
    specs = variant_specs(runs, "X4")
    order = sorted(specs, key=lambda v: bool(specs[v].stagger))
    labels = [f"{specs[v].pods} pods {'staggered' if specs[v].stagger else 'together'}\n"
              f"{specs[v].threads} x {specs[v].work_ms:g} ms at {limit_label(specs[v])}" for v in order]
    with paper_style(1.0):
        fig, (ax,) = new_figure(3.8)
        xpos = set_categories(ax, order, labels)
        for variant, group in experiment_rows(rounds, "X4", "rounds").groupby("variant", sort=False):
            if variant in xpos:
                later = group[group["round"] > 0]
                ax.scatter(spread(xpos[variant] - 0.2, len(later), 0.2), later["wall_ms"], s=7, color=ROUND_COLOR,
                           lw=0, zorder=2)
        draw_runs(ax, per_run(metrics, "X4", "p50_wall_ms"), xpos, 0.04)
        draw_estimates(ax, estimates_of(estimates, "X4", "p50_wall_ms"), xpos, 0.22)
        _model_marks(ax, {v: float(np.median(model.overlap_burst(_arm(specs[v], runs), int(specs[v].pods or 2),
                                                                 not specs[v].stagger).wall_ms)) for v in order}, xpos)
        ax.tick_params(axis="x", labelsize=8)
        plain_log_axis(ax)
        ax.set_ylabel("completion of a round (ms, log)")
        fig.legend(handles=_handles(confidence_level(estimates_of(estimates, "X4", "p50_wall_ms"))),
                   loc="outside upper center", ncol=4, frameon=False)
    return fig


def x4_overlap_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    return (
        "Ours (docs/EXPERIMENTS.md). Each pod's rounds after the first (grey dots; every pod of a run), each run's "
        "mean over its pods of their median round (open circles) and the estimate (diamond); dotted grey: the "
        "model's median, each pod's burst on the CPUs it gets (alone: min(threads, CPUs); together: the node's "
        f"CPUs shared by all busy threads). Intervals: {method_sentence(estimates_of(estimates, 'X4', 'p50_wall_ms'))}."
    )


# --------------------------------------------------------------------------
# X5 near the limit, X6 GOMAXPROCS 2 against 1 (services)


def _latency_metric(metrics: pd.DataFrame, experiment: str, variants: list[str]) -> str:
    return supported_latency_metric(metrics, experiment, variants) or "work_p50_ms"


def x5_near_limit_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """X5: (a) throttled share of active periods by average use, with the Poisson model; (b) /work latency."""
    specs = variant_specs(runs, "X5")
    order = sorted(specs, key=lambda v: specs[v].rps or 0)
    arms = {v: model.steady_arm(specs[v]) for v in order}
    labels = [f"{arms[v].use:.0%} of the limit\n{specs[v].rps:g} req/s" for v in order]
    latency = _latency_metric(metrics, "X5", order)
    with paper_style(1.0):
        fig, (left, right) = new_figure(4.0, 2)
        _level_panel(left, "X5", "throttled_ratio", metrics, estimates, order, labels,
                     {v: a.throttled_share() for v, a in arms.items()})
        left.set_ylabel("throttled periods / active periods")
        left.set_title("(a) throttled share", loc="left")
        _level_panel(right, "X5", latency, metrics, estimates, order, labels, {})
        plain_log_axis(right)
        right.set_ylabel(f"/work {_quantile_text(latency)} (ms, log)")
        right.set_title("(b) latency", loc="left")
        fig.legend(handles=_handles(confidence_level(estimates_of(estimates, "X5", "throttled_ratio")))[1:],
                   loc="outside upper center", ncol=3, frameon=False)
    return fig


def x6_threads_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """X6: (a) clumped /work latency by limit and GOMAXPROCS; (b) closed-loop throughput."""
    specs = variant_specs(runs, "X6")
    clumped = sorted((v for v in specs if not specs[v].workers),
                     key=lambda v: (specs[v].milli("limit") or 0, specs[v].gomaxprocs or 0))
    closed = [v for v in specs if specs[v].workers]
    latency = _latency_metric(metrics, "X6", clumped)

    def label(v: str) -> str:
        procs = specs[v].gomaxprocs
        return f"{limit_label(specs[v])}\nGOMAXPROCS {procs if procs else 'default'}"

    with paper_style(1.0):
        fig, (left, right) = new_figure(4.0, 2, width_ratios=(max(len(clumped), 1), max(len(closed), 1)))
        _level_panel(left, "X6", latency, metrics, estimates, clumped, [label(v) for v in clumped], {})
        plain_log_axis(left)
        left.set_ylabel(f"/work {_quantile_text(latency)} (ms, log)")
        left.set_title("(a) clumped open loop", loc="left")
        _level_panel(right, "X6", "throughput_rps", metrics, estimates, closed, [label(v) for v in closed], {})
        right.set_ylabel("requests per second")
        right.set_title("(b) closed loop", loc="left")
        if not closed:
            right.text(0.5, 0.5, "no closed-loop arm\nin this profile", ha="center", va="center",
                       transform=right.transAxes, color=MODEL_COLOR)
        fig.legend(handles=_handles(confidence_level(estimates_of(estimates, "X6", latency)))[1:3],
                   loc="outside upper center", ncol=2, frameon=False)
    return fig


def _quantile_text(metric: str) -> str:
    return metric.removeprefix("work_").removesuffix("_ms").replace("_", ".")


def x5_near_limit_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    return (
        "Ours (docs/EXPERIMENTS.md). Steady arrivals (clump 1) at three shares of the limit, by the CPU per request "
        "the profile states. (a) Throttled periods / active periods per run (open circles) with the estimate "
        "(diamond); dotted grey: the share of periods whose Poisson arrivals need more than the quota, written "
        "before the data. (b) /work latency at the highest quantile the runs support. Intervals: "
        f"{method_sentence(estimates_of(estimates, 'X5', 'throttled_ratio'))}."
    )


def x6_threads_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    return (
        "Ours (docs/EXPERIMENTS.md). GOMAXPROCS 2 (Go 1.25's default at limits up to 1.5 CPUs) against 1 on a "
        "2-CPU node. (a) Clumped open loop: /work latency at the highest quantile the runs support, per run and "
        "the estimate. (b) Closed loop: successful requests per second. Intervals: "
        f"{method_sentence(estimates_of(estimates, 'X6', 'throughput_rps'))}."
    )
