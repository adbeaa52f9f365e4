"""Per-run metrics of the service experiments E2b, E7, E8, S2, ours X5 and X6, and of E6 (docs/TABLES.md).

Pure functions of one run's tidy rows:

* every run with `req` records (a load generator) gets latency metrics per
  endpoint, and its send lateness (the generator's health);
* counters of a service come from the load generator's /stats readings of its
  targets at the start and the end of the measured window (``target_stats``),
  summed over the targets (E7's replicas), as the lab read them;
* counters of pods that are not targets (E8's neighbor, S2's upstream) and the
  service's CPU while requests were waiting (E8) come from the runner's
  ``podstats`` readings, restricted to the window;
* E6 compares what a scraper computes from two cached readings with the
  measured extra completion time (the job's median round minus the median
  round of the same burst without a limit, in the same run); the readings come
  from the kubelet's real cAdvisor (kind, kubernetes) or its emulation (local,
  docker), and both are treated alike: rates over the readings' own time
  difference. ``scrapes_cadvisor`` says which it was.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from throttlelab.analysis import stats
from throttlelab.analysis.metrics.common import COUNTERS, USEC_PER_MS, MetricSpec, number, throttled_ratio
from throttlelab.analysis.tidy import ENDPOINTS, InputError
from throttlelab.model.catalogue import Experiment
from throttlelab.model.variants import VariantSpec

#: A run whose send lateness p99 exceeds this is suspect (load_generator.csv, which the report shows): the
#: generator, not the service, may have set its latencies.
LATENESS_SUSPECT_MS = 5.0
#: The client timeout of `cpulab load` when its header does not say (its default -timeout=10s, and
#: docs/LAB.md §3's "client timeout 10 s"); the runner passes it explicitly and the header's params record it.
DEFAULT_LOAD_TIMEOUT_MS = 10_000.0
#: The latency quantiles the service findings and figures may compare, highest first: the highest one the
#: clumps of the compared windows support (:func:`compared_window`).
SERVICE_QUANTILES = (0.99, 0.9, 0.75, 0.5)
#: What a window too short for even the lowest of them compares: its slowest request, the maximum over its clumps.
WINDOW_MAXIMUM = "max"
#: E6: the ``source`` of a scrape that read the kubelet's real cAdvisor (the other: "emulated").
SCRAPE_CADVISOR = "cadvisor"


def _latency_specs() -> list[MetricSpec]:
    specs = []
    for ep in ENDPOINTS:
        for q in ("p50", "p75", "p90", "p99", "p99_9"):
            specs.append(
                MetricSpec(
                    f"{ep}_{q}_ms",
                    "ms",
                    "log",
                    "interval",
                    f"{q.replace('_', '.')} latency of /{ep} from the scheduled send, failed requests at the client "
                    f"timeout; empty when the run holds fewer than {stats.min_samples(stats.QUANTILES[q]):,} requests",
                )
            )
        specs += [
            MetricSpec(
                f"{ep}_max_ms",
                "ms",
                "log",
                "range",
                f"slowest /{ep} request of the run (a failed one at the client timeout)",
            ),
            MetricSpec(f"{ep}_requests", "count", "linear", "interval", f"/{ep} requests measured"),
            MetricSpec(
                f"{ep}_errors",
                "count",
                "linear",
                "interval",
                f"/{ep} requests that failed or timed out (in the quantiles at the client timeout)",
            ),
        ]
    specs.append(
        MetricSpec(
            "late_p99_ms",
            "ms",
            "linear",
            "interval",
            "p99 of send lateness (actual minus scheduled send): the generator's health",
        )
    )
    return specs


#: Latency metrics of every run with `req` records.
LATENCY_SPECS: tuple[MetricSpec, ...] = tuple(_latency_specs())
#: The service experiments' own metrics.
SPECS: tuple[MetricSpec, ...] = tuple(
    MetricSpec(*spec)
    for spec in (
        ("gc_cycles", "count", "linear", "interval", "GC cycles of the service(s) in the window (/stats num_gc)"),
        ("work_rps", "req/s", "linear", "interval", "successful /work requests per second of the window"),
        ("throughput_rps", "req/s", "log", "interval", "closed loop: successful /work requests per second"),
        (
            "busiest_share",
            "share",
            "linear",
            "interval",
            "share of the measured /work requests served by the busiest replica (1/replicas if even)",
        ),
        (
            "busy_cores",
            "cores",
            "linear",
            "interval",
            "the service's CPU (cores) while it had /work requests outstanding, from pod counters read every few ms",
        ),
        ("neighbor_cores", "cores", "linear", "interval", "the neighbor pod's CPU over the window"),
        (
            "upstream_throttled_ratio",
            "ratio",
            "linear",
            "interval",
            "the upstream pod's throttled periods / active periods over the window (S2 cascade)",
        ),
        ("upstream_cores", "cores", "linear", "interval", "the upstream pod's CPU over the window (S2 cascade)"),
        ("calib_p50_wall_ms", "ms", "log", "interval", "median round of the same burst without a limit (E6)"),
        (
            "extra_ms_per_round",
            "ms",
            "linear",
            "interval",
            "median round under the limit minus median round without it: the real pause per round",
        ),
        ("pause_s_per_s", "s/s", "linear", "interval", "extra completion time per second of wall time"),
        (
            "throttled_s_per_s",
            "s/s",
            "linear",
            "interval",
            "rate of throttled seconds between two scrapes, divided by the readings' own time difference",
        ),
        (
            "throttled_s_per_s_naive",
            "s/s",
            "linear",
            "interval",
            "the same change divided by the time between the scrapes (the mistake the lab warns of)",
        ),
        (
            "throttled_ms_window",
            "ms",
            "linear",
            "interval",
            "throttled time between the two readings the scrapes returned (summed over run queues)",
        ),
        (
            "pause_ms_window",
            "ms",
            "linear",
            "interval",
            "the real pause inside the same window: each round's wall time minus the unlimited median round, "
            "for the part of the round that lies between the two readings",
        ),
        (
            "overstatement",
            "ratio",
            "log",
            "interval",
            "throttled_ms_window / pause_ms_window: the same window on both sides",
        ),
        (
            "scrape_throttled_ratio",
            "ratio",
            "linear",
            "interval",
            "throttled periods / counted periods between the scrapes (counts only active periods)",
        ),
        (
            "throttled_per_wall_period",
            "ratio",
            "linear",
            "interval",
            "throttled periods / wall-clock periods between the scrapes",
        ),
        ("sample_gap_s", "s", "linear", "interval", "time between the two readings the scrapes returned"),
        ("scrape_gap_s", "s", "linear", "interval", "time between the two scrapes"),
        (
            "scrapes_cadvisor",
            "scrapes",
            "linear",
            "setting",
            "how many of the two scrapes read the kubelet's real cAdvisor (kind, kubernetes: 2); 0 where cAdvisor is "
            "emulated (local, docker: the container's counters read every housekeeping_ms)",
        ),
    )
)


# --------------------------------------------------------------------------
# latencies of every run with requests (RECORDS.md `req`)


def latency_metrics(
    requests: pd.DataFrame, timeout_ms: float = DEFAULT_LOAD_TIMEOUT_MS
) -> tuple[dict[str, float], dict[str, str]]:
    """Per-run latency metrics of one load run (RECORDS.md `req`), per endpoint, and why some are empty.

    A failed or timed-out request (``ok`` false) enters the quantiles at the
    client timeout ``timeout_ms`` and is counted in ``<ep>_errors`` (docs/STATISTICS.md
    §2: the worst arms keep their tail). A quantile is empty when the run
    holds too few requests for it (:func:`stats.min_samples`: p99 needs 368);
    the second dict says why, per metric ("n too small for p99: 60 requests
    (needs 368)").
    """
    out: dict[str, float] = {}
    notes: dict[str, str] = {}
    for ep in ENDPOINTS:
        mine = requests[requests["ep"] == ep]
        summary = stats.run_latency_summary(
            mine["lat_ms"].to_numpy(dtype=float), ok=mine["ok"].to_numpy(dtype=bool), timeout_ms=timeout_ms
        )
        for q in ("p50", "p75", "p90", "p99", "p99_9", "max"):
            out[f"{ep}_{q}_ms"] = summary.values[q]
            if q in summary.notes:
                notes[f"{ep}_{q}_ms"] = f"/{ep}: {summary.notes[q]}"
        out[f"{ep}_requests"] = float(summary.n)
        out[f"{ep}_errors"] = float(summary.errors)
    late = requests["late_ms"].to_numpy(dtype=float)
    out["late_p99_ms"] = float(stats.quantile(late, 0.99)) if late.size else math.nan
    return out, notes


@dataclass(frozen=True)
class WindowQuantile:
    """What a window's per-run latency can show, from the design alone (docs/STATISTICS.md §2): ``q``, the
    highest of :data:`SERVICE_QUANTILES` that its ``clumps`` independent clumps support, or None: none is, and
    the window shows its maximum over them. ``requests``: the requests in those clumps."""

    clumps: int
    requests: int
    q: float | None

    @property
    def name(self) -> str:
        """ "p75", or "max" (:data:`WINDOW_MAXIMUM`)."""
        return WINDOW_MAXIMUM if self.q is None else stats.quantile_name(self.q)

    @property
    def shown(self) -> str:
        """What a check's label says: "p75", or "max over 5 clumps"."""
        return self.name if self.q is not None else f"{WINDOW_MAXIMUM} over {self.clumps} clumps"

    def metric(self, ep: str = "work") -> str:
        """The per-run metric it reads: ``work_p75_ms``, or ``work_max_ms``."""
        return f"{ep}_{self.name.replace('.', '_')}_ms"

    def higher(self) -> list[float]:
        """The quantiles above it that the clumps cannot support (all of them for the maximum)."""
        return [h for h in SERVICE_QUANTILES if self.q is None or h > self.q]

    def explain(self, ep: str = "work") -> str:
        """The choice in words, for a check's derivation: "p75 over 20 clumps: a p90 needs at least 36 (p99 368)
        ..." or "max over 5 clumps: a p50 needs at least 6 clumps (p75 13, p90 36, p99 368) ..."."""
        above = sorted(self.higher())
        need = ""
        if above:
            first, rest = above[0], above[1:]
            need = f": a {stats.quantile_name(first)} needs at least {stats.min_samples(first):,} clumps"
            if rest:
                need += " (" + ", ".join(f"{stats.quantile_name(h)} {stats.min_samples(h):,}" for h in rest) + ")"
        per = (
            f"{self.requests:,} /{ep} requests per run in {self.clumps} clumps of {self.requests // self.clumps}, "
            "an exact count by design"
        )
        if self.q is None:
            what = (
                f"each run shows its slowest request, the maximum over its {self.clumps} clumps (the same "
                "number in every run, so runs are alike and their maxima compare as any per-run value)"
            )
        else:
            what = f"the highest of {'/'.join(stats.quantile_name(h) for h in SERVICE_QUANTILES)} they support"
        return (
            f"{self.shown}{need}. The requests of a clump share its fate, so its clumps are a run's independent "
            f"draws and a q-quantile needs ceil(ln 0.025 / ln q) of them (docs/STATISTICS.md §2); {per}: {what}."
        )


def window_quantile(clumps: int, requests: int) -> WindowQuantile:
    """The statistic a window of ``clumps`` independent clumps holding ``requests`` requests supports (pure)."""
    if clumps < 1 or requests < clumps:
        raise ValueError(
            f"a window needs at least one clump and a request per clump, got {clumps} clumps and {requests} requests"
        )
    return WindowQuantile(clumps, requests, stats.clumps_quantile(clumps, SERVICE_QUANTILES))


def design_window_quantile(spec: VariantSpec, ep: str = "work") -> WindowQuantile | None:
    """What a variant's window supports, from its parameters alone (rate, clump, window): None for a closed loop
    or a window with no arrival in it."""
    clumps, requests = spec.window_clumps(ep), spec.window_requests(ep)
    if not clumps or not requests:
        return None
    return window_quantile(clumps, requests)


def compared_window(specs: Mapping[str, VariantSpec], ep: str = "work") -> WindowQuantile | None:
    """The statistic variants' latencies are compared at, from their parameters alone (docs/STATISTICS.md §2):
    what the window with the fewest independent clumps supports, the same for every variant, as the findings'
    latency checks compare them; None when a variant has no open-loop window or no clump in it."""
    windows = [design_window_quantile(spec, ep) for spec in specs.values()]
    if not windows or any(w is None for w in windows):
        return None
    return min(windows, key=lambda w: w.clumps)


# --------------------------------------------------------------------------
# counters of the load's targets (/stats before and after the window)


def target_deltas(target_stats: pd.DataFrame | None) -> dict[str, float]:
    """Counter changes over the window, summed over targets; NaN when any target lacks a reading."""
    if target_stats is None or target_stats.empty:
        raise InputError("no /stats readings of the load's targets (stats records)")
    out: dict[str, float] = {}
    before = target_stats[target_stats["when"] == "before"].set_index("target")
    after = target_stats[target_stats["when"] == "after"].set_index("target")
    targets = sorted(set(before.index) | set(after.index))
    for key in (*COUNTERS, "num_gc"):
        total = 0.0
        for t in targets:
            if t not in before.index or t not in after.index:
                total = math.nan
                break
            total += number(after.at[t, key]) - number(before.at[t, key])
        out[key] = total
    procs = pd.concat([before["gomaxprocs"], after["gomaxprocs"]]).dropna()
    out["gomaxprocs"] = float(procs.min()) if len(procs) else math.nan
    return out


def counter_metrics(deltas: Mapping[str, float], window_s: float) -> dict[str, float]:
    return {
        "throttled_ratio": throttled_ratio(deltas["nr_throttled"], deltas["nr_periods"]),
        "nr_periods": deltas["nr_periods"],
        "nr_throttled": deltas["nr_throttled"],
        "throttled_ms": deltas["throttled_usec"] / USEC_PER_MS,
        "avg_cores": deltas["usage_usec"] / 1e6 / window_s if window_s > 0 else math.nan,
        "gc_cycles": deltas["num_gc"],
        "gomaxprocs": deltas["gomaxprocs"],
    }


# --------------------------------------------------------------------------
# pod counters read by the runner (podstats)


def pod_samples(podstats: pd.DataFrame | None, pod: str, when: str = "sample") -> pd.DataFrame:
    if podstats is None:
        return pd.DataFrame(columns=["t_ms", *COUNTERS])
    rows = podstats[(podstats["pod"] == pod) & (podstats["when"] == when)]
    return rows.sort_values("t_ms")


def window_delta(samples: pd.DataFrame, window_ms: float) -> tuple[dict[str, float], float]:
    """Counter changes between the first reading at or after the window's start and the last
    at or before its end, and the seconds between those two readings."""
    inside = samples[(samples["t_ms"] >= 0) & (samples["t_ms"] <= window_ms)]
    if len(inside) < 2:
        raise InputError(f"fewer than two pod readings inside the {window_ms:g} ms window")
    first, last = inside.iloc[0], inside.iloc[-1]
    deltas = {k: number(last[k]) - number(first[k]) for k in COUNTERS}
    return deltas, (float(last["t_ms"]) - float(first["t_ms"])) / 1000


def busy_intervals(requests: pd.DataFrame) -> list[tuple[float, float]]:
    """Merged [start, end] (ms in the window) during which some /work request was outstanding."""
    work = requests[requests["ep"] == "work"]
    spans = sorted(zip(work["sched_ms"].astype(float), (work["sched_ms"] + work["lat_ms"]).astype(float)))
    merged: list[list[float]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def busy_cores(samples: pd.DataFrame, requests: pd.DataFrame, window_ms: float) -> float:
    """CPU the pod got (cores) over the sampling intervals that lie wholly inside a busy interval."""
    busy = busy_intervals(requests)
    t = samples["t_ms"].to_numpy(dtype=float)
    usage = samples["usage_usec"].to_numpy(dtype=float)
    used = span = 0.0
    k = 0
    for i in range(len(t) - 1):
        a, b = t[i], t[i + 1]
        if a < 0 or b > window_ms:
            continue
        while k < len(busy) and busy[k][1] < a:
            k += 1
        if k < len(busy) and busy[k][0] <= a and b <= busy[k][1]:
            used += usage[i + 1] - usage[i]
            span += b - a
    return used / 1e3 / span if span > 0 else math.nan  # usec / ms = cores / 1000


# --------------------------------------------------------------------------
# one run


def _load_summary(summaries: pd.DataFrame | None) -> pd.Series:
    if summaries is None:
        raise InputError("no summaries")
    rows = summaries[summaries["command"] == "load"]
    if len(rows) != 1:
        raise InputError(f"expected exactly one load summary, found {len(rows)}")
    return rows.iloc[0]


def _replica_metrics(
    requests: pd.DataFrame | None, podstats: pd.DataFrame | None, window_ms: float
) -> dict[str, float]:
    """Replicas behind per-connection balancing (E7): the busiest replica's share of the served requests."""
    if requests is None:
        return {}
    served = requests[(requests["ep"] == "work") & (requests["target"] >= 0)].groupby("target").size()
    return {"busiest_share": float(served.max() / served.sum()) if served.sum() else math.nan}


def _neighbor_metrics(
    requests: pd.DataFrame | None, podstats: pd.DataFrame | None, window_ms: float
) -> dict[str, float]:
    """A busy neighbor beside the service (E8): the service's busy cores and the neighbor's use."""
    server = pod_samples(podstats, "e8")
    out = {"busy_cores": busy_cores(server, requests, window_ms) if requests is not None else math.nan}
    neighbor = pod_samples(podstats, "neighbor")
    if len(neighbor):
        deltas, span = window_delta(neighbor, window_ms)
        out["neighbor_cores"] = deltas["usage_usec"] / 1e6 / span
    else:
        out["neighbor_cores"] = 0.0  # idle node: no neighbor runs
    return out


def _cascade_metrics(
    requests: pd.DataFrame | None, podstats: pd.DataFrame | None, window_ms: float
) -> dict[str, float]:
    """A cascade of two services (S2): the upstream's throttled ratio and use."""
    upstream = pod_samples(podstats, "upstream")
    if not len(upstream):
        return {}
    deltas, span = window_delta(upstream, window_ms)
    return {
        "upstream_throttled_ratio": throttled_ratio(deltas["nr_throttled"], deltas["nr_periods"]),
        "upstream_cores": deltas["usage_usec"] / 1e6 / span,
    }


#: What a load experiment measures beyond the targets' counters and the achieved rate, by the catalogue's
#: metrics column (model/catalogue.py METRIC_KINDS): one home for each experiment's own metrics.
LOAD_KIND_METRICS: dict[str, Callable[[pd.DataFrame | None, pd.DataFrame | None, float], dict[str, float]] | None] = {
    "load": None,
    "load_replicas": _replica_metrics,
    "load_neighbor": _neighbor_metrics,
    "load_cascade": _cascade_metrics,
}


def load_run_metrics(kind: str, parts: Mapping[str, pd.DataFrame | None]) -> dict[str, float]:
    """A load experiment's run: the targets' counters, the achieved rate, and what its kind adds
    (:data:`LOAD_KIND_METRICS`)."""
    summary = _load_summary(parts["summaries"])
    window_s = float(summary["window_s"])
    out = counter_metrics(target_deltas(parts.get("target_stats")), window_s)
    if not pd.isna(summary.get("throughput_rps", math.nan)):  # a closed-loop summary (its "mode" is text)
        out["throughput_rps"] = float(summary["throughput_rps"])
    else:
        out["work_rps"] = float(summary["work.achieved_rps"])
    extra = LOAD_KIND_METRICS[kind]
    if extra is not None:
        out.update(extra(parts.get("requests"), parts.get("podstats"), window_s * 1000))
    return out


def _median_round(rounds: pd.DataFrame, src: str) -> float:
    later = rounds[(rounds["src"] == src) & (rounds["round"] > 0)]
    if later.empty:
        raise InputError(f"no rounds after the first of {src}")
    return float(stats.quantile(later["wall_ms"].to_numpy(dtype=float), 0.5))


def window_pause_ms(rounds: pd.DataFrame, free_ms: float, start_ms: float, end_ms: float) -> float:
    """The pause the limit caused between two readings: each round's wall minus ``free_ms`` (the
    same burst without a limit), counted for the part of the round inside [start_ms, end_ms]."""
    begin = rounds["t_s"].to_numpy(dtype=float) * 1000
    wall = rounds["wall_ms"].to_numpy(dtype=float)
    inside = np.clip(np.minimum(begin + wall, end_ms) - np.maximum(begin, start_ms), 0.0, None)
    share = np.divide(inside, wall, out=np.zeros_like(wall), where=wall > 0)
    return float(np.sum(np.clip(wall - free_ms, 0.0, None) * share))


def monitoring_metrics(parts: Mapping[str, pd.DataFrame | None]) -> dict[str, float]:
    """E6: what two cached scrapes say against the pause the limit really caused."""
    rounds, summaries, headers = parts["rounds"], parts["summaries"], parts["headers"]
    if rounds is None or summaries is None or headers is None:
        raise InputError("an E6 run needs its burst rounds, summaries and headers")
    job, calib = "e6/burst", "calib/burst"
    p50, calib_p50 = _median_round(rounds, job), _median_round(rounds, calib)
    summary = summaries[summaries["src"] == job].iloc[0]
    interval_ms = float(summary["elapsed_s"]) * 1000 / float(summary["rounds"])  # round i starts at i x interval
    extra = p50 - calib_p50
    pause = extra / interval_ms
    scrapes = pod_samples(parts.get("podstats"), "e6", "scrape").sort_values("at_ms")
    if len(scrapes) != 2:
        raise InputError(f"expected two scrapes, found {len(scrapes)}")
    first, second = scrapes.iloc[0], scrapes.iloc[1]
    d = {k: number(second[k]) - number(first[k]) for k in COUNTERS}
    sample_gap = (float(second["t_ms"]) - float(first["t_ms"])) / 1000
    scrape_gap = (float(second["at_ms"]) - float(first["at_ms"])) / 1000
    period_us = headers.loc[headers["src"] == job, "cg_period_us"].dropna()
    period_s = float(period_us.iloc[0]) / 1e6 if len(period_us) else 0.1
    rate = d["throttled_usec"] / 1e6 / sample_gap if sample_gap > 0 else math.nan
    pause_window = window_pause_ms(rounds[rounds["src"] == job], calib_p50, float(first["t_ms"]), float(second["t_ms"]))
    throttled_window = d["throttled_usec"] / USEC_PER_MS
    return {
        "p50_wall_ms": p50,
        "calib_p50_wall_ms": calib_p50,
        "extra_ms_per_round": extra,
        "pause_s_per_s": pause,
        "throttled_s_per_s": rate,
        "throttled_s_per_s_naive": d["throttled_usec"] / 1e6 / scrape_gap if scrape_gap > 0 else math.nan,
        "throttled_ms_window": throttled_window,
        "pause_ms_window": pause_window,
        "overstatement": throttled_window / pause_window if pause_window > 0 else math.nan,
        "scrape_throttled_ratio": throttled_ratio(d["nr_throttled"], d["nr_periods"]),
        "throttled_per_wall_period": d["nr_throttled"] / (sample_gap / period_s) if sample_gap > 0 else math.nan,
        "sample_gap_s": sample_gap,
        "scrape_gap_s": scrape_gap,
        **scrape_source(scrapes),
    }


def scrape_source(scrapes: pd.DataFrame) -> dict[str, float]:
    """E6's ``scrapes_cadvisor``: how many scrapes read the kubelet's real cAdvisor (podstat ``source``
    "cadvisor"); none where the table carries no source (logs before it are all emulated: "" counts as 0)."""
    if "source" not in scrapes.columns:
        return {}
    return {"scrapes_cadvisor": float((scrapes["source"] == SCRAPE_CADVISOR).sum())}


def service_run_metrics(experiment: Experiment, parts: Mapping[str, pd.DataFrame | None]) -> dict[str, float]:
    """The metrics of the kind the catalogue row says: a service under load (E2b, E7, E8, S2, X5, X6)
    or what monitoring sees (E6). The latency metrics of any run with requests are per_run's."""
    if experiment.metrics == "monitoring":
        return monitoring_metrics(parts)
    if experiment.metrics in LOAD_KIND_METRICS:
        return load_run_metrics(experiment.metrics, parts)
    raise ValueError(
        f"{experiment.id}: metrics {experiment.metrics!r} are not a service experiment's "
        "(model/catalogue.py METRIC_KINDS)"
    )


def suspect(late_p99_ms: float) -> bool:
    """A run the generator may have distorted (its send lateness p99 above the threshold)."""
    return bool(np.isfinite(late_p99_ms) and late_p99_ms > LATENESS_SUSPECT_MS)
