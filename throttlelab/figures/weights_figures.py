"""The weights' figure (E5 beside E10: shares of one CPU) and its caption on the page."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from throttlelab.figures.style import (
    FIG_WIDTH,
    RULE_COLOR,
    confidence_level,
    draw_estimates,
    draw_lab,
    draw_runs,
    estimates_of,
    legend_handles,
    method_sentence,
    paper_style,
    per_run,
    set_categories,
)
from throttlelab.model.reference import LAB
from throttlelab.model.variants import (
    WEIGHTS_PODS,
    WEIGHTS_TWO_CONTAINER,
)


def lab_shares(experiment: str, phase: str) -> dict[str, float]:
    """member -> the lab's measured share of the one CPU in this experiment's phase (docs/LAB.md §4)."""
    figures = LAB.get(experiment)
    values = figures.values.get(phase, {}) if figures else {}
    return {metric.removeprefix("share_"): v for metric, v in values.items() if metric.startswith("share_")}


SHARE_PANELS = (("E5", "new runc"), ("E10", "old runc"))
PHASE_TITLES = {WEIGHTS_PODS: "between pods", WEIGHTS_TWO_CONTAINER: "inside the two-container pod"}


def _member_frame(frame: pd.DataFrame, member: str) -> pd.DataFrame:
    """Rows of one share metric, with the member standing in for the variant (the x category)."""
    out = frame.copy()
    out["variant"] = member
    return out


def weights_shares_figure(metrics: pd.DataFrame, estimates: pd.DataFrame, share_expectations: pd.DataFrame) -> Figure:
    """E5 beside E10: each member's measured share of one CPU, the weights' prediction, the lab's share."""
    phases = [p for p in PHASE_TITLES if (share_expectations["variant"] == p).any()]
    panels = [(e, label) for e, label in SHARE_PANELS if (share_expectations["experiment"] == e).any()]
    with paper_style(1.05):
        fig = Figure(figsize=(FIG_WIDTH, 2.7 * max(len(phases), 1) + 0.6), layout="constrained")
        axes = fig.subplots(max(len(phases), 1), max(len(panels), 1), squeeze=False, sharey="row")
        level = 0.95
        for row, phase in enumerate(phases):
            for col, (experiment, label) in enumerate(panels):
                ax = axes[row][col]
                expect = share_expectations[
                    (share_expectations["experiment"] == experiment) & (share_expectations["variant"] == phase)
                ]
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
                draw_lab(ax, lab_shares(experiment, phase), xpos)
                ax.set_ylim(0, 1)
                ax.set_title(f"{experiment} ({label}): {PHASE_TITLES[phase]}", loc="left", fontsize=9)
                if col == 0:
                    ax.set_ylabel("share of the one CPU")
        handles = legend_handles(level, lab="lab (10-CPU kind node, 1 CPU pinned)")
        handles.append(Line2D([], [], color=RULE_COLOR, lw=2.0, label="w / sum(w) of the siblings"))
        fig.legend(handles=handles, loc="outside upper center", ncol=2, frameon=False)
    return fig


def weights_shares_caption(estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    est = estimates[estimates["experiment"].isin(["E5", "E10"]) & estimates["metric"].str.startswith("share_")]
    return (
        "Each busy container is one spinning thread; the node is pinned to one CPU. A share is a member's CPU "
        "gain over all members' gain between two readings, averaged over the readings of a run. Blue: the "
        "share the weights predict (pods: kubelet's linear weights; containers: the runtime's conversion); "
        "red dashes: the lab's measurement. " + method_sentence(est)
    )
