"""Per-run metrics of the weight experiments: E4's read-back, E5/E10's shares of one CPU."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from throttlelab.analysis.metrics.common import MetricSpec
from throttlelab.analysis.tidy import InputError
from throttlelab.model.catalogue import Experiment

# The members E5/E10 compare (experiments/weights_experiments.py): pods, then the two-container pod's containers.
SHARE_MEMBERS = ("pod-p100m", "pod-p1", "pod-two", "small", "big")

SHARE_SPECS: tuple[MetricSpec, ...] = tuple(
    MetricSpec(
        f"share_{m}",
        "share",
        "linear",
        "interval",
        f"{m}'s share of the one contended CPU: mean over the readings of its usage / all members'",
    )
    for m in SHARE_MEMBERS
)
READBACK_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("readback_levels", "levels", "linear", "setting", "cgroup levels the backend wrote and read back"),
    MetricSpec(
        "readback_levels_ok",
        "levels",
        "linear",
        "setting",
        "levels whose read-back values equal the docs/LAB.md §2 design",
    ),
)


def readback_metrics(readback: pd.DataFrame | None) -> dict[str, float]:
    """How many designed levels were read back equal to the design (ancestors are not designed)."""
    if readback is None:
        raise InputError("no readback rows")
    designed = readback[~readback["level"].isin(["run-root", "host-root"])]
    ok = designed["mismatches"].fillna("").astype(str).str.len() == 0
    return {"readback_levels": float(len(designed)), "readback_levels_ok": float(ok.sum())}


def share_metrics(samples: pd.DataFrame) -> dict[str, float]:
    """Each member's share of the contended CPU, averaged over consecutive readings.

    A reading is the usage each member gained between two samples; its share is
    that gain over the gain of all members together (the lab's "last three 10 s
    readings", averaged).
    """
    wide = samples.pivot_table(index="t_s", columns="member", values="usage_usec", aggfunc="first").sort_index()
    if wide.isna().any().any():
        return {f"share_{m}": math.nan for m in wide.columns}
    gains = wide.diff().iloc[1:]
    totals = gains.sum(axis=1)
    if len(gains) == 0 or (totals <= 0).any():
        raise InputError("share readings show no CPU used between samples")
    shares = gains.div(totals, axis=0).mean()
    unknown = set(shares.index) - set(SHARE_MEMBERS)
    if unknown:
        raise InputError(f"unknown share members {sorted(unknown)} (metrics.SHARE_MEMBERS lists the known ones)")
    return {f"share_{m}": float(v) for m, v in shares.items()}


def weights_run_metrics(experiment: Experiment, parts: Mapping[str, pd.DataFrame | None]) -> dict[str, float]:
    """The metrics of the kind the catalogue row says: the read-back count (E4), each member's share (E5, E10)."""
    kind = experiment.metrics
    if kind == "readback":
        return readback_metrics(parts["readback"])
    if kind == "shares":
        samples = parts["share_samples"]
        if samples is None or samples.empty:
            raise InputError("no share readings")
        return share_metrics(samples)
    raise ValueError(
        f"{experiment.id}: metrics {kind!r} are not a weight experiment's (model/catalogue.py METRIC_KINDS)"
    )
