"""Findings F1-F11 (the lab's) and F12-F17 (ours, docs/EXPERIMENTS.md) on synthetic per-run data: every finding can come out reproduced, contradicted and
inconclusive, and "not testable here" only through a named requirement of a check (docs/STATISTICS.md §8);
the intersection-union verdict, exact zeros, Holm over the decisive comparisons only, thresholds
derived from the model and the profile's parameters; and the analysis CLI end to end on the fixtures."""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import E6_LIMIT, FIXTURE_ROOT, PROJECT, after_every_revision
from throttlelab.analysis import commands as analysis, findings, stats, tidy
from throttlelab.analysis.findings import CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE, REPRODUCED, WEAKER
from throttlelab.analysis.findings import engine, finding_catalogue, jobs_findings, predictions, services_findings
from throttlelab.model import calibration, catalogue, seeds
from throttlelab.model.config import load_design
from throttlelab.model.quantities import go_default_gomaxprocs, parse_cpu
from throttlelab.model.variants import VariantSpec

FIXTURES = FIXTURE_ROOT / "raw_logs"
ALL = catalogue.IDS  # every experiment in the profile
R = 5


#: When the made-up lab's runs were made: after every revision of the threshold registry, so that every check
#: judges them (a check revised after data is judged only on runs made after its revision, docs/STATISTICS.md §5)
AFTER_EVERY_REVISION = after_every_revision()


class Lab:
    """Per-run metrics, runs and headers of a made-up lab, built variant by variant."""

    def __init__(self, num_cpu: int = 2, backend: str = "local", start: str = AFTER_EVERY_REVISION):
        self.num_cpu = num_cpu
        self.backend = backend
        self.start = start
        self.metric_rows: list[tuple] = []
        self.run_rows: list[dict] = []
        self.header_rows: list[dict] = []
        #: (experiment, variant) -> the parameters it was added with
        self.specs: dict[tuple[str, str], dict] = {}

    def add(
        self,
        experiment: str,
        variant: str,
        spec: dict,
        values: dict[str, list[float]],
        num_cpu: int | None = None,
        disturbed: tuple[int, ...] = (),
        period_us: int = 100_000,
        start: str | None = None,
        first_repeat: int = 0,
    ) -> Lab:
        repeats = len(next(iter(values.values())))
        self.specs[(experiment, variant)] = spec
        for k in range(repeats):
            rep = first_repeat + k
            self.run_rows.append(
                {
                    "backend": self.backend,
                    "experiment": experiment,
                    "variant": variant,
                    "repeat": rep,
                    "start": start or self.start,
                    "disturbed": rep in disturbed,
                    # the variants of one repeat form a block on one arrival seed (model/seeds.py)
                    "arrival_seed": seeds.arrival_seed(1, experiment, rep),
                    **VariantSpec.from_dict(experiment, variant, spec).columns(),
                }
            )
            self.header_rows.append(
                {
                    "experiment": experiment,
                    "variant": variant,
                    "repeat": rep,
                    "num_cpu": num_cpu or self.num_cpu,
                    "cg_period_us": period_us,
                }
            )
            for metric, series in values.items():
                self.metric_rows.append((self.backend, experiment, variant, rep, metric, series[k], "", ""))
        return self

    def drop(self, experiment: str, variant: str) -> Lab:
        self.metric_rows = [r for r in self.metric_rows if (r[1], r[2]) != (experiment, variant)]
        self.run_rows = [r for r in self.run_rows if (r["experiment"], r["variant"]) != (experiment, variant)]
        self.header_rows = [r for r in self.header_rows if (r["experiment"], r["variant"]) != (experiment, variant)]
        return self

    def evidence(self, experiments=ALL, level: float = 0.95) -> findings.Evidence:
        return findings.Evidence(
            metrics=pd.DataFrame.from_records(
                self.metric_rows,
                columns=["backend", "experiment", "variant", "repeat", "metric", "value", "unit", "note"],
            ),
            runs=pd.DataFrame(self.run_rows),
            headers=pd.DataFrame(self.header_rows),
            profile_experiments=frozenset(experiments),
            level=level,
        )


def noisy(rng: np.random.Generator, value: float, rel: float = 0.03, n: int = R) -> list[float]:
    return list(value * np.exp(rel * rng.standard_normal(n)))


# --------------------------------------------------------------------------
# E2a: the quick profile's arms (the lab's divided by 4 for 2 CPUs), per-run values from the model


E2A_BASE = {"build": "go124mod", "threads": 2, "work_ms": 20, "interval_ms": 530, "rounds": 12, "request": "100m"}
E2A_ARMS = {
    "nolimit": {"limit": None},
    "limit2": {"limit": "500m"},
    "limit1": {"limit": "250m"},
    "limit500m": {"limit": "125m"},
    "limit1-2threads": {"limit": "250m", "threads": 1, "work_ms": 40},
}
OVERHEAD_MS = 8.0
#: the quick profile's E2a repeats (config/profiles/quick.yaml): F3's median run needs R >= 6
E2A_RUNS = 8


def burst_values(
    spec: dict, cpus: int, rng: np.random.Generator, n: int = R, period_ms: float = 100.0
) -> dict[str, list[float]]:
    arm = predictions.burst_arm(VariantSpec.from_dict("E2a", "x", spec), cpus, period_ms)
    burst = arm.burst()
    per_round = arm.throttled_ms()
    rounds = spec["rounds"]
    periods = float(np.mean(burst.touched)) + 1
    return {
        "p50_wall_ms": noisy(rng, arm.median_wall_ms() + OVERHEAD_MS, n=n),
        "mean_wall_ms": noisy(rng, float(np.mean(burst.wall_ms)) + OVERHEAD_MS, n=n),
        "throttled_ms_per_round": noisy(rng, per_round, n=n),
        "throttled_ms": noisy(rng, per_round * rounds, n=n),
        # every round's threads on as many CPUs as the model's run queues (getcpu): a share of rounds
        "two_queue_share": [1.0 if arm.queues >= 2 else 0.0] * n,
        "periods_per_round": list(periods + 0.05 * rng.standard_normal(n)),
        "nr_periods": [round(periods * rounds)] * n,
        "nr_throttled": [round(float(np.mean(burst.throttled_periods)) * rounds)] * n,
        # the share of rounds throttled at all: the model's share over start phases, alike in every run
        "throttled_round_share": [burst.throttled_round_share] * n,
        # counts per round: the model's mean with a little run-to-run spread; an exact 0 stays 0
        **{
            metric: noisy(rng, value, n=n) if value > 0 else [0.0] * n
            for metric, value in (
                ("throttled_per_round", float(np.mean(burst.throttled_periods))),
                ("bursts_per_round", float(np.mean(burst.bursts))),
                ("burst_ms_per_round", float(np.mean(burst.excess_ms))),
            )
        },
    }


def e2a(
    lab: Lab,
    cpus: int | None = None,
    seed: int = 1,
    change: Callable[[str, dict, dict], None] | None = None,
    arms: dict | None = None,
) -> Lab:
    rng = np.random.default_rng(seed)
    cpus = cpus or lab.num_cpu
    for variant, params in (arms or E2A_ARMS).items():
        spec = {**E2A_BASE, **params}
        values = burst_values(spec, cpus, rng, n=E2A_RUNS)
        if change:
            change(variant, spec, values)
        lab.add("E2a", variant, spec, values, num_cpu=cpus)
    return lab


E3_VARIANTS = {
    "go124mod-none": {"build": "go124mod", "limit": None},
    "go124mod-500m": {"build": "go124mod", "limit": "500m"},
    "go124mod-2500m": {"build": "go124mod", "limit": "2500m"},
    "go125mod-none": {"build": "go125mod", "limit": None},
    "go125mod-500m": {"build": "go125mod", "limit": "500m"},
    "go125mod-2500m": {"build": "go125mod", "limit": "2500m"},
    "go125mod-2-env6": {"build": "go125mod", "limit": 2, "gomaxprocs": 6},
    "go125mod-2-godebug": {"build": "go125mod", "limit": 2, "godebug": "containermaxprocs=0"},
}


def rule(spec: dict, num_cpu: int) -> int:
    if spec.get("gomaxprocs"):
        return spec["gomaxprocs"]
    if spec.get("godebug"):
        return num_cpu
    limit = None if spec["limit"] is None else parse_cpu(spec["limit"], "limit")
    return go_default_gomaxprocs("1.25" if spec["build"] == "go125mod" else "1.24", limit, num_cpu)


def e3(lab: Lab, num_cpu: int = 10, off_rule: str | None = None, unread: str | None = None) -> Lab:
    for variant, spec in E3_VARIANTS.items():
        expected = rule(spec, num_cpu)
        got = expected + 1 if variant == off_rule else expected
        predicted = [math.nan, expected] if variant == unread else [expected, expected]
        lab.add(
            "E3",
            variant,
            {**spec, "request": "100m"},
            {"gomaxprocs": [got, got], "expected_gomaxprocs": predicted, "num_cpu": [num_cpu] * 2},
            num_cpu=num_cpu,
        )
    return lab


# --------------------------------------------------------------------------
# E4, E5, E10: weights and shares


def weights(
    lab: Lab, seed: int = 2, rel: float = 0.02, e5_two: tuple[float, float] | None = None, levels: float = 12
) -> Lab:
    rng = np.random.default_rng(seed)
    for variant in ("runc-new", "runc-old"):
        lab.add(
            "E4", variant, {"runtime": variant}, {"readback_levels": [levels] * 2, "readback_levels_ok": [levels] * 2}
        )
    shares = {
        ("E5", "pods"): {"pod-p100m": 4 / 86, "pod-p1": 39 / 86, "pod-two": 43 / 86},
        ("E5", "two-container"): {"small": 17 / 117, "big": 100 / 117},
        ("E10", "pods"): {"pod-p100m": 4 / 86, "pod-p1": 39 / 86, "pod-two": 43 / 86},
        ("E10", "two-container"): {"small": 4 / 43, "big": 39 / 43},
    }
    if e5_two:
        shares[("E5", "two-container")] = {"small": e5_two[0], "big": e5_two[1]}
    for (experiment, phase), members in shares.items():
        runtime = "runc-new" if experiment == "E5" else "runc-old"
        lab.add(
            experiment,
            phase,
            {"runtime": runtime, "cpus": "0", "phase": phase},
            {f"share_{m}": noisy(rng, s, rel) for m, s in members.items()},
        )
    return lab


# --------------------------------------------------------------------------
# the services: the quick profile's E2b, E7, E8 (1-CPU node, 20 req/s in clumps of 10), E6, S2


SERVICE = {
    "build": "go124mod",
    "request": "500m",
    "work_us": 2000,
    "alloc_bytes": 204800,
    "live_mb": 6,
    "rps": 20,
    "ping_rps": 4,
    "warmup_ms": 400,
    "duration_ms": 3000,
    "node_cpus": "0",
    "load_cpus": "1",
}


def window_for(requests: int) -> float:
    """The window (ms) in which the generator schedules exactly ``requests`` /work requests at SERVICE's rate."""
    return requests * 1000 / SERVICE["rps"]


#: A clumped arm's windows in the synthetic lab: 36 clumps of 10, the fewest that support a p90 (docs/STATISTICS.md §2).
CLUMPED_REQUESTS = 360


def latency(rng, p90: float, requests: int = 60, rel: float = 0.05) -> dict[str, list[float]]:
    """A load run's latency metrics as metrics.csv has them: quantiles a run this short supports only, and
    the slowest request (p75 and the maximum scale each run's p90 draw, so the random stream is the same)."""
    out = {"work_requests": [float(requests)] * R}
    for name, factor in (("p50", 0.5), ("p90", 1.0), ("p99", 1.6)):
        if requests >= stats.min_samples(stats.QUANTILES[name]):
            out[f"work_{name}_ms"] = noisy(rng, p90 * factor, rel)
        else:
            out[f"work_{name}_ms"] = [math.nan] * R
    base = out["work_p90_ms"] if requests >= stats.min_samples(0.9) else [p90] * R
    p75 = [v * 0.8 for v in base] if requests >= stats.min_samples(0.75) else [math.nan] * R
    out["work_p75_ms"], out["work_max_ms"] = p75, [v * 2.0 for v in base]
    return out


def counts(rng, throttled: float, periods: int = 30) -> dict[str, list[float]]:
    k = [float(min(periods, max(0, round(throttled * periods + d)))) for d in rng.normal(0, 1.0, R)]
    if throttled == 0:
        k = [0.0] * R
    return {
        "nr_throttled": k,
        "nr_periods": [float(periods)] * R,
        "throttled_ratio": [x / periods if periods else 0.0 for x in k],
    }


def e2b(
    lab: Lab,
    seed: int = 3,
    clumped_p90: float = 60.0,
    steady_throttled: float = 0.0,
    clumped_throttled: float = 0.3,
    requests: int = CLUMPED_REQUESTS,
    rel: float = 0.05,
    clumped_periods: int = 30,
    steady_periods: int = 30,
) -> Lab:
    rng = np.random.default_rng(seed)
    service = {**SERVICE, "duration_ms": window_for(requests)}
    lab.add(
        "E2b",
        "steady-limit",
        {**service, "limit": "200m", "clump": 1},
        {**latency(rng, 4.0, requests), **counts(rng, steady_throttled, steady_periods), "avg_cores": noisy(rng, 0.07)},
    )
    lab.add(
        "E2b",
        "clumped-nolimit",
        {**service, "limit": None, "clump": 10},
        {**latency(rng, 25.0, requests), **counts(rng, 0.0, 0), "avg_cores": noisy(rng, 0.055)},
    )
    lab.add(
        "E2b",
        "clumped-limit",
        {**service, "limit": "200m", "clump": 10},
        {
            **latency(rng, clumped_p90, requests, rel),
            **counts(rng, clumped_throttled, clumped_periods),
            "avg_cores": noisy(rng, 0.055),
        },
    )
    return lab


def e7(lab: Lab, seed: int = 4, split_ratio: float = 1.6, rel: float = 0.05, requests: int = CLUMPED_REQUESTS) -> Lab:
    rng = np.random.default_rng(seed)
    for variant, replicas, limit, p90 in (
        ("one-limit", 1, "200m", 60.0),
        ("two-half", 2, "100m", 60 * split_ratio),
        ("two-limit", 2, "200m", 40.0),
        ("one-double", 1, "400m", 25.0),
    ):
        lab.add(
            "E7",
            variant,
            {**SERVICE, "duration_ms": window_for(requests), "clump": 10, "replicas": replicas, "limit": limit},
            latency(rng, p90, requests, rel if variant == "two-half" else 0.05),
        )
    return lab


