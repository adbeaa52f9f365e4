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
guardian process does so even when the runner is SIGKILLed.

Deletion is graceful (client.DELETE_GRACE_S) and waited out: a pod counts as
removed when its API object is gone, which kubelet allows only once it has
stopped the pod's containers and removed its cgroups, and, where the backend
can look at the node (kind: `_containers_gone`), when the node holds none of
its containers either. A forced deletion (grace 0) would remove the object at
once while the containers ran on into the next job.

What this backend asks of an existing cluster is the least the design needs:
the pods of its own namespace, the worker and load nodes by name, and their
cAdvisor (E6). It lists no pods of other namespaces: the only use of them, the
burstable QoS level's other requests, is for a level it cannot read back here.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from throttlelab.model import quantities as q
from throttlelab.host.processes import pid_alive, spawn_guardian, wait_guardian
from throttlelab.model.placement import LoadPlacement, Node
from throttlelab.backends.kube import manifests as mf
from throttlelab.errors import every_step
from throttlelab.backends.base import (
    Backend,
    BackendError,
    Capabilities,
    Deployment,
    DesignMismatch,
    Output,
    Readback,
    refuse_knobs,
)
from throttlelab.backends.kube.cadvisor_scrape import CADVISOR_METRICS, select_cadvisor
from throttlelab.backends.kube.pod_readback import (
    CGROUP_V1_FILES,
    CGROUP_V2_FILES,
    STAT_V1,
    STAT_V2,
    KubeLevel,
    compare,
    kube_design,
    parse_cpu_stat,
    parse_settings,
)
from throttlelab.backends.kube.pod_workloads import KubeHandle, records_from_log
from throttlelab.backends.kube.client import (
    DELETION_TIMEOUT_S,
    Forbidden,
    KubeClient,
    KubeError,
    NotFound,
    all_running,
    container_state,
    finished,
    still_there,
)

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


GUARDIAN_MODULE = "throttlelab.backends.kube.kube_guardian"


