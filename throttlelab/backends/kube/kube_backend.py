"""The `kubernetes` backend: the lab as pods on an existing cluster, and the pod
machinery the `kind` backend shares.

An existing cluster is named by a kubeconfig, a context, a worker node (where
the experiment pods run) and a load node (where the load generator runs); this
backend creates nothing but the lab's own pods, and changes no node. What it
cannot do there is said, with the reason, instead of being faked:

* pinning a node's CPUs (E5/E10 on one CPU; the node and load-generator
  cpusets that profiles give the service experiments) needs the
  node's container or host, which an API client does not have -> NotTestable;
* the pod, QoS and node cgroup levels live outside every container's cgroup
  namespace: only the container level is read back (exec in the container),
  the levels above are recorded as unreadable, not as matching;
* one cluster has one runc: a variant that asks for the other runtime
  conversion -> NotTestable.

How a pod runs (both backends): `deploy()` creates every pod of the node at once
with each container waiting behind `podgate`, so all cgroups exist before any
workload starts; `verify()` reads them back; `start()` / `run_job()` open one
container's gate (podgate execs cpulab, which becomes the container's main
process); `stop()` sends it SIGTERM through podgate; logs come from the logs
API; leaving the `with` block deletes every pod of the run by label, and a
guardian process does so even when the runner is SIGKILLed. The deployment is
composed of one part per task, each in a module of its own (run_pods.py says
which).

What this backend asks of an existing cluster is the least the design needs:
the pods of its own namespace, the worker and load nodes by name, and their
cAdvisor (E6). It lists no pods of other namespaces: the only use of them, the
burstable QoS level's other requests, is for a level it cannot read back here.
"""

from __future__ import annotations

import sys
import json
from pathlib import Path
from typing import Any, Callable

from throttlelab.model import quantities as q
from throttlelab.host.processes import pid_alive
from throttlelab.model.placement import LoadPlacement, Node
from throttlelab.backends.kube import manifests as mf
from throttlelab.errors import every_step
from throttlelab.backends.base import (
    Backend,
    BackendError,
    Capabilities,
    Deployment,
    Output,
    Readback,
    refuse_knobs,
)
from throttlelab.backends.kube.cadvisor_scrape import CadvisorScrape
from throttlelab.platform.kube_client import DELETION_TIMEOUT_S, Forbidden, KubeClient, KubeError, NotFound, still_there
from throttlelab.backends.kube.load_generator import LoadGeneratorPods
from throttlelab.backends.kube.pod_lifecycle import NodeChanges, PodLifecycle
from throttlelab.backends.kube.pod_readback import PodReadback
from throttlelab.backends.kube.pod_workloads import KubeHandle, PodWorkloads
from throttlelab.backends.kube.run_pods import KubeSettings, NodeAccess, NotTestable, PodLimits, RunPods


def sweep_stale_pods(kc: KubeClient, namespace: str, host: str, alive: Callable[[int], bool]) -> list[str]:
    """Delete the lab's pods left on this cluster by runners of this host that no longer exist, and
    wait until they are gone (their containers stopped), so none of them runs beside the next job."""
    stale = []
    selector = f"{mf.MANAGED_SELECTOR},{mf.LABEL_HOST}={host}"
    for pod in kc.list_pods(namespace, selector):
        labels = pod["metadata"].get("labels") or {}
        pid = labels.get(mf.LABEL_PID, "")
        if pid.isdigit() and not alive(int(pid)):
            if kc.delete_pod(namespace, pod["metadata"]["name"]):
                stale.append(pod)
    kc.wait_deleted(namespace, stale, DELETION_TIMEOUT_S)
    return [pod["metadata"]["name"] for pod in stale]


# -- the deployment ---------------------------------------------------------------------------