E8 = {
    **SERVICE,
    "work_us": 2500,
    "clump": 10,
    "duration_ms": window_for(CLUMPED_REQUESTS),
    "sample_ms": 10,
    "neighbor_request": "500m",
    "neighbor_threads": None,
}


def e8(
    lab: Lab,
    seed: int = 5,
    busy_throttled: float = 0.0,
    busy_p90: float = 210.0,
    rel: float = 0.05,
    variants: tuple[str, ...] | None = None,
    busy_periods: int = 30,
) -> Lab:
    rng = np.random.default_rng(seed)
    arms = {
        "idle-lim": ({"neighbor": False, "request": "63m", "limit": "250m"}, 60.0, 0.3, 0.6),
        "idle-lim2x": ({"neighbor": False, "request": "63m", "limit": "500m"}, 30.0, 0.0, 0.9),
        "busy-lim": ({"neighbor": True, "request": "63m", "limit": "250m"}, 210.0, 0.0, 0.13),
        "busy-lim2x": ({"neighbor": True, "request": "63m", "limit": "500m"}, busy_p90, busy_throttled, 0.13),
        "busy-lim2x-req-full": ({"neighbor": True, "request": "500m", "limit": "500m"}, 55.0, 0.0, 0.48),
    }
    for variant, (params, p90, throttled, cores) in arms.items():
        if variants is not None and variant not in variants:
            continue
        lab.add(
            "E8",
            variant,
            {**E8, **params},
            {
                **latency(rng, p90, CLUMPED_REQUESTS, rel if variant == "busy-lim2x" else 0.05),
                **counts(rng, throttled, busy_periods if variant == "busy-lim2x" else 30),
                "busy_cores": noisy(rng, cores),
            },
        )
    return lab


def e6(lab: Lab, seed: int = 6, overstatement: float = 1.9, rel: float = 0.05, num_cpu: int | None = None) -> Lab:
    rng = np.random.default_rng(seed)
    lab.add(
        "E6",
        "limit",
        E6_LIMIT,
        {"overstatement": noisy(rng, overstatement, rel)},
        num_cpu=num_cpu,
    )
    return lab


def s2(lab: Lab, seed: int = 7, gain: float = 2.0, rel: float = 0.05, node_procs: int = 16) -> Lab:
    rng = np.random.default_rng(seed)
    base = {"build": "go124mod", "request": "250m", "limit": "250m", "work_us": 100, "workers": 16, "mode": "threads"}
    lab.add("S2", "threads-node", base, {"throughput_rps": noisy(rng, 500.0), "gomaxprocs": [node_procs] * R})
    lab.add(
        "S2",
        "threads-one",
        {**base, "gomaxprocs": 1},
        {"throughput_rps": noisy(rng, 500.0 * gain, rel), "gomaxprocs": [1] * R},
    )
    return lab


# --------------------------------------------------------------------------
# X1-X3 (ours, docs/EXPERIMENTS.md): the quick profile's arms, per-run values from the model

X_BASE = {
    "build": "go124mod",
    "threads": 2,
    "work_ms": 20,
    "interval_ms": 433,
    "rounds": 10,
    "request": "100m",
    "limit": "250m",
}
X_ARMS = {
    "X1": {
        "nolimit": {"limit": None, "burst_ms": 0},
        "budget0": {"burst_ms": 0},
        "budget-half": {"burst_ms": 12.5},
        "budget-full": {"burst_ms": 25},
    },
    "X2": {"period100": {"period_ms": 100}, "period20": {"period_ms": 20}, "period5": {"period_ms": 5}},
    "X3": {"cpus1": {"threads": 8, "work_ms": 5, "cpus": "0"}, "cpus2": {"threads": 8, "work_ms": 5, "cpus": "0-1"}},
}


def beyond(
    lab: Lab,
    experiment: str,
    seed: int = 11,
    cpus: int | None = None,
    change: Callable[[str, dict, dict], None] | None = None,
    arms: dict | None = None,
) -> Lab:
    """One of X1-X3 as the model predicts it (plus a fixed overhead), on ``cpus`` (X3: the variant's cpuset)."""
    rng = np.random.default_rng(seed)
    for variant, params in (arms or X_ARMS[experiment]).items():
        spec = {**X_BASE, **params}
        n_cpu = cpus or (len(spec["cpus"].split("-")) if "cpus" in spec else lab.num_cpu)
        period = float(spec.get("period_ms") or 100.0)
        values = burst_values(spec, n_cpu, rng, period_ms=period)
        if change:
            change(variant, spec, values)
        lab.add(experiment, variant, spec, values, num_cpu=n_cpu, period_us=round(period * 1000))
    return lab


X4_BASE = {**X_BASE, "limit": "500m", "pods": 2}


def x4(lab: Lab, seed: int = 14, contention: float = 1.0, rel: float = 0.03, num_cpu: int = 2, threads: int = 2) -> Lab:
    """X4: two pods of E2a's limit-2 arm, bursting together or half an interval apart (the model's medians
    plus a fixed overhead); ``contention`` scales the synchronized arm's extra time."""
    rng = np.random.default_rng(seed)
    base = {**X4_BASE, "threads": threads}
    arm = predictions.burst_arm(VariantSpec.from_dict("X4", "x", base), num_cpu, 100.0)
    apart = float(np.median(predictions.overlap_burst(arm, 2, False).wall_ms))
    together = apart + contention * (float(np.median(predictions.overlap_burst(arm, 2, True).wall_ms)) - apart)
    for variant, wall, stagger in (("synchronized", together, False), ("staggered", apart, True)):
        lab.add(
            "X4",
            variant,
            {**base, "stagger": stagger},
            {
                "p50_wall_ms": noisy(rng, wall + OVERHEAD_MS, rel),
                "throttled_per_round": [0.0] * R,
                "throttled_round_share": [0.0] * R,
            },
            num_cpu=num_cpu,
        )
    return lab


X5_BASE = {**SERVICE, "limit": "200m", "clump": 1, "request_cpu_us": 4000}


def x5(
    lab: Lab,
    seed: int = 12,
    quiet: float = 0.0,
    loud: float = 0.3,
    cores: float = 1.0,
    rel: float = 0.05,
    rps90: float = 45,
    quiet_periods: int = 30,
) -> Lab:
    """X5: steady arrivals at 30% and 90% of a 200m limit (the quick profile's), 3 s windows."""
    rng = np.random.default_rng(seed)
    for variant, rps, throttled, p90 in (("use30", 15, quiet, 6.0), ("use90", rps90, loud, 40.0)):
        requests = round(rps * 3)
        lab.add(
            "X5",
            variant,
            {**X5_BASE, "rps": rps},
            {
                **latency(rng, p90, requests),
                **counts(rng, throttled, quiet_periods if variant == "use30" else 30),
                "avg_cores": noisy(rng, rps * 0.004 * cores, rel),
            },
        )
    return lab


X6_BASE = {
    **SERVICE,
    "build": "go125mod",
    "rps": 20,
    "clump": 10,
    "duration_ms": window_for(CLUMPED_REQUESTS),
    "node_cpus": "0-1",
    "limit": "500m",
}


def x6(lab: Lab, seed: int = 13, slower: float = 1.9, gain: float = 1.0, rel: float = 0.05, num_cpu: int = 2) -> Lab:
    """X6: GOMAXPROCS 2 (Go's default) against 1 at 500m, clumped open loop and closed loop."""
    rng = np.random.default_rng(seed)
    lab.add("X6", "clumped-500m-g2", X6_BASE, latency(rng, 20.0, CLUMPED_REQUESTS), num_cpu=num_cpu)
    lab.add(
        "X6",
        "clumped-500m-g1",
        {**X6_BASE, "gomaxprocs": 1},
        latency(rng, 20.0 * slower, CLUMPED_REQUESTS, rel),
        num_cpu=num_cpu,
    )
    closed = {**X6_BASE, "workers": 16, "duration_ms": 1500}
    lab.add("X6", "closed-500m-g2", closed, {"throughput_rps": noisy(rng, 200.0 * gain, rel)}, num_cpu=num_cpu)
    lab.add("X6", "closed-500m-g1", {**closed, "gomaxprocs": 1}, {"throughput_rps": noisy(rng, 200.0)}, num_cpu=num_cpu)
    return lab


def full_lab(num_cpu: int = 2, **changes) -> Lab:
    """Every experiment as a faithful 2-CPU node would show it; ``changes``: per-experiment keyword overrides."""
    lab = Lab(num_cpu=num_cpu, backend=changes.pop("backend", "local"))
    e2a(lab, **changes.pop("e2a", {}))
    e3(lab, **changes.pop("e3", {}))
    weights(lab, **changes.pop("weights", {}))
    e2b(lab, **changes.pop("e2b", {}))
    e7(lab, **changes.pop("e7", {}))
    e8(lab, **changes.pop("e8", {}))
    e6(lab, **changes.pop("e6", {}))
    s2(lab, **changes.pop("s2", {}))
    for experiment in ("X1", "X2", "X3"):
        beyond(lab, experiment, **changes.pop(experiment.lower(), {}))
    x4(lab, **changes.pop("x4", {}))
    x5(lab, **changes.pop("x5", {}))
    x6(lab, **changes.pop("x6", {}))
    assert not changes, changes
    return lab


def by_id(frame: pd.DataFrame) -> dict[str, pd.Series]:
    return {row["id"]: row for _, row in frame.iterrows()}


def evaluate(lab: Lab, **kwargs) -> tuple[dict[str, pd.Series], pd.DataFrame]:
    rows, checks = findings.evaluate(lab.evidence(**kwargs))
    assert list(rows.columns) == findings.FINDINGS_COLUMNS and list(checks.columns) == findings.CHECKS_COLUMNS
    return by_id(rows), checks


# --------------------------------------------------------------------------
# every finding, every verdict


def _scale(factor_by_variant: dict[str, dict[str, float]]):
    def change(variant: str, spec: dict, values: dict) -> None:
        for metric, factor in factor_by_variant.get(variant, {}).items():
            values[metric] = [v * factor for v in values[metric]]

    return change


def _set(values_by_variant: dict[str, dict[str, list[float]]]):
    """The variant's metrics set to the values given, cycled to its number of runs."""

    def change(variant: str, spec: dict, values: dict) -> None:
        runs = len(next(iter(values.values())))
        for metric, given in values_by_variant.get(variant, {}).items():
            values[metric] = [given[i % len(given)] for i in range(max(runs, len(given)))]

    return change


def _single_clock(variant: str, spec: dict, values: dict) -> None:
    """Throttled time counted once per wait, not per run queue: half the kernel's sum on 2 CPUs."""
    if variant == "limit500m":
        values["throttled_ms_per_round"] = [v / 2 for v in values["throttled_ms_per_round"]]


SCENARIOS: dict[str, dict[str, dict]] = {
    "F1": {
        # faster under the limit than without: the interval excludes the claimed direction (below no effect, 1)
        CONTRADICTED: {"e2a": {"change": _set({"limit1": {"p50_wall_ms": [24.0, 24.2, 23.9, 24.1, 24.0]}})}},
        INCONCLUSIVE: {"e2a": {"change": _set({"limit1": {"p50_wall_ms": [40, 160, 60, 120, 45]}})}},
        NOT_TESTABLE: {"e2a": {"arms": {**E2A_ARMS, "limit1": {"limit": "500m"}}}},
    },
    "F2": {
        CONTRADICTED: {"e2a": {"change": _single_clock}},
        INCONCLUSIVE: {
            "e2a": {"change": _set({"limit500m": {"throttled_ms_per_round": [100, 900, 120, 800, 150, 700]}})}
        },
        NOT_TESTABLE: {"e2a": {"cpus": 1}},
    },
    "F3": {
        CONTRADICTED: {"e2a": {"change": _set({"limit2": {"periods_per_round": [5.3, 5.31, 5.29, 5.3, 5.32]}})}},
        INCONCLUSIVE: {"e2a": {"change": _set({"limit2": {"periods_per_round": [2.0, 3.4, 1.2, 3.9, 2.2]}})}},
        NOT_TESTABLE: {"e2a": {"arms": {k: {**v, "interval_ms": 250} for k, v in E2A_ARMS.items()}}},
    },
    "F4": {
        CONTRADICTED: {"e2a": {"change": _scale({"limit1-2threads": {"p50_wall_ms": 0.55}})}},
        INCONCLUSIVE: {"e2a": {"change": _set({"limit1-2threads": {"throttled_ms": [200, 1600, 300, 1400, 500]}})}},
        NOT_TESTABLE: {"e2a": {"cpus": 1}},
    },
    "F5": {
        REPRODUCED: {"e3": {"num_cpu": 10}},
        CONTRADICTED: {"e3": {"off_rule": "go125mod-500m"}},
        INCONCLUSIVE: {"e3": {"unread": "go125mod-500m"}},
        NOT_TESTABLE: {"e3": {"num_cpu": 2}},
    },
    "F6": {
        # steady arrivals throttled in a few of 400 periods per run: the mean share is bounded below 0.05 (with
        # no throttled period at all in 5 runs, the bound on the mean share is 0.52: inconclusive)
        REPRODUCED: {"e2b": {"steady_throttled": 0.005, "steady_periods": 400}},
        CONTRADICTED: {"e2b": {"steady_throttled": 0.25}},
        INCONCLUSIVE: {"e2b": {"clumped_p90": 38.0, "rel": 0.8}},
        # 6 clumps of 10 support p50, at which the model predicts no rise
        NOT_TESTABLE: {"e2b": {"requests": 60}},
    },
    "F7": {
        CONTRADICTED: {"e7": {"split_ratio": 0.7}},
        INCONCLUSIVE: {"e7": {"split_ratio": 1.1, "rel": 0.6}},
        NOT_TESTABLE: {"e7": {"requests": 4}},
    },
    "F8": {
        CONTRADICTED: {"weights": {"e5_two": (4 / 43, 39 / 43)}},
        INCONCLUSIVE: {"weights": {"rel": 0.35}},
        NOT_TESTABLE: {"backend": "docker"},
    },
    "F9": {
        REPRODUCED: {"e8": {"busy_throttled": 0.005, "busy_periods": 400}},
        CONTRADICTED: {"e8": {"busy_throttled": 0.3}},
        INCONCLUSIVE: {"e8": {"busy_p90": 90.0, "rel": 0.8}},
        # every arm its decisive checks compare with the idle node left out (one left out is set aside)
        NOT_TESTABLE: {"e8": {"variants": ("idle-lim2x",)}},
    },
    "F10": {
        CONTRADICTED: {"e6": {"overstatement": 0.8}},  # less throttled time than pause: no overstatement
        INCONCLUSIVE: {"e6": {"overstatement": 1.5, "rel": 0.6}},
        NOT_TESTABLE: {"e6": {"num_cpu": 1}},
    },
    "F11": {
        CONTRADICTED: {"s2": {"gain": 0.8}},
        INCONCLUSIVE: {"s2": {"gain": 1.3, "rel": 0.5}},
        NOT_TESTABLE: {"s2": {"node_procs": 2}},
    },
    # ours (docs/EXPERIMENTS.md)
    "F12": {
        # a throttled round in some runs: the mean share is bounded below 0.475
        REPRODUCED: {"x1": {"change": _set({"budget-full": {"throttled_round_share": [0.0, 1 / 6, 0.0, 1 / 6, 0.0]}})}},
        # the budget did not lift the throttling: the full-budget arm as slow and as throttled as budget0
        CONTRADICTED: {
            "x1": {
                "change": _set(
                    {
                        "budget-full": {
                            "p50_wall_ms": [73.1, 73.4, 72.8, 73.0, 73.3],
                            "throttled_round_share": [5 / 6, 1.0, 5 / 6, 1.0, 5 / 6],
                        }
                    }
                )
            }
        },
        INCONCLUSIVE: {"x1": {"change": _set({"budget-full": {"p50_wall_ms": [20, 90, 35, 70, 28]}})}},
        # a budget the burst does not fit in: the model predicts a slow-down, not the unlimited time
        NOT_TESTABLE: {"x1": {"arms": {**X_ARMS["X1"], "budget-full": {"burst_ms": 10}}}},
    },
    "F13": {
        # the issue's first guess: a shorter period finishes SOONER
        CONTRADICTED: {"x2": {"change": _set({"period20": {"p50_wall_ms": [45.0, 45.5, 44.8, 45.2, 45.1]}})}},
        INCONCLUSIVE: {"x2": {"change": _set({"period5": {"p50_wall_ms": [60, 200, 90, 180, 70]}})}},
        # only the default period: no shorter one to compare (one left out is set aside)
        NOT_TESTABLE: {"x2": {"arms": {k: v for k, v in X_ARMS["X2"].items() if k == "period100"}}},
    },
    "F14": {
        # summed over threads: 8 pauses per round on one CPU
        CONTRADICTED: {"x3": {"change": _scale({"cpus1": {"throttled_ms_per_round": 8.0}})}},
        INCONCLUSIVE: {"x3": {"change": _set({"cpus1": {"throttled_ms_per_round": [20, 90, 35, 80, 30]}})}},
        NOT_TESTABLE: {"x3": {"cpus": 1}},
    },
    "F15": {
        # together as fast as apart: no contention beyond the quotas
        CONTRADICTED: {"x4": {"contention": -0.5}},
        INCONCLUSIVE: {"x4": {"contention": 0.5, "rel": 0.4}},
        # one thread per pod on 2 CPUs: two busy threads do not contend
        NOT_TESTABLE: {"x4": {"threads": 1}},
    },
    "F16": {
        REPRODUCED: {"x5": {"quiet": 0.005, "quiet_periods": 400}},
        # throttled in a third of the periods already at 30% of the limit
        CONTRADICTED: {"x5": {"quiet": 0.35}},
        INCONCLUSIVE: {"x5": {"loud": 0.15}},
        # 90% at 20 req/s: the model's share there no longer exceeds 4x the 30% arm's
        NOT_TESTABLE: {"x5": {"rps90": 20}},
    },
    "F17": {
        # one thread faster than Go's default two
        CONTRADICTED: {"x6": {"slower": 0.6}},
        INCONCLUSIVE: {"x6": {"slower": 1.5, "rel": 0.6}},
        NOT_TESTABLE: {"x6": {"num_cpu": 1}},
    },
}

