"""A real HTTP server on 127.0.0.1 that speaks the few Kubernetes API endpoints the lab uses.

Not a mock of our functions: the kubernetes Python client talks to it over
TCP exactly as it talks to an API server (kubeconfig, bearer token, JSON over
HTTP/1.1, exec over a WebSocket with the v4.channel.k8s.io subprotocol). Paths,
verbs, status codes and JSON shapes follow the Kubernetes v1.34 API reference
(core/v1 Pod, Node, Namespace, Status; pods/log, pods/exec, nodes/proxy), and
the cluster behaves as the API server, the scheduler and kubelet do where the
lab's code could otherwise get it wrong:

* scheduling runs the scheduler's filters in its order (TaintToleration, then
  NodeAffinity: nodeSelector and required node affinity, matchExpressions on
  labels, matchFields on metadata.name; then NodeResourcesFit on CPU requests)
  and sums up the reasons per node in the scheduler's own message; a required
  affinity on metadata.name narrows the nodes first, as its PreFilter does. A
  refused pod stays Pending with PodScheduled=False/Unschedulable and is
  retried when read; a node can be NotReady (its not-ready taint) for a while;
* kubelet's admission: a pod bound to a node whose kubelet counts too little
  CPU left (`kubelet_allocatable`, or a pod that names its node itself) is
  rejected: phase Failed, reason OutOfcpu, as kubelet reports it;
* status.qosClass is the API server's rule (cpu AND memory: `_qos`);
* an image that is not loaded on the node, with imagePullPolicy Never, leaves
  the container waiting with reason ErrImageNeverPull;
* a gated container (our podgate) is running but idle until `podgate open`
  is exec'd in it; then it prints its scripted output and ends after its
  scripted run time, or when `podgate signal TERM` is exec'd in it; a podgate
  that cannot wait (`Script.gate_error`) ends as it starts, exit 1;
* exec takes time (`exec_latency_s`: the command runs in its middle) and costs
  the container CPU (`exec_cpu_us` per exec, added to its cpu.stat usage, as
  the exec'd process runs in the container's cgroup; `charged_us` reads it);
* deletion is the API server's and kubelet's: with a grace period (>= 1 s) the
  object stays, Terminating, while its containers get SIGTERM (podgate and
  cpulab stop at once, a workload that ignores it is killed when the grace
  period ends), and goes `deletion_s` after the last of them stopped; with
  grace 0 (forced) the object goes at once while the containers run on for
  `force_linger_s` (kubelet kills them later), so "the object is gone" then
  proves nothing: `running_containers()` shows what still runs on the nodes.
  An unscheduled pod or one that has ended is deleted at once (nothing runs);
* a restricted user (`restricted_to`: a namespace) may do what a Role in that
  namespace and a ClusterRole for getting nodes and their proxy allow: no pods
  of other namespaces, no list of all pods or nodes, no namespace objects (403
  with the API server's message);
* the node proxy serves the kubelet's cAdvisor metrics (`/metrics/cadvisor`,
  Prometheus text with cAdvisor's own sample timestamps) of the containers
  running on that node, pod series (container="") and container series
  (container, pod, namespace, id, image, name labels), as cAdvisor does: a
  housekeeping loop (`housekeeping_s`, kubelet's 10 s) reads each container's
  cpu.stat when it starts and then every interval, and a scrape gets the
  latest cached reading, not the counters of the moment; the CFS series only
  for a cgroup with periods (a CPU limit); a container's series go when it
  stops. The counters come from the cpu.stat file of the stand-in node's
  fixture tree where there is one (`cgroup_dir`), else from what
  `container_cgroup` says. An unknown node is 404; a restricted user without
  get on nodes/proxy (`proxy_allowed` False) is 403, with the API server's
  messages. `recorded_cadvisor`: serve recorded texts in turn instead.

Every request is recorded (method, path, query, body) so tests can check what
was sent, e.g. validate every Pod manifest against the Kubernetes schemas.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import itertools
import json
import math
import re
import shutil
import struct
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, unquote, urlparse

from throttlelab.model.quantities import parse_cpu

FIXTURES = Path(__file__).parent / "fixtures" / "kube_api"
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#: A pod's terminationGracePeriodSeconds when its spec names none (the API server's default).
DEFAULT_GRACE_S = 30


def recorded_cadvisor() -> list[str]:
    """Two scrapes of a kind worker's /metrics/cadvisor recorded 20 s apart (pod tl-e6-abc123), for
    FakeKubeAPI.recorded_cadvisor: cAdvisor's own sample times in them are 12.149 s apart (docs/LAB.md §4, E6)."""
    return [(FIXTURES / "cadvisor-1.txt").read_text(), (FIXTURES / "cadvisor-2.txt").read_text()]


def proxyable(node: dict[str, Any]) -> bool:
    """Whether the API server's node proxy would dial this node: the address it prefers (InternalIP) must
    be global unicast in Go's sense, so neither loopback nor link-local nor unspecified (registry/core/node's
    isProxyableHostname: "address not allowed" otherwise). A real node found it (docs/KUBE_REAL.md)."""
    import ipaddress

    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            ip = ipaddress.ip_address(address["address"])
            return not (ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified)
    return True


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_object(code: int, reason: str, message: str, details: dict | None = None) -> dict[str, Any]:
    """metav1.Status as the API server returns it for a failed request."""
    out = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        out["details"] = details
    return out


