"""Figures, captions and report notes of the service experiments E2b, E7, E8, E6 and S2.

Registered in :data:`throttlelab.figures.plots.FIGURES` by plots.py itself (its last
lines), so `python -m throttlelab.figures.plots --figure e2b_latency ...` and the
report find them like the others. The shared drawing helpers live in plots.py;
this module imports them inside each function, because plots.py imports this
module while it is still being loaded.

Same rules as plots.py (shared/STATS.md §7): one point per run, the estimate and
interval that estimates.csv holds (never recomputed here), the lab's figure in
dashed red where the article gives one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from throttlelab.model.quantities import format_cpu, milli_to_shares, parse_cpu, shares_to_weight_linear
from throttlelab.analysis.service_metrics import LATENESS_SUSPECT_MS

# The lab's measurements (SPEC §4, run 1), keyed like our tables.
LAB: dict[str, dict[str, dict[str, float]]] = {
    "E2b": {
        "steady-nolimit": {"work_p99_ms": 14.5, "throttled_ratio": 0.0},
        "steady-limit": {"work_p99_ms": 14.5, "throttled_ratio": 0.0},
        "steady-limit-go125": {"work_p99_ms": 14.5, "throttled_ratio": 0.0},
        "clumped-nolimit": {"work_p99_ms": 74.4},
        "clumped-limit": {"work_p99_ms": 370.1, "throttled_ratio": 0.300},
        "clumped-limit-go125": {"work_p99_ms": 447.1, "throttled_ratio": 0.045},
    },
    "E7": {
        "one-nolimit": {"work_p99_ms": 85.7},
        "one-limit": {"work_p99_ms": 263.9},
        "two-half": {"work_p99_ms": 602.5},
        "two-limit": {"work_p99_ms": 140.1},
        "one-double": {"work_p99_ms": 105.1},
    },
    "E8": {
        "idle-lim": {"work_p99_ms": 392.0},
        "idle-lim2x": {"work_p99_ms": 98.7},
        "busy-lim": {"work_p99_ms": 8359.0},
        "busy-lim2x": {"work_p99_ms": 6045.0, "throttled_ratio": 0.0},
        "busy-lim2x-req-half": {"work_p99_ms": 472.0},
        "busy-lim2x-req-full": {"work_p99_ms": 222.0},
    },
    "E6": {"limit": {"throttled_s_per_s": 0.48, "pause_s_per_s": 0.075}},
    "S2": {"threads-node": {"throughput_rps": 126.0}, "threads-one": {"throughput_rps": 2746.0}},
}
LAB_SETUP = {
    "E2b": "a 10-CPU kind node, limit 2, clumps of 50 (steady: 13-16 ms in all settings)",
    "E7": "a 10-CPU kind node, limits 2 / 1 / 4, clumps of 50",
    "E8": "an 8-CPU worker, limits 2 / 4, requests 500m / 2 / 4",
    "E6": "8 threads on 10 CPUs, limit 1",
    "S2": "the talk: limit 250m on 16 CPUs",
}

E2B_ORDER = ("steady-nolimit", "steady-limit", "steady-limit-go125",
             "clumped-nolimit", "clumped-limit", "clumped-limit-go125")
E7_ORDER = ("one-nolimit", "one-limit", "two-half", "two-limit", "one-double")
E8_ORDER = ("idle-lim", "idle-lim2x", "busy-lim", "busy-lim2x", "busy-lim2x-req-half", "busy-lim2x-req-full")
S2_THREADS = ("threads-node", "threads-one")
S2_CASCADE = ("cascade-unlimited", "cascade-limited")
E6_RATES = (("throttled_s_per_s", "throttled s per s\n(÷ readings' times)"),
            ("throttled_s_per_s_naive", "throttled s per s\n(÷ scrape interval)"),
            ("pause_s_per_s", "real pause per s\n(extra completion)"))


def lab_of(experiment: str, metric: str) -> dict[str, float]:
    return {v: m[metric] for v, m in LAB.get(experiment, {}).items() if metric in m}


def ordered(specs: Mapping[str, Any], preferred: tuple[str, ...]) -> list[str]:
    """The preferred order of the variants that ran, then any others in runs.csv order."""
    return [v for v in preferred if v in specs] + [v for v in specs if v not in preferred]


def _limit_text(spec: Mapping[str, Any], key: str = "limit") -> str:
    value = spec.get(key)
    return "no limit" if value is None else f"limit {format_cpu(parse_cpu(value, key))}"


def _procs(metrics: pd.DataFrame, experiment: str) -> dict[str, str]:
    """GOMAXPROCS each variant's service reported (/stats), as '1' or '1/2' when runs differ."""
    rows = metrics[(metrics["experiment"] == experiment) & (metrics["metric"] == "gomaxprocs")].dropna()
    return {v: "/".join(f"{x:g}" for x in sorted(g["value"].unique())) for v, g in rows.groupby("variant")}


