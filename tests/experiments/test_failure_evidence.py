"""A run the backend fails: what the backend can tell about why is kept beside the job's log, and the error
names it (experiments/runner.py, model/results_layout.failure_evidence)."""

from __future__ import annotations

from pathlib import Path, PurePath
from types import SimpleNamespace

import pytest

from throttlelab.errors import BackendError, DesignMismatch
from throttlelab.experiments import runner
from throttlelab.model import results_layout as layout


def test_the_evidence_folder_sits_beside_the_jobs_log():
    raw = PurePath(layout.raw_log("kubernetes", "E2a", "limit1", 3))
    assert layout.failure_evidence(raw) == PurePath("results/kubernetes/logs/E2a/limit1/rep3.failure")
    assert PurePath(layout.RUN_LOG.format(backend="kubernetes", experiment="E2a", variant="limit1", rep=3)).parent == (
        layout.failure_evidence(raw).parent
    )


class Keeper:
    def __init__(self, kept: list[str]):
        self.kept, self.asked = kept, []

    def keep_failure_evidence(self, folder: Path) -> list[str]:
        self.asked.append(folder)
        return self.kept


def failing(exc: Exception):
    def measure(*args, **kwargs):
        raise exc

    return measure


def test_the_error_names_what_was_kept_and_keeps_its_kind(monkeypatch, tmp_path):
    out = tmp_path / "results/kubernetes/raw/E1/all-limits/rep1.jsonl"
    backend = Keeper(["results/kubernetes/logs/E1/all-limits/rep1.failure/events.json"])
    monkeypatch.setattr(runner, "measure", failing(DesignMismatch("pod e1: quota 50000, designed 100000")))
    with pytest.raises(DesignMismatch) as failed:
        runner.measure_or_keep_evidence(None, None, SimpleNamespace(backend=backend), 0, None, out)
    assert str(failed.value) == (
        "pod e1: quota 50000, designed 100000 (kept for a look: "
        "results/kubernetes/logs/E1/all-limits/rep1.failure/events.json)"
    )
    assert backend.asked == [tmp_path / "results/kubernetes/logs/E1/all-limits/rep1.failure"]


def test_with_nothing_kept_the_error_is_the_backends_own(monkeypatch, tmp_path):
    error = BackendError("the pod did not start")
    monkeypatch.setattr(runner, "measure", failing(error))
    with pytest.raises(BackendError) as failed:
        runner.measure_or_keep_evidence(
            None, None, SimpleNamespace(backend=Keeper([])), 0, None, tmp_path / "r/b/raw/E/v/rep1.jsonl"
        )
    assert failed.value is error
