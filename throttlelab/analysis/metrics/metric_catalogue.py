"""Every per-run metric by name: its unit, scale and kind of summary (docs/TABLES.md).

One entry per metric any family computes; metrics.csv carries the unit beside each
value and estimates.csv summarises each as its entry says.
"""

from __future__ import annotations

from throttlelab.analysis.metrics import jobs_metrics, services_metrics, weights_metrics
from throttlelab.analysis.metrics.common import MetricSpec

CATALOGUE: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        *jobs_metrics.SPECS,
        *services_metrics.LATENCY_SPECS,
        *weights_metrics.SHARE_SPECS,
        *services_metrics.SPECS,
        *weights_metrics.READBACK_SPECS,
    )
}
