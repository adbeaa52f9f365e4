"""Every per-run metric by name: its unit, scale and kind of summary (docs/TABLES.md).

One entry per metric any family computes; metrics.csv carries the unit beside each
value and estimates.csv summarises each as its entry says.
"""

from __future__ import annotations

from throttlelab.analysis.metrics import jobs, services, weights
from throttlelab.analysis.metrics.common import MetricSpec

CATALOGUE: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        *jobs.SPECS,
        *services.LATENCY_SPECS,
        *weights.SHARE_SPECS,
        *services.SPECS,
        *weights.READBACK_SPECS,
    )
}
