"""The paragraphs an experiment's section prints (report/notes.py) name the statistic the analysis compared."""

from __future__ import annotations

import pandas as pd
import pytest

from throttlelab.analysis import report_statistics
from throttlelab.model.variants import E2B_CLUMPED_LIMIT, E2B_CLUMPED_LIMIT_GO125, VariantSpec
from throttlelab.report.notes import section_notes


def _e2b_tables(**window) -> dict[str, pd.DataFrame]:
    """runs.csv of E2b's two clumped arms (``window``: rps, clump, duration_ms) and the contrasts computed on
    per-run metrics of both statistics, as the analysis writes them."""
    runs, metrics = [], []
    for variant, build in ((E2B_CLUMPED_LIMIT_GO125, "go125mod"), (E2B_CLUMPED_LIMIT, "go124mod")):
        spec = VariantSpec.from_dict("E2b", variant, {"build": build, "limit": "1", **window})
        for r in range(3):
            runs.append({"experiment": "E2b", "variant": variant, "repeat": r, **spec.columns()})
            metrics += [("E2b", variant, r, "work_p90_ms", 10.0 + r), ("E2b", variant, r, "work_max_ms", 20.0 + r)]
    runs_table = pd.DataFrame(runs)
    per_run = pd.DataFrame.from_records(metrics, columns=["experiment", "variant", "repeat", "metric", "value"])
    contrasts = report_statistics.contrasts_table(per_run, runs_table, 0.95)
    return {"runs": runs_table, "contrasts": contrasts, "estimates": per_run.iloc[0:0]}


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
