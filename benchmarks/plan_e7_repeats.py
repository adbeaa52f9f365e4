"""Plan E7's repeats on the quick profile: the clump model's p90 ratios and per-run spreads (docs/EXPERIMENTS.md,
"Repeats planned from the spread"). A planning simulation, never a threshold.

    python benchmarks/plan_e7_repeats.py [--runs 40] [--seed 1] [--connections per-run|per-clump]

SPEC §1's fluid CFS model in 0.1 ms steps on the 1-CPU node of quick's E7: each replica its own quota
(limit x 100 ms) refilled at every period boundary (the run's phase uniform), its requests served in order
(GOMAXPROCS 1), replicas sharing the CPU equally while both are runnable; clumps of 10 requests of 2.4 ms of
CPU (SPEC §4's 1.2 x 2 ms of work) at uniform times over the window (the generator's conditioned Poisson
process); the run's 10 connections opened by its first clump, each given to a random replica and kept, so
the split is drawn once per run (``--connections per-run``, the generator's default), or each clump's
connections opened for it (``per-clump``), so the split is drawn anew for every clump. Prints, per clump count, each comparison's mean log ratio of per-run p90
and the per-run SD of both arms, then the repeats per arm for 80% power at those numbers.
"""

from __future__ import annotations

import argparse

import numpy as np

from throttlelab.analysis import stats

STEP_MS = 0.1
PERIOD_MS = 100.0
CPU_MS = 2.4
CLUMP = 10
#: arm -> (replicas, quota per replica in ms): 1 x 200m, 2 x 100m, 2 x 200m, 1 x 400m
ARMS = {"one-limit": (1, 20.0), "two-half": (2, 10.0), "two-limit": (2, 20.0), "one-double": (1, 40.0)}
PAIRS = (("two-half", "one-limit"), ("two-limit", "one-double"))


def run_p90(
    rng: np.random.Generator, replicas: int, quota_ms: float, clumps: int, window_ms: float, per_clump: bool = False
) -> float:
    """One simulated run's p90 of request latency (ms)."""
    kept = rng.integers(0, replicas, CLUMP)
    #: step of a clump's arrival -> the replica of each of its requests
    arrivals = {
        int(t / STEP_MS): (rng.integers(0, replicas, CLUMP) if per_clump else kept)
        for t in rng.uniform(0, window_ms, clumps)
    }
    phase = rng.uniform(0, PERIOD_MS)
    queues: list[list[list[float]]] = [[] for _ in range(replicas)]
    left = [quota_ms] * replicas
    latencies: list[float] = []
    for i in range(int((window_ms + 400) / STEP_MS)):
        t = i * STEP_MS
        if i and int((t + phase) / PERIOD_MS) != int((t - STEP_MS + phase) / PERIOD_MS):
            left = [quota_ms] * replicas
        if i in arrivals:
            for replica in arrivals[i]:
                queues[replica].append([CPU_MS, t])
        busy = [r for r in range(replicas) if queues[r] and left[r] > 1e-9]
        for r in busy:
            use = min(STEP_MS / len(busy), left[r])
            head = queues[r][0]
            head[0] -= use
            left[r] -= use
            if head[0] <= 1e-9:
                latencies.append(t + STEP_MS - head[1])
                queues[r].pop(0)
    return float(np.quantile(latencies, 0.9))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="simulated runs per arm")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--connections", choices=("per-run", "per-clump"), default="per-run")
    args = parser.parse_args()
    per_clump = args.connections == "per-clump"
    rng = np.random.default_rng(args.seed)
    for clumps, window_ms in ((5, 2500.0), (20, 10_000.0)):
        logs = {
            arm: np.log([run_p90(rng, n, q, clumps, window_ms, per_clump) for _ in range(args.runs)])
            for arm, (n, q) in ARMS.items()
        }
        for a, b in PAIRS:
            effect = float(logs[a].mean() - logs[b].mean())
            sd_a, sd_b = float(logs[a].std(ddof=1)), float(logs[b].std(ddof=1))
            sd = float(np.sqrt((sd_a**2 + sd_b**2) / 2))
            try:
                need = str(stats.repeats_for_power(sd, effect, two_sample=True))
            except ValueError:
                need = "> 1000"
            print(
                f"{clumps} clumps: {a} / {b}: log ratio {effect:.3f}, per-run SD {sd_a:.3f} / {sd_b:.3f}; "
                f"80% power at these numbers: {need} runs per arm"
            )


if __name__ == "__main__":
    main()
