"""Per-run metrics (metrics.csv) and their estimates across repeats (estimates.csv).

One module per family of experiments computes its metrics from one run's tidy rows
(:mod:`.jobs_metrics`, :mod:`.weights_metrics`, :mod:`.services_metrics`: the family and the kind of metrics
each experiment's catalogue row names, model/catalogue.py; :mod:`.services_metrics` also the
latencies of every run with requests), on the helpers of
:mod:`.common`; :mod:`.catalogue` names every metric, :mod:`.per_run` writes
metrics.csv and :mod:`.estimates` estimates.csv. Imports go one way: the families
import only :mod:`.common`, never each other.

The names below are the package's interface (``metrics.run_metrics(tables)``).
"""

from throttlelab.analysis.metrics.metric_catalogue import CATALOGUE
from throttlelab.analysis.metrics.common import MetricSpec, Scale, Summary
from throttlelab.analysis.metrics.estimates import (
    ESTIMATES_COLUMNS,
    FLAG_RANGE,
    FLAG_SETTING_VARIES,
    FLAG_UNDEFINED,
    Summarised,
    estimates_table,
    pooled_p999,
    summarise,
)
from throttlelab.analysis.metrics.jobs_metrics import burst_metrics, gomaxprocs_metrics, spin_metrics
from throttlelab.analysis.metrics.per_run import METRICS_COLUMNS, load_timeout_ms, run_metrics
from throttlelab.analysis.metrics.services_metrics import (
    DEFAULT_LOAD_TIMEOUT_MS,
    LATENESS_SUSPECT_MS,
    SERVICE_QUANTILES,
    WindowQuantile,
    design_window_quantile,
    latency_metrics,
    compared_window,
    window_quantile,
)
from throttlelab.analysis.metrics.weights_metrics import SHARE_MEMBERS, readback_metrics, share_metrics

__all__ = [
    "CATALOGUE",
    "DEFAULT_LOAD_TIMEOUT_MS",
    "ESTIMATES_COLUMNS",
    "FLAG_RANGE",
    "FLAG_SETTING_VARIES",
    "FLAG_UNDEFINED",
    "LATENESS_SUSPECT_MS",
    "METRICS_COLUMNS",
    "SERVICE_QUANTILES",
    "SHARE_MEMBERS",
    "MetricSpec",
    "Scale",
    "Summarised",
    "Summary",
    "WindowQuantile",
    "burst_metrics",
    "design_window_quantile",
    "estimates_table",
    "gomaxprocs_metrics",
    "latency_metrics",
    "load_timeout_ms",
    "pooled_p999",
    "readback_metrics",
    "run_metrics",
    "share_metrics",
    "spin_metrics",
    "summarise",
    "compared_window",
    "window_quantile",
]
