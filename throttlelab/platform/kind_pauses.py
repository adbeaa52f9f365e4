"""The idle cluster is paused while a job measures on the other one, and always resumed.

The lab keeps two kind clusters (runc-new and runc-old). A job uses one; the
other's kubelet, API server, etcd and controllers would keep waking on the very
CPUs being measured. So a deployment `docker pause`s the idle cluster's node
containers for its whole life and resumes them on exit, failure and interrupt
(finally), by the guardian when the runner is SIGKILLed (resume_described, run
by throttlelab.backends.kind.kind_guardian), and by the sweep at the next start:
before a node is paused, a state file names the runner's pid.

Where both clusters are needed at once, pausing must wait: Snakemake may run
`kind create` or `kind load` for one cluster (rules/platform/kind_clusters.smk) beside a job
on the other, and a paused node cannot be exec'd into or loaded. Every lab
process therefore holds a lock per cluster (flock on a file named after it):
shared to use a cluster, exclusive to pause it. A job takes shared on its own
cluster and exclusive on the idle one, so it waits for a `kind load` into the
idle cluster to end, and that `kind load` waits for the job. Locks are always
taken in the order of the clusters' names, so two processes never deadlock.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from throttlelab.errors import BackendError
from throttlelab.host.state_dir import open_state, state_dir, write_state
from throttlelab.host.processes import left_by_dead_runners, pid_alive
from throttlelab.host.docker_engine import kind_engine_client
from throttlelab.platform.kind_nodes import node_container

LOCK_NAME = "kind-locks"  # folders of the lab's private state (host/state_dir.py)
PAUSE_STATE_NAME = "kind-pauses"


def lock_dir() -> Path:
    return state_dir(LOCK_NAME)


def pause_state_dir() -> Path:
    return state_dir(PAUSE_STATE_NAME)


def lock_file(cluster: str) -> Path:
    return lock_dir() / f"{cluster}.lock"


def state_file(container: str) -> Path:
    """Where a paused node's runner pid is kept until the node is resumed."""
    return pause_state_dir() / f"{container}.json"


class ClusterLocks:
    """The cluster locks one process holds; release() drops them all (closing a file drops its flock,
    so a runner that dies drops them too)."""

    def __init__(self) -> None:
        self._files: list[IO[str]] = []

    def fds(self) -> tuple[int, ...]:
        """The lock files' descriptors (a process that inherits them holds the locks too)."""
        return tuple(handle.fileno() for handle in self._files)

    def release(self) -> None:
        while self._files:
            self._files.pop().close()


def hold(
    using: Iterable[str] = (), pausing: Iterable[str] = (), progress: Callable[[str], None] = lambda message: None
) -> ClusterLocks:
    """Lock the clusters `using` (shared) and `pausing` (exclusive), waiting for other lab processes
    as long as they need them (saying so through `progress`)."""
    modes = {name: "shared" for name in using}
    for name in pausing:
        if name in modes:
            raise ValueError(f"cluster {name} cannot be used and paused at once")
        modes[name] = "exclusive"
    locks = ClusterLocks()
    try:
        for name in sorted(modes):  # one order for every process: no two of them wait for each other
            handle = open_state(lock_file(name), "a")
            locks._files.append(handle)
            flag = fcntl.LOCK_EX if modes[name] == "exclusive" else fcntl.LOCK_SH
            try:
                fcntl.flock(handle, flag | fcntl.LOCK_NB)
            except BlockingIOError:
                why = (
                    "another lab process uses it (kind create/load/delete, or a run's checks)"
                    if modes[name] == "exclusive"
                    else "a run on the other cluster has paused it"
                )
                progress(f"waiting for kind cluster {name}: {why} (lock {lock_file(name)})")
                fcntl.flock(handle, flag)
    except BaseException:
        locks.release()
        raise
    return locks


@contextmanager
def using(*clusters: str, progress: Callable[[str], None] = lambda message: None) -> Iterator[None]:
    """Use clusters that must not be paused meanwhile (kind create / load / delete, the preflight)."""
    locks = hold(using=clusters, progress=progress)
    try:
        yield
    finally:
        locks.release()


def plan_pauses(client: Any, names: Iterable[str]) -> dict[str, Any]:
    """The node containers among `names` that run now, by name: the ones to pause (a cluster never
    created, or a node already stopped or paused by someone else, is left as it is)."""
    out = {}
    for name in names:
        container = node_container(client, name, missing_ok=True)
        if container is not None and container.status == "running":
            out[name] = container
    return out


def pause(containers: Iterable[Any], pid: int) -> None:
    """`docker pause` the node containers (as plan_pauses found them: they are not looked up again)."""
    import docker.errors

    for container in containers:
        name = container.name
        # the state file first: a runner killed right after `docker pause` still gets its node resumed
        write_state(state_file(name), json.dumps({"pid": pid}))
        try:
            container.pause()
        except docker.errors.NotFound:
            state_file(name).unlink(missing_ok=True)  # gone since it was found: nothing to resume
        except docker.errors.APIError as exc:
            raise BackendError(
                f"kind backend: docker pause {name} (a node of the idle cluster) failed: {exc}"
            ) from None


def resume(client: Any, names: Iterable[str]) -> list[str]:
    """Unpause every node of `names` that is paused; returns those resumed. Idempotent."""
    import docker.errors

    done, problems = [], []
    for name in names:
        try:
            container = node_container(client, name, missing_ok=True)
            if container is not None and container.status == "paused":
                try:
                    container.unpause()
                    done.append(name)
                except docker.errors.APIError:
                    # resumed (or removed) by another process since it was read: its guardian, a sweep
                    now = node_container(client, name, missing_ok=True)
                    if now is not None and now.status == "paused":
                        raise
            state_file(name).unlink(missing_ok=True)
        except (BackendError, docker.errors.APIError) as exc:
            problems.append(f"{name}: {exc}")
    if problems:
        raise BackendError(
            "kind backend: could not resume the idle cluster's nodes (resume them by hand: "
            "docker unpause NAME): " + "; ".join(problems)
        )
    return done


def sweep_pauses(client: Any, alive: Callable[[int], bool] = pid_alive) -> list[str]:
    """Resume nodes a dead runner left paused (its state file names its pid)."""
    return resume(client, [name for name, _state in left_by_dead_runners(pause_state_dir(), alive)])


def resume_described(desc: dict[str, Any]) -> list[str]:
    """The guardian's part: resume the nodes its description lists under "pauses"
    ([NODE_CONTAINER, ...]); returns what it did."""
    if not desc.get("pauses"):
        return []
    resumed = resume(kind_engine_client(), desc["pauses"])
    return ["resumed " + ", ".join(resumed)] if resumed else []
