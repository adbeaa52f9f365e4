"""kind's node containers: reach them through the Docker engine, run commands in them, and
read the kubelet's cgroup hierarchy there.

A kind node is a Docker container on this host; inside it the whole kubelet
hierarchy is visible, so the node, QoS, pod and pause levels of our pods are
found (DISCOVER) and read (READ) by a shell in the node container, and the
worker's runc says which conversion of shares to weights it applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from throttlelab.host.docker_engine import EngineUser, connect
from throttlelab.model import design
from throttlelab.model.placement import Node
from throttlelab.model.runtime import runc_conversion
from throttlelab.backends.base import BackendError
from throttlelab.backends.kube.backend import parse_settings

#: How the engine's error messages name kind (host.docker_engine).
KIND_ENGINE_USER = EngineUser("kind backend", "kind drives its node containers through the engine",
                              "kind runs its nodes as Docker containers")


def docker_client() -> Any:
    """A docker SDK client that has answered a ping; else a BackendError saying how to start the engine."""
    return connect(timeout_s=30, user=KIND_ENGINE_USER)


def node_container(client: Any, name: str) -> Any:
    import docker.errors

    try:
        return client.containers.get(name)
    except docker.errors.NotFound:
        raise BackendError(f"kind backend: the node container {name!r} does not exist; is its cluster created? "
                           "(snakemake --cores 1 --config backend=kind create_clusters)") from None
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
        raise BackendError(f"{what}: exit {code} in {container.name}: {(stderr or b'').decode(errors='replace')[-300:]!r}")
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
DISCOVER = r"""
root=${CGROUP_ROOT:-/sys/fs/cgroup}
if [ -f "$root/cgroup.controllers" ]; then base=$root; echo "version 2"
else base=$root/cpu,cpuacct; [ -d "$base" ] || base=$root/cpu; echo "version 1"; fi
for uid in "$@"; do
  u=$(echo "$uid" | tr - _)
  d=$(find "$base" -maxdepth 6 -type d \( -name "*pod$u.slice" -o -name "pod$uid" \) -print 2>/dev/null | head -n 1)
  echo "pod $uid $d"
  if [ -n "$d" ]; then for c in "$d"/*/; do [ -d "$c" ] && echo "child $uid ${c%/}"; done; fi
done
"""
#: `sh -c READ read FILE...`: each file's content after a \036 line naming it; \025 if unreadable.
READ = r"""
for f in "$@"; do printf '\036%s\n' "$f"; cat "$f" 2>/dev/null || printf '\025\n'; done
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


def parse_read(text: str) -> dict[str, str | None]:
    """READ's output -> {path: content or None when it could not be read}."""
    out: dict[str, str | None] = {}
    for block in text.split("\x1e")[1:]:
        path, _, content = block.partition("\n")
        out[path] = None if content.startswith("\x15") else content
    return out


def level_dirs(node: Node, layout: NodeLayout, uids: dict[str, str], ids: dict[tuple[str, str], str | None]) -> dict[str, str]:
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