class KubeDeployment(Deployment):
    """A node's pods on a cluster, composed of one part per task (each shares the run's `pods`):
    `lifecycle` creates and deletes them, `readback` designs their levels and reads them back,
    `workloads` runs what is in them, `load_generator` the load, `scrape` samples cAdvisor. What
    the backend sees of the node (`access`) and changes on it (`changes`) are given: kind's and
    the real node's deployments give theirs; the kubernetes backend sees no node and changes none."""

    limits = PodLimits()  # each one multiplied by the backend's patience

    def __init__(
        self,
        backend: "KubeBackend",
        node: Node,
        load: LoadPlacement | None,
        settings: KubeSettings,
        client: KubeClient,
        access: NodeAccess | None = None,
        changes: NodeChanges | None = None,
        runtime_class: str | None = None,
    ):
        self.backend, self.model, self.load = backend, node, load
        self.settings, self.kc = settings, client
        self.limits = type(self).limits.scaled(backend.patience)
        self.runtime = node.runtime or backend.runtime
        self.access = access or NodeAccess()
        self.changes = changes or NodeChanges()
        self.pods = RunPods(settings, client, node, self.limits, backend.progress, runtime_class)
        self.lifecycle = PodLifecycle(self.pods, self.access)
        self.readback = PodReadback(self.pods, self.access, self.runtime, backend.unreadable_reason)
        self.workloads = PodWorkloads(self.pods, self.lifecycle)
        self.load_generator = LoadGeneratorPods(self.pods, self.lifecycle, self.workloads, load)
        self.scrape = CadvisorScrape(self.pods)

    # -- lifecycle ------------------------------------------------------------------------------
    def __enter__(self) -> "KubeDeployment":
        self.changes.hold()
        try:
            reason = self.backend.untestable(self.model, self.load)
            if reason:
                raise NotTestable(reason)
            self.changes.check()
            self.backend.sweep(self.kc, self.pods.ns)
            self.lifecycle.start_guardian(self.changes)  # first: the guardian must exist before what it guards
        except BaseException:
            self._release()
            raise
        try:
            self.changes.apply()
            worker = self.kc.node(self.settings.worker_node)
            allocatable = q.parse_cpu(worker["status"]["allocatable"]["cpu"], "allocatable cpu")
            self.pods.node = mf.kube_node(self.model, allocatable)
            self.readback.design()
            self.lifecycle.create()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        problem: BackendError | None = None
        cleaned = False
        try:
            try:
                every_step([self.lifecycle.delete_all, self.changes.restore])  # KubeError included
                cleaned = True
            except BackendError as err:
                problem = err
        finally:  # also when a second Ctrl-C interrupts the cleanup: the guardian then does it all again
            try:
                self.lifecycle.close_guardian(cleaned)
            finally:
                self._release()
        if problem is not None:
            run = self.pods.ident.run
            if not any(exc):
                raise BackendError(f"cleanup of run {run} incomplete: {problem}")
            # an error (or Ctrl-C) is on its way out already: it goes on, and this is said, not lost
            print(f"cleanup of run {run} incomplete (its guardian tried again): {problem}", file=sys.stderr)

    def _release(self) -> None:
        try:
            self.access.close()
        finally:
            self.changes.release()

    # -- the Deployment interface, each call one part's -----------------------------------------------
    def verify(self) -> list[Readback]:
        return self.readback.verify()

    def read_stat(self, pod: str, container: str | None = None) -> dict[str, Any]:
        return self.readback.read_stat(pod, container)

    def start(self, pod: str, container: str) -> KubeHandle:
        return self.workloads.start(pod, container)

    def run_job(self, pod: str, container: str, timeout_s: float) -> Output:
        return self.workloads.run_job(pod, container, timeout_s)

    def stop(self, handle: KubeHandle, timeout_s: float = 10.0) -> Output:
        return self.workloads.stop(handle, timeout_s)

    def wait_for_record(self, handle: KubeHandle, record_type: str, timeout_s: float) -> dict[str, Any]:
        return self.workloads.wait_for_record(handle, record_type, timeout_s)

    def run_load(self, args: list[str], timeout_s: float, variant: str = "go124mod") -> Output:
        return self.load_generator.run_load(args, timeout_s, variant)

    def monitoring_sample(self, pod: str, container: str) -> dict[str, Any]:
        return self.scrape.monitoring_sample(pod, container)


# -- the backend ---------------------------------------------------------------------------------------


