"""The lab's own figures, typed once: what the article (docs/LAB.md §4), the talk and the book measured.

Two kinds of data, side by side:

* :data:`LAB`: per experiment, the numbers keyed like our tables (variant -> metric ->
  value, run 1 of docs/LAB.md §4) with where they were measured. The figures draw them, the
  report's notes and captions cite them.
* :data:`QUOTES`: per finding, the sentence the findings table prints as the lab's
  figure, and per check the figure that check is compared with (findings.csv and
  checks.csv, column ``reference``). They quote the same numbers as :data:`LAB`
  (tests/analysis/test_reference.py checks that they agree).

They come from other machines (10 CPUs, 14, 16), so they set the shape to compare,
never a threshold: the thresholds live with the claims in throttlelab.analysis.findings.
Pure data, no imports beyond the standard library and the variants' names (model/variants.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from throttlelab.model.variants import (
    E2A_LIMIT1,
    E2A_LIMIT1_2THREADS,
    E2A_LIMIT2,
    E2A_LIMIT500M,
    E2A_NOLIMIT,
    E2B_CLUMPED_LIMIT,
    E2B_CLUMPED_LIMIT_GO125,
    E2B_CLUMPED_NOLIMIT,
    E2B_STEADY_LIMIT,
    E2B_STEADY_LIMIT_GO125,
    E2B_STEADY_NOLIMIT,
    E3_GO125_2500M,
    E3_GO125_2_ENV6,
    E3_GO125_2_GODEBUG,
    E3_GO125_NONE,
    E6_LIMIT,
    E7_ONE_DOUBLE,
    E7_ONE_LIMIT,
    E7_ONE_NOLIMIT,
    E7_TWO_HALF,
    E7_TWO_LIMIT,
    E8_BUSY_LIM,
    E8_BUSY_LIM2X,
    E8_BUSY_LIM2X_REQ_FULL,
    E8_BUSY_LIM2X_REQ_HALF,
    E8_IDLE_LIM,
    E8_IDLE_LIM2X,
    S1_CPUS1500M,
    S1_CPUS1500M_GOMAXPROCS8,
    S1_NOLIMIT,
    S2_THREADS_NODE,
    S2_THREADS_ONE,
    WEIGHTS_PODS,
    WEIGHTS_TWO_CONTAINER,
)


@dataclass(frozen=True)
class LabFigures:
    """One experiment's figures as the lab (or the talk, or the book) measured them."""

    experiment: str
    source: str
    #: the machine and setting they were measured on (captions cite it)
    setup: str
    #: variant -> metric -> value, keyed like metrics.csv (run 1 where the lab ran twice)
    values: Mapping[str, Mapping[str, float]]


def _frozen(values: dict[str, dict[str, float]]) -> Mapping[str, Mapping[str, float]]:
    return MappingProxyType({variant: MappingProxyType(dict(metrics)) for variant, metrics in values.items()})


_LAB_RUN_1 = "the lab (docs/LAB.md §4, run 1)"
_GO124_LIMITS = ("none", "500m", "1", "1500m", "2", "2500m")

