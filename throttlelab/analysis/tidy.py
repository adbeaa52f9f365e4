"""Raw logs -> long-format ("tidy") tables, validated while they are read.

A raw log (``results/<backend>/raw/<experiment>/<variant>/rep<k>.jsonl``) is a
``meta`` record, the cgroup readback, then the workload's records of
docs/RECORDS.md, each tagged with the ``src`` (pod/container) that wrote it and
closed by a ``process`` record. The tables and their columns are the contract of
docs/TABLES.md.

Parsing is strict on purpose: a log that is cut off or malformed raises ONE
:class:`RawLogError` naming the file and the line, so a broken run can never be
skipped silently or counted by half. Checked while reading:

* every line is one JSON object with a known ``type`` and the keys (and JSON
  types) its record must have; the file ends with a newline;
* line 1 is the ``meta`` record, and its experiment/variant/repeat agree with
  the file's place in the raw tree;
* every workload process has a ``header`` first and a ``process`` record last,
  exited with 0, and wrote its ``summary`` (every command ends with one);
* counts that a summary states agree with the records (burst rounds 0..n-1,
  load requests per endpoint), so a half-written process cannot pass;
* the experiment is in the catalogue (model/catalogue.py), and the process and runner records its
  row says a run cannot do without are present (E3's expectation).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd

from throttlelab.errors import InputError, SpecError  # InputError re-exported: callers import it from here too
from throttlelab.model.variants import COLUMN_PREFIX, VariantSpec, column_names
from throttlelab.model import records
from throttlelab.model import results_layout as layout
from throttlelab.model.catalogue import CatalogueError, experiment as catalogued

RUN_KEYS = ("backend", "experiment", "variant", "repeat")

# --------------------------------------------------------------------------
# the records' schema: model/records.py (docs/RECORDS.md), read here as the reader needs it

#: Required keys of every record type, with the JSON kind of their value.
#: Extra keys are allowed (a newer workload may add some); unknown types are not.
RECORD_FIELDS: dict[str, Mapping[str, str]] = {name: shape.required for name, shape in records.RECORDS.items()}
#: Keys a summary must carry, by the command that wrote it.
SUMMARY_FIELDS: dict[str, Mapping[str, str]] = {name: shape.required for name, shape in records.SUMMARIES.items()}
#: Records that carry no ``src``: the runner's own.
RUNNER_TYPES = records.RUNNER_TYPES
#: Load endpoints (RECORDS.md `req.ep`).
ENDPOINTS = records.ENDPOINTS

# --------------------------------------------------------------------------
# the tables (docs/TABLES.md)

_ID_DTYPES = {"backend": "str", "experiment": "str", "variant": "str", "repeat": "int64"}


def _param_dtypes() -> dict[str, str]:
    """dtype of every ``param_*`` column of runs.csv, from the type of its VariantSpec field.

    CPU quantities and text stay text ("500m", "1", a cpuset "0"); counts are nullable
    integers, times and rates floats; a field the variant did not set is empty.
    """
    kinds = {"int": "Int64", "float": "float64", "bool": "boolean", "str": "str", "Cpu": "str"}
    annotations = {f.name: str(f.type) for f in fields(VariantSpec)}
    dtypes = {}
    for column in column_names():
        name = column.removeprefix(COLUMN_PREFIX)
        annotation = annotations.get(name, "Cpu")  # app_request, sidecar_limit, ...: a resources block's quantities
        (base,) = [part.strip() for part in annotation.split("|") if part.strip() != "None"]
        dtypes[column] = kinds[base]
    return dtypes


#: The variant's parameters in runs.csv: one column per VariantSpec field (docs/TABLES.md).
PARAM_DTYPES = _param_dtypes()
#: The counters' per-interval deltas (rounds, reports) as columns: nullable, a counter that could not be read stays empty.
_COUNTERS = {records.delta(c): "Int64" for c in records.COUNTERS}

#: Columns (besides the run identifiers) and dtypes of every tidy table, in order.
#: ``Int64`` is pandas' nullable integer: a counter that could not be read stays empty.
TABLE_COLUMNS: dict[str, dict[str, str]] = {
    "runs": {
        "start": "str",
        "end": "str",
        "wall_s": "float64",
        "window_s": "float64",
        "kernel": "str",
        "cgroup_version": "Int64",
        "cpus": "Int64",
        "runtime": "str",
        **PARAM_DTYPES,
        "raw_path": "str",
        # host interference (meta.interference, meta.disturbed_attempts; empty in logs that predate them)
        # outside_share: everything outside the lab; other_share: its part that is not the lab's own system's
        # work above its idle level, as judged against the threshold; orchestrator_cpu: Snakemake and its
        # children but the runner, runtime_cpu: the backend's engine and shims (docker), kernel_cpu: the
        # kernel's threads, all in CPUs
        "outside_share": "float64",
        "other_share": "float64",
        "orchestrator_cpu": "float64",
        "runtime_cpu": "float64",
        "kernel_cpu": "float64",
        "interference_threshold": "float64",
        "disturbed": "boolean",
        "disturbed_attempts": "Int64",
        "disturbed_logs": "str",
        "interference": "str",
        # how the CPU ran: "tcg" (emulated by QEMU), "kvm" (virtualized); empty on a host (vm backend only)
        "cpu_accel": "str",
        # the seeds (model/seeds.py): the config's (meta.config_seed), the job's derived from it (meta.seed) and
        # its block's arrival seed, common to the variants of one (experiment, repeat) (meta.arrival_seed; empty
        # in logs that predate it)
        "config_seed": "Int64",
        "job_seed": "Int64",
        "arrival_seed": "Int64",
        # the git commit of the code that made the run (meta.code; empty in logs that predate it or where no
        # checkout was there); the run's start is what a revised threshold's date is compared with
        "code_commit": "str",
    },
    "rounds": {
        "src": "str",
        "round": "int64",
        "t_s": "float64",
        "wall_ms": "float64",
        "thread_cpu_ms": "float64",
        # the distinct CPUs the round's threads mainly ran on (empty in logs that predate it)
        "thread_cpus": "Int64",
        **_COUNTERS,
    },
    "reports": {"src": "str", "t_s": "float64", "cores": "float64", **_COUNTERS},
    "headers": {
        "src": "str",
        "command": "str",
        "variant_build": "str",
        "go_version": "str",
        "gomaxprocs": "int64",
        "num_cpu": "int64",
        "env_gomaxprocs": "str",
        "env_godebug": "str",
        "default_godebug": "str",
        "cg_quota_us": "Int64",
        "cg_period_us": "Int64",
        "cg_weight": "Int64",
        "cg_shares": "Int64",
        "expected_gomaxprocs": "Int64",
        "timeout_ms": "float64",
    },
    "readback": {
        "level": "str",
        "path": "str",
        "design_quota_us": "Int64",
        "design_period_us": "Int64",
        "design_weight": "Int64",
        "design_shares": "Int64",
        "actual_quota_us": "Int64",
        "actual_period_us": "Int64",
        "actual_weight": "Int64",
        "actual_shares": "Int64",
        "actual_cpus": "str",
        "formula": "str",
        "mismatches": "str",
        "error": "str",
    },
    # summaries.csv: src, command, then the summaries' numeric keys (any set, see flatten_numeric)
    "summaries": {"src": "str", "command": "str"},
    "requests": {
        "src": "str",
        "ep": "str",
        "target": "int64",
        "conn": "int64",
        "sched_ms": "float64",
        "lat_ms": "float64",
        "late_ms": "float64",
        "ok": "bool",
        "status": "int64",
    },
    "share_samples": {"member": "str", "level": "str", "t_s": "float64", "usage_usec": "Int64"},
    "podstats": {
        "pod": "str",
        "container": "str",
        "when": "str",
        "seq": "int64",
        "t_ms": "float64",
        "at_ms": "float64",
        **dict.fromkeys(records.COUNTERS, "Int64"),
    },
    "target_stats": {
        "src": "str",
        "when": "str",
        "target": "int64",
        "gomaxprocs": "Int64",
        "num_gc": "Int64",
        "requests": "Int64",
        "quota_us": "Int64",
        "period_us": "Int64",
        **dict.fromkeys(records.COUNTERS, "Int64"),
        "err": "str",
    },
    "share_expectations": {"member": "str", "level": "str", "weight": "int64", "share": "float64", "runtime": "str"},
    # environment.csv: the meta record's facts about the machine, then one text column
    # "env.<key>" per other key of its environment (nested keys joined with dots)
    "environment": {
        "start": "str",
        "end": "str",
        "runtime_conversion": "str",
        "kernel": "str",
        "machine": "str",
        "cpu_model": "str",
        "cpu_count": "Int64",
        "usable_cpus": "Int64",
        "cgroup_version": "Int64",
        "host_cpuset": "str",
        "node_cpus": "str",
        "cap_cpus": "Int64",
        "cap_cgroup_version": "Int64",
        "cap_can_pin_cpus": "boolean",
        "cap_has_pause_level": "boolean",
        "cap_notes": "str",
        "loadavg_before_1m": "float64",
        "loadavg_before_5m": "float64",
        "loadavg_before_15m": "float64",
        "loadavg_after_1m": "float64",
        "loadavg_after_5m": "float64",
        "loadavg_after_15m": "float64",
        "notes": "str",
    },
}
TABLE_NAMES = tuple(TABLE_COLUMNS)
#: Prefix of environment.csv's columns for the environment's other keys (``env.versions.runc``).
ENV_PREFIX = "env."
#: Keys of the meta record's environment that have a column of their own in environment.csv.
_ENV_COLUMNS = (
    "runtime_conversion",
    "kernel",
    "machine",
    "cpu_model",
    "cpu_count",
    "usable_cpus",
    "cgroup_version",
    "host_cpuset",
)


class RawLogError(InputError):
    """A raw log is truncated or malformed; the message names the file and the line."""

    def __init__(self, path: str | Path, line: int | None, problem: str):
        where = f"{path}, line {line}" if line is not None else str(path)
        super().__init__(f"{where}: {problem}")
        self.path = str(path)
        self.line = line
        self.problem = problem


# --------------------------------------------------------------------------
# one raw log


@dataclass
class _Process:
    """A workload process being read: from its header to its process record."""

    src: str
    command: str
    header_line: int
    summary: dict[str, Any] | None = None
    rounds: list[int] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)
    ok_requests: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RunTables:
    """The rows one raw log contributes to each table (tuples in column order)."""

    path: str
    run: tuple[str, str, str, int]
    rows: Mapping[str, tuple[tuple[Any, ...], ...]]


def check_fields(record: Mapping[str, Any], fields: Mapping[str, str], what: str) -> str | None:
    """The first problem with ``record`` against ``fields``, or None when it is fine."""
    return records.first_problem(record, fields, what)


def _decode(text: str, path: Path, number: int, is_last: bool) -> dict[str, Any]:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = " (the log looks truncated)" if is_last else ""
        raise RawLogError(path, number, f"not valid JSON{hint}: {exc.msg}: {text[:80]!r}") from None
    if not isinstance(record, dict):
        raise RawLogError(path, number, f"a record must be a JSON object, got {text[:80]!r}")
    kind = record.get("type")
    if kind not in RECORD_FIELDS:
        raise RawLogError(path, number, f"unknown record type {kind!r} (docs/RECORDS.md lists the known ones)")
    problem = check_fields(record, RECORD_FIELDS[kind], f"{kind} record")
    if problem:
        raise RawLogError(path, number, problem)
    return record


def _check_identity(meta: dict[str, Any], path: Path) -> None:
    """The meta record must describe the run its file name says it is."""
    expected = layout.raw_log_job(path)
    if expected is None:
        return  # not in the raw tree's layout (a copied log): nothing to compare
    found = (meta["experiment"], meta["variant"], meta["repeat"])
    if found != expected:
        raise RawLogError(
            path,
            1,
            f"meta names {found[0]}/{found[1]} repeat {found[2]}, but the file is {layout.raw_log_in_root(*expected)}",
        )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def flatten_numeric(record: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Numeric values of a (nested) record; nested keys joined with a dot (``work.p99_ms``).

    Strings, booleans and lists are left out; null becomes NaN so a key that is
    sometimes null keeps its column.
    """
    out: dict[str, float] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_numeric(value, f"{name}."))
        elif value is None:
            out[name] = float("nan")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def _text(value: Any) -> str | None:
    """An environment value as one line of text: lists joined with '; ', numbers and booleans as JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "; ".join(t for t in (_text(v) for v in value) if t is not None)
    return json.dumps(value, sort_keys=True)


def _flatten_text(record: Mapping[str, Any], prefix: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for key, value in record.items():
        if isinstance(value, Mapping):
            out.update(_flatten_text(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = _text(value)
    return out


def _loadavg(meta: Mapping[str, Any], when: str) -> list[float | None]:
    values = (meta.get("host_loadavg") or {}).get(when) or []
    return [
        float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        for v in (list(values) + [None] * 3)[:3]
    ]


def param_cells(spec: VariantSpec) -> dict[str, Any]:
    """The spec's ``param_*`` cells of runs.csv: quantities and text as text ("500m", "2"), as written."""
    cells = {}
    for column, value in spec.columns().items():
        # str() now: a column of ints and nulls would otherwise become floats ("2.0")
        cells[column] = str(value) if value is not None and PARAM_DTYPES[column] == "str" else value
    return cells


