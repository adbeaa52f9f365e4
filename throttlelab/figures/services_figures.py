"""The service experiments' figures and their captions on the page: the lab's E2b, E7, E8, E6, S2, and
ours (docs/EXPERIMENTS.md) X5 steady arrivals near the limit and X6 GOMAXPROCS 2 against 1.

Same rules as every figure (docs/STATISTICS.md §7, :mod:`.style`): one point per run,
the estimate and interval that estimates.csv holds (never recomputed here), the
lab's figure (:mod:`throttlelab.model.reference`) in dashed red where the article
gives one; for ours, the model's prediction written before the data in dotted grey (predictions.csv, as
the findings stage derived it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from throttlelab.analysis.metrics.services_metrics import compared_window
from throttlelab.figures.style import (
    LAB_COLOR,
    MODEL_COLOR,
    RULE_COLOR,
    confidence_level,
    data_top,
    draw_estimates,
    draw_lab,
    draw_runs,
    estimates_of,
    legend_handles,
    level_panel,
    limit_label,
    method_sentence,
    model_legend_handles,
    model_values,
    new_figure,
    ours_caption,
    ordered,
    paper_style,
    per_run,
    plain_log_axis,
    set_categories,
    variant_specs,
)
from throttlelab.model.placement import parse_cpuset
from throttlelab.model.quantities import format_cpu, milli_to_shares, shares_to_weight_linear
from throttlelab.model.reference import LAB, lab_values
from throttlelab.model.variants import (
    E6_LIMIT,
    NAMED_VARIANTS,
    S2_CASCADE_LIMITED,
    S2_CASCADE_UNLIMITED,
    S2_THREADS_NODE,
    S2_THREADS_ONE,
    VariantSpec,
)

S2_THREADS = (S2_THREADS_NODE, S2_THREADS_ONE)
S2_CASCADE = (S2_CASCADE_UNLIMITED, S2_CASCADE_LIMITED)
E6_RATES = (
    ("throttled_s_per_s", "throttled s per s\n(÷ readings' times)"),
    ("throttled_s_per_s_naive", "throttled s per s\n(÷ scrape interval)"),
    ("pause_s_per_s", "real pause per s\n(extra completion)"),
)


def latency_metric(specs: Mapping[str, VariantSpec]) -> tuple[str, str]:
    """The /work latency the figure shows for these variants (metric, name): what the independent clumps of
    their windows support (docs/STATISTICS.md §2: a q-quantile needs ceil(ln 0.025 / ln q) clumps per run,
    p99 368), or the maximum over too few clumps ("max over 5 clumps"), as the findings compare them;
    p50 where the design fixes no count of clumps (closed loops only). A closed loop's arms are left out of the
    choice: the findings compare them by throughput."""
    window = compared_window({v: s for v, s in specs.items() if s.window_clumps() is not None})
    if window is None:
        return "work_p50_ms", "p50"
    return window.metric(), window.shown


def _procs(metrics: pd.DataFrame, experiment: str) -> dict[str, str]:
    """GOMAXPROCS each variant's service reported (/stats), as '1' or '1/2' when runs differ."""
    rows = metrics[(metrics["experiment"] == experiment) & (metrics["metric"] == "gomaxprocs")].dropna()
    return {v: "/".join(f"{x:g}" for x in sorted(g["value"].unique())) for v, g in rows.groupby("variant")}