LAB: Mapping[str, LabFigures] = MappingProxyType(
    {
        figures.experiment: figures
        for figures in (
            LabFigures(
                "E2a",
                _LAB_RUN_1,
                "a 10-CPU node, 8 threads × 20 ms per burst, 20 rounds",
                _frozen(
                    {
                        E2A_NOLIMIT: {"p50_wall_ms": 34.3, "throttled_ms_per_round": 0.0},
                        E2A_LIMIT2: {"p50_wall_ms": 34.6, "throttled_ratio": 0 / 40, "throttled_ms_per_round": 0.0},
                        E2A_LIMIT1: {
                            "p50_wall_ms": 84.4,
                            "throttled_ratio": 20 / 60,
                            "throttled_ms_per_round": 7052.5 / 20,
                        },
                        E2A_LIMIT500M: {
                            "p50_wall_ms": 260.4,
                            "throttled_ratio": 60 / 100,
                            "throttled_ms_per_round": 23981.0 / 20,
                        },
                        E2A_LIMIT1_2THREADS: {
                            "p50_wall_ms": 132.3,
                            "throttled_ratio": 17 / 77,
                            "throttled_ms_per_round": 1301.6 / 20,
                        },
                    }
                ),
            ),
            LabFigures(
                "E3",
                _LAB_RUN_1,
                "a 10-CPU node",
                _frozen(
                    {
                        **{f"go124mod-{limit}": {"gomaxprocs": 10} for limit in _GO124_LIMITS},
                        E3_GO125_NONE: {"gomaxprocs": 10},
                        **{f"go125mod-{limit}": {"gomaxprocs": 2} for limit in ("500m", "1", "1500m", "2")},
                        E3_GO125_2500M: {"gomaxprocs": 3},
                        E3_GO125_2_ENV6: {"gomaxprocs": 6},
                        E3_GO125_2_GODEBUG: {"gomaxprocs": 10},
                    }
                ),
            ),
            LabFigures(
                "S1",
                "the book",
                "a 14-CPU docker host, 2 s window",
                _frozen(
                    {
                        S1_NOLIMIT: {"gomaxprocs": 14, "nr_throttled": 0, "throttled_ms": 0.0},
                        S1_CPUS1500M: {"gomaxprocs": 2, "nr_throttled": 20, "throttled_ms": 1011.0},
                        S1_CPUS1500M_GOMAXPROCS8: {"gomaxprocs": 8, "nr_throttled": 21, "throttled_ms": 13658.0},
                    }
                ),
            ),
            # E5/E10: each member's measured share of the one CPU, keyed by phase (the variant)
            LabFigures(
                "E5",
                _LAB_RUN_1,
                "a 10-CPU kind node, 1 CPU pinned, new runc",
                _frozen(
                    {
                        WEIGHTS_PODS: {"share_pod-p100m": 0.046, "share_pod-p1": 0.447, "share_pod-two": 0.493},
                        WEIGHTS_TWO_CONTAINER: {"share_small": 0.144, "share_big": 0.847},
                    }
                ),
            ),
            LabFigures(
                "E10",
                _LAB_RUN_1,
                "a 10-CPU kind node, 1 CPU pinned, old runc",
                _frozen(
                    {
                        WEIGHTS_TWO_CONTAINER: {"share_small": 0.092, "share_big": 0.899},
                    }
                ),
            ),
            LabFigures(
                "E2b",
                _LAB_RUN_1,
                "a 10-CPU kind node, limit 2, clumps of 50 (steady: 13-16 ms in all settings)",
                _frozen(
                    {
                        E2B_STEADY_NOLIMIT: {"work_p99_ms": 14.5, "throttled_ratio": 0.0},
                        E2B_STEADY_LIMIT: {"work_p99_ms": 14.5, "throttled_ratio": 0.0},
                        E2B_STEADY_LIMIT_GO125: {"work_p99_ms": 14.5, "throttled_ratio": 0.0},
                        E2B_CLUMPED_NOLIMIT: {"work_p99_ms": 74.4},
                        E2B_CLUMPED_LIMIT: {"work_p99_ms": 370.1, "throttled_ratio": 0.300},
                        E2B_CLUMPED_LIMIT_GO125: {"work_p99_ms": 447.1, "throttled_ratio": 0.045},
                    }
                ),
            ),
            LabFigures(
                "E7",
                _LAB_RUN_1,
                "a 10-CPU kind node, limits 2 / 1 / 4, clumps of 50",
                _frozen(
                    {
                        E7_ONE_NOLIMIT: {"work_p99_ms": 85.7},
                        E7_ONE_LIMIT: {"work_p99_ms": 263.9},
                        E7_TWO_HALF: {"work_p99_ms": 602.5},
                        E7_TWO_LIMIT: {"work_p99_ms": 140.1},
                        E7_ONE_DOUBLE: {"work_p99_ms": 105.1},
                    }
                ),
            ),
            LabFigures(
                "E8",
                _LAB_RUN_1,
                "an 8-CPU worker, limits 2 / 4, requests 500m / 2 / 4",
                _frozen(
                    {
                        E8_IDLE_LIM: {"work_p99_ms": 392.0},
                        E8_IDLE_LIM2X: {"work_p99_ms": 98.7},
                        E8_BUSY_LIM: {"work_p99_ms": 8359.0},
                        E8_BUSY_LIM2X: {"work_p99_ms": 6045.0, "throttled_ratio": 0.0},
                        E8_BUSY_LIM2X_REQ_HALF: {"work_p99_ms": 472.0},
                        E8_BUSY_LIM2X_REQ_FULL: {"work_p99_ms": 222.0},
                    }
                ),
            ),
            LabFigures(
                "E6",
                _LAB_RUN_1,
                "8 threads on 10 CPUs, limit 1",
                _frozen(
                    {
                        E6_LIMIT: {"throttled_s_per_s": 0.48, "pause_s_per_s": 0.075},
                    }
                ),
            ),
            LabFigures(
                "S2",
                "the talk",
                "the talk: limit 250m on 16 CPUs",
                _frozen(
                    {
                        S2_THREADS_NODE: {"throughput_rps": 126.0},
                        S2_THREADS_ONE: {"throughput_rps": 2746.0},
                    }
                ),
            ),
        )
    }
)

