"""Numbers as the report, its figures and their captions print them.

The lowest module that both the figures and the report need, so neither imports
the other for it: three significant digits, no scientific notation, an interval
only where the tables give one.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd


def is_missing(value: Any) -> bool:
    """None, NaN and pandas' NA: a cell the tables left empty."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


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
    decimals = max(0, 2 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def fmt_interval(point: Any, lo: Any, hi: Any) -> str:
    """'84.4 [80.1, 88.5]'; just the point when there is no interval."""
    if is_missing(lo) or is_missing(hi):
        return fmt_number(point)
    return f"{fmt_number(point)} [{fmt_number(lo)}, {fmt_number(hi)}]"