def _value_panel(
    ax: Axes,
    metrics: pd.DataFrame,
    estimates: pd.DataFrame,
    experiment: str,
    metric: str,
    order: list[str],
    labels: list[str],
    *,
    log: bool,
    lab_ceiling: bool = True,
):
    """Per-run points, the estimate with its interval, the lab's values; returns the x positions."""
    values = per_run(metrics, experiment, metric)
    est = estimates_of(estimates, experiment, metric)
    xpos = set_categories(ax, order, labels)
    draw_runs(ax, values, xpos, -0.1)
    draw_estimates(ax, est, xpos, 0.14)
    refs = lab_values(experiment, metric)
    top = data_top(values, est) if len(values) or len(est) else 1.0
    if log:
        ceiling = max(top, 1.0) * 4 if lab_ceiling else None
        draw_lab(ax, refs, xpos, ceiling=ceiling)
        plain_log_axis(ax)
        shown_refs = [v for k, v in refs.items() if k in xpos and v > 0 and (ceiling is None or v <= ceiling)]
        low = pd.concat([values["value"], est["lo"], est["point"], pd.Series(shown_refs, dtype=float)]).dropna()
        low = low[low > 0]
        if len(low):
            ax.set_ylim(float(low.min()) / 1.6, (ceiling or max([top, *refs.values()])) * 1.3)
    else:
        draw_lab(ax, refs, xpos)
    ax.tick_params(axis="x", labelsize=8)
    return xpos, est


def _legend(fig: Figure, est: pd.DataFrame, lab: str, extra: list[Line2D] | None = None) -> None:

    handles = legend_handles(confidence_level(est) if len(est) else 0.95, lab=lab) + (extra or [])
    fig.legend(handles=handles, loc="outside upper center", ncol=min(len(handles), 4), frameon=False)


# --------------------------------------------------------------------------
# E2b


def e2b_labels(order: list[str], specs: Mapping[str, VariantSpec], procs: Mapping[str, str]) -> list[str]:
    return [
        f"clump {specs[v].clump}\n{limit_label(specs[v])}\n{specs[v].build or 'go124mod'}, GMP {procs.get(v, '?')}"
        for v in order
    ]


def e2b_latency_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """E2b: (a) /work p99 by arrival shape and setting; (b) share of periods throttled."""
    specs = variant_specs(runs, "E2b")
    order = ordered(specs, NAMED_VARIANTS["E2b"])
    labels = e2b_labels(order, specs, _procs(metrics, "E2b"))
    metric, name = latency_metric(specs)
    with paper_style(1.05):
        fig = Figure(figsize=(7.6, 6.4), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True)
        _, est = _value_panel(top, metrics, estimates, "E2b", metric, order, labels, log=True)
        top.set_ylabel(f"/work {name} (ms, log)")
        top.set_title(f"(a) /work {name} latency, from the scheduled send", loc="left")
        _value_panel(bottom, metrics, estimates, "E2b", "throttled_ratio", order, labels, log=False)
        bottom.set_ylim(-0.05, 1.0)
        bottom.set_ylabel("throttled / counted periods")
        bottom.set_title("(b) share of periods throttled (0 without a limit: no quota)", loc="left")
        _legend(fig, est, f"lab ({LAB['E2b'].setup.split(',')[0]})")
    return fig


def _quantile_note(name: str) -> str:
    if name == "p99":
        return ""
    return (
        f" The runs' windows hold too few independent clumps for a per-run p99 (it needs 368), so {name} is "
        "shown, as the findings compare it; the lab's p99 is not drawn beside it."
    )


def e2b_latency_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    metric, name = latency_metric(variant_specs(runs, "E2b"))
    return (
        f"Each open circle is one run's {name} (top; failed requests at the client timeout) or throttled share "
        "(bottom); the diamond and bar are the estimate across runs and its interval. GMP: the GOMAXPROCS the "
        f"service reported. Dashed red: the lab on {LAB['E2b'].setup}, for the shape.{_quantile_note(name)} "
        f"Intervals: {name} {method_sentence(estimates_of(estimates, 'E2b', metric))}; "
        f"throttled share {method_sentence(estimates_of(estimates, 'E2b', 'throttled_ratio'))}."
    )


# --------------------------------------------------------------------------
# E7


def e7_labels(order: list[str], specs: Mapping[str, VariantSpec]) -> list[str]:
    return [f"{specs[v].replicas} x {limit_label(specs[v]).replace('limit ', '')}" for v in order]


