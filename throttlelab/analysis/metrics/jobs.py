"""Per-run metrics (metrics.csv) and their estimates across repeats (estimates.csv).

The run is the unit of replication (shared/STATS.md §1): every metric here is
ONE number per run, and the estimates across repeats come from
:func:`throttlelab.analysis.stats.estimate` on those numbers, never from pooled rounds or
requests. Latencies and completion times are estimated on the log scale
(geometric mean, asymmetric interval); quantities that can be 0 (counts,
throttled time, ratios) on the linear scale.

Which metrics each experiment has is docs/TABLES.md; :data:`CATALOGUE` gives
each its unit, scale and kind of summary.
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from throttlelab.analysis import service_metrics, stats
from throttlelab.analysis.tidy import ENDPOINTS, RUN_KEYS, InputError

Scale = Literal["log", "linear"]
#: interval: a Student t interval across runs; range: min..max of the per-run
#: values, never a CI (STATS.md §2 for maxima); setting: a value the run reads
#: back rather than measures (GOMAXPROCS), the same in every run or flagged.
Summary = Literal["interval", "range", "setting"]

FLAG_RANGE = "range, not a CI"
FLAG_SETTING_VARIES = "differs between runs"
FLAG_UNDEFINED = "undefined"

METRICS_COLUMNS = [*RUN_KEYS, "metric", "value", "unit"]
ESTIMATES_COLUMNS = [
    "backend", "experiment", "variant", "metric", "unit", "point", "lo", "hi", "n", "level", "scale", "method", "flag",
]


@dataclass(frozen=True)
class MetricSpec:
    """What a per-run metric is, and how it is summarised across runs."""

    name: str
    unit: str
    scale: Scale
    summary: Summary
    about: str


def _latency_specs() -> list[MetricSpec]:
    specs = []
    for ep in ENDPOINTS:
        for q in ("p50", "p90", "p99", "p99_9"):
            specs.append(MetricSpec(f"{ep}_{q}_ms", "ms", "log", "interval",
                                    f"{q.replace('_', '.')} latency of /{ep} from the scheduled send, ok requests"))
        specs += [
            MetricSpec(f"{ep}_max_ms", "ms", "log", "range", f"slowest ok /{ep} request of the run"),
            MetricSpec(f"{ep}_requests", "count", "linear", "interval", f"/{ep} requests measured"),
            MetricSpec(f"{ep}_errors", "count", "linear", "interval", f"/{ep} requests that failed"),
        ]
    specs.append(MetricSpec("late_p99_ms", "ms", "linear", "interval",
                            "p99 of send lateness (actual minus scheduled send): the generator's health"))
    return specs


# The members E5/E10 compare (experiments/weights.py): pods, then the two-container pod's containers.
SHARE_MEMBERS = ("pod-p100m", "pod-p1", "pod-two", "small", "big")


def _share_specs() -> list[MetricSpec]:
    return [MetricSpec(f"share_{m}", "share", "linear", "interval",
                       f"{m}'s share of the one contended CPU: mean over the readings of its usage / all members'")
            for m in SHARE_MEMBERS]


CATALOGUE: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in [
        MetricSpec("p50_wall_ms", "ms", "log", "interval", "median burst completion time, rounds after the first"),
        MetricSpec("max_wall_ms", "ms", "log", "range", "slowest burst, rounds after the first"),
        MetricSpec("throttled_ratio", "ratio", "linear", "interval",
                   "throttled periods / active periods (0 when no period was counted)"),
        MetricSpec("nr_periods", "count", "linear", "interval", "CFS periods counted (active periods only)"),
        MetricSpec("nr_throttled", "count", "linear", "interval", "CFS periods in which the cgroup was throttled"),
        MetricSpec("throttled_ms", "ms", "linear", "interval",
                   "throttled time, summed over CPUs; can exceed wall time"),
        MetricSpec("throttled_over_wall", "ratio", "linear", "interval",
                   "median over rounds after the first of throttled ms / wall ms"),
        MetricSpec("avg_cores", "cores", "linear", "interval", "CPU used / elapsed time"),
        MetricSpec("periods_per_wall_period", "ratio", "linear", "interval",
                   "nr_periods / (elapsed / period): 1 if every wall-clock period were counted"),
        MetricSpec("gomaxprocs", "procs", "linear", "setting", "GOMAXPROCS the Go runtime chose"),
        MetricSpec("expected_gomaxprocs", "procs", "linear", "setting", "GOMAXPROCS the SPEC rule predicts"),
        MetricSpec("num_cpu", "cpus", "linear", "setting", "runtime.NumCPU(): CPUs the process may use"),
        *_latency_specs(),
        *_share_specs(),
        *(MetricSpec(*spec) for spec in service_metrics.SPECS),
        MetricSpec("readback_levels", "levels", "linear", "setting", "cgroup levels the backend wrote and read back"),
        MetricSpec("readback_levels_ok", "levels", "linear", "setting",
                   "levels whose read-back values equal the SPEC §2 design"),
    ]
}

USEC_PER_MS = 1000.0


# --------------------------------------------------------------------------
# per-run metrics (pure functions of one run's rows)


def _total(column: pd.Series) -> float:
    """Sum of a counter column; NaN when any value is missing (never a partial sum)."""
    if column.isna().any():
        return math.nan
    return float(column.sum())


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
    periods = _total(rounds["d_nr_periods"])
    throttled = _total(rounds["d_nr_throttled"])
    throttled_us = _total(rounds["d_throttled_usec"])
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
    return {
        "p50_wall_ms": float(stats.quantile(wall, 0.5)),
        "max_wall_ms": float(wall.max()),
        "throttled_ratio": ratio,
        "nr_periods": periods,
        "nr_throttled": throttled,
        "throttled_ms": throttled_us / USEC_PER_MS,
        "throttled_over_wall": over_wall,
        "avg_cores": math.nan if avg_cores is None else float(avg_cores),
        "periods_per_wall_period": periods / wall_periods if wall_periods > 0 else math.nan,
    }


def _number(value: Any) -> float:
    """A summary value as float; null / missing -> NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.nan
    return float(value)


