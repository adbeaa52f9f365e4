"""The life of a run's pods: created behind their start gates, waited for, deleted and waited out,
with a guardian process that deletes them even when the runner is SIGKILLed.

Deletion is graceful (client.DELETE_GRACE_S) and waited out: a pod counts as
removed when its API object is gone, which kubelet allows only once it has
stopped the pod's containers and removed its cgroups, and, where the backend
can look at the node (`NodeAccess.containers_gone`), when the node holds none
of its containers either. A forced deletion (grace 0) would remove the object
at once while the containers ran on into the next job.

What a backend changes on its nodes while a deployment lives (kind pins node
containers and pauses the idle cluster; the real node pins its cgroup root) is
a `NodeChanges`, which the deployment applies after the guardian has started
and undoes before it is told all is clean.
"""

from __future__ import annotations

import json
import time
from typing import Any

from throttlelab.backends.base import BackendError, DesignMismatch
from throttlelab.backends.kube import manifests as mf
from throttlelab.platform.kube_client import NotFound, all_running
from throttlelab.backends.kube.run_pods import NodeAccess, RunPods
from throttlelab.host.processes import close_guardian, spawn_guardian

GUARDIAN_MODULE = "throttlelab.backends.kube.kube_guardian"


class KubeGuardian:
    """`python -m <module> '<description>'` holding a pipe: when the runner goes away, however, it
    deletes the run's pods (kube.kube_guardian); kind's guardian also restores the node cpusets."""

    def __init__(self, description: dict[str, Any], module: str = GUARDIAN_MODULE, pass_fds: tuple[int, ...] = ()):
        self.proc = spawn_guardian(module, json.dumps(description), pass_fds=pass_fds, reaped_here=True)

    def close(self, cleaned: bool = False, timeout_s: float = 120.0) -> None:
        """`cleaned`: the deployment removed everything itself, so the guardian has nothing to check."""
        close_guardian(self.proc, timeout_s, cleaned)


class NodeChanges:
    """What a backend changes on its nodes while a deployment lives, and undoes. This one is the
    kubernetes backend's: it changes no node. Every step is called once, in this order: `hold`
    (before anything else), `check`, `describe` and `fds` (for the guardian), `apply`, then `restore`
    (with the pods' deletion, whatever the other does) and `release` (last, always)."""

    #: the guardian that undoes the run when the runner is killed: the kubernetes guardian deletes the
    #: pods; kind's also restores the pins and resumes the paused nodes
    guardian_module = GUARDIAN_MODULE

    def hold(self) -> None:
        """Take what must be held while the deployment lives (kind: the clusters' locks)."""

    def check(self) -> None:
        """Refuse a deployment these nodes cannot run (a BackendError saying why)."""

    def describe(self) -> dict[str, Any]:
        """What the guardian must undo beyond the pods (planned now, before anything changes)."""
        return {}

    def fds(self) -> tuple[int, ...]:
        """Open files the guardian inherits (kind: its cluster locks, so that no other run takes the
        clusters before the guardian has undone this one's changes to them)."""
        return ()

    def apply(self) -> None:
        """Change the nodes as described."""

    def restore(self) -> None:
        """Undo `apply` (idempotent)."""

    def release(self) -> None:
        """Let go of what `hold` took."""