CASES = [(fid, verdict) for fid in SCENARIOS for verdict in (REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE)]


@pytest.fixture(scope="module")
def faithful() -> tuple[dict[str, pd.Series], pd.DataFrame]:
    return evaluate(full_lab())


def test_every_finding_is_data_with_derived_thresholds_and_reasons():
    assert [f.id for f in findings.FINDINGS] == [f"F{k}" for k in range(1, 18)]
    assert [f.id for f in findings.FINDINGS if f.ours] == ["F12", "F13", "F14", "F15", "F16", "F17"]
    for finding in findings.FINDINGS:
        assert finding.claim and finding.reference and finding.checks
        for check in finding.checks:
            assert check.why and check.reference and (check.threshold or check.derive or check.kind == "agreement")
            assert check.relation in (">", "<", "within")
            for requirement in check.requirements:
                assert requirement.name


@pytest.mark.parametrize(("fid", "verdict"), CASES)
def test_every_finding_can_come_out_every_way(faithful, fid, verdict):
    if verdict == REPRODUCED and verdict not in SCENARIOS[fid]:
        got, checks = faithful
    else:
        got, checks = evaluate(full_lab(**SCENARIOS[fid][verdict]))
    row = got[fid]
    mine = checks[checks["id"] == fid]
    # "not testable" comes only through a named requirement of a check, in every scenario
    untestable = checks[checks["verdict"] == NOT_TESTABLE]
    # (or through a premise that failed, docs/STATISTICS.md §5: "not testable here: premise failed" with the numbers)
    assert (untestable["requirement"].str.len() > 0).all()
    assert (untestable["reason"].str.startswith("needs ") | untestable["reason"].str.startswith("premise failed")).all()
    assert row["verdict"] == verdict, (row["reason"], mine[["check", "verdict", "reason"]].to_string())
    if verdict == NOT_TESTABLE:
        untestable = mine[mine["verdict"] == NOT_TESTABLE]
        assert len(untestable) and (untestable["requirement"] != "").all()
        for name in untestable["requirement"]:
            assert name.split("; ")[0] in row["reason"]
    if verdict == CONTRADICTED:
        assert (mine["verdict"] == CONTRADICTED).any()


def test_the_faithful_lab_reproduces_everything_a_two_cpu_node_can_show(faithful):
    got, checks = faithful
    verdicts = {fid: row["verdict"] for fid, row in got.items()}
    # the model's "not throttled" arms are exactly 0 in all 5 runs: a share of counted periods decides from
    # 0.5^R <= 0.025 (R >= 6) on, with the pooled periods' exact bound below its threshold; F12's share of
    # rounds throttled counts no trials, so its tie is the bound on the mean share, which reaches its 0.475
    # from 6 runs on (1 - 0.025^(1/6) = 0.459)
    unreachable = {"F6": 6, "F9": 6, "F12": 6, "F16": 6}
    assert verdicts == {f"F{k}": INCONCLUSIVE if f"F{k}" in unreachable else REPRODUCED for k in range(1, 18)}, (
        checks.to_string()
    )
    for fid, needed in unreachable.items():
        need = "no number of runs can" if needed == 0 else f"needs R >= {needed}"
        assert f"5 runs cannot reach level 0.025 ({need})" in got[fid]["reason"], got[fid]["reason"]


def test_requirements_belong_to_checks_and_a_contradiction_stays(faithful):
    # one run queue: F2's decisive check (throttled above wall) cannot be tested (its premise, the threads on two
    # CPUs, fails too), its band still holds ...
    got, checks = evaluate(full_lab(e2a={"cpus": 1}))
    f2 = checks[checks["id"] == "F2"].set_index("check")
    assert f2["verdict"].tolist() == [REPRODUCED, CONTRADICTED, NOT_TESTABLE]
    assert f2["requirement"].iloc[2] == "two or more run queues; a premise that holds"
    assert f2["requirement"].iloc[0] == ""
    assert got["F2"]["verdict"] == NOT_TESTABLE  # never contradicted on a 1-CPU node
    # ... and the run-queue band is supporting (it spans k in [1, p], X3/F14 decides threads against
    # run queues): off its band it is shown contradicted but decides nothing; F2 rests on "exceeds wall time"
    got, checks = evaluate(full_lab(e2a={"cpus": 1, "change": _scale({"limit500m": {"throttled_ms_per_round": 0.4}})}))
    assert got["F2"]["verdict"] == NOT_TESTABLE
    assert checks[checks["id"] == "F2"]["verdict"].tolist() == [CONTRADICTED, CONTRADICTED, NOT_TESTABLE]
    # a contradicted decisive check keeps the finding contradicted whatever another check's requirement says
    got, checks = evaluate(
        full_lab(
            e2a={
                "arms": {**E2A_ARMS, "limit2": {"limit": "125m"}},
                "change": _set({"limit1": {"p50_wall_ms": [24.0, 24.2, 23.9, 24.1, 24.0]}}),
            }
        )
    )
    f1 = checks[checks["id"] == "F1"]
    assert got["F1"]["verdict"] == CONTRADICTED and NOT_TESTABLE in set(f1["verdict"]), f1.to_string()
    # a missing variant makes only the checks that need it not testable
    lab = full_lab(e8={"variants": ("idle-lim2x", "busy-lim2x"), "busy_throttled": 0.005, "busy_periods": 400})
    got, checks = evaluate(lab)
    f9 = checks[checks["id"] == "F9"]
    assert f9["verdict"].tolist()[:2] == [REPRODUCED, REPRODUCED]
    assert set(f9["verdict"].tolist()[2:]) == {NOT_TESTABLE}


def test_f2_holds_between_one_and_all_run_queues(faithful):
    # the scheduler may leave one of the two run queues unthrottled for part of a round: the kernel's sum is then
    # between one and two queues' waiting, which is still the claim (a 2-CPU run read about 1.3 of one queue)
    got, checks = evaluate(full_lab(e2a={"change": _scale({"limit500m": {"throttled_ms_per_round": 0.66}})}))
    assert got["F2"]["verdict"] == REPRODUCED, checks[checks["id"] == "F2"].to_string()
    # more than every run queue could have counted is off the model: the band (supporting) says so,
    # but F2's claim, throttled time above wall time, still holds
    got, checks = evaluate(full_lab(e2a={"change": _scale({"limit500m": {"throttled_ms_per_round": 1.6}})}))
    f2 = checks[checks["id"] == "F2"]
    assert f2["verdict"].tolist() == [CONTRADICTED, REPRODUCED, REPRODUCED] and got["F2"]["verdict"] == REPRODUCED


def _one_queue(shares: list[float]):
    """limit500m's threads mainly on one CPU in all but ``shares`` of the rounds (run by run), the kernel then
    counting one queue's waiting: throttled time per round below the wall time."""

    def change(variant: str, spec: dict, values: dict) -> None:
        if variant == "limit500m":
            values["two_queue_share"] = (shares * len(values["two_queue_share"]))[: len(values["two_queue_share"])]
            values["throttled_ms_per_round"] = [v / 2 for v in values["throttled_ms_per_round"]]

    return change


def test_f2_on_threads_the_scheduler_kept_on_one_queue_is_not_tested_not_false():
    # the scheduler left both threads on one CPU (a busy neighbour, a pod's placement): one queue is throttled, so
    # throttled time stays below the wall time. That is where the threads ran, measured apart from the throttling
    # counters (getcpu), not a false claim: the premise fails and F2 is not testable, with the numbers
    got, checks = evaluate(full_lab(e2a={"change": _one_queue([0.0])}))
    f2 = checks[checks["id"] == "F2"].set_index("check")
    assert f2.loc["two_queue_share limit500m", "verdict"] == CONTRADICTED  # the premise failed
    decisive = f2.loc["throttled_ms_per_round / mean_wall_ms limit500m"]
    assert decisive["verdict"] == NOT_TESTABLE and decisive["reason"].startswith("premise failed: two_queue_share")
    assert "alone: contradicted" in decisive["reason"] and got["F2"]["verdict"] == NOT_TESTABLE
    # the same counts with the threads on two CPUs are a kernel that counts one clock per wait: contradicted
    assert evaluate(full_lab(e2a={"change": _single_clock}))[0]["F2"]["verdict"] == CONTRADICTED
    # on two CPUs in a few rounds of each run the premise still fails; in every round it holds
    few = _one_queue([0.0, 0.2, 0.1, 0.3])
    assert evaluate(full_lab(e2a={"change": few}))[0]["F2"]["verdict"] == NOT_TESTABLE
    assert evaluate(full_lab())[0]["F2"]["verdict"] == REPRODUCED


def test_f10_an_overstatement_short_of_every_run_queue_is_still_one():
    # a quick run on kernel 6.18 read 1.18 [1.03, 1.35] on 2 CPUs: the kernel summed fewer than both queues'
    # waiting, which still overstates the pause; the old threshold sqrt(2) called that "contradicted"
    got, checks = evaluate(full_lab(e6={"overstatement": 1.19, "rel": 0.05}))
    assert got["F10"]["verdict"] == REPRODUCED, checks[checks["id"] == "F10"].to_string()


def test_a_premise_cannot_contradict(faithful):
    # F6's "~30% average use" is a premise: off its band the checks it gates are "not testable here: premise
    # failed" with the numbers (it used to leave F6 inconclusive); it contradicts nothing
    lab = full_lab()
    lab.metric_rows = [
        (*r[:5], r[5] * 3 if r[1:3] == ("E2b", "clumped-limit") and r[4] == "avg_cores" else r[5], *r[6:])
        for r in lab.metric_rows
    ]
    got, checks = evaluate(lab)
    premise = checks[(checks["id"] == "F6") & (checks["check"] == "avg_cores clumped-limit")].iloc[0]
    assert premise["verdict"] == CONTRADICTED and not premise["decisive"]
    assert got["F6"]["verdict"] == NOT_TESTABLE and "premise failed: avg_cores clumped-limit" in got["F6"]["reason"]
    gated = checks[(checks["id"] == "F6") & (checks["check"] != "avg_cores clumped-limit")]
    assert set(gated["verdict"]) == {NOT_TESTABLE} and set(gated["requirement"]) == {"a premise that holds"}


# --------------------------------------------------------------------------
# thresholds from the model and the profile's parameters