class KubeBackend(Backend):
    """An existing cluster (kubeconfig + context); kind's backend extends it."""

    name = "kubernetes"
    unreadable_reason = "an existing cluster gives no access to its nodes; only the container level is read (exec)"
    node_ready_timeout_s = 120.0  # the preflight waits this long for the worker and load nodes to be Ready
    patience = 1.0  # how many times its usual limit each wait on the cluster may take (PodLimits.scaled)

    def __init__(
        self, settings: KubeSettings, runtime: str = "runc-new", progress: Callable[[str], None] = lambda message: None
    ):
        self.settings = settings
        self.runtime = runtime
        self.progress = progress
        self._client: KubeClient | None = None

    @property
    def client(self) -> KubeClient:
        if self._client is None:
            self._client = KubeClient(self.settings.kubeconfig, self.settings.context)
        return self._client

    def preflight(self) -> None:
        s = self.settings
        where = f"kubeconfig {s.kubeconfig}, context {s.context or '(current)'}"
        if not s.kubeconfig.is_file():
            raise BackendError(
                f"{self.name} backend: kubeconfig {s.kubeconfig} does not exist; "
                f"set {self.name}.kubeconfig in config/config.yaml"
            )
        kc = self.client
        kc.version()  # unreachable -> KubeError naming the server
        for role, node in (("worker_node", s.worker_node), ("load_node", s.load_node)):
            try:
                kc.node(node)  # by name: the lab needs no right to list the cluster's nodes
            except NotFound:
                try:
                    names = ", ".join(n["metadata"]["name"] for n in kc.nodes()) or "none"
                except Forbidden:
                    names = "(not allowed to list them)"
                raise BackendError(
                    f"{self.name} backend: {role} {node!r} is not a node of the cluster at {kc.server} "
                    f"({where}); its nodes: {names}"
                ) from None
        try:
            kc.wait_nodes_ready(sorted({s.worker_node, s.load_node}), self.node_ready_timeout_s)
        except KubeError as exc:
            raise BackendError(f"{self.name} backend ({where}): {exc}") from None
        try:
            kc.namespace(s.namespace)
        except NotFound:
            raise BackendError(
                f"{self.name} backend: namespace {s.namespace!r} does not exist ({where}); create it or choose another"
            ) from None
        except Forbidden:
            pass  # a namespaced user may not read its namespace; creating the first pod says if it is missing

    def keep_failure_evidence(self, folder: Path) -> list[str]:
        """The events of the run's namespace (the scheduler's, kubelet's and the runtime's word on each pod)."""
        try:
            events = self.client.events(self.settings.namespace)
        except Exception as exc:  # noqa: BLE001 - evidence of a failure never hides the failure
            return [f"(the namespace's events could not be read: {exc})"]
        events.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "events.json"
        path.write_text(json.dumps(events, indent=1, default=str) + "\n")
        return [str(path)]

    def untestable(self, node: Node, load: LoadPlacement | None) -> str | None:
        """Why this backend cannot run this placement, or None."""
        if node.cpus or (load and load.cpus):
            return (
                "pinning node CPUs (cpuset) needs the node itself; the kubernetes backend changes no node "
                f"(asked: node {node.cpus or 'all'}, load generator {load.cpus if load else 'any'})"
            )
        if node.runtime and node.runtime != self.runtime:
            return (
                f"this cluster's runc is configured as {self.runtime}; the variant asks for {node.runtime}, "
                "which needs a second cluster (kind creates one)"
            )
        return None

    #: whether the worker's other pods are listed to know what CPU they leave (every namespace's pods: a
    #: cluster-wide right an existing cluster's user need not have; the lab's own nodes list them)
    lists_node_pods = False

    def free_cpu_milli(self, worker: dict[str, Any]) -> int:
        """The worker's allocatable CPU, less the requests of its other live pods where this backend lists
        them (``lists_node_pods``); elsewhere a pod that does not fit is refused at deployment with the
        scheduler's words."""
        allocatable = q.parse_cpu(worker["status"]["allocatable"]["cpu"], "allocatable cpu")
        if not self.lists_node_pods:
            return allocatable
        pods = self.client.pods_on_node(self.settings.worker_node)
        live = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        return allocatable - sum(mf.pod_request_milli(p) for p in live)

    def capabilities(self) -> Capabilities:
        worker = self.client.node(self.settings.worker_node)
        cpus = q.parse_cpu(worker["status"]["capacity"]["cpu"], "capacity cpu") // 1000
        return Capabilities(
            cpus=cpus,
            free_cpu_milli=self.free_cpu_milli(worker),
            cgroup_version=None,
            can_pin_cpus=False,
            has_pause_level=True,
            runtime=self.runtime,
            cadvisor=True,  # the kubelet's, through the API server's node proxy (monitoring_sample)
            notes=(
                "kubernetes backend: node CPUs cannot be pinned (variants with cpus, node_cpus or load_cpus are not testable here)",
                "kubernetes backend: " + self.unreadable_reason,
                f"experiment pods on node {self.settings.worker_node}, load generator on {self.settings.load_node}",
            ),
        )

    def environment(self) -> dict[str, Any]:
        kc = self.client
        worker = kc.node(self.settings.worker_node)
        info = worker["status"].get("nodeInfo") or {}
        return {
            "backend": self.name,
            "server_version": kc.version().get("gitVersion"),
            "kubeconfig": str(self.settings.kubeconfig),
            "context": self.settings.context,
            "namespace": self.settings.namespace,
            "worker_node": self.settings.worker_node,
            "load_node": self.settings.load_node,
            "kernel": info.get("kernelVersion"),
            "machine": info.get("architecture"),
            "os_image": info.get("osImage"),
            "kubelet": info.get("kubeletVersion"),
            "container_runtime": info.get("containerRuntimeVersion"),
            "cpu_count": q.parse_cpu(worker["status"]["capacity"]["cpu"], "capacity cpu") // 1000,
            "allocatable_cpu": worker["status"]["allocatable"]["cpu"],
            "runtime_conversion": self.runtime,
            "images": dict(self.settings.images),
        }

    def sweep(self, kc: KubeClient, namespace: str) -> list[str]:
        removed = sweep_stale_pods(kc, namespace, mf.RunIdentity.here("x", 0).host, pid_alive)
        if removed:
            self.progress(f"removed {len(removed)} pod(s) left by runs that no longer exist: {', '.join(removed)}")
        return removed

    def deploy(self, node: Node, load: LoadPlacement | None = None) -> KubeDeployment:
        refuse_knobs(self.name, node)
        return KubeDeployment(self, node, load, self.settings, self.client)

    def leftovers(self) -> list[str]:
        """The lab's pods still in its namespace, whoever made them (none once every run is over)."""
        return [
            f"a pod of the lab in {self.settings.namespace}: {still_there(p)}"
            for p in self.client.list_pods(self.settings.namespace, mf.MANAGED_SELECTOR)
        ]


