"""The lab's claims as data, evaluated on the per-run metrics (findings.csv, checks.csv).

:mod:`.engine` holds the machinery (Finding, Check, Requirement, Derivation, Evidence, the
evaluation, Holm, the verdicts) and no claim; :mod:`.predictions` is the model of docs/LAB.md §1 of a
variant (the CFS bandwidth model of a burst, the service's clumps, the pods' weights) from
which every threshold is derived; one module per family of experiments (model/catalogue.py's
``family``, as in experiments/ and metrics/) holds its claims, the lab's and ours alike (:mod:`.jobs_findings`
F1-F5 and F12-F15, :mod:`.weights_findings` F8, :mod:`.services_findings` F6, F7, F9-F11, F16, F17), each importing
the engine and the model, never each other; :mod:`.catalogue` puts them in order. Whether a claim
is ours is the catalogue's ``ours`` column of its experiments (``Finding.ours``), not a module. The
names below are the package's interface (``findings.evaluate(evidence)``).
"""

from throttlelab.analysis.findings.finding_catalogue import FINDINGS, evaluate
from throttlelab.analysis.findings.engine import (
    CHECKS_COLUMNS,
    CONTRADICTED,
    FINDINGS_COLUMNS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    REPRODUCED,
    WEAKER,
    Check,
    CheckResult,
    Derivation,
    Evidence,
    Finding,
    Look,
    Requirement,
    Unmet,
    finding_verdict,
    interval_verdict,
    tie_verdict,
    zero_count_verdict,
)

__all__ = [
    "CHECKS_COLUMNS",
    "CONTRADICTED",
    "FINDINGS",
    "FINDINGS_COLUMNS",
    "INCONCLUSIVE",
    "NOT_TESTABLE",
    "REPRODUCED",
    "WEAKER",
    "Check",
    "CheckResult",
    "Derivation",
    "Evidence",
    "Finding",
    "Look",
    "Requirement",
    "Unmet",
    "evaluate",
    "finding_verdict",
    "interval_verdict",
    "tie_verdict",
    "zero_count_verdict",
]
