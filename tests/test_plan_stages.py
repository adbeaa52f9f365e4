"""benchmarks/plan_stages.py: its two looks' levels are those of docs/STATISTICS.md §6."""

from __future__ import annotations

import importlib.util

import pytest
from conftest import PROJECT


def _plan_stages():
    spec = importlib.util.spec_from_file_location("plan_stages", PROJECT / "benchmarks" / "plan_stages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("looks", "two_sided"),
    [((3, 5), (0.0114, 0.0457)), ((5, 8), (0.0132, 0.0450)), ((8, 12), (0.0164, 0.0439)), ((8, 14), (0.0095, 0.0463))],
)
def test_the_looks_levels_are_the_documented_spending_functions(looks, two_sided):
    first, second = _plan_stages().obrien_fleming(looks[0] / looks[1], 0.025)
    # the table's nominal two-sided levels, halved: the one-sided levels of a one-sided 2.5% over both looks
    assert (2 * first, 2 * second) == pytest.approx(two_sided, abs=0.00015)
