"""Guardian of one run's cgroups: cleans up even when the runner is SIGKILLed.

The runner starts `python -m throttlelab.host.reaper` in a session of its own and
keeps a pipe to its stdin. When the pipe closes (the runner exited, however),
the guardian kills every process left in the run's cgroups and removes them.
A clean exit has already done so, and the guardian then finds nothing to do.

A run's cgroup tree is named `throttlelab-<runner pid>-<n>` (run_name), so a
later run can tell whose it is and sweep those whose runner is gone.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

from throttlelab.host.cgroupfs import CgroupError, CgroupFS, from_description
from throttlelab.host.processes import (
    close_guardian,
    guardian_main,
    kill_all,
    pid_alive,
    spawn_guardian,
)

RUN_PREFIX = "throttlelab-"
RUN_NAME = re.compile(r"^throttlelab-(?P<pid>\d+)-\d+$")


def run_name(n: int, pid: int | None = None) -> str:
    """The name of a run's cgroup tree: its runner's pid (this process by default) and a number."""
    return f"{RUN_PREFIX}{os.getpid() if pid is None else pid}-{n}"


def run_owner(name: str) -> int | None:
    """The runner pid in a run's cgroup name, or None for a name that is not a run's."""
    match = RUN_NAME.match(name)
    return int(match["pid"]) if match else None


def kill_and_remove(fs: CgroupFS, rel: str, deadline_s: float = 10.0) -> list[int]:
    """SIGKILL everything under `rel` until it is empty, then rmdir the tree. Returns the pids killed."""
    killed: list[int] = []
    end = time.monotonic() + deadline_s
    while True:
        pids = fs.pids(rel)
        if not pids:
            break
        killed += kill_all(pids)
        if time.monotonic() > end:
            raise CgroupError(f"processes {sorted(pids)} survive SIGKILL in {rel}")
        time.sleep(0.02)
    fs.remove_tree(rel)
    return killed


def sweep_stale(fs: CgroupFS) -> list[str]:
    """Remove run cgroups (in every hierarchy of `fs`) whose runner no longer exists (left by a
    crash before the guardian existed)."""
    names = set()
    for top in fs.dirs(""):
        if top.is_dir():
            names.update(p.name for p in top.iterdir() if p.is_dir() and RUN_NAME.match(p.name))
    removed = []
    for name in sorted(names):
        owner = run_owner(name)
        if owner is not None and not pid_alive(owner):
            kill_and_remove(fs, name)
            removed.append(name)
    return removed


class Guardian:
    """Handle on the guardian process; `close()` on a clean exit."""

    def __init__(self, fs: CgroupFS, rel: str):
        self.proc = spawn_guardian("throttlelab.host.reaper", json.dumps(fs.describe()), rel, reaped_here=True)

    def close(self, timeout_s: float = 15.0, cleaned: bool = False) -> None:
        """Close the pipe and wait for the guardian; ``cleaned``: tell it first that the runner has undone
        everything (:data:`processes.RUNNER_CLEANED`)."""
        close_guardian(self.proc, timeout_s, cleaned)


def main(argv: list[str]) -> int:
    desc, rel = json.loads(argv[0]), argv[1]

    def kill_and_remove_run(_said: bytes) -> str:
        killed = kill_and_remove(from_description(desc), rel)
        return f"killed {len(killed)} process(es) and removed {rel}" if killed else ""

    return guardian_main(kill_and_remove_run, CgroupError)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
