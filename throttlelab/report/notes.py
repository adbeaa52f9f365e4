"""Paragraphs the report prints in an experiment's section, written from the tables (the numbers in
them are the analysis's: estimates.csv, contrasts.csv, findings.csv; nothing is computed here).

S2: where it and E2b disagree on fewer threads, with this run's numbers beside
the lab's (:mod:`throttlelab.model.reference`); X3: what F14 decides about F2's
wording (docs/EXPERIMENTS.md).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from throttlelab.analysis.number_format import fmt_interval
from throttlelab.analysis.report_statistics import CONTRASTS, Contrast
from throttlelab.model.reference import TALK_S2_GAIN, lab_values
from throttlelab.model.variants import (
    E2B_CLUMPED_LIMIT,
    E2B_CLUMPED_LIMIT_GO125,
    S2_THREADS_NODE,
    S2_THREADS_ONE,
)


def _estimate(estimates: pd.DataFrame, experiment: str, variant: str, metric: str) -> pd.Series | None:
    rows = estimates[
        (estimates["experiment"] == experiment) & (estimates["variant"] == variant) & (estimates["metric"] == metric)
    ]
    return None if rows.empty else rows.iloc[0]


def contrast(contrasts: pd.DataFrame | None, experiment: str, variant: str, baseline: str) -> str:
    """'ratio [lo, hi] (R = a and b)' of a contrast of contrasts.csv, or why there is none."""
    if contrasts is None:
        return "no per-run metrics"
    rows = contrasts[
        (contrasts["experiment"] == experiment)
        & (contrasts["variant"] == variant)
        & (contrasts["baseline"] == baseline)
    ]
    if rows.empty:
        return "not computed by this analysis (contrasts.csv has no such row)"
    row = rows.iloc[0]
    if pd.notna(row["note"]) and str(row["note"]):
        return str(row["note"])
    interval = fmt_interval(row["effect"], row["lo"], row["hi"])
    return f"{interval} (R = {int(row['n'])} and {int(row['n_baseline'])})"


def _contrast_of(experiment: str, variant: str, baseline: str) -> Contrast:
    return next(c for c in CONTRASTS if (c.experiment, c.variant, c.baseline) == (experiment, variant, baseline))


def s2_against_e2b(tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """Where S2 and E2b disagree on fewer threads, with this run's numbers (docs/LAB.md §4, S2): the contrasts
    of contrasts.csv (analysis/report_statistics.py)."""
    estimates, contrasts = tables["estimates"], tables.get("contrasts")
    procs = {}
    for experiment, v in (
        ("S2", S2_THREADS_NODE),
        ("S2", S2_THREADS_ONE),
        ("E2b", E2B_CLUMPED_LIMIT),
        ("E2b", E2B_CLUMPED_LIMIT_GO125),
    ):
        row = _estimate(estimates, experiment, v, "gomaxprocs")
        procs[v] = "?" if row is None or pd.isna(row["point"]) else f"{row['point']:g}"
    s2 = contrast(contrasts, "S2", S2_THREADS_ONE, S2_THREADS_NODE)
    # what the independent clumps of both arms' windows support, as a latency finding compares them (docs/STATISTICS.md §2)
    e2b = contrast(contrasts, "E2b", E2B_CLUMPED_LIMIT_GO125, E2B_CLUMPED_LIMIT)
    quantile = _contrast_of("E2b", E2B_CLUMPED_LIMIT_GO125, E2B_CLUMPED_LIMIT).shown_of(tables["runs"])
    same = procs[E2B_CLUMPED_LIMIT] == procs[E2B_CLUMPED_LIMIT_GO125] != "?"
    lab_p99 = lab_values("E2b", "work_p99_ms")

    def gmp(v: str) -> str:
        return "" if procs[v] == "?" else f" (GOMAXPROCS {procs[v]})"

    return [
        "S2 and E2b disagree on whether fewer threads help, and both can be right: they measure different load "
        "shapes. S2 is a closed loop: a fixed number of requests is always in flight and the measure is "
        "throughput, so what matters is how much of the quota the runtime wastes; with many threads the "
        f"quota drains in a few ms and every thread then waits out the period (the talk: {TALK_S2_GAIN:g}x more "
        "throughput with GOMAXPROCS 1). E2b is an open loop with clumped arrivals: a burst of requests lands "
        "at once and the measure is how long the last one waits, so what matters is parallelism inside the "
        f"quota; with fewer threads a clump is served more serially (the lab: p99 {lab_p99[E2B_CLUMPED_LIMIT_GO125]:.0f} "
        f"ms with GOMAXPROCS 2 against {lab_p99[E2B_CLUMPED_LIMIT]:.0f} ms with 10).",
        f"This run. S2, closed loop: throughput with fewer threads{gmp(S2_THREADS_ONE)} / the node's "
        f"CPUs{gmp(S2_THREADS_NODE)} = {s2} (F11 says whether this node can show the effect). E2b, open loop, "
        f"clumped: /work {quantile} with the go125mod build{gmp(E2B_CLUMPED_LIMIT_GO125)} / go124mod"
        f"{gmp(E2B_CLUMPED_LIMIT)} = {e2b}"
        + (
            " - the same GOMAXPROCS on this node, so E2b cannot show its side here (both builds are capped at "
            "the node's CPUs; it needs more than 2)."
            if same
            else "."
        ),
        "So: fewer threads than the node's CPUs raise throughput when requests keep the service saturated "
        "(closed loop, a tiny limit); they lengthen the tail when work arrives in bursts that the quota could "
        "have absorbed in parallel (open loop, clumps, well under the limit on average).",
    ]


def x3_on_f2(findings: pd.DataFrame | None) -> list[str]:
    """X3 decides how F2 is worded (docs/EXPERIMENTS.md): what F14's verdict says about the lab's
    "summed over threads"."""
    rows = None if findings is None else findings[findings["id"] == "F14"]
    if rows is None or rows.empty:
        return []
    verdict = str(rows.iloc[0]["verdict"])
    if verdict == "reproduced":
        says = (
            "so F2 is worded as the kernel accounts it: throttled time is summed over the CPU run queues on "
            "which the group was throttled, not over its threads (the lab's wording holds only where every "
            "thread has a CPU of its own)"
        )
    elif verdict == "contradicted":
        says = (
            "so this run does NOT support F2's wording (summed over run queues): read F2's verdict with F14's "
            "checks beside it"
        )
    else:
        says = f"so this run cannot decide between the two wordings of F2 ({verdict}; F14's reason says why)"
    return [f"F14 came out {verdict}: {says}."]


def section_notes(experiment: str, tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """Paragraphs the report prints in an experiment's section: S2 (where it and E2b disagree) and X3
    (what F14 says about F2's wording)."""
    if experiment == "S2" and "estimates" in tables:
        return s2_against_e2b(tables)
    if experiment == "X3":
        return x3_on_f2(tables.get("findings"))
    return []
