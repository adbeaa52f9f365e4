"""Guardian of one run's cgroups: cleans up even when the runner is SIGKILLed.

The runner starts `python -m throttlelab.host.reaper` in a session of its own and
keeps a pipe to its stdin. When the pipe closes (the runner exited, however),
the guardian kills every process left in the run's cgroups and removes them.
A clean exit has already done so, and the guardian then finds nothing to do.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from throttlelab.host.cgroupfs import CgroupError, CgroupFS, from_description

RUN_PREFIX = "throttlelab-"
_RUN_NAME = re.compile(r"^throttlelab-(?P<pid>\d+)-\d+$")


def kill_and_remove(fs: CgroupFS, rel: str, deadline_s: float = 10.0) -> list[int]:
    """SIGKILL everything under `rel` until it is empty, then rmdir the tree. Returns the pids killed."""
    killed: list[int] = []
    end = time.monotonic() + deadline_s
    while True:
        pids = fs.pids(rel)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        if time.monotonic() > end:
            raise CgroupError(f"processes {sorted(pids)} survive SIGKILL in {rel}")
        time.sleep(0.02)
    fs.remove_tree(rel)
    return killed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(fs: CgroupFS) -> list[str]:
    """Remove run cgroups whose runner no longer exists (left by a crash before the guardian existed)."""
    removed = []
    for rel in fs.children(""):
        name = rel.rsplit("/", 1)[-1]
        match = _RUN_NAME.match(name)
        if match and not _alive(int(match["pid"])):
            kill_and_remove(fs, rel)
            removed.append(rel)
    return removed


def spawn_guardian(module: str, *args: str) -> subprocess.Popen:
    """Start `python -m module args...` as a guardian holding a pipe from this process.

    Its own session keeps a Ctrl-C to the runner's group from stopping it, and its
    PYTHONPATH finds this package however the runner did (installed or a checkout).
    """
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": f"{package_root}{os.pathsep}{path}" if path else package_root}
    return subprocess.Popen([sys.executable, "-m", module, *args], stdin=subprocess.PIPE, env=env,
                            start_new_session=True)


class Guardian:
    """Handle on the guardian process; `close()` on a clean exit."""

    def __init__(self, fs: CgroupFS, rel: str):
        self.proc = spawn_guardian("throttlelab.host.reaper", json.dumps(fs.describe()), rel)

    def close(self, timeout_s: float = 15.0) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main(argv: list[str]) -> int:
    desc, rel = json.loads(argv[0]), argv[1]
    # Ignore the signals that would stop the runner: our job is to outlive it.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    sys.stdin.buffer.read()  # returns at EOF: the runner is gone or done
    fs = from_description(desc)
    try:
        killed = kill_and_remove(fs, rel)
    except CgroupError as exc:
        print(f"throttlelab guardian: {exc}", file=sys.stderr)
        return 1
    if killed:
        print(f"throttlelab guardian: runner gone; killed {len(killed)} process(es) and removed {rel}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
