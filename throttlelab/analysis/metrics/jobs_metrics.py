"""Per-run metrics of the jobs: E2a's burst rounds (and X1-X3's, E2a's burst with one more knob), X4's
bursts of several pods, S1's spin, E3's GOMAXPROCS readout.

Pure functions of one run's tidy rows (docs/STATISTICS.md §1: one number per run).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from throttlelab.analysis import stats
from throttlelab.analysis.metrics.common import USEC_PER_MS, MetricSpec, exactly_one, number, throttled_ratio, total
from throttlelab.analysis.tidy import InputError
from throttlelab.model.catalogue import Experiment

SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("p50_wall_ms", "ms", "log", "interval", "median burst completion time, rounds after the first"),
    MetricSpec("max_wall_ms", "ms", "log", "range", "slowest burst, rounds after the first"),
    MetricSpec(
        "throttled_ratio",
        "ratio",
        "logit",
        "interval",
        "throttled periods / active periods (0 when no period was counted)",
        counts=("nr_throttled", "nr_periods"),
    ),
    MetricSpec("nr_periods", "count", "linear", "interval", "CFS periods counted (active periods only)", exact=True),
    MetricSpec(
        "nr_throttled", "count", "linear", "interval", "CFS periods in which the cgroup was throttled", exact=True
    ),
    MetricSpec("throttled_ms", "ms", "linear", "interval", "throttled time, summed over CPUs; can exceed wall time"),
    MetricSpec(
        "throttled_over_wall",
        "ratio",
        "linear",
        "interval",
        "median over rounds after the first of throttled ms / wall ms",
    ),
    MetricSpec(
        "throttled_ms_per_round",
        "ms",
        "linear",
        "interval",
        "mean throttled time per round after the first, summed over the run queues throttled",
    ),
    MetricSpec("mean_wall_ms", "ms", "log", "interval", "mean burst completion time, rounds after the first"),
    MetricSpec(
        "two_queue_share",
        "share",
        "linear",
        "interval",
        "rounds after the first whose threads mainly ran on two or more CPUs (getcpu) / those rounds",
        exact=True,
    ),
    MetricSpec(
        "throttled_per_round",
        "periods",
        "linear",
        "interval",
        "throttled periods per round after the first (Δnr_throttled of those rounds / their count)",
        exact=True,
    ),
    MetricSpec(
        "throttled_round_share",
        "share",
        "linear",
        "interval",
        "rounds after the first in which the group was throttled at least once (Δnr_throttled > 0) / those rounds",
        exact=True,
    ),
    MetricSpec(
        "bursts_per_round",
        "periods",
        "linear",
        "interval",
        "periods over quota (cpu.stat nr_bursts, X1) over the whole run / rounds; empty on a kernel "
        "without a burst budget",
        exact=True,
    ),
    MetricSpec(
        "burst_ms_per_round",
        "ms",
        "linear",
        "interval",
        "CPU borrowed from the burst budget (cpu.stat burst_time / burst_usec) over the run / rounds",
    ),
    MetricSpec(
        "periods_per_round",
        "periods",
        "linear",
        "interval",
        "the run's nr_periods / rounds (the idle period after each burst included)",
        exact=True,
    ),
    MetricSpec("avg_cores", "cores", "linear", "interval", "CPU used / elapsed time"),
    MetricSpec(
        "periods_per_wall_period",
        "ratio",
        "linear",
        "interval",
        "nr_periods / (elapsed / period): 1 if every wall-clock period were counted",
    ),
    MetricSpec("gomaxprocs", "procs", "linear", "setting", "GOMAXPROCS the Go runtime chose"),
    MetricSpec("expected_gomaxprocs", "procs", "linear", "setting", "GOMAXPROCS Go's rule predicts (docs/LAB.md §2.6)"),
    MetricSpec("num_cpu", "cpus", "linear", "setting", "runtime.NumCPU(): CPUs the process may use"),
)


def _run_periods(summary: Mapping[str, Any], rounds_total: float) -> float:
    """Δnr_periods over the whole run: the summary's, else (older logs) the rounds' sum."""
    value = number(summary.get("nr_periods"))
    return rounds_total if math.isnan(value) else value


def burst_metrics(rounds: pd.DataFrame, summary: Mapping[str, Any], period_us: float) -> dict[str, float]:
    """E2a metrics of one burst process: its rounds, its summary record, its cgroup period.

    The first round is left out of the completion times: it also pays for
    starting the threads. Counters are summed over all rounds.
    """
    rounds = rounds.sort_values("round")
    later = rounds[rounds["round"] > 0]
    if later.empty:
        raise InputError("a burst run needs at least two rounds: the first one is left out of completion times")
    wall = later["wall_ms"].to_numpy(dtype=float)
    periods = total(rounds["d_nr_periods"])
    throttled = total(rounds["d_nr_throttled"])
    throttled_us = total(rounds["d_throttled_usec"])
    if later["d_throttled_usec"].isna().any():
        over_wall = math.nan
    else:
        over_wall = float(stats.quantile(later["d_throttled_usec"].to_numpy(dtype=float) / USEC_PER_MS / wall, 0.5))
    # Without a quota the kernel counts no periods, and nothing can be throttled:
    # the lab's own tables show 0 there, so 0 / 0 is reported as 0.
    ratio = throttled / periods if periods > 0 else (0.0 if throttled == 0 else math.nan)
    elapsed = float(summary["elapsed_s"])
    wall_periods = elapsed / (period_us / 1e6) if period_us and period_us > 0 else math.nan
    avg_cores = summary.get("avg_cores")
    later_throttled = later["d_throttled_usec"]
    per_round = math.nan if later_throttled.isna().any() else float(later_throttled.astype(float).mean()) / USEC_PER_MS
    later_counts = later["d_nr_throttled"]
    throttled_rounds = math.nan if later_counts.isna().any() else float((later_counts.astype(float) > 0).mean())
    # the distinct CPUs the round's threads mainly ran on (the workload's getcpu readings): absent or empty in
    # logs that predate them
    if "thread_cpus" not in later or later["thread_cpus"].isna().any():
        two_queues = math.nan
    else:
        two_queues = float((later["thread_cpus"] >= 2).mean())
    # the kernel counts a burst at the refill after it, after the round's own second reading: the
    # summary's totals hold them, so these are per round of the whole run (docs/RECORDS.md)
    bursts, burst_us = number(summary.get("nr_bursts")), number(summary.get("burst_usec"))
    return {
        "p50_wall_ms": float(stats.quantile(wall, 0.5)),
        "max_wall_ms": float(wall.max()),
        "mean_wall_ms": float(wall.mean()),
        "throttled_ms_per_round": per_round,
        "throttled_per_round": total(later["d_nr_throttled"]) / len(later),
        "throttled_round_share": throttled_rounds,
        "two_queue_share": two_queues,
        "bursts_per_round": bursts / len(rounds),
        "burst_ms_per_round": burst_us / USEC_PER_MS / len(rounds),
        # the whole run's Δnr_periods (the summary's, before the first round to after the last): the
        # rounds' own deltas stop when the burst ends and miss the idle period the kernel counts after it
        "periods_per_round": _run_periods(summary, periods) / len(rounds),
        "throttled_ratio": ratio,
        "nr_periods": periods,
        "nr_throttled": throttled,
        "throttled_ms": throttled_us / USEC_PER_MS,
        "throttled_over_wall": over_wall,
        "avg_cores": math.nan if avg_cores is None else float(avg_cores),
        "periods_per_wall_period": periods / wall_periods if wall_periods > 0 else math.nan,
    }


def spin_metrics(summary: Mapping[str, Any], gomaxprocs: int) -> dict[str, float]:
    """S1 metrics of one spin process: the summary's totals and the GOMAXPROCS it ran with."""
    return {
        "gomaxprocs": float(gomaxprocs),
        "nr_throttled": number(summary.get("nr_throttled")),
        "throttled_ms": number(summary.get("throttled_usec")) / USEC_PER_MS,
        "avg_cores": number(summary.get("avg_cores")),
        "nr_periods": number(summary.get("nr_periods")),
    }