def e7_replicas_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """E7: (a) /work p99 by replicas x limit; (b) the busiest replica's share of the requests."""
    specs = variant_specs(runs, "E7")
    order = ordered(specs, NAMED_VARIANTS["E7"])
    labels = e7_labels(order, specs)
    metric, name = latency_metric(specs)
    with paper_style(1.05):
        fig = Figure(figsize=(7.6, 3.9), layout="constrained")
        left, right = fig.subplots(1, 2, width_ratios=(1.6, 1))
        _, est = _value_panel(left, metrics, estimates, "E7", metric, order, labels, log=True)
        left.set_ylabel(f"/work {name} (ms, log)")
        left.set_title(f"(a) /work {name} by replicas x limit", loc="left")
        multi = [v for v in order if int(specs[v].replicas) > 1]
        if multi:
            xpos = set_categories(right, multi, [labels[order.index(v)] for v in multi])
            draw_runs(right, per_run(metrics, "E7", "busiest_share"), xpos, -0.1)
            draw_estimates(right, estimates_of(estimates, "E7", "busiest_share"), xpos, 0.14)
            for v in multi:
                even = 1 / int(specs[v].replicas)
                right.hlines(even, xpos[v] - 0.36, xpos[v] + 0.36, colors="0.5", linestyles=":", lw=1.2)
            right.set_ylim(0, 1)
        right.set_ylabel("busiest replica's share of /work")
        right.set_title("(b) per-connection balance", loc="left")
        _legend(fig, est, "lab (10 CPUs, 2 x 1 etc.)", [Line2D([], [], ls=":", color="0.5", label="even split")])
    return fig


def e7_replicas_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    metric, name = latency_metric(variant_specs(runs, "E7"))
    return (
        f"(a) /work {name} per run (open circles) with the estimate and its interval, by replicas x limit per "
        f"replica; dashed red: the lab on {LAB['E7'].setup}.{_quantile_note(name)} (b) For the settings with "
        "replicas: the share of the measured /work requests the busiest replica served; the generator gives each "
        "new connection to a random replica and keeps it (as kube-proxy does), so the split is uneven (dotted: an "
        f"even split). Intervals: {method_sentence(estimates_of(estimates, 'E7', metric))}."
    )


# --------------------------------------------------------------------------
# E8


def weight_share(spec: VariantSpec, node_cpus: int) -> float:
    """The CPUs the service's weight entitles it to when the neighbor is busy (kubelet's linear weights)."""
    if not spec.neighbor:
        return math.nan
    mine = shares_to_weight_linear(milli_to_shares(spec.milli("request")))
    theirs = shares_to_weight_linear(milli_to_shares(spec.milli("neighbor_request")))
    return node_cpus * mine / (mine + theirs)


def _node_cpus(spec: VariantSpec, fallback: int) -> int:
    return len(parse_cpuset(spec.node_cpus)) if spec.node_cpus else fallback


def e8_labels(order: list[str], specs: Mapping[str, VariantSpec]) -> list[str]:
    out = []
    for v in order:
        s = specs[v]
        out.append(f"{'busy' if s.neighbor else 'idle'}\nreq {format_cpu(s.milli('request'))}\n{limit_label(s)}")
    return out


