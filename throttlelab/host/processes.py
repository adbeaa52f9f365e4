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
import time
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


def die_with_parent() -> None:
    """In a child before exec: SIGKILL when the process that started it ends (PR_SET_PDEATHSIG), so a
    parent killed with SIGKILL leaves no child of it running on."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def running(pid: int) -> bool:
    """Whether the process exists and has not ended: a zombie (ended, not reaped: an orphan on a host
    whose PID 1 reaps nothing, as on these machines) counts as ended."""
    try:
        return _stat_fields(Path(f"/proc/{pid}/stat"))[0] != "Z"
    except (OSError, IndexError):
        return False


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
            with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW)) as handle:  # never through a planted link
                state = json.loads(handle.read())
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


def spawn_guardian(
    module: str, *args: str, pass_fds: tuple[int, ...] = (), stdout: int | None = None, reaped_here: bool = False
) -> subprocess.Popen:
    """Start `python -m module args...` as a guardian holding a pipe from this process.

    Its own session keeps a Ctrl-C to the runner's group from stopping it, and its
    PYTHONPATH finds this package however the runner did (installed or a checkout).
    `pass_fds`: open files the guardian keeps (a lock it must hold until it has undone its part);
    `stdout`: subprocess.PIPE where the guardian answers (the real node says when it is ready).
    `reaped_here`: the caller reaps it with :func:`wait_guardian`, so its CPU counts as the lab's from its
    start (:func:`guardians_cpu_s`); a guardian reaped any other way is never counted, lest its clock
    vanish (or a later process's take its pid) once it is gone.
    """
    package_root = package_parent()
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": f"{package_root}{os.pathsep}{path}" if path else package_root}
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=subprocess.PIPE,
        env=env,
        start_new_session=True,
        pass_fds=pass_fds,
        stdout=stdout,
    )
    if reaped_here:
        _live_guardians.add(proc.pid)
    return proc


#: What a runner writes to its guardian's pipe when it has undone everything itself: a guardian that reads
#: it can skip the checks it would make after a runner that died (the docker guardian then never connects
#: to the engine).
RUNNER_CLEANED = b"cleaned\n"

#: CPU seconds of the guardians this process has waited for (their whole lives), and the guardians still
#: running: the lab's own work, which the interference meter counts with the runner's (a guardian's start,
#: some 50-150 ms of Python, falls inside the run's first busy interval, where it would read as another
#: process's work).
_guardians_cpu_s = 0.0
_live_guardians: set[int] = set()


def guardians_cpu_s() -> float:
    """CPU time of every guardian this process started: those :func:`wait_guardian` has reaped, and the
    running ones so far."""
    return _guardians_cpu_s + sum(cpu_clock_s(pid) or 0.0 for pid in list(_live_guardians))


def outlive_runner() -> bytes:
    """In a guardian: ignore the signals that would stop the runner (a Ctrl-C, a kill, a closed terminal),
    then wait until the runner's pipe closes, whether it is gone or done; returns what it wrote there."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    return sys.stdin.buffer.read()


def guardian_main(clean_up: Callable[[bytes], str], errors: type[Exception] | tuple[type[Exception], ...]) -> int:
    """A guardian's life: outlive the runner, then undo what it left. ``clean_up`` gets what the runner wrote
    into the pipe and returns what it undid ("" for nothing), which goes to stderr; the exit status is 1 when
    it raises one of ``errors`` (said on stderr too), else 0."""
    said = outlive_runner()
    try:
        done = clean_up(said)
    except errors as exc:
        print(f"throttlelab guardian: {exc}", file=sys.stderr)
        return 1
    if done:
        print(f"throttlelab guardian: runner gone; {done}", file=sys.stderr)
    return 0


def wait_guardian(proc: subprocess.Popen, timeout_s: float) -> None:
    """Wait for a guardian to end (subprocess.TimeoutExpired after ``timeout_s``), then add its CPU
    time, read from /proc while it is a zombie, to :func:`guardians_cpu_s` before reaping it."""
    global _guardians_cpu_s
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ended = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None
        except ChildProcessError:  # reaped already: nothing left to read
            _live_guardians.discard(proc.pid)
            proc.wait()
            return
        if ended:
            break
        if time.monotonic() >= deadline:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
        time.sleep(0.01)
    final = cpu_clock_s(proc.pid)  # a zombie's clock holds its whole life, as the live readings did
    if final is None:
        fields = _stat_fields(Path(f"/proc/{proc.pid}/stat"))
        try:
            final = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
        except (ValueError, IndexError):  # no fields: gone already
            final = 0.0
    _live_guardians.discard(proc.pid)
    _guardians_cpu_s += final
    proc.wait()


def close_guardian(proc: subprocess.Popen, timeout_s: float, cleaned: bool = False) -> None:
    """The runner's end of a guardian: tell it the runner has undone everything itself (``cleaned``:
    :data:`RUNNER_CLEANED`), close the pipe, and wait for it to end (killed after ``timeout_s``)."""
    if proc.stdin:
        if cleaned:
            try:
                proc.stdin.write(RUNNER_CLEANED)
            except BrokenPipeError:  # the guardian is gone: nothing to tell
                pass
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
    try:
        wait_guardian(proc, timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cpu_clock_s(pid: int) -> float | None:
    """A process's CPU time in seconds, nanosecond-precise, every thread (ended ones too): the
    kernel's process CPU clock (``clock_getcpuclockid``); None when there is no such process."""
    try:
        return time.clock_gettime(((~pid) << 3) | 2)  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    except OSError:
        return None


#: kthreadd: the parent of every kernel thread (workqueues, softirq, RCU, ...)
KTHREADD = 2


def scan(proc: Path = Path("/proc")) -> list[tuple[int, str, int]]:
    """(pid, command name, parent pid) of every process visible now, from one read of each ``stat`` (the
    command name as ``/proc/<pid>/comm`` has it: cut by the kernel to 15 characters)."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:  # ended while the folder was read
            continue
        head, _, tail = text.rpartition(")")
        fields = tail.split()
        if "(" in head and len(fields) > 1:
            found.append((int(entry.name), head.split("(", 1)[1], int(fields[1])))
    return sorted(found)


def named(
    names: Iterable[str], proc: Path = Path("/proc"), tasks: list[tuple[int, str, int]] | None = None
) -> list[int]:
    """The processes whose command name is one of ``names``, in pid order (``tasks``: a :func:`scan` already made)."""
    wanted = frozenset(names)
    return [pid for pid, comm, _ in (scan(proc) if tasks is None else tasks) if comm in wanted]


def kernel_threads(proc: Path = Path("/proc"), tasks: list[tuple[int, str, int]] | None = None) -> list[int]:
    """kthreadd and the kernel threads it started, in pid order (``tasks``: a :func:`scan` already made)."""
    return [pid for pid, _, parent in (scan(proc) if tasks is None else tasks) if KTHREADD in (pid, parent)]


def parent_pids(proc: Path = Path("/proc")) -> dict[int, int]:
    """pid -> parent pid of every process visible now."""
    parents = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry / "stat")
        if fields:  # none: ended while the folder was read
            parents[int(entry.name)] = int(fields[1])
    return parents


def _stat_fields(path: Path) -> list[str]:
    """The fields of a /proc/<pid>/stat after the command name (state, ppid, ...), or [] when it is gone."""
    try:
        return path.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def tree_without(root: int, excluded: int, parents: dict[int, int]) -> list[int]:
    """``root`` and its descendants, less ``excluded`` and its descendants (pid -> parent map)."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root] if root in parents and root != excluded else []
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(c for c in children.get(pid, []) if c != excluded)
    return sorted(found)
