"""Experiments of SPEC §4: each turns one variant's parameters into records.

An experiment function takes the variant's spec (validated by the profile
schema) and a Context, deploys a node through the backend interface, and
returns the records for the raw log plus its measurement window in seconds.
"""

from __future__ import annotations

from .context import Context, ExperimentResult
from .jobs import run_e1, run_e2a, run_e3, run_s1

REGISTRY = {
    "E1": run_e1,
    "E2a": run_e2a,
    "E3": run_e3,
    "S1": run_s1,
}

__all__ = ["REGISTRY", "Context", "ExperimentResult"]