def test_thresholds_follow_the_variants_parameters(faithful):
    _, checks = faithful
    c = checks.set_index("check")
    # limit 250m, 2 x 20 ms on 2 CPUs: median wall 65 ms against 20 (3.25x) -> (3.25 + 2) / 3 = 1.75
    assert c.loc["p50_wall_ms limit1 / nolimit", "expected"] == "p50_wall_ms limit1 / nolimit > 1.75"
    assert "median wall time is 65 ms against 20 ms" in c.loc["p50_wall_ms limit1 / nolimit", "why"]
    # 125m: median 252.5 ms (12.6x) -> 4.88
    assert c.loc["p50_wall_ms limit500m / nolimit", "expected"].endswith("> 4.88")
    # 500m: 40 ms of CPU fit the 50 ms quota: an equivalence band, no p-value
    assert c.loc["p50_wall_ms limit2 / nolimit", "expected"].endswith("within [0.8, 1.25]")
    assert math.isnan(c.loc["p50_wall_ms limit2 / nolimit", "p"])
    # F3: a 20 ms burst touches 1 or 2 periods, plus the idle one: [1.5, 3.5] per round
    assert c.loc["periods_per_round limit2", "expected"] == "periods_per_round limit2 within [1.5, 3.5]"
    # F6: 20 req/s in clumps of 10: 0.2 clumps per period; half of it; a quarter as the absolute bound
    assert c.loc["throttled_ratio clumped-limit", "expected"].endswith("> 0.1")
    assert c.loc["throttled_ratio steady-limit", "expected"].endswith("< 0.05")
    assert c.loc["avg_cores clumped-limit", "expected"].endswith("within [0.04, 0.09]")
    # the service checks name the quantile their windows' clumps support: 36 clumps of 10 per run -> p90
    assert "work p90 clumped-limit / clumped-nolimit" in c.index
    assert c.loc["work p90 clumped-limit / clumped-nolimit", "metric"] == "work_p90_ms"
    assert c.loc["work p90 clumped-limit / clumped-nolimit", "why"].startswith("p90: a p99 needs at least 368 clumps.")
    # F10: the overstatement itself: between 1 and 2 run queues' worth on 2 CPUs, tested against 1
    assert c.loc["throttled / pause in the scrape window, limit", "expected"].endswith("> 1")
    assert "[1, 2]" in c.loc["throttled / pause in the scrape window, limit", "why"]


def _latency_check(requests: int) -> pd.Series:
    lab = Lab()
    e2b(lab, requests=requests)
    _, checks = evaluate(lab, experiments=("E2b",))
    return checks[checks["id"] == "F6"].set_index("check").filter(regex="^work ", axis=0).iloc[0]


def test_the_quantile_follows_the_designs_clumps_per_run():
    """docs/STATISTICS.md §2: the clumps of a window are its independent draws, so they choose the quantile."""
    assert _latency_check(6000).name == "work p99 clumped-limit / clumped-nolimit"  # 600 clumps of 10
    # 200 requests would support p90 (36), their 20 clumps only p75 (13)
    row = _latency_check(200)
    assert row.name == "work p75 clumped-limit / clumped-nolimit" and row["metric"] == "work_p75_ms"
    assert row["why"].startswith("p75: a p90 needs at least 36 clumps (p99 368).")
    # 6 clumps: p50, at which the model predicts no rise (a clump's first half finishes before the quota runs out)
    row = _latency_check(60)
    assert row.name == "work p50 clumped-limit / clumped-nolimit"
    assert row["verdict"] == NOT_TESTABLE and row["requirement"] == "a predicted change at p50"


def test_a_window_too_short_for_any_quantile_compares_its_maximum_and_says_so():
    # quick's E2b: 50 requests in 5 clumps of 10 support no quantile: each run's slowest request, the maximum over
    # its 5 clumps, against the model's maximum over 5 clumps at independent phases
    row = _latency_check(50)
    assert row.name == "work max over 5 clumps clumped-limit / clumped-nolimit" and row["metric"] == "work_max_ms"
    assert row["why"].startswith("max over 5 clumps: a p50 needs at least 6 clumps (p75 13, p90 36, p99 368).")
    assert "Over 5 clumps at independent phases" in row["why"]
    # the model's maximum over 5 clumps: 95 ms under the 20 ms quota against 24 ms without it -> (r + 2) / 3
    assert "is 95 ms against 24 ms: 3.96x" in row["why"] and row["expected"].endswith("> 1.99")
    assert row["verdict"] == REPRODUCED, row["reason"]  # the synthetic maxima: 120 ms against 50 ms


def test_the_quantile_is_the_designs_and_a_short_run_does_not_change_it():
    # 60 requests scheduled per run: p90, whatever the runs hold; a run that lost requests (a generator that
    # died) has no p90, and the check says so instead of falling back to p50 for every run
    lab = Lab()
    e2b(lab)
    for i, row in enumerate(lab.metric_rows):
        if row[1:4] == ("E2b", "clumped-limit", 2) and row[4] in ("work_requests", "work_p90_ms"):
            lab.metric_rows[i] = (*row[:5], 30.0 if row[4] == "work_requests" else math.nan, *row[6:])
    _, checks = evaluate(lab, experiments=("E2b",))
    row = checks[checks["check"] == "work p90 clumped-limit / clumped-nolimit"].iloc[0]
    assert "360 /work requests per run in 36 clumps of 10" in row["why"]
    assert row["verdict"] == INCONCLUSIVE and "undefined in 1 of" in row["reason"], row["reason"]


def test_the_lab_parameters_give_the_labs_thresholds():
    """The paper profile's E2a arms (8 x 20 ms on 10 CPUs): thresholds below the lab's own ratios."""
    lab = Lab(num_cpu=10)
    paper = {
        "limit1": {"limit": 1},
        "limit500m": {"limit": "500m"},
        "nolimit": {"limit": None},
        "limit2": {"limit": 2},
        "limit1-2threads": {"limit": 1, "threads": 2, "work_ms": 80},
    }
    rng = np.random.default_rng(0)
    for variant, params in paper.items():
        spec = {**E2A_BASE, "threads": 8, "interval_ms": 1000, "rounds": 20, **params}
        lab.add("E2a", variant, spec, burst_values(spec, 10, rng), num_cpu=10)
    _, checks = evaluate(lab, experiments=("E2a",))
    c = checks.set_index("check")
    assert float(c.loc["p50_wall_ms limit1 / nolimit", "expected"].split("> ")[1]) < 84.4 / 34.3
    assert float(c.loc["p50_wall_ms limit500m / nolimit", "expected"].split("> ")[1]) < 260.4 / 34.3
    assert float(c.loc["throttled_ms limit1-2threads / limit1", "expected"].split("< ")[1]) > 1301.6 / 7052.5


# --------------------------------------------------------------------------
# exact zeros, proportions, shares


def test_zero_throttled_runs_are_a_result_not_a_missing_interval():
    # F4 with the two-thread arm unthrottled in 4 of 5 runs: the ratio of means still has an interval
    zeros = [0.0, 0.0, 0.0, 0.0, 300.0]
    got, checks = evaluate(full_lab(e2a={"change": _set({"limit1-2threads": {"throttled_ms": zeros}})}))
    check = checks[checks["check"] == "throttled_ms limit1-2threads / limit1"].iloc[0]
    assert check["verdict"] == REPRODUCED and check["hi"] < 0.3
    # unthrottled in every run: throttled time has no upper end, so identical zeros never bound the mean of
    # the arm from above (one run in ten throttled heavily would hide in 8 runs 43% of the time)
    got, checks = evaluate(full_lab(e2a={"change": _set({"limit1-2threads": {"throttled_ms": [0.0] * 5}})}))
    check = checks[checks["check"] == "throttled_ms limit1-2threads / limit1"].iloc[0]
    assert check["verdict"] == INCONCLUSIVE and "0 in all 8 runs" in check["reason"], check["reason"]
    assert "no number of runs can" in check["reason"]
    # with R = 3 it is shown and decides nothing either
    lab = Lab()
    rng = np.random.default_rng(3)
    for variant in ("limit1", "limit1-2threads"):
        spec = {**E2A_BASE, **E2A_ARMS[variant]}
        values = {k: v[:3] for k, v in burst_values(spec, 2, rng).items()}
        if variant == "limit1-2threads":
            values["throttled_ms"] = [0.0] * 3
        lab.add("E2a", variant, spec, values)
    _, checks = evaluate(lab, experiments=("E2a",))
    check = checks[checks["check"] == "throttled_ms limit1-2threads / limit1"].iloc[0]
    assert check["verdict"] == INCONCLUSIVE and "3 runs cannot reach level 0.025" in check["reason"]


def test_not_throttled_needs_an_absolute_bound_not_a_comparison():
    # busy 0.25 against idle 0.30 must not pass "throttling looks fine"
    got, checks = evaluate(full_lab(e8={"busy_throttled": 0.25}))
    row = checks[checks["check"] == "throttled_ratio busy-lim2x"].iloc[0]
    assert row["verdict"] == CONTRADICTED and row["lo"] > 0.05
    assert 0 <= row["lo"] <= row["effect"] <= row["hi"] <= 1  # a proportion's interval stays in [0, 1]
    # no throttled period in any of 5 runs: the 150 periods pooled bound the share below 0.024, but 5 runs do
    # not reach the level (0.5^5 = 0.031 > 0.025)
    got, checks = evaluate(full_lab(e2b={"steady_throttled": 0.0}))
    row = checks[checks["check"] == "throttled_ratio steady-limit"].iloc[0]
    assert row["verdict"] == INCONCLUSIVE and row["reason"] == (
        "0 in all 5 runs (0 of 150 periods pooled; exact upper bound 0.0243 at one-sided level 0.025): "
        "5 runs cannot reach level 0.025 (needs R >= 6)"
    )
    assert row["hi"] == pytest.approx(1 - 0.025 ** (1 / 150))
    # a sixth run decides it: both the runs and the pooled periods reach the level
    lab = one_more_run(full_lab(e2b={"steady_throttled": 0.0}), "E2b", "steady-limit")
    got, checks = evaluate(lab)
    row = checks[checks["check"] == "throttled_ratio steady-limit"].iloc[0]
    assert row["verdict"] == REPRODUCED and row["reason"] == (
        "0 in all 6 runs (0 of 180 periods pooled; exact upper bound 0.0203 at one-sided level 0.025)"
    )
    assert row["lo"] == 0 and row["hi"] == pytest.approx(1 - 0.025 ** (1 / 180))
    assert "Clopper-Pearson" in row["method"]


def one_more_run(lab: Lab, experiment: str, variant: str) -> Lab:
    """The lab with a run more of the variant, a copy of its first."""
    first = {r[4]: [r[5]] for r in lab.metric_rows if r[1:4] == (experiment, variant, 0)}
    repeats = {r[3] for r in lab.metric_rows if r[1:3] == (experiment, variant)}
    return lab.add(experiment, variant, lab.specs[(experiment, variant)], first, first_repeat=max(repeats) + 1)


def test_zeros_on_few_periods_stay_inconclusive_and_say_how_many_they_need():
    # 6 runs of 10 periods: the runs reach the level, the 60 periods do not (1 - 0.025^(1/60) = 0.06 > 0.05)
    verdict, lo, hi, reason = findings.zero_count_verdict(6, 60, "<", (0.05,), unit="periods")
    assert (verdict, lo) == (INCONCLUSIVE, 0.0) and hi == pytest.approx(1 - 0.025 ** (1 / 60))
    assert reason == (
        "0 in all 6 runs (0 of 60 periods pooled; exact upper bound 0.0596 at one-sided level 0.025): the interval "
        "[0, 0.0596] of the pooled share reaches 0.05 (0 events bound it below 0.05 only from 72 periods pooled)"
    )
    assert findings.zero_count_verdict(6, 72, "<", (0.05,))[0] == REPRODUCED
    assert findings.zero_count_verdict(6, 71, "<", (0.05,))[0] == INCONCLUSIVE
    # both short: both named
    reason = findings.zero_count_verdict(5, 60, "<", (0.05,), unit="periods")[3]
    assert "5 runs cannot reach level 0.025 (needs R >= 6); the interval [0, 0.0596]" in reason
    # a claim of a share above a threshold: zeros contradict it at the check's level, which "contradicted"
    # takes at Bonferroni (three decisive checks: one-sided 0.0083, R >= 7)
    assert findings.zero_count_verdict(6, 320, ">", (0.1,), level=1 - 0.05 / 3)[0] == INCONCLUSIVE
    assert findings.zero_count_verdict(7, 320, ">", (0.1,), level=1 - 0.05 / 3)[0] == CONTRADICTED


def test_zeros_of_a_share_contradict_only_at_the_bonferroni_level():
    # F6's clumped arm never throttled in 8 runs of 40 periods: contradicted at 1 - 0.05/3 (R >= 7 and
    # 1 - 0.0083^(1/320) = 0.015 < 0.1); with 6 runs the tie does not reach that level
    lab = full_lab(e2b={"clumped_throttled": 0.0, "clumped_periods": 40})
    for _ in range(3):
        lab = one_more_run(lab, "E2b", "clumped-limit")
    got, checks = evaluate(lab)
    row = checks[checks["check"] == "throttled_ratio clumped-limit"].iloc[0]
    assert row["verdict"] == CONTRADICTED, row["reason"]
    assert "0 in all 8 runs (0 of 320 periods pooled" in row["reason"]
    assert "contradicted also at the Bonferroni level 0.9833" in row["reason"]
    assert got["F6"]["verdict"] == CONTRADICTED
    lab = one_more_run(full_lab(e2b={"clumped_throttled": 0.0, "clumped_periods": 40}), "E2b", "clumped-limit")
    _, checks = evaluate(lab)
    row = checks[checks["check"] == "throttled_ratio clumped-limit"].iloc[0]
    assert row["verdict"] == INCONCLUSIVE
    assert "not contradicted at the Bonferroni level 0.9833" in row["reason"], row["reason"]


def test_a_run_without_a_counted_period_is_no_evidence():
    verdict, *_ = findings.zero_count_verdict(5, 150, "<", (0.05,))
    assert verdict == INCONCLUSIVE
    lab = full_lab(e8={"busy_throttled": 0.0})
    lab = one_more_run(lab, "E8", "busy-lim2x")
    lab.metric_rows = [
        (*r[:5], 0.0, *r[6:]) if r[1:4] == ("E8", "busy-lim2x", 5) and r[4] == "nr_periods" else r
        for r in lab.metric_rows
    ]
    _, checks = evaluate(lab)
    row = checks[checks["check"] == "throttled_ratio busy-lim2x"].iloc[0]
    assert row["verdict"] == INCONCLUSIVE
    assert "0 in all 5 runs (0 of 150 periods pooled" in row["reason"]
    assert "1 of 6 runs counted no periods and are no evidence either way" in row["reason"]


def test_the_quick_profile_runs_a_share_bound_often_enough_for_its_zeros():
    # a decisive "not throttled" share is reproduced from zeros only from 0.5^R <= 0.025 on (R >= 6): every
    # experiment holding one gets those runs in the quick profile
    design = load_design({"profile": "quick"}, PROJECT / "config")
    bounded = {
        (check.experiment, check.variant)
        for finding in findings.FINDINGS
        for check in finding.checks
        if check.scale == "logit" and check.relation == "<" and check.decisive and not check.premise
    }
    assert {experiment for experiment, _ in bounded} == {"E2b", "E8", "X5"}
    for experiment, variant in sorted(bounded):
        assert design.experiments[experiment].repeats_of(variant) >= stats.median_runs_needed(0.95) == 6, variant


