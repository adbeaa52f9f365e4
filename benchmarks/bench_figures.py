"""The figures of a run drawn as the rules draw them: one process per figure against one for all.

    python benchmarks/bench_figures.py [--tables DIR] [--repeats 3]

Takes the tidy tables of a run (tests/fixtures/tables by default; a past run's
results/<backend>/tables for every figure of its profile), reads nothing else and
writes only to a temporary folder. For each figure the tables' runs have, the old way
is one `python -m throttlelab figure --figure NAME ... --out NAME.svg` after the other
(what the 16 plot_figure jobs ran), the new one a single `throttlelab figure` with a
`--figure` for each and `--out-dir` (the draw_figures job). The two alternate, REPEATS
times each, so that a change of load hits both; each pass's SVGs must be the same bytes.
Wall times, without Snakemake's own cost per job. Prints figures; asserts nothing but that.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from throttlelab.figures.registry import figures_for

PROJECT = Path(__file__).resolve().parent.parent


def figure(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "throttlelab", "figure", *args], check=True, cwd=PROJECT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=Path, default=PROJECT / "tests" / "fixtures" / "tables")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ran = set(pd.read_csv(args.tables / "runs.csv")["experiment"])
    entries = [e for e in figures_for(ran) if all((args.tables / f"{t}.csv").is_file() for t in e.tables)]
    table_args = {e.name: [f"--table={t}={args.tables / f'{t}.csv'}" for t in e.tables] for e in entries}
    every_table = sorted({arg for e in entries for arg in table_args[e.name]})
    times: dict[str, list[float]] = {"one process per figure": [], "one process for all": []}
    with tempfile.TemporaryDirectory(prefix="throttlelab-bench-figures-") as tmp:
        for k in range(args.repeats):
            single, folder = Path(tmp) / f"single{k}", Path(tmp) / f"folder{k}"
            single.mkdir()
            load = os.getloadavg()[0]
            start = time.perf_counter()
            for e in entries:
                figure("--figure", e.name, *table_args[e.name], "--out", str(single / e.svg))
            times["one process per figure"].append(time.perf_counter() - start)
            start = time.perf_counter()
            figure(*(arg for e in entries for arg in ("--figure", e.name)), *every_table, "--out-dir", str(folder))
            times["one process for all"].append(time.perf_counter() - start)
            same = all((single / e.svg).read_bytes() == (folder / e.svg).read_bytes() for e in entries)
            assert same, f"pass {k}: the two ways drew different SVGs"
            print(f"pass {k + 1}: load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"{len(entries)} figures from {args.tables} ({', '.join(e.name for e in entries)})")
    for label, seconds in times.items():
        listed = ", ".join(f"{s:.2f}" for s in seconds)
        print(f"  {label:<24} median {statistics.median(seconds):6.2f} s  ({listed})")


if __name__ == "__main__":
    main()