def spin_metrics(summary: Mapping[str, Any], gomaxprocs: int) -> dict[str, float]:
    """S1 metrics of one spin process: the summary's totals and the GOMAXPROCS it ran with."""
    return {
        "gomaxprocs": float(gomaxprocs),
        "nr_throttled": _number(summary.get("nr_throttled")),
        "throttled_ms": _number(summary.get("throttled_usec")) / USEC_PER_MS,
        "avg_cores": _number(summary.get("avg_cores")),
        "nr_periods": _number(summary.get("nr_periods")),
    }


def gomaxprocs_metrics(header: Mapping[str, Any]) -> dict[str, float]:
    """E3 metrics of one `info` process: what Go chose, what the rule predicts, the CPUs it saw."""
    return {
        "gomaxprocs": float(header["gomaxprocs"]),
        "expected_gomaxprocs": _number(header.get("expected_gomaxprocs")),
        "num_cpu": float(header["num_cpu"]),
    }


def latency_metrics(requests: pd.DataFrame) -> dict[str, float]:
    """Per-run latency metrics of one load run (RECORDS.md `req`), per endpoint.

    Quantiles cover successful requests only (as the workload's own summary
    does); failures are counted in ``<ep>_errors``. ``<ep>_p99_9_ms`` is NaN
    when the run holds fewer than :data:`stats.P999_MIN_SAMPLES` of them.
    """
    out: dict[str, float] = {}
    for ep in ENDPOINTS:
        mine = requests[requests["ep"] == ep]
        ok = mine.loc[mine["ok"].astype(bool), "lat_ms"].to_numpy(dtype=float)
        summary = stats.run_latency_summary(ok) if ok.size else {}
        for q in ("p50", "p90", "p99", "p99_9", "max"):
            out[f"{ep}_{q}_ms"] = float(summary.get(q, math.nan))
        out[f"{ep}_requests"] = float(len(mine))
        out[f"{ep}_errors"] = float(len(mine) - ok.size)
    late = requests["late_ms"].to_numpy(dtype=float)
    out["late_p99_ms"] = float(stats.quantile(late, 0.99)) if late.size else math.nan
    return out


# --------------------------------------------------------------------------
# all runs -> metrics.csv


def _by_run(frame: pd.DataFrame) -> dict[tuple[Any, ...], pd.DataFrame]:
    if frame.empty:
        return {}
    return {key: group for key, group in frame.groupby(list(RUN_KEYS), sort=False)}


def _one(frame: pd.DataFrame | None, what: str) -> pd.DataFrame:
    if frame is None or len(frame) != 1:
        found = 0 if frame is None else len(frame)
        raise InputError(f"expected exactly one {what}, found {found}")
    return frame


