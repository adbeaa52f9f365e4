"""The lab's figures are typed once (model/reference.py): the findings cite them, and what a check
quotes agrees with the numbers the figures draw."""

from __future__ import annotations

import pytest

from throttlelab.analysis import findings
from throttlelab.model.reference import LAB, QUOTES, lab_values


def test_every_finding_and_check_cites_the_lab_from_the_reference_table():
    for finding in findings.FINDINGS:
        if finding.ours:  # beyond the lab (docs/EXPERIMENTS.md): nothing of the lab's to cite, and it says so
            assert finding.id not in QUOTES and "ours, not the lab's" in finding.reference
            assert all(check.reference == finding.reference for check in finding.checks)
            continue
        quoted = QUOTES[finding.id]
        assert finding.reference == quoted.claim
        for check in finding.checks:
            assert check.reference in quoted.checks.values(), (finding.id, check.label)


def test_every_quote_is_used():
    used = {(f.id, c.reference) for f in findings.FINDINGS for c in f.checks}
    unused = [(fid, text) for fid, q in QUOTES.items() for text in q.checks.values() if (fid, text) not in used]
    assert unused == []


@pytest.mark.parametrize("finding", [f for f in findings.FINDINGS])
def test_a_ratio_check_quotes_the_lab_values_it_compares(finding):
    """Where the lab's table gives both arms of a ratio check, its quote starts with them (run 1)."""
    for check in finding.checks:
        if check.kind != "ratio" or check.scale != "log":
            continue
        lab = lab_values(check.experiment, check.metric)
        if check.variant in lab and check.baseline in lab:
            start = f"{lab[check.variant]:g} / {lab[check.baseline]:g} = "
            assert check.reference.startswith(start), (check.label, check.reference)


def test_the_lab_table_is_keyed_like_the_metrics():
    from throttlelab.analysis.metrics import CATALOGUE

    derived = {"throttled_ms_per_round"}  # E2a's figure (b): total throttled ms / 20 rounds
    for figures in LAB.values():
        for values in figures.values.values():
            assert set(values) - derived <= set(CATALOGUE), figures.experiment
