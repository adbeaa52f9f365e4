"""The load generator as a pod of its own on the load node (kind: the control-plane, tolerating its
taint), sending load to the service pods by their IPs; deleted, and waited out, once it has ended."""

from __future__ import annotations

import itertools
import time
from typing import Any

from throttlelab.backends.base import BackendError, Output
from throttlelab.backends.kube import manifests as mf
from throttlelab.platform.kube_client import KubeError, all_running, finished
from throttlelab.backends.kube.pod_lifecycle import PodLifecycle
from throttlelab.backends.kube.pod_workloads import KubeHandle, PodWorkloads
from throttlelab.backends.kube.run_pods import RunPods
from throttlelab.model.placement import LoadPlacement


class LoadGeneratorPods:
    """One pod per `run_load`, requesting the CPUs of the load placement (manifests.load_request_milli)."""

    def __init__(
        self, pods: RunPods, lifecycle: PodLifecycle, workloads: PodWorkloads, placement: LoadPlacement | None
    ):
        self.pods, self.lifecycle, self.workloads, self.placement = pods, lifecycle, workloads, placement
        self._loads = itertools.count()

    def run_load(self, args: list[str], timeout_s: float, variant: str = "go124mod") -> Output:
        """``args``: cpulab's command line after the binary, as every backend takes it ("load" and its flags)."""
        if not args or args[0] != "load":
            raise BackendError(f"the load generator runs `cpulab load ...`; got {list(args)[:2]!r}")
        args = list(args[1:])  # load_manifest puts "load" after cpulab itself
        pods, s, limits = self.pods, self.pods.settings, self.pods.limits
        name = f"tl-load-{pods.ident.run}-{next(self._loads)}"[:63]
        request = mf.load_request_milli(self.placement.cpus if self.placement else None)
        manifest = mf.load_manifest(
            list(args),
            name=name,
            node_name=s.load_node,
            image=s.image(variant),
            ident=pods.ident,
            pull_policy=s.pull_policy,
            tolerate_control_plane=s.tolerate_control_plane,
            cpu_request_milli=request,
            runtime_class=pods.runtime_class,
        )
        pods.kc.create_pod(pods.ns, manifest)
        handle = KubeHandle("load", "generator", name, time.monotonic())
        started: dict[str, Any] | None = None  # the pod as wait_pod last read it
        try:
            try:
                started = pods.kc.wait_pod(
                    pods.ns,
                    name,
                    lambda p: all_running(p) or finished(p),
                    s.pod_start_timeout_s,
                    "started",
                    poll_s=limits.poll_s,
                    unschedulable_grace_s=limits.unschedulable_grace_s,
                    node=s.load_node,
                )
            except KubeError as exc:
                if "Insufficient cpu" in str(exc) or "OutOfcpu" in str(exc):
                    raise KubeError(
                        f"{exc}; the load generator requests {mf.cpu_quantity(request)} CPU "
                        f"(manifests.load_request_milli) on {s.load_node}, more than "
                        "that node has left"
                    ) from None
                raise
            handle.started = time.monotonic()
            return self.workloads.finish(handle, timeout_s)
        finally:
            self.lifecycle.delete_and_wait(name, started)
