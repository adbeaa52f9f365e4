"""The lab's private state folder (host/state_dir.py): what another user plants first stops the lab, and
nothing is written through it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from throttlelab.host import state_dir as sd
from throttlelab.platform import kind_pauses as pauses, kind_pins as pins

NOBODY = 65534


@pytest.fixture()
def state_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "state"
    monkeypatch.setenv(sd.STATE_ENV, str(root))
    return root


def test_folders_are_made_private_and_reused(state_root):
    path = sd.state_dir("kind-pins")
    assert path == state_root / "kind-pins"
    for folder in (state_root, path):
        st = os.lstat(folder)
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    assert sd.state_dir("kind-pins") == path  # a second use finds the same, checked again
    with pytest.raises(ValueError):
        sd.state_dir(str(Path("..", "escape")))


def test_a_planted_link_stops_the_lab_and_nothing_is_written_through_it(state_root, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    state_root.mkdir(mode=0o700)
    (state_root / "kind-pauses").symlink_to(elsewhere)
    with pytest.raises(sd.StateDirError, match="symbolic link"):
        pauses.pause_state_dir()
    assert list(elsewhere.iterdir()) == []


def test_a_planted_file_link_is_not_followed(state_root, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    folder = sd.state_dir("kind-pins")
    (folder / "node.json").symlink_to(victim)
    with pytest.raises(sd.StateDirError, match="symbolic link"):
        sd.write_state(folder / "node.json", "{}")
    with pytest.raises(FileExistsError):
        with sd.open_new(folder / "node.json"):
            pass
    assert victim.read_text() == "root's file\n"
    # the sweep of dead runners' records does not read through the link either
    assert pins.left_by_dead_runners(folder, alive=lambda pid: False) == []


@pytest.mark.root
def test_a_folder_of_another_user_stops_the_lab(state_root):
    if os.geteuid() != 0:
        pytest.skip("making a folder of another owner needs root")
    state_root.mkdir(mode=0o700)
    planted = state_root / "nodes"
    planted.mkdir(mode=0o700)
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(sd.StateDirError, match=f"belongs to uid {NOBODY}"):
        sd.state_dir("nodes")
    assert list(planted.iterdir()) == []


def test_a_folder_others_may_enter_stops_the_lab(state_root):
    state_root.mkdir(mode=0o700)
    (state_root / "kind-locks").mkdir()
    os.chmod(state_root / "kind-locks", 0o777)
    with pytest.raises(sd.StateDirError, match="mode 777"):
        pauses.lock_file("throttlelab-new")


def test_the_runner_stops_with_one_line_on_a_planted_state_folder(state_root, tmp_path):
    """Through the command line: one line naming the path and what to do, no traceback, no raw log."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state_root.symlink_to(elsewhere)
    out = tmp_path / "raw.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "throttlelab", "run", "--backend", "local", "--experiment", "E1"]
        + ["--variant", "all-limits", "--repeat", "1", "--spec", "{}", "--out", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, sd.STATE_ENV: str(state_root)},
        timeout=60,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert f"{state_root} is a symbolic link" in proc.stderr
    assert not out.exists() and list(elsewhere.iterdir()) == []