class KubeGuardian:
    """`python -m <module> '<description>'` holding a pipe: when the runner goes away, however, it
    deletes the run's pods (kube.kube_guardian); kind's guardian also restores the node cpusets."""

    def __init__(self, description: dict[str, Any], module: str = GUARDIAN_MODULE, pass_fds: tuple[int, ...] = ()):
        self.proc = spawn_guardian(module, json.dumps(description), pass_fds=pass_fds)

    def close(self, cleaned: bool = False, timeout_s: float = 120.0) -> None:
        """`cleaned`: the deployment removed everything itself, so the guardian has nothing to check."""
        if self.proc.stdin:
            try:
                if cleaned:
                    self.proc.stdin.write(b"cleaned\n")
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            wait_guardian(self.proc, timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class KubeDeployment(Deployment):
    """A node's pods on a cluster. kind's deployment extends it with node access."""

    cgroup_version: int | None = None
    poll_s = 0.2  # how often pod states are read while waiting
    unschedulable_grace_s = 5.0  # a pod the scheduler refuses this long is an error
    term_grace_s = 10.0  # an overdue workload gets this long after SIGTERM before its pod is deleted
    deletion_timeout_s = DELETION_TIMEOUT_S  # a deleted pod's object must be gone (its containers stopped) within this
    containers_gone_timeout_s = 60.0  # then the node must hold none of its containers within this
    # Whether the levels above the containers are read back (kind: from the node), so that one not
    # found is an error, and the node's other pods are listed for the burstable level. kubernetes:
    # they are unreadable, and said so.
    strict_upper = False
    guardian_module = GUARDIAN_MODULE  # kind's guardian also restores the nodes it pinned
    exec_timeout_s = 30.0  # a command run in a container (a read-back, a gate) must answer within this

    def __init__(
        self, backend: "KubeBackend", node: Node, load: LoadPlacement | None, settings: KubeSettings, client: KubeClient
    ):
        # a slow node (the real node in an emulated guest) gets each of its limits that many times over
        patience = self.patience = backend.patience
        self.term_grace_s = type(self).term_grace_s * patience
        self.deletion_timeout_s = type(self).deletion_timeout_s * patience
        self.containers_gone_timeout_s = type(self).containers_gone_timeout_s * patience
        self.exec_timeout_s = type(self).exec_timeout_s * patience
        self.backend, self.model, self.load = backend, node, load
        self.settings, self.kc = settings, client
        self.ns = self.settings.namespace
        self.runtime = node.runtime or backend.runtime
        self.ident = mf.RunIdentity.here(f"{os.getpid()}-{next(_counter)}-{secrets.token_hex(2)}", os.getpid())
        self.node: Node = node
        self.levels: list[KubeLevel] = []
        self.live: dict[str, dict[str, Any]] = {}  # model pod -> last Pod object read
        self.guardian: KubeGuardian | None = None
        self._loads = itertools.count()

    # -- hooks kind overrides ----------------------------------------------------------------
    def _check_placement(self) -> None:
        reason = self.backend.untestable(self.model, self.load)
        if reason:
            raise NotTestable(reason)

    def _guardian_description(self) -> dict[str, Any]:
        return {
            "kubeconfig": str(self.settings.kubeconfig),
            "context": self.settings.context,
            "namespace": self.ns,
            "selector": self.ident.selector,
            "deletion_timeout_s": self.deletion_timeout_s,
        }

    def _guardian_fds(self) -> tuple[int, ...]:
        """Open files the guardian inherits (kind: its cluster locks, so that no other run takes the
        clusters before the guardian has undone this one's changes to them)."""
        return ()

    def _runtime_class(self) -> str | None:
        """The RuntimeClass the pods name: none on an existing cluster or kind (one runc per cluster);
        the real node has one per runc (backends/node), named as the runtime conversions are."""
        return None

    def _prepare_nodes(self) -> None:
        """kind: pin the node containers' CPUs (the kubernetes backend changes no node)."""

    def _restore_nodes(self) -> None:
        """kind: restore the node containers' CPUs."""

    def _read_upper_levels(self) -> dict[str, dict[str, Any]]:
        """path -> read settings of the node, QoS and pod levels (and the pause container).
        An existing cluster gives no node access: nothing readable."""
        return {}

    def _containers_gone(self, pod: dict[str, Any]) -> bool:
        """Whether the node holds none of this deleted pod's containers (nor its cgroup). `pod` is
        the Pod object as last read before its deletion: metadata.uid, spec.nodeName and
        status.containerStatuses[].containerID ("containerd://<id>") name what to look for.
        Called only once the API object is gone, which after a graceful deletion kubelet allows
        only when the containers have stopped; an existing cluster gives no node access, so that
        is all the kubernetes backend can know (True). kind looks in the node container."""
        return True

    def _other_pods(self) -> list[dict[str, Any]] | None:
        """The worker's other live pods, whose requests kubelet adds to the burstable level: asked for
        only where that level is read back (listing the pods of every namespace needs cluster-wide
        rights); None otherwise."""
        if not self.strict_upper:
            return None
        return [
            p
            for p in self.kc.pods_on_node(self.settings.worker_node)
            if (p["metadata"].get("labels") or {}).get(mf.LABEL_RUN) != self.ident.run
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]

    def _await_containers_gone(self, pods: list[dict[str, Any]]) -> None:
        """Once the API has removed `pods` (Pod objects as last read before their graceful deletion):
        wait until the node holds none of their containers (`_containers_gone`). Bounded; the error
        names the pods."""
        if not pods:
            return
        deadline = time.monotonic() + self.containers_gone_timeout_s
        left = list(pods)
        while True:
            left = [p for p in left if not self._containers_gone(p)]
            if not left:
                return
            if time.monotonic() > deadline:
                names = ", ".join(f"{p['metadata']['name']} (uid {p['metadata'].get('uid')})" for p in left)
                node = (left[0].get("spec") or {}).get("nodeName") or self.settings.worker_node
                raise BackendError(
                    f"pod(s) {names}: deleted from the API, but node {node} still holds their containers "
                    f"{self.containers_gone_timeout_s:.0f} s later; they would run beside the next job: remove "
                    "them on the node (crictl rm -f) and look at kubelet's log"
                )
            time.sleep(self.poll_s)

    def _delete_and_wait(self, name: str, pod: dict[str, Any] | None = None) -> bool:
        """Delete one pod of the run (graceful) and wait until nothing of it is left; False when it
        was gone already. `pod`: the Pod object as last read (its uid and container ids, for
        _containers_gone); read here when not given."""
        if pod is None:
            try:
                pod = self.kc.read_pod(self.ns, name)
            except NotFound:
                return False
        if not self.kc.delete_pod(self.ns, name):
            return False
        self.kc.wait_deleted(self.ns, [pod], self.deletion_timeout_s, poll_s=self.poll_s)
        self._await_containers_gone([pod])
        return True

    # -- lifecycle ------------------------------------------------------------------------------
    def __enter__(self) -> "KubeDeployment":
        self._check_placement()
        self.backend.sweep(self.kc, self.ns)
        # first: the guardian must exist before what it guards
        self.guardian = KubeGuardian(self._guardian_description(), self.guardian_module, self._guardian_fds())
        try:
            self._prepare_nodes()
            worker = self.kc.node(self.settings.worker_node)
            allocatable = q.parse_cpu(worker["status"]["allocatable"]["cpu"], "allocatable cpu")
            self.node = mf.kube_node(self.model, allocatable)
            self.levels = kube_design(self.node, self.runtime, self._other_pods())
            for pod in self.node.pods:
                manifest = mf.pod_manifest(
                    pod,
                    node_name=self.settings.worker_node,
                    image_of=self.settings.image,
                    ident=self.ident,
                    pull_policy=self.settings.pull_policy,
                    runtime_class=self._runtime_class(),
                )
                self.kc.create_pod(self.ns, manifest)
            for pod in self.node.pods:
                self.live[pod.name] = self.kc.wait_pod(
                    self.ns,
                    mf.pod_name(pod, self.ident.run),
                    all_running,
                    self.settings.pod_start_timeout_s,
                    "running (every container at its start gate)",
                    poll_s=self.poll_s,
                    unschedulable_grace_s=self.unschedulable_grace_s,
                    node=self.settings.worker_node,
                )
            self._check_qos_classes()
            self.backend.progress(
                f"{len(self.node.pods)} pod(s) of run {self.ident.run} at their start gates "
                f"on {self.settings.worker_node}"
            )
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def _check_qos_classes(self) -> None:
        """The QoS class the API server gave each pod (status.qosClass) must be the design's: it
        decides the pod's parent cgroup and the burstable level's weight (SPEC §2)."""
        wrong = []
        for pod in self.node.pods:
            live = self.live[pod.name]
            if not (live.get("status") or {}).get("qosClass"):
                continue  # not assigned: nothing to check (pod_qos would derive it from the spec)
            assigned = mf.pod_qos(live)
            if assigned != pod.qos:
                wrong.append(f"{pod.name}: the API server made it {assigned}, the design expects {pod.qos}")
        if wrong:
            raise DesignMismatch(
                "QoS classes on " + self.settings.worker_node + " differ from the design "
                "(kubelet's rule: Guaranteed needs cpu AND memory limits equal to their "
                "requests in every container): " + "; ".join(wrong)
            )

    def __exit__(self, *exc: object) -> None:
        def delete_pods() -> None:
            self._await_containers_gone(
                self.kc.delete_selected(self.ns, self.ident.selector, self.deletion_timeout_s, poll_s=self.poll_s)
            )

        problem: BackendError | None = None
        cleaned = False
        try:
            try:
                every_step([delete_pods, self._restore_nodes])  # KubeError included
                cleaned = True
            except BackendError as err:
                problem = err
        finally:  # also when a second Ctrl-C interrupts the cleanup: the guardian then does it all again
            if self.guardian is not None:
                # otherwise it repeats both steps (idempotent), each within its own limits
                self.guardian.close(cleaned=cleaned, timeout_s=max(120.0, 2 * self.deletion_timeout_s))
                self.guardian = None
        if problem is not None:
            if not any(exc):
                raise BackendError(f"cleanup of run {self.ident.run} incomplete: {problem}")
            # an error (or Ctrl-C) is on its way out already: it goes on, and this is said, not lost
            print(f"cleanup of run {self.ident.run} incomplete (its guardian tried again): {problem}", file=sys.stderr)

    # -- readback ---------------------------------------------------------------------------------
    def _pod_obj(self, pod: str) -> dict[str, Any]:
        return self.live[pod]

    def _exec(self, pod: str, container: str, argv: list[str], timeout_s: float | None = None) -> Any:
        pod_name = mf.pod_name(self.node.pod(pod), self.ident.run)
        return self.kc.exec(self.ns, pod_name, container, argv, timeout_s or self.exec_timeout_s)

    def _cat(self, pod: str, container: str, paths: tuple[str, ...]) -> dict[str, str | None]:
        """Files of a running container, read by podgate (the image has no shell); missing -> None."""
        result = self._exec(pod, container, [mf.PODGATE, "cat", *paths])
        try:
            return json.loads(result.stdout)
        except json.JSONDecodeError:
            raise BackendError(
                f"{pod}/{container}: podgate cat gave no JSON (exit {result.returncode}): {result.stderr.strip()[:300]!r}"
            ) from None

    def _container_settings(self, pod: str, container: str) -> dict[str, Any]:
        texts = self._cat(pod, container, CGROUP_V2_FILES + CGROUP_V1_FILES)
        named = {path.rsplit("/", 1)[1]: value for path, value in texts.items()}
        if self.cgroup_version is None:
            self.cgroup_version = (
                2 if named.get("cpu.max") is not None else 1 if named.get("cpu.shares") is not None else None
            )
        return {**parse_settings(named), "cgroup": "/sys/fs/cgroup (the container's own, read by exec)"}

    def _cgroup_driver(self) -> str | None:
        """kubelet's cgroup driver on the worker, "systemd" or "cgroupfs", as its layout shows it; None
        where no node is reachable (an existing cluster: only each container's own files are read)."""
        return None

    def _driver_quota(self, designed: dict[str, Any], level: Any, actual: dict[str, Any] | None) -> str:
        """A systemd cgroup driver rounds a quota up to whole 10 ms per second (quantities.systemd_quota):
        under it the design's quota is the rounded one (also where the driver is unknown and the quota read
        is exactly that rounding). Returns what to add to the level's formula."""
        quota = designed["quota_us"]
        rounded = q.systemd_quota(quota, level.period_us)
        if quota is None or rounded == quota:
            return ""
        driver = self._cgroup_driver()
        if driver == "systemd" or (driver is None and actual is not None and actual.get("quota_us") == rounded):
            designed["quota_us"] = rounded
            how = "systemd cgroup driver" if driver else "a systemd cgroup driver's rounding, as read"
            return f"; {how}: quota rounded up to whole 10 ms per second, {quota} -> {rounded} us"
        return ""

    def verify(self) -> list[Readback]:
        upper = self._read_upper_levels()
        results = []
        for kl in self.levels:
            level = kl.design
            designed: dict[str, Any] = {
                "quota_us": level.quota_us,
                "period_us": level.period_us,
                "weight": level.weight,
            }
            if level.cpus:
                designed["cpus"] = level.cpus
            if level.level == "container":
                actual = self._container_settings(level.pod, level.container)
            else:
                actual = upper.get(level.path)
            if self.cgroup_version == 1:
                designed["shares"] = kl.v1_shares
            formula = level.formula + self._driver_quota(designed, level, actual)
            info = {**designed, "formula": formula, "pod": level.pod, "container": level.container}
            if actual is None:
                missing = [f"not found: {self.backend.unreadable_reason}"] if self.strict_upper else []
                results.append(
                    Readback(level.level, level.path, info, {"unreadable": self.backend.unreadable_reason}, missing)
                )
                continue
            results.append(
                Readback(level.level, level.path, info, actual, compare(designed, actual, self.cgroup_version))
            )
        for path, actual in upper.items():  # the pause containers: kubelet gives them no request (weight 1)
            if path.endswith("/pause"):
                designed = {"quota_us": None, "period_us": q.DEFAULT_PERIOD_US, "weight": 1, "shares": q.MIN_SHARES}
                info = {**designed, "formula": "pause container: no request -> shares 2 -> weight 1"}
                results.append(Readback("pause", path, info, actual, compare(designed, actual, self.cgroup_version)))
        bad = [r for r in results if r.mismatches]
        if bad:
            lines = [f"  {r.path}: " + "; ".join(r.mismatches) for r in bad]
            hint = ""
            if any(r.level == "container" and any(m.startswith("weight") for m in r.mismatches) for r in bad):
                hint = (
                    f"\n(the design assumed the {self.runtime} conversion of shares to weights; if this cluster's "
                    "runc converts the other way, set runtime accordingly)"
                )
            raise DesignMismatch(
                f"cgroup readback on {self.settings.worker_node} differs from the SPEC §2 design:\n"
                + "\n".join(lines)
                + hint
            )
        return results

    # -- workloads ----------------------------------------------------------------------------------
    def _bindings(self, args: list[str]) -> list[str]:
        """KEY=VALUE for every {{serve:PORT}} in a container's arguments: the address of the pod
        of this node whose serve listens on PORT (start that pod first)."""
        pairs = []
        for key in sorted(set(re.findall(r"\{\{([^{}]+)\}\}", " ".join(args)))):
            port = key.partition(":")[2]
            owners = [p for p in self.node.pods for c in p.containers if mf.listen_port(c.args) == port]
            if len(owners) != 1:
                raise BackendError(
                    f"{{{{{key}}}}}: {len(owners)} pods of this node listen on port {port}; "
                    "an upstream must be exactly one pod with a fixed port"
                )
            ip = (self.kc.read_pod(self.ns, mf.pod_name(owners[0], self.ident.run)).get("status") or {}).get("podIP")
            if not ip:
                raise BackendError(f"pod {owners[0].name} has no IP yet; start it before its downstream")
            pairs.append(f"{key}={ip}:{port}")
        return pairs

    def start(self, pod: str, container: str) -> KubeHandle:
        p = self.node.pod(pod)
        c = p.container(container)  # KeyError names what is missing
        pairs = self._bindings(mf.container_args(c.args))
        result = self._exec(pod, container, [mf.PODGATE, "open", mf.gate_file(container), *pairs])
        if result.returncode != 0:
            raise BackendError(f"{pod}/{container}: cannot open its start gate: {result.stderr.strip()[:300]!r}")
        return KubeHandle(pod, container, mf.pod_name(p, self.ident.run), time.monotonic())

    def _wait_terminated(self, handle: KubeHandle, timeout_s: float) -> dict[str, Any] | None:
        """The container's terminated state, or None after timeout_s."""
        deadline = time.monotonic() + timeout_s
        last_note = time.monotonic()
        while True:
            pod = self.kc.read_pod(self.ns, handle.pod_name)
            self.live[handle.pod] = pod
            state = container_state(pod, handle.container)
            if "terminated" in state:
                return state["terminated"]
            now = time.monotonic()
            if now > deadline:
                return None
            if now - last_note > 10:
                self.backend.progress(f"{handle.pod}/{handle.container} running for {now - handle.started:.0f} s")
                last_note = now
            time.sleep(self.poll_s)

    def _end(self, handle: KubeHandle) -> str:
        """Stop an overdue workload: SIGTERM through podgate (cpulab then writes its summary); if it is
        still running after term_grace_s, delete its pod (kubelet kills from outside: a SIGKILL sent to
        PID 1 from inside its own PID namespace is dropped by the kernel) and wait until kubelet has
        stopped it. Says what it did."""
        try:
            self._exec(handle.pod, handle.container, [mf.PODGATE, "signal", "TERM"])
            if self._wait_terminated(handle, self.term_grace_s) is not None:
                out = self._collect(handle, None)
                return f"stopped with SIGTERM. Last stderr: {out.stderr[-300:]!r}"
        except KubeError:
            pass
        if not self._delete_and_wait(handle.pod_name):
            return "its pod was gone"
        return "its pod was deleted"

    def _collect(self, handle: KubeHandle, terminated: dict[str, Any] | None) -> Output:
        text = self.kc.logs(self.ns, handle.pod_name, handle.container)
        records, stderr = records_from_log(text, f"{handle.pod}/{handle.container}")
        return Output(
            pod=handle.pod,
            container=handle.container,
            returncode=None if terminated is None else terminated.get("exitCode"),
            records=records,
            stderr=stderr,
            wall_s=time.monotonic() - handle.started,
        )

    def _finish(self, handle: KubeHandle, timeout_s: float) -> Output:
        # a job's limit is its experiment's, for a host; a slow node also reports its end late (the
        # real node in an emulated guest: a 2 s info job still "running" after 30 s)
        timeout_s *= self.patience
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
        return self._finish(self.start(pod, container), timeout_s)

    def stop(self, handle: KubeHandle, timeout_s: float = 10.0) -> Output:
        state = container_state(self.kc.read_pod(self.ns, handle.pod_name), handle.container)
        if "running" in state:
            try:
                self._exec(handle.pod, handle.container, [mf.PODGATE, "signal", "TERM"])
            except KubeError as exc:
                # it may have ended between the read and the exec: a real node refuses the exec then
                # ("container not found") while the pod's status still says running for up to a second
                # (kubelet's relist). _finish waits for its end as for any other; one that runs on is
                # stopped there (SIGTERM again, then its pod deleted) and reported, this error with it
                self.backend.progress(
                    f"{handle.pod}/{handle.container}: SIGTERM not delivered ({exc}); waiting for it to end"
                )
        return self._finish(handle, timeout_s)

    def run_load(self, args: list[str], timeout_s: float, variant: str = "go124mod") -> Output:
        """``args``: cpulab's command line after the binary, as every backend takes it ("load" and its flags)."""
        if not args or args[0] != "load":
            raise BackendError(f"the load generator runs `cpulab load ...`; got {list(args)[:2]!r}")
        args = list(args[1:])  # load_manifest puts "load" after cpulab itself
        name = f"tl-load-{self.ident.run}-{next(self._loads)}"[:63]
        request = mf.load_request_milli(self.load.cpus if self.load else None)
        manifest = mf.load_manifest(
            list(args),
            name=name,
            node_name=self.settings.load_node,
            image=self.settings.image(variant),
            ident=self.ident,
            pull_policy=self.settings.pull_policy,
            tolerate_control_plane=self.settings.tolerate_control_plane,
            cpu_request_milli=request,
            runtime_class=self._runtime_class(),
        )
        self.kc.create_pod(self.ns, manifest)
        handle = KubeHandle("load", "generator", name, time.monotonic())
        started: dict[str, Any] | None = None  # the pod as wait_pod last read it
        try:
            try:
                started = self.kc.wait_pod(
                    self.ns,
                    name,
                    lambda p: all_running(p) or finished(p),
                    self.settings.pod_start_timeout_s,
                    "started",
                    poll_s=self.poll_s,
                    unschedulable_grace_s=self.unschedulable_grace_s,
                    node=self.settings.load_node,
                )
            except KubeError as exc:
                if "Insufficient cpu" in str(exc) or "OutOfcpu" in str(exc):
                    raise KubeError(
                        f"{exc}; the load generator requests {mf.cpu_quantity(request)} CPU "
                        f"(manifests.load_request_milli) on {self.settings.load_node}, more than "
                        "that node has left"
                    ) from None
                raise
            handle.started = time.monotonic()
            return self._finish(handle, timeout_s)
        finally:
            self._delete_and_wait(name, started)

    def _stat_container(self, pod: str, container: str) -> dict[str, Any]:
        if self.cgroup_version == 1:
            texts = self._cat(pod, container, STAT_V1)
            return parse_cpu_stat(texts[STAT_V1[0]] or "", texts[STAT_V1[1]])
        return parse_cpu_stat(self._cat(pod, container, (STAT_V2,))[STAT_V2] or "")

    def _stat_pod(self, pod: str) -> dict[str, Any]:
        p = self.node.pod(pod)
        if len(p.containers) == 1:
            return {
                **self._stat_container(pod, p.containers[0].name),
                "level": "container (the pod level is not readable without node access)",
            }
        raise NotTestable(f"pod-level counters of {pod} need node access: {self.backend.unreadable_reason}")

    def read_stat(self, pod: str, container: str | None = None) -> dict[str, Any]:
        """The counters, stamped with the middle of the read: an exec takes tens of milliseconds on
        a real cluster, and the files are read somewhere inside it, not when it has returned."""
        before = time.monotonic_ns()
        stat = self._stat_container(pod, container) if container else self._stat_pod(pod)
        return {**stat, "t_ns": (before + time.monotonic_ns()) // 2}

    def wait_for_record(self, handle: KubeHandle, record_type: str, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            # the state first, then the logs: a container that writes its record and ends between a
            # read of its logs and a look at its state must not read as one that ended without it
            state = container_state(self.kc.read_pod(self.ns, handle.pod_name), handle.container)
            text = self.kc.logs(self.ns, handle.pod_name, handle.container)
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
            time.sleep(self.poll_s)

    def _reachable(self, handle: KubeHandle, record: dict[str, Any]) -> dict[str, Any]:
        """serve's `listening` record names the pod's wildcard address: make it the pod's IP."""
        if record.get("type") != "listening" or "addr" not in record:
            return record
        pod_ip = (self.kc.read_pod(self.ns, handle.pod_name).get("status") or {}).get("podIP")
        _host, _, port = str(record["addr"]).rpartition(":")
        return {**record, "addr": f"{pod_ip}:{port}", "listen_addr": record["addr"]}

    # -- what monitoring sees (E6) -------------------------------------------------------------------
    def monitoring_sample(self, pod: str, container: str) -> dict[str, Any]:
        """The kubelet's cAdvisor counters of one container, through the API server's node proxy,
        with cAdvisor's own sample timestamp (`t_ms`): rates must be divided by the difference of
        these timestamps, not by the time between scrapes."""
        name = mf.pod_name(self.node.pod(pod), self.ident.run)
        scraped_ns = time.monotonic_ns()
        node = self.settings.worker_node
        try:
            samples = self.kc.cadvisor(node)
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
            and s.labels.get("namespace") == self.ns
            and s.labels.get("pod") == name
            and s.labels.get("container") == container
        ]
        return select_cadvisor(mine, pod, container, scraped_ns)


# -- the backend ---------------------------------------------------------------------------------------


class KubeBackend(Backend):
    """An existing cluster (kubeconfig + context); kind's backend extends it."""

    name = "kubernetes"
    unreadable_reason = "an existing cluster gives no access to its nodes; only the container level is read (exec)"
    node_ready_timeout_s = 120.0  # the preflight waits this long for the worker and load nodes to be Ready
    patience = 1.0  # how many times its usual limit each wait on the cluster may take (KubeDeployment)

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
