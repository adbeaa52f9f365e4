"""Numbers as the report, its figures and their captions print them.

The lowest module that both the figures and the report need, so neither imports
the other for it: three significant digits, no scientific notation, an interval
only where the tables give one.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any, Literal

import pandas as pd


def is_missing(value: Any) -> bool:
    """None, NaN and pandas' NA: a cell the tables left empty."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def is_true(value: Any) -> bool:
    """A table's boolean cell as pandas wrote it (True, "True", 1) or a reader left it ("true", "1"); empty: False."""
    return str(value).strip().lower() in ("true", "1")


def fmt_number(value: Any) -> str:
    """Three significant digits without scientific notation: 7052, 84.4, 0.312, 0.0451; an unbounded end
    of an interval (no number of runs bounds it) as ∞ or −∞."""
    if is_missing(value):
        return "—"
    x = float(value)
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e6:
        return str(int(x))
    return f"{x:.{shown_decimals(x)}f}"


def shown_decimals(x: float) -> int:
    """The decimals :func:`fmt_number` prints of a finite, non-zero ``x``: three significant digits, none
    dropped left of the point (7052.5 -> 0, 84.37 -> 1, 0.04512 -> 4)."""
    return max(0, 2 - math.floor(math.log10(abs(x))))


def fmt_bound(value: Any, side: Literal["lower", "upper"]) -> str:
    """An end of an interval at the digits :func:`fmt_number` shows, rounded away from the interval's inside:
    a lower end down, an upper end up (1.9746 -> "1.97" as a lower end, 2.4013 -> "2.41" as an upper end), so
    the printed interval always holds the computed one."""
    if is_missing(value):
        return "—"
    x = float(value)
    if math.isinf(x) or x == 0:
        return fmt_number(x)
    step = Decimal(1).scaleb(-shown_decimals(x))
    rounded = Decimal(repr(x)).quantize(step, rounding=ROUND_FLOOR if side == "lower" else ROUND_CEILING)
    # the rounded end has at most the decimals its own magnitude shows, so fmt_number prints it exactly
    return fmt_number(float(rounded))


def fmt_interval(point: Any, lo: Any, hi: Any) -> str:
    """'84.4 [80.1, 88.5]'; just the point when there is no interval."""
    if is_missing(lo) or is_missing(hi):
        return fmt_number(point)
    return f"{fmt_number(point)} [{fmt_number(lo)}, {fmt_number(hi)}]"


def fmt_interval_outward(point: Any, lo: Any, hi: Any) -> str:
    """'84.4 [80.1, 88.6]' for 84.37 in [80.12, 88.51]: the point to the nearest digit shown, the ends rounded
    outward (:func:`fmt_bound`); just the point when there is no interval."""
    if is_missing(lo) or is_missing(hi):
        return fmt_number(point)
    return f"{fmt_number(point)} [{fmt_bound(lo, 'lower')}, {fmt_bound(hi, 'upper')}]"


def fmt_level(level: Any) -> str:
    """A confidence level as a percentage with the digits it needs: 0.95 -> "95%", 1 - 0.05/3 -> "98.3%"."""
    if is_missing(level):
        return "—"
    text = f"{float(level) * 100:.1f}".rstrip("0").rstrip(".")
    return f"{text}%"


def fmt_runs(runs: Any, runs_baseline: Any = None) -> str:
    """The runs an estimate was made from: "R = 3", "R = 3 vs 3" for two arms, "—" when none."""
    if is_missing(runs) or not float(runs):
        return "—"
    text = f"R = {int(float(runs))}"
    if not is_missing(runs_baseline) and float(runs_baseline):
        text += f" vs {int(float(runs_baseline))}"
    return text


def fmt_tie(value: Any, runs: Any, lo: Any, hi: Any, level: Any) -> str:
    """A check whose every run gave the same value: "0 in all 5 runs; the mean in [0, 0.522] at one-sided
    97.5%" (the bound on the mean, its ends rounded outward, at the one-sided level of the two-sided ``level``)."""
    one_sided = 1 - (1 - float(level)) / 2
    return (
        f"{fmt_number(value)} in all {int(float(runs))} runs; the mean in [{fmt_bound(lo, 'lower')}, "
        f"{fmt_bound(hi, 'upper')}] at one-sided {fmt_level(one_sided)}"
    )
