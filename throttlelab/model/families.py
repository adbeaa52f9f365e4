"""Which experiment belongs to which family, and which are the lab's (pure, the one place).

The burst jobs all run one `cpulab burst` per run and share E2a's metrics: the lab's E2a
and three of the project's own experiments beyond the lab (docs/EXPERIMENTS.md): X1 (burst
budget), X2 (CFS period), X3 (cpuset of 1 vs 2 CPUs). X5 and X6 are service experiments with
E2b's machinery. Experiments whose id starts with X are ours, not the lab's: the report marks
their findings so.
"""

from __future__ import annotations

#: One `cpulab burst` process per run; E2a's per-run metrics.
BURST_JOBS = ("E2a", "X1", "X2", "X3")
#: One `cpulab burst` process in each of several pods per run (X4); E2a's metrics, averaged over the pods.
MULTI_BURST_JOBS = ("X4",)
#: The service experiments beyond the lab: E2b's one service under open (or closed) loop load.
BEYOND_SERVICES = ("X5", "X6")
#: The experiments the project added beyond the lab, in the report's order.
BEYOND = ("X1", "X2", "X3", "X4", "X5", "X6")


def is_ours(experiment: str) -> bool:
    """True for an experiment beyond the lab (docs/EXPERIMENTS.md), False for the lab's own."""
    return experiment in BEYOND
