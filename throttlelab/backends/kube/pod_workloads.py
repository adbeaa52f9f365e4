"""The workloads in a run's pods: a container's gate opened (podgate execs cpulab, which becomes
the container's main process), its end waited for, its records and stderr taken from the logs
API; stopped with SIGTERM through podgate, and an overdue one's pod deleted."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from throttlelab.backends.base import BackendError, Output
from throttlelab.backends.kube import manifests as mf
from throttlelab.platform.kube_client import KubeError, container_state
from throttlelab.backends.kube.pod_lifecycle import PodLifecycle
from throttlelab.backends.kube.run_pods import RunPods


@dataclass
class KubeHandle:
    """A started container: its pod's name in the cluster and when its gate opened."""

    pod: str
    container: str
    pod_name: str
    started: float


def records_from_log(text: str, source: str) -> tuple[list[dict[str, Any]], str]:
    """Split a container log (stdout and stderr interleaved by kubelet) into cpulab's records
    (one JSON object with a "type" per line) and the rest (its stderr text)."""
    records, other = [], []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("{"):
            try:
                record = json.loads(stripped)
            except json.JSONDecodeError:
                record = None
            if isinstance(record, dict) and "type" in record:
                records.append(record)
                continue
        if stripped:
            other.append(line)
    return records, "\n".join(other) + ("\n" if other else "")


