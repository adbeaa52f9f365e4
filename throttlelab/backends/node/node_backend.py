"""The kubernetes backend on the lab's own real node (``kubernetes: {cluster: local}``).

The node (platform/real_node.py) is a real kubelet, control plane, containerd and
both pinned runc releases on this host. The pods are the kubernetes backend's, with
what owning the node adds, as kind adds it for its node containers:

* both runtimes on one node: each pod names the RuntimeClass of its variant's runtime
  conversion (runc-new -> runc v1.4.3, runc-old -> runc v1.3.0);
* every level kubelet and runc write (the node's kubepods, QoS, pod, pause and container
  cgroups) is read back from this host's cgroupfs, and the counters too, with no exec;
* the workload images are OCI archives made here (platform/real_node_images.py), imported
  into the node's containerd; nothing is pulled.

Where the node comes from: a runner started by Snakemake (THROTTLELAB_ORCHESTRATOR_PID)
uses the node that serves that Snakemake process, starting it if it is the first; the
node goes when Snakemake ends (its onsuccess/onerror handlers wait for it; a killed
Snakemake is noticed by the node's supervisor). A runner started by hand gets a node of
its own for its lifetime.
"""

from __future__ import annotations

import atexit
import dataclasses
import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

from throttlelab.backends.base import BackendError, Capabilities, Output, parse_records, refuse_knobs
from throttlelab.backends.kind.node_cgroups import DISCOVER, NodeCgroups
from throttlelab.backends.kube import manifests as mf
from throttlelab.backends.kube.kube_backend import KubeBackend, KubeDeployment
from throttlelab.backends.kube.pod_lifecycle import NodeChanges
from throttlelab.backends.kube.run_pods import KubeSettings
from throttlelab.platform import real_node as nc
from throttlelab.platform import real_node_images as ni
from throttlelab.host.state_dir import open_state
from throttlelab.host.interference import orchestrator_from_env
from throttlelab.host.processes import die_with_parent
from throttlelab.platform import real_node_layout as kn
from throttlelab.model import results_layout as layout
from throttlelab.model.builds import BUILDS
from throttlelab.model.placement import LoadPlacement, Node, parse_cpuset
from throttlelab.model.runtime import runc_conversion


def _pinned_child(cpus: set[int]) -> None:
    """In the load generator before exec: on the load CPUs, and killed with the runner, so a runner
    killed with SIGKILL leaves no generator sending load on."""
    os.sched_setaffinity(0, cpus)
    die_with_parent()


class HostFiles:
    """The node's files are this host's: a node_cgroups.NodeFileReader on plain reads."""

    def read(self, path: str) -> str:
        with open(path) as handle:
            return handle.read()

    def read_optional(self, path: str) -> str | None:
        try:
            return self.read(path)
        except FileNotFoundError:
            return None

    def exists(self, path: str) -> bool:
        return Path(path).exists()

    def close(self) -> None:
        pass