def _bool_or_none(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _number_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _interference_text(seen: Mapping[str, Any]) -> str:
    """One attempt's interference as a line: "other 3.5% of CPUs 0,1 over 7.1 s (threshold 20%)" or its note."""
    share = _number_or_none(seen.get("other_share"))
    if share is None:
        return str(seen.get("note") or "not metered")
    cpus = ",".join(str(c) for c in seen.get("cpus") or [])
    text = f"other processes {share:.1%} of CPUs {cpus or '?'}"
    orchestrator = _number_or_none(seen.get("orchestrator_cpu"))
    if orchestrator is not None:
        text += f", the orchestrator {orchestrator:.2%} of a CPU"
    for who in ("runtime", "kernel"):
        cpu = _number_or_none(seen.get(f"{who}_cpu"))
        if cpu is not None:
            text += f", the {who} {cpu:.2%} of a CPU"
    window = _number_or_none(seen.get("window_s"))
    if window is not None:
        text += f" over {window:g} s" + (" of busy intervals" if seen.get("judged") == "busy intervals" else "")
    threshold = _number_or_none(seen.get("threshold"))
    if threshold is not None:
        rule = seen.get("threshold_rule")
        floor = _number_or_none(rule.get("floor")) if isinstance(rule, Mapping) else None
        resolution = _number_or_none(rule.get("resolution")) if isinstance(rule, Mapping) else None
        how = f": quiet floor {floor:.1%} + 3 SD" if floor is not None else ""
        if resolution is not None and threshold == resolution:
            how = ": the meter's resolution over this window"
        text += f" (threshold {threshold:.1%}{how})" if how else f" (threshold {threshold:.0%})"
    return text


def cpu_accel(environment: Mapping[str, Any]) -> str | None:
    """How the run's CPU ran, from the vm backend's ``environment.vm.accel``: "tcg" (emulated),
    "kvm" (virtualized); None on a host."""
    vm = environment.get("vm")
    accel = vm.get("accel") if isinstance(vm, Mapping) else None
    return accel if isinstance(accel, str) and accel else None


def interference_cells(meta: Mapping[str, Any]) -> tuple[Any, ...]:
    """runs.csv's interference columns from a meta record (docs/STATISTICS.md §2, host interference).

    ``meta.interference`` is what the runner's meter saw over the analysed attempt
    ({cpus, window_s, busy_s, lab_s, runner_s, outside_s, outside_share, other_s, other_share,
    orchestrator_s, orchestrator_cpu, orchestrator_apart, lab_scope, threshold, disturbed}, or
    {disturbed: false, note} where the backend is not metered; logs written before the meter knew
    the orchestrator have no outside_* and no orchestrator_*: their other_share is the outside share);
    ``meta.disturbed_attempts`` lists the earlier attempts that were disturbed, each with its
    log (kept beside the raw log, not analysed). Logs that predate both give empty cells.
    A run still disturbed after its retries is marked, never dropped.
    """
    seen = meta.get("interference")
    attempts = meta.get("disturbed_attempts")
    if not isinstance(seen, Mapping):
        seen = None
    if not isinstance(attempts, list):
        attempts = None
    logs = None
    if attempts is not None:
        logs = "; ".join(f"{a.get('log', '?')} ({_interference_text(a)})" for a in attempts if isinstance(a, Mapping))
    outside = None if seen is None else _number_or_none(seen.get("outside_share", seen.get("other_share")))
    return (
        outside,
        None if seen is None else _number_or_none(seen.get("other_share")),
        None if seen is None else _number_or_none(seen.get("orchestrator_cpu")),
        None if seen is None else _number_or_none(seen.get("runtime_cpu")),
        None if seen is None else _number_or_none(seen.get("kernel_cpu")),
        None if seen is None else _number_or_none(seen.get("threshold")),
        None if seen is None else _bool_or_none(seen.get("disturbed")),
        None if attempts is None else len(attempts),
        logs,
        None if seen is None else _interference_text(seen),
    )


def environment_record(meta: Mapping[str, Any]) -> dict[str, Any]:
    """One run's row of environment.csv (without the run's identifiers), from its meta record.

    The facts every backend states get a column each (the cgroup version and the runtime
    conversion fall back on the capabilities and on the variant's runtime, as the report
    reads them); the backend's other facts (versions, images, clusters) become text columns
    ``env.<key>``, nested keys joined with dots (``env.versions.runc``).
    """
    env = meta.get("environment") or {}
    caps = meta.get("capabilities") or {}
    fixed = {
        "start": meta.get("start"),
        "end": meta.get("end"),
        "runtime_conversion": _text(env.get("runtime_conversion", meta.get("runtime"))),
        "kernel": _text(env.get("kernel")),
        "machine": _text(env.get("machine")),
        "cpu_model": _text(env.get("cpu_model")),
        "cpu_count": _int_or_none(env.get("cpu_count")),
        "usable_cpus": _int_or_none(env.get("usable_cpus")),
        "cgroup_version": _int_or_none(env.get("cgroup_version", caps.get("cgroup_version"))),
        "host_cpuset": _text(env.get("host_cpuset")),
        "node_cpus": _text(meta.get("node_cpus")),
        "cap_cpus": _int_or_none(caps.get("cpus")),
        "cap_cgroup_version": _int_or_none(caps.get("cgroup_version")),
        "cap_can_pin_cpus": _bool_or_none(caps.get("can_pin_cpus")),
        "cap_has_pause_level": _bool_or_none(caps.get("has_pause_level")),
        "cap_notes": _text(caps.get("notes")),
        **dict(zip(("loadavg_before_1m", "loadavg_before_5m", "loadavg_before_15m"), _loadavg(meta, "before"))),
        **dict(zip(("loadavg_after_1m", "loadavg_after_5m", "loadavg_after_15m"), _loadavg(meta, "after"))),
        "notes": _text(meta.get("notes")),
    }
    others = {key: value for key, value in env.items() if key not in _ENV_COLUMNS}
    return {**fixed, **_flatten_text(others, ENV_PREFIX)}


class _LogReader:
    """Reads one raw log line by line, validating as it goes, and keeps the rows."""

    def __init__(self, path: Path, raw_path: str):
        self.path = path
        self.raw_path = raw_path
        self.run: tuple[str, str, str, int] | None = None
        self.meta: dict[str, Any] | None = None
        self.open: dict[str, _Process] = {}
        self.commands: set[str] = set()
        self.expectations: list[tuple[int, int]] = []  # (line, gomaxprocs)
        self.runner_kinds: set[str] = set()
        self.rows: dict[str, list[tuple[Any, ...]]] = {name: [] for name in TABLE_NAMES}
        self.header_rows: list[list[Any]] = []

    def fail(self, line: int | None, problem: str) -> RawLogError:
        return RawLogError(self.path, line, problem)

    # -- per record ---------------------------------------------------------
    def read(self, number: int, record: dict[str, Any]) -> None:
        kind = record["type"]
        if number == 1:
            if kind != "meta":
                raise self.fail(1, f"the first record must be 'meta', got {kind!r} (missing metadata)")
            self.read_meta(record)
            return
        if kind == "meta":
            raise self.fail(number, "a second 'meta' record: two logs were concatenated?")
        if kind in RUNNER_TYPES:
            self.runner_kinds.add(kind)
            getattr(self, f"read_{kind}")(number, record)
            return
        src = record["src"]
        if kind == "header":
            self.read_header(number, record)
            return
        process = self.open.get(src)
        if process is None:
            raise self.fail(number, f"a {kind!r} record of {src} outside a process (no header before it)")
        if kind == "process":
            self.close(number, record, process)
        else:
            getattr(self, f"read_{kind}")(number, record, process)

    def read_meta(self, meta: dict[str, Any]) -> None:
        if meta["schema"] != records.SCHEMA_VERSION:
            raise self.fail(1, f"raw log schema {meta['schema']} is not supported (expected {records.SCHEMA_VERSION})")
        _check_identity(meta, self.path)
        try:
            catalogued(meta["experiment"])
        except CatalogueError as exc:
            raise self.fail(1, f"meta experiment: {exc}") from None
        self.meta = meta
        self.run = (meta["backend"], meta["experiment"], meta["variant"], meta["repeat"])
        env, caps = meta["environment"], meta["capabilities"]
        try:
            spec = VariantSpec.from_dict(meta["experiment"], meta["variant"], meta["spec"])
        except SpecError as exc:
            raise self.fail(1, f"meta spec: {exc}") from None
        self.rows["runs"].append(
            (
                *self.run,
                meta["start"],
                meta["end"],
                float(meta["wall_s"]),
                float(meta["window_s"]),
                env.get("kernel"),
                caps.get("cgroup_version", env.get("cgroup_version")),
                caps.get("cpus"),
                meta["runtime"],
                *param_cells(spec).values(),
                self.raw_path,
                *interference_cells(meta),
                cpu_accel(env),
                _int_or_none(meta.get("config_seed")),
                _int_or_none(meta.get("seed")),
                _int_or_none(meta.get("arrival_seed")),
                _text((meta.get("code") or {}).get("commit")),
            )
        )
        self.rows["environment"].append((*self.run, environment_record(meta)))

    def read_readback(self, number: int, record: dict[str, Any]) -> None:
        mismatches = "; ".join(map(str, record["mismatches"]))
        self._add_readback(record, record["design"], record["actual"], mismatches, None)

    def read_ancestor(self, number: int, record: dict[str, Any]) -> None:
        self._add_readback(record, {}, record, "", record.get("error"))  # nothing designed above the node

    def _add_readback(
        self,
        record: dict[str, Any],
        design: Mapping[str, Any],
        actual: Mapping[str, Any],
        mismatches: str,
        error: str | None,
    ) -> None:
        """One row of readback.csv: a level's designed settings against the ones read back."""
        settings = ("quota_us", "period_us", "weight", "shares")
        self.rows["readback"].append(
            (
                *self.run,
                record["level"],
                record["path"],
                *(_int_or_none(design.get(k)) for k in settings),
                *(_int_or_none(actual.get(k)) for k in settings),
                actual.get("cpus"),
                design.get("formula"),
                mismatches,
                error,
            )
        )

    def read_expectation(self, number: int, record: dict[str, Any]) -> None:
        self.expectations.append((number, record["gomaxprocs"]))

    def read_share_expectation(self, number: int, record: dict[str, Any]) -> None:
        self.rows["share_expectations"].append(
            (
                *self.run,
                record["member"],
                record["level"],
                record["weight"],
                record["share"],
                record["runtime"],
            )
        )

    def read_share_sample(self, number: int, record: dict[str, Any]) -> None:
        self.rows["share_samples"].append(
            (*self.run, record["member"], record["level"], record["t_s"], record["usage_usec"])
        )

    def read_header(self, number: int, record: dict[str, Any]) -> None:
        src = record["src"]
        if src in self.open:
            raise self.fail(
                number,
                f"a second header of {src} before the process record of the one at line "
                f"{self.open[src].header_line} (the first process was cut off)",
            )
        command = record["command"]
        if command not in SUMMARY_FIELDS:
            raise self.fail(number, f"unknown command {command!r} in the header of {src}")
        self.open[src] = _Process(src, command, number)
        self.commands.add(command)
        env, cg = record["env"], record["cgroup"]
        timeout = record["params"].get("timeout") if command == "load" else None
        self.header_rows.append(
            [
                *self.run,
                src,
                command,
                record["variant"],
                record["go_version"],
                record["gomaxprocs"],
                record["num_cpu"],
                env.get("GOMAXPROCS", ""),
                env.get("GODEBUG", ""),
                record["default_godebug"],
                *(_int_or_none(cg.get(k)) for k in ("quota_us", "period_us", "weight", "shares")),
                None,  # expected_gomaxprocs, filled from the run's expectation record at the end
                float(timeout) if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) else None,
            ]
        )

    def read_summary(self, number: int, record: dict[str, Any], process: _Process) -> None:
        if process.summary is not None:
            raise self.fail(number, f"a second summary of {process.src}")
        problem = check_fields(record, SUMMARY_FIELDS[process.command], f"{process.command} summary")
        if problem:
            raise self.fail(number, problem)
        process.summary = {**record, "_line": number}
        self.rows["summaries"].append((*self.run, process.src, process.command, flatten_numeric(record)))

    def read_round(self, number: int, record: dict[str, Any], process: _Process) -> None:
        if record["round"] != len(process.rounds):
            raise self.fail(
                number,
                f"round {record['round']} of {process.src} follows {len(process.rounds)} "
                "rounds: rounds must be numbered 0, 1, 2, ... without gaps",
            )
        process.rounds.append(number)
        self.rows["rounds"].append(
            (
                *self.run,
                process.src,
                record["round"],
                record["t_s"],
                record["wall_ms"],
                record["thread_cpu_ms"],
                record.get("thread_cpus"),
                *(record[k] for k in _COUNTERS),
            )
        )

    def read_report(self, number: int, record: dict[str, Any], process: _Process) -> None:
        self.rows["reports"].append(
            (
                *self.run,
                process.src,
                record["t_s"],
                record["cores"],
                *(record[k] for k in _COUNTERS),
            )
        )

    def read_req(self, number: int, record: dict[str, Any], process: _Process) -> None:
        ep = record["ep"]
        if ep not in ENDPOINTS:
            raise self.fail(number, f"unknown endpoint {ep!r} (expected one of {', '.join(ENDPOINTS)})")
        process.requests[ep] = process.requests.get(ep, 0) + 1
        process.ok_requests[ep] = process.ok_requests.get(ep, 0) + record["ok"]
        self.rows["requests"].append(
            (
                *self.run,
                process.src,
                ep,
                record["target"],
                record["conn"],
                record["sched_ms"],
                record["lat_ms"],
                record["late_ms"],
                record["ok"],
                record["status"],
            )
        )

    def read_listening(self, number: int, record: dict[str, Any], process: _Process) -> None:
        """Only a sign of life of `serve`; nothing to tabulate."""

    def read_stats(self, number: int, record: dict[str, Any], process: _Process) -> None:
        """The /stats answer of one target at the start or the end of the measured window."""
        stats = record.get("stats") or {}
        cg = stats.get("cgroup") or {}
        self.rows["target_stats"].append(
            (
                *self.run,
                process.src,
                record["when"],
                record["target"],
                *(_int_or_none(stats.get(k)) for k in ("gomaxprocs", "num_gc", "requests")),
                *(_int_or_none(cg.get(k)) for k in ("quota_us", "period_us", *records.COUNTERS)),
                record.get("err") or "",
            )
        )

    def read_podstat(self, number: int, record: dict[str, Any]) -> None:
        """Pod counters the runner read while the load ran (t_ms from the window's start)."""
        self.rows["podstats"].append(
            (
                *self.run,
                record["pod"],
                record["container"],
                record["when"],
                record["seq"],
                record["t_ms"],
                record["at_ms"],
                *(record[k] for k in records.COUNTERS),
            )
        )

    # -- end of a process and of the log --------------------------------------
    def close(self, number: int, record: dict[str, Any], process: _Process) -> None:
        src = process.src
        if record["returncode"] != 0:
            raise self.fail(
                number,
                f"{src} exited with {record['returncode']}: a failed process is not a result "
                f"(stderr: {record['stderr_tail'][-200:]!r})",
            )
        summary = process.summary
        # Every command ends with a summary (spin at -duration or at SIGTERM; RECORDS.md).
        if summary is None:
            raise self.fail(
                number, f"{src} ({process.command}) ended without its summary record: the workload's output was cut off"
            )
        if summary is not None and process.command == "burst" and summary["rounds"] != len(process.rounds):
            raise self.fail(
                summary["_line"],
                f"the burst summary of {src} counts {summary['rounds']} rounds, "
                f"but the log holds {len(process.rounds)}",
            )
        if summary is not None and process.command == "load":
            self.check_request_counts(summary, process)
        del self.open[src]

    def check_request_counts(self, summary: dict[str, Any], process: _Process) -> None:
        for ep in ENDPOINTS:
            block = summary[ep]
            for key, counted in (("sent", process.requests.get(ep, 0)), ("ok", process.ok_requests.get(ep, 0))):
                if block.get(key) != counted:
                    raise self.fail(
                        summary["_line"],
                        f"the load summary of {process.src} says {ep}.{key} = "
                        f"{block.get(key)!r}, but the log holds {counted} such requests",
                    )

    def finish(self, last_line: int) -> RunTables:
        if self.open:
            src, process = next(iter(self.open.items()))
            raise self.fail(
                last_line,
                f"the log ends inside the process {src} ({process.command}, header at line "
                f"{process.header_line}): no process record, so the log is truncated",
            )
        experiment = self.run[1]
        entry = catalogued(experiment)  # read_meta checked it is catalogued
        if entry.command not in self.commands:
            raise self.fail(None, f"an {experiment} run without any {entry.command!r} process")
        for kind in entry.runner_records:
            if kind not in self.runner_kinds:
                raise self.fail(
                    None,
                    f"an {experiment} run without its {kind} record (the catalogue, model/"
                    f"catalogue.py, requires one in every {experiment} run): the log is incomplete",
                )
        expected = self.expected_gomaxprocs(experiment)
        for row in self.header_rows:
            row[-2] = expected
        self.rows["headers"] = [tuple(row) for row in self.header_rows]
        return RunTables(str(self.path), self.run, {name: tuple(rows) for name, rows in self.rows.items()})

    def expected_gomaxprocs(self, experiment: str) -> int | None:
        if len(self.expectations) > 1:
            raise self.fail(self.expectations[1][0], "a second expectation record")
        return self.expectations[0][1] if self.expectations else None


