"""Processes of this host: is one alive, kill a set of them, start a guardian.

Every backend cleans up in layers; the last layer is a guardian process started
here, in a session of its own, holding a pipe from the runner: when the pipe
closes (the runner exited, however, even by SIGKILL) the guardian removes what
the run made. Which module the guardian runs is the backend's choice.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path


def _reachable(send: Callable[[int, int], None], target: int) -> bool:
    """Whether signal 0 through `send` finds `target` (one of another user counts as found)."""
    try:
        send(target, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one of another user counts as alive)."""
    return _reachable(os.kill, pid)


def group_alive(pgid: int) -> bool:
    """Whether any process of this process group exists."""
    return _reachable(os.killpg, pgid)


def left_by_dead_runners(state_dir: Path, alive: Callable[[int], bool] = pid_alive) -> list[tuple[str, dict]]:
    """The state files (``<name>.json`` holding the ``pid`` of the runner that wrote them) in
    ``state_dir`` whose runner is gone, as (name, state), sorted; unreadable files are skipped."""
    if not state_dir.is_dir():
        return []
    stale = []
    for path in sorted(state_dir.glob("*.json")):
        try:
            state = json.loads(path.read_text())
            pid = int(state.get("pid", 0))
        except (OSError, ValueError, AttributeError, TypeError):
            continue
        if not alive(pid):
            stale.append((path.stem, state))
    return stale


def kill_all(pids: Iterable[int]) -> list[int]:
    """SIGKILL each process; returns those signalled (one already gone is skipped)."""
    killed = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            pass
    return killed


def package_parent() -> str:
    """The folder the running `throttlelab` package was imported from (a checkout or site-packages)."""
    spec = importlib.util.find_spec("throttlelab")
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover - we are that package
        raise RuntimeError("the throttlelab package cannot be located")
    return str(Path(next(iter(spec.submodule_search_locations))).resolve().parent)


def spawn_guardian(module: str, *args: str, pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    """Start `python -m module args...` as a guardian holding a pipe from this process.

    Its own session keeps a Ctrl-C to the runner's group from stopping it, and its
    PYTHONPATH finds this package however the runner did (installed or a checkout).
    `pass_fds`: open files the guardian keeps (a lock it must hold until it has undone its part).
    """
    package_root = package_parent()
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": f"{package_root}{os.pathsep}{path}" if path else package_root}
    return subprocess.Popen([sys.executable, "-m", module, *args], stdin=subprocess.PIPE, env=env,
                            start_new_session=True, pass_fds=pass_fds)
