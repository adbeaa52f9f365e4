"""Every claim, in the order of its number: the lab's F1-F5 (jobs), F6, F7, F9-F11 (services), F8 (weights),
then ours beyond the lab, F12-F14 (beyond; docs/EXPERIMENTS.md)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from throttlelab.analysis.findings import beyond, engine, jobs, services, weights
from throttlelab.analysis.findings.engine import Evidence, Finding

FINDINGS: tuple[Finding, ...] = tuple(
    sorted((*jobs.FINDINGS, *weights.FINDINGS, *services.FINDINGS, *beyond.FINDINGS), key=lambda f: int(f.id[1:]))
)


def evaluate(evidence: Evidence, findings: Sequence[Finding] = FINDINGS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(findings.csv, checks.csv) for the given evidence: every claim of the catalogue unless told otherwise."""
    return engine.evaluate(evidence, findings)
