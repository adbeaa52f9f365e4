"""The report's table of the lab's E3 values beside ours, cell by cell."""

from __future__ import annotations

import pandas as pd

from conftest import FIXTURE_ROOT
from throttlelab.analysis.tidy import read_table
from throttlelab.model.reference import lab_values
from throttlelab.report.page import lab_cells_table

LAB_E3 = lab_values("E3", "gomaxprocs")


def _ten_cpu_tables(override: dict[str, float] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """metrics and runs of a 10-CPU E3 run whose every GOMAXPROCS is the lab's (or ``override``'s)."""
    values = {**LAB_E3, **(override or {})}
    rows, runs = [], []
    for variant, value in values.items():
        build, _, rest = variant.partition("-")
        limit = rest.split("-")[0]
        rows.append(("vm", "E3", variant, 0, "gomaxprocs", value))
        rows.append(("vm", "E3", variant, 0, "expected_gomaxprocs", LAB_E3[variant]))
        runs.append(
            {
                "backend": "vm",
                "experiment": "E3",
                "variant": variant,
                "repeat": 0,
                "cpus": 10,
                "param_build": build,
                "param_limit": None if limit == "none" else limit,
                "param_gomaxprocs": 6 if variant.endswith("env6") else None,
                "param_godebug": "containermaxprocs=0" if variant.endswith("godebug") else None,
            }
        )
    metrics = pd.DataFrame(rows, columns=["backend", "experiment", "variant", "repeat", "metric", "value"])
    return metrics, pd.DataFrame(runs)


def test_every_cell_of_the_lab_compared():
    metrics, runs = _ten_cpu_tables()
    table = lab_cells_table(metrics, runs, "E3", list(LAB_E3))
    assert len(table.rows) == 14 and {row[-1] for row in table.rows} == {"yes"}
    assert "14 of 14 cells equal the lab's" in table.notes[0] and "here: 10 CPUs" in table.notes[0]
    by_variant = {row[0]: row for row in table.rows}
    assert by_variant["go125mod-2500m"][3:5] == ["3", "3"]
    assert by_variant["go125mod-2-env6"][2] == "limit 2, GOMAXPROCS=6"


def test_a_cell_off_the_lab_says_no():
    metrics, runs = _ten_cpu_tables({"go125mod-2500m": 10})
    table = lab_cells_table(metrics, runs, "E3", list(LAB_E3))
    by_variant = {row[0]: row for row in table.rows}
    assert by_variant["go125mod-2500m"][-1] == "no" and "13 of 14" in table.notes[0]


def test_a_two_cpu_run_differs_where_the_node_size_matters():
    metrics = pd.read_csv(FIXTURE_ROOT / "tables" / "metrics.csv")
    runs = read_table(FIXTURE_ROOT / "tables" / "runs.csv", "runs")
    order = list(dict.fromkeys(runs.loc[runs["experiment"] == "E3", "variant"]))
    table = lab_cells_table(metrics, runs, "E3", order)
    same = {row[0] for row in table.rows if row[-1] == "yes"}
    assert same == {"go125mod-500m", "go125mod-2-env6"}
    assert lab_cells_table(metrics, runs, "E2a", order) is None
