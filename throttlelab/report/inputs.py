"""What the report and the archive read: the tidy tables (docs/TABLES.md), the raw logs' paths, the config.

The report never opens a raw log: the environment it shows is the analysis's
environment.csv, and a raw log is only a link (and a file the archive packs).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from throttlelab.analysis import tidy
from throttlelab.errors import ReportError
from throttlelab.model import results_layout as layout
from throttlelab.model.config import Design
from throttlelab.model.variants import column_names

#: The columns the report reads from each table; anything else may come and go.
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "findings": ("id", "claim", "verdict", "effect", "lo", "hi", "reference", "reason", "method"),
    "estimates": ("experiment", "variant", "metric", "unit", "point", "lo", "hi", "n", "level", "method", "flag"),
    "runs": ("experiment", "variant", "repeat", "start", "end", *column_names()),
    "headers": ("experiment", "variant", "go_version"),
    "environment": (
        "backend",
        "experiment",
        "variant",
        "repeat",
        "runtime_conversion",
        "kernel",
        "cgroup_version",
        "cpu_model",
        "cpu_count",
        "usable_cpus",
    ),
    "checks": ("id", "check", "experiment", "expected", "effect", "lo", "hi", "p_holm", "verdict", "reason"),
    "contrasts": ("experiment", "variant", "baseline", "metric", "effect", "lo", "hi", "n", "n_baseline", "note"),
    "interference": (
        "other_share_min",
        "other_share_max",
        "orchestrator_cpu_median",
        "orchestrator_cpu_p95",
        "orchestrator_cpu_max",
        "runtime_cpu_median",
        "runtime_cpu_p95",
        "runtime_cpu_max",
        "kernel_cpu_median",
        "kernel_cpu_p95",
        "kernel_cpu_max",
    ),
    "load_generator": ("experiment", "variant", "repeat", "late_p99_ms", "work_errors", "suspect_above_ms", "suspect"),
}
REQUIRED_TABLES = ("findings", "estimates", "runs", "headers", "environment")
#: Tables the page shows when they exist (E1's read-back has no estimates; contrasts, interference and
#: load_generator, the statistics the page prints beside the estimates, are absent from analyses that
#: predate them).
OPTIONAL_TABLES = ("readback", "checks", "metrics", "contrasts", "interference", "load_generator")
#: Tables read with the dtypes the analysis wrote them with (parameters and facts stay as written: "0", "2").
TYPED_TABLES = ("runs", "environment")


def read_table(tables_dir: Path, name: str, required: bool = True) -> pd.DataFrame | None:
    path = tables_dir / f"{name}.csv"
    if not path.is_file():
        if required:
            raise ReportError(f"{path}: missing (the analysis writes it; see docs/TABLES.md)")
        return None
    frame = tidy.read_table(path, name) if name in TYPED_TABLES else pd.read_csv(path)
    missing = [c for c in REQUIRED_COLUMNS.get(name, ()) if c not in frame.columns]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ReportError(f"{path}: no column {shown} (docs/TABLES.md lists the columns)")
    return frame


def read_tables(tables_dir: Path) -> dict[str, pd.DataFrame]:
    tables = {name: read_table(tables_dir, name) for name in REQUIRED_TABLES}
    for name in OPTIONAL_TABLES:
        frame = read_table(tables_dir, name, required=False)
        if frame is not None:
            tables[name] = frame
    return tables


def raw_log_path(raw_root: Path, experiment: str, variant: str, repeat: int) -> Path:
    """Where the runner wrote a run's raw log (the report links it; it never reads it)."""
    return raw_root / layout.raw_log_in_root(experiment, variant, repeat)


def config_text(config: Mapping[str, Any], design: Design) -> tuple[str, str]:
    """The effective config (with command-line overrides) and the profile file, as YAML text."""
    return yaml.safe_dump(dict(config), sort_keys=False), design.profile_path.read_text()