def _run_metrics(experiment: str, parts: Mapping[str, pd.DataFrame | None]) -> dict[str, float]:
    headers, summaries = parts["headers"], parts["summaries"]
    if experiment == "E2a":
        burst_headers = _one(None if headers is None else headers[headers["command"] == "burst"], "burst process")
        header = burst_headers.iloc[0]
        summary = _one(summaries[summaries["src"] == header["src"]], "burst summary").iloc[0]
        rounds = parts["rounds"]
        rounds = rounds[rounds["src"] == header["src"]]
        period = header["cg_period_us"]
        return burst_metrics(rounds, summary.to_dict(), math.nan if pd.isna(period) else float(period))
    if experiment == "S1":
        header = _one(None if headers is None else headers[headers["command"] == "spin"], "spin process").iloc[0]
        summary = _one(summaries[summaries["src"] == header["src"]], "spin summary").iloc[0]
        return spin_metrics(summary.to_dict(), int(header["gomaxprocs"]))
    if experiment == "E3":
        header = _one(None if headers is None else headers[headers["command"] == "info"], "info process").iloc[0]
        return gomaxprocs_metrics(header.to_dict())
    if experiment == "E4":
        return readback_metrics(parts["readback"])
    if experiment in ("E5", "E10"):
        samples = parts["share_samples"]
        if samples is None or samples.empty:
            raise InputError("no share readings")
        return share_metrics(samples)
    if experiment in service_metrics.SERVICE_EXPERIMENTS:
        return service_metrics.service_run_metrics(experiment, parts)
    return {}


def readback_metrics(readback: pd.DataFrame | None) -> dict[str, float]:
    """How many designed levels were read back equal to the design (ancestors are not designed)."""
    if readback is None:
        raise InputError("no readback rows")
    designed = readback[~readback["level"].isin(["run-root", "host-root"])]
    ok = designed["mismatches"].fillna("").astype(str).str.len() == 0
    return {"readback_levels": float(len(designed)), "readback_levels_ok": float(ok.sum())}


def share_metrics(samples: pd.DataFrame) -> dict[str, float]:
    """Each member's share of the contended CPU, averaged over consecutive readings.

    A reading is the usage each member gained between two samples; its share is
    that gain over the gain of all members together (the lab's "last three 10 s
    readings", averaged).
    """
    wide = samples.pivot_table(index="t_s", columns="member", values="usage_usec", aggfunc="first").sort_index()
    if wide.isna().any().any():
        return {f"share_{m}": math.nan for m in wide.columns}
    gains = wide.diff().iloc[1:]
    totals = gains.sum(axis=1)
    if len(gains) == 0 or (totals <= 0).any():
        raise InputError("share readings show no CPU used between samples")
    shares = gains.div(totals, axis=0).mean()
    unknown = set(shares.index) - set(SHARE_MEMBERS)
    if unknown:
        raise InputError(f"unknown share members {sorted(unknown)} (metrics.SHARE_MEMBERS lists the known ones)")
    return {f"share_{m}": float(v) for m, v in shares.items()}


