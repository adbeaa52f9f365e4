"""kind's node containers: reach them through the Docker engine, run commands in them, and read
their files from this host.

A kind node is a Docker container on this host. A command runs in it by `docker exec`
(node_exec); its files are read from this host through the node's `/proc/<pid>/root`
(NodeFiles): the node's own mount namespace, its /sys/fs/cgroup included, with no process
started in the node and no engine call, a few microseconds a read instead of 50-150 ms of
`docker exec` on the CPUs being measured. The worker's runc says which conversion of shares
to weights it applies.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any, Callable

from throttlelab.errors import BackendError
from throttlelab.model.runtime import runc_conversion


def node_container(client: Any, name: str, missing_ok: bool = False) -> Any:
    """The node container `name`; a BackendError when the engine cannot say, or when it does not
    exist (None instead with `missing_ok`: its cluster is gone, or was never created)."""
    import docker.errors

    try:
        return client.containers.get(name)
    except docker.errors.NotFound:
        if missing_ok:
            return None
        raise BackendError(
            f"kind backend: the node container {name!r} does not exist; is its cluster created? "
            "(snakemake --cores 1 --config backend=kind create_clusters)"
        ) from None
    except docker.errors.APIError as exc:
        raise BackendError(f"kind backend: cannot inspect node container {name!r}: {exc}") from None


def node_exec(container: Any, argv: list[str], what: str) -> str:
    """Run a command inside a node container (it has sh, cat and find); its stdout, or a BackendError."""
    import docker.errors

    try:
        code, output = container.exec_run(argv, stdout=True, stderr=True, demux=True)
    except docker.errors.APIError as exc:
        raise BackendError(f"{what}: docker exec in {container.name} failed: {exc}") from None
    stdout, stderr = output if isinstance(output, tuple) else (output, b"")
    if code != 0:
        raise BackendError(
            f"{what}: exit {code} in {container.name}: {(stderr or b'').decode(errors='replace')[-300:]!r}"
        )
    return (stdout or b"").decode("utf-8", "replace")


def runc_version(container: Any) -> str | None:
    try:
        text = node_exec(container, ["runc", "--version"], "runc --version")
    except BackendError:
        return None
    match = re.search(r"runc version (\S+)", text)
    return match.group(1) if match else None


def node_conversion(version: str) -> str:
    """The conversion a node's runc release applies (model.runtime); kind counts a release it
    cannot read as runc-old, the linear formula."""
    return runc_conversion(version) or "runc-old"


# -- a node's files, read from this host ------------------------------------------------------------

#: What a runner that may not read another user's /proc/<pid>/root is told.
NEEDS_ROOT = (
    "reading the pods' cgroup files of a kind node from this host (through /proc/<pid>/root, "
    "with no process in the node) needs root or CAP_SYS_PTRACE: run the lab as root, as the kind "
    "backend requires"
)


def node_pid(client: Any, name: str) -> int:
    """The node container's main process as this host sees it (one `docker inspect`), checked to be
    that container's: its /etc/hostname, read through /proc/<pid>/root, is the container's hostname.
    A BackendError says why not (the node is not running, the engine is not on this host, no rights)."""
    container = node_container(client, name)
    state = container.attrs.get("State") or {}
    pid = int(state.get("Pid") or 0)
    if not state.get("Running") or pid <= 0:
        raise BackendError(
            f"kind backend: node container {name} is not running (status {state.get('Status', '?')}); "
            f"start it (docker start {name}) or recreate its cluster (snakemake --cores 1 clean, "
            "then create_clusters)"
        )
    hostname = (container.attrs.get("Config") or {}).get("Hostname") or ""
    try:
        with open(f"/proc/{pid}/root/etc/hostname") as handle:
            seen = handle.read().strip()
    except PermissionError:
        raise BackendError(f"kind backend: node {name} (process {pid}): {NEEDS_ROOT}") from None
    except OSError as exc:
        seen = f"unreadable: {exc.strerror}"
    if seen != hostname:
        raise BackendError(
            f"kind backend: process {pid}, which the Docker engine names as node container {name}'s, is not that "
            f"container on this host (its /etc/hostname: {seen!r}; the container's hostname: {hostname!r}). The "
            "engine must run on this host and in this process namespace (not Docker Desktop, a remote engine, "
            "or a runner inside a container)"
        )
    return pid


class NodeFiles:
    """Files of one node container, read from this host through /proc/<pid>/root.

    The path is the node's own view (its mount namespace: /sys/fs/cgroup as
    kubelet sees it). Nothing runs in the node and the engine is not asked per
    read: `locate` (node_pid: one docker inspect) is called at the first read,
    and once more when that process is gone, as after a restart of the node; a
    handle on /proc/<pid> keeps a later process that reuses the pid from being
    read. Safe to share between threads (the pod sampler and the main thread).
    """

    def __init__(self, node: str, locate: Callable[[], int]):
        self.node = node
        self.pid: int | None = None
        self.located = 0  # how often `locate` was called: once, and once per restart of the node
        self._locate = locate
        self._proc: int | None = None  # O_PATH descriptor of /proc/<pid>
        self._lock = threading.Lock()

    def _attach(self) -> None:
        pid = self._locate()
        self.located += 1
        try:
            fd = os.open(f"/proc/{pid}", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise BackendError(
                f"kind backend: process {pid} of node {self.node} is not visible on this host: {exc.strerror}"
            ) from None
        self._close()
        self._proc, self.pid = fd, pid

    def _read(self, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"a path inside node {self.node} must be absolute: {path!r}")
        fd = os.open("root" + path, os.O_RDONLY | os.O_CLOEXEC, dir_fd=self._proc)
        try:
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
        finally:
            os.close(fd)
        return b"".join(chunks).decode("utf-8", "replace")

    def _alive(self) -> bool:
        try:
            os.stat("stat", dir_fd=self._proc)
        except OSError:
            return False
        return True

    def _stat(self, path: str) -> os.stat_result:
        if not path.startswith("/"):
            raise ValueError(f"a path inside node {self.node} must be absolute: {path!r}")
        return os.stat("root" + path, dir_fd=self._proc)

    def _in_node(self, op: Callable[[str], Any], path: str) -> Any:
        with self._lock:
            if self._proc is None:
                self._attach()
            try:
                return op(path)
            except OSError:
                if self._alive():
                    raise  # the node runs: it is the file that is missing
            self._attach()  # the node's process is gone: a restarted node has a new one (asked once)
            return op(path)

    def read(self, path: str) -> str:
        """The content of `path`, an absolute path inside the node. FileNotFoundError (or another
        OSError) when the node runs but the file cannot be read; a BackendError when the node
        itself is gone."""
        return self._in_node(self._read, path)

    def exists(self, path: str) -> bool:
        """Whether `path` (a file or directory) exists in the node."""
        try:
            self._in_node(self._stat, path)
        except FileNotFoundError:
            return False
        return True

    def read_optional(self, path: str) -> str | None:
        """As read(); None when the file does not exist in the node."""
        try:
            return self.read(path)
        except FileNotFoundError:
            return None

    def _close(self) -> None:
        if self._proc is not None:
            os.close(self._proc)
            self._proc = None

    def close(self) -> None:
        with self._lock:
            self._close()
