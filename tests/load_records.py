"""Hand-made raw-log records shared by the tests of the service experiments and their analysis."""

from __future__ import annotations

import json
from pathlib import Path

META = {
    "type": "meta",
    "schema": 1,
    "experiment": "E2b",
    "variant": "clumped-limit",
    "repeat": 0,
    "backend": "local",
    "spec": {"clump": 3},
    "runtime": "runc-new",
    "environment": {"kernel": "test"},
    "capabilities": {"cpus": 2, "cgroup_version": 1},
    "start": "2026-01-01T00:00:00+00:00",
    "end": "2026-01-01T00:00:05+00:00",
    "wall_s": 5.0,
    "window_s": 2.0,
}


def header(src: str, command: str, extra: dict | None = None) -> dict:
    return {
        "type": "header",
        "src": src,
        "program": "cpulab",
        "variant": "go124mod",
        "go_version": "go1.25",
        "gomaxprocs": 1,
        "num_cpu": 1,
        "env": {"GOMAXPROCS": "", "GODEBUG": ""},
        "default_godebug": "",
        "cgroup": {},
        "command": command,
        "params": {"warmup": 500.0},
        "time": "2026-01-01T00:00:01.25Z",
        **(extra or {}),
    }


def write_log(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "raw" / "E2b" / "clumped-limit" / "rep0.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path
