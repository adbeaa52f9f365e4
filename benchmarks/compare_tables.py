"""Compare two analyses' tidy tables value by value (numbers equal to 1e-12 relative).

Used to show that a change of code leaves the numbers alone: analyse the same raw logs
before and after (``throttlelab tables``, ``stats``, ``findings`` into two folders), then

    python benchmarks/compare_tables.py OLD_TABLES NEW_TABLES [TABLE ...]

Prints one line per table and every difference; exits 1 if any value differs. Columns
present in only one of the two are named and left out of the comparison (a table may
gain columns), so the line says exactly what was compared.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def compare(old: pd.DataFrame, new: pd.DataFrame, name: str) -> list[str]:
    problems = []
    only_old = [c for c in old.columns if c not in new.columns]
    only_new = [c for c in new.columns if c not in old.columns]
    if only_old or only_new:
        problems.append(f"{name}: columns only before {only_old}, only after {only_new} (not compared)")
    if len(old) != len(new):
        return [*problems, f"{name}: {len(old)} rows before, {len(new)} after"]
    for col in [c for c in old.columns if c in new.columns]:
        x, y = old[col], new[col]
        if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y):
            xv, yv = x.to_numpy(float), y.to_numpy(float)
            same = (np.isnan(xv) & np.isnan(yv)) | (np.abs(xv - yv) <= 1e-12 * np.maximum(1, np.abs(xv)))
        else:
            same = (x.fillna("<NA>").astype(str) == y.fillna("<NA>").astype(str)).to_numpy()
        if not same.all():
            k = int(np.argmax(~same))
            problems.append(
                f"{name}.{col}: {int((~same).sum())} values differ, e.g. row {k}: {x.iloc[k]!r} vs {y.iloc[k]!r}"
            )
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old", type=Path)
    p.add_argument("new", type=Path)
    p.add_argument("tables", nargs="*", help="table names (default: every CSV in OLD)")
    args = p.parse_args(argv)
    names = args.tables or sorted(f.stem for f in args.old.glob("*.csv"))
    differing = 0
    for name in names:
        old = pd.read_csv(args.old / f"{name}.csv", keep_default_na=False, na_values=[""])
        new = pd.read_csv(args.new / f"{name}.csv", keep_default_na=False, na_values=[""])
        problems = compare(old, new, name)
        value_problems = [x for x in problems if "not compared" not in x]
        differing += len(value_problems)
        print(f"{name}: {len(old)} rows, {'identical' if not value_problems else 'DIFFERENT'}")
        for line in problems:
            print(f"  {line}")
    print(f"tables with differing values: {differing}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
