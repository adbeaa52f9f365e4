"""kind's node containers: reach them through the Docker engine, run commands in them, and
read the kubelet's cgroup hierarchy there.

A kind node is a Docker container on this host; inside it the whole kubelet
hierarchy is visible. Each pod's directories (node, QoS, pod, pause and
container levels) are found once, by a shell in the node container (DISCOVER:
one `docker exec` per deployment); from then on their files are read from this
host through the node's `/proc/<pid>/root` (NodeFiles): the node's own mount
namespace, its /sys/fs/cgroup included, with no process started in the node and
no engine call, a few microseconds a read instead of 50-150 ms of `docker exec`
on the CPUs being measured. The worker's runc says which conversion of shares
to weights it applies.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable

from throttlelab.model import node_levels as design
from throttlelab.model.placement import Node
from throttlelab.model.runtime import runc_conversion
from throttlelab.backends.base import BackendError
from throttlelab.backends.kube.pod_readback import parse_settings


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


# -- the node-side cgroup readback ----------------------------------------------------------------

#: Run in the node container (`sh -c DISCOVER discover UID...`): where kubelet put each pod, and the
#: directories of its containers (the sandbox's included). CGROUP_ROOT is for the tests' fixture trees.
#: On v1 the cpu controller's hierarchy is cpu,cpuacct where the two are mounted together, else cpu: a
#: host with them apart (this machine) still shows the node an empty cpu,cpuacct folder, so the one
#: that holds cpu.shares is taken.
DISCOVER = r"""
root=${CGROUP_ROOT:-/sys/fs/cgroup}
if [ -f "$root/cgroup.controllers" ]; then base=$root; echo "version 2"
else base=$root/cpu,cpuacct; [ -f "$base/cpu.shares" ] || base=$root/cpu; echo "version 1"; fi
for uid in "$@"; do
  u=$(echo "$uid" | tr - _)
  d=$(find "$base" -maxdepth 6 -type d \( -name "*pod$u.slice" -o -name "pod$uid" \) -print 2>/dev/null | head -n 1)
  echo "pod $uid $d"
  if [ -n "$d" ]; then for c in "$d"/*/; do [ -d "$c" ] && echo "child $uid ${c%/}"; done; fi
done
"""
V2_FILES = ("cpu.max", "cpu.weight", "cpuset.cpus.effective")
V1_FILES = ("cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.shares", "cpuset.effective_cpus")


@dataclass(frozen=True)
class NodeLayout:
    """Where kubelet put one of our pods, inside the node container."""

    version: int
    pod_dirs: dict[str, str]  # pod uid -> dir
    children: dict[str, list[str]]  # pod uid -> dirs of its containers (the sandbox included)


def parse_discover(text: str) -> NodeLayout:
    version, pods, children = 2, {}, {}
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if parts[0] == "version":
            version = int(parts[1])
        elif parts[0] == "pod" and len(parts) == 3 and parts[2]:
            pods[parts[1]] = parts[2]
        elif parts[0] == "child" and len(parts) == 3:
            children.setdefault(parts[1], []).append(parts[2])
    return NodeLayout(version, pods, children)


def level_dirs(
    node: Node, layout: NodeLayout, uids: dict[str, str], ids: dict[tuple[str, str], str | None]
) -> dict[str, str]:
    """design path -> directory in the node, for every level we can place; uids: pod -> uid,
    ids: (pod, container) -> runtime container id."""
    dirs: dict[str, str] = {}
    for pod in node.pods:
        uid = uids.get(pod.name)
        pod_dir = layout.pod_dirs.get(uid or "")
        if not pod_dir:
            continue
        path = design.pod_path(node, pod)
        dirs[path] = pod_dir
        parent = pod_dir.rsplit("/", 1)[0]
        if pod.qos == "guaranteed":
            dirs[node.name] = parent
        else:
            dirs[f"{node.name}/{pod.qos}"] = parent
            dirs[node.name] = parent.rsplit("/", 1)[0]
        app = {ids.get((pod.name, c.name)) for c in pod.containers} - {None}
        for c in pod.containers:
            cid = ids.get((pod.name, c.name))
            match = [d for d in layout.children.get(uid, []) if cid and cid in d.rsplit("/", 1)[-1]]
            if match:
                dirs[design.container_path(node, pod, c.name)] = match[0]
        sandbox = [d for d in layout.children.get(uid, []) if not any(i in d.rsplit("/", 1)[-1] for i in app)]
        if len(sandbox) == 1:
            dirs[f"{path}/pause"] = sandbox[0]
    return dirs


_V1_CPU_CONTROLLER = re.compile(r"/(cpu,cpuacct|cpuacct,cpu|cpu|cpuacct)(?=/|$)")


def v1_cpuset_dir(directory: str) -> str:
    """On cgroup v1 the cpuset is another controller's hierarchy: the same path under
    .../cpuset instead of .../cpu,cpuacct (DISCOVER finds the cpu controller's directory)."""
    return _V1_CPU_CONTROLLER.sub("/cpuset", directory, count=1)


def v1_cpuacct_dir(directory: str) -> str:
    """On cgroup v1, cpuacct.usage is the cpuacct controller's: the same directory when it is
    mounted with cpu (cpu,cpuacct), else the same path under .../cpuacct."""
    match = _V1_CPU_CONTROLLER.search(directory)
    if match and match.group(1) == "cpu":
        return directory[: match.start()] + "/cpuacct" + directory[match.end() :]
    return directory


def stat_files(directory: str, version: int) -> list[str]:
    """The files of one level's counters: cpu.stat, and on v1 cpuacct.usage (the usage)."""
    return [f"{directory}/cpu.stat"] + ([f"{v1_cpuacct_dir(directory)}/cpuacct.usage"] if version == 1 else [])


def level_files(directory: str, version: int) -> list[str]:
    """Every file to read for one level: on v1, cpuset.effective_cpus from the cpuset controller."""
    if version == 2:
        return [f"{directory}/{name}" for name in V2_FILES]
    return [f"{v1_cpuset_dir(directory) if name.startswith('cpuset.') else directory}/{name}" for name in V1_FILES]


def settings_of(directory: str, files: dict[str, str | None], version: int) -> dict[str, Any]:
    names = V2_FILES if version == 2 else V1_FILES
    texts = {name: files.get(path) for name, path in zip(names, level_files(directory, version))}
    out = parse_settings(texts)
    cpus = texts.get("cpuset.cpus.effective") or texts.get("cpuset.effective_cpus")
    out["cpus"] = cpus.strip() if cpus else None
    out["cgroup"] = directory
    return out


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
