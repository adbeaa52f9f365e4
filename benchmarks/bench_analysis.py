"""Analysis speed: parsing + statistics (+ report, once it exists) on a large lab.

    python benchmarks/bench_analysis.py [--variants 20] [--repeats 5] [--samples 6000]

Synthesises raw logs of load runs (docs/RECORDS.md `load`: one `req` record
per latency sample, 85% /work and 15% /ping, plus a summary that agrees with
them) for VARIANTS x REPEATS runs in a temporary folder, then times the stages
the Snakemake rules run: parse_runs (raw logs -> tidy CSVs, requests.csv
included), compute_stats (per-run p50/p90/p99/p99.9/max via
stats.run_latency_summary, failed requests at the client timeout, estimates across repeats) and
evaluate_findings.
Prints figures; the goal is under 60 s in all. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from throttlelab.analysis import commands as analysis, stats

GOAL_S = 60.0
PING_SHARE = 0.15


def _meta(variant: str, repeat: int) -> dict[str, Any]:
    return {
        "type": "meta",
        "schema": 1,
        "experiment": "E2b",
        "variant": variant,
        "repeat": repeat,
        "backend": "local",
        "spec": {"clump": 50},
        "runtime": "runc-new",
        "seed": repeat,
        "config_seed": 1,
        "binaries": {},
        "environment": {"kernel": "bench", "cgroup_version": 2},
        "node_cpus": None,
        "capabilities": {"cpus": 2, "cgroup_version": 2, "can_pin_cpus": True, "has_pause_level": False, "notes": []},
        "start": "2026-01-01T00:00:00+00:00",
        "end": "2026-01-01T00:01:00+00:00",
        "wall_s": 70.0,
        "window_s": 60.0,
        "notes": [],
        "interference": {
            "cpus": [0, 1],
            "window_s": 70.0,
            "busy_s": 50.0,
            "lab_s": 48.0,
            "runner_s": 1.0,
            "other_s": 1.0,
            "other_share": 0.0071,
            "lab_scope": "per-cpu",
            "threshold": 0.2,
            "disturbed": False,
        },
        "disturbed_attempts": [],
    }


def _header() -> dict[str, Any]:
    return {
        "type": "header",
        "src": "load/generator",
        "program": "cpulab",
        "version": "bench",
        "variant": "go124mod",
        "go_version": "go1.25",
        "gomaxprocs": 2,
        "num_cpu": 2,
        "env": {"GOMAXPROCS": "", "GODEBUG": ""},
        "default_godebug": "",
        "cgroup": {"version": 2, "quota_us": None, "period_us": 100000},
        "command": "load",
        "params": {"rate": 100, "timeout": 10000.0},
        "pid": 1,
        "time": "2026-01-01T00:00:00Z",
    }


def _stats(when: str, requests: int, usage_usec: int) -> dict[str, Any]:
    """The load generator's /stats reading of its one target before or after the window (RECORDS.md `stats`)."""
    cgroup = {
        "quota_us": None,
        "period_us": 100000,
        "nr_periods": 0,
        "nr_throttled": 0,
        "throttled_usec": 0,
        "usage_usec": usage_usec,
    }
    return {
        "type": "stats",
        "src": "load/generator",
        "when": when,
        "target": 0,
        "stats": {"gomaxprocs": 2, "num_gc": requests // 1000, "requests": requests, "cgroup": cgroup},
    }


def _endpoint_block(lat: np.ndarray, window_s: float) -> dict[str, Any]:
    summary = stats.run_latency_summary(lat)
    return {
        "sent": int(lat.size),
        "ok": int(lat.size),
        "errors": 0,
        "achieved_rps": lat.size / window_s,
        "p50_ms": summary["p50"],
        "p90_ms": summary["p90"],
        "p99_ms": summary["p99"],
        "p999_ms": summary["p99_9"],
        "max_ms": summary["max"],
    }


def synthesise_log(path: Path, variant: str, repeat: int, samples: int, rng: np.random.Generator) -> None:
    """One load run: `samples` requests with lognormal latencies whose scale depends on the variant."""
    window_s = 60.0
    scale = 10.0 * (1 + int(variant.removeprefix("v")) / 10) * rng.lognormal(0, 0.1)  # run-to-run variation
    lat = np.round(rng.lognormal(np.log(scale), 0.6, samples), 3)
    ep = np.where(rng.random(samples) < PING_SHARE, "ping", "work")
    sched = np.round(np.sort(rng.uniform(0, window_s * 1000, samples)), 3)
    late = np.round(rng.exponential(0.05, samples), 3)
    lines = [json.dumps(_meta(variant, repeat)), json.dumps(_header()), json.dumps(_stats("before", 0, 0))]
    lines += [
        f'{{"type":"req","ep":"{e}","target":0,"conn":{i % 8},"sched_ms":{s},"lat_ms":{x},"late_ms":{d},'
        f'"ok":true,"status":200,"err":"","src":"load/generator"}}'
        for i, (e, s, x, d) in enumerate(zip(ep, sched, lat, late))
    ]
    summary = {
        "type": "summary",
        "src": "load/generator",
        "window_s": window_s,
        "work": _endpoint_block(lat[ep == "work"], window_s),
        "ping": _endpoint_block(lat[ep == "ping"], window_s),
        "late_p99_ms": float(np.quantile(late, 0.99)),
        "late_max_ms": float(late.max()),
        "connections_per_target": [8],
        "requests_per_target": [samples],
    }
    lines += [
        json.dumps(_stats("after", samples, int(window_s * 1e6 * 0.3))),
        json.dumps(summary),
        json.dumps(
            {"type": "process", "src": "load/generator", "returncode": 0, "wall_s": window_s, "stderr_tail": ""}
        ),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def timed(label: str, fn: Callable[[], Any], figures: list[tuple[str, float]]) -> Any:
    start = time.perf_counter()
    result = fn()
    figures.append((label, time.perf_counter() - start))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--samples", type=int, default=6000, help="latency samples per run")
    args = parser.parse_args()
    rng = np.random.default_rng(20261130)
    figures: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="throttlelab-bench-analysis-") as tmp:
        root = Path(tmp)
        raw = [
            root / "raw" / "E2b" / f"v{v}" / f"rep{r}.jsonl" for v in range(args.variants) for r in range(args.repeats)
        ]
        start = time.perf_counter()
        for path in raw:
            synthesise_log(path, path.parent.name, int(path.stem.removeprefix("rep")), args.samples, rng)
        synth_s = time.perf_counter() - start
        size_mb = sum(p.stat().st_size for p in raw) / 1e6
        tables_dir = root / "tables"
        tables = timed("parse_runs (raw logs -> tidy CSVs)", lambda: analysis.parse_runs(raw, tables_dir), figures)
        per_run, estimates = timed(
            "compute_stats (metrics.csv + estimates.csv)",
            lambda: analysis.compute_stats(
                tables_dir, tables_dir / "metrics.csv", tables_dir / "estimates.csv", confidence=0.95, seed=1
            ),
            figures,
        )
        timed(
            "evaluate_findings (findings.csv + checks.csv)",
            lambda: analysis.evaluate_findings(
                tables_dir,
                tables_dir / "metrics.csv",
                tables_dir / "findings.csv",
                tables_dir / "checks.csv",
                experiments=["E2b"],
                confidence=0.95,
            ),
            figures,
        )
    total = sum(seconds for _, seconds in figures)
    print(
        f"{args.variants} variants x {args.repeats} repeats x {args.samples} latency samples: "
        f"{len(raw)} raw logs, {len(tables['requests'])} requests, {size_mb:.0f} MB (synthesised in {synth_s:.1f} s)"
    )
    for label, seconds in figures:
        print(f"  {label:<48} {seconds:6.2f} s")
    print(f"  {'report (not part of this stage)':<48} {'-':>6}")
    print(
        f"total parsing + statistics: {total:.2f} s (goal < {GOAL_S:.0f} s; "
        f"{len(per_run)} per-run metrics, {len(estimates)} estimates)"
    )


if __name__ == "__main__":
    main()
