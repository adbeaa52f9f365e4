"""A workload started in a pod, and what its container's log holds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass
class KubeHandle:
    """A started container: its pod's name in the cluster and when its gate opened."""

    pod: str
    container: str
    pod_name: str
    started: float


def records_from_log(text: str, source: str) -> tuple[list[dict[str, Any]], str]:
    """Split a container log (stdout and stderr interleaved by kubelet) into cpulab's records
    (one JSON object with a "type" per line) and the rest (its stderr text)."""
    records, other = [], []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("{"):
            try:
                record = json.loads(stripped)
            except json.JSONDecodeError:
                record = None
            if isinstance(record, dict) and "type" in record:
                records.append(record)
                continue
        if stripped:
            other.append(line)
    return records, "\n".join(other) + ("\n" if other else "")
