"""The raw log's contract: the one place that says what a raw log holds (pure, standard library only).

A raw log (``results/<backend>/raw/<experiment>/<variant>/rep<k>.jsonl``, docs/RECORDS.md) is one
JSON object per line, each with a ``type``: the runner's ``meta`` record first, then the runner's
own records and the workload's (cpulab's) records, each of those tagged by the runner with the
``src`` (pod/container) that wrote it and closed by the runner's ``process`` record.

Here, once each:

* the schema version (:data:`SCHEMA_VERSION`, the meta record's ``schema``);
* every record type: who writes it, the keys a reader requires with the JSON kind of each value,
  and the keys it may carry besides (:data:`RECORDS`), and the summary of each cpulab command
  (:data:`SUMMARIES`);
* the objects nested in them (:data:`OBJECTS`: the cgroup record, the meta record's capabilities
  and interference, ...);
* the counter vocabulary (:data:`COUNTERS`, and the per-round deltas :data:`COUNTER_DELTAS`).

The runner writes through it (experiments/runner.py: the meta record's keys and
:func:`check_written` on every record of its own), the reader validates with it
(analysis/tidy.py: :func:`first_problem` against :func:`required`), and the workload's JSON
field names are held against it by a Go test (:func:`workload_contract`, committed as
``workload/testdata/records.json``; tests/model/test_records.py keeps that file current).

Kinds of JSON values: ``int``, ``num`` (an int or a float), ``str``, ``bool``, ``dict``, ``list``;
a trailing ``?`` allows null. JSON ``true`` is never a number.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from throttlelab.errors import RecordError

THIS_FILE = "throttlelab/model/records.py"
#: Where the workload's side of the contract is committed (read by the Go tests in workload/).
WORKLOAD_CONTRACT = "workload/testdata/records.json"

#: The raw log's schema version: the meta record's ``schema``. A reader refuses any other.
SCHEMA_VERSION = 1

#: The cgroup's CPU counters (cpu.stat; usage from cpuacct on v1), as records and tables name them.
COUNTERS = ("nr_periods", "nr_throttled", "throttled_usec", "usage_usec")
#: The kernel's burst counters (a period over quota, X1): read where the kernel has them; logs
#: written before cpulab read them lack them.
BURST_COUNTERS = ("nr_bursts", "burst_usec")
#: Per-interval deltas of a counter (burst's rounds, spin's reports) are named with this prefix.
DELTA_PREFIX = "d_"


def delta(counter: str) -> str:
    """The name of a counter's per-interval delta: ``nr_periods`` -> ``d_nr_periods``."""
    return f"{DELTA_PREFIX}{counter}"


#: The per-interval deltas of :data:`COUNTERS`, in their order.
COUNTER_DELTAS = tuple(delta(c) for c in COUNTERS)

#: The key the runner adds to every cpulab record (and writes in its ``process`` record): the
#: ``<pod>/<container>`` that wrote it.
SRC = "src"
#: The load generator's endpoints (``req.ep``, and the blocks of the load summary).
ENDPOINTS = ("work", "ping")

Kind = str
_KIND_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "num": (int, float),
    "str": (str,),
    "bool": (bool,),
    "dict": (dict,),
    "list": (list,),
}


