"""Plan two-stage repeats from one run's tables: which checks a first look at part of the runs could decide at an
O'Brien-Fleming level, and what skipping the second stage would save. A planning estimate, never a verdict.

    python benchmarks/plan_stages.py results/local/tables [--first 0.5] [--alpha 0.025]

Two looks with the information fraction ``--first`` (the share of an experiment's repeats measured before the
first look), the one-sided level ``--alpha`` spent across them by the O'Brien-Fleming-type function of
docs/STATISTICS.md §6 (:func:`obrien_fleming`). For every check judged by an
interval (log or linear scale) the first look is approximated from the full run: the same centre, the standard
error scaled by sqrt(n / n_1), and the t quantile of n_1 - 1 degrees of freedom at the first look's level (scaled by
the check's own level, so a Bonferroni level stays one). Ties, proportions and censored checks are counted as
going on to the second stage (identical runs decide at level a only from 0.5^R <= a, R >= 9 at the first look's
0.0028); read-backs without runs stop. An experiment skips its second stage only when every decisive check and
premise on it stops; the saving is the wall time of its runs past the first stage (runs.csv ``wall_s``).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from throttlelab.analysis.stats import look_levels as stats_levels


def obrien_fleming(first: float, alpha: float) -> tuple[float, float]:
    """The one-sided levels of the two looks (information fractions ``first`` and 1), as the pipeline spends them
    (:func:`throttlelab.analysis.stats.look_levels`)."""
    levels = stats_levels(first, 1 - 2 * alpha)
    return (1 - levels[0]) / 2, (1 - levels[1]) / 2


def first_look(row: pd.Series, first: float, alpha: float, alpha_first: float) -> str:
    """The first look's outcome for one check: "stop", "go on", or "" where the check is not judged."""
    if row["verdict"] == "not testable here" or row["role"] == "supporting":
        return ""
    if not np.isfinite(row["runs"]):
        return "stop"  # a read-back: decided by the readout itself
    if (
        row["scale"] not in ("log", "linear")
        or bool(row["tie"])
        or not (np.isfinite(row["lo"]) and np.isfinite(row["hi"]))
    ):
        return "go on"
    if row["scale"] == "log" and row["lo"] <= 0:
        return "go on"
    n = int(row["runs"])
    n1 = max(2, math.ceil(n * first))
    lo, hi = (math.log(row["lo"]), math.log(row["hi"])) if row["scale"] == "log" else (row["lo"], row["hi"])
    own = (1 - (row["level"] if np.isfinite(row["level"]) else 0.95)) / 2
    centre, half = (lo + hi) / 2, (hi - lo) / 2
    se = half / stats.t.ppf(1 - own, n - 1) * math.sqrt(n / n1)
    half1 = stats.t.ppf(1 - alpha_first * own / alpha, n1 - 1) * se
    lo1, hi1 = centre - half1, centre + half1
    if row["scale"] == "log":
        lo1, hi1 = math.exp(lo1), math.exp(hi1)
    t = row["threshold"]
    if row["relation"] == ">":
        return "stop" if lo1 > t else "go on"
    if row["relation"] == "<":
        return "stop" if hi1 < t else "go on"
    return "stop" if lo1 > t and hi1 < row["threshold_hi"] else "go on"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", type=Path, help="a run's tables folder (checks.csv, runs.csv)")
    parser.add_argument("--first", type=float, default=0.5, help="share of the repeats before the first look")
    parser.add_argument("--alpha", type=float, default=0.025, help="one-sided level over both looks")
    args = parser.parse_args()
    alpha_first, alpha_second = obrien_fleming(args.first, args.alpha)
    print(f"O'Brien-Fleming, two looks at {args.first:g} and 1: one-sided {alpha_first:.4f} then {alpha_second:.4f}")
    checks = pd.read_csv(args.tables / "checks.csv")
    runs = pd.read_csv(args.tables / "runs.csv")
    checks["look"] = [first_look(r, args.first, args.alpha, alpha_first) for _, r in checks.iterrows()]
    judged = checks[checks["look"] != ""]
    total = 0.0
    for experiment, group in judged.groupby("experiment"):
        mine = runs[runs["experiment"] == experiment]
        repeats = int(mine["repeat"].max()) + 1
        cut = max(1, math.ceil(repeats * args.first))
        later = float(mine.loc[mine["repeat"] >= cut, "wall_s"].sum())
        stops = (group["look"] == "stop").all()
        total += later if stops else 0.0
        going = "; ".join(f"{r.id} {r.check}" for r in group.itertuples() if r.look == "go on")
        print(
            f"{experiment}: {repeats} repeats, first look after {cut}: "
            f"{'stops, saves' if stops else 'goes on, would save'} {later:.1f} s"
            + ("" if stops else f" (open: {going})")
        )
    print(f"saved in all: {total:.1f} s of {float(runs['wall_s'].sum()):.1f} s of runs")


if __name__ == "__main__":
    main()
