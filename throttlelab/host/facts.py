"""Facts about this host for a run's metadata: kernel, machine, CPU model and counts."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def host_facts() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
    }


def cgroup_version(root: Path = Path("/sys/fs/cgroup")) -> int:
    """This host's cgroup version, read without any engine: 2 when the unified hierarchy is
    mounted at the root (its cgroup.controllers file exists), else 1."""
    return 2 if (root / "cgroup.controllers").exists() else 1