def e8_neighbor_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """E8: (a) /work p99 by node state, request and limit; (b) the CPU the service got while requests waited."""
    specs = variant_specs(runs, "E8")
    order = ordered(specs, NAMED_VARIANTS["E8"])
    labels = e8_labels(order, specs)
    cpus = runs.loc[runs["experiment"] == "E8", "cpus"].dropna()
    host = int(cpus.iloc[0]) if len(cpus) else 1
    metric, name = latency_metric(specs)
    with paper_style(1.05):
        fig = Figure(figsize=(7.6, 6.6), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True)
        _, est = _value_panel(top, metrics, estimates, "E8", metric, order, labels, log=True)
        top.set_ylabel(f"/work {name} (ms, log)")
        top.set_title(f"(a) /work {name}", loc="left")
        xpos = set_categories(bottom, order, labels)
        draw_runs(bottom, per_run(metrics, "E8", "busy_cores"), xpos, -0.1)
        draw_estimates(bottom, estimates_of(estimates, "E8", "busy_cores"), xpos, 0.14)
        for v in order:
            s = specs[v]
            limit = s.milli("limit") / 1000 if s.limit is not None else math.nan
            share = weight_share(s, _node_cpus(s, host))
            if math.isfinite(limit):
                bottom.hlines(limit, xpos[v] - 0.36, xpos[v] + 0.36, colors="0.35", lw=1.6)
            if math.isfinite(share):
                bottom.hlines(share, xpos[v] - 0.36, xpos[v] + 0.36, colors=RULE_COLOR, lw=1.6, linestyles="-.")
        ratios = per_run(metrics, "E8", "throttled_ratio").groupby("variant")["value"].median()
        for v in order:
            if v in ratios.index:
                bottom.annotate(
                    f"throttled {ratios[v]:.2f}",
                    (xpos[v], 0),
                    xytext=(0, 3),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color="0.3",
                )
        bottom.set_ylim(bottom=0)
        bottom.set_ylabel("service CPU while requests waited (cores)")
        bottom.set_title("(b) CPU the service got during bursts (pod counters every few ms)", loc="left")
        bottom.tick_params(axis="x", labelsize=8)
        _legend(
            fig,
            est,
            "lab (8-CPU worker)",
            [
                Line2D([], [], color="0.35", lw=1.6, label="its limit"),
                Line2D([], [], color=RULE_COLOR, lw=1.6, ls="-.", label="its weight's share of the node"),
            ],
        )
    return fig


def e8_neighbor_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    metric, name = latency_metric(variant_specs(runs, "E8"))
    return (
        f"(a) /work {name} per run with the estimate and its interval; dashed red: the lab on "
        f"{LAB['E8'].setup} (values far above ours are printed at the top).{_quantile_note(name)} (b) The service's CPU "
        "over the moments when it had /work requests outstanding, from its pod's counters read every few ms "
        "(which the lab did not measure), against its limit (grey) and the share of the node its weight gets "
        "against the neighbor's (dash-dotted, kubelet's linear weights); 'throttled' is the median share of "
        f"periods throttled. Intervals: {name} "
        f"{method_sentence(estimates_of(estimates, 'E8', metric))}; CPU "
        f"{method_sentence(estimates_of(estimates, 'E8', 'busy_cores'))}."
    )


# --------------------------------------------------------------------------
# E6


def e6_monitoring_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """E6: what a scraper computes against the real pause, per run."""
    specs = variant_specs(runs, "E6")
    variant = next(iter(specs))
    names = [m for m, _ in E6_RATES]
    with paper_style(1.05):
        fig = Figure(figsize=(7.6, 3.8), layout="constrained")
        ax = fig.subplots(1, 1)
        xpos = set_categories(ax, names, [label for _, label in E6_RATES])
        est_all = []
        for metric in names:
            vals = per_run(metrics, "E6", metric)
            vals = vals[vals["variant"] == variant].assign(variant=metric)
            est = estimates_of(estimates, "E6", metric)
            est = est[est["variant"] == variant].assign(variant=metric)
            est_all.append(est)
            draw_runs(ax, vals, xpos, -0.1)
            draw_estimates(ax, est, xpos, 0.14)
        lab = LAB["E6"].values[E6_LIMIT]
        for metric, value in (("throttled_s_per_s", lab["throttled_s_per_s"]), ("pause_s_per_s", lab["pause_s_per_s"])):
            ax.hlines(value, xpos[metric] - 0.36, xpos[metric] + 0.36, colors=LAB_COLOR, linestyles="--", lw=1.4)
        ax.set_ylim(bottom=min(0, *[float(e["lo"].min()) for e in est_all if len(e) and e["lo"].notna().any()]))
        ax.set_ylabel("seconds per second of wall time")
        ax.set_title(
            f"{limit_label(specs[variant])}, {specs[variant].threads} threads x "
            f"{specs[variant].work_ms:g} ms every {specs[variant].interval_ms:g} ms",
            loc="left",
        )
        _legend(fig, pd.concat(est_all) if est_all else pd.DataFrame(), f"lab ({LAB['E6'].setup})")
    return fig


