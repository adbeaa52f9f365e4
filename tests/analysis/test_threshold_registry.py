"""The threshold registry (docs/STATISTICS.md §5): each revision dated by its commit, so that runs made before it can be
told from runs made after; and every derived threshold's value per profile, held against the golden file."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from conftest import PROJECT
from throttlelab.analysis.findings import finding_catalogue, jobs_findings, threshold_registry
from throttlelab.analysis.findings.threshold_registry import Revision
from throttlelab.model.config import load_design


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


# --------------------------------------------------------------------------
# values, not commits: every derived threshold per profile, held against the golden file

GOLDEN = Path(__file__).resolve().parent / "golden" / "thresholds.csv"
REGENERATE = "THROTTLELAB_REGENERATE_THRESHOLDS"


def derived_thresholds() -> pd.DataFrame:
    """Every check's threshold as each profile derives it, before any data."""
    tables = [
        finding_catalogue.threshold_table(load_design({"profile": profile}, PROJECT / "config"), cpus)
        for profile, cpus in sorted(finding_catalogue.PROFILE_NODE_CPUS.items())
    ]
    return pd.concat(tables, ignore_index=True).astype(str)


def moved_without_a_row(golden: pd.DataFrame, derived: pd.DataFrame) -> list[str]:
    """The thresholds whose value differs from the golden file while their registry row is the same one."""
    keys = ["profile", "finding", "check"]
    both = golden.merge(derived, on=keys, how="outer", suffixes=("_golden", "_now"), indicator="side")
    out = []
    for row in both.to_dict("records"):
        where = f"{row['profile']} {row['finding']} {row['check']}"
        if row["side"] != "both":
            out.append(f"{where}: only in the {'golden file' if row['side'] == 'left_only' else 'code'}")
        elif row["threshold_golden"] != row["threshold_now"] and row["registry_golden"] == row["registry_now"]:
            out.append(f"{where}: {row['threshold_golden']} -> {row['threshold_now']} with the same registry row")
    return out


def test_every_derived_threshold_is_the_golden_files():
    derived = derived_thresholds()
    golden = pd.read_csv(GOLDEN, dtype=str, keep_default_na=False) if GOLDEN.exists() else derived.iloc[:0]
    moved = moved_without_a_row(golden, derived)
    if os.environ.get(REGENERATE):
        # a threshold may move only with a new registry row (threshold_registry.py); new checks are written
        assert not [m for m in moved if "same registry row" in m], moved
        GOLDEN.parent.mkdir(exist_ok=True)
        derived.to_csv(GOLDEN, index=False)
        return
    assert not moved, (
        "thresholds moved (a constant, a profile or a derivation changed): add the check's new row to "
        f"threshold_registry.py, then {REGENERATE}=1 .venv/bin/python -m pytest {Path(__file__).name} -k golden:\n"
        + "\n".join(moved)
    )
    assert derived.equals(golden), "the golden file differs (a derivation's text or a registry row): regenerate it"


def test_a_constant_that_moves_a_threshold_without_a_new_row_fails(monkeypatch):
    # the equivalence margin moves every "within" band derived from it: the same registry rows, new values
    golden = pd.read_csv(GOLDEN, dtype=str, keep_default_na=False)
    monkeypatch.setattr(jobs_findings, "SAME_BAND", 1.3)
    moved = moved_without_a_row(golden, derived_thresholds())
    assert any("F1 p50_wall_ms limit2 / nolimit: p50_wall_ms limit2 / nolimit within [0.8, 1.25]" in m for m in moved)
    assert all("same registry row" in m for m in moved), moved


def test_the_golden_file_holds_every_profile_and_check_with_its_value():
    golden = pd.read_csv(GOLDEN, dtype=str, keep_default_na=False)
    checks = sum(len(f.checks) for f in finding_catalogue.FINDINGS)
    assert golden.groupby("profile").size().to_dict() == {p: checks for p in finding_catalogue.PROFILE_NODE_CPUS}
    quick = golden[(golden["profile"] == "quick")].set_index(["finding", "check"])
    assert quick.loc[("F4", "throttled_ms limit1-2threads / limit1"), "threshold"].endswith("< 0.937")
    assert "issue" not in " ".join(golden["registry"]).lower()


def test_the_levels_each_check_is_judged_at_are_written_as_numbers_beside_its_threshold():
    quick = load_design({"profile": "quick"}, PROJECT / "config")
    assert finding_catalogue.judged_levels(quick, "E7") == (
        "look 1 of 2 after 7 of 9 repeats: 0.9737 (one-sided 0.0131); look 2 of 2: 0.9592 (0.0204)"
    )
    assert finding_catalogue.judged_levels(quick, "E2a") == "0.95"
    # one stage when the repeats are given on the command line: one level, and a visible diff in the golden file
    assert (
        finding_catalogue.judged_levels(load_design({"profile": "quick", "repeats": 9}, PROJECT / "config"), "E7")
        == "0.95"
    )