@dataclass
class Script:
    """What a container does once its gate is opened."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    run_s: float | None = 0.0  # None: runs until signalled or its pod is deleted
    term_exit_code: int = 0  # exit code after SIGTERM (cpulab handles it and exits 0)
    ignores_term: bool = False  # a workload that does not stop on SIGTERM (only deleting its pod ends it)
    stuck_s: float = 0.0  # how long it outlives the SIGTERM or SIGKILL of a deletion (blocked in the kernel)
    gate_error: str | None = None  # podgate cannot wait at the gate: it writes this and exits 1 as it starts
    cgroup: dict[str, str] = field(default_factory=dict)  # file -> content, for `podgate cat`


@dataclass
class _Container:
    name: str
    script: Script
    spec: dict[str, Any]
    opened_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    stop_at: float | None = None  # when a deletion's SIGTERM or SIGKILL ends it
    stop_code: int | None = None
    execs: int = 0
    exec_cpu_us: int = 0  # CPU time of the processes exec'd in it (they run in its cgroup)
    container_id: str = field(default_factory=lambda: uuid.uuid4().hex + uuid.uuid4().hex[:32])

    @property
    def gated(self) -> bool:
        return _is_gated(self.spec)


@dataclass
class _Pod:
    obj: dict[str, Any]
    created: float  # when it was bound to its node (its containers start pending_s later)
    node: str | None
    unschedulable: str | None
    containers: dict[str, _Container]
    deleted_at: float | None = None
    grace: int | None = None  # the deletion's grace period
    rejected: str | None = None  # kubelet's admission refused it (OutOfcpu)
    ip: str = ""


class FakeKubeAPI:
    """State of the fake cluster; `start()` serves it on 127.0.0.1:<free port>."""

    def __init__(
        self,
        token: str = "throttlelab-test-token",
        pending_s: float = 0.15,
        deletion_s: float = 0.3,
        stop_s: float = 0.05,
        force_linger_s: float = 2.0,
        exec_latency_s: float = 0.01,
        exec_cpu_us: int = 20_000,
        housekeeping_s: float = 10.0,
    ):
        self.token = token
        self.pending_s = pending_s
        self.deletion_s = deletion_s  # kubelet's cleanup after a deleted pod's last container stopped
        self.stop_s = stop_s  # how long a container takes to exit on SIGTERM (podgate, cpulab)
        self.force_linger_s = force_linger_s  # how long a force-deleted pod's containers run on (>= kubelet's 2 s)
        self.exec_latency_s = exec_latency_s  # an exec's round trip (API server, kubelet, runc exec)
        self.exec_cpu_us = exec_cpu_us  # CPU one exec costs the container (runc init and the command)
        self.runc = "new"  # which conversion the fake node's runc applies (docs/LAB.md §2)
        self.qos_rule: Callable[[list[dict[str, Any]]], str] = _qos  # the API server's (and kubelet's) QoS rule
        # kubelet's side, for a stand-in kind node: when set, every pod scheduled to `cgroup_node` gets
        # its cgroup directories written under `cgroup_dir`, laid out as kubelet (systemd driver,
        # cgroup root /kubelet, cgroup v2) and runc lay them out in a kind node, and removed when
        # kubelet would (its containers stopped, its object gone); `node_cpus()` says what the
        # node's cpuset is now (what kubepods' cpuset.cpus.effective shows)
        self.cgroup_dir: Path | None = None
        self.cgroup_node = "throttlelab-new-worker"
        self.node_cpus = lambda: "0-9"
        self._nodes: list[dict[str, Any]] = json.loads((FIXTURES / "nodes.json").read_text())["items"]
        # node name -> monotonic time until which it is NotReady (tainted not-ready), as a node
        # that is still joining after `kind create --wait` (which waits for the control plane only)
        self.not_ready_until: dict[str, float] = {}
        # node name -> how many more reads of a pod the scheduler refused it stays NotReady for: it turns
        # Ready right after the last of them, so the client's next read of the node sees it Ready while the
        # pod it has just read is still refused (the scheduler retries at the pod's next read)
        self.not_ready_refusals: dict[str, int] = {}
        # node name -> the CPU kubelet's admission counts as allocatable ("500m"), when it differs from
        # what the Node object says (which the scheduler uses): kubelet then rejects pods (OutOfcpu)
        self.kubelet_allocatable: dict[str, str] = {}
        # a namespace: the user may only do what a Role there (pods, pods/log, pods/exec) and a
        # ClusterRole for get nodes and nodes/proxy allow; None: cluster-admin
        self.restricted_to: str | None = None
        self.system_pods: list[dict[str, Any]] = json.loads((FIXTURES / "system-pods.json").read_text())["items"]
        self.namespaces = {"default", "kube-system"}
        self.images: set[str] = set()  # images loaded on every node ("kind load")
        self.scripts: dict[str, Script] = {}  # container name -> script (default: Script())
        # cAdvisor: its housekeeping interval, and container id -> its readings (Unix ms, counters), oldest first
        self.housekeeping_s = housekeeping_s
        self.readings: dict[str, list[tuple[int, dict[str, int]]]] = {}
        self.proxy_allowed = True  # the restricted user's ClusterRole has get on nodes/proxy
        # the RuntimeClasses that exist: a pod naming another is refused by the RuntimeClass admission
        # plugin, as the real API server does (docs/KUBE_REAL.md)
        self.runtime_classes: set[str] = {"runc-new", "runc-old"}
        # recorded /metrics/cadvisor texts served in turn instead of the live ones (their pod names
        # replaced by cadvisor_pods: recorded -> live), for tests of what cAdvisor wrote in the lab
        self.recorded_cadvisor: list[str] | None = None
        self.cadvisor_calls = 0
        self.cadvisor_pods: dict[str, str] = {}
        self._housekeeping_stop = threading.Event()
        self.pods: dict[tuple[str, str], _Pod] = {}
        self.orphans: list[_Pod] = []  # force-deleted pods whose containers still run on their node
        self.requests: list[tuple[str, str, dict[str, list[str]], Any]] = []
        self.execs: list[tuple[int, str, str, list[str]]] = []  # (monotonic ns when it ran, pod, container, argv)
        self.lock = threading.RLock()
        self._ips = itertools.count(10)
        self.server: ThreadingHTTPServer | None = None

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> "FakeKubeAPI":
        api = self

        class Handler(_Handler):
            state = api

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        threading.Thread(target=self._housekeeping, name="cadvisor-housekeeping", daemon=True).start()
        return self

    def stop(self) -> None:
        self._housekeeping_stop.set()
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def write_kubeconfig(self, path: Path, context: str = "kind-throttlelab-new", token: str | None = None) -> Path:
        """A kubeconfig with one cluster, one user (bearer token) and one context."""
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": token or self.token}}],
            "contexts": [{"name": context, "context": {"cluster": "fake", "user": "fake", "namespace": "default"}}],
            "current-context": context,
        }
        path.write_text(json.dumps(cfg))
        return path

    # -- what the tests look at -----------------------------------------------------------
    def sent(self, method: str, pattern: str) -> list[Any]:
        return [body for m, p, _q, body in self.requests if m == method and re.fullmatch(pattern, p)]

    def live_pods(self) -> list[str]:
        """The names of the Pod objects the API still has (Terminating ones included)."""
        with self.lock:
            self._reap()
            return sorted(name for (_ns, name) in self.pods)

    def running_containers(self, node: str | None = None) -> list[dict[str, Any]]:
        """What runs on the nodes now (or on one node): every started container that has not
        stopped, whether its Pod object still exists or was force-deleted."""
        now = time.monotonic()
        with self.lock:
            self._reap()
            return [
                {
                    "pod": pod.obj["metadata"]["name"],
                    "uid": pod.obj["metadata"]["uid"],
                    "container": c.name,
                    "container_id": c.container_id,
                    "node": pod.node,
                }
                for pod in [*self.pods.values(), *self.orphans]
                for c in pod.containers.values()
                if (node is None or pod.node == node) and self._running(pod, c, now)
            ]

    def charged_us(self, pod_name: str, container: str) -> int:
        """The CPU time the execs into a container have cost it so far (in its cpu.stat usage)."""
        with self.lock:
            pod = next(p for p in [*self.pods.values(), *self.orphans] if p.obj["metadata"]["name"] == pod_name)
            return pod.containers[container].exec_cpu_us

    # -- the cluster's behaviour -----------------------------------------------------------------
    def not_ready_for(self, node: str, seconds: float) -> None:
        self.not_ready_until[node] = time.monotonic() + seconds

    def not_ready_for_refusals(self, node: str, refusals: int) -> None:
        """`node` is NotReady until a pod refused by the scheduler has been read `refusals` times."""
        self.not_ready_until[node] = math.inf
        self.not_ready_refusals[node] = refusals

    def _count_refusal(self, rendered: dict[str, Any]) -> None:
        """A pod read while the scheduler refuses it: the nodes waiting for refusals count it."""
        conditions = (rendered.get("status") or {}).get("conditions") or []
        if not any(c.get("reason") == "Unschedulable" for c in conditions):
            return
        for node in list(self.not_ready_refusals):
            self.not_ready_refusals[node] -= 1
            if self.not_ready_refusals[node] <= 0:
                del self.not_ready_refusals[node]
                self.not_ready_until.pop(node, None)

    @property
    def nodes(self) -> list[dict[str, Any]]:
        """The Node objects as of now: a node within its NotReady time has Ready=False and the
        node.kubernetes.io/not-ready:NoSchedule taint, as the node lifecycle controller sets."""
        out = []
        now = time.monotonic()
        for node in self._nodes:
            name = node["metadata"]["name"]
            if now < self.not_ready_until.get(name, 0.0):
                node = copy.deepcopy(node)
                for cond in node["status"]["conditions"]:
                    if cond["type"] == "Ready":
                        cond.update(
                            status="False",
                            reason="KubeletNotReady",
                            message="container runtime network not ready: NetworkReady=false",
                        )
                node["spec"]["taints"] = [
                    *(node["spec"].get("taints") or []),
                    {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                ]
            out.append(node)
        return out

    def _node(self, name: str) -> dict[str, Any] | None:
        return next((n for n in self.nodes if n["metadata"]["name"] == name), None)

    # -- the scheduler -----------------------------------------------------------------------------
    def _requested(self, node: str, exclude: _Pod | None = None) -> int:
        """Σ CPU requests (milli) of the pods that hold CPU on a node: the system pods and ours,
        Terminating ones included (the scheduler frees their requests when their objects go)."""
        now = time.monotonic()
        total = sum(
            _pod_request(p)
            for p in self.system_pods
            if p["spec"].get("nodeName") == node and p["status"].get("phase") == "Running"
        )
        for pod in self.pods.values():
            if pod is exclude or pod.node != node or pod.rejected:
                continue
            if self._phase(pod, now) in ("Succeeded", "Failed"):
                continue
            total += _pod_request(pod.obj)
        return total

    def _filter(self, node: dict[str, Any], spec: dict[str, Any], request: int) -> str | None:
        """The scheduler's Filter plugins in their order; the first that refuses gives the node's reason."""
        for taint in node["spec"].get("taints") or []:
            if taint["effect"] in ("NoSchedule", "NoExecute") and not _tolerates(spec.get("tolerations") or [], taint):
                return f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"
        if not _node_matches(node, spec):
            return "node(s) didn't match Pod's node affinity/selector"
        allocatable = _milli(node["status"]["allocatable"]["cpu"]) or 0
        if request > allocatable - self._requested(node["metadata"]["name"]):
            return "Insufficient cpu"
        return None

    def _schedule(self, spec: dict[str, Any]) -> tuple[str | None, str | None]:
        """(node, None), or (None, the scheduler's message) as kube-scheduler's FitError words it."""
        nodes = self.nodes
        narrowed = _affinity_node_names(spec)  # NodeAffinity's PreFilter: only the named nodes are tried
        request = _pod_request({"spec": spec})
        reasons: Counter[str] = Counter()
        for node in nodes:
            name = node["metadata"]["name"]
            if narrowed is not None and name not in narrowed:
                reasons["node(s) didn't satisfy plugin(s) [NodeAffinity]"] += 1
                continue
            why = self._filter(node, spec, request)
            if why is None:
                return name, None
            reasons[why] += 1
        total = len(nodes)
        summary = ", ".join(sorted(f"{n} {r}" for r, n in reasons.items()))
        return None, (
            f"0/{total} nodes are available: {summary}. preemption: 0/{total} nodes are available: "
            f"{total} Preemption is not helpful for scheduling."
        )

    def _bind(self, pod: _Pod, node: str, now: float) -> None:
        """The pod is on `node`: kubelet admits it (or rejects it: OutOfcpu) and makes its cgroups."""
        pod.node, pod.created = node, now
        pod.obj["spec"]["nodeName"] = node
        spec_node = self._node(node)
        allocatable = (
            _milli(self.kubelet_allocatable.get(node))
            if node in self.kubelet_allocatable
            else (_milli(spec_node["status"]["allocatable"]["cpu"]) if spec_node else 0)
        )
        used, asked = self._requested(node, exclude=pod), _pod_request(pod.obj)
        if used + asked > (allocatable or 0):
            pod.rejected = (
                f"Pod was rejected: Node didn't have enough resource: cpu, requested: {asked}, "
                f"used: {used}, capacity: {allocatable}"
            )
            return
        if self.cgroup_dir is not None and node == self.cgroup_node:
            self._write_cgroups()

    def create(self, namespace: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            if namespace not in self.namespaces:
                return 404, status_object(
                    404, "NotFound", f'namespaces "{namespace}" not found', {"name": namespace, "kind": "namespaces"}
                )
            name = (body.get("metadata") or {}).get("name")
            containers = (body.get("spec") or {}).get("containers") or []
            if not name or not containers:
                return 422, status_object(
                    422,
                    "Invalid",
                    "Pod is invalid: metadata.name and spec.containers are required",
                    {"name": name or "", "kind": "Pod"},
                )
            if (namespace, name) in self.pods:
                return 409, status_object(
                    409, "AlreadyExists", f'pods "{name}" already exists', {"name": name, "kind": "pods"}
                )
            for i, c in enumerate(containers):  # the API server's validation: a request never above its limit
                res = c.get("resources") or {}
                req, lim = (res.get("requests") or {}).get("cpu"), (res.get("limits") or {}).get("cpu")
                if (
                    req is not None
                    and lim is not None
                    and parse_cpu(str(req), "request") > parse_cpu(str(lim), "limit")
                ):
                    return 422, status_object(
                        422,
                        "Invalid",
                        f'Pod "{name}" is invalid: spec.containers[{i}].resources.'
                        f'requests: Invalid value: "{req}": must be less than or equal to cpu '
                        f"limit of {lim}",
                        {"name": name, "kind": "Pod"},
                    )
            runtime_class = (body.get("spec") or {}).get("runtimeClassName")
            if runtime_class and runtime_class not in self.runtime_classes:
                return 403, status_object(
                    403,
                    "Forbidden",
                    f'pods "{name}" is forbidden: pod rejected: RuntimeClass "{runtime_class}" not found',
                    {"name": name, "kind": "pods"},
                )
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            meta.update(
                namespace=namespace,
                uid=str(uuid.uuid4()),
                resourceVersion=str(next(self._ips) + 2000),
                creationTimestamp=now_rfc3339(),
            )
            obj["spec"].setdefault("terminationGracePeriodSeconds", DEFAULT_GRACE_S)
            pod = _Pod(
                obj,
                time.monotonic(),
                None,
                None,
                {
                    c["name"]: _Container(c["name"], self.scripts.get(c["name"]) or workload_script(c), c)
                    for c in obj["spec"]["containers"]
                },
                ip=f"10.244.1.{next(self._ips)}",
            )
            preset = obj["spec"].get("nodeName")  # a pod that names its node skips the scheduler
            if preset:  # (on a node that does not exist nobody runs it: Pending for ever)
                node, pod.unschedulable = (preset if self._node(preset) else None), None
            else:
                node, pod.unschedulable = self._schedule(obj["spec"])
            self.pods[(namespace, name)] = pod
            if node:
                self._bind(pod, node, pod.created)
            return 201, self._render(pod)

    # -- kubelet: containers, deletion ----------------------------------------------------------------
    def _image_loaded(self, container: dict[str, Any]) -> bool:
        return container.get("image") in self.images or container.get("imagePullPolicy") != "Never"

    def _start_time(self, pod: _Pod, c: _Container) -> float | None:
        """When kubelet starts the container, or None if it never does."""
        if pod.node is None or pod.rejected or not self._image_loaded(c.spec):
            return None
        start = pod.created + self.pending_s
        if pod.deleted_at is not None and pod.deleted_at < start:
            return None
        return start

    def _advance(self, pod: _Pod, c: _Container, now: float) -> None:
        """Move the container along the clock: it starts, its gate opens (ungated: at once), it ends
        when its script ends or when a deletion stopped it, whichever comes first."""
        if c.ended_at is not None:
            return
        start = self._start_time(pod, c)
        if start is None or now < start:
            return
        if not c.gated and c.opened_at is None:
            c.opened_at = start
        if c.gated and c.opened_at is None and c.script.gate_error is not None:
            c.ended_at, c.exit_code = start, 1
            return
        ends = []
        if c.opened_at is not None and c.script.run_s is not None:
            ends.append((c.opened_at + c.script.run_s, c.script.exit_code))
        if c.stop_at is not None:
            ends.append((c.stop_at, c.stop_code))
        if ends:
            at, code = min(ends, key=lambda e: e[0])
            if now >= at:
                c.ended_at, c.exit_code = at, code

    def _running(self, pod: _Pod, c: _Container, now: float) -> bool:
        start = self._start_time(pod, c)
        if start is None or now < start:
            return False
        self._advance(pod, c, now)
        return c.ended_at is None

    def _phase(self, pod: _Pod, now: float) -> str:
        if pod.rejected:
            return "Failed"
        if pod.node is None:
            return "Pending"
        started = [c for c in pod.containers.values() if (s := self._start_time(pod, c)) is not None and now >= s]
        for c in started:
            self._advance(pod, c, now)
        if len(started) < len(pod.containers):
            return "Running" if any(c.ended_at is None for c in started) else "Pending"
        if all(c.ended_at is not None for c in started):
            return "Succeeded" if all(c.exit_code == 0 for c in started) else "Failed"
        return "Running"

    def delete(self, key: tuple[str, str], grace: int | None) -> dict[str, Any]:
        """DELETE of one pod, as the API server and kubelet carry it out; returns the object."""
        now = time.monotonic()
        pod = self.pods[key]
        if grace is None:
            grace = int(pod.obj["spec"].get("terminationGracePeriodSeconds", DEFAULT_GRACE_S))
        running = [c for c in pod.containers.values() if self._running(pod, c, now)]
        if pod.node is None or self._phase(pod, now) in ("Succeeded", "Failed"):
            grace = 0  # the API server deletes a pod at once when no kubelet has anything of it running
        if grace == 0:
            pod.deleted_at, pod.grace = pod.deleted_at or now, 0
            for c in running:  # kubelet kills them when it notices, some time later
                c.stop_at, c.stop_code = min(c.stop_at or math.inf, now + self.force_linger_s + c.script.stuck_s), 137
            rendered = self._render(pod)
            del self.pods[key]
            if running:
                self.orphans.append(pod)
            else:
                self._forget_cgroups(pod)
            return rendered
        if pod.deleted_at is None:
            pod.deleted_at = now
        pod.grace = min(grace, pod.grace if pod.grace is not None else grace)
        for c in running:  # SIGTERM now, SIGKILL when the grace period ends
            if c.opened_at is None:
                at, code = now + self.stop_s, 0  # podgate: stopped before the gate opened
            elif c.script.ignores_term:
                at, code = now + grace, 137
            else:
                at, code = now + self.stop_s, c.script.term_exit_code
            at += c.script.stuck_s
            if c.stop_at is None or at < c.stop_at:
                c.stop_at, c.stop_code = at, code
        return self._render(pod)

    def _reap(self) -> None:
        """Remove what kubelet and the API server have finished with: a deleted pod's object
        `deletion_s` after its last container stopped; a force-deleted pod's leftovers when they end."""
        now = time.monotonic()
        for key, pod in list(self.pods.items()):
            if pod.deleted_at is None or any(self._running(pod, c, now) for c in pod.containers.values()):
                continue
            last = max([pod.deleted_at, *(c.ended_at for c in pod.containers.values() if c.ended_at is not None)])
            if now - last >= self.deletion_s:
                del self.pods[key]
                self._forget_cgroups(pod)
        for pod in list(self.orphans):
            if not any(self._running(pod, c, now) for c in pod.containers.values()):
                self.orphans.remove(pod)
                self._forget_cgroups(pod)

    def _render(self, pod: _Pod) -> dict[str, Any]:
        """The Pod object as of now: phase, conditions and container states follow the clock."""
        now = time.monotonic()
        if pod.node is None and pod.deleted_at is None and pod.unschedulable:  # the scheduler retries
            node, pod.unschedulable = self._schedule(pod.obj["spec"])
            if node:
                self._bind(pod, node, now)
        obj = copy.deepcopy(pod.obj)
        status: dict[str, Any] = {"qosClass": self.qos_rule(obj["spec"]["containers"])}
        if pod.deleted_at is not None:
            obj["metadata"]["deletionTimestamp"] = now_rfc3339()
            obj["metadata"]["deletionGracePeriodSeconds"] = pod.grace
        if pod.rejected:
            status.update(phase="Failed", reason="OutOfcpu", message=pod.rejected, startTime=now_rfc3339())
            obj["status"] = status
            return obj
        if pod.node is None:
            status["phase"] = "Pending"
            if pod.unschedulable:
                status["conditions"] = [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": pod.unschedulable,
                        "lastProbeTime": None,
                        "lastTransitionTime": now_rfc3339(),
                    }
                ]
            obj["status"] = status
            return obj
        started = now - pod.created >= self.pending_s
        statuses = []
        for spec in obj["spec"]["containers"]:
            c = pod.containers[spec["name"]]
            base = {
                "name": c.name,
                "image": spec["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
            }
            if not self._image_loaded(spec):
                base["state"] = {
                    "waiting": {
                        "reason": "ErrImageNeverPull",
                        "message": f'Container image "{spec["image"]}" is not present with pull policy of Never',
                    }
                }
            elif not self._running(pod, c, now) and c.ended_at is None:
                base["state"] = {"waiting": {"reason": "ContainerCreating"}}
            else:
                base["containerID"] = f"containerd://{c.container_id}"
                if c.ended_at is not None:
                    ended = {
                        "exitCode": c.exit_code,
                        "reason": "Completed" if c.exit_code == 0 else "Error",
                        "startedAt": now_rfc3339(),
                        "finishedAt": now_rfc3339(),
                        "containerID": f"containerd://{c.container_id}",
                    }
                    if c.exit_code != 0 and spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
                        ended["message"] = self.log_text(pod, c)[-2048:]
                    base["state"] = {"terminated": ended}
                else:
                    base.update(ready=True, started=True, state={"running": {"startedAt": now_rfc3339()}})
            statuses.append(base)
        status.update(
            phase=self._phase(pod, now),
            hostIP="172.18.0.3",
            podIP=pod.ip if started else None,
            podIPs=[{"ip": pod.ip}] if started else [],
            startTime=now_rfc3339(),
            conditions=[
                {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
            ],
            containerStatuses=statuses,
        )
        obj["status"] = status
        return obj

    def log_text(self, pod: _Pod, c: _Container) -> str:
        # kubelet serves stdout and stderr of the container interleaved, as written
        if c.opened_at is None:
            return f"{c.script.gate_error}\n" if c.script.gate_error is not None and c.ended_at is not None else ""
        return c.script.stdout + c.script.stderr

    def exec(self, pod: _Pod, c: _Container, argv: list[str]) -> tuple[str, str, int]:
        """Run argv in the container now (under the lock); the exec costs the container CPU."""
        self.execs.append((time.monotonic_ns(), pod.obj["metadata"]["name"], c.name, list(argv)))
        try:
            return self._run(pod, c, argv)
        finally:
            c.execs += 1
            c.exec_cpu_us += self.exec_cpu_us

    def _run(self, pod: _Pod, c: _Container, argv: list[str]) -> tuple[str, str, int]:
        if not argv or argv[0] != "/podgate":
            return "", f'exec: "{argv[0] if argv else ""}": executable file not found in $PATH', 126
        if argv[1:2] == ["open"]:
            if c.opened_at is None:
                c.opened_at = time.monotonic()
            return "", "", 0
        if argv[1:2] == ["signal"]:
            if c.ended_at is None and not c.script.ignores_term:
                c.ended_at, c.exit_code = time.monotonic(), c.script.term_exit_code
            return "", "", 0
        if argv[1:2] == ["cat"]:
            files = {**self.container_cgroup(pod, c), **c.script.cgroup}
            out = {path: files.get(path) for path in argv[2:]}
            return json.dumps(out) + "\n", "", 0 if all(v is not None for v in out.values()) else 1
        return "", f"podgate: unknown command {argv[1:2]}", 2

    # -- the kubelet's cAdvisor ------------------------------------------------------------------------
    def _housekeeping(self) -> None:
        """cAdvisor's housekeeping: the cgroup of each running container, and of its pod, is read when
        it appears, then every `housekeeping_s`; a stopped one's readings go (cAdvisor drops its series)."""
        while not self._housekeeping_stop.wait(0.02):
            now, wall_ms = time.monotonic(), int(time.time() * 1000)
            with self.lock:
                live = set()
                for pod in [*self.pods.values(), *self.orphans]:
                    running = [c for c in pod.containers.values() if self._running(pod, c, now)]
                    if self._on_node(pod):  # the workloads ran on: their cpu.stat files in the node say so
                        for c in running:
                            if c.opened_at is not None:
                                self._write_stat(pod, c)
                    # each running container's cgroup (by its id), and its pod's (by the pod's uid: None)
                    cgroups = [(c.container_id, c) for c in running]
                    cgroups += [(pod.obj["metadata"]["uid"], None)] if running else []
                    for key, c in cgroups:
                        live.add(key)
                        seen = self.readings.setdefault(key, [])
                        if not seen or wall_ms - seen[-1][0] >= self.housekeeping_s * 1000:
                            seen.append((wall_ms, self._pod_counters(pod) if c is None else self._counters(pod, c)))
                for gone in set(self.readings) - live:
                    del self.readings[gone]

    def _write_stat(self, pod: _Pod, c: _Container) -> None:
        """The container's cpu.stat in the stand-in node's tree, as of now (kept while its directory is)."""
        d = self._pod_dir(pod) / f"cri-containerd-{c.container_id}.scope"
        if d.is_dir():
            tmp = d / ".cpu.stat.new"
            tmp.write_text(self.container_cgroup(pod, c)["/sys/fs/cgroup/cpu.stat"])
            tmp.replace(d / "cpu.stat")

    def _on_node(self, pod: _Pod) -> bool:
        """The pod's cgroup files are in the stand-in node's fixture tree."""
        return self.cgroup_dir is not None and pod.node == self.cgroup_node

    def _counters(self, pod: _Pod, c: _Container) -> dict[str, int]:
        """The container's cpu.stat now: the stand-in node's file where the fixture tree has it."""
        path = (
            self._pod_dir(pod) / f"cri-containerd-{c.container_id}.scope" / "cpu.stat" if self._on_node(pod) else None
        )
        text = path.read_text() if path and path.is_file() else self.container_cgroup(pod, c)["/sys/fs/cgroup/cpu.stat"]
        return _cpu_stat(text)

    def _pod_counters(self, pod: _Pod) -> dict[str, int]:
        """The pod's cpu.stat now: the stand-in node's file, else its containers' together."""
        path = self._pod_dir(pod) / "cpu.stat" if self._on_node(pod) else None
        if path and path.is_file():
            return _cpu_stat(path.read_text())
        stats = [self._counters(pod, c) for c in pod.containers.values()]
        return {k: sum(st.get(k, 0) for st in stats) for k in CFS_AND_USAGE}

    def cadvisor_text(self, node: str) -> str:
        """/metrics/cadvisor of a node as the kubelet serves it: for each pod with a running container
        on the node, the pod's series (container="") and each running container's, each at
        cAdvisor's latest reading of that cgroup, stamped with the reading's time (Unix ms)."""
        families = {
            "container_cpu_cfs_periods_total": (
                "Number of elapsed enforcement period intervals.",
                lambda r: str(r["nr_periods"]),
            ),
            "container_cpu_cfs_throttled_periods_total": (
                "Number of throttled period intervals.",
                lambda r: str(r["nr_throttled"]),
            ),
            "container_cpu_cfs_throttled_seconds_total": (
                "Total time duration the container has been throttled.",
                lambda r: repr(r["throttled_usec"] / 1e6),
            ),
            "container_cpu_usage_seconds_total": (
                "Cumulative cpu time consumed in seconds.",
                lambda r: repr(r["usage_usec"] / 1e6),
            ),
        }
        series: list[tuple[dict[str, str], int, dict[str, int]]] = []  # (labels, reading ms, counters)
        with self.lock:
            for pod in [*self.pods.values(), *self.orphans]:
                meta = pod.obj["metadata"]
                if pod.node != node or not self.readings.get(meta["uid"]):
                    continue
                pod_id = "/" + self._pod_slice(pod)
                base = {"namespace": meta["namespace"], "pod": meta["name"]}
                series.append(
                    ({"container": "", "id": pod_id, "image": "", "name": "", **base}, *self.readings[meta["uid"]][-1])
                )
                for spec in pod.obj["spec"]["containers"]:
                    c = pod.containers[spec["name"]]
                    if self.readings.get(c.container_id):
                        series.append(
                            (
                                {
                                    "container": c.name,
                                    "id": f"{pod_id}/cri-containerd-{c.container_id}.scope",
                                    "image": f"docker.io/library/{spec['image']}",
                                    "name": c.container_id,
                                    **base,
                                },
                                *self.readings[c.container_id][-1],
                            )
                        )
        lines = []
        for name, (help_text, value) in families.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
            for labels, at, counters in series:
                if name.startswith("container_cpu_cfs_") and not counters.get("nr_periods"):
                    continue  # no quota, no CFS periods: cAdvisor writes no CFS series
                shown = {**labels, **({"cpu": "total"} if name == "container_cpu_usage_seconds_total" else {})}
                text = ",".join(f'{k}="{v}"' for k, v in sorted(shown.items()))
                lines.append(f"{name}{{{text}}} {value(counters)} {at}")
        return "\n".join(lines) + "\n"

    # -- authorization -------------------------------------------------------------------------------
    def forbidden(self, method: str, path: str, query: dict[str, list[str]]) -> str | None:
        """The API server's 403 message when the restricted user may not do this, else None."""
        ns = self.restricted_to
        if ns is None or path in ("/version", "/version/"):
            return None
        user = f"system:serviceaccount:{ns}:throttlelab"
        if path == "/api/v1/nodes":
            return (
                f'nodes is forbidden: User "{user}" cannot list resource "nodes" in API group "" at the cluster scope'
            )
        m = re.fullmatch(r"/api/v1/nodes/([^/]+)(/proxy/.*)?", path)
        if m and m[2] and not self.proxy_allowed:
            return (
                f'nodes "{m[1]}" is forbidden: User "{user}" cannot get resource "nodes/proxy" in API group "" '
                "at the cluster scope"
            )
        if m:
            return None  # the ClusterRole: get nodes, nodes/proxy
        if path == "/api/v1/pods":
            return f'pods is forbidden: User "{user}" cannot list resource "pods" in API group "" at the cluster scope'
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)(/pods(/[^/]+(/log|/exec)?)?)?", path)
        if m and m[2] is None:
            return (
                f'namespaces "{m[1]}" is forbidden: User "{user}" cannot get resource "namespaces" in API group "" '
                f'in the namespace "{m[1]}"'
            )
        if m and m[1] != ns:
            verb = {
                "GET": "list" if m[3] is None else "get",
                "POST": "create",
                "DELETE": "deletecollection" if m[3] is None else "delete",
            }[method]
            return (
                f'pods is forbidden: User "{user}" cannot {verb} resource "pods" in API group "" '
                f'in the namespace "{m[1]}"'
            )
        return None

    # -- the node's cgroups (a stand-in kind node) ------------------------------------------------------
    def _kubepods(self) -> Path:
        assert self.cgroup_dir is not None
        return self.cgroup_dir / "kubelet.slice" / "kubelet-kubepods.slice"

    def _pod_slice(self, pod: _Pod) -> str:
        """The pod's cgroup under the node's cgroup root, as kubelet (systemd driver, root /kubelet) names it."""
        qos = self.qos_rule(pod.obj["spec"]["containers"]).lower()
        uid = pod.obj["metadata"]["uid"].replace("-", "_")
        kubepods = "kubelet.slice/kubelet-kubepods.slice"
        if qos == "guaranteed":
            return f"{kubepods}/kubelet-kubepods-pod{uid}.slice"
        return f"{kubepods}/kubelet-kubepods-{qos}.slice/kubelet-kubepods-{qos}-pod{uid}.slice"

    def _pod_dir(self, pod: _Pod) -> Path:
        assert self.cgroup_dir is not None
        return self.cgroup_dir / self._pod_slice(pod)

    def _forget_cgroups(self, pod: _Pod) -> None:
        """kubelet removes a pod's cgroup once its containers have stopped."""
        if self.cgroup_dir is not None and pod.node == self.cgroup_node:
            shutil.rmtree(self._pod_dir(pod), ignore_errors=True)

    def _write_cgroups(self) -> None:
        """kubelet's and runc's files for every live pod on the node (docs/LAB.md §2), written anew."""
        assert self.cgroup_dir is not None
        node = next(n for n in self.nodes if n["metadata"]["name"] == self.cgroup_node)
        allocatable = _milli(node["status"]["allocatable"]["cpu"])
        kubepods = self._kubepods()
        _write(kubepods, _linear(_shares(allocatable)), None, self.node_cpus())
        mine = [p for p in self.pods.values() if p.node == self.cgroup_node and p.deleted_at is None and not p.rejected]
        others = [p for p in self.system_pods if p["spec"].get("nodeName") == self.cgroup_node]
        burstable = sum(_pod_request(p.obj) for p in mine if self.qos_rule(p.obj["spec"]["containers"]) == "Burstable")
        burstable += sum(_pod_request(p) for p in others if p["status"]["qosClass"] == "Burstable")
        _write(kubepods / "kubelet-kubepods-burstable.slice", _linear(_shares(burstable)), None)
        _write(kubepods / "kubelet-kubepods-besteffort.slice", 1, None)
        for pod in mine:
            uid = pod.obj["metadata"]["uid"].replace("-", "_")
            pod_dir = self._pod_dir(pod)
            limits = [
                _milli(((c.get("resources") or {}).get("limits") or {}).get("cpu"))
                for c in pod.obj["spec"]["containers"]
            ]
            pod_limit = sum(limits) if all(limits) else None
            _write(pod_dir, _linear(_shares(_pod_request(pod.obj))), pod_limit)
            _write(pod_dir / f"cri-containerd-{uuid.uuid5(uuid.NAMESPACE_OID, uid).hex * 2}.scope", 1, None)  # pause
            for c in pod.containers.values():
                files = self.container_cgroup(pod, c)
                d = pod_dir / f"cri-containerd-{c.container_id}.scope"
                d.mkdir(parents=True, exist_ok=True)
                for path, content in files.items():
                    (d / path.rsplit("/", 1)[1]).write_text(content)

    def _ran_s(self, c: _Container) -> float:
        """How long the container's workload has run: from its gate's opening to its end or now."""
        if c.opened_at is None:
            return 0.0
        return max(0.0, (c.ended_at if c.ended_at is not None else time.monotonic()) - c.opened_at)

    def container_cgroup(self, pod: _Pod, c: _Container) -> dict[str, str]:
        """What runc writes for the container on a cgroup v2 node (docs/LAB.md §2), and a cpu.stat that
        includes the CPU its execs cost and, once its gate is open, what its workload ran: a
        container with a CPU limit uses the limit in full and is throttled for half of each 100 ms
        period it runs (a scripted workload, not a scheduler); without a limit no period is counted."""
        spec = next(x for x in pod.obj["spec"]["containers"] if x["name"] == c.name)
        res = spec.get("resources") or {}
        limit = _milli((res.get("limits") or {}).get("cpu"))
        ran_s = self._ran_s(c)
        periods = int(ran_s * 10) if limit else 0
        ran_us = int(ran_s * (limit or 0) * 1000)
        request = _milli((res.get("requests") or {}).get("cpu")) or limit  # the API server's defaulting
        shares = max(2, (request or 0) * 1024 // 1000)
        if self.runc == "old":
            weight = 1 + ((shares - 2) * 9999) // 262142
        else:
            exponent = math.log2(shares)
            weight = min(10000, max(1, math.ceil(10 ** ((exponent * exponent + 125 * exponent) / 612 - 7 / 34))))
        return {
            "/sys/fs/cgroup/cpu.max": f"{_systemd_quota_us(limit) if limit else 'max'} 100000\n",
            "/sys/fs/cgroup/cpu.weight": f"{weight}\n",
            "/sys/fs/cgroup/cpu.stat": (
                f"usage_usec {1_500_000 + c.exec_cpu_us + ran_us}\n"
                f"user_usec {1_400_000 + c.exec_cpu_us + ran_us}\nsystem_usec 100000\n"
                + (
                    f"nr_periods {40 + periods}\nnr_throttled {12 + periods}\n"
                    f"throttled_usec {7052500 + periods * 50_000}\n"
                    if limit
                    else "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n"
                )  # no quota, no periods
                + "nr_bursts 0\nburst_usec 0\n"
            ),
        }


#: The cpu.stat counters cAdvisor's CPU series come from.
CFS_AND_USAGE = ("nr_periods", "nr_throttled", "throttled_usec", "usage_usec")


def _cpu_stat(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in text.splitlines() if line.strip())}


def workload_script(container: dict[str, Any]) -> Script:
    """What cpulab does in a container, by its subcommand (docs/RECORDS.md, shortened): `info`
    and `load` end at once, `burst` after rounds x interval, `spin` without -duration and
    `serve` run until SIGTERM."""
    argv = container.get("command") or []
    if "--" in argv:
        argv = argv[argv.index("--") + 1 :]
    sub = argv[1] if len(argv) > 1 else ""
    stray = [a for a in argv[2:] if not a.startswith("-")]
    if stray:  # cpulab's subcommands take flags only (a real node found `cpulab load load ...`)
        return Script(stderr=f'cpulab {sub}: unexpected argument "{stray[0]}" (flags only)\n', exit_code=2, run_s=0.0)
    header = (
        json.dumps(
            {
                "type": "header",
                "program": "cpulab",
                "command": sub,
                "params": _params(argv[2:]),
                "time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            }
        )
        + "\n"
    )
    summary = json.dumps({"type": "summary", "elapsed_s": 0.1}) + "\n"
    if sub == "serve":
        addr = next((a.split("=", 1)[1] for a in argv if a.startswith("-addr=")), "127.0.0.1:8080")
        port = addr.rpartition(":")[2]
        listening = json.dumps({"type": "listening", "addr": f"[::]:{41234 if port == '0' else port}"}) + "\n"
        return Script(stdout=header + listening, stderr="serve: listening\n", run_s=None)
    if sub == "spin" and not any(a.startswith("-duration=") for a in argv):
        return Script(stdout=header, run_s=None)
    params = _params(argv[2:])
    if sub == "load":  # every request sent in the window answered (the fake sends none: its output is scripted)
        window_s = params.get("duration", 60_000) / 1000
        sent = int(float(params.get("rps", 100)) * window_s)
        load_summary = (
            json.dumps({"type": "summary", "window_s": window_s, "work": {"sent": sent, "ok": sent, "errors": 0}})
            + "\n"
        )
        return Script(stdout=header + load_summary, stderr="load: done\n", run_s=0.05)
    if sub == "burst":  # as long as the real one: rounds x interval
        return Script(
            stdout=header + summary,
            stderr="burst: done\n",
            run_s=params.get("rounds", 20) * params.get("interval", 1000) / 1000,
        )
    return Script(stdout=header + summary, stderr=f"{sub}: done\n", run_s=0.05)


def _params(flags: list[str]) -> dict[str, Any]:
    """cpulab's header `params`: every flag given, durations in ms (docs/RECORDS.md)."""
    out: dict[str, Any] = {}
    units = {"ms": 1, "s": 1000, "m": 60_000}
    for flag in flags:
        key, _, value = flag.lstrip("-").partition("=")
        duration = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", value)
        if duration:
            out[key] = float(duration[1]) * units[duration[2]]
        elif re.fullmatch(r"-?\d+", value):
            out[key] = int(value)
        else:
            out[key] = value.split(",") if key == "target" else value
    return out


def _shares(milli: int | None) -> int:
    return max(2, (milli or 0) * 1024 // 1000)


def _linear(shares: int) -> int:
    return 1 + ((shares - 2) * 9999) // 262142


def _pod_request(pod: dict[str, Any]) -> int:
    total = 0
    for c in pod["spec"]["containers"]:
        res = c.get("resources") or {}
        total += _milli((res.get("requests") or {}).get("cpu") or (res.get("limits") or {}).get("cpu")) or 0
    return total


def _write(d: Path, weight: int, limit_milli: int | None, cpus: str | None = None) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "cpu.weight").write_text(f"{weight}\n")
    (d / "cpu.max").write_text(f"{_systemd_quota_us(limit_milli) if limit_milli else 'max'} 100000\n")
    (d / "cpu.stat").write_text("usage_usec 3000000\nnr_periods 80\nnr_throttled 20\nthrottled_usec 9000000\n")
    if cpus is not None:
        (d / "cpuset.cpus.effective").write_text(f"{cpus}\n")


def _systemd_quota_us(limit_milli: int) -> int:
    """The quota per 100 ms period a kind node's systemd cgroup driver leaves for a limit: systemd holds
    a quota in whole percents of a CPU (10 ms a second), and runc rounds a limit up to the next one
    (125m -> 13 ms a period, as read on the lab's real kind nodes)."""
    percent = -(-limit_milli // 10)
    return max(percent * 1000, 1000)


def _milli(quantity: str | None) -> int | None:
    if quantity is None:
        return None
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") not in (None, "", taint["effect"]):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t["key"] == taint["key"]):
            return True
        if (
            t.get("key") == taint["key"]
            and t.get("operator", "Equal") == "Equal"
            and t.get("value", "") == taint.get("value", "")
        ):
            return True
    return False


def _required_terms(spec: dict[str, Any]) -> list[dict[str, Any]] | None:
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    return required.get("nodeSelectorTerms") if required else None


def _affinity_node_names(spec: dict[str, Any]) -> set[str] | None:
    """NodeAffinity's PreFilter: when every required term names nodes by metadata.name (matchFields
    In), only those nodes are tried; None: every node."""
    terms = _required_terms(spec)
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        fields = [
            f for f in term.get("matchFields") or [] if f.get("key") == "metadata.name" and f.get("operator") == "In"
        ]
        if not fields:
            return None
        names |= set(fields[0].get("values") or [])
    return names


def _requirement(value: str | None, present: bool, req: dict[str, Any]) -> bool:
    op, values = req.get("operator"), req.get("values") or []
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            return int(value or "") > int(values[0]) if op == "Gt" else int(value or "") < int(values[0])
        except ValueError:
            return False
    return False


def _node_matches(node: dict[str, Any], spec: dict[str, Any]) -> bool:
    """nodeSelector (every label equal) and the required node affinity (any term; in a term, every
    matchExpression on the node's labels and every matchField on its metadata.name)."""
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    terms = _required_terms(spec)
    if terms is None:
        return True
    for term in terms:
        fields = {"metadata.name": node["metadata"]["name"]}
        if (
            all(_requirement(labels.get(r["key"]), r["key"] in labels, r) for r in term.get("matchExpressions") or [])
            and all(_requirement(fields.get(r["key"]), r["key"] in fields, r) for r in term.get("matchFields") or [])
            and (term.get("matchExpressions") or term.get("matchFields"))
        ):
            return True
    return False


def _is_gated(container: dict[str, Any]) -> bool:
    return (container.get("command") or [""])[0] == "/podgate"


def _qos(containers: list[dict[str, Any]]) -> str:
    """The API server's QoS class (pkg/apis/core/helper/qos): BestEffort when no container has a
    cpu or memory request or limit; Guaranteed when every container has cpu AND memory limits
    and its requests (defaulted to the limits) equal them; Burstable otherwise."""

    def amount(value: Any) -> float | None:
        if value in (None, ""):
            return None
        text = str(value)
        for unit, factor in (
            ("m", 1e-3),
            ("Ki", 2**10),
            ("Mi", 2**20),
            ("Gi", 2**30),
            ("k", 1e3),
            ("M", 1e6),
            ("G", 1e9),
        ):
            if text.endswith(unit):
                return float(text[: -len(unit)]) * factor or None
        return float(text) or None

    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        for resource in ("cpu", "memory"):
            limit = amount(limits.get(resource))
            request = amount(requests.get(resource))
            request = limit if request is None else request
            any_set = any_set or request is not None or limit is not None
            guaranteed = guaranteed and limit is not None and request == limit
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (s.strip() for s in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k.rstrip("=")) != v.lstrip("="):
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _grace(query: dict[str, list[str]], body: Any) -> int | None:
    """gracePeriodSeconds of a DELETE: the query parameter, or the DeleteOptions body."""
    if query.get("gracePeriodSeconds"):
        return int(query["gracePeriodSeconds"][0])
    if isinstance(body, dict) and body.get("gracePeriodSeconds") is not None:
        return int(body["gracePeriodSeconds"])
    return None


class _Handler(BaseHTTPRequestHandler):
    state: FakeKubeAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- responses -------------------------------------------------------------------
    def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = (
            body
            if isinstance(body, bytes)
            else (json.dumps(body).encode() if not isinstance(body, str) else body.encode())
        )
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _not_found(self, kind: str, name: str) -> None:
        self._send(404, status_object(404, "NotFound", f'{kind} "{name}" not found', {"name": name, "kind": kind}))

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {self.state.token}":
            return True
        self._send(401, status_object(401, "Unauthorized", "Unauthorized"))
        return False

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    # -- dispatch -------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query)
        body = self._read_body() if method in ("POST", "PUT", "PATCH", "DELETE") else None
        # Go's net/http hands the API server the decoded path: the client's "metrics%2Fcadvisor" is "metrics/cadvisor"
        path = unquote(url.path)
        self.state.requests.append((method, path, query, body))
        if not self._authorized():
            return
        st = self.state
        refused = st.forbidden(method, path, query)
        if refused:
            return self._send(403, status_object(403, "Forbidden", refused, {"kind": path.rsplit("/", 1)[-1]}))
        if method == "GET" and path in ("/version", "/version/"):  # the client asks for /version/
            return self._send(200, json.loads((FIXTURES / "version.json").read_text()))
        if method == "GET" and path == "/api/v1/nodes":
            return self._send(
                200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": st.nodes}
            )
        m = re.fullmatch(r"/api/v1/nodes/([^/]+)/proxy/metrics/cadvisor", path)
        if m and method == "GET":
            if not st._node(m[1]):
                return self._not_found("nodes", m[1])
            if not proxyable(st._node(m[1])):  # the real node proxy dials global unicast addresses only
                return self._send(400, status_object(400, "BadRequest", "address not allowed"))
            st.cadvisor_calls += 1
            if st.recorded_cadvisor is None:
                text = st.cadvisor_text(m[1])
            else:
                text = st.recorded_cadvisor[min(st.cadvisor_calls - 1, len(st.recorded_cadvisor) - 1)]
                for recorded, live in st.cadvisor_pods.items():  # the recorded pod name -> a pod of this test
                    text = text.replace(f'pod="{recorded}"', f'pod="{live}"')
            return self._send(200, text, "text/plain; version=0.0.4; charset=utf-8")
        m = re.fullmatch(r"/api/v1/nodes/([^/]+)", path)
        if m and method == "GET":
            node = st._node(m[1])
            return self._send(200, node) if node else self._not_found("nodes", m[1])
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)", path)
        if m and method == "GET":
            if m[1] in st.namespaces:
                return self._send(
                    200,
                    {
                        "kind": "Namespace",
                        "apiVersion": "v1",
                        "metadata": {"name": m[1], "labels": {"kubernetes.io/metadata.name": m[1]}},
                        "spec": {"finalizers": ["kubernetes"]},
                        "status": {"phase": "Active"},
                    },
                )
            return self._not_found("namespaces", m[1])
        if method == "GET" and path == "/api/v1/pods":
            return self._list_all(query)
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods", path)
        if m:
            if method == "POST":
                code, obj = st.create(m[1], body or {})
                return self._send(code, obj)
            if method == "GET":
                return self._list(m[1], query)
            if method == "DELETE":
                return self._delete_collection(m[1], query, body)
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)(/log|/exec)?", path)
        if m:
            ns, name, sub = m[1], m[2], m[3]
            with st.lock:
                st._reap()
                pod = st.pods.get((ns, name))
            if pod is None:
                return self._not_found("pods", name)
            if sub is None and method == "GET":
                with st.lock:
                    rendered = st._render(pod)
                    st._count_refusal(rendered)
                    return self._send(200, rendered)
            if sub is None and method == "DELETE":
                with st.lock:
                    if (ns, name) not in st.pods:
                        return self._not_found("pods", name)
                    return self._send(200, st.delete((ns, name), _grace(query, body)))
            if sub == "/log" and method == "GET":
                return self._log(pod, query)
            if sub == "/exec" and method == "GET":
                return self._exec(pod, query)
        self._send(404, status_object(404, "NotFound", "the server could not find the requested resource"))

    def _list(self, ns: str, query: dict[str, list[str]]) -> None:
        selector = (query.get("labelSelector") or [""])[0]
        with self.state.lock:
            self.state._reap()
            items = [
                self.state._render(p)
                for (pns, _), p in self.state.pods.items()
                if pns == ns and _matches(p.obj["metadata"].get("labels") or {}, selector)
            ]
        self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items})

    def _list_all(self, query: dict[str, list[str]]) -> None:
        field_sel = (query.get("fieldSelector") or [""])[0]
        node = field_sel.split("=", 1)[1] if field_sel.startswith("spec.nodeName=") else None
        with self.state.lock:
            self.state._reap()
            items = [self.state._render(p) for p in self.state.pods.values()]
        items += copy.deepcopy(self.state.system_pods)
        if node:
            items = [p for p in items if p["spec"].get("nodeName") == node]
        self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items})

    def _delete_collection(self, ns: str, query: dict[str, list[str]], body: Any) -> None:
        selector = (query.get("labelSelector") or [""])[0]
        grace = _grace(query, body)
        with self.state.lock:
            self.state._reap()
            for key, pod in list(self.state.pods.items()):
                if key[0] == ns and _matches(pod.obj["metadata"].get("labels") or {}, selector):
                    self.state.delete(key, grace)
        self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})

    def _container(self, pod: _Pod, query: dict[str, list[str]]) -> _Container | None:
        names = query.get("container") or []
        if not names and len(pod.containers) == 1:
            return next(iter(pod.containers.values()))
        return pod.containers.get(names[0]) if names else None

    def _log(self, pod: _Pod, query: dict[str, list[str]]) -> None:
        st = self.state
        c = self._container(pod, query)
        name = pod.obj["metadata"]["name"]
        if c is None:
            return self._send(
                400, status_object(400, "BadRequest", f"a container name must be specified for pod {name}")
            )
        with st.lock:
            rendered = st._render(pod)
        state = next(
            s["state"]
            for s in rendered["status"].get(
                "containerStatuses", [{"name": c.name, "state": {"waiting": {"reason": "Pending"}}}]
            )
            if s["name"] == c.name
        )
        if "waiting" in state:
            return self._send(
                400,
                status_object(
                    400,
                    "BadRequest",
                    f'container "{c.name}" in pod "{name}" is waiting to start: {state["waiting"]["reason"]}',
                ),
            )
        if (query.get("follow") or ["false"])[0] != "true":
            return self._send(200, st.log_text(pod, c), "text/plain")
        # follow: chunked, new output as it appears, until the container ends
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        while True:
            with st.lock:
                st._advance(pod, c, time.monotonic())
                text = st.log_text(pod, c).encode()
                ended = c.ended_at is not None
            if len(text) > sent:
                chunk = text[sent:]
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
                sent = len(text)
            if ended:
                break
            time.sleep(0.02)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # -- exec over WebSocket (RFC 6455 framing, channel.k8s.io subprotocol) -------------------------------
    def _exec(self, pod: _Pod, query: dict[str, list[str]]) -> None:
        st = self.state
        if self.headers.get("Upgrade", "").lower() != "websocket":
            return self._send(400, status_object(400, "BadRequest", "Upgrade request required"))
        c = self._container(pod, query)
        if c is None:
            return self._send(400, status_object(400, "BadRequest", "container name must be specified"))
        argv = query.get("command") or []
        with st.lock:
            rendered = st._render(pod)
        state = next((s["state"] for s in rendered["status"].get("containerStatuses", []) if s["name"] == c.name), {})
        if "running" not in state:
            # kubelet refuses before the upgrade; the client sees a failed handshake. The real node's words
            # (docs/KUBE_REAL.md): once the container has ended, containerd no longer knows it
            return self._send(
                500,
                status_object(
                    500,
                    "InternalError",
                    f'Internal error occurred: unable to upgrade connection: container not found ("{c.name}")',
                ),
            )
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        protocol = "v4.channel.k8s.io" if "v4.channel.k8s.io" in offered else offered[0]
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", protocol)
        self.end_headers()
        time.sleep(st.exec_latency_s / 2)  # API server -> kubelet -> runc exec: the command runs in the middle
        with st.lock:
            stdout, stderr, code = st.exec(pod, c, argv)
        time.sleep(st.exec_latency_s / 2)
        if code == 0:
            error = {"metadata": {}, "status": "Success"}
        else:
            error = {
                "metadata": {},
                "status": "Failure",
                "message": f"command terminated with non-zero exit code: exit status {code}",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
            }
        for channel, data in ((1, stdout.encode()), (2, stderr.encode()), (3, json.dumps(error).encode())):
            if data:
                self._frame(0x2, bytes([channel]) + data)
        self._frame(0x8, struct.pack("!H", 1000))
        self.close_connection = True

    def _frame(self, opcode: int, payload: bytes) -> None:
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([n])
        elif n < 1 << 16:
            head += bytes([126]) + struct.pack("!H", n)
        else:
            head += bytes([127]) + struct.pack("!Q", n)
        self.wfile.write(head + payload)
        self.wfile.flush()