def test_sparse_throttle_counts_get_an_exact_interval():
    got, checks = evaluate(full_lab(e2b={"clumped_throttled": 0.05, "clumped_periods": 40}))
    row = checks[checks["check"] == "throttled_ratio clumped-limit"].iloc[0]
    # below the bound at 95% (the reason keeps that interval), but not at F6's Bonferroni level over its 3
    # decisive checks, which judged it: the row shows that level and its wider interval, which reaches 0.1
    assert "sparse counts" in row["method"] and row["verdict"] == INCONCLUSIVE
    assert "not contradicted at the Bonferroni level 0.9833 over the finding's 3 decisive checks" in row["reason"]
    assert row["level"] == pytest.approx(1 - 0.05 / 3) and row["lo"] < 0.1 < row["hi"]
    assert "lies wholly on the other side" in row["reason"]  # the 95% interval, said in words
    got, checks = evaluate(full_lab(e2b={"clumped_throttled": 0.02, "clumped_periods": 40}))
    row = checks[checks["check"] == "throttled_ratio clumped-limit"].iloc[0]
    assert row["verdict"] == CONTRADICTED and "contradicted also at the Bonferroni level" in row["reason"]
    assert row["level"] == pytest.approx(1 - 0.05 / 3) and row["hi"] < 0.1  # drawn at the level that judged it
    assert row["lo"] <= row["effect"] <= row["hi"]


def test_f8_band_says_whether_it_tells_the_rules_apart(faithful):
    _, checks = faithful
    pods = checks[checks["check"] == "share_pod-p100m / share_pod-two E5 pods"].iloc[0]
    assert "CANNOT tell it from shares proportional to requests" in pods["why"]
    assert "0.0465 vs 0.0455" in pods["why"]
    two = checks[checks["check"] == "share_small / share_big E5 two-container"].iloc[0]
    assert "tells it from the other conversion" in two["why"]
    assert two["expected"].endswith("within [0.132, 0.219]")


def test_f8_readback_fails_when_nothing_was_read_back():
    got, checks = evaluate(full_lab(weights={"levels": 0}))
    row = checks[checks["check"] == "read back = design (E4)"].iloc[0]
    assert row["verdict"] == NOT_TESTABLE and row["requirement"] == "levels read back"
    assert "0 levels read back in 4 of 4 runs" in row["reason"]
    assert got["F8"]["verdict"] == NOT_TESTABLE


def test_disturbed_runs_are_named_beside_the_verdict():
    lab = Lab()
    rng = np.random.default_rng(1)
    for variant in ("nolimit", "limit1"):
        spec = {**E2A_BASE, **E2A_ARMS[variant]}
        lab.add("E2a", variant, spec, burst_values(spec, 2, rng), disturbed=(2,) if variant == "limit1" else ())
    _, checks = evaluate(lab, experiments=("E2a",))
    row = checks[checks["check"] == "p50_wall_ms limit1 / nolimit"].iloc[0]
    assert row["verdict"] == REPRODUCED
    assert "1 disturbed run(s) kept and marked (runs.csv); without them: reproduced" in row["reason"]


def test_a_verdict_that_hangs_on_disturbed_runs_is_not_trusted():
    """docs/STATISTICS.md §6: with the two disturbed runs the interval clears the threshold, without them (R = 3)
    it does not: the verdict hangs on them, so it is inconclusive; the runs stay in the tables, marked."""
    lab = Lab()
    nolimit = {**E2A_BASE, **E2A_ARMS["nolimit"]}
    lab.add("E2a", "nolimit", nolimit, {"p50_wall_ms": [28.0, 28.2, 27.8, 28.1, 27.9]})
    limit1 = {**E2A_BASE, **E2A_ARMS["limit1"]}
    lab.add("E2a", "limit1", limit1, {"p50_wall_ms": [50.0, 75.0, 60.0, 62.0, 61.0]}, disturbed=(3, 4))
    _, checks = evaluate(lab, experiments=("E2a",))
    row = checks[checks["check"] == "p50_wall_ms limit1 / nolimit"].iloc[0]
    assert row["verdict"] == INCONCLUSIVE
    assert (
        "the verdict hangs on 2 disturbed run(s) (kept and marked, runs.csv): with them reproduced, "
        "without them inconclusive"
    ) in row["reason"]


def test_a_share_ratio_tolerates_disturbed_runs_a_tail_does_not():
    """docs/STATISTICS.md §2: share ratios are insensitive to other work on their CPU (it takes from every member in
    proportion), so E5's runs disturbed after their retries count as any other: no verdict capped for them.
    The same runs marked disturbed under a latency check would (test above)."""
    lab = weights(Lab())
    for row in lab.run_rows:
        if row["experiment"] == "E5" and row["variant"] == "two-container":
            row["disturbed"] = row["repeat"] in (0, 1, 2)  # 3 of 5 disturbed: without them R = 2, no interval
    _, checks = evaluate(lab, experiments=("E4", "E5", "E10"))
    row = checks[checks["check"] == "share_small / share_big E5 two-container"].iloc[0]
    assert row["verdict"] == REPRODUCED
    assert "3 disturbed run(s) kept and counted (runs.csv): a ratio of shares of one CPU" in row["reason"]
    share_checks = [c for f in findings.FINDINGS for c in f.checks if c.metric.startswith("share_")]
    assert share_checks and {c.disturbance for c in share_checks} == {"insensitive"}
    latency = [c for f in findings.FINDINGS for c in f.checks if c.quantile_of or "wall" in c.metric]
    assert latency and {c.disturbance for c in latency} == {"sensitive"}


# --------------------------------------------------------------------------
# p-values: one-sided against each check's own threshold, agreeing with its interval (they
# replace the exact Mann-Whitney p of "equal distributions" and Holm's adjustment over them)


def test_the_p_shown_tests_the_checks_threshold_and_agrees_with_its_interval(faithful):
    _, checks = faithful
    within = checks[checks["expected"].str.contains(" within ")]
    assert within["p"].isna().all() and checks["p_holm"].isna().all()  # no Holm column any more
    assert checks[checks["role"] == "premise"]["p"].isna().all()
    shown = checks[checks["p"].notna()]
    assert len(shown) > 10
    for row in shown.itertuples():
        # a 95% two-sided interval clears the threshold exactly when the one-sided p is below 0.025
        cleared = row.verdict == REPRODUCED
        assert (row.p < 0.025) == cleared or row.verdict == NOT_TESTABLE, (row.check, row.p, row.verdict)
    for scenario in (SCENARIOS["F1"][CONTRADICTED], SCENARIOS["F1"][INCONCLUSIVE]):
        _, checks = evaluate(full_lab(**scenario))
        row = checks[checks["check"] == "p50_wall_ms limit1 / nolimit"].iloc[0]
        assert row["p"] >= 0.025 and row["verdict"] != REPRODUCED


def test_a_findings_verdict_depends_on_its_own_checks_only(faithful):
    _, checks = faithful
    lab_only = full_lab()
    for experiment, variant in {(r["experiment"], r["variant"]) for r in lab_only.run_rows}:
        if experiment.startswith("X"):
            lab_only.drop(experiment, variant)
    _, without = evaluate(lab_only)
    lab_ids = [f.id for f in findings.FINDINGS if not f.ours]
    shown = checks[checks["id"].isin(lab_ids)].set_index(["id", "check"])
    alone = without[without["id"].isin(lab_ids)].set_index(["id", "check"]).loc[shown.index]
    assert shown["p"].tolist() == pytest.approx(alone["p"].tolist(), nan_ok=True)
    assert shown["verdict"].tolist() == alone["verdict"].tolist()


def test_threshold_p_known_answers():
    # one sample: mean of logs exactly at log(threshold) gives p = 0.5; Welch's two samples likewise
    x = np.exp(np.array([-0.1, 0.0, 0.1]))
    assert stats.threshold_p(x, threshold=1.0, relation=">", log=True) == pytest.approx(0.5)
    assert stats.threshold_p(2 * x, x, threshold=2.0, relation="<", log=True) == pytest.approx(0.5)
    assert stats.threshold_p(x * 3, x, threshold=2.0, relation=">", log=True) < 0.025
    assert math.isnan(stats.threshold_p([1.0, 1.0, 1.0], threshold=2.0, relation=">", log=False))


def test_confidence_level_changes_the_intervals():
    wide = by_id(findings.evaluate(e2a(Lab()).evidence(experiments=("E2a",), level=0.99))[0])["F1"]
    narrow = by_id(findings.evaluate(e2a(Lab()).evidence(experiments=("E2a",), level=0.80))[0])["F1"]
    assert wide["lo"] < narrow["lo"] < narrow["hi"] < wide["hi"]


@pytest.mark.parametrize(
    "lo, hi, relation, threshold, verdict",
    [
        (0.9, 1.1, "within", (0.8, 1.25), REPRODUCED),
        (0.7, 1.1, "within", (0.8, 1.25), INCONCLUSIVE),  # the whole interval must lie inside the band
        (0.85, 1.3, "within", (0.8, 1.25), INCONCLUSIVE),
        (1.3, 1.6, "within", (0.8, 1.25), CONTRADICTED),
        (0.5, 0.7, "within", (0.8, 1.25), CONTRADICTED),
        (1.3, 1.6, ">", (1.2,), REPRODUCED),
        (1.3, 1.6, "<", (1.2,), CONTRADICTED),
        (math.nan, math.nan, ">", (1.2,), INCONCLUSIVE),
    ],
)
def test_interval_verdict(lo, hi, relation, threshold, verdict):
    assert findings.interval_verdict(lo, hi, relation, threshold) == verdict


@pytest.mark.parametrize(
    ("v", "runs", "relation", "threshold", "level", "value_range", "verdict", "needed"),
    [
        # a share (range [0, 1]) at 0 in every run: its mean lies in [0, 1 - 0.025^(1/R)]
        (0.0, 5, "<", (0.05,), 0.95, (0.0, 1.0), INCONCLUSIVE, 72),
        (0.0, 72, "<", (0.05,), 0.95, (0.0, 1.0), REPRODUCED, None),
        # a counter without an upper end: zeros never bound its mean from above
        (0.0, 50, "<", (0.475,), 0.95, (0.0, math.inf), INCONCLUSIVE, 0),
        # 1 in every run against > 0.475: decided at 95% from R = 5, at the Bonferroni level of five checks
        # (one-sided 0.005) from R = 8
        (1.0, 5, ">", (0.475,), 0.95, (0.0, math.inf), REPRODUCED, None),
        (1.0, 5, ">", (0.475,), 0.99, (0.0, math.inf), INCONCLUSIVE, 8),
        (1.0, 8, ">", (0.475,), 0.99, (0.0, math.inf), REPRODUCED, None),
        # far outside a band: contradicted
        (5.0, 6, "within", (0.8, 1.25), 0.95, (0.0, math.inf), CONTRADICTED, None),
    ],
)
def test_tie_verdict_at_the_checks_level(v, runs, relation, threshold, level, value_range, verdict, needed):
    got, lo, hi, reason = findings.tie_verdict(v, runs, relation, threshold, level, value_range)
    assert got == verdict, reason
    if needed is not None:
        need = "no number of runs can" if needed == 0 else f"needs R >= {needed}"
        assert f"{runs} runs cannot reach level {(1 - level) / 2:.3g} ({need})" in reason


# --------------------------------------------------------------------------
# the CLI the Snakemake rules call


def _cli(tmp_path: Path, raw: list[Path]) -> int:
    tables = tmp_path / "tables"
    code = analysis.main(["tables", "--raw", *map(str, raw), "--out-dir", str(tables)])
    if code:
        return code
    code = analysis.main(
        [
            "stats",
            "--tables-dir",
            str(tables),
            "--metrics",
            str(tables / "metrics.csv"),
            "--estimates",
            str(tables / "estimates.csv"),
            "--confidence",
            "0.9",
            "--seed",
            "1",
        ]
    )
    if code:
        return code
    return analysis.main(
        [
            "findings",
            "--tables-dir",
            str(tables),
            "--metrics",
            str(tables / "metrics.csv"),
            "--experiments",
            "E1",
            "E2a",
            "E3",
            "S1",
            "--findings",
            str(tables / "findings.csv"),
            "--checks",
            str(tables / "checks.csv"),
            "--confidence",
            "0.9",
        ]
    )


def test_cli_writes_every_table(tmp_path, capsys):
    assert _cli(tmp_path, sorted(FIXTURES.glob("*/*/rep*.jsonl"))) == 0
    written = sorted(p.name for p in (tmp_path / "tables").iterdir())
    assert written == sorted(
        [f"{name}.csv" for name in tidy.TABLE_NAMES] + ["metrics.csv", "estimates.csv", "findings.csv", "checks.csv"]
    )
    table = pd.read_csv(tmp_path / "tables" / "findings.csv")
    assert table["id"].tolist() == [f.id for f in findings.FINDINGS]
    # the fixtures hold one run of two E2a variants: a check on those two is judged (one run decides
    # nothing), its finding's checks on other arms set aside; every other finding is not testable
    assert set(table["verdict"]) == {NOT_TESTABLE, INCONCLUSIVE}
    assert table.loc[table["verdict"] == INCONCLUSIVE, "id"].tolist() == ["F1"]
    checks = pd.read_csv(tmp_path / "tables" / "checks.csv", keep_default_na=False)
    assert (checks.loc[checks["verdict"] == NOT_TESTABLE, "requirement"] != "").all()
    assert (pd.read_csv(tmp_path / "tables" / "estimates.csv")["level"] == 0.9).all()


def test_cli_names_a_broken_log_in_one_line(tmp_path, capsys):
    broken = tmp_path / "raw" / "E2a" / "limit1" / "rep0.jsonl"
    broken.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "E2a/limit1/rep0.jsonl", broken)
    broken.write_text(broken.read_text()[:-40])
    assert _cli(tmp_path, [broken]) == 1
    err = capsys.readouterr().err
    assert str(broken) in err and "line 12" in err and "Traceback" not in err
    assert not (tmp_path / "tables").exists()  # nothing half-written


# --------------------------------------------------------------------------
# the profiles' own parameters (config/profiles): every threshold derives, or a named requirement says why not


#: What each profile's service windows support (docs/STATISTICS.md §2): ci's 1.5 s windows hold 3 clumps of 10 (X5's
#: steady arrivals 20 or more requests, each its own clump), quick's 2.5 s (E2b, X6) 5, its 2 s (E8) 4, its 10 s (E7)
#: 20, the paper profile's 60 s 120 clumps of 50 (and X5's steady arrivals 2,700 or more requests)
WINDOWS = {
    "ci": {"E2b": "max over 3 clumps", "E7": "max over 3 clumps", "E8": "max over 3 clumps", "X5": "p75"}
    | {"X6": "max over 3 clumps"},
    "quick": {
        "E2b": "max over 5 clumps",
        "E7": "p75",
        "E8": "max over 4 clumps",
        "X5": "p90",
        "X6": "max over 5 clumps",
    },
    "paper": {"E2b": "p90", "E7": "p90", "E8": "p90", "X5": "p99", "X6": "p90"},
}


