"""Raw logs -> tidy tables: known answers from the hand-made logs in
tests/fixtures/raw_logs, and one clear error for every way a log can be broken."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from conftest import FIXTURE_ROOT
from throttlelab.analysis import tidy
from throttlelab.model.variants import VariantSpec, column_names

FIXTURES = FIXTURE_ROOT / "raw_logs"
ALL_LOGS = sorted(FIXTURES.glob("*/*/rep*.jsonl"))


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    return tidy.parse_runs(ALL_LOGS)


def _run(frame: pd.DataFrame, experiment: str, variant: str) -> pd.DataFrame:
    return frame[(frame["experiment"] == experiment) & (frame["variant"] == variant)]


def test_every_table_has_its_contract_columns(tables):
    assert list(tables) == list(tidy.TABLE_NAMES)
    for name, frame in tables.items():
        expected = [*tidy.RUN_KEYS, *tidy.TABLE_COLUMNS[name]]
        assert list(frame.columns[: len(expected)]) == expected, name


def test_one_run_row_per_log_with_its_environment(tables):
    runs = tables["runs"]
    assert len(runs) == len(ALL_LOGS) == 6
    limit1 = _run(runs, "E2a", "limit1").iloc[0]
    environment = (limit1["kernel"], limit1["cgroup_version"], limit1["cpus"], limit1["runtime"])
    assert environment == ("6.1.0-test", 1, 2, "runc-new")
    assert limit1["window_s"] == 2.4
    params = (limit1["param_build"], limit1["param_interval_ms"], limit1["param_limit"], limit1["param_threads"])
    assert params == ("go124mod", 600, "1", 4)  # one column per parameter; a CPU quantity stays as written
    spec = tidy.run_spec(limit1.to_dict())
    assert (spec.build, spec.interval_ms, spec.milli("limit"), spec.threads, spec.gomaxprocs) == (
        "go124mod",
        600,
        1000,
        4,
        None,
    )
    assert limit1["raw_path"].endswith("E2a/limit1/rep0.jsonl")


def test_runs_carry_every_parameter_column_and_give_the_spec_back(tables, tmp_path):
    runs = tables["runs"]
    assert [c for c in runs.columns if c.startswith("param_")] == column_names()
    assert "spec_json" not in runs.columns
    tidy.write_tables(tables, tmp_path)
    back = tidy.read_table(tmp_path / "runs.csv", "runs")
    for path in ALL_LOGS:
        meta = json.loads(path.read_text().splitlines()[0])
        row = back[(back["experiment"] == meta["experiment"]) & (back["variant"] == meta["variant"])].iloc[0]
        want = VariantSpec.from_dict(meta["experiment"], meta["variant"], meta["spec"])
        got = tidy.run_spec(row.to_dict())
        # every parameter as the profile gave it (a CPU quantity comes back as its text: 2 -> "2")
        assert {k: str(v) for k, v in got.columns().items() if v is not None} == {
            k: str(v) for k, v in want.columns().items() if v is not None
        }
    assert list(tidy.variant_specs(back, "E2a")) == ["limit1", "nolimit"]


def test_runs_carry_the_config_seed_and_each_jobs_seed_from_the_meta_record(tables, tmp_path):
    limit1 = _run(tables["runs"], "E2a", "limit1").iloc[0]
    assert (limit1["config_seed"], limit1["job_seed"]) == (1, 7)  # the log's meta.config_seed and meta.seed
    path = _copy(tmp_path, LIMIT1)
    lines = _lines(path)
    meta = json.loads(lines[0])
    del meta["seed"], meta["config_seed"]  # a log that predates them
    _write(path, [json.dumps(meta), *lines[1:]])
    older = tidy.parse_runs([path])["runs"].iloc[0]
    assert pd.isna(older["config_seed"]) and pd.isna(older["job_seed"])
    tidy.write_tables(tables, tmp_path / "tables")
    back = tidy.read_table(tmp_path / "tables" / "runs.csv", "runs")
    assert str(back["job_seed"].dtype) == "Int64" and set(back["config_seed"]) == {1}


def test_runs_carry_the_commit_of_the_code_that_made_them(tables, tmp_path):
    # meta.code; a log that predates it leaves the column empty
    assert (tables["runs"]["code_commit"].fillna("") == "").all()
    path = _copy(tmp_path, LIMIT1)
    lines = _lines(path)
    meta = json.loads(lines[0])
    meta["code"] = {"commit": "a" * 40, "dirty": False}
    _write(path, [json.dumps(meta), *lines[1:]])
    runs = tidy.parse_runs([path])["runs"]
    assert list(runs["code_commit"]) == ["a" * 40]


def test_a_spec_with_an_unknown_parameter_names_the_meta_line(tmp_path):
    path = _copy(tmp_path, LIMIT1)
    lines = _lines(path)
    _write(path, [lines[0].replace('"threads":4', '"threads":4,"colour":"red"'), *lines[1:]])
    with pytest.raises(tidy.RawLogError, match=r"line 1: meta spec: .*unknown parameter\(s\) colour"):
        tidy.parse_raw_log(path)


def test_environment_has_one_row_per_run_from_its_meta_record(tables, tmp_path):
    env = tables["environment"]
    assert len(env) == len(ALL_LOGS)
    limit1 = _run(env, "E2a", "limit1").iloc[0]
    facts = (
        limit1["kernel"],
        limit1["cgroup_version"],
        limit1["cpu_model"],
        limit1["cpu_count"],
        limit1["runtime_conversion"],
        limit1["cap_cpus"],
        limit1["cap_can_pin_cpus"],
        limit1["start"],
    )
    assert facts == ("6.1.0-test", 1, "Test CPU", 2, "runc-new", 2, True, "2026-05-01T10:00:00+00:00")
    assert pd.isna(limit1["usable_cpus"]) and limit1["node_cpus"] == ""  # not stated: empty, never invented
    tidy.write_tables(tables, tmp_path)
    back = tidy.read_table(tmp_path / "environment.csv", "environment")
    pd.testing.assert_frame_equal(back, env, check_dtype=False)


def test_a_backends_other_facts_become_env_columns():
    meta = {
        "start": "s",
        "end": "e",
        "runtime": "runc-new",
        "node_cpus": "0-1",
        "environment": {
            "kernel": "6.1",
            "versions": {"Docker engine": "27.3.1", "runc": "1.1.12"},
            "docker_api_version": "1.47",
            "images": {"go124mod": "sha256:ab"},
        },
        "capabilities": {"cgroup_version": 2, "notes": ["one", "two"]},
        "host_loadavg": {"before": [0.5, 0.25, 0.125], "after": [1, 2, 3]},
        "notes": [],
    }
    record = tidy.environment_record(meta)
    assert (record["runtime_conversion"], record["cgroup_version"], record["node_cpus"]) == ("runc-new", 2, "0-1")
    assert (record["cap_notes"], record["notes"], record["loadavg_after_15m"]) == ("one; two", "", 3.0)
    env_columns = {k: v for k, v in record.items() if k.startswith(tidy.ENV_PREFIX)}
    assert env_columns == {
        "env.versions.Docker engine": "27.3.1",
        "env.versions.runc": "1.1.12",
        "env.docker_api_version": "1.47",
        "env.images.go124mod": "sha256:ab",
    }


def test_a_log_that_does_not_start_with_its_meta_record_is_named(tmp_path):
    # moved from the report: the report reads environment.csv, the analysis reads (and checks) the meta line
    path = _copy(tmp_path, LIMIT1)
    lines = _lines(path)
    _write(path, [lines[6], *lines[1:]])  # a round record where the meta record belongs
    with pytest.raises(tidy.RawLogError, match=r"rep0\.jsonl, line 1: the first record must be 'meta', got 'round'"):
        tidy.parse_raw_log(path)


def test_rounds_keep_every_round_and_null_counters(tables):
    rounds = tables["rounds"]
    limit1 = _run(rounds, "E2a", "limit1")
    assert limit1["round"].tolist() == [0, 1, 2, 3]
    assert limit1["wall_ms"].tolist() == [200, 100, 130, 120]
    assert limit1["d_throttled_usec"].sum() == 432_000
    nolimit = _run(rounds, "E2a", "nolimit")
    assert nolimit["d_usage_usec"].isna().tolist() == [False, False, True]  # null stays missing, not 0


def test_headers_carry_the_expectation_of_e3_only(tables):
    headers = tables["headers"]
    assert len(headers) == 7
    e3 = _run(headers, "E3", "go125mod-500m").iloc[0]
    assert (e3["gomaxprocs"], e3["num_cpu"], e3["expected_gomaxprocs"], e3["cg_quota_us"]) == (2, 2, 2, 50_000)
    assert headers.loc[headers["experiment"] != "E3", "expected_gomaxprocs"].isna().all()
    burst = _run(headers, "E2a", "limit1").iloc[0]
    assert (burst["command"], burst["env_gomaxprocs"], burst["variant_build"]) == ("burst", "4", "go124mod")


def test_readback_has_designed_levels_and_ancestors(tables):
    readback = _run(tables["readback"], "E2a", "limit1")
    assert readback["level"].tolist() == ["pod", "container", "run-root", "host-root"]
    container = readback.iloc[1]
    assert (container["design_weight"], container["actual_shares"], container["actual_quota_us"]) == (17, 174, 100_000)
    host = readback.iloc[3]
    assert pd.isna(host["design_quota_us"]) and "permission denied" in host["error"]


def test_summaries_flatten_nested_numbers(tables):
    summaries = tables["summaries"]
    load = _run(summaries, "E2b", "clump50").iloc[0]
    assert (load["command"], load["work.sent"], load["work.p90_ms"], load["ping.ok"]) == ("load", 5, 37, 2)
    burst = _run(summaries, "E2a", "nolimit").iloc[0]
    assert burst["rounds"] == 3 and math.isnan(burst["avg_cores"])


def test_requests_one_row_per_req_record(tables):
    requests = tables["requests"]
    assert len(requests) == 7
    assert requests["ep"].value_counts().to_dict() == {"work": 5, "ping": 2}
    failed = requests[~requests["ok"]].iloc[0]
    assert (failed["target"], failed["conn"], failed["status"], failed["lat_ms"]) == (-1, -1, 0, 1000)


def test_tables_survive_a_round_trip_through_csv(tables, tmp_path):
    tidy.write_tables(tables, tmp_path)
    for name in ("runs", "rounds", "headers", "requests", "environment"):
        back = tidy.read_table(tmp_path / f"{name}.csv", name)
        pd.testing.assert_frame_equal(back, tables[name], check_dtype=False, obj=name)


def test_no_raw_logs_gives_empty_tables_with_columns():
    empty = tidy.parse_runs([])
    assert all(frame.empty for frame in empty.values())
    assert "d_nr_periods" in empty["rounds"].columns


# --------------------------------------------------------------------------
# broken logs: one RawLogError naming the file (and line), never a silent skip


def _copy(tmp_path: Path, relative: str) -> Path:
    target = tmp_path / "raw" / relative
    target.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / relative, target)
    return target


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _write(path: Path, lines: list[str], newline: bool = True) -> None:
    path.write_text("\n".join(lines) + ("\n" if newline else ""))


LIMIT1 = "E2a/limit1/rep0.jsonl"  # 12 lines: meta, 2 readback, 2 ancestor, header, rounds 0-3, summary, process


def _cut_last_line_midway(lines):
    return lines[:-1] + [lines[-1][:25]], False


def _drop(index):
    return lambda lines: (lines[:index] + lines[index + 1 :], True)


def _replace(index, old, new):
    def edit(lines):
        assert old in lines[index]
        lines = list(lines)
        lines[index] = lines[index].replace(old, new)
        return lines, True

    return edit


BROKEN = {
    "truncated mid-line": (_cut_last_line_midway, 12, "looks truncated"),
    "truncated at a line end": (lambda lines: (lines[:-1], True), 11, "no process record, so the log is truncated"),
    "no trailing newline": (lambda lines: (lines, False), 12, "cut off"),
    "missing meta": (_drop(0), 1, "first record must be 'meta'"),
    "garbage line": (_replace(7, '"round":1,', '"round":1,,'), 8, "not valid JSON"),
    "empty line": (_replace(7, _lines(FIXTURES / LIMIT1)[7], ""), 8, "empty line"),
    "missing key": (_replace(7, '"wall_ms":100,', ""), 8, "round record lacks the key 'wall_ms'"),
    "wrong type": (_replace(7, '"wall_ms":100', '"wall_ms":"fast"'), 8, "'wall_ms' should be num"),
    "boolean for a number": (_replace(7, '"d_nr_periods":2', '"d_nr_periods":true'), 8, "'d_nr_periods'"),
    "unknown record type": (_replace(7, '"type":"round"', '"type":"lap"'), 8, "unknown record type 'lap'"),
    "missing summary": (_drop(10), 11, "ended without its summary"),
    "round missing": (_drop(8), 9, "rounds must be numbered"),
    "round count disagrees": (_replace(10, '"rounds":4', '"rounds":5'), 11, "counts 5 rounds"),
    "failed process": (_replace(11, '"returncode":0', '"returncode":2'), 12, "exited with 2"),
    "record before header": (
        lambda lines: (lines[:5] + lines[6:7] + lines[5:6] + lines[7:], True),
        6,
        "outside a process",
    ),
    "second meta": (lambda lines: (lines + lines[:1], True), 13, "second 'meta'"),
    "meta of another run": (_replace(0, '"repeat":0', '"repeat":3'), 1, "rep0.jsonl"),
    "summary lacks a total": (_replace(10, '"elapsed_s":2.4,', ""), 11, "burst summary lacks the key 'elapsed_s'"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_log_is_one_error_naming_file_and_line(tmp_path, case):
    edit, line, message = BROKEN[case]
    path = _copy(tmp_path, LIMIT1)
    lines, newline = edit(_lines(path))
    _write(path, lines, newline)
    with pytest.raises(tidy.RawLogError) as caught:
        tidy.parse_runs([FIXTURES / "E2a/nolimit/rep0.jsonl", path])
    error = caught.value
    assert error.path == str(path)
    assert error.line == line
    assert str(path) in str(error) and f"line {line}" in str(error)
    assert message in str(error)


def test_empty_file_is_an_error(tmp_path):
    path = _copy(tmp_path, LIMIT1)
    path.write_text("")
    with pytest.raises(tidy.RawLogError, match="empty"):
        tidy.parse_raw_log(path)


def test_e3_without_its_expectation_is_an_error(tmp_path):
    path = _copy(tmp_path, "E3/go125mod-500m/rep0.jsonl")
    _write(path, _lines(path)[:-1])
    with pytest.raises(tidy.RawLogError, match="E3 run without its expectation"):
        tidy.parse_raw_log(path)


def test_a_log_of_an_experiment_the_catalogue_lacks_is_refused_naming_it(tmp_path):
    target = tmp_path / "raw" / "X7" / "limit1" / "rep0.jsonl"
    target.parent.mkdir(parents=True)
    lines = _lines(FIXTURES / LIMIT1)
    _write(target, [json.dumps({**json.loads(lines[0]), "experiment": "X7"}), *lines[1:]])
    with pytest.raises(
        tidy.RawLogError,
        match=r"line 1: meta experiment: experiment 'X7' has no row in "
        r"throttlelab/model/catalogue.py",
    ):
        tidy.parse_raw_log(target)


def test_load_request_count_must_match_its_summary(tmp_path):
    path = _copy(tmp_path, "E2b/clump50/rep0.jsonl")
    lines = _lines(path)
    _write(path, lines[:3] + lines[4:])  # one /work request lost
    with pytest.raises(tidy.RawLogError, match=r"work.sent = 5, but the log holds 4"):
        tidy.parse_raw_log(path)


def test_the_same_run_twice_is_an_error(tmp_path):
    copy = tmp_path / "copy.jsonl"
    shutil.copy(FIXTURES / LIMIT1, copy)
    with pytest.raises(tidy.RawLogError, match="the same run as"):
        tidy.parse_runs([FIXTURES / LIMIT1, copy])


# --------------------------------------------------------------------------
# host interference (meta.interference, meta.disturbed_attempts) and the load's client timeout


def _with_meta(tmp_path: Path, source: str, **keys) -> Path:
    lines = (FIXTURES / source).read_text().splitlines()
    meta = json.loads(lines[0])
    meta.update(keys)
    path = tmp_path / "raw" / source
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([json.dumps(meta), *lines[1:]]) + "\n")
    return path


METERED = {
    "cpus": [0, 1],
    "window_s": 7.2,
    "busy_s": 3.1,
    "lab_s": 2.6,
    "runner_s": 0.2,
    "other_s": 0.3,
    "other_share": 0.0208,
    "lab_scope": "per-cpu",
    "threshold": 0.2,
    "disturbed": False,
}


def test_old_logs_without_interference_still_parse(tables):
    runs = tables["runs"]
    assert runs["other_share"].isna().all() and runs["disturbed"].isna().all()
    assert runs["disturbed_attempts"].isna().all() and (runs["interference"] == "").all()


def test_interference_and_disturbed_attempts_become_run_columns(tmp_path):
    earlier = [
        {**METERED, "other_share": 0.41, "other_s": 5.9, "disturbed": True, "log": "rep0.disturbed-1.jsonl"},
        {**METERED, "other_share": 0.33, "other_s": 4.8, "disturbed": True, "log": "rep0.disturbed-2.jsonl"},
    ]
    still = {**METERED, "other_share": 0.27, "disturbed": True}
    path = _with_meta(tmp_path, "E2a/limit1/rep0.jsonl", interference=still, disturbed_attempts=earlier)
    plain = _with_meta(tmp_path, "E2a/nolimit/rep0.jsonl", interference=METERED, disturbed_attempts=[])
    tables = tidy.parse_runs([path, plain])
    runs = tables["runs"].set_index("variant")
    assert runs.loc["limit1", "other_share"] == 0.27 and runs.loc["limit1", "disturbed"]
    assert runs.loc["limit1", "interference_threshold"] == 0.2
    assert runs.loc["limit1", "disturbed_attempts"] == 2
    assert runs.loc["limit1", "disturbed_logs"] == (
        "rep0.disturbed-1.jsonl (other processes 41.0% of CPUs 0,1 over 7.2 s (threshold 20%)); "
        "rep0.disturbed-2.jsonl (other processes 33.0% of CPUs 0,1 over 7.2 s (threshold 20%))"
    )
    assert runs.loc["limit1", "interference"] == "other processes 27.0% of CPUs 0,1 over 7.2 s (threshold 20%)"
    assert not runs.loc["nolimit", "disturbed"] and runs.loc["nolimit", "disturbed_attempts"] == 0
    # the disturbed attempts' own logs are kept beside the raw log and never read: only the listed names
    tidy.write_tables(tables, tmp_path / "tables")
    back = tidy.read_table(tmp_path / "tables" / "runs.csv", "runs").set_index("variant")
    assert bool(back.loc["limit1", "disturbed"]) and not bool(back.loc["nolimit", "disturbed"])
    assert back.loc["limit1", "disturbed_attempts"] == 2


def test_a_calibrated_threshold_says_its_quiet_floor_and_the_busy_intervals(tmp_path):
    seen = {
        **METERED,
        "judged": "busy intervals",
        "intervals": 1,
        "threshold": 0.031,
        "threshold_rule": {"floor": 0.012, "sd": 0.0063, "threshold": 0.031, "rule": "floor + 3 SD"},
    }
    path = _with_meta(tmp_path, "E2a/limit1/rep0.jsonl", interference=seen, disturbed_attempts=[])
    runs = tidy.parse_runs([path])["runs"]
    assert runs["interference"].iloc[0] == (
        "other processes 2.1% of CPUs 0,1 over 7.2 s of busy intervals (threshold 3.1%: quiet floor 1.2% + 3 SD)"
    )
    assert runs["interference_threshold"].iloc[0] == 0.031


def test_the_orchestrators_share_is_a_column_apart_from_other(tmp_path):
    seen = {
        **METERED,
        "outside_s": 0.4,
        "outside_share": 0.0278,
        "orchestrator_s": 0.1,
        "orchestrator_cpu": 0.0139,
        "orchestrator_apart": True,
    }
    path = _with_meta(tmp_path, "E2a/limit1/rep0.jsonl", interference=seen, disturbed_attempts=[])
    older = _with_meta(tmp_path, "E2a/nolimit/rep0.jsonl", interference=METERED, disturbed_attempts=[])
    runs = tidy.parse_runs([path, older])["runs"].set_index("variant")
    assert runs.loc["limit1", "orchestrator_cpu"] == 0.0139
    assert runs.loc["limit1", "outside_share"] == 0.0278 and runs.loc["limit1", "other_share"] == 0.0208
    assert runs.loc["limit1", "interference"] == (
        "other processes 2.1% of CPUs 0,1, the orchestrator 1.39% of a CPU over 7.2 s (threshold 20%)"
    )
    # a log from before the meter knew the orchestrator: its other share was everything outside the lab
    assert runs.loc["nolimit", "outside_share"] == 0.0208 and pd.isna(runs.loc["nolimit", "orchestrator_cpu"])


def test_an_unmetered_backend_says_so(tmp_path):
    path = _with_meta(
        tmp_path, "E2a/limit1/rep0.jsonl", interference={"disturbed": False, "note": "not metered on the kind backend"}
    )
    runs = tidy.parse_runs([path])["runs"].iloc[0]
    assert runs["interference"] == "not metered on the kind backend" and not runs["disturbed"]
    assert math.isnan(runs["other_share"]) and pd.isna(runs["disturbed_attempts"])


def test_the_load_timeout_comes_from_its_header(tmp_path, tables):
    assert tables["headers"]["timeout_ms"].isna().all()  # the fixtures' load predates params.timeout
    lines = (FIXTURES / "E2b/clump50/rep0.jsonl").read_text().splitlines()
    header = json.loads(lines[1])
    header["params"]["timeout"] = 10000.0
    path = tmp_path / "raw" / "E2b" / "clump50" / "rep0.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join([lines[0], json.dumps(header), *lines[2:]]) + "\n")
    headers = tidy.parse_runs([path])["headers"]
    assert headers.loc[headers["command"] == "load", "timeout_ms"].tolist() == [10000.0]
