"""All runs -> metrics.csv: one row per (run, metric), in long form with the unit beside the value.

The run is the unit of replication (docs/STATISTICS.md §1): every metric is ONE number
per run, computed by its experiment's family (:mod:`.jobs_metrics`, :mod:`.weights_metrics`,
:mod:`.services_metrics`, as the experiment's catalogue row says: model/catalogue.py) from that
run's rows of the tidy tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from throttlelab.analysis.metrics import jobs_metrics, services_metrics, weights_metrics
from throttlelab.analysis.metrics.metric_catalogue import CATALOGUE
from throttlelab.analysis.tidy import RUN_KEYS, InputError
from throttlelab.model.catalogue import experiment as catalogued

#: ``note``: why a value is empty ("/work: n too small for p99: 60 requests (needs 368)"), else "".
METRICS_COLUMNS = [*RUN_KEYS, "metric", "value", "unit", "note"]


def _by_run(frame: pd.DataFrame) -> dict[tuple[Any, ...], pd.DataFrame]:
    if frame.empty:
        return {}
    return {key: group for key, group in frame.groupby(list(RUN_KEYS), sort=False)}


#: Each family's per-run metrics (the catalogue's ``family`` column names the module).
FAMILY_METRICS = {
    "jobs": jobs_metrics.job_run_metrics,
    "weights": weights_metrics.weights_run_metrics,
    "services": services_metrics.service_run_metrics,
}


def experiment_metrics(experiment: str, parts: Mapping[str, pd.DataFrame | None]) -> dict[str, float]:
    """The metrics of one run of ``experiment`` from its rows (``parts``: table name -> rows or None).

    The catalogue row says which family computes them and of which kind; an experiment that is
    its read-back (E1: ``metrics`` None) has none."""
    row = catalogued(experiment)
    if row.metrics is None:
        return {}
    return FAMILY_METRICS[row.family](row, parts)


def run_metrics(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """metrics.csv: one row per (run, metric), in long form with the unit beside the value."""
    grouped = {
        name: _by_run(tables[name])
        for name in ("headers", "summaries", "rounds", "requests", "readback", "share_samples")
    }
    # the service experiments' tables; absent in inputs that predate them
    grouped.update({name: _by_run(tables[name]) for name in ("podstats", "target_stats") if name in tables})
    rows = []
    for run in tables["runs"][list(RUN_KEYS)].itertuples(index=False, name=None):
        parts = {name: groups.get(run) for name, groups in grouped.items()}
        try:
            values = experiment_metrics(run[1], parts)
        except InputError as exc:
            raise InputError(f"run {'/'.join(map(str, run))}: {exc}") from None
        notes: dict[str, str] = {}
        if parts["requests"] is not None:
            latency, notes = services_metrics.latency_metrics(parts["requests"], load_timeout_ms(parts["headers"]))
            values.update(latency)
        rows += [(*run, name, value, CATALOGUE[name].unit, notes.get(name, "")) for name, value in values.items()]
    frame = pd.DataFrame.from_records(rows, columns=METRICS_COLUMNS)
    return frame.astype({"repeat": "int64", "value": "float64", "note": "str"})


def load_timeout_ms(headers: pd.DataFrame | None) -> float:
    """The client timeout of the run's load generator (its header's params), else cpulab's default."""
    if headers is not None and "timeout_ms" in headers.columns:
        given = headers.loc[headers["command"] == "load", "timeout_ms"].dropna()
        if len(given):
            return float(given.iloc[0])
    return services_metrics.DEFAULT_LOAD_TIMEOUT_MS
