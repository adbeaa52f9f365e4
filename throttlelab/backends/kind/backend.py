"""The `kind` backend: the lab as published (SPEC §4), two local kind clusters.

* `new`: kind v0.33.0, node image kindest/node v1.34.11 (runc 1.4.3, containerd
  2.3.4): the runc >= 1.3.2 (quadratic) conversion of shares to weights;
* `old`: kind v0.30.0, node image kindest/node v1.34.0 (runc 1.3.0, containerd
  2.1.3): the linear conversion; E10 and every variant that asks for runc-old
  run here.

Each cluster is a control-plane and a worker node (config/kind/<role>.yaml,
node images pinned by digest). Experiment pods run on the worker
(nodeSelector), the load generator on the control-plane (toleration), exactly
as the pods of the kubernetes backend, whose machinery this module extends
with what only kind gives: the nodes are Docker containers on this host, so

* node-level CPU pinning (E5, E8) is `docker update --cpuset-cpus` on the node
  containers through the docker SDK, ALWAYS restored: on exit, on failure, on
  interrupt (finally), by the guardian process when the runner is SIGKILLed,
  and by the sweep at the next start (a state file per pinned node);
* the node, QoS, pod and pause cgroup levels are read inside the node container
  (docker exec), where the whole kubelet hierarchy is visible.

Cluster lifecycle for the Snakemake rules (rules/clusters.smk):

    python -m throttlelab.backends.kind.backend create --role new --settings JSON --kubeconfig K --stamp S
    python -m throttlelab.backends.kind.backend load --role new --settings JSON --variant go124mod --image-stamp I --stamp S
    python -m throttlelab.backends.kind.backend delete --settings JSON
    python -m throttlelab.backends.kind.backend build-podgate --out results/build/podgate/podgate
    python -m throttlelab.backends.kind.backend build-image --variant go124mod --base-stamp B --podgate P --out S
    python -m throttlelab.backends.kind.backend preflight --settings JSON --need kind,docker
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from throttlelab.model import design
from throttlelab.model.placement import LoadPlacement, Node, format_cpuset, parse_cpuset
from throttlelab.backends.base import BackendError, Capabilities
from throttlelab.backends.kube.client import KubeClient, KubeError, container_id
from throttlelab.backends.kube.backend import KubeBackend, KubeDeployment, KubeSettings, parse_cpu_stat, parse_settings, pid_alive

PROJECT = Path(__file__).resolve().parents[3]
KIND_CONFIG_DIR = PROJECT / "config" / "kind"
PODGATE_SOURCE = PROJECT / "workload" / "podgate"

#: SPEC §4's pinned node images and the kind release each is built for.
NODE_IMAGES = {
    "new": "kindest/node:v1.34.11@sha256:44e222ee2132dab25ff87301682f89eb82c7880ea3a1bf543bfe9708fd08d67d",
    "old": "kindest/node:v1.34.0@sha256:7416a61b42b1662ca6ca89f02028ac133a309a2a30ba309614e8ec94d976dc5a",
}
RUNTIME_OF_ROLE = {"new": "runc-new", "old": "runc-old"}
ROLE_OF_RUNTIME = {v: k for k, v in RUNTIME_OF_ROLE.items()}
#: runc >= 1.3.2 converts shares to weights with the quadratic formula (runc PR 4785).
RUNC_QUADRATIC_SINCE = (1, 3, 2)
IMAGE_REPOSITORY = "cpulab-kind"
PIN_STATE_DIR = Path(tempfile.gettempdir()) / "throttlelab-kind-pins"


def image_tag(variant: str) -> str:
    """The image in the clusters: the docker backend's cpulab:<variant> plus /podgate."""
    return f"{IMAGE_REPOSITORY}:{variant}"


# -- the clusters -------------------------------------------------------------------------------