def settings_from_config(cfg: dict[str, Any]) -> KubeSettings:
    """config.yaml's `kubernetes` section -> KubeSettings (the schema gave every key a default)."""
    missing = [k for k in ("kubeconfig", "worker_node", "load_node") if not cfg.get(k)]
    if missing:
        raise BackendError(
            "kubernetes backend: set "
            + ", ".join(f"kubernetes.{k}" for k in missing)
            + " (config/config.yaml or --config), see config/config.schema.yaml"
        )
    return KubeSettings(
        kubeconfig=Path(cfg["kubeconfig"]).expanduser(),
        context=cfg.get("context"),
        worker_node=cfg["worker_node"],
        load_node=cfg["load_node"],
        namespace=cfg.get("namespace") or "default",
        images=dict(cfg.get("images") or {}),
        pull_policy=cfg.get("pull_policy") or "IfNotPresent",
        tolerate_control_plane=bool(cfg.get("tolerate_control_plane", True)),
    )


def from_config(
    binaries: dict[str, Path], runtime: str, settings: dict[str, Any], progress: Callable[[str], None]
) -> KubeBackend:
    """The registry's factory (backends.base.make_backend): config.yaml's `kubernetes` section
    names the cluster; the workload runs from images, so `binaries` are not used."""
    return KubeBackend(settings_from_config(settings), runtime=runtime, progress=progress)
