"""Draw figures of the registry from their tables, as inline-ready SVG (``throttlelab figure``).

One figure to a file, or several in one process into a folder, each as ``<figure>.svg`` with its
caption beside it as ``<figure>.caption.html`` (the draw_figures rule draws every figure of a profile
so, paying the imports once; Snakemake's report includes those captions):

    throttlelab figure --figure e2a_completion \\
        --table rounds=T/rounds.csv --table metrics=T/metrics.csv \\
        --table estimates=T/estimates.csv --table runs=T/runs.csv --out fig.svg
    throttlelab figure --figure e2a_completion --figure e3_gomaxprocs \\
        --table rounds=T/rounds.csv ... --out-dir results/report/local-ci/figures

The figures (:mod:`.registry`) are pure functions of DataFrames; only :func:`main`
touches files.
"""

from __future__ import annotations

import argparse
import html
import os
import shutil
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
    """The figure's caption: what it shows and the method behind its intervals."""
    return resolve(FIGURES[name].caption)(estimates, runs)


def caption_html(text: str) -> str:
    """A caption as the HTML paragraph Snakemake's report includes (report/captions/figure.rst)."""
    return f"<p>{html.escape(text, quote=False)}</p>\n"


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


def figure_svg(name: str, tables: Mapping[str, pd.DataFrame]) -> str:
    """The figure ``name`` as the SVG text the report inlines (titled with its experiment and title)."""
    entry = FIGURES[name]
    return figure_to_svg(draw(name, tables), name, f"{entry.experiment}: {entry.title}")


def write_folder(out_dir: Path, files: Mapping[str, str]) -> None:
    """Each file (name -> text) in ``out_dir``. A new folder appears whole, renamed into place from a
    hidden one beside it (removed if writing fails); into a folder that exists already, each file is replaced."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)  # a killed run's, should this pid come round again
    staging.mkdir()
    try:
        for file_name, text in files.items():
            (staging / file_name).write_text(text)
        if not out_dir.exists():
            staging.rename(out_dir)
            return
        for path in sorted(staging.iterdir()):
            path.replace(out_dir / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="throttlelab figure", description=__doc__.splitlines()[0])
    p.add_argument(
        "--figure",
        required=True,
        action="append",
        choices=sorted(FIGURES),
        metavar="NAME",
        help=f"a figure of the registry; repeat it to draw several (with --out-dir): {', '.join(sorted(FIGURES))}",
    )
    p.add_argument(
        "--table",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a tidy table (rounds, metrics, ...) and its file",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", type=Path, metavar="FILE", help="the SVG file to write (one --figure)")
    where.add_argument(
        "--out-dir",
        type=Path,
        metavar="DIR",
        help="the folder to write, each figure as NAME.svg and its caption as NAME.caption.html (nothing written if one fails)",
    )
    args = p.parse_args(argv)
    names = list(dict.fromkeys(args.figure))  # in the order given, each once
    if args.out is not None and len(names) > 1:
        p.error(f"--out writes one figure, {len(names)} were given: write them with --out-dir DIR")
    paths = parse_table_args(args.table)
    # into a folder each figure goes with its caption, which reads its own tables
    reads = {name: FIGURES[name].reads if args.out_dir is not None else FIGURES[name].tables for name in names}
    for name in names:
        missing = [t for t in reads[name] if t not in paths]
        if missing:
            needs = " ".join(f"--table {t}=PATH" for t in missing)
            given = ", ".join(sorted(paths)) or "none"
            print(f"throttlelab figure: {name} needs {needs} (tables given: {given})", file=sys.stderr)
            return 1
    needed = {t for name in names for t in reads[name]}
    absent = [f"--table {t}={paths[t]}" for t in sorted(needed) if not paths[t].is_file()]
    if absent:
        print(f"throttlelab figure: no such file: {'; '.join(absent)}", file=sys.stderr)
        return 1
    tables = {t: read_figure_table(t, paths[t]) for t in sorted(needed)}
    # every figure drawn before any file is written: a figure that fails leaves none behind
    svgs = {}
    for name in names:
        try:
            svgs[name] = figure_svg(name, tables)
        except ValueError as exc:
            print(f"throttlelab figure: {name}: {exc}", file=sys.stderr)
            return 1
    if args.out_dir is not None:
        files = {}
        for name in names:
            entry = FIGURES[name]
            files[entry.svg] = svgs[name]
            files[entry.caption_html] = caption_html(caption(name, tables["estimates"], tables["runs"]))
        write_folder(args.out_dir, files)
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(svgs[names[0]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
