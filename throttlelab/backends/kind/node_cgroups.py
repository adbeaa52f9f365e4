"""A node's cgroups as kubelet and runc lay them out, seen by a backend that reaches the node's files:
kind (the worker container's, through its /proc/<pid>/root: platform/kind_nodes.py) and the real node
(this host's own).

Each level's directory (node, QoS, pod, pause, container) is found once, by DISCOVER run in the node,
at the first readback or sample; from then on its files are read where the backend reads them, with
no process started in the node or the pod. Both backends give a deployment this `NodeAccess`, each
with its own way to run DISCOVER and to read a file.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from throttlelab.backends.base import BackendError
from throttlelab.platform.kube_client import container_id
from throttlelab.backends.kube.pod_readback import parse_cpu_stat, parse_settings
from throttlelab.backends.kube.run_pods import NodeAccess, RunPods
from throttlelab.model import node_levels as design
from throttlelab.model.placement import Node

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


#: Runs DISCOVER in a node for these pod uids: (node, uids, what it is for) -> its output.
Discover = Callable[[str, list[str], str], str]


class NodeFileReader(Protocol):
    """How a node's files are read (platform/kind_nodes.NodeFiles; the real node's are this host's)."""

    def read(self, path: str) -> str: ...

    def read_optional(self, path: str) -> str | None: ...

    def exists(self, path: str) -> bool: ...

    def close(self) -> None: ...


class NodeCgroups(NodeAccess):
    """Every level of the run's pods, found in the worker and read from its files; the counters
    too. Safe to share between threads (the pod sampler and the main thread)."""

    strict = True  # every level is in the node: one we cannot find is an error, not "unreadable"

    def __init__(self, backend: str, worker: str, files: NodeFileReader, discover: Discover):
        self.backend, self.worker = backend, worker
        self.files = files
        self.discover = discover
        self._layout: NodeLayout | None = None  # where DISCOVER found our pods in the worker (once)
        self._dirs: dict[str, str] = {}  # design path -> directory in the worker, made from _layout
        self._finding = threading.Lock()

    @property
    def cgroup_version(self) -> int | None:
        return self._layout.version if self._layout else None

    def _find_levels(self, pods: RunPods) -> tuple[NodeLayout, dict[str, str]]:
        """Where our pods are in the worker (their cgroup version and directories), and design path ->
        directory inside the worker for every level of them (node, QoS, pod, pause, container): found
        by one run of DISCOVER at the first readback or sample."""
        with self._finding:
            if self._layout is None:
                uids = {name: obj["metadata"]["uid"] for name, obj in pods.live.items()}
                ids = {
                    (p.name, c.name): container_id(pods.live[p.name], c.name)
                    for p in pods.node.pods
                    for c in p.containers
                }
                layout = parse_discover(self.discover(self.worker, list(uids.values()), "find the pods' cgroups"))
                missing = [p for p, uid in uids.items() if uid not in layout.pod_dirs]
                if missing:
                    raise BackendError(
                        f"{self.backend} backend: no cgroup of pod(s) {', '.join(missing)} in node {self.worker}"
                    )
                self._dirs = level_dirs(pods.node, layout, uids, ids)
                self._layout = layout
            return self._layout, self._dirs

    def cgroup_driver(self) -> str | None:
        # kubelet's systemd driver makes slices (kubepods-burstable-pod<uid>.slice), cgroupfs plain folders
        if self._layout is None:
            return None
        return "systemd" if any(d.endswith(".slice") for d in self._layout.pod_dirs.values()) else "cgroupfs"

    def containers_gone(self, pods: RunPods, pod: dict[str, Any]) -> bool:
        """Whether the pod's node holds no cgroup of the deleted pod any more (kubelet removes it once
        its containers have stopped). A pod of the worker whose directory is known: looked at through
        the files; any other (the load generator, on kind's control-plane): searched in its node."""
        uid = pod["metadata"].get("uid") or ""
        node = (pod.get("spec") or {}).get("nodeName") or self.worker
        known = self._layout.pod_dirs.get(uid) if self._layout else None
        if known and node == self.worker:
            try:
                return not self.files.exists(known)
            except OSError as exc:
                raise BackendError(
                    f"{self.backend} backend: cannot look for {known} in node {node}: {exc.strerror}"
                ) from None
        layout = parse_discover(
            self.discover(node, [uid], f"look for the cgroup of deleted pod {pod['metadata'].get('name')}")
        )
        return uid not in layout.pod_dirs

    def _read_file(self, path: str) -> str | None:
        try:
            return self.files.read_optional(path)
        except OSError as exc:
            raise BackendError(
                f"{self.backend} backend: cannot read {path} in node {self.worker}: {exc.strerror}"
            ) from None

    def upper_levels(self, pods: RunPods, containers: set[str]) -> dict[str, dict[str, Any]]:
        layout, dirs = self._find_levels(pods)
        upper = {path: d for path, d in dirs.items() if path not in containers}
        files = {path: self._read_file(path) for d in upper.values() for path in level_files(d, layout.version)}
        return {path: settings_of(d, files, layout.version) for path, d in upper.items()}

    def counters(self, pods: RunPods, pod: str, container: str | None) -> dict[str, Any]:
        """The counters of one level, read through the node's files: no process is started in the
        node or in the pod, and no engine is asked."""
        p = pods.node.pod(pod)
        if container:
            p.container(container)  # KeyError names what is missing
            return self._stat_at(pods, design.container_path(pods.node, p, container), pod, container)
        return self._stat_at(pods, design.pod_path(pods.node, p), pod, None)

    def _stat_at(self, pods: RunPods, path: str, pod: str, container: str | None) -> dict[str, Any]:
        what = f"container {pod}/{container}" if container else f"pod {pod}"
        layout, dirs = self._find_levels(pods)
        directory = dirs.get(path)
        if directory is None:
            raise BackendError(
                f"{self.backend} backend: the cgroup of {what} was not found in node {self.worker} "
                f"(its pod's directories: {sorted(dirs)})"
            )
        try:
            texts = [self.files.read(f) for f in stat_files(directory, layout.version)]
        except FileNotFoundError:
            raise BackendError(self._gone(pods, what, pod, directory)) from None
        except OSError as exc:
            raise BackendError(
                f"{self.backend} backend: cannot read the counters of {what} in node {self.worker} "
                f"({directory}): {exc.strerror}"
            ) from None
        return parse_cpu_stat(texts[0], texts[1] if len(texts) > 1 else None)

    def _gone(self, pods: RunPods, what: str, pod: str, directory: str) -> str:
        s = pods.settings
        return (
            f"{self.backend} backend: the cgroup of {what} is gone from node {self.worker} ({directory}): kubelet "
            "and runc remove it when the container ends or its pod is deleted, so its counters can be read only "
            f"while it runs; see what happened: kubectl --kubeconfig {s.kubeconfig} --context "
            f"{s.context} -n {pods.ns} describe pod {pods.pod_name(pod)}"
        )

    def close(self) -> None:
        self.files.close()