def run_metrics(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """metrics.csv: one row per (run, metric), in long form with the unit beside the value."""
    grouped = {name: _by_run(tables[name])
               for name in ("headers", "summaries", "rounds", "requests", "readback", "share_samples")}
    # the service experiments' tables (service_metrics.py); absent in inputs that predate them
    grouped.update({name: _by_run(tables[name]) for name in ("podstats", "target_stats") if name in tables})
    rows = []
    for run in tables["runs"][list(RUN_KEYS)].itertuples(index=False, name=None):
        parts = {name: groups.get(run) for name, groups in grouped.items()}
        try:
            values = _run_metrics(run[1], parts)
        except InputError as exc:
            raise InputError(f"run {'/'.join(map(str, run))}: {exc}") from None
        if parts["requests"] is not None:
            values.update(latency_metrics(parts["requests"]))
        rows += [(*run, name, value, CATALOGUE[name].unit) for name, value in values.items()]
    frame = pd.DataFrame.from_records(rows, columns=METRICS_COLUMNS)
    return frame.astype({"repeat": "int64", "value": "float64"})


# --------------------------------------------------------------------------
# across repeats -> estimates.csv


@dataclass(frozen=True)
class Summarised:
    """One row of estimates.csv, before the identifiers are added."""

    point: float
    lo: float
    hi: float
    n: int
    scale: Scale
    method: str
    flag: str


def _quietly(fn: Callable[[], stats.Estimate]) -> stats.Estimate:
    """Run a stats call whose DegenerateWarning is already carried by the returned flag."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateWarning)
        return fn()


def summarise(values: np.ndarray, spec: MetricSpec, level: float) -> Summarised:
    """Point and interval (or range, or setting) of one metric over one variant's runs."""
    n = int(values.size)
    missing = int(np.isnan(values).sum())
    if missing:
        # A metric the run could not define (a counter that was unreadable) is not
        # estimated from the other runs: that would silently drop runs.
        return Summarised(math.nan, math.nan, math.nan, n, spec.scale,
                          f"{spec.name} undefined in {missing} of {n} runs", FLAG_UNDEFINED)
    if spec.summary == "range":
        return Summarised(float(stats.quantile(values, 0.5)), float(values.min()), float(values.max()), n, "linear",
                          f"median and range of per-run {spec.name}, R = {n} (a maximum gets no CI)", FLAG_RANGE)
    if spec.summary == "setting":
        if np.ptp(values) == 0:
            runs = "the one run" if n == 1 else f"all {n} runs"
            return Summarised(float(values[0]), math.nan, math.nan, n, "linear", f"read back, identical in {runs}", "")
        return Summarised(float(stats.quantile(values, 0.5)), float(values.min()), float(values.max()), n, "linear",
                          f"read back; median and range over {n} runs", FLAG_SETTING_VARIES)
    est = _quietly(lambda: stats.estimate(values, log=spec.scale == "log", level=level, label=f"per-run {spec.name}"))
    return Summarised(est.point, est.lo, est.hi, est.n, est.scale, est.method, est.flag)


def pooled_p999(latency_runs: list[np.ndarray], level: float, rng: np.random.Generator) -> Summarised:
    """p99.9 from runs too short for their own: pooled, with whole runs resampled (STATS.md §2)."""
    est = _quietly(lambda: stats.cluster_bootstrap_quantile(latency_runs, 0.999, rng=rng, level=level))
    return Summarised(est.point, est.lo, est.hi, est.n, est.scale, est.method, est.flag)


def _group_seed(seed: int, key: tuple[Any, ...]) -> np.random.Generator:
    """A generator per (experiment, variant, metric): the same numbers whatever else is in the table."""
    return np.random.default_rng([seed, zlib.crc32("/".join(map(str, key)).encode())])


def _ok_latencies(requests: pd.DataFrame, ep: str) -> list[np.ndarray]:
    mine = requests[(requests["ep"] == ep) & requests["ok"].astype(bool)]
    return [group["lat_ms"].to_numpy(dtype=float) for _, group in mine.groupby(list(RUN_KEYS), sort=True)]


def estimates_table(metrics: pd.DataFrame, requests: pd.DataFrame | None, *, level: float, seed: int) -> pd.DataFrame:
    """estimates.csv: one row per (experiment, variant, metric) across that variant's runs."""
    requests_by_variant = {}
    if requests is not None and not requests.empty:
        requests_by_variant = dict(iter(requests.groupby(["backend", "experiment", "variant"], sort=False)))
    rows = []
    keys = ["backend", "experiment", "variant", "metric"]
    for key, group in metrics.groupby(keys, sort=False):
        backend, experiment, variant, metric = key
        spec = CATALOGUE[metric]
        values = group.sort_values("repeat")["value"].to_numpy(dtype=float)
        runs = []
        if metric.endswith("_p99_9_ms") and np.isnan(values).any():
            variant_requests = requests_by_variant.get((backend, experiment, variant))
            ep = metric.split("_", 1)[0]
            runs = [] if variant_requests is None else _ok_latencies(variant_requests, ep)
        if runs and len(runs) == len(values):
            # Runs too short for their own p99.9 (STATS.md §2); every run must contribute.
            row = pooled_p999(runs, level, _group_seed(seed, key))
        else:
            row = summarise(values, spec, level)
        rows.append((*key, spec.unit, row.point, row.lo, row.hi, row.n, level, row.scale, row.method, row.flag))
    frame = pd.DataFrame.from_records(rows, columns=ESTIMATES_COLUMNS)
    return frame.astype({"point": "float64", "lo": "float64", "hi": "float64", "n": "int64", "level": "float64"})