class PodWorkloads:
    """Starts, waits for and stops the workloads of the run's pods (and of the load generator's pod,
    through `finish`)."""

    def __init__(self, pods: RunPods, lifecycle: PodLifecycle):
        self.pods, self.lifecycle = pods, lifecycle

    def _bindings(self, args: list[str]) -> list[str]:
        """KEY=VALUE for every {{serve:PORT}} in a container's arguments: the address of the pod
        of this node whose serve listens on PORT (start that pod first)."""
        pods = self.pods
        pairs = []
        for key in sorted(set(re.findall(r"\{\{([^{}]+)\}\}", " ".join(args)))):
            port = key.partition(":")[2]
            owners = [p for p in pods.node.pods for c in p.containers if mf.listen_port(c.args) == port]
            if len(owners) != 1:
                raise BackendError(
                    f"{{{{{key}}}}}: {len(owners)} pods of this node listen on port {port}; "
                    "an upstream must be exactly one pod with a fixed port"
                )
            ip = (pods.kc.read_pod(pods.ns, mf.pod_name(owners[0], pods.ident.run)).get("status") or {}).get("podIP")
            if not ip:
                raise BackendError(f"pod {owners[0].name} has no IP yet; start it before its downstream")
            pairs.append(f"{key}={ip}:{port}")
        return pairs

    def start(self, pod: str, container: str) -> KubeHandle:
        p = self.pods.node.pod(pod)
        c = p.container(container)  # KeyError names what is missing
        pairs = self._bindings(mf.container_args(c.args))
        result = self.pods.exec(pod, container, [mf.PODGATE, "open", mf.gate_file(container), *pairs])
        if result.returncode != 0:
            raise BackendError(f"{pod}/{container}: cannot open its start gate: {result.stderr.strip()[:300]!r}")
        return KubeHandle(pod, container, mf.pod_name(p, self.pods.ident.run), time.monotonic())

    def _wait_terminated(self, handle: KubeHandle, timeout_s: float) -> dict[str, Any] | None:
        """The container's terminated state, or None after timeout_s."""
        pods = self.pods
        deadline = time.monotonic() + timeout_s
        last_note = time.monotonic()
        while True:
            pod = pods.kc.read_pod(pods.ns, handle.pod_name)
            pods.live[handle.pod] = pod
            state = container_state(pod, handle.container)
            if "terminated" in state:
                return state["terminated"]
            now = time.monotonic()
            if now > deadline:
                return None
            if now - last_note > 10:
                pods.progress(f"{handle.pod}/{handle.container} running for {now - handle.started:.0f} s")
                last_note = now
            time.sleep(pods.limits.poll_s)

    def _end(self, handle: KubeHandle) -> str:
        """Stop an overdue workload: SIGTERM through podgate (cpulab then writes its summary); if it is
        still running after term_grace_s, delete its pod (kubelet kills from outside: a SIGKILL sent to
        PID 1 from inside its own PID namespace is dropped by the kernel) and wait until kubelet has
        stopped it. Says what it did."""
        try:
            self.pods.exec(handle.pod, handle.container, [mf.PODGATE, "signal", "TERM"])
            if self._wait_terminated(handle, self.pods.limits.term_grace_s) is not None:
                out = self._collect(handle, None)
                return f"stopped with SIGTERM. Last stderr: {out.stderr[-300:]!r}"
        except KubeError:
            pass
        if not self.lifecycle.delete_and_wait(handle.pod_name):
            return "its pod was gone"
        return "its pod was deleted"

    def _collect(self, handle: KubeHandle, terminated: dict[str, Any] | None) -> Output:
        text = self.pods.kc.logs(self.pods.ns, handle.pod_name, handle.container)
        records, stderr = records_from_log(text, f"{handle.pod}/{handle.container}")
        return Output(
            pod=handle.pod,
            container=handle.container,
            returncode=None if terminated is None else terminated.get("exitCode"),
            records=records,
            stderr=stderr,
            wall_s=time.monotonic() - handle.started,
        )

    def finish(self, handle: KubeHandle, timeout_s: float) -> Output:
        """Wait for a started workload's end and collect its output; an overdue one is stopped and
        reported, one that failed too."""
        # a job's limit is its experiment's, for a host; a slow node also reports its end late (the
        # real node in an emulated guest: a 2 s info job still "running" after 30 s)
        timeout_s *= self.pods.limits.patience
        terminated = self._wait_terminated(handle, timeout_s)
        if terminated is None:
            how = self._end(handle)
            raise BackendError(f"{handle.pod}/{handle.container}: still running after {timeout_s:.0f} s; {how}")
        out = self._collect(handle, terminated)
        if out.returncode != 0:
            reason = terminated.get("reason", "")
            raise BackendError(
                f"{out.source}: exited with {out.returncode} ({reason}); stderr: {out.stderr.strip()[-400:]!r}"
            )
        return out

    def run_job(self, pod: str, container: str, timeout_s: float) -> Output:
        return self.finish(self.start(pod, container), timeout_s)

    def stop(self, handle: KubeHandle, timeout_s: float = 10.0) -> Output:
        pods = self.pods
        state = container_state(pods.kc.read_pod(pods.ns, handle.pod_name), handle.container)
        if "running" in state:
            try:
                pods.exec(handle.pod, handle.container, [mf.PODGATE, "signal", "TERM"])
            except KubeError as exc:
                # it may have ended between the read and the exec: a real node refuses the exec then
                # ("container not found") while the pod's status still says running for up to a second
                # (kubelet's relist). finish waits for its end as for any other; one that runs on is
                # stopped there (SIGTERM again, then its pod deleted) and reported, this error with it
                pods.progress(f"{handle.pod}/{handle.container}: SIGTERM not delivered ({exc}); waiting for it to end")
        return self.finish(handle, timeout_s)

    def wait_for_record(self, handle: KubeHandle, record_type: str, timeout_s: float) -> dict[str, Any]:
        pods = self.pods
        deadline = time.monotonic() + timeout_s
        while True:
            # the state first, then the logs: a container that writes its record and ends between a
            # read of its logs and a look at its state must not read as one that ended without it
            state = container_state(pods.kc.read_pod(pods.ns, handle.pod_name), handle.container)
            text = pods.kc.logs(pods.ns, handle.pod_name, handle.container)
            records, stderr = records_from_log(text, f"{handle.pod}/{handle.container}")
            for record in records:
                if record.get("type") == record_type:
                    return self._reachable(handle, record)
            if "terminated" in state:
                raise BackendError(
                    f"{handle.pod}/{handle.container} exited ({state['terminated'].get('exitCode')}) "
                    f"before writing a {record_type!r} record; stderr: {stderr.strip()[-300:]!r}"
                )
            if time.monotonic() > deadline:
                raise BackendError(
                    f"{handle.pod}/{handle.container}: no {record_type!r} record after {timeout_s:.0f} s"
                )
            time.sleep(pods.limits.poll_s)

    def _reachable(self, handle: KubeHandle, record: dict[str, Any]) -> dict[str, Any]:
        """serve's `listening` record names the pod's wildcard address: make it the pod's IP."""
        if record.get("type") != "listening" or "addr" not in record:
            return record
        pod_ip = (self.pods.kc.read_pod(self.pods.ns, handle.pod_name).get("status") or {}).get("podIP")
        _host, _, port = str(record["addr"]).rpartition(":")
        return {**record, "addr": f"{pod_ip}:{port}", "listen_addr": record["addr"]}
