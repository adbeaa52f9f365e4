"""Two looks at an experiment (docs/STATISTICS.md §6): after its first stage of repeats, which variants' later
repeats are measured; after the run, the look each check is judged at.

An experiment whose profile gives ``first_look: n`` measures repeats 0 .. n-1 of every variant, then this
stage's ``throttlelab look`` judges its checks on those runs alone at the first look's level
(:func:`stats.look_levels`, spent from the confidence level by the O'Brien-Fleming-type function before any
data). The second stage measures the variants that a decisive check or premise still open there compares
(every variant for one that names none): a variant only decided checks compare stops, and so does the whole
experiment when every such check is decided. A check is then judged at the second look's level on every run
when a variant it compares went on; otherwise at the first look's level on the runs it was decided on.

The look file (results/<backend>/looks/<experiment>.json, model/look_file.py) is the Snakemake checkpoint's
output; the rules read its ``variants`` to list the second stage's raw logs, and the findings read the levels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from throttlelab.analysis import findings, metrics, stats, tidy
from throttlelab.model import look_file

#: The verdicts that decide a check at a look; an inconclusive one sends the variants it compares on. "Not testable
#: here" names what this host or backend lacks, which more runs of the same design do not supply.
DECIDED = frozenset({findings.REPRODUCED, findings.CONTRADICTED, findings.WEAKER, findings.NOT_TESTABLE})


def _judged(checks: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """The decisive checks and premises on ``experiment`` (checks.csv rows): what a look decides on."""
    return checks[(checks["experiment"] == experiment) & (checks["role"] != "supporting")]


def _open(checks: pd.DataFrame, experiment: str) -> pd.DataFrame:
    judged = _judged(checks, experiment)
    return judged[~judged["verdict"].isin(DECIDED)]


def open_checks(checks: pd.DataFrame, experiment: str) -> list[str]:
    """The decisive checks and premises on ``experiment`` that a look leaves undecided, as
    "F7 work p75 two-half / one-limit"; none: the experiment stops."""
    return [f"{r.id} {r.check}" for r in _open(checks, experiment).itertuples()]


def going_on(checks: pd.DataFrame, experiment: str, variants: Iterable[str]) -> list[str]:
    """The variants of ``experiment`` (``variants``) whose second stage is measured: those an open decisive check
    or premise compares, every one of them for a check that names none (an agreement over the experiment).
    ``checks`` is checks.csv as the catalogue evaluates it, one row per check in the catalogue's order."""
    catalogue = [check for finding in findings.FINDINGS for check in finding.checks]
    if len(catalogue) != len(checks):
        raise ValueError(f"{len(checks)} check rows for the catalogue's {len(catalogue)} checks")
    every = set(variants)
    needed: set[str] = set()
    for check, still_open in zip(catalogue, checks.index.isin(_open(checks, experiment).index)):
        if still_open:
            needed |= set(check.variants_needed()) or every
    return sorted(needed & every)


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
    variants = going_on(checks, experiment, evidence.variants(experiment))
    return {
        "experiment": experiment,
        "fraction": fraction,
        "confidence": confidence,
        "levels": [first, second],
        "runs": len(tables["runs"]),
        "go_on": bool(variants),
        "variants": variants,
        "open": still_open,
        "decided": [
            f"{r.id} {r.check}: {r.verdict}" for r in _judged(checks, experiment).itertuples() if r.verdict in DECIDED
        ],
    }


def judged_looks(paths: Iterable[str | Path]) -> dict[str, findings.Look]:
    """experiment -> its two looks, from its look file: both levels and the variants measured in its second stage
    (each check is judged at the look :meth:`findings.Look.index` gives it)."""
    out = {}
    for path in paths:
        look = look_file.read(path)
        out[look["experiment"]] = findings.Look(tuple(look["levels"]), frozenset(look["variants"]))
    return out