def e6_monitoring_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    lab = LAB["E6"].values[E6_LIMIT]
    return (
        "Left: the rate of throttled seconds a scraper computes from two cached readings of the container's "
        "counters, divided by the readings' own time difference (right) and by the time between the scrapes "
        "(wrong; the emulated cAdvisor caches its readings, as the lab's did). Right: the pause the limit really "
        "caused, the extra completion time of the same burst per second (median round under the limit minus "
        "median round without it, in the same run). Throttled time is summed over the CPUs' run queues, so the "
        f"first bar exceeds the last. Dashed red: the lab ({lab['throttled_s_per_s']:g} s/s against "
        f"{lab['pause_s_per_s']:g} s/s). Intervals: "
        f"{method_sentence(estimates_of(estimates, 'E6', 'throttled_s_per_s'))}."
    )


# --------------------------------------------------------------------------
# S2


def s2_throughput_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """S2: (a) closed-loop throughput by thread count; (b) the cascade's throughput, upstream limited or not."""
    specs = variant_specs(runs, "S2")
    procs = _procs(metrics, "S2")
    threads = [v for v in S2_THREADS if v in specs]
    cascade = [v for v in S2_CASCADE if v in specs]
    panels = [p for p in (threads, cascade) if p]
    with paper_style(1.05):
        fig = Figure(figsize=(7.6, 3.9), layout="constrained")
        axes = fig.subplots(1, max(len(panels), 1), squeeze=False)[0]
        est = pd.DataFrame()
        col = 0
        if threads:
            labels = [f"{limit_label(specs[v])}\nGOMAXPROCS {procs.get(v, '?')}" for v in threads]
            _, est = _value_panel(axes[col], metrics, estimates, "S2", "throughput_rps", threads, labels, log=True)
            axes[col].set_ylabel("closed-loop /work per second (log)")
            axes[col].set_title("(a) thread count vs a small limit", loc="left")
            col += 1
        if cascade:
            ratio = metrics[(metrics["experiment"] == "S2") & (metrics["metric"] == "upstream_throttled_ratio")]
            med = ratio.groupby("variant")["value"].median()
            labels = [
                f"upstream {limit_label(specs[v], 'upstream_limit')}\nthrottled {med[v]:.2f}"
                if v in med.index
                else f"upstream {limit_label(specs[v], 'upstream_limit')}"
                for v in cascade
            ]
            _, est_c = _value_panel(axes[col], metrics, estimates, "S2", "throughput_rps", cascade, labels, log=True)
            axes[col].set_title("(b) cascade: downstream throughput", loc="left")
            est = est if len(est) else est_c
        _legend(fig, est, "talk (250m, 16 CPUs)")
    return fig


def s2_throughput_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    talk = lab_values("S2", "throughput_rps")
    return (
        "Successful /work requests per second while every closed-loop worker sends its next request as soon as "
        "the last one returns, per run with the estimate and its interval. (a) The limited service with GOMAXPROCS "
        f"= the node's CPUs (Go's default) against GOMAXPROCS 1; dashed red: the talk's {talk[S2_THREADS_NODE]:g} and "
        f"{talk[S2_THREADS_ONE]:g} req/s "
        "(printed at the top when far above ours). (b) A service without a limit whose every /work calls an "
        "upstream service, with and without the upstream's limit; 'throttled' is the upstream's median share "
        "of periods throttled. Intervals: "
        f"{method_sentence(estimates_of(estimates, 'S2', 'throughput_rps'))}."
    )


# --------------------------------------------------------------------------
# ours: X5 near the limit, X6 GOMAXPROCS 2 against 1; the model before the data where the lab's figure would be


