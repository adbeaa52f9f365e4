"""Two looks at an experiment (docs/STATISTICS.md §6): after its first stage of repeats, whether the rest are
measured; after the run, the look each experiment's checks are judged at.

An experiment whose profile gives ``first_look: n`` measures repeats 0 .. n-1 of every variant, then this
stage's ``throttlelab look`` judges its checks on those runs alone at the first look's level
(:func:`stats.look_levels`, spent from the confidence level by the O'Brien-Fleming-type function before any
data). When every decisive check and premise of the experiment is decided there, the look file says
``"go_on": false`` and the second stage is never measured; the findings then judge the experiment's checks at
the first look's level on the same runs. Otherwise the second stage is measured and its checks are judged on
every run at the second look's level. One decision per experiment: its checks compare its variants, so a
variant a decided check no longer needs can still be the baseline of an open one.

The look file (results/<backend>/looks/<experiment>.json, model/look_file.py) is the Snakemake checkpoint's
output; the rules read ``go_on`` to list the second stage's raw logs, and the findings read the levels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from throttlelab.analysis import findings, metrics, stats, tidy
from throttlelab.model import look_file

#: The looks an experiment measured in two stages has.
LOOKS = 2
#: The verdicts that decide a check at a look; an inconclusive one leaves the experiment open. "Not testable
#: here" names what this host or backend lacks, which more runs of the same design do not supply.
DECIDED = frozenset({findings.REPRODUCED, findings.CONTRADICTED, findings.WEAKER, findings.NOT_TESTABLE})


def _judged(checks: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """The decisive checks and premises on ``experiment`` (checks.csv rows): what a look decides on."""
    return checks[(checks["experiment"] == experiment) & (checks["role"] != "supporting")]


def open_checks(checks: pd.DataFrame, experiment: str) -> list[str]:
    """The decisive checks and premises on ``experiment`` that a look leaves undecided, as
    "F7 work p75 two-half / one-limit"; none: the experiment stops."""
    return [f"{r.id} {r.check}" for r in _judged(checks, experiment).itertuples() if r.verdict not in DECIDED]


def first_look(
    raw: Sequence[str | Path],
    experiment: str,
    *,
    fraction: float,
    confidence: float,
    left_out: Mapping[str, str] | None = None,
) -> dict:
    """The first look at one experiment's first-stage raw logs: its checks judged at the first look's level,
    and whether the second stage is needed. Returns the look file's content."""
    first, second = stats.look_levels(fraction, confidence)
    tables = tidy.parse_runs(raw)
    unknown = sorted(set(tables["runs"]["experiment"]) - {experiment})
    if unknown:
        raise tidy.InputError(f"throttlelab look --experiment {experiment}: raw logs of {', '.join(unknown)} given")
    evidence = findings.Evidence(
        metrics=metrics.run_metrics(tables),
        runs=tables["runs"],
        headers=tables["headers"],
        profile_experiments=frozenset({experiment}),
        level=first,
        left_out=dict(left_out or {}),
    )
    _, checks = findings.evaluate(evidence)
    still_open = open_checks(checks, experiment)
    return {
        "experiment": experiment,
        "fraction": fraction,
        "confidence": confidence,
        "levels": [first, second],
        "runs": len(tables["runs"]),
        "go_on": bool(still_open),
        "open": still_open,
        "decided": [
            f"{r.id} {r.check}: {r.verdict}" for r in _judged(checks, experiment).itertuples() if r.verdict in DECIDED
        ],
    }


def judged_looks(paths: Iterable[str | Path]) -> dict[str, findings.Look]:
    """experiment -> the look its checks are judged at, from its look file: the first when it stopped there,
    else the second (each with its level)."""
    out = {}
    for path in paths:
        look = look_file.read(path)
        index = 2 if look["go_on"] else 1
        out[look["experiment"]] = findings.Look(index, LOOKS, float(look["levels"][index - 1]))
    return out
