"""The statistics the report prints that no other table holds, computed here so the page only renders.

Four tables, written by `throttlelab stats` (the rule compute_stats) beside metrics.csv and
estimates.csv (docs/TABLES.md):

* ``contrasts.csv``: the comparisons of two variants the report's notes print (:data:`CONTRASTS`:
  S2's closed-loop throughput with fewer threads, E2b's open-loop tail with Go's minimum of 2
  threads): the ratio of geometric means of a per-run metric with its interval
  (:func:`stats.compare` on the log scale), the runs on each side, or in ``note`` why there is none;
* ``interference.csv``: one row over all runs of runs.csv, the spread of the host interference the
  runner measured (other processes' share of the run's CPUs: min and max; the orchestrator's CPU per
  window: median, p95 and max);
* ``load_generator.csv``: one row per run driven by the load generator, its send lateness p99 and /work
  errors from metrics.csv, and whether it is suspect (:func:`services_metrics.suspect`: the generator,
  not the service, may have set its latencies), with the bar it was judged by;
* ``setup.csv``: one row naming the run as a whole, the way a comparison of several runs heads its column:
  the backend and the profile, the runtime and its versions, the cgroup version, the kernel, the CPUs and
  the confidence level (:func:`setup_table`, from environment.csv and runs.csv).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from throttlelab.analysis import stats
from throttlelab.analysis import tidy
from throttlelab.analysis.metrics.services_metrics import (
    LATENESS_SUSPECT_MS,
    WindowQuantile,
    compared_window,
    suspect,
)
from throttlelab.model.variants import (
    E2B_CLUMPED_LIMIT,
    E2B_CLUMPED_LIMIT_GO125,
    S2_THREADS_NODE,
    S2_THREADS_ONE,
)

CONTRAST_COLUMNS = [
    "experiment", "variant", "baseline", "metric", "effect", "lo", "hi", "n", "n_baseline", "level", "note",
]  # fmt: skip
INTERFERENCE_COLUMNS = [
    "runs", "other_share_min", "other_share_max",
    "orchestrator_cpu_median", "orchestrator_cpu_p95", "orchestrator_cpu_max",
    "runtime_cpu_median", "runtime_cpu_p95", "runtime_cpu_max",
    "kernel_cpu_median", "kernel_cpu_p95", "kernel_cpu_max",
]  # fmt: skip
LOAD_GENERATOR_COLUMNS = [
    "backend", "experiment", "variant", "repeat", "late_p99_ms", "work_errors", "suspect_above_ms", "suspect",
]  # fmt: skip
SETUP_COLUMNS = [
    "backend", "profile", "runtime", "runtime_version", "runtime_conversion", "cgroup_version", "kernel",
    "cpus", "usable_cpus", "cpu_model", "confidence", "runs", "start", "end",
]  # fmt: skip
#: E2b's tail: what the independent clumps of both arms' windows support (docs/STATISTICS.md §2), the statistic
#: a latency check would compare them at; p99 where the design fixes no count of clumps.
SUPPORTED_LATENCY = "supported /work latency quantile"


@dataclass(frozen=True)
class Contrast:
    """``variant`` against ``baseline`` on one per-run metric of ``experiment`` (ratio of geometric means)."""

    experiment: str
    variant: str
    baseline: str
    metric: str

    def metric_of(self, runs: pd.DataFrame) -> str:
        """The per-run metric compared: ``metric``, or for :data:`SUPPORTED_LATENCY` the statistic the two arms'
        windows support (their parameters, from runs.csv)."""
        if self.metric != SUPPORTED_LATENCY:
            return self.metric
        window = self.window_of(runs)
        return window.metric() if window is not None else "work_p99_ms"

    def shown_of(self, runs: pd.DataFrame) -> str:
        """The compared metric in words, as the findings and figures name it: "p75", "max over 5 clumps"."""
        window = self.window_of(runs)
        if window is not None:
            return window.shown
        return self.metric_of(runs).removeprefix("work_").removesuffix("_ms").replace("_", ".")

    def window_of(self, runs: pd.DataFrame) -> WindowQuantile | None:
        """For :data:`SUPPORTED_LATENCY`, what the two arms' windows support; None for any other metric, or
        where either arm has no open-loop window in runs.csv."""
        if self.metric != SUPPORTED_LATENCY:
            return None
        specs = tidy.variant_specs(runs, self.experiment)
        return compared_window({v: specs[v] for v in (self.variant, self.baseline) if v in specs})


#: The contrasts the report's notes print (report/notes.py: where S2 and E2b disagree on fewer threads).
CONTRASTS = (
    Contrast("S2", S2_THREADS_ONE, S2_THREADS_NODE, "throughput_rps"),
    Contrast("E2b", E2B_CLUMPED_LIMIT_GO125, E2B_CLUMPED_LIMIT, SUPPORTED_LATENCY),
)


def contrast_row(metrics: pd.DataFrame, runs: pd.DataFrame, contrast: Contrast, level: float) -> dict:
    """One row of contrasts.csv: the ratio and its interval, or why there is none (``note``)."""
    metric = contrast.metric_of(runs)

    def values(variant: str) -> np.ndarray:
        rows = metrics[
            (metrics["experiment"] == contrast.experiment)
            & (metrics["variant"] == variant)
            & (metrics["metric"] == metric)
        ]
        return rows["value"].dropna().to_numpy(dtype=float)

    a, b = values(contrast.variant), values(contrast.baseline)
    row = {
        "experiment": contrast.experiment, "variant": contrast.variant, "baseline": contrast.baseline,
        "metric": metric, "effect": np.nan, "lo": np.nan, "hi": np.nan, "n": len(a), "n_baseline": len(b),
        "level": level, "note": "",
    }  # fmt: skip
    if len(a) == 0 or len(b) == 0:
        missing = contrast.variant if len(a) == 0 else contrast.baseline
        row["note"] = f"not measured: this profile has no {contrast.experiment} {missing} (its section says why)"
    elif min(a.min(), b.min()) <= 0:
        row["note"] = "undefined (a run measured 0)"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateWarning)
            cmp = stats.compare(a, b, log=True, level=level, label=f"per-run {metric}")
        row.update(effect=cmp.effect, lo=cmp.lo, hi=cmp.hi)
    return row


def contrasts_table(metrics: pd.DataFrame, runs: pd.DataFrame, level: float) -> pd.DataFrame:
    """contrasts.csv: one row per contrast of :data:`CONTRASTS`, measured or not."""
    rows = [contrast_row(metrics, runs, contrast, level) for contrast in CONTRASTS]
    return pd.DataFrame.from_records(rows, columns=CONTRAST_COLUMNS)


def interference_table(runs: pd.DataFrame) -> pd.DataFrame:
    """interference.csv: the spread of the host interference over all runs (empty cells where the
    raw logs predate the meter or its orchestrator column)."""
    shares = runs["other_share"].dropna() if "other_share" in runs.columns else pd.Series(dtype=float)
    row: dict[str, float] = {
        "runs": len(runs),
        "other_share_min": shares.min() if len(shares) else np.nan,
        "other_share_max": shares.max() if len(shares) else np.nan,
    }
    for who in ("orchestrator", "runtime", "kernel"):
        cpu = runs[f"{who}_cpu"].dropna() if f"{who}_cpu" in runs.columns else pd.Series(dtype=float)
        row[f"{who}_cpu_median"] = cpu.median() if len(cpu) else np.nan
        row[f"{who}_cpu_p95"] = cpu.quantile(0.95) if len(cpu) else np.nan
        row[f"{who}_cpu_max"] = cpu.max() if len(cpu) else np.nan
    return pd.DataFrame.from_records([row], columns=INTERFERENCE_COLUMNS)


def load_generator_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """load_generator.csv: every run of an experiment with send lateness (its ``late_p99_ms``), in the order of
    metrics.csv, with its /work errors and whether its lateness p99 makes it suspect."""
    rows = []
    load = metrics[metrics["metric"].isin(["late_p99_ms", "work_errors"])]
    for experiment, mine in load.groupby("experiment", sort=False):
        if not (mine["metric"] == "late_p99_ms").any():
            continue
        wide = mine.pivot_table(
            index=["backend", "variant", "repeat"], columns="metric", values="value", aggfunc="first", sort=False
        )
        for (backend, variant, repeat), values in wide.iterrows():
            late = float(values.get("late_p99_ms", np.nan))
            rows.append(
                {
                    "backend": backend,
                    "experiment": experiment,
                    "variant": variant,
                    "repeat": int(repeat),
                    "late_p99_ms": late,
                    "work_errors": float(values.get("work_errors", np.nan)),
                    "suspect_above_ms": LATENESS_SUSPECT_MS,
                    "suspect": suspect(late),
                }
            )
    return pd.DataFrame.from_records(rows, columns=LOAD_GENERATOR_COLUMNS)


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return ""
    return str(value).strip()


def runtime_of(environment: dict[str, object]) -> tuple[str, str]:
    """(runtime, its versions) of one run from its environment.csv row: a cluster node's container runtime
    (``containerd://2.3.4``) with its runc and kubelet, the docker engine's versions, or, on the local and vm
    backends, no runtime at all (the lab writes the cgroups itself, as the runtime conversion says runc would)."""
    node_runtime = _cell(environment.get("env.container_runtime"))
    if node_runtime:
        name, _, version = node_runtime.partition("://")
        parts = [f"{name} {version}".strip()]
        parts += [
            f"{label} {_cell(environment.get(key))}"
            for key, label in (("env.runc", "runc"), ("env.kubelet", "kubelet"))
            if _cell(environment.get(key))
        ]
        return name, ", ".join(parts)
    versions = {
        key.removeprefix("env.versions."): _cell(value)
        for key, value in environment.items()
        if key.startswith("env.versions.") and _cell(value)
    }
    if versions:
        name = "docker" if "Docker engine" in versions else next(iter(versions))
        return name, ", ".join(f"{key} {value}" for key, value in versions.items())
    conversion = _cell(environment.get("runtime_conversion"))
    return "none (cgroups written by the lab)", f"as {conversion} converts" if conversion else ""


def _joined(values: Iterable[object]) -> str:
    """One value, or every distinct value in order of appearance joined with ' / ' (runs that did not agree)."""
    seen = list(dict.fromkeys(v for v in (_cell(v) for v in values) if v))
    return " / ".join(seen)


def setup_table(environment: pd.DataFrame, runs: pd.DataFrame, profile: str, confidence: float) -> pd.DataFrame:
    """setup.csv: one row over every run of environment.csv (a value that differs between runs lists each)."""
    rows = environment.to_dict("records")
    runtimes = [runtime_of(row) for row in rows]
    counts = environment["cpu_count"] if "cpu_count" in environment.columns else pd.Series(dtype=object)
    row = {
        "backend": _joined(environment.get("backend", runs.get("backend", pd.Series(dtype=object)))),
        "profile": profile,
        "runtime": _joined(r[0] for r in runtimes),
        "runtime_version": _joined(r[1] for r in runtimes),
        "runtime_conversion": _joined(environment.get("runtime_conversion", [])),
        "cgroup_version": _joined(environment.get("cgroup_version", [])),
        "kernel": _joined(environment.get("kernel", [])),
        "cpus": _joined(counts),
        "usable_cpus": _joined(environment.get("usable_cpus", [])),
        "cpu_model": _joined(environment.get("cpu_model", [])),
        "confidence": confidence,
        "runs": len(runs),
        "start": min(runs["start"].astype(str)) if len(runs) else "",
        "end": max(runs["end"].astype(str)) if len(runs) else "",
    }
    return pd.DataFrame.from_records([row], columns=SETUP_COLUMNS)