#: Where the lab's own result was measured (docs/LAB.md, "Where the lab's figures were measured"), said the way a
#: comparison of runs heads each run's column: the keys of setup.csv that it shows.
LAB_SETUP: Mapping[str, str] = MappingProxyType(
    {
        "backend": "kind: a control-plane node and a worker",
        "runtime": "containerd",
        "runtime_version": "containerd 2.3.4, runc 1.4.3, kubelet v1.34.11 (E10: containerd 2.1.3, runc 1.3.0, kubelet v1.34.0)",
        "cgroup_version": "2",
        "kernel": "7.0 (OrbStack on Apple Silicon)",
        "cpus": "10 (the book's S1: a 14-CPU docker host; the talk's S2: a 16-CPU node)",
        "profile": "the lab's own parameters (docs/LAB.md §4)",
    }
)

#: The talk's throughput with GOMAXPROCS 1 over GOMAXPROCS 16 (S2), as the talk states it.
TALK_S2_GAIN = 21.7
#: The talk's quota drain time: 250m on 16 threads = 25 ms / 16 = 1.56 ms of wall time (docs/LAB.md §2).
TALK_EXHAUST_MS = 25.0 / 16


def lab_values(experiment: str, metric: str) -> dict[str, float]:
    """variant -> the lab's value of ``metric`` in ``experiment`` (empty when it gives none)."""
    figures = LAB.get(experiment)
    if figures is None:
        return {}
    return {variant: values[metric] for variant, values in figures.values.items() if metric in values}


@dataclass(frozen=True)
class Quote:
    """What a finding cites of the lab: one sentence for the claim, one figure per check."""

    claim: str
    #: check label (or, for F8's shares, "<experiment> <phase>") -> the lab's figure it compares with
    checks: Mapping[str, str]


def _checks(pairs: dict[str, str]) -> Mapping[str, str]:
    return MappingProxyType(pairs)


