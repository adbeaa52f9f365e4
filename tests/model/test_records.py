"""The raw log's contract (model/records.py) against those who write and read it: the runner's records,
the reader (analysis/tidy.py), the workload's exported field names (workload/testdata/records.json,
which the Go tests read) and docs/RECORDS.md."""

from __future__ import annotations

import argparse
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import PROJECT, assert_workload_copy_current
from throttlelab.analysis import tidy
from throttlelab.analysis.metrics import common
from throttlelab.backends.base import Capabilities, Output, Readback
from throttlelab.errors import RecordError
from throttlelab.experiments.context import Context, ExperimentResult
from throttlelab.experiments.runner import checked, meta_record
from throttlelab.experiments.services_experiments import podstat_record
from throttlelab.host.facts import code_version
from throttlelab.host.interference import Interference
from throttlelab.model import records, seeds
from throttlelab.model.variants import VariantSpec


def test_the_workloads_copy_of_the_contract_is_current():
    assert_workload_copy_current("records", "workload_contract_json", records.WORKLOAD_CONTRACT)


def test_the_reader_requires_what_the_contract_requires():
    assert tidy.RECORD_FIELDS == {name: shape.required for name, shape in records.RECORDS.items()}
    assert tidy.SUMMARY_FIELDS == {name: shape.required for name, shape in records.SUMMARIES.items()}
    assert tidy.RUNNER_TYPES == records.RUNNER_TYPES and tidy.ENDPOINTS == records.ENDPOINTS
    assert common.COUNTERS == records.COUNTERS


def test_docs_records_names_every_record_type_and_every_key():
    text = (PROJECT / "docs" / "RECORDS.md").read_text()
    named = set(re.findall(r"`\"?([A-Za-z_][A-Za-z0-9_]*)\"?`", text)) | set(
        re.findall(r"\"([A-Za-z_][A-Za-z0-9_]*)\"", text)
    )
    missing = [f"record type {name}" for name in records.RECORDS if name not in named]
    for group, shapes in (("record", records.RECORDS), ("summary", records.SUMMARIES), ("object", records.OBJECTS)):
        missing += [
            f"{group} {shape.name}: key {key}" for shape in shapes.values() for key in shape.keys if key not in named
        ]
    assert missing == [], "docs/RECORDS.md does not name: " + "; ".join(missing)


def _meta(interference: dict) -> dict:
    args = argparse.Namespace(
        experiment="E2a", variant="limit1", repeat=0, backend="local", runtime="runc-new", seed=20261130, node_cpus=None
    )
    spec = VariantSpec.from_dict(
        "E2a",
        "limit1",
        {
            "build": "go124mod",
            "threads": 2,
            "work_ms": 20,
            "interval_ms": 530,
            "rounds": 6,
            "request": "100m",
            "limit": "250m",
        },
    )
    caps = Capabilities(
        cpus=2, cgroup_version=1, can_pin_cpus=True, has_pause_level=False, runtime="runc-new", notes=("a note",)
    )
    ctx = Context(
        backend=None,
        capabilities=caps,
        node_cpus=None,
        seed=seeds.job_seed(20261130, "E2a", "limit1", 0),
        arrivals=seeds.arrival_seed(20261130, "E2a", 0),
    )
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    run = {
        "result": ExperimentResult(window_s=2.0, notes=["ran"]),
        "wall": 3.0,
        "started": now,
        "ended": now,
        "load_before": (0.1, 0.2, 0.3),
        "load_after": (0.1, 0.2, 0.3),
        "interference": interference,
        "attempt": 0,
    }
    return meta_record(args, spec, ctx, {"go124mod": Path("cpulab")}, {"kernel": "test"}, run, {"go124mod": "ab"})


@pytest.mark.parametrize("orchestrator_s", [None, 0.02])
def test_the_meta_record_the_runner_writes_fits_the_contract(orchestrator_s):
    seen = Interference(
        cpus=(0, 1),
        window_s=2.0,
        busy_s=0.5,
        lab_s=0.4,
        runner_s=0.05,
        outside_s=0.05,
        lab_scope="per-cpu",
        orchestrator_s=orchestrator_s,
        orchestrator_apart=True,
    ).as_record(0.2)
    meta = _meta(seen)
    meta["disturbed_attempts"] = [{**seen, "log": "rep0.disturbed-1.jsonl", "waited_s": 1.0}]
    assert checked([meta]) == [meta]
    assert meta["schema"] == records.SCHEMA_VERSION
    assert (meta["config_seed"], meta["seed"]) == (20261130, seeds.job_seed(20261130, "E2a", "limit1", 0))
    assert meta["arrival_seed"] == seeds.arrival_seed(20261130, "E2a", 0)
    unmetered = _meta({"disturbed": False, "note": "not metered on the kind backend"})
    assert checked([unmetered]) == [unmetered]


def test_the_meta_record_says_which_code_made_the_run():
    # the threshold registry's rule (docs/STATISTICS.md §5) compares a run's start with a revision's date; the meta
    # record also names the commit of the code that made the run (null where no git checkout was there)
    meta = _meta({"disturbed": False, "note": "n"})
    assert meta["code"] == {"commit": None, "dirty": None} and checked([meta]) == [meta]
    code = code_version()
    assert code["commit"] is None or (len(code["commit"]) == 40 and isinstance(code["dirty"], bool))
    made = {**meta, "code": code}
    assert checked([made]) == [made]
    with pytest.raises(RecordError, match="meta.code.*'commit'"):
        checked([{**meta, "code": {"commit": 7, "dirty": False}}])
    assert code_version(Path("/")) == {"commit": None, "dirty": None}  # no checkout there


def test_the_experiments_records_fit_the_contract():
    result = ExperimentResult()
    result.records.append(Readback("pod", "p", {"quota_us": 1}, {"quota_us": 1}).as_record())
    result.records.append({"type": "ancestor", "level": "host-root", "path": "/", "error": "unreadable"})
    result.records.append(
        {
            **podstat_record("e6", "burst", "scrape", 0, 1.5, {"nr_periods": 1}, at_ms=2.0),
            "source": "cadvisor",
            "cadvisor_ms": 3,
            "rescrapes": 0,
        }
    )
    result.add_output(Output("pod", "burst", 0, [{"type": "round", "round": 0}], "", 0.5))
    checked(result.records)  # the cpulab round passes as the workload wrote it; the runner's are checked


def test_the_runner_refuses_a_record_the_contract_does_not_list_naming_the_key():
    podstat = podstat_record("p", None, "sample", 0, 1.0, {})
    with pytest.raises(RecordError, match="'colour', which the contract does not list"):
        checked([{**podstat, "colour": "red"}])
    with pytest.raises(RecordError, match="podstat record lacks the key 'seq'"):
        checked([{k: v for k, v in podstat.items() if k != "seq"}])
    with pytest.raises(RecordError, match="'queue_depth'"):
        records.check_written({"type": "queue_depth"})


def test_a_shape_with_an_unknown_kind_is_refused_at_import():
    with pytest.raises(RecordError, match="x.y has the kind 'float'"):
        records.Shape("x", "runner", {"y": "float"})