class PodLifecycle:
    """Creates the run's pods, waits until every container waits at its start gate, and deletes
    them, one or all, waiting until nothing of them is left; owns the run's guardian."""

    def __init__(self, pods: RunPods, access: NodeAccess):
        self.pods, self.access = pods, access
        self.guardian: KubeGuardian | None = None

    def guardian_description(self) -> dict[str, Any]:
        """What the kubernetes guardian needs to delete the run's pods."""
        s = self.pods.settings
        return {
            "kubeconfig": str(s.kubeconfig),
            "context": s.context,
            "namespace": self.pods.ns,
            "selector": self.pods.ident.selector,
            "deletion_timeout_s": self.pods.limits.deletion_timeout_s,
        }

    def start_guardian(self, changes: NodeChanges) -> None:
        """The guardian, before anything it guards exists: the pods, and what `changes` describes."""
        description = {**self.guardian_description(), **changes.describe()}
        self.guardian = KubeGuardian(description, changes.guardian_module, changes.fds())

    def close_guardian(self, cleaned: bool) -> None:
        if self.guardian is not None:
            # not cleaned: it repeats every step (idempotent), each within its own limits
            self.guardian.close(cleaned=cleaned, timeout_s=max(120.0, 2 * self.pods.limits.deletion_timeout_s))
            self.guardian = None

    def create(self) -> None:
        """Every pod of the node at once, each container behind its gate, and wait until all run."""
        pods, s, limits = self.pods, self.pods.settings, self.pods.limits
        for pod in pods.node.pods:
            manifest = mf.pod_manifest(
                pod,
                node_name=s.worker_node,
                image_of=s.image,
                ident=pods.ident,
                pull_policy=s.pull_policy,
                runtime_class=pods.runtime_class,
            )
            pods.kc.create_pod(pods.ns, manifest)
        for pod in pods.node.pods:
            pods.live[pod.name] = pods.kc.wait_pod(
                pods.ns,
                mf.pod_name(pod, pods.ident.run),
                all_running,
                s.pod_start_timeout_s,
                "running (every container at its start gate)",
                poll_s=limits.poll_s,
                unschedulable_grace_s=limits.unschedulable_grace_s,
                node=s.worker_node,
            )
        self.check_qos_classes()
        pods.progress(f"{len(pods.node.pods)} pod(s) of run {pods.ident.run} at their start gates on {s.worker_node}")

    def check_qos_classes(self) -> None:
        """The QoS class the API server gave each pod (status.qosClass) must be the design's: it
        decides the pod's parent cgroup and the burstable level's weight (docs/LAB.md §2)."""
        wrong = []
        for pod in self.pods.node.pods:
            live = self.pods.live[pod.name]
            if not (live.get("status") or {}).get("qosClass"):
                continue  # not assigned: nothing to check (pod_qos would derive it from the spec)
            assigned = mf.pod_qos(live)
            if assigned != pod.qos:
                wrong.append(f"{pod.name}: the API server made it {assigned}, the design expects {pod.qos}")
        if wrong:
            raise DesignMismatch(
                "QoS classes on " + self.pods.settings.worker_node + " differ from the design "
                "(kubelet's rule: Guaranteed needs cpu AND memory limits equal to their "
                "requests in every container): " + "; ".join(wrong)
            )

    def await_containers_gone(self, deleted: list[dict[str, Any]]) -> None:
        """Once the API has removed `deleted` (Pod objects as last read before their graceful deletion):
        wait until the node holds none of their containers (`NodeAccess.containers_gone`). Bounded; the
        error names the pods."""
        if not deleted:
            return
        limit = self.pods.limits.containers_gone_timeout_s
        deadline = time.monotonic() + limit
        left = list(deleted)
        while True:
            left = [p for p in left if not self.access.containers_gone(self.pods, p)]
            if not left:
                return
            if time.monotonic() > deadline:
                names = ", ".join(f"{p['metadata']['name']} (uid {p['metadata'].get('uid')})" for p in left)
                node = (left[0].get("spec") or {}).get("nodeName") or self.pods.settings.worker_node
                raise BackendError(
                    f"pod(s) {names}: deleted from the API, but node {node} still holds their containers "
                    f"{limit:.0f} s later; they would run beside the next job: remove "
                    "them on the node (crictl rm -f) and look at kubelet's log"
                )
            time.sleep(self.pods.limits.poll_s)

    def delete_and_wait(self, name: str, pod: dict[str, Any] | None = None) -> bool:
        """Delete one pod of the run (graceful) and wait until nothing of it is left; False when it
        was gone already. `pod`: the Pod object as last read (its uid and container ids, for
        containers_gone); read here when not given."""
        pods = self.pods
        if pod is None:
            try:
                pod = pods.kc.read_pod(pods.ns, name)
            except NotFound:
                return False
        if not pods.kc.delete_pod(pods.ns, name):
            return False
        pods.kc.wait_deleted(pods.ns, [pod], pods.limits.deletion_timeout_s, poll_s=pods.limits.poll_s)
        self.await_containers_gone([pod])
        return True

    def delete_all(self) -> None:
        """Delete every pod of the run by its label and wait until nothing of them is left."""
        pods = self.pods
        limits = pods.limits
        self.await_containers_gone(
            pods.kc.delete_selected(pods.ns, pods.ident.selector, limits.deletion_timeout_s, poll_s=limits.poll_s)
        )
