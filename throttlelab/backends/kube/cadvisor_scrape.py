"""What monitoring sees (E6): the kubelet's cAdvisor series of one container, with cAdvisor's own
sample timestamps."""

from __future__ import annotations

from typing import Any

from throttlelab.backends.base import CADVISOR_COUNTERS, BackendError

#: The cAdvisor series E6 compares with what the workload saw.
CADVISOR_METRICS = tuple(CADVISOR_COUNTERS)


def select_cadvisor(samples: list[Any], pod: str, container: str, scraped_ns: int) -> dict[str, Any]:
    if not samples:
        raise BackendError(f"cAdvisor has no series for {pod}/{container} yet (it samples every ~10-15 s)")
    stamps = {s.timestamp_ms for s in samples}
    if None in stamps:
        raise BackendError("cAdvisor gave samples without timestamps; E6 needs cAdvisor's own sample times")
    return {
        "type": "cadvisor",
        "pod": pod,
        "container": container,
        "t_ms": max(stamps),
        "timestamps_ms": sorted(stamps),
        "scraped_t_ns": scraped_ns,
        **{s.name: s.value for s in samples},
    }