def _value_panel(ax, metrics: pd.DataFrame, estimates: pd.DataFrame, experiment: str, metric: str,
                 order: list[str], labels: list[str], *, log: bool, lab_ceiling: bool = True):
    """Per-run points, the estimate with its interval, the lab's values; returns the x positions."""
    from throttlelab.figures.plots import (data_top, draw_estimates, draw_lab, draw_runs, estimates_of, per_run, plain_log_axis,
                        set_categories)

    values = per_run(metrics, experiment, metric)
    est = estimates_of(estimates, experiment, metric)
    xpos = set_categories(ax, order, labels)
    draw_runs(ax, values, xpos, -0.1)
    draw_estimates(ax, est, xpos, 0.14)
    refs = lab_of(experiment, metric)
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
    from throttlelab.figures.plots import confidence_level, legend_handles

    handles = legend_handles(confidence_level(est) if len(est) else 0.95, lab=lab) + (extra or [])
    fig.legend(handles=handles, loc="outside upper center", ncol=min(len(handles), 4), frameon=False)


def _style():
    import seaborn as sns

    return sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=1.05)


# --------------------------------------------------------------------------
# E2b


def e2b_labels(order: list[str], specs: Mapping[str, Mapping[str, Any]], procs: Mapping[str, str]) -> list[str]:
    return [f"clump {specs[v]['clump']}\n{_limit_text(specs[v])}\n{specs[v].get('build', 'go124mod')}, "
            f"GMP {procs.get(v, '?')}" for v in order]


def e2b_latency_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """E2b: (a) /work p99 by arrival shape and setting; (b) share of periods throttled."""
    from throttlelab.figures.plots import variant_specs

    specs = variant_specs(runs, "E2b")
    order = ordered(specs, E2B_ORDER)
    labels = e2b_labels(order, specs, _procs(metrics, "E2b"))
    a, b = _style()
    with a, b:
        fig = Figure(figsize=(7.6, 6.4), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True)
        _, est = _value_panel(top, metrics, estimates, "E2b", "work_p99_ms", order, labels, log=True)
        top.set_ylabel("/work p99 (ms, log)")
        top.set_title("(a) /work p99 latency, from the scheduled send", loc="left")
        _value_panel(bottom, metrics, estimates, "E2b", "throttled_ratio", order, labels, log=False)
        bottom.set_ylim(-0.05, 1.0)
        bottom.set_ylabel("throttled / counted periods")
        bottom.set_title("(b) share of periods throttled (0 without a limit: no quota)", loc="left")
        _legend(fig, est, f"lab ({LAB_SETUP['E2b'].split(',')[0]})")
    return fig


def e2b_latency_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    from throttlelab.figures.plots import estimates_of, method_sentence

    return (
        "Each open circle is one run's p99 (top) or throttled share (bottom); the diamond and bar are the estimate "
        "across runs and its interval. GMP: the GOMAXPROCS the service reported. Dashed red: the lab on "
        f"{LAB_SETUP['E2b']}, for the shape. Intervals: p99 {method_sentence(estimates_of(estimates, 'E2b', 'work_p99_ms'))}; "
        f"throttled share {method_sentence(estimates_of(estimates, 'E2b', 'throttled_ratio'))}."
    )


# --------------------------------------------------------------------------
# E7


