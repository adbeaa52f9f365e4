"""What monitoring sees (E6): the kubelet's cAdvisor counters of one container, scraped through the
API server's node proxy, with cAdvisor's own sample timestamps."""

from __future__ import annotations

import time
from typing import Any

from throttlelab.backends.base import CADVISOR_COUNTERS, BackendError
from throttlelab.platform.kube_client import Forbidden, KubeError, NotFound
from throttlelab.backends.kube.run_pods import RunPods

#: The cAdvisor series E6 compares with what the workload saw.
CADVISOR_METRICS = tuple(CADVISOR_COUNTERS)


class CadvisorScrape:
    """Scrapes the worker's kubelet for the run's containers."""

    def __init__(self, pods: RunPods):
        self.pods = pods

    def monitoring_sample(self, pod: str, container: str) -> dict[str, Any]:
        """The kubelet's cAdvisor counters of one container, through the API server's node proxy,
        with cAdvisor's own sample timestamp (`t_ms`): rates must be divided by the difference of
        these timestamps, not by the time between scrapes."""
        name = self.pods.pod_name(pod)
        scraped_ns = time.monotonic_ns()
        node = self.pods.settings.worker_node
        try:
            samples = self.pods.kc.cadvisor(node)
        except Forbidden as exc:
            raise BackendError(
                f"E6 reads the kubelet's cAdvisor of node {node} through the API server's node proxy, "
                f"and this user may not: {exc}; the lab needs get on the resource nodes/proxy "
                "(a ClusterRole bound to it)"
            ) from None
        except NotFound as exc:
            raise BackendError(
                f"E6: the API server has no node {node!r} whose cAdvisor to read ({exc}); check the worker node's name"
            ) from None
        except KubeError as exc:
            if "address not allowed" not in str(exc):
                raise
            raise BackendError(
                f"E6 reads the kubelet's cAdvisor of node {node} through the API server's node proxy, "
                f"which refused the node's address ({exc}): it dials only global unicast addresses, "
                "so a kubelet on a loopback or link-local address cannot be scraped; give the node a "
                "routable InternalIP (the real node uses its own bridge's)"
            ) from None
        mine = [
            s
            for s in samples
            if s.name in CADVISOR_METRICS
            and s.labels.get("namespace") == self.pods.ns
            and s.labels.get("pod") == name
            and s.labels.get("container") == container
        ]
        return select_cadvisor(mine, pod, container, scraped_ns)


def select_cadvisor(samples: list[Any], pod: str, container: str, scraped_ns: int) -> dict[str, Any]:
    if not samples:
        raise BackendError(f"cAdvisor has no series for {pod}/{container} yet (it samples every ~10-15 s)")
    stamps = {s.timestamp_ms for s in samples}
    if None in stamps:
        raise BackendError("cAdvisor gave samples without timestamps; E6 needs cAdvisor's own sample times")
    return {
        "type": "cadvisor",
        "pod": pod,
        "container": container,
        "t_ms": max(stamps),
        "timestamps_ms": sorted(stamps),
        "scraped_t_ns": scraped_ns,
        **{s.name: s.value for s in samples},
    }