@dataclass(frozen=True)
class KindCluster:
    """One of the two clusters; every path is inside the project's results/ (never ~/.kube)."""

    role: str
    name: str
    binary: str
    release: str
    workdir: Path

    @property
    def config(self) -> Path:
        return KIND_CONFIG_DIR / f"{self.role}.yaml"

    @property
    def directory(self) -> Path:
        return self.workdir / "results" / "kind" / "clusters" / self.role

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def stamp(self) -> Path:
        return self.directory / "cluster.json"

    @property
    def context(self) -> str:
        return f"kind-{self.name}"

    @property
    def worker(self) -> str:
        return f"{self.name}-worker"

    @property
    def control_plane(self) -> str:
        return f"{self.name}-control-plane"

    @property
    def runtime(self) -> str:
        return RUNTIME_OF_ROLE[self.role]

    def image_stamp(self, variant: str) -> Path:
        return self.directory / "images" / f"{variant}.json"


def clusters_from_settings(kind_cfg: dict[str, Any], workdir: Path) -> dict[str, KindCluster]:
    """config.yaml's `kind` section (schema defaults applied) -> the two clusters."""
    return {
        "new": KindCluster("new", kind_cfg["new_cluster"], kind_cfg["binary"], kind_cfg["release"], workdir),
        "old": KindCluster("old", kind_cfg["old_cluster"], kind_cfg["old_binary"], kind_cfg["old_release"], workdir),
    }


# -- the kind binaries ---------------------------------------------------------------------------

def find_binary(binary: str) -> str | None:
    if "/" in binary:
        path = Path(binary).expanduser()
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(binary)


