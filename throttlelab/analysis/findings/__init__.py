"""The lab's claims as data, evaluated on the per-run metrics (findings.csv, checks.csv).

:mod:`.engine` holds the machinery (Finding, Check, Evidence, the evaluation,
Holm, the verdicts) and no claim; one module per family holds the claims
(:mod:`.jobs` F1-F5, :mod:`.weights` F8, :mod:`.services` F6, F7, F9-F11), each
importing the engine; :mod:`.catalogue` puts them in order. The names below are
the package's interface (``findings.evaluate(evidence)``).
"""

from throttlelab.analysis.findings.catalogue import FINDINGS, evaluate
from throttlelab.analysis.findings.engine import (
    CHECKS_COLUMNS,
    CONTRADICTED,
    FINDINGS_COLUMNS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    REPRODUCED,
    Check,
    CheckResult,
    Evidence,
    Finding,
    Requirement,
    interval_verdict,
)

__all__ = [
    "CHECKS_COLUMNS", "CONTRADICTED", "FINDINGS", "FINDINGS_COLUMNS", "INCONCLUSIVE", "NOT_TESTABLE", "REPRODUCED",
    "Check", "CheckResult", "Evidence", "Finding", "Requirement", "evaluate", "interval_verdict",
]
