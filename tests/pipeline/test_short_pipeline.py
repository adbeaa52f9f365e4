"""A short real pipeline on the local backend, the one the README's test command runs: E1's readback and E2a's
burst with no limit and at 125m, E2a in two stages with a look between them, through Snakemake to the report, on
real cgroups; a rerun with nothing changed does nothing; editing one variant reruns only its stages; Ctrl-C and a
killed workload leave nothing. The `ci` profile end to end is test_pipeline.py's,
under --full. Needs root."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

import pandas as pd

from conftest import left_behind, snakemake, workload_pids_of
from pipeline_runs import (
    LONG_LOG,
    assert_clean,
    assert_e1_reads_back_the_design,
    assert_the_quota_decides_throttling,
    ci_profile,
    cpuset_state,
    ctrl_c,
    interrupted_long_run,
    kill_the_workload,
    planned_jobs,
    raw_runs,
    read_log,
)
from throttlelab.model import look_file

pytestmark = [pytest.mark.root, pytest.mark.slow]

#: The quiet host's floor sampled for 2 s instead of 20, and a disturbed run kept and marked rather than measured
#: again after a wait of up to a minute: what these tests read (the readback, the throttling counters) does not
#: depend on other work; the waits and retries are test_runner.py's.
QUICK_DISTURBANCE = "disturbance:\n  quiet_calibration_s: 2\n  retries: 0\n"


@pytest.fixture(scope="module")
def short_run(binaries, tmp_path_factory) -> tuple[Path, list[str]]:
    """The `ci` profile's E1 (both variants) and E2a's nolimit and limit500m arms to the report, E2a's three
    repeats in two stages (a look after two); the workload builds taken from the test session's. Returns the
    workdir and the Snakemake arguments."""
    if os.geteuid() != 0:
        pytest.skip("the local backend needs root (or a delegated cgroup) to create cgroups")
    folder = tmp_path_factory.mktemp("short-profile")
    profile = ci_profile()
    e2a = profile["experiments"]["E2a"]
    e2a["variants"] = {k: e2a["variants"][k] for k in ("nolimit", "limit500m")}
    e2a["repeats"], e2a["first_look"] = 3, 2
    profile["experiments"] = {"E1": profile["experiments"]["E1"], "E2a": e2a}
    profile["repeats"] = 2
    (folder / "short.yaml").write_text(yaml.safe_dump(profile))
    (folder / "disturbance.yaml").write_text(QUICK_DISTURBANCE)
    args = ["--configfile", str(folder / "disturbance.yaml"), "--config", f"profile={folder / 'short.yaml'}"]
    workdir = tmp_path_factory.mktemp("short-run")
    for build, path in binaries.items():
        (workdir / f"results/build/{build}").mkdir(parents=True)
        shutil.copy(path, workdir / f"results/build/{build}/cpulab")
    before = cpuset_state()
    proc = snakemake(workdir, "report", *args)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert cpuset_state() == before
    return workdir, args


def test_every_run_wrote_its_raw_log_and_nothing_is_left(short_run):
    workdir, _ = short_run
    logs = sorted(
        p.relative_to(workdir / "results/local/raw").as_posix()
        for p in workdir.glob("results/local/raw/*/*/rep*.jsonl")
        if ".disturbed-" not in p.name
    )
    second = [f"E2a/{variant}/rep2.jsonl" for variant in _going_on(workdir)]
    assert logs == sorted(
        [
            "E1/all-limits/rep0.jsonl",
            "E1/partial/rep0.jsonl",
            "E2a/limit500m/rep0.jsonl",
            "E2a/limit500m/rep1.jsonl",
            "E2a/nolimit/rep0.jsonl",
            "E2a/nolimit/rep1.jsonl",
            *second,
        ]
    )
    for log in logs:
        meta = read_log(workdir / "results/local/raw" / log)[0]
        assert meta["type"] == "meta" and meta["backend"] == "local" and meta["start"] <= meta["end"]
    assert left_behind(workdir) == [] and workload_pids_of(workdir) == []
    assert (workdir / "results/report/index.html").is_file()


def _going_on(workdir: Path) -> list[str]:
    return look_file.going_on(workdir / "results/local/looks/E2a.json")


def test_the_look_decides_the_second_stage_and_the_findings_say_at_which_look(short_run):
    workdir, _ = short_run
    look = look_file.read(workdir / "results/local/looks/E2a.json")
    assert look["runs"] == 4 and look["go_on"] == bool(look["open"]) == bool(look["variants"])
    assert set(look["variants"]) <= {"nolimit", "limit500m"}
    checks = pd.read_csv(workdir / "results/local/tables/checks.csv", keep_default_na=False)
    # the checks its runs judged (those whose variants this profile leaves out have no level and no look): at the
    # second look when a variant they compare went on (E2a's checks each name limit500m), else at the first
    judged = checks[(checks["experiment"] == "E2a") & (checks["level"] != "")]
    index = 2 if "limit500m" in look["variants"] else 1
    assert not judged.empty and set(judged["look"]) == {f"{index} of 2"}
    level = look["levels"][index - 1]
    assert {float(x) for x in judged["level"]} <= {level, 1 - (1 - level) / 2}
    assert set(checks.loc[checks["experiment"] != "E2a", "look"]) == {""}
    runs = pd.read_csv(workdir / "results/local/tables/runs.csv")
    mine = runs[runs["experiment"] == "E2a"]
    for variant in ("nolimit", "limit500m"):
        repeats = sorted(mine.loc[mine["variant"] == variant, "repeat"])
        assert repeats == ([0, 1, 2] if variant in look["variants"] else [0, 1])
    # the look came after every run of the first stage and before any of the second
    looked = pd.Timestamp((workdir / "results/local/looks/E2a.json").stat().st_mtime, unit="s", tz="UTC")
    first = mine["repeat"] < 2
    assert (pd.to_datetime(mine.loc[first, "end"], utc=True) < looked).all()
    assert (pd.to_datetime(mine.loc[~first, "start"], utc=True) > looked).all()


def test_editing_one_variant_reruns_only_its_stages_and_the_look(short_run, tmp_path):
    workdir, args = short_run
    profile = yaml.safe_load(Path(args[-1].removeprefix("profile=")).read_text())
    profile["experiments"]["E2a"]["variants"]["limit500m"]["rounds"] = 7
    edited = tmp_path / "short.yaml"
    edited.write_text(yaml.safe_dump(profile))
    proc = snakemake(workdir, "-n", "report", *args[:-1], f"profile={edited}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    plan = planned_jobs(proc)
    # both stages of the edited variant (its second as the look on disk decided; the look runs again between
    # them, and Snakemake lists the second stage again once it has), nothing of the other variant
    stages = (0, 1, 2) if "limit500m" in _going_on(workdir) else (0, 1)
    assert sorted(plan.pop("run_experiment")) == [f"results/local/raw/E2a/limit500m/rep{k}.jsonl" for k in stages]
    assert plan.pop("look") == ["results/local/looks/E2a.json"]
    assert set(plan) <= {"parse_runs", "compute_stats", "evaluate_findings", "draw_figures", "render_report", "report"}


def test_e1_reads_back_every_level(short_run):
    assert_e1_reads_back_the_design(raw_runs(short_run[0], "E1"))


def test_e2a_is_throttled_by_its_quota_and_only_then(short_run):
    assert_the_quota_decides_throttling(raw_runs(short_run[0], "E2a"))


def test_a_rerun_with_nothing_changed_does_nothing(short_run):
    workdir, args = short_run
    outputs = {p: p.stat().st_mtime_ns for p in (workdir / "results").rglob("*") if p.is_file()}
    proc = snakemake(workdir, "report", *args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Nothing to be done" in proc.stdout + proc.stderr
    assert {p: p.stat().st_mtime_ns for p in outputs} == outputs


def test_ctrl_c_to_snakemake_leaves_nothing_behind(short_run, tmp_path):
    before = cpuset_state()
    workdir, proc, _ = interrupted_long_run(short_run[0], tmp_path, ctrl_c)
    assert proc.returncode != 0
    assert_clean(before, workdir)
    assert not (workdir / LONG_LOG).exists()


def test_a_killed_workload_fails_its_job_and_leaves_nothing(short_run, tmp_path):
    before = cpuset_state()
    workdir, proc, output = interrupted_long_run(short_run[0], tmp_path, kill_the_workload)
    assert proc.returncode != 0
    assert "killed by a signal" in output
    assert_clean(before, workdir)
    assert not (workdir / LONG_LOG).exists()
