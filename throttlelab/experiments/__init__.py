"""Experiments of SPEC §4: each turns one variant's parameters into records.

An experiment function takes the variant's spec (validated by the profile
schema) and a Context, deploys a node through the backend interface, and
returns the records for the raw log plus its measurement window in seconds.
"""

from __future__ import annotations

from throttlelab.experiments.context import Context, ExperimentResult
from throttlelab.experiments.jobs import run_e1, run_e2a, run_e3, run_s1, run_x4
from throttlelab.experiments.weights import run_e4, run_shares
from throttlelab.experiments.monitoring import run_e6
from throttlelab.experiments.services import run_e2b, run_e7, run_e8, run_s2

REGISTRY = {
    "E1": run_e1,
    "E2a": run_e2a,
    "E3": run_e3,
    "S1": run_s1,
    "E4": run_e4,
    "E5": run_shares,
    "E10": run_shares,
    "E2b": run_e2b,
    "E7": run_e7,
    "E8": run_e8,
    "E6": run_e6,
    "S2": run_s2,
    # beyond the lab (docs/EXPERIMENTS.md): E2a's job with a burst budget, a CFS period, a cpuset
    "X1": run_e2a,
    "X2": run_e2a,
    "X3": run_e2a,
    # several pods bursting together or staggered
    "X4": run_x4,
    # E2b's service: steady arrivals near the limit, Go's minimum of 2 threads against 1
    "X5": run_e2b,
    "X6": run_e2b,
}

__all__ = ["REGISTRY", "Context", "ExperimentResult"]
