"""The report's numbers: three significant digits, and interval ends rounded outward at the digits shown."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from throttlelab.analysis.number_format import fmt_bound, fmt_interval_outward, fmt_number, shown_decimals

#: the report's values: finite, non-zero and normal (at subnormal magnitudes a float cannot hold the decimal an
#: end is rounded to, and no measured quantity gets there)
finite = st.floats(min_value=-1e7, max_value=1e7, allow_nan=False, allow_infinity=False, allow_subnormal=False).filter(
    lambda x: x != 0
)


@pytest.mark.parametrize(
    "value, lower, upper",
    [
        (1.9746172, "1.97", "1.98"),
        (2.4012673, "2.40", "2.41"),
        (80.12, "80.1", "80.2"),
        (0.99961, "0.999", "1"),
        (0.04512, "0.0451", "0.0452"),
        (-0.6661, "-0.667", "-0.666"),
        (7052.5, "7052", "7053"),
        (1.5, "1.50", "1.50"),
        (0, "0", "0"),
        (float("inf"), "∞", "∞"),
        (float("nan"), "—", "—"),
    ],
)
def test_an_end_is_rounded_away_from_the_inside(value, lower, upper):
    assert (fmt_bound(value, "lower"), fmt_bound(value, "upper")) == (lower, upper)


def test_an_interval_prints_its_point_to_the_nearest_and_its_ends_outward():
    assert fmt_interval_outward(2.1775178, 1.9746172, 2.4012673) == "2.18 [1.97, 2.41]"
    assert fmt_interval_outward(0, 0, float("inf")) == "0 [0, ∞]"
    assert fmt_interval_outward(2.0, float("nan"), float("nan")) == "2"


@given(finite)
def test_the_printed_ends_hold_the_value(x):
    assert float(fmt_bound(x, "lower")) <= x <= float(fmt_bound(x, "upper"))


@given(finite)
def test_an_end_moves_less_than_one_digit_shown(x):
    # in decimals, exactly: a float step underflows for the smallest x
    step = Decimal(1).scaleb(-shown_decimals(x))
    for side in ("lower", "upper"):
        assert abs(Decimal(fmt_bound(x, side)) - Decimal(repr(x))) < step


@given(finite)
def test_an_end_shows_no_more_digits_than_the_number_itself(x):
    for side in ("lower", "upper"):
        shown = fmt_bound(x, side)
        decimals = len(shown.split(".")[1]) if "." in shown else 0
        assert decimals <= shown_decimals(x)
        assert "e" not in shown.lower()


@given(st.lists(finite, min_size=3, max_size=3).map(sorted))
def test_the_printed_interval_holds_the_computed_one(values):
    lo, point, hi = values
    text = fmt_interval_outward(point, lo, hi)
    shown_lo, shown_hi = (float(x) for x in text.split("[")[1].rstrip("]").split(", "))
    assert shown_lo <= lo and hi <= shown_hi
    assert text.startswith(fmt_number(point) + " [")
    assert math.isfinite(shown_lo) and math.isfinite(shown_hi)


def test_levels_runs_and_ties_read_as_the_page_prints_them():
    from throttlelab.analysis.number_format import fmt_level, fmt_runs, fmt_tie

    assert (fmt_level(0.95), fmt_level(1 - 0.05 / 3), fmt_level(0.99), fmt_level(float("nan"))) == (
        "95%",
        "98.3%",
        "99%",
        "—",
    )
    assert (fmt_runs(3), fmt_runs(3.0, 5.0), fmt_runs(float("nan")), fmt_runs(5, float("nan"))) == (
        "R = 3",
        "R = 3 vs 5",
        "—",
        "R = 5",
    )
    assert (
        fmt_tie(0.0, 5, 0.0, 1 - 0.025 ** (1 / 5), 0.95) == "0 in all 5 runs; the mean in [0, 0.522] at one-sided 97.5%"
    )