def kind_version(path: str) -> str:
    """`kind version` -> "v0.33.0" (its output: "kind v0.33.0 go1.24.2 linux/amd64")."""
    try:
        out = subprocess.run([path, "version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BackendError(f"kind binary {path} does not run: {exc}") from None
    match = re.search(r"\bv\d+\.\d+\.\d+\S*", out.stdout)
    if out.returncode != 0 or not match:
        raise BackendError(f"kind binary {path}: `kind version` said {out.stdout.strip() or out.stderr.strip()!r}")
    return match.group(0)


def check_kind(cluster: KindCluster) -> str:
    """The path of the cluster's kind binary, of the right release; a BackendError says what to install."""
    key = "kind.binary" if cluster.role == "new" else "kind.old_binary"
    path = find_binary(cluster.binary)
    if path is None:
        raise BackendError(
            f"kind backend: the kind binary for the {cluster.role} cluster is missing: {cluster.binary!r} "
            f"{'is not on PATH' if '/' not in cluster.binary else 'does not exist or is not executable'}. "
            f"Install kind {cluster.release} (https://kind.sigs.k8s.io/docs/user/quick-start/#installation) "
            f"and set {key} to its path"
        )
    version = kind_version(path)
    if version != cluster.release:
        raise BackendError(
            f"kind backend: {path} is kind {version}, but the {cluster.role} cluster's node image "
            f"{NODE_IMAGES[cluster.role].split('@')[0]} is built for kind {cluster.release}; "
            f"install that release and set {key} to it"
        )
    return path


# -- Docker: the node containers ------------------------------------------------------------------

def docker_client() -> Any:
    """A docker SDK client that has answered a ping; else a BackendError saying how to start the engine."""
    try:
        import docker
        import docker.errors
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise BackendError(f"the docker Python SDK is not installed ({exc})") from None
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except docker.errors.DockerException as exc:
        text = str(exc)
        if "Permission denied" in text:
            raise BackendError(f"kind backend: no permission on the Docker socket {where}; run as root or join the "
                               "docker group") from None
        raise BackendError(
            f"kind backend: no Docker engine answers at {where} ({_short(text)}); kind runs its nodes as Docker "
            "containers: start the engine (systemctl start docker, or dockerd &) or set DOCKER_HOST"
        ) from None
    return client


def _short(text: str) -> str:
    match = re.search(r"(Connection refused|No such file or directory|Permission denied|timed out)", text)
    return match.group(1) if match else text[:200]


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


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def runc_conversion(version: str) -> str:
    """Which conversion a runc release applies: runc >= 1.3.2 quadratic (runc-new), older linear."""
    return "runc-new" if version_tuple(version) >= RUNC_QUADRATIC_SINCE else "runc-old"


# -- cpuset pinning, always restored -----------------------------------------------------------------

@dataclass(frozen=True)
class Pin:
    """One node container pinned to `cpus`; `restore_to` is what it had (or every CPU it could use)."""

    container: str
    cpus: str
    restore_to: str


def _state_file(container: str) -> Path:
    return PIN_STATE_DIR / f"{container}.json"


def current_cpuset(container: Any) -> str:
    container.reload()
    return container.attrs.get("HostConfig", {}).get("CpusetCpus") or ""


def usable_cpus(client: Any, container: Any) -> str:
    """Every CPU the node container may use before pinning: its cgroup's effective cpuset, read
    inside it; a container without `cat` falls back to every CPU of the engine."""
    for path in ("/sys/fs/cgroup/cpuset.cpus.effective", "/sys/fs/cgroup/cpuset/cpuset.effective_cpus"):
        try:
            text = node_exec(container, ["cat", path], f"read {path}").strip()
        except BackendError:
            continue
        if text:
            return text
    ncpu = int(client.info().get("NCPU", 0))
    if ncpu < 1:
        raise BackendError(f"kind backend: cannot tell which CPUs node {container.name} may use")
    return format_cpuset(list(range(ncpu)))


def set_cpuset(container: Any, cpus: str) -> None:
    import docker.errors

    try:
        container.update(cpuset_cpus=cpus)
    except docker.errors.APIError as exc:
        raise BackendError(f"kind backend: docker update --cpuset-cpus {cpus} {container.name} failed: {exc}") from None
    got = current_cpuset(container)
    if parse_cpuset(got) != parse_cpuset(cpus):
        raise BackendError(f"kind backend: node {container.name} has cpuset {got!r} after setting {cpus!r}")


def plan_pins(client: Any, wanted: dict[str, str]) -> list[Pin]:
    """Read what each node container has now, before anything changes."""
    pins = []
    for name, cpus in wanted.items():
        container = node_container(client, name)
        usable = usable_cpus(client, container)
        if not set(parse_cpuset(cpus)) <= set(parse_cpuset(usable)):
            raise BackendError(f"kind backend: cpuset {cpus} for node {name} is not available: it can use {usable}; "
                               "choose CPUs from that set in the profile")
        # Docker cannot set an empty cpuset back ("" means "leave as is"), so "no pinning" is restored as every CPU.
        pins.append(Pin(name, cpus, current_cpuset(container) or usable))
    return pins


def apply_pins(client: Any, pins: list[Pin], pid: int) -> None:
    PIN_STATE_DIR.mkdir(parents=True, exist_ok=True)
    for pin in pins:
        # the state file first: a runner killed right after `docker update` still gets its node restored
        _state_file(pin.container).write_text(json.dumps({"pid": pid, "restore_to": pin.restore_to, "cpus": pin.cpus}))
        set_cpuset(node_container(client, pin.container), pin.cpus)


def restore_pins(client: Any, pins: list[dict[str, str]] | list[Pin]) -> list[str]:
    """Set every pinned node back; returns what was restored. Idempotent."""
    import docker.errors

    done = []
    problems = []
    for pin in pins:
        name, restore_to = (pin.container, pin.restore_to) if isinstance(pin, Pin) else (pin["container"], pin["restore_to"])
        try:
            container = client.containers.get(name)
        except docker.errors.NotFound:
            _state_file(name).unlink(missing_ok=True)  # the cluster is gone: nothing to restore
            continue
        try:
            if parse_cpuset(current_cpuset(container) or restore_to) != parse_cpuset(restore_to):
                set_cpuset(container, restore_to)
                done.append(f"{name} -> {restore_to}")
            _state_file(name).unlink(missing_ok=True)
        except (BackendError, docker.errors.APIError) as exc:
            problems.append(f"{name}: {exc}")
    if problems:
        raise BackendError("kind backend: could not restore node cpusets: " + "; ".join(problems))
    return done


def sweep_pins(client: Any, alive: Callable[[int], bool] = pid_alive) -> list[str]:
    """Restore nodes a dead runner left pinned (its state file names its pid)."""
    if not PIN_STATE_DIR.is_dir():
        return []
    stale = []
    for path in sorted(PIN_STATE_DIR.glob("*.json")):
        try:
            state = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not alive(int(state.get("pid", 0))):
            stale.append({"container": path.stem, "restore_to": state["restore_to"]})
    return restore_pins(client, stale)


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


def settings_of(directory: str, files: dict[str, str | None], version: int) -> dict[str, Any]:
    names = V2_FILES if version == 2 else V1_FILES
    texts = {name: files.get(f"{directory}/{name}") for name in names}
    out = parse_settings(texts)
    cpus = texts.get("cpuset.cpus.effective") or texts.get("cpuset.effective_cpus")
    out["cpus"] = cpus.strip() if cpus else None
    out["cgroup"] = directory
    return out


# -- the deployment and the backend ----------------------------------------------------------------------

class KindDeployment(KubeDeployment):
    strict_upper = True  # every level is in the node container: one we cannot find is an error, not "unreadable"

    def __init__(self, backend: "KindBackend", node: Node, load: LoadPlacement | None, cluster: KindCluster):
        super().__init__(backend, node, load, backend.settings_for(cluster), backend.client_for(cluster))
        self.cluster = cluster
        self.docker = backend.docker
        self.pins: list[Pin] = []
        wanted = {}
        if node.cpus:
            wanted[cluster.worker] = node.cpus
        if load and load.cpus:
            wanted[cluster.control_plane] = load.cpus
        self.wanted = wanted

    def _check_placement(self) -> None:
        """The worker's runc must convert shares the way this variant's runtime says."""
        version = runc_version(node_container(self.docker, self.cluster.worker))
        if version and runc_conversion(version) != self.runtime:
            raise BackendError(
                f"kind backend: the {self.cluster.role} cluster's worker runs runc {version}, which converts shares "
                f"with the {runc_conversion(version)} formula, but this variant expects {self.runtime}; "
                f"the node image must be {NODE_IMAGES[self.cluster.role].split('@')[0]} (config/kind/{self.cluster.role}.yaml)"
            )

    def _guardian_description(self) -> dict[str, Any]:
        self.pins = plan_pins(self.docker, self.wanted) if self.wanted else []
        desc = super()._guardian_description()
        desc["pins"] = [{"container": p.container, "restore_to": p.restore_to} for p in self.pins]
        return desc

    def _prepare_nodes(self) -> None:
        if self.pins:
            apply_pins(self.docker, self.pins, os.getpid())
            self.backend.progress("pinned " + ", ".join(f"{p.container} to CPUs {p.cpus}" for p in self.pins))

    def _restore_nodes(self) -> None:
        if self.pins:
            done = restore_pins(self.docker, self.pins)
            if done:
                self.backend.progress("restored " + ", ".join(done))

    def _read_upper_levels(self) -> dict[str, dict[str, Any]]:
        worker = node_container(self.docker, self.cluster.worker)
        uids = {name: obj["metadata"]["uid"] for name, obj in self.live.items()}
        ids = {(p.name, c.name): container_id(self.live[p.name], c.name) for p in self.node.pods for c in p.containers}
        layout = parse_discover(node_exec(worker, ["sh", "-c", DISCOVER, "discover", *uids.values()],
                                          "find the pods' cgroups"))
        self.cgroup_version = layout.version
        missing = [p for p, uid in uids.items() if uid not in layout.pod_dirs]
        if missing:
            raise BackendError(f"kind backend: no cgroup of pod(s) {', '.join(missing)} in node {worker.name}")
        containers = {lv.design.path for lv in self.levels if lv.design.level == "container"}
        dirs = {path: d for path, d in level_dirs(self.node, layout, uids, ids).items() if path not in containers}
        files = V2_FILES if layout.version == 2 else V1_FILES
        paths = [f"{d}/{f}" for d in dirs.values() for f in files]
        read = parse_read(node_exec(worker, ["sh", "-c", READ, "read", *paths], "read the cgroup files"))
        return {path: settings_of(d, read, layout.version) for path, d in dirs.items()}

    def _stat_pod(self, pod: str) -> dict[str, Any]:
        worker = node_container(self.docker, self.cluster.worker)
        uid = self.live[pod]["metadata"]["uid"]
        layout = parse_discover(node_exec(worker, ["sh", "-c", DISCOVER, "discover", uid], "find the pod's cgroup"))
        pod_dir = layout.pod_dirs.get(uid)
        if not pod_dir:
            raise BackendError(f"kind backend: pod {pod} has no cgroup in node {worker.name}")
        files = [f"{pod_dir}/cpu.stat"] + ([f"{pod_dir}/cpuacct.usage"] if layout.version == 1 else [])
        read = parse_read(node_exec(worker, ["sh", "-c", READ, "read", *files], "read cpu.stat"))
        return parse_cpu_stat(read.get(files[0]) or "", read.get(files[1]) if len(files) > 1 else None)


class KindBackend(KubeBackend):
    name = "kind"
    unreadable_reason = "not found in the node container"

    def __init__(self, clusters: dict[str, KindCluster], runtime: str = "runc-new", namespace: str = "default",
                 pod_start_timeout_s: float = 120.0, progress: Callable[[str], None] = lambda message: None):
        self.clusters = clusters
        self.namespace = namespace
        self.pod_start_timeout_s = pod_start_timeout_s
        self.used: list[KindCluster] = []
        self._clients: dict[str, KubeClient] = {}
        self._docker: Any = None
        super().__init__(self.settings_for(clusters[ROLE_OF_RUNTIME[runtime]]), runtime, progress)

    @property
    def docker(self) -> Any:
        if self._docker is None:
            self._docker = docker_client()
        return self._docker

    def cluster_for(self, runtime: str) -> KindCluster:
        return self.clusters[ROLE_OF_RUNTIME[runtime]]

    def settings_for(self, cluster: KindCluster) -> KubeSettings:
        return KubeSettings(
            kubeconfig=cluster.kubeconfig,
            context=cluster.context,
            worker_node=cluster.worker,
            load_node=cluster.control_plane,
            namespace=self.namespace,
            images={v: image_tag(v) for v in ("go124mod", "go125mod")},
            pull_policy="Never",  # images are loaded into the nodes (kind load); nothing is pulled
            pod_start_timeout_s=self.pod_start_timeout_s,
            tolerate_control_plane=True,
        )

    def client_for(self, cluster: KindCluster) -> KubeClient:
        if cluster.role not in self._clients:
            self._clients[cluster.role] = KubeClient(cluster.kubeconfig, cluster.context)
        return self._clients[cluster.role]

    @property
    def client(self) -> KubeClient:
        return self.client_for(self.cluster_for(self.runtime))

    def preflight(self) -> None:
        docker = self.docker  # an unreachable engine: a BackendError naming it
        ready = [c for c in self.clusters.values() if c.kubeconfig.is_file()]
        if not ready:
            raise BackendError("kind backend: no cluster exists yet (no kubeconfig under results/kind/clusters/); "
                               "create them: snakemake --cores 1 --config backend=kind create_clusters")
        for cluster in ready:
            kc = self.client_for(cluster)
            kc.version()
            names = [n["metadata"]["name"] for n in kc.nodes()]
            for node in (cluster.worker, cluster.control_plane):
                if node not in names:
                    raise BackendError(f"kind backend: cluster {cluster.name} has no node {node!r} (its nodes: "
                                       f"{', '.join(names)}); delete and recreate it: snakemake clean")
                node_container(docker, node)

    def untestable(self, node: Node, load: LoadPlacement | None) -> str | None:
        return None  # kind can pin CPUs and has both runtimes

    def capabilities(self) -> Capabilities:
        info = self.docker.info()
        return Capabilities(
            cpus=int(info.get("NCPU", 0)),
            cgroup_version=int(info["CgroupVersion"]) if str(info.get("CgroupVersion", "")).isdigit() else None,
            can_pin_cpus=True,
            has_pause_level=True,
            runtime=self.runtime,
            notes=(
                "kind backend: node cpusets set with docker update on the node containers, restored on exit",
                "pod, QoS and node levels read inside the node container; container levels by exec in the container",
            ),
        )

    def _cluster_facts(self, cluster: KindCluster) -> dict[str, Any]:
        facts: dict[str, Any] = {"name": cluster.name, "kind_release": cluster.release}
        if cluster.stamp.is_file():
            facts.update(json.loads(cluster.stamp.read_text()))
        worker = self.client_for(cluster).node(cluster.worker)
        info = worker["status"].get("nodeInfo") or {}
        facts.update(
            kubelet=info.get("kubeletVersion"),
            container_runtime=info.get("containerRuntimeVersion"),
            kernel=info.get("kernelVersion"),
            runc=runc_version(node_container(self.docker, cluster.worker)),
            allocatable_cpu=worker["status"]["allocatable"]["cpu"],
        )
        return facts

    def environment(self) -> dict[str, Any]:
        engine = self.docker.version()
        used = self.used or [self.cluster_for(self.runtime)]
        clusters = {c.role: self._cluster_facts(c) for c in used}
        last = clusters[used[-1].role]
        return {
            "backend": self.name,
            "kernel": last.get("kernel"),
            "machine": engine.get("Arch"),
            "cpu_count": int(self.docker.info().get("NCPU", 0)),
            "docker_engine": engine.get("Version"),
            "kubelet": last.get("kubelet"),
            "container_runtime": last.get("container_runtime"),
            "runc": last.get("runc"),
            "runtime_conversion": used[-1].runtime,
            "clusters": clusters,
            "namespace": self.namespace,
            "images": {v: image_tag(v) for v in ("go124mod", "go125mod")},
        }

    def sweep(self, kc: KubeClient, namespace: str) -> list[str]:
        restored = sweep_pins(self.docker)
        if restored:
            self.progress("restored node cpusets a dead run left pinned: " + ", ".join(restored))
        return super().sweep(kc, namespace)

    def deploy(self, node: Node, load: LoadPlacement | None = None) -> KindDeployment:
        cluster = self.cluster_for(node.runtime or self.runtime)
        if not cluster.kubeconfig.is_file():
            raise BackendError(f"kind backend: the {cluster.role} cluster ({cluster.name}) has no kubeconfig at "
                               f"{cluster.kubeconfig}; create it: snakemake --cores 1 --config backend=kind create_clusters")
        if cluster not in self.used:
            self.used.append(cluster)
        return KindDeployment(self, node, load, cluster)


def make_kube_backend(name: str, settings: dict[str, Any], runtime: str,
                      progress: Callable[[str], None] = lambda message: None, workdir: Path | None = None) -> KubeBackend:
    """The runner's factory for both backends; `settings` is config.yaml's section of that backend."""
    from throttlelab.backends.kube.backend import settings_from_config

    if name == "kubernetes":
        return KubeBackend(settings_from_config(settings), runtime=runtime, progress=progress)
    if name == "kind":
        if not settings:
            raise BackendError("kind backend: no settings given (the run_experiment rule passes config.yaml's kind section)")
        return KindBackend(clusters_from_settings(settings, workdir or Path.cwd()), runtime=runtime,
                           namespace=settings.get("namespace", "default"),
                           pod_start_timeout_s=float(settings.get("pod_start_timeout_s", 120)), progress=progress)
    raise BackendError(f"not a Kubernetes backend: {name!r}")


# -- cluster lifecycle (the Snakemake rules call these) -----------------------------------------------------

def _run(argv: list[str], what: str, timeout_s: float) -> str:
    print("+ " + " ".join(argv), file=sys.stderr, flush=True)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise BackendError(f"{what}: no answer after {timeout_s:.0f} s") from None
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        raise BackendError(f"{what} failed (exit {proc.returncode}): {proc.stderr.strip()[-600:]}")
    return proc.stdout


def existing_clusters(binary: str) -> list[str]:
    return _run([binary, "get", "clusters"], "kind get clusters", 60).split()


def _write_json(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)


def configured_images(config: Path) -> list[str]:
    import yaml

    return [n.get("image", "") for n in (yaml.safe_load(config.read_text()) or {}).get("nodes") or []]


def create_cluster(cluster: KindCluster, kubeconfig: Path, stamp: Path) -> dict[str, Any]:
    """Create the cluster once; a cluster that already exists with the configured node image is reused."""
    binary = check_kind(cluster)
    client = docker_client()
    wanted = set(configured_images(cluster.config))
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    if cluster.name in existing_clusters(binary):
        have = {node_container(client, n).attrs["Config"]["Image"] for n in (cluster.control_plane, cluster.worker)}
        if have != wanted:
            raise BackendError(f"kind cluster {cluster.name} exists with node image(s) {sorted(have)}, not "
                               f"{sorted(wanted)}; delete it first: snakemake --cores 1 clean")
        _run([binary, "export", "kubeconfig", "--name", cluster.name, "--kubeconfig", str(kubeconfig)],
             "kind export kubeconfig", 120)
        reused = True
    else:
        _run([binary, "create", "cluster", "--name", cluster.name, "--config", str(cluster.config),
              "--kubeconfig", str(kubeconfig), "--wait", "300s"], f"kind create cluster {cluster.name}", 900)
        reused = False
    kc = KubeClient(kubeconfig, cluster.context)
    names = [n["metadata"]["name"] for n in kc.nodes()]
    if sorted(names) != sorted([cluster.control_plane, cluster.worker]):
        raise BackendError(f"kind cluster {cluster.name}: nodes {names}, expected {cluster.control_plane} and {cluster.worker}")
    runc = runc_version(node_container(client, cluster.worker))
    record = {
        "cluster": cluster.name,
        "role": cluster.role,
        "kind": kind_version(binary),
        "node_image": sorted(wanted),
        "nodes": sorted(names),
        "server": kc.server,
        "context": cluster.context,
        "runc": runc,
        "runc_conversion": runc_conversion(runc) if runc else None,
        "reused": reused,
    }
    _write_json(stamp, record)
    return record


def load_image(cluster: KindCluster, variant: str, image_stamp: Path, stamp: Path) -> dict[str, Any]:
    """`kind load docker-image cpulab-kind:<variant>` into both nodes, then check each node has it."""
    binary = check_kind(cluster)
    image = json.loads(image_stamp.read_text())
    tag = image["tag"]
    _run([binary, "load", "docker-image", tag, "--name", cluster.name], f"kind load docker-image {tag}", 600)
    client = docker_client()
    for node in (cluster.control_plane, cluster.worker):
        listing = node_exec(node_container(client, node), ["crictl", "images", "-o", "json"], f"list images on {node}")
        tags = {t for img in json.loads(listing).get("images", []) for t in img.get("repoTags") or []}
        if not any(t.endswith(f"/{tag}") or t == tag for t in tags):
            raise BackendError(f"kind load: {tag} is not on node {node} after loading")
    record = {"cluster": cluster.name, "variant": variant, "tag": tag, "image_id": image["id"]}
    _write_json(stamp, record)
    return record


def delete_clusters(clusters: dict[str, KindCluster]) -> list[str]:
    """Delete every lab cluster that exists, with its kubeconfig and stamps."""
    deleted = []
    for cluster in clusters.values():
        binary = find_binary(cluster.binary)
        if binary is None:
            raise BackendError(f"kind backend: cannot delete cluster {cluster.name}: kind binary {cluster.binary!r} "
                               "not found (set kind.binary / kind.old_binary)")
        if cluster.name in existing_clusters(binary):
            _run([binary, "delete", "cluster", "--name", cluster.name, "--kubeconfig", str(cluster.kubeconfig)],
                 f"kind delete cluster {cluster.name}", 300)
            deleted.append(cluster.name)
        shutil.rmtree(cluster.directory, ignore_errors=True)
    return deleted


def preflight_tools(clusters: dict[str, KindCluster], roles: list[str], need: set[str]) -> None:
    """What the kind rules need, checked before any job starts: every problem in one message."""
    problems = []
    if "kind" in need:
        for role in roles:
            try:
                check_kind(clusters[role])
            except BackendError as exc:
                problems.append(str(exc))
    if "docker" in need:
        try:
            docker_client()
        except BackendError as exc:
            problems.append(str(exc))
    if problems:
        raise BackendError("\n".join(problems))


# -- the kind image: cpulab:<variant> plus podgate ---------------------------------------------------------

def build_podgate(out: Path) -> Path:
    """`go build` of podgate/ (the start gate and file reader in the pods), static, local toolchain."""
    from throttlelab.host.gobuild import find_go, go_environment

    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.parent / f".{out.name}.{os.getpid()}.partial"
    cmd = [find_go(), "build", "-trimpath", "-o", str(partial), "."]
    try:
        result = subprocess.run(cmd, cwd=PODGATE_SOURCE, env=go_environment(), capture_output=True, text=True)
        if result.returncode != 0:
            raise BackendError(f"go build of podgate failed:\n{result.stderr.strip()}")
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def kind_dockerfile(base_tag: str) -> bytes:
    return f"FROM {base_tag}\nCOPY podgate /podgate\n".encode()


def build_kind_image(variant: str, base_stamp: Path, podgate: Path) -> dict[str, str]:
    """cpulab-kind:<variant> = the docker backend's cpulab:<variant> image + /podgate (no pull: FROM a local image)."""
    import docker.errors

    base = json.loads(Path(base_stamp).read_text())
    client = docker_client()
    dockerfile = kind_dockerfile(base["tag"])
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
        tar.add(str(podgate), arcname="podgate")
    buf.seek(0)
    sha = _sha256(Path(podgate))
    try:
        image, _log = client.images.build(
            fileobj=buf, custom_context=True, tag=image_tag(variant), pull=False, rm=True, forcerm=True,
            labels={"throttlelab": "1", "throttlelab.variant": variant, "throttlelab.podgate-sha256": sha,
                    "throttlelab.base-image": base.get("id", "")},
        )
    except docker.errors.DockerException as exc:
        raise BackendError(f"image {image_tag(variant)}: docker build failed: {exc}") from None
    return {"tag": image_tag(variant), "id": image.id, "variant": variant, "base": base.get("id", ""),
            "podgate_sha256": sha}


# -- command line ------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m throttlelab.backends.kind.backend", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("create", "load", "delete", "preflight"):
        s = sub.add_parser(name)
        s.add_argument("--settings", required=True, help="config.yaml's kind section as JSON")
        s.add_argument("--workdir", type=Path, default=Path.cwd())
        if name in ("create", "load"):
            s.add_argument("--role", required=True, choices=["new", "old"])
            s.add_argument("--stamp", required=True, type=Path)
        if name == "create":
            s.add_argument("--kubeconfig", required=True, type=Path)
        if name == "load":
            s.add_argument("--variant", required=True)
            s.add_argument("--image-stamp", required=True, type=Path)
        if name == "preflight":
            s.add_argument("--roles", default="new,old")
            s.add_argument("--need", default="kind,docker")
    s = sub.add_parser("build-podgate")
    s.add_argument("--out", required=True, type=Path)
    s = sub.add_parser("build-image")
    s.add_argument("--variant", required=True)
    s.add_argument("--base-stamp", required=True, type=Path)
    s.add_argument("--podgate", required=True, type=Path)
    s.add_argument("--out", required=True, type=Path)
    args = p.parse_args(argv)
    try:
        if args.command == "build-podgate":
            print(build_podgate(args.out))
            return 0
        if args.command == "build-image":
            record = build_kind_image(args.variant, args.base_stamp, args.podgate)
            _write_json(args.out, record)
            print(f"{record['tag']} = {record['id']}")
            return 0
        clusters = clusters_from_settings(json.loads(args.settings), args.workdir)
        if args.command == "create":
            record = create_cluster(clusters[args.role], args.kubeconfig, args.stamp)
            print(f"cluster {record['cluster']}: nodes {', '.join(record['nodes'])}, runc {record['runc']}"
                  + (" (reused)" if record["reused"] else ""))
        elif args.command == "load":
            record = load_image(clusters[args.role], args.variant, args.image_stamp, args.stamp)
            print(f"{record['tag']} loaded into {record['cluster']}")
        elif args.command == "delete":
            deleted = delete_clusters(clusters)
            print("deleted " + (", ".join(deleted) if deleted else "nothing (no lab cluster exists)"))
        elif args.command == "preflight":
            preflight_tools(clusters, args.roles.split(","), set(args.need.split(",")))
    except (BackendError, KubeError) as exc:
        print(f"throttlelab: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