def e7_labels(order: list[str], specs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return [f"{specs[v]['replicas']} x {_limit_text(specs[v]).replace('limit ', '')}" for v in order]


def e7_replicas_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """E7: (a) /work p99 by replicas x limit; (b) the busiest replica's share of the requests."""
    from throttlelab.figures.plots import draw_estimates, draw_runs, estimates_of, per_run, set_categories, variant_specs

    specs = variant_specs(runs, "E7")
    order = ordered(specs, E7_ORDER)
    labels = e7_labels(order, specs)
    a, b = _style()
    with a, b:
        fig = Figure(figsize=(7.6, 3.9), layout="constrained")
        left, right = fig.subplots(1, 2, width_ratios=(1.6, 1))
        _, est = _value_panel(left, metrics, estimates, "E7", "work_p99_ms", order, labels, log=True)
        left.set_ylabel("/work p99 (ms, log)")
        left.set_title("(a) /work p99 by replicas x limit", loc="left")
        multi = [v for v in order if int(specs[v]["replicas"]) > 1]
        if multi:
            xpos = set_categories(right, multi, [labels[order.index(v)] for v in multi])
            draw_runs(right, per_run(metrics, "E7", "busiest_share"), xpos, -0.1)
            draw_estimates(right, estimates_of(estimates, "E7", "busiest_share"), xpos, 0.14)
            for v in multi:
                even = 1 / int(specs[v]["replicas"])
                right.hlines(even, xpos[v] - 0.36, xpos[v] + 0.36, colors="0.5", linestyles=":", lw=1.2)
            right.set_ylim(0, 1)
        right.set_ylabel("busiest replica's share of /work")
        right.set_title("(b) per-connection balance", loc="left")
        _legend(fig, est, "lab (10 CPUs, 2 x 1 etc.)",
                [Line2D([], [], ls=":", color="0.5", label="even split")])
    return fig


def e7_replicas_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    from throttlelab.figures.plots import estimates_of, method_sentence

    return (
        "(a) /work p99 per run (open circles) with the estimate and its interval, by replicas x limit per replica; "
        f"dashed red: the lab on {LAB_SETUP['E7']}. (b) For the settings with replicas: the share of the measured "
        "/work requests the busiest replica served; the generator gives each new connection to a random replica "
        "and keeps it (as kube-proxy does), so the split is uneven (dotted: an even split). Intervals: "
        f"{method_sentence(estimates_of(estimates, 'E7', 'work_p99_ms'))}."
    )


# --------------------------------------------------------------------------
# E8


def weight_share(spec: Mapping[str, Any], node_cpus: int) -> float:
    """The CPUs the service's weight entitles it to when the neighbor is busy (kubelet's linear weights)."""
    if not spec.get("neighbor"):
        return math.nan
    mine = shares_to_weight_linear(milli_to_shares(parse_cpu(spec["request"], "request")))
    theirs = shares_to_weight_linear(milli_to_shares(parse_cpu(spec["neighbor_request"], "neighbor_request")))
    return node_cpus * mine / (mine + theirs)


def _node_cpus(spec: Mapping[str, Any], fallback: int) -> int:
    from throttlelab.model.placement import parse_cpuset

    return len(parse_cpuset(spec["node_cpus"])) if spec.get("node_cpus") else fallback


def e8_labels(order: list[str], specs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    out = []
    for v in order:
        s = specs[v]
        out.append(f"{'busy' if s['neighbor'] else 'idle'}\nreq {format_cpu(parse_cpu(s['request'], 'request'))}\n"
                   f"{_limit_text(s)}")
    return out


def e8_neighbor_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """E8: (a) /work p99 by node state, request and limit; (b) the CPU the service got while requests waited."""
    from throttlelab.figures.plots import RULE_COLOR, draw_estimates, draw_runs, estimates_of, per_run, set_categories, variant_specs

    specs = variant_specs(runs, "E8")
    order = ordered(specs, E8_ORDER)
    labels = e8_labels(order, specs)
    cpus = runs.loc[runs["experiment"] == "E8", "cpus"].dropna()
    host = int(cpus.iloc[0]) if len(cpus) else 1
    a, b = _style()
    with a, b:
        fig = Figure(figsize=(7.6, 6.6), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True)
        _, est = _value_panel(top, metrics, estimates, "E8", "work_p99_ms", order, labels, log=True)
        top.set_ylabel("/work p99 (ms, log)")
        top.set_title("(a) /work p99", loc="left")
        xpos = set_categories(bottom, order, labels)
        draw_runs(bottom, per_run(metrics, "E8", "busy_cores"), xpos, -0.1)
        draw_estimates(bottom, estimates_of(estimates, "E8", "busy_cores"), xpos, 0.14)
        for v in order:
            s = specs[v]
            limit = parse_cpu(s["limit"], "limit") / 1000 if s.get("limit") is not None else math.nan
            share = weight_share(s, _node_cpus(s, host))
            if math.isfinite(limit):
                bottom.hlines(limit, xpos[v] - 0.36, xpos[v] + 0.36, colors="0.35", lw=1.6)
            if math.isfinite(share):
                bottom.hlines(share, xpos[v] - 0.36, xpos[v] + 0.36, colors=RULE_COLOR, lw=1.6, linestyles="-.")
        ratios = per_run(metrics, "E8", "throttled_ratio").groupby("variant")["value"].median()
        for v in order:
            if v in ratios.index:
                bottom.annotate(f"throttled {ratios[v]:.2f}", (xpos[v], 0), xytext=(0, 3), textcoords="offset points",
                                ha="center", va="bottom", fontsize=7, color="0.3")
        bottom.set_ylim(bottom=0)
        bottom.set_ylabel("service CPU while requests waited (cores)")
        bottom.set_title("(b) CPU the service got during bursts (pod counters every few ms)", loc="left")
        bottom.tick_params(axis="x", labelsize=8)
        _legend(fig, est, "lab (8-CPU worker)", [
            Line2D([], [], color="0.35", lw=1.6, label="its limit"),
            Line2D([], [], color=RULE_COLOR, lw=1.6, ls="-.", label="its weight's share of the node"),
        ])
    return fig


def e8_neighbor_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    from throttlelab.figures.plots import estimates_of, method_sentence

    return (
        "(a) /work p99 per run with the estimate and its interval; dashed red: the lab on "
        f"{LAB_SETUP['E8']} (values far above ours are printed at the top). (b) The service's CPU "
        "over the moments when it had /work requests outstanding, from its pod's counters read every few ms "
        "(which the lab did not measure), against its limit (grey) and the share of the node its weight gets "
        "against the neighbor's (dash-dotted, kubelet's linear weights); 'throttled' is the median share of "
        "periods throttled. Intervals: p99 "
        f"{method_sentence(estimates_of(estimates, 'E8', 'work_p99_ms'))}; CPU "
        f"{method_sentence(estimates_of(estimates, 'E8', 'busy_cores'))}."
    )


# --------------------------------------------------------------------------
# E6


def e6_monitoring_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """E6: what a scraper computes against the real pause, per run."""
    from throttlelab.figures.plots import (LAB_COLOR, draw_estimates, draw_runs, estimates_of, per_run, set_categories,
                        variant_specs)

    specs = variant_specs(runs, "E6")
    variant = next(iter(specs))
    names = [m for m, _ in E6_RATES]
    a, b = _style()
    with a, b:
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
        lab = LAB["E6"]["limit"]
        for metric, value in (("throttled_s_per_s", lab["throttled_s_per_s"]), ("pause_s_per_s", lab["pause_s_per_s"])):
            ax.hlines(value, xpos[metric] - 0.36, xpos[metric] + 0.36, colors=LAB_COLOR, linestyles="--", lw=1.4)
        ax.set_ylim(bottom=min(0, *[float(e["lo"].min()) for e in est_all if len(e) and e["lo"].notna().any()]))
        ax.set_ylabel("seconds per second of wall time")
        ax.set_title(f"{_limit_text(specs[variant])}, {specs[variant]['threads']} threads x "
                     f"{specs[variant]['work_ms']:g} ms every {specs[variant]['interval_ms']:g} ms", loc="left")
        _legend(fig, pd.concat(est_all) if est_all else pd.DataFrame(), f"lab ({LAB_SETUP['E6']})")
    return fig


def e6_monitoring_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    from throttlelab.figures.plots import estimates_of, method_sentence

    return (
        "Left: the rate of throttled seconds a scraper computes from two cached readings of the container's "
        "counters, divided by the readings' own time difference (right) and by the time between the scrapes "
        "(wrong; the emulated cAdvisor caches its readings, as the lab's did). Right: the pause the limit really "
        "caused, the extra completion time of the same burst per second (median round under the limit minus "
        "median round without it, in the same run). Throttled time is summed over the CPUs' run queues, so the "
        "first bar exceeds the last. Dashed red: the lab (0.48 s/s against 0.075 s/s). Intervals: "
        f"{method_sentence(estimates_of(estimates, 'E6', 'throttled_s_per_s'))}."
    )


# --------------------------------------------------------------------------
# S2


def s2_throughput_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """S2: (a) closed-loop throughput by thread count; (b) the cascade's throughput, upstream limited or not."""
    from throttlelab.figures.plots import variant_specs

    specs = variant_specs(runs, "S2")
    procs = _procs(metrics, "S2")
    threads = [v for v in S2_THREADS if v in specs]
    cascade = [v for v in S2_CASCADE if v in specs]
    panels = [p for p in (threads, cascade) if p]
    a, b = _style()
    with a, b:
        fig = Figure(figsize=(7.6, 3.9), layout="constrained")
        axes = fig.subplots(1, max(len(panels), 1), squeeze=False)[0]
        est = pd.DataFrame()
        col = 0
        if threads:
            labels = [f"{_limit_text(specs[v])}\nGOMAXPROCS {procs.get(v, '?')}" for v in threads]
            _, est = _value_panel(axes[col], metrics, estimates, "S2", "throughput_rps", threads, labels, log=True)
            axes[col].set_ylabel("closed-loop /work per second (log)")
            axes[col].set_title("(a) thread count vs a small limit", loc="left")
            col += 1
        if cascade:
            ratio = metrics[(metrics["experiment"] == "S2") & (metrics["metric"] == "upstream_throttled_ratio")]
            med = ratio.groupby("variant")["value"].median()
            labels = [f"upstream {_limit_text(specs[v], 'upstream_limit')}\nthrottled "
                      f"{med[v]:.2f}" if v in med.index else f"upstream {_limit_text(specs[v], 'upstream_limit')}"
                      for v in cascade]
            _, est_c = _value_panel(axes[col], metrics, estimates, "S2", "throughput_rps", cascade, labels, log=True)
            axes[col].set_title("(b) cascade: downstream throughput", loc="left")
            est = est if len(est) else est_c
        _legend(fig, est, "talk (250m, 16 CPUs)")
    return fig


def s2_throughput_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    from throttlelab.figures.plots import estimates_of, method_sentence

    return (
        "Successful /work requests per second while every closed-loop worker sends its next request as soon as "
        "the last one returns, per run with the estimate and its interval. (a) The limited service with GOMAXPROCS "
        "= the node's CPUs (Go's default) against GOMAXPROCS 1; dashed red: the talk's 126 and 2746 req/s "
        "(printed at the top when far above ours). (b) A service without a limit whose every /work calls an "
        "upstream service, with and without the upstream's limit; 'throttled' is the upstream's median share "
        "of periods throttled. Intervals: "
        f"{method_sentence(estimates_of(estimates, 'S2', 'throughput_rps'))}."
    )


# --------------------------------------------------------------------------
# notes under a section: S2 against E2b


def _estimate(estimates: pd.DataFrame, experiment: str, variant: str, metric: str) -> pd.Series | None:
    rows = estimates[(estimates["experiment"] == experiment) & (estimates["variant"] == variant)
                     & (estimates["metric"] == metric)]
    return None if rows.empty else rows.iloc[0]


def _fmt(row: pd.Series | None) -> str:
    from throttlelab.report.page import fmt_interval

    return "not measured in this profile" if row is None else fmt_interval(row["point"], row["lo"], row["hi"])


def compare_variants(metrics: pd.DataFrame | None, experiment: str, variant: str, baseline: str,
                     metric: str, level: float = 0.95) -> str:
    """'ratio [lo, hi]' of geometric means of a per-run metric (stats.compare), or why there is none."""
    import warnings

    from throttlelab.analysis import stats
    from throttlelab.report.page import fmt_interval

    if metrics is None:
        return "no per-run metrics"

    def values(v: str):
        rows = metrics[(metrics["experiment"] == experiment) & (metrics["variant"] == v) & (metrics["metric"] == metric)]
        return rows["value"].dropna().to_numpy(dtype=float)

    a, b = values(variant), values(baseline)
    if len(a) == 0 or len(b) == 0:
        missing = variant if len(a) == 0 else baseline
        return f"not measured: this profile has no {experiment} {missing} (its section says why)"
    if min(a.min(), b.min()) <= 0:
        return "undefined (a run measured 0)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateWarning)
        cmp = stats.compare(a, b, log=True, level=level, label=f"per-run {metric}")
    return fmt_interval(cmp.effect, cmp.lo, cmp.hi) + f" (R = {len(a)} and {len(b)})"


def s2_against_e2b(tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """Where S2 and E2b disagree on fewer threads, with this run's numbers (SPEC §4, S2)."""
    estimates, metrics = tables["estimates"], tables.get("metrics")
    level = float(estimates["level"].dropna().iloc[0]) if estimates["level"].notna().any() else 0.95
    procs = {}
    for v in ("threads-node", "threads-one", "clumped-limit", "clumped-limit-go125"):
        row = _estimate(estimates, "S2" if v.startswith("threads") else "E2b", v, "gomaxprocs")
        procs[v] = "?" if row is None or pd.isna(row["point"]) else f"{row['point']:g}"
    s2 = compare_variants(metrics, "S2", "threads-one", "threads-node", "throughput_rps", level)
    e2b = compare_variants(metrics, "E2b", "clumped-limit-go125", "clumped-limit", "work_p99_ms", level)
    same = procs["clumped-limit"] == procs["clumped-limit-go125"] != "?"

    def gmp(v: str) -> str:
        return "" if procs[v] == "?" else f" (GOMAXPROCS {procs[v]})"
    return [
        "S2 and E2b disagree on whether fewer threads help, and both can be right: they measure different load "
        "shapes. S2 is a closed loop: a fixed number of requests is always in flight and the measure is "
        "throughput, so what matters is how much of the quota the runtime wastes; with many threads the "
        "quota drains in a few ms and every thread then waits out the period (the talk: 21.7x more "
        "throughput with GOMAXPROCS 1). E2b is an open loop with clumped arrivals: a burst of requests lands "
        "at once and the measure is how long the last one waits, so what matters is parallelism inside the "
        "quota; with fewer threads a clump is served more serially (the lab: p99 447 ms with GOMAXPROCS 2 "
        "against 370 ms with 10).",
        f"This run. S2, closed loop: throughput with fewer threads{gmp('threads-one')} / the node's "
        f"CPUs{gmp('threads-node')} = {s2} (F11 says whether this node can show the effect). E2b, open loop, "
        f"clumped: /work p99 with the go125mod build{gmp('clumped-limit-go125')} / go124mod"
        f"{gmp('clumped-limit')} = {e2b}"
        + (" - the same GOMAXPROCS on this node, so E2b cannot show its side here (both builds are capped at "
           "the node's CPUs; it needs more than 2)." if same else "."),
        "So: fewer threads than the node's CPUs raise throughput when requests keep the service saturated "
        "(closed loop, a tiny limit); they lengthen the tail when work arrives in bursts that the quota could "
        "have absorbed in parallel (open loop, clumps, well under the limit on average).",
    ]


# --------------------------------------------------------------------------
# generator health, for every run with load records


def lateness_rows(metrics: pd.DataFrame, experiment: str) -> list[tuple[str, int, float, float, bool]]:
    """(variant, repeat, late p99 ms, /work errors, suspect) per run of the experiment, in run order."""
    mine = metrics[(metrics["experiment"] == experiment) & metrics["metric"].isin(["late_p99_ms", "work_errors"])]
    if mine.empty or not (mine["metric"] == "late_p99_ms").any():
        return []
    wide = mine.pivot_table(index=["variant", "repeat"], columns="metric", values="value", aggfunc="first",
                            sort=False)
    out = []
    for (variant, repeat), row in wide.iterrows():
        late = float(row.get("late_p99_ms", math.nan))
        errors = float(row.get("work_errors", math.nan))
        out.append((str(variant), int(repeat), late, errors, math.isfinite(late) and late > LATENESS_SUSPECT_MS))
    return out


def figure_specs(spec_class) -> list[Any]:
    """The FigureSpec entries plots.py registers (its class is passed in: no import cycle)."""
    return [
        spec_class("e2b_latency", "E2b", "/work p99 and throttled share by arrival shape and setting",
                   ("metrics", "estimates", "runs"), e2b_latency_figure, e2b_latency_caption),
        spec_class("e7_replicas", "E7", "Replicas behind per-connection balancing against one pod",
                   ("metrics", "estimates", "runs"), e7_replicas_figure, e7_replicas_caption),
        spec_class("e8_neighbor", "E8", "A busy neighbor: latency, and the CPU the service really got",
                   ("metrics", "estimates", "runs"), e8_neighbor_figure, e8_neighbor_caption),
        spec_class("e6_monitoring", "E6", "What a scraper computes against the real pause",
                   ("metrics", "estimates", "runs"), e6_monitoring_figure, e6_monitoring_caption),
        spec_class("s2_throughput", "S2", "Closed-loop throughput: thread count and a limited upstream",
                   ("metrics", "estimates", "runs"), s2_throughput_figure, s2_throughput_caption),
    ]


def section_notes(experiment: str, tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """Paragraphs the report prints in an experiment's section (only S2 has some: where it and E2b disagree)."""
    if experiment == "S2" and "estimates" in tables:
        return s2_against_e2b(tables)
    return []