@pytest.mark.parametrize(("profile", "num_cpu"), [("ci", 2), ("quick", 2), ("paper", 10)])
def test_thresholds_derive_from_each_profiles_parameters(profile, num_cpu):
    from conftest import PROJECT

    design = load_design({"profile": profile}, PROJECT / "config")
    lab = Lab(num_cpu=num_cpu)
    rng = np.random.default_rng(0)
    for name, exp in design.experiments.items():
        for variant, spec in exp.variants.items():
            spec, _ = calibration.resolve(spec, None)  # a calibrated arm's rate, as its raw log records it
            given = spec.to_dict()
            if name == "E2a":
                values = burst_values(given, num_cpu, rng, n=exp.repeats)
            elif spec.rps is not None:
                window = (spec.duration_ms or 0) / 1000
                values = {"work_requests": [spec.rps * window] * exp.repeats}
            else:
                values = {"placeholder": [1.0] * exp.repeats}
            lab.add(name, variant, given, values)
    _, checks = evaluate(lab, experiments=tuple(design.experiments))
    for row in checks.itertuples():
        derived = "(threshold not derived)" not in row.expected
        assert derived or row.requirement, (row.check, row.reason)
    latency = checks[checks["metric"].str.startswith("work_") & (checks["requirement"] != "variants in this profile")]
    assert len(latency) and set(latency["experiment"]) == set(WINDOWS[profile])
    for row in latency.itertuples():
        assert row.check.startswith(f"work {WINDOWS[profile][row.experiment]} "), row.check
    c = checks.set_index("check")
    if profile == "quick":
        assert c.loc["p50_wall_ms limit1 / nolimit", "expected"].endswith("> 1.75")
        assert c.loc["work max over 5 clumps clumped-limit / clumped-nolimit", "expected"].endswith("> 1.99")
        assert c.loc["work max over 4 clumps busy-lim2x / idle-lim2x", "expected"].endswith("> 3.22")
    if profile == "ci":
        assert c.loc["work max over 3 clumps clumped-limit / clumped-nolimit", "expected"].endswith("> 1.88")
        assert c.loc["work quantile two-limit / one-double", "requirement"] == "variants in this profile"
    if profile == "paper":
        # the lab's own parameters: thresholds below what the lab measured
        assert float(c.loc["p50_wall_ms limit1 / nolimit", "expected"].split("> ")[1]) < 84.4 / 34.3
        assert float(c.loc["work p90 clumped-limit / clumped-nolimit", "expected"].split("> ")[1]) < 370.1 / 74.4
        assert float(c.loc["work p90 busy-lim2x / idle-lim2x", "expected"].split("> ")[1]) < 6045 / 98.7


# --------------------------------------------------------------------------
# an emulated CPU (the vm backend without KVM): timings not testable, read-outs judged


def test_timed_checks_are_not_testable_on_an_emulated_cpu_and_read_outs_are_judged():
    lab = full_lab()
    for row in lab.run_rows:
        row["cpu_accel"] = "tcg"
    rows, checks = evaluate(lab)
    for fid in ("F1", "F2", "F3", "F4", "F6", "F7", "F9", "F10", "F11"):
        assert rows[fid]["verdict"] == findings.NOT_TESTABLE, fid
        assert "needs a CPU whose timing is real: emulated CPU (TCG)" in rows[fid]["reason"], fid
    assert rows["F5"]["verdict"] == findings.REPRODUCED  # GOMAXPROCS is read back, not timed
    agreement = checks[checks["check"] == "read back = design (E4)"].iloc[0]
    assert agreement["verdict"] == findings.REPRODUCED
    # the same lab on a CPU that keeps real time (KVM, or a host) is judged as usual
    for row in lab.run_rows:
        row["cpu_accel"] = "kvm"
    assert evaluate(lab)[0]["F1"]["verdict"] == findings.REPRODUCED


def test_f12_throttling_left_by_a_budget_contradicts_through_the_absolute_bound():
    # completion back to the unlimited one, yet throttled in most rounds: "not throttled" has its own bound
    got, checks = evaluate(
        full_lab(x1={"change": _set({"budget-full": {"throttled_round_share": [5 / 6, 1.0, 4 / 6, 1.0, 5 / 6]}})})
    )
    f12 = checks[checks["id"] == "F12"].set_index("check")
    assert f12.loc["throttled_round_share budget-full", "verdict"] == CONTRADICTED
    assert "0.475" in f12.loc["throttled_round_share budget-full", "expected"]
    assert got["F12"]["verdict"] == CONTRADICTED


def test_f13_states_the_models_direction_not_the_first_guess():
    # the model says a shorter period makes a burst larger than its quota SLOWER (docs/EXPERIMENTS.md)
    got, checks = evaluate(full_lab())
    f13 = checks[checks["id"] == "F13"].set_index("check")
    assert f13.loc["p50_wall_ms period20 / period100", "expected"].endswith("> 1.36")
    assert f13.loc["p50_wall_ms period5 / period100", "expected"].endswith("> 1.46")
    assert f13.loc["throttled_per_round period5 / period100", "expected"].endswith("> 5.71")


def test_f17_is_non_inferiority_not_a_demand_for_speed():
    # "costs neither latency nor throughput" is non-inferiority (g2 at most 10% worse than g1). The old
    # check demanded g2 be faster by the model's ratio (and throughput the same either way): a gain for g2 was a
    # contradiction there; now it is no cost (the supporting "same" check shows it off the model)
    got, checks = evaluate(full_lab(x6={"gain": 1.6}))
    f17 = checks[checks["id"] == "F17"].set_index("check")
    assert f17.loc["throughput_rps closed-500m-g2 / closed-500m-g1", "verdict"] == REPRODUCED
    assert f17.loc["throughput_rps closed-500m-g2 / closed-500m-g1 (same)", "verdict"] == CONTRADICTED
    assert f17.loc["throughput_rps closed-500m-g2 / closed-500m-g1 (same)", "role"] == "supporting"
    assert got["F17"]["verdict"] == REPRODUCED, got["F17"]["reason"]
    # half the throughput on two threads: a cost, contradicted
    got, checks = evaluate(full_lab(x6={"gain": 0.5}))
    f17 = checks[checks["id"] == "F17"].set_index("check")
    assert f17.loc["throughput_rps closed-500m-g2 / closed-500m-g1", "verdict"] == CONTRADICTED
    assert got["F17"]["verdict"] == CONTRADICTED
    # a true latency ratio g1 / g2 of ~1.3 decides "no cost" (g2 / g1 ~ 0.77 < 1.1), whatever the magnitude
    got, checks = evaluate(full_lab(x6={"slower": 1.3}))
    f17 = checks[checks["id"] == "F17"].set_index("check")
    assert f17.loc["work p90 clumped-500m-g2 / clumped-500m-g1", "expected"].endswith("< 1.1")
    assert f17.loc["work p90 clumped-500m-g2 / clumped-500m-g1", "verdict"] == REPRODUCED
    assert got["F17"]["verdict"] == REPRODUCED
    # the magnitude check puts the load generator on the second CPU
    assert "the load generator shares the second" in f17.loc["work p90 clumped-500m-g1 / clumped-500m-g2", "why"]


def test_f16_thresholds_come_from_the_poisson_model_of_the_profile():
    got, checks = evaluate(full_lab())
    f16 = checks[checks["id"] == "F16"].set_index("check")
    # 45 req/s x 4 ms against a 20 ms quota (5 requests): P(N > 5) / P(N >= 1) with N ~ Poisson(4.5) = 0.300
    assert f16.loc["throttled_ratio use30", "expected"].endswith("< 0.0751")
    assert f16.loc["throttled_ratio use90", "expected"].endswith("> 0.15")
    assert not f16.loc["avg_cores use30", "decisive"]


def test_f17_counts_the_services_cpus_not_the_load_generators():
    # the generator runs pinned to its own CPU and writes a header too: num_cpu 1 there says nothing of the node
    lab = full_lab()
    for row in [r for r in lab.header_rows if r["experiment"] == "X6"]:
        row["command"] = "serve"
        lab.header_rows.append({**row, "command": "load", "num_cpu": 1})
    for row in lab.header_rows:
        row.setdefault("command", "burst")
    got, checks = evaluate(lab)
    assert got["F17"]["verdict"] == REPRODUCED, checks[checks["id"] == "F17"].to_string()


def test_a_variant_the_backend_left_out_names_the_backends_reason():
    # docker cannot write a burst budget: the plan leaves X1's budget arms out (model/coverage.py), and the
    # findings say why rather than "not in this profile"
    lab = full_lab()
    lab.drop("X1", "budget-full").drop("X1", "budget-half")
    reason = "not testable on the docker backend: docker cannot express a CFS burst budget"
    evidence = dataclasses.replace(lab.evidence(), left_out={"X1/budget-full": reason, "X1/budget-half": reason})
    rows, checks = findings.evaluate(evidence)
    f12 = by_id(rows)["F12"]
    assert f12["verdict"] == NOT_TESTABLE
    assert f"X1 budget-full: {reason}" in f12["reason"] and "not in this profile" not in f12["reason"]
    # a variant missing without a reason is still "not in this profile"
    _, plain = evaluate(lab)
    assert "variant not in this profile: X1 budget-full" in plain[plain["id"] == "F12"]["reason"].iloc[0]


def test_an_experiment_the_backend_left_out_whole_names_the_backends_reasons():
    # kind on a cgroup v1 host can run none of E2b's variants (two ask for a request above their limit, the
    # third for a pinned node): the plan drops the experiment, and the findings give those reasons, not "its
    # profile leaves it out"
    lab = full_lab()
    for variant in ("steady-limit", "clumped-limit", "clumped-nolimit", "steady-nolimit"):
        lab.drop("E2b", variant)
    refused = "not testable on the kind backend: a container requests more CPU than its limit (500m > 200m)"
    pinned = "not testable on the kind backend on this cgroup v1 host: pinning a kind node container fails"
    left_out = {"E2b/steady-limit": refused, "E2b/clumped-limit": refused, "E2b/clumped-nolimit": pinned}
    evidence = dataclasses.replace(
        lab.evidence(), profile_experiments=lab.evidence().profile_experiments - {"E2b"}, left_out=left_out
    )
    _, checks = findings.evaluate(evidence)
    on_e2b = checks[checks["experiment"] == "E2b"]
    assert not on_e2b.empty and (on_e2b["verdict"] == NOT_TESTABLE).all()
    for reason in on_e2b["reason"]:
        assert "not in this run" not in reason and "not testable on the kind backend" in reason, reason
        assert reason.startswith("needs variants this backend can run: E2b "), reason
    # an experiment the profile leaves out, with no reason of the backend's, still says so
    plain = dataclasses.replace(evidence, left_out={})
    reasons = findings.evaluate(plain)[1].query("experiment == 'E2b'")["reason"]
    assert all("E2b is not in this run (its profile" in r for r in reasons)


def _blocks_that_move_together(lab: Lab, experiment: str, variants: tuple[str, ...], sd: float, seed: int) -> Lab:
    """Every metric of the variants' run k scaled by one factor per block k: what a common arrival schedule does
    to a latency (a block that drew a collision of clumps is slow in every arm)."""
    factors = np.exp(sd * np.random.default_rng(seed).standard_normal(64))
    lab.metric_rows = [
        (*r[:5], r[5] * factors[r[3]], *r[6:]) if r[1] == experiment and r[2] in variants else r
        for r in lab.metric_rows
    ]
    return lab


def test_f7_compares_the_arms_block_by_block_on_their_common_arrivals():
    """E7's arms of one repeat share their arrival seed, so a block whose arrivals collide is slow in both: the
    per-block ratio holds the split's cost steady where each arm's runs spread widely. Paired, F7 is decided;
    the same runs judged as two independent samples (Welch) are not. A block whose runs drew different arrival
    seeds (a log from before the seeds were shared) pairs nothing, and the check says so."""
    lab = _blocks_that_move_together(full_lab(e7={"split_ratio": 1.3}), "E7", ("one-limit", "two-half"), 0.6, 5)
    evidence = lab.evidence()
    rows, checks = evaluate(lab)
    row = checks[checks["check"] == "work p90 two-half / one-limit"].iloc[0]
    assert rows["F7"]["verdict"] == REPRODUCED, row["reason"]
    assert "paired" in row["method"] and "R = 5 blocks" in row["method"], row["method"]
    assert 1.1 < row["lo"] < 1.3 < row["hi"] < 1.6
    check = next(c for c in services_findings.F7.checks if c.variant == "two-half")
    assert check.paired
    welch = engine.evaluate_check("F7", dataclasses.replace(check, paired=False), evidence)
    assert welch.verdict == INCONCLUSIVE and welch.lo < 1 < welch.hi, (welch.lo, welch.hi)
    # one block on two arrival seeds: no longer a block
    for run in lab.run_rows:
        if run["experiment"] == "E7" and run["variant"] == "two-half" and run["repeat"] == 2:
            run["arrival_seed"] = run["arrival_seed"] + 1
    got = engine.evaluate_check("F7", check, lab.evidence())
    assert got.verdict == INCONCLUSIVE
    assert "1 repeat(s) ran two-half and one-limit on different or unrecorded arrival seeds" in got.reason
    # logs without the seed at all (made before the runner recorded it)
    for run in lab.run_rows:
        run.pop("arrival_seed", None)
    got = engine.evaluate_check("F7", check, lab.evidence())
    assert got.verdict == INCONCLUSIVE and "5 repeat(s)" in got.reason, got.reason


def test_a_paired_check_is_a_ratio_of_a_metrics_own_values_on_the_log_scale():
    check = next(c for c in services_findings.F7.checks if c.variant == "two-half")
    with pytest.raises(ValueError, match="paired=True needs a ratio on the log scale"):
        dataclasses.replace(check, scale="linear")
    with pytest.raises(ValueError, match="values computed"):
        dataclasses.replace(check, values=lambda evidence, variant: np.ones(3))


