"""What the parts of a Kubernetes deployment share: where the pods go, the run's pods on the
cluster, the limits of every wait on them, and what the backend sees of the worker node besides
the API.

A deployment (kube_backend.KubeDeployment) is composed of parts that each do one thing with the
same pods: pod_lifecycle (create them behind their gates, delete them and wait them out),
pod_readback (the design on the node, read back and compared; the counters), pod_workloads (open
a gate, wait for the end, collect the logs), load_generator (the load generator's pod) and
cadvisor_scrape (E6's samples). Each takes the one `RunPods` of its deployment.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from throttlelab.backends.base import BackendError
from throttlelab.backends.kube import manifests as mf
from throttlelab.platform.kube_client import DELETION_TIMEOUT_S, KubeClient
from throttlelab.model.placement import Node

_counter = itertools.count()


class NotTestable(BackendError):
    """This backend cannot run what was asked, for a stated reason (findings: "not testable here")."""


@dataclass(frozen=True)
class KubeSettings:
    """Where the pods go. kind fills these from its clusters; kubernetes from config.yaml."""

    kubeconfig: Path
    context: str | None
    worker_node: str
    load_node: str
    namespace: str = "default"
    images: dict[str, str] = field(
        default_factory=lambda: {"go124mod": "cpulab-kind:go124mod", "go125mod": "cpulab-kind:go125mod"}
    )
    pull_policy: str = "IfNotPresent"
    pod_start_timeout_s: float = 120.0
    tolerate_control_plane: bool = True

    def image(self, variant: str) -> str:
        try:
            return self.images[variant]
        except KeyError:
            raise BackendError(f"no image configured for build {variant!r}; known: {', '.join(self.images)}") from None


@dataclass(frozen=True)
class PodLimits:
    """How long each wait on the cluster may take, and how often it looks."""

    poll_s: float = 0.2  # how often pod states are read while waiting
    unschedulable_grace_s: float = 5.0  # a pod the scheduler refuses this long is an error
    term_grace_s: float = 10.0  # an overdue workload gets this long after SIGTERM before its pod is deleted
    deletion_timeout_s: float = (
        DELETION_TIMEOUT_S  # a deleted pod's object must be gone (its containers stopped) within this
    )
    containers_gone_timeout_s: float = 60.0  # then the node must hold none of its containers within this
    exec_timeout_s: float = 30.0  # a command run in a container (a read-back, a gate) must answer within this
    #: how many times its usual limit each wait may take, a job's own limit included: a slow node (the
    #: real node in an emulated guest) gets each limit that many times over
    patience: float = 1.0

    def scaled(self, patience: float) -> "PodLimits":
        """These limits on a node `patience` times slower (the polling and the scheduler's grace stay)."""
        return replace(
            self,
            term_grace_s=self.term_grace_s * patience,
            deletion_timeout_s=self.deletion_timeout_s * patience,
            containers_gone_timeout_s=self.containers_gone_timeout_s * patience,
            exec_timeout_s=self.exec_timeout_s * patience,
            patience=patience,
        )


class RunPods:
    """One run's pods on the cluster: the client and settings they are reached with, the run's
    identity (its labels and pod names), the node as placed (once deployed, with the worker's
    allocatable CPUs and defaulted requests: manifests.kube_node), each pod's Pod object as last
    read, and commands run in their containers."""

    def __init__(
        self,
        settings: KubeSettings,
        client: KubeClient,
        node: Node,
        limits: PodLimits,
        progress: Callable[[str], None],
        runtime_class: str | None = None,
    ):
        self.settings, self.kc, self.limits, self.progress = settings, client, limits, progress
        self.ns = settings.namespace
        self.ident = mf.RunIdentity.here(f"{os.getpid()}-{next(_counter)}-{secrets.token_hex(2)}", os.getpid())
        self.node = node
        self.live: dict[str, dict[str, Any]] = {}  # model pod -> last Pod object read
        #: the RuntimeClass every pod names: none on an existing cluster or kind (one runc per cluster);
        #: the real node has one per runc (backends/node), named as the runtime conversions are
        self.runtime_class = runtime_class

    def pod_name(self, pod: str) -> str:
        return mf.pod_name(self.node.pod(pod), self.ident.run)

    def exec(self, pod: str, container: str, argv: list[str], timeout_s: float | None = None) -> Any:
        return self.kc.exec(self.ns, self.pod_name(pod), container, argv, timeout_s or self.limits.exec_timeout_s)

    def cat(self, pod: str, container: str, paths: tuple[str, ...]) -> dict[str, str | None]:
        """Files of a running container, read by podgate (the image has no shell); missing -> None."""
        result = self.exec(pod, container, [mf.PODGATE, "cat", *paths])
        try:
            return json.loads(result.stdout)
        except json.JSONDecodeError:
            raise BackendError(
                f"{pod}/{container}: podgate cat gave no JSON (exit {result.returncode}): {result.stderr.strip()[:300]!r}"
            ) from None


class NodeAccess:
    """What a deployment sees of the worker node besides the API. This one is the kubernetes
    backend's on an existing cluster: nothing (only each container's own files, by exec). kind and
    the real node read the node's cgroups (kind/node_cgroups.py)."""

    #: whether the levels above the containers are read back, so that one not found is an error and
    #: the node's other pods are listed for the burstable level (kubernetes: they are unreadable, and
    #: said so)
    strict = False

    @property
    def cgroup_version(self) -> int | None:
        """The node's cgroup version once its levels were found; None before, or where none are."""
        return None

    def cgroup_driver(self) -> str | None:
        """kubelet's cgroup driver on the worker, "systemd" or "cgroupfs", as its layout shows it; None
        where no node is reachable."""
        return None

    def upper_levels(self, pods: RunPods, containers: set[str]) -> dict[str, dict[str, Any]]:
        """design path -> read settings of the node, QoS, pod and pause levels (every level found but
        the design paths in `containers`): nothing readable here."""
        return {}

    def counters(self, pods: RunPods, pod: str, container: str | None) -> dict[str, Any] | None:
        """A pod's or container's counters read on the node; None: read them in the container, by exec."""
        return None

    def containers_gone(self, pods: RunPods, pod: dict[str, Any]) -> bool:
        """Whether the node holds none of this deleted pod's containers (nor its cgroup). `pod` is
        the Pod object as last read before its deletion: metadata.uid, spec.nodeName and
        status.containerStatuses[].containerID ("containerd://<id>") name what to look for.
        Asked only once the API object is gone, which after a graceful deletion kubelet allows
        only when the containers have stopped; with no node access that is all that can be known."""
        return True

    def close(self) -> None:
        """Let go of the node (files held open)."""
