"""The threshold registry (STATS.md §5): each revision dated by its commit, so that runs made before it can be
told from runs made after."""

from __future__ import annotations

import shutil
import subprocess
from datetime import datetime

import pytest

from conftest import PROJECT
from throttlelab.analysis.findings import finding_catalogue, threshold_registry
from throttlelab.analysis.findings.threshold_registry import Revision


def _git_date(commit: str) -> str | None:
    if shutil.which("git") is None:
        return None
    got = subprocess.run(
        ["git", "-C", str(PROJECT), "show", "-s", "--format=%cI", commit], capture_output=True, text=True, check=False
    )
    return got.stdout.strip() if got.returncode == 0 else None


def test_every_revision_is_dated_by_its_commit():
    revisions = {r.commit: r for r in threshold_registry.REGISTRY.values()}
    checked = 0
    for commit, r in revisions.items():
        assert r.when.tzinfo is not None, commit
        date = _git_date(commit)
        if date is None:
            continue  # not in this clone's history (a shallow clone, a copy without .git)
        assert datetime.fromisoformat(date) == r.when, f"{commit}: the registry says {r.date}, git {date}"
        checked += 1
    if checked == 0:
        pytest.skip("no revision's commit in this checkout's history (no git, or a shallow copy)")


def test_every_check_revised_after_data_is_judged_from_its_revision_on():
    since = finding_catalogue.revision_since()
    assert set(since) == {k for k, r in threshold_registry.REGISTRY.items() if r.after_data}
    f4 = since[("F4", "throttled_ms limit1-2threads / limit1")]
    assert f4.revision == "a5a8721 of 2026-12-02T12:29:26+00:00" and f4.when.isoformat() == "2026-12-02T12:29:26+00:00"


def test_a_revision_without_a_readable_date_is_refused_naming_the_field():
    with pytest.raises(ValueError, match=r"revision abc1234: date '' is not an ISO 8601 time"):
        Revision("abc1234", True, "a note")
    with pytest.raises(ValueError, match=r"date 'yesterday'"):
        Revision("abc1234", True, "a note", "yesterday")
