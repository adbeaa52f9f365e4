"""The paragraphs an experiment's section prints (report/notes.py) name the statistic the analysis compared."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import e2b_clumped_arms
from throttlelab.analysis import report_statistics
from throttlelab.report.notes import section_notes


def _e2b_tables(**window) -> dict[str, pd.DataFrame]:
    """runs.csv of E2b's two clumped arms and their contrasts, as the analysis writes them."""
    runs, per_run = e2b_clumped_arms(**window)
    contrasts = report_statistics.contrasts_table(per_run, runs, 0.95)
    return {"runs": runs, "contrasts": contrasts, "estimates": per_run.iloc[0:0]}


@pytest.mark.parametrize(
    ("window", "named"),
    [
        # 5 clumps per run: too few for any quantile, so the contrast compares each run's maximum
        ({"rps": 20, "clump": 10, "duration_ms": 2500}, "/work max over 5 clumps with the go125mod build"),
        # 200 clumps per run support a p90
        ({"rps": 200, "clump": 10, "duration_ms": 10000}, "/work p90 with the go125mod build"),
    ],
)
def test_the_s2_note_names_the_e2b_statistic_its_contrast_compared(window, named):
    this_run = section_notes("S2", _e2b_tables(**window))[1]
    assert named in this_run and "(R = 3 and 3)" in this_run
