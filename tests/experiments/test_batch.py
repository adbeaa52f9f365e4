"""The vm backend's batch on the host (experiments/batch.py): a guest that never started its command
is booted once more; one that started and failed is not. run_in_guest is replaced by a stand-in that
plays the guest (it runs run_guest's first step, the start mark, when the boot "succeeds")."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from throttlelab.experiments import batch, runner


@pytest.fixture
def host(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "experiment_lock", contextlib.nullcontext)  # the machine-wide lock: not here
    said: list[str] = []
    monkeypatch.setattr(runner, "progress", said.append)
    out = tmp_path / "results" / "raw" / "E4" / "runc-new" / "rep0.jsonl"
    plan = {"common": [], "jobs": [{"variant": "runc-new", "repeat": 0, "spec": "{}", "out": str(out)}]}
    args = batch.parser().parse_args(
        ["--experiment", "E4", "--results", str(tmp_path / "results"), "--plan", json.dumps(plan)]
    )
    return args, out, said


def guest(boots: list[str], out: Path):
    """Each call is one boot: "dies" ends with 255 before the command; "runs" starts it and writes the log;
    "fails" starts it and fails the job."""
    calls = []

    def run_in_guest(settings, command, rwdirs, env=None, log=None, timeout_s=None, stdout=None):
        what = boots[len(calls)]
        calls.append(what)
        plan = Path(command[-1])
        if what == "dies":
            return 255
        batch.start_mark(plan).write_text("1")
        if what == "fails":
            return 1
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("{}\n")
        return 0

    return run_in_guest, calls


def test_a_guest_that_never_started_is_booted_once_more_and_the_log_says_so(host, monkeypatch):
    args, out, said = host
    stand_in, calls = guest(["dies", "runs"], out)
    monkeypatch.setattr(batch, "run_in_guest", stand_in)
    assert batch.run_host(args) == 0
    assert calls == ["dies", "runs"] and out.is_file()
    assert any(
        "ended with status 255 before its command started (nothing ran); booting it once more" in s for s in said
    )
    assert not list((Path(args.results) / batch.BATCH_DIR).iterdir())  # plan and mark removed


def test_a_guest_that_started_and_failed_is_not_booted_again(host, monkeypatch):
    args, out, said = host
    stand_in, calls = guest(["fails", "runs"], out)
    monkeypatch.setattr(batch, "run_in_guest", stand_in)
    assert batch.run_host(args) == 1
    assert calls == ["fails"]


def test_a_guest_that_never_starts_twice_fails_with_its_status(host, monkeypatch):
    args, out, said = host
    stand_in, calls = guest(["dies", "dies", "runs"], out)
    monkeypatch.setattr(batch, "run_in_guest", stand_in)
    assert batch.run_host(args) == 255
    assert calls == ["dies", "dies"]
