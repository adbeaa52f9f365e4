"""The lab's state on this host: one folder that only the user running the lab can enter.

The lab's lock files, the records of the kind nodes a run paused or pinned, and the real
nodes' folders all live under one folder: ``/run/throttlelab`` for root,
``$XDG_RUNTIME_DIR/throttlelab`` or ``/tmp/throttlelab-<uid>`` for anyone else
(``THROTTLELAB_STATE_DIR`` names another). The lab runs as root on its user's machine, so
state at a predictable path that another user could make first (a folder of theirs, a
link to a file of root's) would let that user steer what root truncates, reads or signals.
Every folder is therefore checked each time it is used: a real folder (not a link), owned
by this user, that no one else may write or enter. Files are opened without following links,
and exclusively where they are meant to be new.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO

from throttlelab.errors import ThrottlelabError

STATE_ENV = "THROTTLELAB_STATE_DIR"


class StateDirError(ThrottlelabError, RuntimeError):
    """A state folder or file that is not safely the lab's; the message names it and what to do."""


def state_root() -> Path:
    """The folder all of the lab's state lives under (not made here: see state_dir)."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    if os.geteuid() == 0:
        return Path("/run/throttlelab")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "throttlelab"
    return Path(f"/tmp/throttlelab-{os.geteuid()}")


def check_private(path: Path) -> None:
    """Raise unless ``path`` is a folder (not a link) of this user that no one else may write or enter."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise StateDirError(f"{path}: the lab's state folder disappeared while in use") from None
    if stat.S_ISLNK(st.st_mode):
        raise StateDirError(f"{path} is a symbolic link, not a folder the lab made; remove it and run again")
    if not stat.S_ISDIR(st.st_mode):
        raise StateDirError(f"{path} is not a folder; remove it and run again")
    if st.st_uid != os.geteuid():
        raise StateDirError(
            f"{path} belongs to uid {st.st_uid}, not to uid {os.geteuid()} that runs the lab; "
            "someone else made it first: remove it and run again"
        )
    if st.st_mode & 0o077:
        raise StateDirError(
            f"{path} has mode {stat.S_IMODE(st.st_mode):o}: other users may enter or change it; "
            f"remove it (or `chmod 700 {path}`) and run again"
        )


def _private_folder(path: Path) -> None:
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    check_private(path)


def state_dir(*parts: str) -> Path:
    """The state folder ``parts`` under the root (made with mode 0700 where missing), every folder on
    the way checked."""
    root = state_root()
    root.parent.mkdir(parents=True, exist_ok=True)
    path = root
    _private_folder(path)
    for part in parts:
        if not part or "/" in part or part in (".", ".."):
            raise ValueError(f"state folder part {part!r}: one plain name expected")
        path = path / part
        _private_folder(path)
    return path


def open_new(path: Path, mode: str = "w") -> IO:
    """A file that must not exist yet, opened without following links (for writing)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    return os.fdopen(fd, mode)


def open_state(path: Path, mode: str = "a") -> IO:
    """A state file that may exist already (a lock file, a record rewritten in place), never through a link:
    ``a`` appends (a lock), ``w`` truncates, ``r`` reads."""
    flags = {"a": os.O_WRONLY | os.O_CREAT | os.O_APPEND, "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "r": os.O_RDONLY}
    if mode not in flags:
        raise ValueError(f"mode {mode!r}: one of a, w, r")
    try:
        fd = os.open(path, flags[mode] | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last part of the path is a link
            raise StateDirError(
                f"{path} is a symbolic link, not a file the lab made; remove it and run again"
            ) from None
        raise
    return os.fdopen(fd, mode)


def write_state(path: Path, text: str) -> None:
    """Replace a state file's text, never writing through a link."""
    with open_state(path, "w") as handle:
        handle.write(text)


def read_state(path: Path) -> str:
    with open_state(path, "r") as handle:
        return handle.read()