def parse_raw_log(path: str | Path, raw_path: str | None = None) -> RunTables:
    """Validate one raw log and return its rows; raises :class:`RawLogError`.

    ``raw_path`` is the path written into runs.csv (default: ``path`` as given).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RawLogError(path, None, f"cannot read the raw log: {exc}") from None
    if not text:
        raise RawLogError(path, None, "the raw log is empty (missing metadata)")
    lines = text.split("\n")
    if lines[-1] != "":
        # The runner ends every record with a newline: a missing one means the write was cut off.
        _decode(lines[-1], path, len(lines), is_last=True)
        raise RawLogError(path, len(lines), "the last line has no newline: the log was cut off while written")
    lines.pop()
    reader = _LogReader(path, str(raw_path if raw_path is not None else path))
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise RawLogError(path, number, "an empty line (a record was lost)")
        reader.read(number, _decode(line, path, number, is_last=number == len(lines)))
    return reader.finish(len(lines))


# --------------------------------------------------------------------------
# many raw logs -> DataFrames


def empty_table(name: str) -> pd.DataFrame:
    """A table with its columns and dtypes and no rows."""
    columns = {**_ID_DTYPES, **TABLE_COLUMNS[name]}
    return pd.DataFrame({col: pd.Series(dtype=dtype) for col, dtype in columns.items()})


def _typed(frame: pd.DataFrame, columns: Mapping[str, str]) -> pd.DataFrame:
    """Apply the table's dtypes; missing text becomes "" so text survives a CSV round trip."""
    text = [col for col, dtype in columns.items() if dtype == "str" and col in frame.columns]
    frame = frame.astype({col: dtype for col, dtype in columns.items() if col in frame.columns})
    frame[text] = frame[text].fillna("")
    return frame