def x5_near_limit_figure(
    metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame, predictions: pd.DataFrame
) -> Figure:
    """X5: (a) throttled share of active periods by average use, with the Poisson model; (b) /work latency."""
    specs = variant_specs(runs, "X5")
    order = sorted(specs, key=lambda v: specs[v].rps or 0)
    use = model_values(predictions, "X5", "use", order)
    labels = [(f"{use[v]:.0%} of the limit\n" if v in use else "") + f"{specs[v].rps:g} req/s" for v in order]
    latency, latency_name = latency_metric({v: specs[v] for v in order})
    with paper_style(1.0):
        fig, (left, right) = new_figure(4.0, 2)
        level_panel(
            left,
            "X5",
            "throttled_ratio",
            metrics,
            estimates,
            order,
            labels,
            model_values(predictions, "X5", "throttled_ratio", order),
        )
        left.set_ylabel("throttled periods / active periods")
        left.set_title("(a) throttled share", loc="left")
        level_panel(right, "X5", latency, metrics, estimates, order, labels, {})
        plain_log_axis(right)
        right.set_ylabel(f"/work {latency_name} (ms, log)")
        right.set_title("(b) latency", loc="left")
        fig.legend(
            handles=model_legend_handles(confidence_level(estimates_of(estimates, "X5", "throttled_ratio")))[1:],
            loc="outside upper center",
            ncol=3,
            frameon=False,
        )
    return fig


def x6_threads_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """X6: (a) clumped /work latency by limit and GOMAXPROCS; (b) closed-loop throughput."""
    specs = variant_specs(runs, "X6")
    clumped = sorted(
        (v for v in specs if not specs[v].workers),
        key=lambda v: (specs[v].milli("limit") or 0, specs[v].gomaxprocs or 0),
    )
    closed = [v for v in specs if specs[v].workers]
    latency, latency_name = latency_metric({v: specs[v] for v in clumped})

    def label(v: str) -> str:
        procs = specs[v].gomaxprocs
        return f"{limit_label(specs[v])}\nGOMAXPROCS {procs if procs else 'default'}"

    with paper_style(1.0):
        fig, (left, right) = new_figure(4.0, 2, width_ratios=(max(len(clumped), 1), max(len(closed), 1)))
        level_panel(left, "X6", latency, metrics, estimates, clumped, [label(v) for v in clumped], {})
        plain_log_axis(left)
        left.set_ylabel(f"/work {latency_name} (ms, log)")
        left.set_title("(a) clumped open loop", loc="left")
        level_panel(right, "X6", "throughput_rps", metrics, estimates, closed, [label(v) for v in closed], {})
        right.set_ylabel("requests per second")
        right.set_title("(b) closed loop", loc="left")
        if not closed:
            right.text(
                0.5,
                0.5,
                "no closed-loop arm\nin this profile",
                ha="center",
                va="center",
                transform=right.transAxes,
                color=MODEL_COLOR,
            )
        fig.legend(
            handles=model_legend_handles(confidence_level(estimates_of(estimates, "X6", latency)))[1:3],
            loc="outside upper center",
            ncol=2,
            frameon=False,
        )
    return fig


def x5_near_limit_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    return ours_caption(
        "Steady arrivals (clump 1) at three shares of the limit, by the CPU per request the profile states. (a) "
        "Throttled periods / active periods per run (open circles) with the estimate (diamond); dotted grey: the "
        "share of periods whose Poisson arrivals need more than the quota, written before the data. (b) /work "
        "latency at the highest quantile the independent clumps of the windows support, or their maximum.",
        estimates_of(estimates, "X5", "throttled_ratio"),
    )


def x6_threads_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    return ours_caption(
        "GOMAXPROCS 2 (Go 1.25's default at limits up to 1.5 CPUs) against 1 on a 2-CPU node. (a) Clumped open "
        "loop: /work latency at the highest quantile the independent clumps of the windows support (or their "
        "maximum), per run and the estimate. (b) Closed loop: "
        "successful requests per second.",
        estimates_of(estimates, "X6", "throughput_rps"),
    )