def test_a_check_whose_variants_the_profile_leaves_out_is_set_aside_not_the_whole_finding():
    """The quick profile leaves E7's two-limit and one-double to the paper profile (54+ repeats per arm): F7 is
    judged on two-half / one-limit alone and says so (docs/STATISTICS.md §5: a requirement belongs to the checks that
    need it). With every decisive check's variants left out it is not testable; what this machine cannot
    express (a backend's reason) still makes the finding not testable."""
    lab = full_lab()
    rows, _ = evaluate(lab)
    assert rows["F7"]["verdict"] == REPRODUCED
    lab.drop("E7", "two-limit").drop("E7", "one-double")
    rows, checks = evaluate(lab)
    f7 = rows["F7"]
    assert f7["verdict"] == REPRODUCED, f7["reason"]
    assert (
        "judged on the 1 decisive check this profile measures; set aside: work quantile two-limit / one-double"
        in (f7["reason"])
    )
    c = checks[checks["id"] == "F7"].set_index("check")
    assert c.loc["work quantile two-limit / one-double", "verdict"] == NOT_TESTABLE
    # the judged check failing still decides: set aside is not a way around a failed check
    worse = full_lab(e7={"split_ratio": 0.5})
    worse.drop("E7", "two-limit").drop("E7", "one-double")
    assert evaluate(worse)[0]["F7"]["verdict"] != REPRODUCED
    lab.drop("E7", "two-half")
    assert evaluate(lab)[0]["F7"]["verdict"] == NOT_TESTABLE
    # the backend's reason (not the profile's scope): the whole finding is not testable
    backend = full_lab()
    backend.drop("E7", "two-limit").drop("E7", "one-double")
    reason = "not testable on this backend: a made-up reason"
    evidence = dataclasses.replace(backend.evidence(), left_out={"E7/two-limit": reason, "E7/one-double": reason})
    assert by_id(findings.evaluate(evidence)[0])["F7"]["verdict"] == NOT_TESTABLE


def test_f8_shares_on_a_cgroup_v1_real_runc_are_not_testable():
    """The real node on this v1 host read E5's two-container shares as 102 : 1024 under runc 1.4.3: a real runc
    converts shares to v2 weights only on cgroup v2, so the runtime conversions cannot be told apart on v1."""
    lab = full_lab(backend="kubernetes")
    for row in lab.run_rows:
        row["cgroup_version"] = 1
    got, checks = evaluate(lab)
    row = checks[checks["check"] == "share_small / share_big E5 two-container"].iloc[0]
    assert row["verdict"] == NOT_TESTABLE
    assert "happen only on cgroup v2" in row["reason"] and "kubernetes on cgroup v1" in row["reason"]
    lab = full_lab(backend="kubernetes")
    for row in lab.run_rows:
        row["cgroup_version"] = 2
    _, checks = evaluate(lab)
    assert checks[checks["check"] == "share_small / share_big E5 two-container"].iloc[0]["verdict"] != NOT_TESTABLE


# --------------------------------------------------------------------------
# premises, least-favourable thresholds and three zones, ties, Bonferroni


def _with_metric(lab: Lab, experiment: str, variant: str, metric: str, values: list[float]) -> Lab:
    """The lab with one variant's per-run values of one metric replaced (repeat order)."""
    it = iter(values)
    lab.metric_rows = [
        (*r[:5], next(it), *r[6:]) if r[1:3] == (experiment, variant) and r[4] == metric else r for r in lab.metric_rows
    ]
    return lab


def test_f16_an_arm_at_59_percent_of_the_limit_is_not_testable_never_contradicted():
    # the quick run of use90 ran at 59% of the limit (a steady request cost ~2.6 ms, not 4), and
    # its throttled share, 0.09, lay below the 0.15 threshold of the 90% design: the model at the load reached
    # predicts about that, so the data agree with it. It used to read "contradicted".
    cores = [0.2 * 0.59 * f for f in (0.99, 1.01, 1.0, 0.98, 1.02)]
    lab = _with_metric(
        full_lab(x5={"loud": 0.09, "quiet": 0.005, "quiet_periods": 400}), "X5", "use90", "avg_cores", cores
    )
    got, checks = evaluate(lab)
    f16 = checks[checks["id"] == "F16"].set_index("check")
    assert f16.loc["avg_cores use90", "verdict"] == CONTRADICTED  # the premise failed ...
    assert f16.loc["avg_cores use90", "role"] == "premise"
    gated = f16.loc["throttled_ratio use90"]
    assert gated["verdict"] == NOT_TESTABLE and gated["requirement"] == "a premise that holds"
    assert gated["reason"].startswith("premise failed: avg_cores use90") and "59% of the 200m limit" in gated["reason"]
    assert "[80%, 100%)" in gated["reason"] and "alone: " in gated["reason"]
    assert got["F16"]["verdict"] == NOT_TESTABLE, got["F16"]["reason"]
    assert "premise failed" in got["F16"]["reason"]
    # the quiet arm's check is not gated by use90's premise: it keeps its own verdict
    assert f16.loc["throttled_ratio use30", "verdict"] == REPRODUCED


def test_an_undecided_premise_caps_the_finding_at_inconclusive():
    # use90's CPU straddles 80% of the limit: the premise is undecided, so its checks cannot decide
    cores = [0.2 * f for f in (0.55, 1.0, 0.7, 0.95, 0.8)]
    got, checks = evaluate(_with_metric(full_lab(), "X5", "use90", "avg_cores", cores))
    f16 = checks[checks["id"] == "F16"].set_index("check")
    assert f16.loc["avg_cores use90", "verdict"] == INCONCLUSIVE
    assert f16.loc["throttled_ratio use90", "verdict"] == INCONCLUSIVE
    assert "premise undecided" in f16.loc["throttled_ratio use90", "reason"]
    assert got["F16"]["verdict"] == INCONCLUSIVE


def test_premise_bands_follow_the_designs_direction():
    _, checks = evaluate(full_lab())
    c = checks.set_index("check")
    # "90% of the limit" of 200m: [0.8, 1.0) x 0.2 cores, not 0.18 x/÷ 1.5
    assert c.loc["avg_cores use90", "expected"].endswith("within [0.16, 0.2]")
    assert "one-sided as the design is" in c.loc["avg_cores use90", "why"]


def test_f4_takes_the_end_least_favourable_to_fewer_throttles():
    # 1 x 40 ms against 2 x 20 ms at 250m on 2 CPUs: the model's ratio of throttled time lies in [0.439, 0.878]
    # as the kernel counts 1 or 2 queues; the threshold is sqrt(0.878) = 0.937, not sqrt(0.439) = 0.663
    _, checks = evaluate(full_lab())
    row = checks[checks["check"] == "throttled_ms limit1-2threads / limit1"].iloc[0]
    assert row["expected"].endswith("< 0.937") and "[0.439, 0.878]" in row["why"]
    assert "least favourable" in row["end"]
    assert "weaker than modelled: between 1 and 0.937" in row["zones"]


def test_three_zones_weaker_than_modelled_is_shown_not_reproduced():
    # F1's limit1 only 1.01-1.08x slower against a threshold of 1.75: the direction holds, the size does not;
    # the old rule called it "contradicted"
    weak = _set({"limit1": {"p50_wall_ms": [29.4, 29.6, 29.3, 29.5, 29.4]}})
    got, checks = evaluate(full_lab(e2a={"change": weak}))
    row = checks[checks["check"] == "p50_wall_ms limit1 / nolimit"].iloc[0]
    assert row["verdict"] == WEAKER and "between no effect (1)" in row["reason"]
    assert got["F1"]["verdict"] == WEAKER
    # F4's throttled time at 0.8 of limit1's: fewer, but fewer than the least favourable model says
    got, checks = evaluate(full_lab(e2a={"change": _scale({"limit1-2threads": {"throttled_ms": 0.0}})}))
    assert got["F4"]["verdict"] in (REPRODUCED, INCONCLUSIVE)


def _tied(variant: str, metric: str, value: float, runs: int):
    """The variant with ``runs`` runs (its other metrics cycled) and ``metric`` at ``value`` in every one."""

    def change(name: str, spec: dict, values: dict) -> None:
        if name == variant:
            for key, got in values.items():
                values[key] = [got[i % len(got)] for i in range(runs)]
            values[metric] = [value] * runs

    return change


def test_identical_runs_of_an_exact_counter_decide():
    # F3's 2.2 periods per round in all 8 runs: its check is on the median run, whose order-statistic interval
    # is [v, v] for identical runs, valid for discrete data, from R = 6 at a one-sided 0.025
    got, checks = evaluate(full_lab(e2a={"change": _tied("limit2", "periods_per_round", 2.2, 8)}))
    row = checks[checks["check"] == "periods_per_round limit2"].iloc[0]
    assert row["verdict"] == REPRODUCED and row["lo"] == row["hi"] == 2.2, row["reason"]
    assert "2.2 in all 8 runs" in row["reason"] and "estimand: the median run" in row["method"]
    # at R = 5 the median run's level is 0.5^5 = 0.031, beyond 0.025: inconclusive, never decided at 0.031
    got, checks = evaluate(full_lab(e2a={"change": _tied("limit2", "periods_per_round", 2.2, 5)}))
    row = checks[checks["check"] == "periods_per_round limit2"].iloc[0]
    assert row["verdict"] == INCONCLUSIVE and "5 runs cannot reach level 0.025 (needs R >= 6)" in row["reason"]
    assert "0.0312" not in row["reason"]
    # outside the band, identical runs contradict
    got, checks = evaluate(full_lab(e2a={"change": _tied("limit2", "periods_per_round", 5.0, 8)}))
    assert checks[checks["check"] == "periods_per_round limit2"].iloc[0]["verdict"] == CONTRADICTED
    # R = 4 decides nothing
    got, checks = evaluate(full_lab(e2a={"change": _tied("limit2", "periods_per_round", 2.2, 4)}))
    assert checks[checks["check"] == "periods_per_round limit2"].iloc[0]["verdict"] == INCONCLUSIVE


def test_f12_one_burst_per_round_in_every_run_decides():
    got, checks = evaluate(full_lab(x1={"change": _tied("budget-full", "bursts_per_round", 1.0, 6)}))
    row = checks[checks["check"] == "bursts_per_round budget-full"].iloc[0]
    # the bound on the mean of 6 runs at 1: a run differs with probability at most 0.459, so the mean is at
    # least 0.541 > 0.475
    assert row["verdict"] == REPRODUCED and "tie rule for the mean: 1 in all 6 runs" in row["method"], row["reason"]
    assert row["lo"] == pytest.approx(0.025 ** (1 / 6)) and row["hi"] == math.inf


def test_the_tie_rules_numbers():
    assert stats.tie_level(5) == pytest.approx(0.03125) and stats.tie_level(6) == pytest.approx(0.015625)
    # the median run at a one-sided 0.025, 0.0125 (Bonferroni over 2) and 0.005 (over 5)
    assert [stats.median_runs_needed(level) for level in (0.95, 0.975, 0.99)] == [6, 7, 8]
    lo, hi = stats.mean_tie_bound(0.0, 6)
    assert lo == 0 and hi == math.inf
    lo, hi = stats.mean_tie_bound(2.0, 6, low=0.0, high=4.0)
    pi = 1 - 0.025 ** (1 / 6)
    assert pi == pytest.approx(0.459, abs=1e-3) and (lo, hi) == pytest.approx((2 - 2 * pi, 2 + 2 * pi))
    # at the level a check is judged at: Bonferroni over five checks, one-sided 0.005
    assert stats.mean_tie_bound(1.0, 6, level=0.99)[0] == pytest.approx(0.005 ** (1 / 6))
    assert stats.tied([1.0, 2.0, 1.0]) is None and stats.tied([3.0, 3.0]) == 3.0


def test_contradicted_needs_the_bonferroni_level_and_the_reason_says_so():
    # F1 has 3 decisive checks: "contradicted" needs the 1 - 0.05/3 interval wholly on the other side
    got, checks = evaluate(full_lab(**SCENARIOS["F1"][CONTRADICTED]))
    row = checks[checks["check"] == "p50_wall_ms limit1 / nolimit"].iloc[0]
    assert row["verdict"] == CONTRADICTED and "Bonferroni level 0.9833" in row["reason"]
    assert "controlled per finding" in got["F1"]["reason"]


def test_every_check_has_a_row_in_the_threshold_registry():
    from throttlelab.analysis.findings import threshold_registry

    missing = [
        (f.id, c.label)
        for f in findings.FINDINGS
        for c in f.checks
        if (f.id, c.label) not in threshold_registry.REGISTRY
    ]
    assert not missing, f"a check without the commit that fixed its threshold: {missing}"
    _, checks = evaluate(full_lab())
    assert (checks["threshold_commit"].str.len() >= 7).all()
    assert checks.set_index("check").loc["throttled_ms limit1-2threads / limit1", "threshold_commit"] == "a5a8721"


@pytest.mark.parametrize(
    ("backend", "cgroup_version", "applied"),
    [
        ("local", "1", True),
        ("vm", "2", True),
        ("kubernetes", "2", True),
        ("kubernetes", "1", False),
        ("docker", "1", False),
    ],
)
def test_the_runtime_conversion_is_applied_where_the_backend_writes_it(backend, cgroup_version, applied):
    """vm's guest is cgroup v2: its local node converts, and its real node's runc does (runc 1.4.3 wrote
    17 and 59, runc 1.3.0 4 and 20 for 100m and 500m there); a real runc on a v1 host and the docker
    engine's runc write kubelet's shares unchanged."""
    from throttlelab.analysis.findings.weights_findings import runtime_conversion_applied

    lab = Lab(backend=backend)
    lab.add("E5", "two-container", {"runtime": "runc-new"}, {"share_small": [0.1] * 3})
    evidence = lab.evidence()
    evidence.runs["cgroup_version"] = cgroup_version
    reason = runtime_conversion_applied("E5").test(evidence)
    assert (reason is None) == applied, reason


# --------------------------------------------------------------------------
# the threshold registry's rule (docs/STATISTICS.md §5): a check revised after data is judged only on
# the runs made after its revision, and the tables show its verdict on all runs beside

BEFORE_F4_REVISION = "2026-12-01T12:00:00+00:00"  # a5a8721 revised F4's throttled-time threshold on 2026-12-02
F4_REVISED = "throttled_ms limit1-2threads / limit1"


def old_copies(lab: Lab, experiment: str, factors: dict[str, dict[str, float]], start: str) -> Lab:
    """Each run of ``experiment``'s variants in ``factors`` again, made at ``start`` (repeats from 100 on),
    its metrics scaled by ``factors[variant][metric]`` (1 for any other)."""
    for variant, scale in factors.items():
        values: dict[str, list[float]] = {}
        for _, exp, var, _, metric, value, *_ in lab.metric_rows:
            if (exp, var) == (experiment, variant):
                values.setdefault(metric, []).append(value * scale.get(metric, 1.0))
        lab.add(experiment, variant, lab.specs[(experiment, variant)], values, start=start, first_repeat=100)
    return lab