QUOTES: Mapping[str, Quote] = MappingProxyType(
    {
        "F1": Quote(
            "p50 limit 1 / none = 84.4 / 34.3 = 2.46x; 500m / none = 260.4 / 34.3 = 7.59x; "
            "limit 2 / none = 34.6 / 34.3 = 1.01x (avg CPU about 0.165 in all)",
            _checks(
                {
                    "p50_wall_ms limit1 / nolimit": "84.4 / 34.3 = 2.46x",
                    "p50_wall_ms limit500m / nolimit": "260.4 / 34.3 = 7.59x",
                    "p50_wall_ms limit2 / nolimit": "34.6 / 34.3 = 1.01x",
                }
            ),
        ),
        "F2": Quote(
            "limit 1: 7052.5 ms throttled over 20 rounds = 353 ms per round vs p50 wall 84.4 ms (4.2x)",
            _checks(
                {
                    "two_queue_share limit500m": "not measured by the lab (8 threads on 10 CPUs, where the scheduler spreads them)",
                    "throttled_ms_per_round / extra wall limit500m": "limit 1: 353 / (84.4 - 34.3) = 7.0 (8 threads on 10 CPUs: between 1 and 8 run queues)",
                    "throttled_ms_per_round / mean_wall_ms limit500m": "limit 1: 353 / 84.4 = 4.2 (10 CPUs)",
                }
            ),
        ),
        "F3": Quote(
            "limit 2: 40 periods in 20 s = 0.20 of the 200 wall-clock periods",
            _checks({"periods_per_round limit2": "40 periods / 20 rounds = 2.0 per round"}),
        ),
        "F4": Quote(
            "limit 1, 8 -> 2 threads: throttled periods 20 -> 17, throttled 7052.5 -> 1301.6 ms, "
            "p50 84.4 -> 132.3 ms; E2b clump 50 /work p99: limit2-g2 447-511 vs limit2-g10 360-370 ms",
            _checks(
                {
                    "throttled_ms limit1-2threads / limit1": "1301.6 / 7052.5 = 0.18",
                    "p50_wall_ms limit1-2threads / limit1": "132.3 / 84.4 = 1.57",
                }
            ),
        ),
        "F5": Quote(
            "10 CPUs: go124mod 10 for every limit; go125mod none -> 10, 500m/1/1500m/2 -> 2, 2500m -> 3; "
            "GOMAXPROCS=6 -> 6; GODEBUG=containermaxprocs=0 -> 10",
            _checks({"gomaxprocs = rule": "all 14 variants as the rule predicts"}),
        ),
        "F6": Quote(
            "E2b clump 50 (run 1 / run 2): throttled ratio 0.300 / 0.312; /work p99 limit2-g10 370.1 / 359.9 vs "
            "nolimit 74.4 / 86.3 ms (5.0x / 4.2x); clump 1: 0 throttled, p99 13-16 ms in all settings",
            _checks(
                {
                    "throttled_ratio clumped-limit": "0.300 / 0.312",
                    "throttled_ratio steady-limit": "clump 1: 0 throttled in all settings",
                    "work {q} clumped-limit / clumped-nolimit": "p99 370.1 / 74.4 = 5.0x; 359.9 / 86.3 = 4.2x",
                    "avg_cores clumped-limit": "avg about 0.6 CPU = 30% of limit 2",
                }
            ),
        ),
        "F7": Quote(
            "E7 /work p99 (run 1 / run 2): 2x1 602.5 / 495.7 vs 1x2 263.9 / 304.5 ms; 2x2 140.1 / 166.5 vs "
            "1x4 105.1 / 123.3 ms",
            _checks(
                {
                    "work {q} two-half / one-limit": "p99 602.5 / 263.9 = 2.3x; 495.7 / 304.5 = 1.6x",
                    "work {q} two-limit / one-double": "p99 140.1 / 105.1 = 1.33x; 166.5 / 123.3 = 1.35x",
                }
            ),
        ),
        "F8": Quote(
            "pods 0.046 : 0.447 : 0.493 (4 : 39 : 43); new runc containers 0.144 : 0.847 (17 : 100); "
            "old runc containers 0.092 : 0.899 (4 : 39)",
            _checks(
                {
                    "read back = design (E4)": "every level as the formulas say (E4/E10)",
                    # the share checks of one (experiment, phase) all cite the same measurement
                    "E5 pods": "pods 100m : 1 : two-container = 0.046 : 0.447 : 0.493 (weights 4 : 39 : 43)",
                    "E5 two-container": "containers 100m : 1 = 0.144 : 0.847 (weights 17 : 100, not 1 : 10)",
                    "E10 pods": "old runc: pod level unchanged (4 : 39 : 43)",
                    "E10 two-container": "old runc: containers 100m : 1 = 0.092 : 0.899 (weights 4 : 39)",
                }
            ),
        ),
        "F9": Quote(
            "E8 /work p99 ms (run 1 / run 2): idle-4 98.7 / 137; busy-2 8359 / 3590; busy-4 6045 / 3137 "
            "(throttled ratio 0); busy req 2 472 / 341; busy req 4 222 / 213; neighbor 7.3-7.5 CPUs",
            _checks(
                {
                    "throttled_ratio busy-lim2x": "busy, limit 4: 0 ('throttled ratio 0!')",
                    "work {q} busy-lim2x / idle-lim2x": "p99 6045 / 98.7 = 61x; 3137 / 137 = 23x",
                    "busy_cores busy-lim2x / busy-lim": "not measured by the lab; its p99 6045 / 8359 = 0.72 and 3137 / 3590 = 0.87 say the same",
                    "work {q} busy-lim2x-req-full / busy-lim2x": "p99 222 / 6045 = 0.037; 213 / 3137 = 0.068",
                    "busy_cores busy-lim2x-req-full / busy-lim2x": "not measured by the lab (its p99 fell 27-45x)",
                }
            ),
        ),
        "F10": Quote(
            "E6: rate 0.48 throttled s/s against a real extra delay of ~0.075 s per 1 s (p50 108 vs 34 ms): "
            "6.4x; cAdvisor's samples 12.149 s apart for scrapes 20 s apart",
            _checks({"throttled / pause in the scrape window, limit": "0.48 / 0.075 = 6.4 (8 threads on 10 CPUs)"}),
        ),
        "F11": Quote(
            "S2 (talk, 250m on 16 CPUs): GOMAXPROCS 16 ~126 req/s, p99 ~200 ms; GOMAXPROCS 1 ~2746 req/s, "
            "p99 ~3.6 ms (21.7x)",
            _checks({"throughput_rps threads-one / threads-node": "2746 / 126 = 21.7x"}),
        ),
    }
)


def quote(finding: str) -> Quote:
    """The lab's figures a finding cites; a finding without one is a KeyError (every claim has one)."""
    return QUOTES[finding]