@dataclass(frozen=True)
class Shape:
    """The keys of one kind of JSON object in a raw log, with the kind of each value."""

    name: str
    #: what writes it: "cpulab" (the workload: docs/RECORDS.md) or "runner" (throttlelab/experiments)
    writer: Literal["cpulab", "runner"]
    #: the keys a reader requires, in the order it checks them, with their kinds
    required: Mapping[str, Kind]
    #: keys written too that a reader does without (added since older logs, or present only at times)
    optional: Mapping[str, Kind] = field(default_factory=dict)
    about: str = ""

    def __post_init__(self) -> None:
        for key, kind in {**self.required, **self.optional}.items():
            if kind.rstrip("?") not in _KIND_TYPES:
                raise RecordError(
                    f"{THIS_FILE}: {self.name}.{key} has the kind {kind!r}, not one of "
                    f"{', '.join(_KIND_TYPES)} (a trailing ? allows null)"
                )
        both = set(self.required) & set(self.optional)
        if both:
            raise RecordError(f"{THIS_FILE}: {self.name} lists {', '.join(sorted(both))} as required and optional")

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key it may hold: the required ones, then the optional ones."""
        return (*self.required, *self.optional)


_COUNTER_KINDS = {c: "int?" for c in COUNTERS}
_DELTA_KINDS = {delta(c): "int?" for c in COUNTERS}

# --------------------------------------------------------------------------
# the records, by ``type``

RECORDS: dict[str, Shape] = {
    s.name: s
    for s in (
        # ---- the runner's (throttlelab/experiments); no src, except process
        Shape(
            "meta",
            "runner",
            {
                "schema": "int",
                "experiment": "str",
                "variant": "str",
                "repeat": "int",
                "backend": "str",
                "spec": "dict",
                "runtime": "str",
                "environment": "dict",
                "capabilities": "dict",
                "start": "str",
                "end": "str",
                "wall_s": "num",
                "window_s": "num",
            },
            {
                "seed": "int",
                "arrival_seed": "int",
                "config_seed": "int",
                "binaries": "dict",
                "node_cpus": "str?",
                "host_loadavg": "dict",
                "notes": "list",
                "interference": "dict",
                "attempt": "int",
                "disturbed_attempts": "list",
                "code": "dict",
                "calibration": "dict",
            },
            "line 1: the run (experiment, variant, repeat, backend), its typed spec, the seeds (model/seeds.py), "
            "the binaries, the machine, the window and what other work took meanwhile",
        ),
        Shape(
            "readback",
            "runner",
            {"level": "str", "path": "str", "design": "dict", "actual": "dict", "mismatches": "list"},
            about="one level of the cgroup hierarchy: the docs/LAB.md §2 design against what was read back",
        ),
        Shape(
            "ancestor",
            "runner",
            {"level": "str", "path": "str"},
            {
                "quota_us": "int?",
                "period_us": "int?",
                "weight": "int?",
                "shares": "int?",
                "cpus": "str?",
                "error": "str",
            },
            "a level above the node (run root, host root), read for information; error when it could not be",
        ),
        Shape(
            "expectation",
            "runner",
            {"gomaxprocs": "int"},
            {"rule": "str"},
            "E3: the GOMAXPROCS the Go runtime should choose, and the rule that says so",
        ),
        Shape(
            "share_expectation",
            "runner",
            {"member": "str", "level": "str", "weight": "int", "share": "num", "runtime": "str"},
            about="E5/E10: a member's designed weight and its expected share of the one CPU",
        ),
        Shape(
            "share_sample",
            "runner",
            {"member": "str", "level": "str", "t_s": "num", "usage_usec": "int?"},
            about="E5/E10: a member's CPU usage read at t_s",
        ),
        Shape(
            "podstat",
            "runner",
            {
                "pod": "str",
                "container": "str",
                "when": "str",
                "seq": "int",
                "t_ms": "num",
                "at_ms": "num",
                **_COUNTER_KINDS,
            },
            {"source": "str", "cadvisor_ms": "int", "rescrapes": "int"},
            "a reading of a pod's (or a container's) counters while a load or E6's job ran",
        ),
        Shape(
            "process",
            "runner",
            {SRC: "str", "returncode": "int?", "wall_s": "num", "stderr_tail": "str"},
            about="closes each workload process: its exit status, wall time and the tail of its stderr",
        ),
        # ---- cpulab's (workload/); the runner adds src to each
        Shape(
            "header",
            "cpulab",
            {
                SRC: "str",
                "program": "str",
                "variant": "str",
                "go_version": "str",
                "gomaxprocs": "int",
                "num_cpu": "int",
                "env": "dict",
                "default_godebug": "str",
                "cgroup": "dict",
                "command": "str",
                "params": "dict",
            },
            {"version": "str", "pid": "int", "time": "str"},
            "the first record of every subcommand",
        ),
        Shape(
            "summary",
            "cpulab",
            {SRC: "str"},
            about="the last record of every subcommand; its keys by command: SUMMARIES",
        ),
        Shape(
            "round",
            "cpulab",
            {SRC: "str", "round": "int", "t_s": "num", "wall_ms": "num", "thread_cpu_ms": "num", **_DELTA_KINDS},
            # thread_cpus: the distinct CPUs the round's threads mainly ran on (getcpu); absent in older logs
            {**{delta(c): "int?" for c in BURST_COUNTERS}, "thread_cpus": "int"},
            "burst: one round",
        ),
        Shape(
            "report",
            "cpulab",
            {SRC: "str", "t_s": "num", "cores": "num?", **_DELTA_KINDS},
            about="spin: one report interval",
        ),
        Shape("listening", "cpulab", {SRC: "str", "addr": "str"}, about="serve: the socket is bound"),
        Shape(
            "stats",
            "cpulab",
            {SRC: "str", "when": "str", "target": "int"},
            {"stats": "dict?", "err": "str"},
            "load: one target's /stats answer (OBJECTS['stats_answer']) before or after the window",
        ),
        Shape(
            "req",
            "cpulab",
            {
                SRC: "str",
                "ep": "str",
                "target": "int",
                "conn": "int",
                "sched_ms": "num",
                "lat_ms": "num",
                "late_ms": "num",
                "ok": "bool",
                "status": "int",
            },
            {"err": "str"},
            "load: one measured request",
        ),
    )
}

#: The summary each cpulab command ends with (``type`` "summary"), by command; ``src`` as any cpulab record.
SUMMARIES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape("info", "cpulab", {"gomaxprocs": "int", "num_cpu": "int", "cgroup": "dict"}),
        Shape(
            "burst",
            "cpulab",
            {
                "rounds": "int",
                "p50_wall_ms": "num?",
                "max_wall_ms": "num?",
                "avg_cores": "num?",
                **_COUNTER_KINDS,
                "elapsed_s": "num",
            },
            {c: "int?" for c in BURST_COUNTERS},
        ),
        Shape("spin", "cpulab", {"elapsed_s": "num", "avg_cores": "num?", **_COUNTER_KINDS}),
        Shape("serve", "cpulab", {"requests": "int", "num_gc": "int", "cgroup": "dict"}),
        Shape(
            "load",
            "cpulab",
            {"window_s": "num", "work": "dict", "ping": "dict"},
            {
                "late_p99_ms": "num?",
                "late_max_ms": "num?",
                "connections_per_target": "list?",
                "requests_per_target": "list?",
                "mode": "str",
                "throughput_rps": "num?",
            },
        ),
    )
}

#: The objects nested in records (not checked by the reader key by key, but part of the contract).
OBJECTS: dict[str, Shape] = {
    s.name: s
    for s in (
        # cpulab's
        Shape(
            "cgroup",
            "cpulab",
            {
                "version": "int",
                "path": "str",
                "quota_us": "int?",
                "period_us": "int?",
                "burst_us": "int?",
                "weight": "int?",
                "shares": "int?",
                **_COUNTER_KINDS,
                **{c: "int?" for c in BURST_COUNTERS},
            },
            {"error": "str"},
            "header.cgroup, the info and serve summaries' cgroup, the /stats answer's: the "
            "process's own cgroup, normalised over v1 and v2",
        ),
        Shape("env", "cpulab", {"GOMAXPROCS": "str", "GODEBUG": "str"}, about='header.env: "" when unset'),
        Shape(
            "stats_answer",
            "cpulab",
            {"cgroup": "dict", "gomaxprocs": "int", "num_gc": "int", "requests": "int", "time_ns": "int"},
            about="serve's /stats answer, as the stats record carries it",
        ),
        Shape(
            "endpoint_summary",
            "cpulab",
            {
                "sent": "int",
                "ok": "int",
                "errors": "int",
                "achieved_rps": "num?",
                "p50_ms": "num?",
                "p90_ms": "num?",
                "p99_ms": "num?",
                "p999_ms": "num?",
                "max_ms": "num?",
            },
            about="the load summary's work and ping blocks",
        ),
        # the runner's
        Shape("binary", "runner", {"path": "str", "sha256": "str"}, about="meta.binaries, by build"),
        Shape(
            "capabilities",
            "runner",
            {
                "cpus": "int",
                "cgroup_version": "int?",
                "can_pin_cpus": "bool",
                "has_pause_level": "bool",
                "notes": "list",
            },
            about="meta.capabilities: what the backend can express here",
        ),
        Shape(
            "code",
            "runner",
            {"commit": "str?", "dirty": "bool?"},
            about="meta.code: the git commit of the code that made the run and whether tracked files differed "
            "from it (null where no git checkout was there); logs written before the runner recorded its code lack it",
        ),
        Shape(
            "host_loadavg",
            "runner",
            {"before": "list", "after": "list"},
            about="meta.host_loadavg: the host's 1, 5 and 15 minute load averages around the run",
        ),
        Shape(
            "interference",
            "runner",
            {"disturbed": "bool"},
            {
                "cpus": "list",
                "window_s": "num",
                "busy_s": "num",
                "lab_s": "num",
                "runner_s": "num",
                "outside_s": "num",
                "outside_share": "num",
                "other_s": "num",
                "other_share": "num",
                "orchestrator_s": "num?",
                "orchestrator_cpu": "num",
                "orchestrator_apart": "bool",
                "orchestrator_note": "str",
                "runtime_s": "num",
                "runtime_cpu": "num",
                "runtime_apart": "bool",
                "runtime_by": "str",
                "kernel_s": "num",
                "kernel_cpu": "num",
                "kernel_apart": "bool",
                "idle_cpu": "dict",
                "lab_scope": "str",
                "irq_s": "num",
                "judged": "str",
                "intervals": "int",
                "attempt_window_s": "num",
                "attempt_outside_share": "num",
                "threshold": "num",
                "threshold_rule": "dict",
                "note": "str",
            },
            "meta.interference: what the meter saw on the run's CPUs (host/interference.py); on a backend "
            "that is not metered only disturbed and note. Logs written before the meter counted the "
            "orchestrator apart lack outside_* and orchestrator_* (their other_share is the outside share); runtime_* "
            "only where the backend names its runtime's processes (docker)",
        ),
        Shape(
            "disturbed_attempt",
            "runner",
            {"disturbed": "bool", "log": "str", "waited_s": "num"},
            {},
            "meta.disturbed_attempts: an earlier attempt measured again, its log kept beside the raw log, "
            "with the interference keys of its attempt besides",
        ),
    )
}

#: The records that carry no ``src``: the runner's own (``process`` closes a cpulab process, so has one).
RUNNER_TYPES = frozenset(name for name, s in RECORDS.items() if s.writer == "runner" and name != "process")
#: The record types the runner writes itself (``process`` included); check_written holds them to the contract.
RUNNER_WRITES = frozenset(name for name, s in RECORDS.items() if s.writer == "runner")
#: The cpulab subcommands whose records a raw log may hold (each ends with its summary).
COMMANDS = tuple(SUMMARIES)


def record_shape(record_type: str) -> Shape:
    """The shape of a record type; :class:`RecordError` naming it when the contract has none."""
    try:
        return RECORDS[record_type]
    except KeyError:
        raise RecordError(
            f"record type {record_type!r} is not in the raw log's contract ({THIS_FILE}: "
            f"{', '.join(RECORDS)}): add it there and to docs/RECORDS.md"
        ) from None


def required(record_type: str) -> Mapping[str, Kind]:
    """The keys a reader requires of a record type, with their kinds."""
    return record_shape(record_type).required


def kind_ok(value: Any, kind: Kind) -> bool:
    """Whether a JSON value is of the kind (``num?``: a number or null)."""
    base = kind.rstrip("?")
    if value is None:
        return kind.endswith("?")
    if isinstance(value, bool) and base != "bool":  # JSON true is not a number here
        return False
    return isinstance(value, _KIND_TYPES[base])


def first_problem(record: Mapping[str, Any], fields: Mapping[str, Kind], what: str) -> str | None:
    """The first problem of ``record`` against the required ``fields``, or None when it has them all."""
    for key, kind in fields.items():
        if key not in record:
            return f"{what} lacks the key {key!r}"
        if not kind_ok(record[key], kind):
            return f"{what}: {key!r} should be {kind.replace('?', ' or null')}, got {record[key]!r}"
    return None


def _unknown_keys(record: Mapping[str, Any], shape: Shape, skip: tuple[str, ...] = ()) -> list[str]:
    return [key for key in record if key not in shape.keys and key not in skip]


def _problems_of_shape(record: Mapping[str, Any], shape: Shape, what: str, skip: tuple[str, ...] = ()) -> list[str]:
    problems = []
    missing = first_problem(record, shape.required, what)
    if missing:
        problems.append(missing)
    for key in _unknown_keys(record, shape, skip):
        problems.append(f"{what} has the key {key!r}, which the contract does not list")
    for key, kind in shape.optional.items():
        if key in record and not kind_ok(record[key], kind):
            problems.append(f"{what}: {key!r} should be {kind.replace('?', ' or null')}, got {record[key]!r}")
    return problems


def written_problems(record: Mapping[str, Any]) -> list[str]:
    """What is wrong with a record the runner is about to write, against the contract: a missing or
    mistyped key, or one the contract does not list (the writer may write only what it declares)."""
    record_type = record.get("type")
    shape = record_shape(str(record_type))
    what = f"{record_type} record"
    problems = _problems_of_shape(record, shape, what, skip=("type",))
    if record_type == "meta":
        seen = record.get("interference")
        if isinstance(seen, Mapping):
            problems += _problems_of_shape(seen, OBJECTS["interference"], "meta.interference")
        caps = record.get("capabilities")
        if isinstance(caps, Mapping):
            problems += _problems_of_shape(caps, OBJECTS["capabilities"], "meta.capabilities")
        code = record.get("code")
        if isinstance(code, Mapping):
            problems += _problems_of_shape(code, OBJECTS["code"], "meta.code")
        loadavg = record.get("host_loadavg")
        if isinstance(loadavg, Mapping):
            problems += _problems_of_shape(loadavg, OBJECTS["host_loadavg"], "meta.host_loadavg")
        for build, binary in (record.get("binaries") or {}).items():
            problems += _problems_of_shape(binary, OBJECTS["binary"], f"meta.binaries.{build}")
        attempt_keys = Shape(
            "disturbed_attempt", "runner", OBJECTS["disturbed_attempt"].required, {**OBJECTS["interference"].optional}
        )
        for k, attempt in enumerate(record.get("disturbed_attempts") or []):
            problems += _problems_of_shape(attempt, attempt_keys, f"meta.disturbed_attempts[{k}]")
    return problems


def check_written(record: Mapping[str, Any]) -> None:
    """Raise :class:`RecordError` when a record of the runner's does not fit the contract."""
    if record.get("type") not in RUNNER_WRITES:
        raise RecordError(
            f"the runner writes only its own record types ({', '.join(sorted(RUNNER_WRITES))}), "
            f"not {record.get('type')!r}: cpulab's records pass through as the workload wrote them"
        )
    problems = written_problems(record)
    if problems:
        raise RecordError(
            f"the runner would write a record the raw log's contract does not allow: {'; '.join(problems)}. "
            f"Fix the writer, or change the contract in {THIS_FILE} and docs/RECORDS.md together"
        )