def discover_here(node: str, uids: list[str], what: str) -> str:
    """DISCOVER run on this host, whose cgroupfs is the node's."""
    try:
        done = subprocess.run(["sh", "-c", DISCOVER, "discover", *uids], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BackendError(f"{what}: {exc}") from None
    if done.returncode != 0:
        raise BackendError(f"{what}: exit {done.returncode}: {done.stderr.strip()[-300:]!r}")
    return done.stdout


class CgroupRootPin(NodeChanges):
    """The node's CPUs: its cgroup root (the pods, kubelet, containerd and the shims) pinned to the
    variant's, and the control plane (etcd, the API server, the controller manager, the scheduler) to the
    load generator's, as kind pins its worker and control-plane nodes; or both given every CPU again (what a
    dead run pinned is undone here). The node has its own supervisor, so the kubernetes guardian (the pods)
    is the run's."""

    def __init__(self, backend: "NodeBackend", node: Node, load: LoadPlacement | None = None):
        self.backend, self.cpus = backend, node.cpus
        self.load_cpus = load.cpus if load else None

    def apply(self) -> None:
        facts = self.backend.node_facts
        cpus = nc.pin_cgroup_root(facts["cgroup_root"], self.cpus)
        if self.cpus:
            self.backend.progress(f"pinned the real node ({facts['cgroup_root']}) to CPUs {cpus}")
        control = facts.get("control_plane_cgroup")
        if control:
            cpus = nc.pin_cgroup_root(control, self.load_cpus)
            if self.load_cpus:
                self.backend.progress(f"pinned the node's control plane ({control}) to the load's CPUs {cpus}")

    def restore(self) -> None:
        facts = self.backend.node_facts
        if self.cpus:
            nc.pin_cgroup_root(facts["cgroup_root"], None)
        if self.load_cpus and facts.get("control_plane_cgroup"):
            nc.pin_cgroup_root(facts["control_plane_cgroup"], None)


class PinnedHostLoad:
    """The load generator on CPUs of its own: one node cannot keep a pod of it apart from the pinned
    experiment pods, so it runs as a process of this host, pinned to the load CPUs, and reaches the
    pods by their IPs over the node's bridge (as kind's runs on the control-plane node)."""

    def __init__(self, binaries: dict[str, Path], cpus: str):
        self.binaries, self.cpus = binaries, cpus

    def run_load(self, args: list[str], timeout_s: float, variant: str = "go124mod") -> Output:
        binary = self.binaries.get(variant)
        if binary is None or not Path(binary).is_file():
            raise BackendError(
                f"the load generator of build {variant} runs on this host: its cpulab binary is "
                "missing (the runner's --binary)"
            )
        cpus = set(parse_cpuset(self.cpus))
        started = time.monotonic()
        try:
            done = subprocess.run(
                [str(binary), *args],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                preexec_fn=lambda: _pinned_child(cpus),
            )
        except subprocess.TimeoutExpired as exc:
            raise BackendError(f"load/generator: still running after {timeout_s:.0f} s; killed") from exc
        out = Output(
            pod="load",
            container="generator",
            returncode=done.returncode,
            records=parse_records(done.stdout, "load/generator"),
            stderr=done.stderr,
            wall_s=time.monotonic() - started,
        )
        if done.returncode != 0:
            raise BackendError(f"load/generator: exited with {done.returncode}; stderr: {done.stderr.strip()[-400:]!r}")
        return out


class NodeDeployment(KubeDeployment):
    """The kubernetes deployment on the real node: every level read from this host's cgroupfs (the
    node-side readback kind uses, on this host's files), the node's cgroup root pinned, the variant's
    RuntimeClass on every pod, and a pinned load generator as a process of this host (unpinned, it is
    a pod of the node, as on any cluster)."""

    def __init__(self, backend: "NodeBackend", node: Node, load: LoadPlacement | None):
        runtime = node.runtime or backend.runtime
        super().__init__(
            backend,
            node,
            load,
            backend.settings,
            backend.client,
            access=NodeCgroups(backend.name, backend.settings.worker_node, HostFiles(), discover_here),
            changes=CgroupRootPin(backend, node, load),
            runtime_class=runtime,
        )
        if load and load.cpus:
            self.load_generator = PinnedHostLoad(backend.binaries, load.cpus)


class NodeBackend(KubeBackend):
    name = "kubernetes"
    unreadable_reason = "not found in this host's cgroupfs"
    lists_node_pods = True  # the lab's own node: its admin may list every pod on it

    def __init__(
        self,
        tools_manifest: Path,
        image_dir: Path,
        runtime: str = "runc-new",
        namespace: str = "default",
        pod_start_timeout_s: float = 120.0,
        progress: Callable[[str], None] = lambda message: None,
        binaries: dict[str, Path] | None = None,
        patience: float = 1.0,
        node_logs: Path | None = None,
    ):
        self.binaries = dict(binaries or {})  # build -> cpulab on this host (the pinned load generator)
        self.tools_manifest = tools_manifest
        self.image_dir = image_dir
        self.node_facts: dict[str, Any] | None = None
        self._own: nc.LocalNode | None = None
        self._namespace = namespace
        # the node's start, each pod's start and every wait on it may take this many times longer
        self.patience = patience
        # where the node's own logs (etcd, the control plane, containerd, kubelet) are copied when it stops
        self.node_logs = node_logs if node_logs is not None else Path.cwd() / layout.NODE_LOGS
        pod_start_timeout_s *= patience
        self._pod_start_timeout_s = pod_start_timeout_s
        settings = KubeSettings(
            kubeconfig=Path("/nonexistent"),
            context=kn.CONTEXT,
            worker_node=kn.NODE_NAME,
            load_node=kn.NODE_NAME,
            namespace=namespace,
            images={b: ni.image_reference(b) for b in BUILDS},
            pull_policy="Never",
            pod_start_timeout_s=pod_start_timeout_s,
            tolerate_control_plane=False,
        )
        super().__init__(settings, runtime, progress)

    def keep_failure_evidence(self, folder: Path) -> list[str]:
        """The pods' events, and a copy of the node's component logs as they stand (the node itself keeps
        running for the next job, or goes with its orchestrator)."""
        if self.node_facts is None:
            return []  # no node was started: nothing of it to keep
        kept = super().keep_failure_evidence(folder)
        logs = Path(self.node_facts["root"]) / "logs"
        if logs.is_dir():
            target = folder / "node-logs"
            target.mkdir(parents=True, exist_ok=True)
            for log in sorted(logs.iterdir()):
                try:
                    shutil.copyfile(log, target / log.name)
                except OSError:
                    continue
            kept.append(str(target))
        return kept

    # -- the node ---------------------------------------------------------------------------------------
    def _tools(self) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        """binary -> path, RuntimeClass -> runc, binary -> version line, from the cluster tools manifest."""
        return nc.tools_from_manifest(self.tools_manifest)

    def _images(self) -> list[dict[str, str]]:
        found = []
        for build in BUILDS:
            archive = ni.archive_path(self.image_dir, build)
            if not archive.is_file():
                raise BackendError(
                    f"the real node's image of {build} is missing ({archive}): it is built by the "
                    "rule build_node_image (snakemake runs it before any experiment of this backend)"
                )
            found.append({"reference": ni.image_reference(build), "archive": str(archive)})
        return found

    def ensure_node(self) -> dict[str, Any]:
        """The running node this runner uses: its orchestrator's (started now if it is the first), else one
        of its own, stopped when the runner exits."""
        if self.node_facts is not None:
            return self.node_facts
        tools, runc, versions = self._tools()
        images = self._images()
        owner = orchestrator_from_env()
        with open_state(nc.nodes_dir() / ".start.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one start per orchestrator, however many runners ask at once
            facts = nc.find_node(owner) if owner is not None else None
            if facts is None:
                self.progress("starting the real node (etcd, the control plane, containerd, kubelet) ...")
                node = nc.LocalNode(tools, runc, images, keep_logs=self.node_logs, owner=owner, patience=self.patience)
                facts = node.__enter__()
                if owner is None:
                    self._own = node
                    atexit.register(self.close)
                self.progress(f"real node ready in {facts['start_s']:.1f} s (supervisor {facts['supervisor']})")
        self.node_facts = {**facts, "versions": versions}
        self.settings = dataclasses.replace(self.settings, kubeconfig=Path(facts["kubeconfig"]))
        self._client = None
        return self.node_facts

    def close(self) -> None:
        if self._own is not None:
            node, self._own = self._own, None
            node.__exit__(None, None, None)

    # -- the Backend interface -------------------------------------------------------------------------
    def preflight(self) -> None:
        self.ensure_node()
        super().preflight()

    def untestable(self, node: Node, load: LoadPlacement | None) -> str | None:
        if node.runtime and node.runtime not in kn.RUNTIME_HANDLERS:
            return f"no RuntimeClass {node.runtime} on the real node (it has {', '.join(kn.RUNTIME_HANDLERS)})"
        return None

    def capabilities(self) -> Capabilities:
        facts = self.ensure_node()
        caps = super().capabilities()
        return Capabilities(
            cpus=caps.cpus,
            cgroup_version=facts.get("cgroup_version"),
            can_pin_cpus=True,
            has_pause_level=True,
            runtime=self.runtime,
            cadvisor=True,
            free_cpu_milli=caps.free_cpu_milli,
            notes=(
                "real node: kubelet, containerd and both runc releases on this host; every cgroup level read "
                "from this host's cgroupfs",
                "node CPUs pinned through the node's cgroup root (its cpuset), kubelet, containerd and the "
                "shims with the pods, restored after each deployment",
                "a pinned load generator runs as a process of this host on its own CPUs (one node cannot keep "
                "a pod of it apart), the control plane pinned with it; unpinned, it is a pod of the node",
            ),
        )

    def environment(self) -> dict[str, Any]:
        facts = self.ensure_node()
        env = super().environment()
        versions = facts.get("versions", {})
        runc = {h: versions.get(f"runc {folder.split('-', 1)[-1]}") for h, folder in kn.RUNTIME_HANDLERS.items()}
        return {
            **env,
            "cluster": "local (the lab's real node)",
            "node_versions": versions,
            "runc": runc,
            "runtime_conversion_of_runc": {h: runc_conversion(v.split()[-1]) if v else None for h, v in runc.items()},
            "node_start_s": facts.get("start_s"),
        }

    def deploy(self, node: Node, load: LoadPlacement | None = None) -> NodeDeployment:
        refuse_knobs(KubeBackend.name, node)  # no burst budget nor pod period in Kubernetes, on any node
        self.ensure_node()
        return NodeDeployment(self, node, load)

    def node_cpusets(self) -> dict[str, str]:
        """The node's CPUs: its cgroup root's cpuset (what a pinned variant changes and restores), and its
        control plane's (the load's CPUs where a variant pins the load)."""
        facts = self.ensure_node()
        cpusets = {kn.NODE_NAME: nc.cgroup_root_cpus(facts["cgroup_root"])}
        if facts.get("control_plane_cgroup"):
            cpusets["control-plane"] = nc.cgroup_root_cpus(facts["control_plane_cgroup"])
        return cpusets

    def leftovers(self) -> list[str]:
        left = [
            f"a pod of the lab in {self.settings.namespace}: {p['metadata']['name']}"
            for p in self.client.list_pods(self.settings.namespace, mf.MANAGED_SELECTOR)
        ]
        every = nc.host_cpus()
        for part, pinned in self.node_cpusets().items():
            if pinned != every:
                left.append(f"the node's {part} cgroup still pinned to CPUs {pinned} (the host has {every})")
        return left


def from_config(
    binaries: dict[str, Path], runtime: str, settings: dict[str, Any], progress: Callable[[str], None]
) -> NodeBackend:
    """make_backend's factory for ``kubernetes: {cluster: local}``: the tools from the cluster tools
    manifest and the node's image archives (model/results_layout.py), both under the working directory."""
    return NodeBackend(
        Path.cwd() / layout.TOOLS_MANIFEST,
        Path.cwd() / layout.NODE_IMAGE_DIR,
        runtime=runtime,
        namespace=settings.get("namespace") or "default",
        pod_start_timeout_s=float(settings.get("pod_start_timeout_s") or 120),
        progress=progress,
        binaries=binaries,
    )