def test_runs_made_before_a_revision_do_not_judge_the_revised_check_and_its_verdict_on_all_runs_is_shown():
    lab = full_lab()
    for row in lab.run_rows:
        if row["experiment"] == "E2a":
            row["start"] = BEFORE_F4_REVISION
    got, checks = evaluate(lab)
    mine = checks.set_index("check")
    revised = mine.loc[F4_REVISED]
    assert revised["verdict"] == NOT_TESTABLE and revised["requirement"] == engine.RUNS_AFTER_REVISION
    assert revised["reason"].startswith("needs runs made after its threshold's revision: none of the")
    assert "a5a8721 of 2026-12-02T12:29:26+00:00" in revised["reason"]
    assert revised["verdict_all_runs"] == REPRODUCED
    # an unrevised check of the same runs judges them all
    other = mine.loc["p50_wall_ms limit1-2threads / limit1"]
    assert other["judged_on"] == engine.ALL_RUNS and other["verdict"] == other["verdict_all_runs"] == REPRODUCED
    assert got["F4"]["verdict"] == NOT_TESTABLE and got["F4"]["verdict_all_runs"] == REPRODUCED
    # a finding without a revised check: the same verdict both ways
    assert got["F1"]["verdict"] == got["F1"]["verdict_all_runs"] == REPRODUCED


def test_a_revised_check_is_judged_on_the_later_runs_only():
    # old runs (before the revision) where the fewer-threads arm was throttled three times as long: on all
    # runs F4 would not be reproduced; on the runs made after its revision it is
    lab = old_copies(
        full_lab(),
        "E2a",
        {"limit1": {}, "limit1-2threads": {"throttled_ms": 3.0}},
        BEFORE_F4_REVISION,
    )
    got, checks = evaluate(lab)
    revised = checks.set_index("check").loc[F4_REVISED]
    n = sum(1 for r in lab.run_rows if r["experiment"] == "E2a" and r["variant"] in ("limit1", "limit1-2threads"))
    assert revised["verdict"] == REPRODUCED and revised["verdict_all_runs"] != REPRODUCED
    assert (
        revised["judged_on"]
        == f"the {n // 2} of {n} runs made at or after its threshold's revision (a5a8721 of 2026-12-02T12:29:26+00:00)"
    )
    assert revised["judged_on"] in revised["reason"]
    assert got["F4"]["verdict"] == REPRODUCED and got["F4"]["verdict_all_runs"] != REPRODUCED


def test_a_run_without_a_start_time_cannot_show_it_was_made_after_a_revision():
    lab = full_lab()
    for row in lab.run_rows:
        if row["experiment"] == "E2a" and row["repeat"] == 0:
            row["start"] = None
    evidence = lab.evidence()
    later = evidence.made_since(engine.run_started("2026-12-02T12:29:26+00:00"))
    assert len(later.runs) == len(evidence.runs) - sum(
        1 for r in lab.run_rows if r["experiment"] == "E2a" and r["repeat"] == 0
    )
    kept = later.metrics[later.metrics["experiment"] == "E2a"]
    assert not (kept["repeat"] == 0).any() and len(kept) > 0
    assert engine.run_started("2026-12-02T12:29:26") == engine.run_started("2026-12-02T12:29:26+00:00")
    assert engine.run_started("") is None and engine.run_started("yesterday") is None


# --------------------------------------------------------------------------
# docs/FINDINGS.md's per-check table, generated from the code (it cannot go stale)

FINDINGS_DOC = PROJECT / "docs" / "FINDINGS.md"
#: set to 1 to write the table into docs/FINDINGS.md instead of comparing (docs/FINDINGS.md says how)
REGENERATE_DOC = "THROTTLELAB_REGENERATE_DOCS"


def _doc_table(text: str) -> tuple[int, int]:
    """Where docs/FINDINGS.md's per-check table starts and ends (its header line to the first blank line)."""
    start = text.index(finding_catalogue.CHECK_TABLE_HEADER.splitlines()[0])
    end = text.index("\n\n", start) + 1
    return start, end


def test_the_per_check_table_of_the_findings_doc_is_the_codes():
    _, checks = evaluate(full_lab())
    table = finding_catalogue.check_table(checks)
    text = FINDINGS_DOC.read_text()
    start, end = _doc_table(text)
    if os.environ.get(REGENERATE_DOC) == "1":
        FINDINGS_DOC.write_text(text[:start] + table + text[end:])
        text = FINDINGS_DOC.read_text()
        start, end = _doc_table(text)
    assert text[start:end] == table, (
        f"docs/FINDINGS.md's per-check table differs from the code's: regenerate it with {REGENERATE_DOC}=1 "
        ".venv/bin/python -m pytest tests/analysis/test_findings.py -k per_check_table"
    )
    # every check is there, with its commit; the revised ones say from when runs judge them
    assert table.count("\n") == len(checks) + 2
    assert "a5a8721 (after data: judges the runs made from 2026-12-02T12:29:26+00:00 on)" in table


def test_the_check_table_refuses_checks_of_other_findings():
    _, checks = evaluate(full_lab())
    with pytest.raises(ValueError, match="rows of checks.csv for the"):
        finding_catalogue.check_table(checks.iloc[:3])


def _all_disturbed(lab: Lab, experiment: str, variant: str, attempts: int = 2) -> Lab:
    """Every run of one variant still disturbed after ``attempts`` earlier disturbed attempts each."""
    for row in lab.run_rows:
        if (row["experiment"], row["variant"]) == (experiment, variant):
            row.update(disturbed=True, disturbed_attempts=attempts)
    return lab


def test_a_variant_whose_every_run_was_disturbed_makes_its_checks_inconclusive_through_the_cli(tmp_path):
    """The `throttlelab findings` the rules call, on tables where all runs of X1 budget0 stayed disturbed: no
    exception (the checks that read budget0's design, not its runs, still find its parameters), and every check
    that weighs budget0's runs is inconclusive, saying so with the attempts measured."""
    lab = _all_disturbed(full_lab(), "X1", "budget0")
    evidence = lab.evidence()
    tables = tmp_path / "tables"
    tables.mkdir()
    runs = evidence.runs.copy()
    runs["disturbed_attempts"] = runs.get("disturbed_attempts", pd.Series(dtype="Int64")).fillna(0).astype(int)
    runs.to_csv(tables / "runs.csv", index=False)
    evidence.headers.to_csv(tables / "headers.csv", index=False)
    evidence.metrics.to_csv(tmp_path / "metrics.csv", index=False)
    code = analysis.main(
        [
            "findings",
            "--tables-dir",
            str(tables),
            "--metrics",
            str(tmp_path / "metrics.csv"),
            "--experiments",
            *sorted(ALL),
            "--findings",
            str(tmp_path / "findings.csv"),
            "--checks",
            str(tmp_path / "checks.csv"),
            "--confidence",
            "0.95",
        ]
    )
    assert code == 0
    checks = pd.read_csv(tmp_path / "checks.csv")
    budget0 = checks[checks["check"].str.contains("budget0") & (checks["experiment"] == "X1")]
    assert len(budget0) and set(budget0["verdict"]) == {INCONCLUSIVE}
    assert all("every run of X1 budget0 was disturbed (15 attempts)" in r for r in budget0["reason"])
    rows = by_id(pd.read_csv(tmp_path / "findings.csv"))
    assert rows["F12"]["verdict"] != CONTRADICTED
    # the checks that read only budget0's design (its model) are judged on their own runs
    others = checks[(checks["experiment"] == "X1") & ~checks["check"].str.contains("budget0")]
    assert len(others) and not others["reason"].fillna("").str.contains("every run of").any()


def test_a_sensitivity_check_keeps_the_designs_parameters():
    lab = _all_disturbed(full_lab(), "X1", "budget0")
    evidence = lab.evidence()
    without = evidence.without_disturbed()
    assert "budget0" not in without.variants("X1")
    assert without.spec("X1", "budget0") == evidence.spec("X1", "budget0")
    assert without.made_since(engine.run_started("2000-01-01T00:00:00+00:00")).spec("X1", "budget0")


def test_a_run_throttled_without_extra_wall_time_counts_against_the_band():
    # X3 cpus1: throttled time per round with a mean wall at or below the model's unthrottled wall is a
    # ratio censored above (+inf), evidence above F14's band, not an undefined value
    lab = full_lab(x3={"change": _set({"cpus1": {"mean_wall_ms": [1.0]}})})
    got, checks = evaluate(lab)
    row = checks[checks["check"] == "throttled_ms_per_round / extra wall cpus1"].iloc[0]
    assert row["verdict"] != REPRODUCED and "5 of 5 runs censored above" in row["reason"], row["reason"]
    assert "undefined" not in row["reason"]
    # censored runs beside finite runs far above the band: the interval's lower end clears it, contradicted
    values = jobs_findings.throttled_per_extra_wall("X3")(lab.evidence(), "cpus1")
    assert np.isinf(values).all()
    lab = full_lab(x3={"change": _scale({"cpus1": {"throttled_ms_per_round": 8.0}})})
    evidence = lab.evidence()
    finite = jobs_findings.throttled_per_extra_wall("X3")(evidence, "cpus1")
    mixed = np.where(np.arange(finite.size) == 0, np.inf, finite)
    check = next(c for f in findings.FINDINGS if f.id == "F14" for c in f.checks if c.label.endswith("cpus1"))
    result = engine.evaluate_check("F14", dataclasses.replace(check, values=lambda ev, name: mixed), evidence)
    assert result.verdict == CONTRADICTED and result.hi == math.inf, result.reason
    assert "1 of 5 runs censored above" in result.reason
    # neither throttled nor slower: 0/0, the one undefined case
    ev = full_lab(x3={"change": _set({"cpus1": {"mean_wall_ms": [1.0], "throttled_ms_per_round": [0.0]}})})
    assert np.isnan(jobs_findings.throttled_per_extra_wall("X3")(ev.evidence(), "cpus1")).all()


def test_the_throttled_round_share_bound_is_half_the_unbudgeted_arms_model_share():
    evidence = full_lab().evidence()
    # the model throttles budget0's 40 ms burst against its 25 ms quota at 95% of the start phases (a burst that
    # starts late enough in a period takes the next period's quota too), budget-full's at none
    derivation = jobs_findings.throttled_in_few_rounds("budget-full", "budget0")(evidence, None)
    assert derivation.threshold == (0.475,) and "in none of its rounds" in derivation.why
    with pytest.raises(engine.Unmet, match="no absolute bound separates them"):
        jobs_findings.throttled_in_few_rounds("budget0", "budget-full")(evidence, None)


def test_f15s_unthrottled_rounds_bound_is_half_the_rounds_against_the_models_none():
    evidence = full_lab().evidence()
    derivation = jobs_findings.unthrottled_rounds("synchronized")(evidence, None)
    assert derivation.threshold == (0.5,) and "no round throttled" in derivation.why
    # pods whose bursts overrun their quotas: the model throttles them, so no bound on "not throttled"
    heavy = full_lab(x4={"threads": 8}).evidence()
    with pytest.raises(engine.Unmet, match="throttles each pod's burst"):
        jobs_findings.unthrottled_rounds("synchronized")(heavy, None)


def test_f12s_not_throttled_bound_is_a_share_so_runs_that_were_never_throttled_can_decide_it():
    # a share of rounds lies in [0, 1]: R runs at 0 bound its mean by 1 - 0.025^(1/R), below F12's 0.475 from
    # R = 6 on (0.459), whatever the runs' spread (tests/analysis/test_verdict_operating_characteristics.py holds
    # the rate at the least favourable spread); a count of periods per round has no upper end and never does
    check = next(c for f in findings.FINDINGS if f.id == "F12" for c in f.checks if c.metric == "throttled_round_share")
    evidence = full_lab().evidence()
    assert engine.evaluate_check("F12", check, evidence).threshold == (0.475,)
    assert check.possible_range() == (0.0, 1.0)

    def zeros(runs: int, value_range: tuple[float, float] | None = (0.0, 1.0)) -> engine.CheckResult:
        at_zero = dataclasses.replace(check, values=lambda ev, name: np.zeros(runs), value_range=value_range)
        return engine.evaluate_check("F12", at_zero, evidence)

    assert zeros(6).verdict == REPRODUCED and zeros(6).hi == pytest.approx(1 - 0.025 ** (1 / 6))
    five = zeros(5)
    assert five.verdict == INCONCLUSIVE and "5 runs cannot reach level 0.025 (needs R >= 6)" in five.reason
    count = zeros(60, value_range=None)
    assert count.verdict == INCONCLUSIVE and "no upper end" in count.reason


# --------------------------------------------------------------------------
# what the report draws of each check: its runs, its level, its threshold and zones, ties, no placeholder


def test_every_check_row_says_its_runs_level_threshold_and_scale():
    rows, checks = evaluate(full_lab())
    measured = checks[checks["lo"].notna() & (checks["scale"] != "")]
    assert len(measured) > 20
    for row in measured.itertuples():
        assert row.runs >= 3 and row.level >= 0.95, row.check
        assert row.relation in (">", "<", "within") and row.scale in ("log", "linear", "logit", "mean-ratio")
        bounds = (
            f"[{row.threshold:.3g}, {row.threshold_hi:.3g}]" if row.relation == "within" else f"{row.threshold:.3g}"
        )
        assert row.expected.endswith(bounds), (row.expected, bounds)
    ratio = checks.set_index("check").loc["p50_wall_ms limit1 / nolimit"]
    assert ratio["runs"] == ratio["runs_baseline"] >= 3 and ratio["null"] == 1.0
    assert rows["F1"]["level"] == 0.95 and rows["F1"]["headline"] == "3 of 3 decisive checks hold"


def test_a_proportions_point_lies_inside_its_interval_with_the_pooled_count_beside():
    for throttled, periods in ((0.3, 30), (0.05, 40), (0.25, 200)):
        _, checks = evaluate(full_lab(e2b={"clumped_throttled": throttled, "clumped_periods": periods}))
        logit = checks[(checks["scale"] == "logit") & checks["lo"].notna()]
        assert len(logit)
        for row in logit.itertuples():
            assert row.lo <= row.effect <= row.hi, (row.check, row.effect, row.lo, row.hi)
            assert math.isnan(row.pooled) or 0 <= row.pooled <= 1


def test_a_tie_is_marked_and_judged_at_its_level():
    _, checks = evaluate(full_lab(e2b={"steady_throttled": 0.0}))
    row = checks.set_index("check").loc["throttled_ratio steady-limit"]
    assert bool(row["tie"]) and row["effect"] == 0 and row["runs"] == 5 and row["level"] == 0.95


def test_no_table_holds_the_quantile_slot_of_a_check_whose_quantile_was_not_chosen():
    lab = full_lab()
    lab.drop("E7", "two-limit").drop("E7", "one-double")
    rows, checks = evaluate(lab)
    frames = [pd.DataFrame(list(rows.values())), checks]
    cells = [str(v) for frame in frames for column in frame.columns if column != "check" for v in frame[column]]
    assert not [c for c in cells if "{" in c]
    assert "work quantile two-limit / one-double" in set(checks["check"])
    assert not [c for c in checks["check"] if "{" in c]