def _frame(name: str, rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    if not rows:
        return empty_table(name)
    columns = {**_ID_DTYPES, **TABLE_COLUMNS[name]}
    return _typed(pd.DataFrame.from_records(rows, columns=list(columns)), columns)


def _summaries_frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """summaries.csv: the fixed columns, then the union of the summaries' numeric keys."""
    if not rows:
        return empty_table("summaries")
    fixed = [*RUN_KEYS, "src", "command"]
    records = [{**dict(zip(fixed, row[:-1])), **row[-1]} for row in rows]
    frame = pd.DataFrame.from_records(records)
    numeric = sorted(c for c in frame.columns if c not in fixed)
    return frame[fixed + numeric].astype({**_ID_DTYPES, "src": "str", "command": "str"})


def _environment_frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """environment.csv: the fixed columns, then the union of the ``env.*`` columns in order of appearance."""
    if not rows:
        return empty_table("environment")
    columns = {**_ID_DTYPES, **TABLE_COLUMNS["environment"]}
    records = [{**dict(zip(RUN_KEYS, row[:-1])), **row[-1]} for row in rows]
    frame = pd.DataFrame.from_records(records)
    extra = [c for c in frame.columns if c not in columns]
    return _typed(frame[[*columns, *extra]], {**columns, **{c: "str" for c in extra}})


def parse_runs(paths: Iterable[str | Path]) -> dict[str, pd.DataFrame]:
    """Parse every raw log; one DataFrame per table of docs/TABLES.md, runs in a stable order (the
    reading half of the rule parse_runs, `throttlelab tables`: commands.parse_runs writes them).

    Two logs claiming the same run (backend, experiment, variant, repeat) are an error.
    """
    parsed = sorted((parse_raw_log(p) for p in paths), key=lambda run: run.run)
    seen: dict[tuple[Any, ...], str] = {}
    for run in parsed:
        if run.run in seen:
            raise RawLogError(run.path, 1, f"the same run as {seen[run.run]} ({'/'.join(map(str, run.run))})")
        seen[run.run] = run.path
    rows: dict[str, list[tuple[Any, ...]]] = {name: [] for name in TABLE_NAMES}
    for run in parsed:
        for name, run_rows in run.rows.items():
            rows[name].extend(run_rows)
    tables = {name: _frame(name, rows[name]) for name in TABLE_NAMES if name not in ("summaries", "environment")}
    tables["summaries"] = _summaries_frame(rows["summaries"])
    tables["environment"] = _environment_frame(rows["environment"])
    return {name: tables[name] for name in TABLE_NAMES}


def write_tables(tables: Mapping[str, pd.DataFrame], out_dir: str | Path) -> list[Path]:
    """Write each table as ``<out_dir>/<name>.csv``; returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in tables.items():
        path = out / f"{name}.csv"
        frame.to_csv(path, index=False)
        written.append(path)
    return written


def read_table(path: str | Path, name: str) -> pd.DataFrame:
    """Read a tidy table back with the dtypes it was written with."""
    columns = {**_ID_DTYPES, **TABLE_COLUMNS[name]}
    if name == "environment":  # and its env.* columns, text like the others
        header = pd.read_csv(path, nrows=0).columns
        columns.update({c: "str" for c in header if c.startswith(ENV_PREFIX)})
    text = {col: "str" for col, dtype in columns.items() if dtype == "str"}  # "4" stays "4", not 4.0
    return _typed(pd.read_csv(path, dtype=text), columns)


# --------------------------------------------------------------------------
# a run's parameters back from runs.csv


def _cell(value: Any) -> Any:
    """An empty cell (None, NaN, pandas' NA) as None; anything else as it is."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    return value


def run_spec(row: Mapping[str, Any]) -> VariantSpec:
    """A runs.csv row's parameters (its ``param_*`` columns) as the variant's typed spec."""
    cells = {key: _cell(value) for key, value in row.items() if str(key).startswith(COLUMN_PREFIX)}
    return VariantSpec.from_columns(str(row["experiment"]), str(row["variant"]), cells)


def variant_specs(runs: pd.DataFrame, experiment: str) -> dict[str, VariantSpec]:
    """Each variant's spec (all its runs share it), in the order its runs appear in runs.csv."""
    specs: dict[str, VariantSpec] = {}
    for row in runs[runs["experiment"] == experiment].to_dict("records"):
        if row["variant"] not in specs:
            specs[row["variant"]] = run_spec(row)
    return specs
