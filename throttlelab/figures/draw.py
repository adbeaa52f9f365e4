"""Draw one figure of the registry from its tables, as inline-ready SVG (``throttlelab figure``).

    throttlelab figure --figure e2a_completion \\
        --table rounds=T/rounds.csv --table metrics=T/metrics.csv \\
        --table estimates=T/estimates.csv --table runs=T/runs.csv --out fig.svg

The figures (:mod:`.registry`) are pure functions of DataFrames; only :func:`main`
touches files.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from throttlelab.analysis import tidy
from throttlelab.figures.registry import FIGURES, resolve
from throttlelab.figures.svg import figure_to_svg


def draw(name: str, tables: Mapping[str, pd.DataFrame]) -> Figure:
    """The figure ``name`` drawn from the tables it reads (a clear error when one is missing)."""
    entry = FIGURES[name]
    missing = [t for t in entry.tables if t not in tables]
    if missing:
        raise ValueError(f"figure {name} needs the tables {', '.join(missing)}")
    return resolve(entry.draw)(**{t: tables[t] for t in entry.tables})


def caption(name: str, estimates: pd.DataFrame, runs: pd.DataFrame) -> str:
    """The text under the figure on the report page: what it shows and the method behind its intervals."""
    return resolve(FIGURES[name].caption)(estimates, runs)


def read_figure_table(name: str, path: str | Path) -> pd.DataFrame:
    """A table as the figures read it: runs.csv typed (its parameters as written), the others as CSV gives them."""
    if name == "runs":
        return tidy.read_table(path, "runs")
    return pd.read_csv(path)


def parse_table_args(items: list[str]) -> dict[str, Path]:
    tables = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--table expects NAME=PATH, got {item!r}")
        tables[name] = Path(path)
    return tables


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="throttlelab figure", description=__doc__.splitlines()[0])
    p.add_argument("--figure", required=True, choices=sorted(FIGURES))
    p.add_argument("--table", action="append", default=[], help="NAME=PATH of a tidy table (rounds, metrics, ...)")
    p.add_argument("--out", required=True, help="the SVG file to write")
    args = p.parse_args(argv)
    tables = {name: read_figure_table(name, path) for name, path in parse_table_args(args.table).items()}
    entry = FIGURES[args.figure]
    try:
        fig = draw(args.figure, tables)
    except ValueError as exc:
        print(f"throttlelab figure: {args.figure}: {exc}", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(figure_to_svg(fig, args.figure, f"{entry.experiment}: {entry.title}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
