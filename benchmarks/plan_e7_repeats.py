"""Plan E7's repeats on the quick profile: the clump model's latency ratios and per-run spreads (docs/EXPERIMENTS.md,
"Repeats planned from the spread"). A planning simulation, never a threshold.

    python benchmarks/plan_e7_repeats.py [--runs 40] [--seed 1] [--connections per-run|per-clump]
                                         [--arrivals own|common]

SPEC §1's fluid CFS model in 0.1 ms steps on the 1-CPU node of quick's E7: each replica its own quota
(limit x 100 ms) refilled at every period boundary (the run's phase uniform), its requests served in order
(GOMAXPROCS 1), replicas sharing the CPU equally while both are runnable; clumps of 10 requests of 2.4 ms of
CPU (SPEC §4's 1.2 x 2 ms of work) at uniform times over the window (the generator's conditioned Poisson
process); the run's 10 connections opened by its first clump, each given to a random replica and kept, so
the split is drawn once per run (``--connections per-run``, the generator's default), or each clump's
connections opened for it (``per-clump``), so the split is drawn anew for every clump.

``--arrivals own`` (the default): every run draws its own clump times and the arms are independent samples.
Prints, per clump count, each comparison's mean log ratio of per-run p90, the per-run SD of both arms and the
runs per arm for 80% power, then the Welch power at R = 10 runs per arm at p90 and at the quantile the profile
compares (the highest its clumps support: p75 over 20 clumps, the maximum over 5).

``--arrivals common``: the runs are simulated in blocks, one run of every arm per block, and the arms of a
block share its clump times (each run still draws its own period phase and connection split). At the
profile's quantile it prints, per comparison, the mean and SD of the per-block log ratio, the correlation of
the two arms' logs across blocks, the power at R = 10 blocks of the one-sample t interval on the per-block
log ratios (95% interval, so one-sided 2.5%, against a ratio of 1) and the blocks needed for 80% power.
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
#: the repeats (runs per arm, or blocks) at which the power is shown
PLANNED_RUNS = 10


def run_latencies(
    rng: np.random.Generator,
    replicas: int,
    quota_ms: float,
    clumps: int,
    window_ms: float,
    per_clump: bool = False,
    times: np.ndarray | None = None,
) -> np.ndarray:
    """One simulated run's request latencies (ms); ``times``: the clump arrival times (ms), drawn from ``rng``
    (``clumps`` of them over the window) when None. The phase and the connection split come from ``rng``."""
    kept = rng.integers(0, replicas, CLUMP)
    if times is None:
        times = rng.uniform(0, window_ms, clumps)
    #: step of a clump's arrival -> the replica of each of its requests
    arrivals = {int(t / STEP_MS): (rng.integers(0, replicas, CLUMP) if per_clump else kept) for t in times}
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
    return np.array(latencies)


def profile_quantile(clumps: int) -> tuple[float, str]:
    """The per-run statistic the profile compares over ``clumps`` clumps: the highest quantile they support
    (docs/STATISTICS.md §2), else the maximum (q = 1); with its name."""
    q = stats.clumps_quantile(clumps)
    return (1.0, "max") if q is None else (q, stats.quantile_name(q))


def _power(sd: float, effect: float, two_sample: bool) -> str:
    """The power at :data:`PLANNED_RUNS` of the one-sided 2.5% t test against a ratio of 1, as text."""
    try:
        return f"{stats.t_power(PLANNED_RUNS, sd, effect, two_sample=two_sample, level=0.95):.2f}"
    except ValueError:
        return "n/a (no spread)"


def _need(sd: float, effect: float, two_sample: bool) -> str:
    """The repeats for 80% power, as text."""
    if not sd > 0:
        return "n/a (no spread)"
    try:
        return str(stats.repeats_for_power(sd, effect, two_sample=two_sample))
    except ValueError:
        return "> 1000"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="simulated runs per arm (blocks with --arrivals common)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--connections", choices=("per-run", "per-clump"), default="per-run")
    parser.add_argument(
        "--arrivals",
        choices=("own", "common"),
        default="own",
        help="own: every run draws its clump times; common: the arms of a block share them",
    )
    args = parser.parse_args()
    per_clump = args.connections == "per-clump"
    rng = np.random.default_rng(args.seed)
    for clumps, window_ms in ((5, 2500.0), (20, 10_000.0)):
        q, name = profile_quantile(clumps)
        if args.arrivals == "common":
            per_block = []
            for _ in range(args.runs):
                times = rng.uniform(0, window_ms, clumps)
                per_block.append(
                    {
                        arm: float(stats.quantile(run_latencies(rng, n, quota, clumps, window_ms, per_clump, times), q))
                        for arm, (n, quota) in ARMS.items()
                    }
                )
            logs = {arm: np.log([block[arm] for block in per_block]) for arm in ARMS}
            for a, b in PAIRS:
                diff = logs[a] - logs[b]
                effect, sd = float(diff.mean()), float(diff.std(ddof=1))
                sd_a, sd_b = float(logs[a].std(ddof=1)), float(logs[b].std(ddof=1))
                corr = float(np.corrcoef(logs[a], logs[b])[0, 1]) if sd_a > 0 and sd_b > 0 else float("nan")
                print(
                    f"{clumps} clumps, {name}, common arrivals: {a} / {b}: per-block log ratio mean {effect:.3f}, "
                    f"SD {sd:.3f} (per-run SD {sd_a:.3f} / {sd_b:.3f}, correlation {corr:.2f}); paired t power at "
                    f"R = {PLANNED_RUNS} blocks: {_power(sd, effect, False)}; 80% power: "
                    f"{_need(sd, effect, False)} blocks"
                )
            continue
        lats = {
            arm: [run_latencies(rng, n, quota, clumps, window_ms, per_clump) for _ in range(args.runs)]
            for arm, (n, quota) in ARMS.items()
        }
        at = {
            level: {arm: np.log([float(stats.quantile(lat, level)) for lat in lats[arm]]) for arm in ARMS}
            for level in (0.9, q)
        }
        for a, b in PAIRS:
            welch = {}
            for level, logs in at.items():
                effect = float(logs[a].mean() - logs[b].mean())
                sd_a, sd_b = float(logs[a].std(ddof=1)), float(logs[b].std(ddof=1))
                welch[level] = (effect, sd_a, sd_b, float(np.sqrt((sd_a**2 + sd_b**2) / 2)))
            effect, sd_a, sd_b, sd = welch[0.9]
            try:
                need = str(stats.repeats_for_power(sd, effect, two_sample=True))
            except ValueError:
                need = "> 1000"
            print(
                f"{clumps} clumps: {a} / {b}: log ratio {effect:.3f}, per-run SD {sd_a:.3f} / {sd_b:.3f}; "
                f"80% power at these numbers: {need} runs per arm"
            )
            effect_q, sd_qa, sd_qb, sd_q = welch[q]
            print(
                f"{clumps} clumps: {a} / {b}: Welch power at R = {PLANNED_RUNS} runs per arm: p90 "
                f"{_power(sd, effect, True)}; {name} (the profile's): log ratio {effect_q:.3f}, per-run SD "
                f"{sd_qa:.3f} / {sd_qb:.3f}, power {_power(sd_q, effect_q, True)}, 80% power: "
                f"{_need(sd_q, effect_q, True)} runs per arm"
            )


if __name__ == "__main__":
    main()
