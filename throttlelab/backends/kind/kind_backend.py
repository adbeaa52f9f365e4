"""The `kind` backend: the lab as published (docs/LAB.md §4), on two local kind clusters.

The clusters (platform/kind_clusters.py) are a control-plane and a worker each.
Experiment pods run on the worker (nodeSelector), the load generator on the
control-plane (toleration), exactly as the pods of the kubernetes backend,
whose machinery this backend extends with what only kind gives: the nodes are
Docker containers on this host, so

* node-level CPU pinning (E5, E8) is `docker update --cpuset-cpus` on the node
  containers, ALWAYS restored (platform/kind_pins.py; the guardian is
  throttlelab.backends.kind.kind_guardian);
* the node, QoS, pod and pause cgroup levels are found inside the node container
  (one docker exec per deployment) and then read from this host through the
  node's /proc/<pid>/root (kind/node_cgroups.py, platform/kind_nodes.py), where the whole kubelet hierarchy is
  visible: pod and container counters are sampled with no process started in the
  node or the pod;
* the other, idle cluster's node containers are paused while a deployment lives
  (platform/kind_pauses.py), always resumed.

A variant runs on the cluster of its runtime conversion: runc-new on `new`,
runc-old on `old`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from throttlelab.model.builds import BUILDS
from throttlelab.model.coverage import V1_PIN_REASON
from throttlelab.model.placement import LoadPlacement, Node
from throttlelab.backends.base import BackendError, Capabilities
from throttlelab.errors import every_step
from throttlelab.backends.kube import manifests as mf
from throttlelab.platform.kube_client import KubeClient, KubeError
from throttlelab.backends.kube.kube_backend import KubeBackend, KubeDeployment
from throttlelab.backends.kube.pod_lifecycle import NodeChanges
from throttlelab.backends.kube.run_pods import KubeSettings
from throttlelab.backends.kind.node_cgroups import DISCOVER, NodeCgroups
from throttlelab.host.docker_engine import kind_engine_client
from throttlelab.platform.kind_clusters import NODE_IMAGES, ROLE_OF_RUNTIME, KindCluster, clusters_from_settings
from throttlelab.platform.kind_nodes import (
    NodeFiles,
    node_container,
    node_conversion,
    node_exec,
    node_pid,
    runc_version,
)
from throttlelab.platform.kind_pauses import ClusterLocks, hold, pause, plan_pauses, resume, sweep_pauses, using
from throttlelab.platform.kind_pauses import state_file as pause_state_file
from throttlelab.platform.kind_pins import (
    Pin,
    apply_pins,
    current_cpuset,
    plan_pins,
    restore_pins,
    sweep_pins,
    usable_cpus,
)
from throttlelab.platform.kind_pins import state_file as pin_state_file
from throttlelab.platform.workload_images import kind_tag


class KindNodeChanges(NodeChanges):
    """What a kind deployment changes on the node containers, and undoes: the worker and control-plane
    pinned to the placement's CPUs (platform/kind_pins.py), the other, idle cluster's nodes paused while this
    one measures (platform/kind_pauses.py), both under the clusters' locks; and the worker's runc checked first."""

    guardian_module = "throttlelab.backends.kind.kind_guardian"  # the kubernetes guardian, then pins and pauses undone

    def __init__(
        self, backend: "KindBackend", cluster: KindCluster, node: Node, load: LoadPlacement | None, runtime: str
    ):
        self.backend, self.cluster, self.runtime = backend, cluster, runtime
        self.docker = backend.docker
        self.pins: list[Pin] = []
        wanted = {}
        if node.cpus:
            wanted[cluster.worker] = node.cpus
        if load and load.cpus:
            wanted[cluster.control_plane] = load.cpus
        self.wanted = wanted
        self.idle = [c for c in backend.clusters.values() if c.name != cluster.name]
        self.paused: dict[str, Any] = {}  # node container name -> the container (plan_pauses)
        self.locks: ClusterLocks | None = None

    def hold(self) -> None:
        self.locks = hold(
            using=[self.cluster.name], pausing=[c.name for c in self.idle], progress=self.backend.progress
        )

    def check(self) -> None:
        """The worker's runc must convert shares the way this variant's runtime says."""
        version = runc_version(node_container(self.docker, self.cluster.worker))
        if version and node_conversion(version) != self.runtime:
            raise BackendError(
                f"kind backend: the {self.cluster.role} cluster's worker runs runc {version}, which converts shares "
                f"with the {node_conversion(version)} formula, but this variant expects {self.runtime}; "
                f"the node image must be {NODE_IMAGES[self.cluster.role].split('@')[0]} (config/kind/{self.cluster.role}.yaml)"
            )

    def describe(self) -> dict[str, Any]:
        self.pins = plan_pins(self.docker, self.wanted) if self.wanted else []
        self.paused = plan_pauses(self.docker, [n for c in self.idle for n in (c.control_plane, c.worker)])
        return {
            "pins": [{"container": p.container, "restore_to": p.restore_to} for p in self.pins],
            "pauses": list(self.paused),
        }

    def fds(self) -> tuple[int, ...]:
        # A runner killed with SIGKILL drops its own copies of the locks at once; the guardian's keep
        # them until it has resumed the idle cluster and restored the pins, so the next run's sweep
        # and pause cannot race with it (it would resume nodes the next run has just paused).
        return self.locks.fds() if self.locks is not None else ()

    def apply(self) -> None:
        if self.pins:
            apply_pins(self.docker, self.pins, os.getpid())
            self.backend.progress("pinned " + ", ".join(f"{p.container} to CPUs {p.cpus}" for p in self.pins))
        if self.paused:
            pause(self.paused.values(), os.getpid())
            self.backend.progress("paused the idle cluster's nodes while this one measures: " + ", ".join(self.paused))

    def restore(self) -> None:
        def restore_pinned() -> None:
            done = restore_pins(self.docker, self.pins) if self.pins else []
            if done:
                self.backend.progress("restored " + ", ".join(done))

        def resume_idle() -> None:
            done = resume(self.docker, self.paused) if self.paused else []
            if done:
                self.backend.progress("resumed the idle cluster's nodes: " + ", ".join(done))

        every_step([restore_pinned, resume_idle])

    def release(self) -> None:
        if self.locks is not None:
            self.locks.release()
            self.locks = None


class KindDeployment(KubeDeployment):
    """The kubernetes deployment on one of kind's clusters, with what kind's nodes give: every level
    found in the worker container and read from this host (NodeCgroups through NodeFiles), and the
    node containers pinned and the idle cluster paused while it lives (KindNodeChanges)."""

    def __init__(self, backend: "KindBackend", node: Node, load: LoadPlacement | None, cluster: KindCluster):
        docker = backend.docker

        def discover(name: str, uids: list[str], what: str) -> str:
            return node_exec(node_container(docker, name), ["sh", "-c", DISCOVER, "discover", *uids], what)

        files = NodeFiles(cluster.worker, lambda: node_pid(docker, cluster.worker))
        super().__init__(
            backend,
            node,
            load,
            backend.settings_for(cluster),
            backend.client_for(cluster),
            access=NodeCgroups(backend.name, cluster.worker, files, discover),
            changes=KindNodeChanges(backend, cluster, node, load, node.runtime or backend.runtime),
        )
        self.cluster = cluster


def node_image_text(facts: dict[str, Any] | None) -> str:
    """One cluster's node image in words, from its stamp's ``node_image_facts`` (kind_clusters.cluster_config):
    the image built here with its ID and versions, or the published images the kind config names."""
    if not facts:
        return "not recorded (a cluster made before its stamp said)"
    if facts.get("source") == "local":
        return (
            f"built here: {facts.get('tag')} ({str(facts.get('image_id', ''))[:19]}), Kubernetes "
            f"{facts.get('kubernetes')}, runc {facts.get('runc')}, kind {facts.get('kind')}, Debian {facts.get('debian')}"
        )
    images = facts.get("images") or []
    return "published: " + ", ".join(images) if images else "published (the images the kind config names)"


class KindBackend(KubeBackend):
    name = "kind"
    unreadable_reason = "not found in the node container"

    def __init__(
        self,
        clusters: dict[str, KindCluster],
        runtime: str = "runc-new",
        namespace: str = "default",
        pod_start_timeout_s: float = 120.0,
        progress: Callable[[str], None] = lambda message: None,
    ):
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
            self._docker = kind_engine_client()
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
            images={v: kind_tag(v) for v in BUILDS},
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

    def _resume_dead_pauses(self) -> None:
        resumed = sweep_pauses(self.docker)
        if resumed:
            self.progress("resumed kind nodes a dead run left paused: " + ", ".join(resumed))

    def preflight(self) -> None:
        docker = self.docker  # an unreachable engine: a BackendError naming it
        self._resume_dead_pauses()
        ready = [c for c in self.clusters.values() if c.kubeconfig.is_file()]
        if not ready:
            raise BackendError(
                "kind backend: no cluster exists yet (no kubeconfig under results/kind/clusters/); "
                "create them: snakemake --cores 1 --config backend=kind create_clusters"
            )
        with using(*(c.name for c in ready), progress=self.progress):  # not while a run has one paused
            for cluster in ready:
                kc = self.client_for(cluster)
                kc.version()
                names = [n["metadata"]["name"] for n in kc.nodes()]
                # each node's container is inspected once: the worker's by node_pid, which also checks that
                # its files can be read from here (this host, root)
                for node, inspect in ((cluster.worker, node_pid), (cluster.control_plane, node_container)):
                    if node not in names:
                        raise BackendError(
                            f"kind backend: cluster {cluster.name} has no node {node!r} (its nodes: "
                            f"{', '.join(names)}); delete and recreate it: snakemake clean"
                        )
                    inspect(docker, node)
                try:
                    kc.wait_nodes_ready([cluster.control_plane, cluster.worker], self.node_ready_timeout_s)
                except KubeError as exc:
                    raise BackendError(f"kind backend: cluster {cluster.name}: {exc}") from None

    def host_cgroup_version(self) -> int | None:
        info = self.docker.info()
        return int(info["CgroupVersion"]) if str(info.get("CgroupVersion", "")).isdigit() else None

    def untestable(self, node: Node, load: LoadPlacement | None) -> str | None:
        """kind has both runtimes; it can pin node containers only on cgroup v2 hosts."""
        if (node.cpus or (load and load.cpus)) and self.host_cgroup_version() == 1:
            return V1_PIN_REASON
        return None

    def capabilities(self) -> Capabilities:
        info = self.docker.info()
        return Capabilities(
            cpus=int(info.get("NCPU", 0)),
            cgroup_version=int(info["CgroupVersion"]) if str(info.get("CgroupVersion", "")).isdigit() else None,
            can_pin_cpus=str(info.get("CgroupVersion", "")) != "1",
            has_pause_level=True,
            runtime=self.runtime,
            cadvisor=True,  # the worker's kubelet, through the API server's node proxy (E6)
            notes=(
                "kind backend: node cpusets set with docker update on the node containers, restored on exit",
                "the idle cluster's node containers are paused (docker pause) while a job measures, resumed on exit",
                "pod, QoS and node levels found once in the node container, then read from this host through "
                "/proc/<pid>/root (counters too: no exec per sample); container levels checked by exec in the container",
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
            # where the nodes' images came from (kind.node_images), as the report shows it
            "node_images": {
                "setting": used[-1].node_images,
                **{role: node_image_text(facts.get("node_image_facts")) for role, facts in clusters.items()},
            },
            "namespace": self.namespace,
            "images": {v: kind_tag(v) for v in BUILDS},
        }

    def sweep(self, kc: KubeClient, namespace: str) -> list[str]:
        restored = sweep_pins(self.docker)
        if restored:
            self.progress("restored node cpusets a dead run left pinned: " + ", ".join(restored))
        self._resume_dead_pauses()
        return super().sweep(kc, namespace)

    def node_cpusets(self) -> dict[str, str]:
        """The CPUs each node container of both clusters may use now (none set: every usable CPU, as a
        restored pin writes them out)."""
        out = {}
        for cluster in self.clusters.values():
            if cluster.kubeconfig.is_file():
                for name in (cluster.control_plane, cluster.worker):
                    container = node_container(self.docker, name)
                    out[name] = current_cpuset(container) or usable_cpus(self.docker, container)
        return out

    def leftovers(self) -> list[str]:
        """The lab's pods in either cluster, node cpusets not restored, node containers left paused."""
        left = []
        for cluster in self.clusters.values():
            if not cluster.kubeconfig.is_file():
                continue
            kc = self.client_for(cluster)
            left += [
                f"pod {self.namespace}/{p['metadata']['name']} in {cluster.name}"
                for p in kc.list_pods(self.namespace, mf.MANAGED_SELECTOR)
            ]
            for name in (cluster.control_plane, cluster.worker):
                if pin_state_file(name).exists():
                    left.append(f"node {name} still pinned (its cpuset not restored: {pin_state_file(name)})")
                if node_container(self.docker, name).status == "paused" or pause_state_file(name).exists():
                    left.append(f"node {name} left paused")
        return left

    def deploy(self, node: Node, load: LoadPlacement | None = None) -> KindDeployment:
        cluster = self.cluster_for(node.runtime or self.runtime)
        if not cluster.kubeconfig.is_file():
            raise BackendError(
                f"kind backend: the {cluster.role} cluster ({cluster.name}) has no kubeconfig at "
                f"{cluster.kubeconfig}; create it: snakemake --cores 1 --config backend=kind create_clusters"
            )
        if cluster not in self.used:
            self.used.append(cluster)
        return KindDeployment(self, node, load, cluster)


def from_config(
    binaries: dict[str, Path], runtime: str, settings: dict[str, Any], progress: Callable[[str], None]
) -> KindBackend:
    """The registry's factory (backends.base.make_backend): `settings` is config.yaml's kind
    section; the clusters' files are under the working directory's results/. The workload runs
    from the kind images, so `binaries` are not used."""
    if not settings:
        raise BackendError(
            "kind backend: no settings given (the run_experiment rule passes config.yaml's kind section)"
        )
    return KindBackend(
        clusters_from_settings(settings, Path.cwd()),
        runtime=runtime,
        namespace=settings.get("namespace", "default"),
        pod_start_timeout_s=float(settings.get("pod_start_timeout_s", 120)),
        progress=progress,
    )