def gomaxprocs_metrics(header: Mapping[str, Any]) -> dict[str, float]:
    """E3 metrics of one `info` process: what Go chose, what the rule predicts, the CPUs it saw."""
    return {
        "gomaxprocs": float(header["gomaxprocs"]),
        "expected_gomaxprocs": number(header.get("expected_gomaxprocs")),
        "num_cpu": float(header["num_cpu"]),
    }


def _process(headers: pd.DataFrame | None, command: str) -> pd.Series:
    return exactly_one(None if headers is None else headers[headers["command"] == command], f"{command} process").iloc[
        0
    ]


def pods_burst_metrics(parts: Mapping[str, pd.DataFrame | None]) -> dict[str, float]:
    """X4: E2a's metrics of each pod's burst process, averaged over the run's pods (one value per run)."""
    headers, summaries, rounds = parts["headers"], parts["summaries"], parts["rounds"]
    bursts = pd.DataFrame() if headers is None else headers[headers["command"] == "burst"]
    if bursts.empty:
        raise InputError("no burst process in the run")
    per_pod = []
    for header in bursts.to_dict("records"):
        summary = exactly_one(summaries[summaries["src"] == header["src"]], f"{header['src']} burst summary").iloc[0]
        period = header["cg_period_us"]
        per_pod.append(
            burst_metrics(
                rounds[rounds["src"] == header["src"]],
                summary.to_dict(),
                math.nan if pd.isna(period) else float(period),
            )
        )
    # counts add up over the pods (the throttled share is their ratio); everything else is the pods' mean
    out = {key: float(sum(m[key] for m in per_pod) / len(per_pod)) for key in per_pod[0]}
    for key in ("nr_periods", "nr_throttled", "throttled_ms"):
        out[key] = float(sum(m[key] for m in per_pod))
    out["throttled_ratio"] = throttled_ratio(out["nr_throttled"], out["nr_periods"])
    return out


def job_run_metrics(experiment: Experiment, parts: Mapping[str, pd.DataFrame | None]) -> dict[str, float]:
    """The metrics of a job's run, of the kind its catalogue row says: its one burst process (E2a, X1-X3),
    the burst process of each of its pods (X4), its spin (S1) or its info (E3)."""
    headers, summaries = parts["headers"], parts["summaries"]
    kind = experiment.metrics
    if kind == "burst":
        header = _process(headers, "burst")
        summary = exactly_one(summaries[summaries["src"] == header["src"]], "burst summary").iloc[0]
        rounds = parts["rounds"]
        rounds = rounds[rounds["src"] == header["src"]]
        period = header["cg_period_us"]
        return burst_metrics(rounds, summary.to_dict(), math.nan if pd.isna(period) else float(period))
    if kind == "pods_burst":
        return pods_burst_metrics(parts)
    if kind == "spin":
        header = _process(headers, "spin")
        summary = exactly_one(summaries[summaries["src"] == header["src"]], "spin summary").iloc[0]
        return spin_metrics(summary.to_dict(), int(header["gomaxprocs"]))
    if kind == "gomaxprocs":
        return gomaxprocs_metrics(_process(headers, "info").to_dict())
    raise ValueError(f"{experiment.id}: metrics {kind!r} are not a job's (model/catalogue.py METRIC_KINDS)")