# --------------------------------------------------------------------------
# the workload's side, for the Go tests


def workload_contract() -> dict[str, Any]:
    """What cpulab writes, as its Go tests read it: every JSON key of each record type (with
    ``type``, without the runner's ``src``), of each command's summary and of each nested object."""

    def keys(shape: Shape, *, typed: bool) -> list[str]:
        return [*(["type"] if typed else []), *(k for k in shape.keys if k != SRC)]

    return {
        "about": f"generated from {THIS_FILE} (tests/model/test_records.py keeps it current); read by the "
        "workload's Go tests: every JSON field of the structs cpulab writes",
        "schema": SCHEMA_VERSION,
        "counters": list(COUNTERS),
        "burst_counters": list(BURST_COUNTERS),
        "delta_prefix": DELTA_PREFIX,
        "records": {
            name: keys(s, typed=True) for name, s in RECORDS.items() if s.writer == "cpulab" and name != "summary"
        },  # a summary's keys are its command's
        "summaries": {name: keys(s, typed=True) for name, s in SUMMARIES.items()},
        "objects": {name: keys(s, typed=False) for name, s in OBJECTS.items() if s.writer == "cpulab"},
    }


def workload_contract_json() -> str:
    """:func:`workload_contract` as the text of ``workload/testdata/records.json``."""
    return json.dumps(workload_contract(), indent=2) + "\n"
