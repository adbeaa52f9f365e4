"""A real HTTP server on 127.0.0.1 that speaks the few Kubernetes API endpoints the lab uses.

Not a mock of our functions: the kubernetes Python client talks to it over
TCP exactly as it talks to an API server (kubeconfig, bearer token, JSON over
HTTP/1.1, exec over a WebSocket with the v4.channel.k8s.io subprotocol). Paths,
verbs, status codes and JSON shapes follow the Kubernetes v1.34 API reference
(core/v1 Pod, Node, Namespace, Status; pods/log, pods/exec, nodes/proxy) and the
kubelet's behaviour that the lab relies on:

* a pod is scheduled by its nodeSelector `kubernetes.io/hostname`; a node's
  NoSchedule taint without a matching toleration leaves it Pending with a
  PodScheduled=False/Unschedulable condition (the scheduler's message);
* an image that is not loaded on the node, with imagePullPolicy Never, leaves
  the container waiting with reason ErrImageNeverPull;
* a gated container (our podgate) is running but idle until `podgate open`
  is exec'd in it; then it prints its scripted output and ends after its
  scripted run time, or when `podgate signal TERM` is exec'd in it;
* deleting a pod sets deletionTimestamp, ends its containers, and removes it a
  moment later; delete-collection does so for every pod matching the selector;
* the node proxy serves the kubelet's cAdvisor metrics (Prometheus text with
  sample timestamps) from recorded files.

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
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

FIXTURES = Path(__file__).parent / "fixtures" / "kube_api"
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_object(code: int, reason: str, message: str, details: dict | None = None) -> dict[str, Any]:
    """metav1.Status as the API server returns it for a failed request."""
    out = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
           "reason": reason, "code": code}
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
    cgroup: dict[str, str] = field(default_factory=dict)  # file -> content, for `podgate cat`


@dataclass
class _Container:
    name: str
    script: Script
    opened_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    container_id: str = field(default_factory=lambda: uuid.uuid4().hex + uuid.uuid4().hex[:32])


@dataclass
class _Pod:
    obj: dict[str, Any]
    created: float
    node: str | None
    unschedulable: str | None
    containers: dict[str, _Container]
    deleted_at: float | None = None
    ip: str = ""


class FakeKubeAPI:
    """State of the fake cluster; `start()` serves it on 127.0.0.1:<free port>."""

    def __init__(self, token: str = "throttlelab-test-token", pending_s: float = 0.15, deletion_s: float = 0.3):
        self.token = token
        self.pending_s = pending_s
        self.deletion_s = deletion_s  # how long a deleted pod stays, terminating
        self.runc = "new"  # which conversion the fake node's runc applies (SPEC §2)
        # kubelet's side, for a stand-in kind node: when set, every pod scheduled to `cgroup_node` gets
        # its cgroup directories written under `cgroup_dir`, laid out as kubelet (systemd driver,
        # cgroup root /kubelet, cgroup v2) and runc lay them out in a kind node; `node_cpus()` says
        # what the node's cpuset is now (what kubepods' cpuset.cpus.effective shows)
        self.cgroup_dir: Path | None = None
        self.cgroup_node = "throttlelab-new-worker"
        self.node_cpus = lambda: "0-9"
        self._nodes: list[dict[str, Any]] = json.loads((FIXTURES / "nodes.json").read_text())["items"]
        # node name -> monotonic time until which it is NotReady (tainted not-ready), as a node
        # that is still joining after `kind create --wait` (which waits for the control plane only)
        self.not_ready_until: dict[str, float] = {}
        # kubelet's admission: pods bound to one of these nodes are rejected (phase Failed, OutOfcpu)
        self.out_of_cpu_nodes: set[str] = set()
        self.system_pods: list[dict[str, Any]] = json.loads((FIXTURES / "system-pods.json").read_text())["items"]
        self.namespaces = {"default", "kube-system"}
        self.images: set[str] = set()  # images loaded on every node ("kind load")
        self.scripts: dict[str, Script] = {}  # container name -> script (default: Script())
        self.cadvisor = [(FIXTURES / "cadvisor-1.txt").read_text(), (FIXTURES / "cadvisor-2.txt").read_text()]
        self.cadvisor_calls = 0
        self.cadvisor_pods: dict[str, str] = {}
        self.pods: dict[tuple[str, str], _Pod] = {}
        self.requests: list[tuple[str, str, dict[str, list[str]], Any]] = []
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
        return self

    def stop(self) -> None:
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
        with self.lock:
            self._reap()
            return sorted(name for (_ns, name) in self.pods)

    # -- the cluster's behaviour -----------------------------------------------------------------
    def not_ready_for(self, node: str, seconds: float) -> None:
        self.not_ready_until[node] = time.monotonic() + seconds

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
                        cond.update(status="False", reason="KubeletNotReady",
                                    message="container runtime network not ready: NetworkReady=false")
                node["spec"]["taints"] = [*(node["spec"].get("taints") or []),
                                          {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
            out.append(node)
        return out

    def _node(self, name: str) -> dict[str, Any] | None:
        return next((n for n in self.nodes if n["metadata"]["name"] == name), None)

    def _schedule(self, spec: dict[str, Any]) -> tuple[str | None, str | None]:
        wanted = (spec.get("nodeSelector") or {}).get("kubernetes.io/hostname")
        candidates = [n for n in self.nodes if wanted is None or n["metadata"]["name"] == wanted]
        total = len(self.nodes)
        if not candidates:
            return None, f"0/{total} nodes are available: {total} node(s) didn't match Pod's node affinity/selector."
        tolerations = spec.get("tolerations") or []
        for node in candidates:
            taints = [t for t in (node["spec"].get("taints") or []) if t["effect"] in ("NoSchedule", "NoExecute")]
            if all(_tolerates(tolerations, t) for t in taints):
                return node["metadata"]["name"], None
        taint = next(t for t in candidates[0]["spec"]["taints"] if not _tolerates(tolerations, t))
        return None, (
            f"0/{total} nodes are available: 1 node(s) had untolerated taint {{{taint['key']}: }}, "
            f"{total - 1} node(s) didn't match Pod's node affinity/selector."
        )

    def create(self, namespace: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            if namespace not in self.namespaces:
                return 404, status_object(404, "NotFound", f'namespaces "{namespace}" not found',
                                          {"name": namespace, "kind": "namespaces"})
            name = (body.get("metadata") or {}).get("name")
            containers = (body.get("spec") or {}).get("containers") or []
            if not name or not containers:
                return 422, status_object(422, "Invalid", "Pod is invalid: metadata.name and spec.containers are required",
                                          {"name": name or "", "kind": "Pod"})
            if (namespace, name) in self.pods:
                return 409, status_object(409, "AlreadyExists", f'pods "{name}" already exists',
                                          {"name": name, "kind": "pods"})
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            meta.update(namespace=namespace, uid=str(uuid.uuid4()), resourceVersion=str(next(self._ips) + 2000),
                        creationTimestamp=now_rfc3339())
            node, unschedulable = self._schedule(obj["spec"])
            if node:
                obj["spec"]["nodeName"] = node
            pod = _Pod(obj, time.monotonic(), node, unschedulable,
                       {c["name"]: _Container(c["name"], self.scripts.get(c["name"]) or workload_script(c))
                        for c in containers},
                       ip=f"10.244.1.{next(self._ips)}")
            gated = {c["name"] for c in containers if _is_gated(c)}
            for c in containers:  # an ungated container runs its script from the start
                if c["name"] not in gated:
                    pod.containers[c["name"]].opened_at = pod.created + self.pending_s
            self.pods[(namespace, name)] = pod
            if self.cgroup_dir is not None and node == self.cgroup_node:
                self._write_cgroups()
            return 201, self._render(pod)

    def _reap(self) -> None:
        now = time.monotonic()
        for key, pod in list(self.pods.items()):
            if pod.deleted_at is not None and now - pod.deleted_at > self.deletion_s:
                del self.pods[key]

    def _image_loaded(self, container: dict[str, Any]) -> bool:
        return container.get("image") in self.images or container.get("imagePullPolicy") != "Never"

    def _render(self, pod: _Pod) -> dict[str, Any]:
        """The Pod object as of now: phase, conditions and container states follow the clock."""
        now = time.monotonic()
        obj = copy.deepcopy(pod.obj)
        status: dict[str, Any] = {"qosClass": _qos(obj["spec"]["containers"])}
        if pod.node is None:  # the scheduler retries: a node that became Ready takes the pod
            node, pod.unschedulable = self._schedule(obj["spec"])
            if node:
                pod.node, pod.created = node, now
                pod.obj["spec"]["nodeName"] = obj["spec"]["nodeName"] = node
                if self.cgroup_dir is not None and node == self.cgroup_node:
                    self._write_cgroups()
        if pod.node in self.out_of_cpu_nodes:
            status.update(phase="Failed", reason="OutOfcpu", message=(
                "Pod was rejected: Node didn't have enough resource: cpu, requested: "
                f"{_pod_request(obj)}, used: 9500, capacity: 10000"))
            obj["status"] = status
            return obj
        if pod.node is None:
            status.update(phase="Pending", conditions=[{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": pod.unschedulable,
                "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}])
            obj["status"] = status
            return obj
        started = now - pod.created >= self.pending_s
        statuses = []
        for spec in obj["spec"]["containers"]:
            c = pod.containers[spec["name"]]
            base = {"name": c.name, "image": spec["image"], "imageID": "", "ready": False, "restartCount": 0,
                    "started": False}
            if not self._image_loaded(spec):
                base["state"] = {"waiting": {"reason": "ErrImageNeverPull",
                                             "message": f'Container image "{spec["image"]}" is not present with pull policy of Never'}}
            elif not started:
                base["state"] = {"waiting": {"reason": "ContainerCreating"}}
            else:
                self._advance(pod, c, now)
                base["containerID"] = f"containerd://{c.container_id}"
                if c.ended_at is not None:
                    base["state"] = {"terminated": {"exitCode": c.exit_code, "reason": "Completed" if c.exit_code == 0 else "Error",
                                                    "startedAt": now_rfc3339(), "finishedAt": now_rfc3339(),
                                                    "containerID": f"containerd://{c.container_id}"}}
                else:
                    base.update(ready=True, started=True, state={"running": {"startedAt": now_rfc3339()}})
            statuses.append(base)
        states = [s["state"] for s in statuses]
        if all("terminated" in s for s in states):
            phase = "Succeeded" if all(s["terminated"]["exitCode"] == 0 for s in states) else "Failed"
        elif any("running" in s for s in states):
            phase = "Running"
        else:
            phase = "Pending"
        status.update(phase=phase, hostIP="172.18.0.3", podIP=pod.ip if started else None,
                      podIPs=[{"ip": pod.ip}] if started else [], startTime=now_rfc3339(),
                      conditions=[{"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                                   "lastTransitionTime": now_rfc3339()}],
                      containerStatuses=statuses)
        if pod.deleted_at is not None:
            obj["metadata"]["deletionTimestamp"] = now_rfc3339()
            obj["metadata"]["deletionGracePeriodSeconds"] = 0
        obj["status"] = status
        return obj

    def _advance(self, pod: _Pod, c: _Container, now: float) -> None:
        if c.ended_at is None and c.opened_at is not None and c.script.run_s is not None:
            if now - c.opened_at >= c.script.run_s:
                c.ended_at, c.exit_code = c.opened_at + c.script.run_s, c.script.exit_code
        if c.ended_at is None and pod.deleted_at is not None:
            c.ended_at, c.exit_code = pod.deleted_at, (c.script.term_exit_code if c.opened_at else 137)

    def log_text(self, pod: _Pod, c: _Container) -> str:
        # kubelet serves stdout and stderr of the container interleaved, as written
        return (c.script.stdout + c.script.stderr) if c.opened_at is not None else ""

    def exec(self, pod: _Pod, c: _Container, argv: list[str]) -> tuple[str, str, int]:
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


    def _write_cgroups(self) -> None:
        """kubelet's and runc's files for every live pod on the node (SPEC §2), written anew."""
        assert self.cgroup_dir is not None
        node = next(n for n in self.nodes if n["metadata"]["name"] == self.cgroup_node)
        allocatable = _milli(node["status"]["allocatable"]["cpu"])
        kubepods = self.cgroup_dir / "kubelet.slice" / "kubelet-kubepods.slice"
        _write(kubepods, _linear(_shares(allocatable)), None, self.node_cpus())
        mine = [p for p in self.pods.values() if p.node == self.cgroup_node and p.deleted_at is None]
        others = [p for p in self.system_pods if p["spec"].get("nodeName") == self.cgroup_node]
        burstable = sum(_pod_request(p.obj) for p in mine if _qos(p.obj["spec"]["containers"]) == "Burstable")
        burstable += sum(_pod_request(p) for p in others if p["status"]["qosClass"] == "Burstable")
        _write(kubepods / "kubelet-kubepods-burstable.slice", _linear(_shares(burstable)), None)
        _write(kubepods / "kubelet-kubepods-besteffort.slice", 1, None)
        for pod in mine:
            qos = _qos(pod.obj["spec"]["containers"]).lower()
            uid = pod.obj["metadata"]["uid"].replace("-", "_")
            parent = kubepods if qos == "guaranteed" else kubepods / f"kubelet-kubepods-{qos}.slice"
            pod_dir = parent / (f"kubelet-kubepods-pod{uid}.slice" if qos == "guaranteed"
                                else f"kubelet-kubepods-{qos}-pod{uid}.slice")
            limits = [_milli(((c.get("resources") or {}).get("limits") or {}).get("cpu"))
                      for c in pod.obj["spec"]["containers"]]
            pod_limit = sum(limits) if all(limits) else None
            _write(pod_dir, _linear(_shares(_pod_request(pod.obj))), pod_limit)
            _write(pod_dir / f"cri-containerd-{uuid.uuid5(uuid.NAMESPACE_OID, uid).hex * 2}.scope", 1, None)  # pause
            for c in pod.containers.values():
                files = self.container_cgroup(pod, c)
                d = pod_dir / f"cri-containerd-{c.container_id}.scope"
                d.mkdir(parents=True, exist_ok=True)
                for path, content in files.items():
                    (d / path.rsplit("/", 1)[1]).write_text(content)

    def container_cgroup(self, pod: _Pod, c: _Container) -> dict[str, str]:
        """What runc writes for the container on a cgroup v2 node (SPEC §2), and a cpu.stat."""
        spec = next(x for x in pod.obj["spec"]["containers"] if x["name"] == c.name)
        res = spec.get("resources") or {}
        limit = _milli((res.get("limits") or {}).get("cpu"))
        request = _milli((res.get("requests") or {}).get("cpu")) or limit  # the API server's defaulting
        shares = max(2, (request or 0) * 1024 // 1000)
        if self.runc == "old":
            weight = 1 + ((shares - 2) * 9999) // 262142
        else:
            exponent = math.log2(shares)
            weight = min(10000, max(1, math.ceil(10 ** ((exponent * exponent + 125 * exponent) / 612 - 7 / 34))))
        return {
            "/sys/fs/cgroup/cpu.max": f"{limit * 100 if limit else 'max'} 100000\n",
            "/sys/fs/cgroup/cpu.weight": f"{weight}\n",
            "/sys/fs/cgroup/cpu.stat": ("usage_usec 1500000\nuser_usec 1400000\nsystem_usec 100000\nnr_periods 40\n"
                                        "nr_throttled 12\nthrottled_usec 7052500\nnr_bursts 0\nburst_usec 0\n"),
        }


def workload_script(container: dict[str, Any]) -> Script:
    """What cpulab does in a container, by its subcommand (docs/RECORDS.md, shortened): `info`
    and `load` end at once, `burst` after rounds x interval, `spin` without -duration and
    `serve` run until SIGTERM."""
    argv = container.get("command") or []
    if "--" in argv:
        argv = argv[argv.index("--") + 1:]
    sub = argv[1] if len(argv) > 1 else ""
    header = json.dumps({"type": "header", "program": "cpulab", "command": sub, "params": _params(argv[2:]),
                         "time": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}) + "\n"
    summary = json.dumps({"type": "summary", "elapsed_s": 0.1}) + "\n"
    if sub == "serve":
        addr = next((a.split("=", 1)[1] for a in argv if a.startswith("-addr=")), "127.0.0.1:8080")
        port = addr.rpartition(":")[2]
        listening = json.dumps({"type": "listening", "addr": f"[::]:{41234 if port == '0' else port}"}) + "\n"
        return Script(stdout=header + listening, stderr="serve: listening\n", run_s=None)
    if sub == "spin" and not any(a.startswith("-duration=") for a in argv):
        return Script(stdout=header, run_s=None)
    params = _params(argv[2:])
    if sub == "burst":  # as long as the real one: rounds x interval
        return Script(stdout=header + summary, stderr="burst: done\n",
                      run_s=params.get("rounds", 20) * params.get("interval", 1000) / 1000)
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
    (d / "cpu.max").write_text(f"{limit_milli * 100 if limit_milli else 'max'} 100000\n")
    (d / "cpu.stat").write_text("usage_usec 3000000\nnr_periods 80\nnr_throttled 20\nthrottled_usec 9000000\n")
    if cpus is not None:
        (d / "cpuset.cpus.effective").write_text(f"{cpus}\n")


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
        if t.get("key") == taint["key"] and t.get("operator", "Equal") == "Equal" and t.get("value", "") == taint.get("value", ""):
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
        for unit, factor in (("m", 1e-3), ("Ki", 2**10), ("Mi", 2**20), ("Gi", 2**30), ("k", 1e3), ("M", 1e6),
                             ("G", 1e9)):
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


class _Handler(BaseHTTPRequestHandler):
    state: FakeKubeAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- responses -------------------------------------------------------------------
    def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else (json.dumps(body).encode() if not isinstance(body, str) else body.encode())
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
        body = self._read_body() if method in ("POST", "PUT", "PATCH") else None
        # Go's net/http hands the API server the decoded path: the client's "metrics%2Fcadvisor" is "metrics/cadvisor"
        path = unquote(url.path)
        self.state.requests.append((method, path, query, body))
        if not self._authorized():
            return
        st = self.state
        if method == "GET" and path in ("/version", "/version/"):  # the client asks for /version/
            return self._send(200, json.loads((FIXTURES / "version.json").read_text()))
        if method == "GET" and path == "/api/v1/nodes":
            return self._send(200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                                    "items": st.nodes})
        m = re.fullmatch(r"/api/v1/nodes/([^/]+)/proxy/metrics/cadvisor", path)
        if m and method == "GET":
            if not st._node(m[1]):
                return self._not_found("nodes", m[1])
            text = st.cadvisor[min(st.cadvisor_calls, len(st.cadvisor) - 1)]
            st.cadvisor_calls += 1
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
                return self._send(200, {"kind": "Namespace", "apiVersion": "v1",
                                        "metadata": {"name": m[1], "labels": {"kubernetes.io/metadata.name": m[1]}},
                                        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
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
                return self._delete_collection(m[1], query)
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
                    return self._send(200, st._render(pod))
            if sub is None and method == "DELETE":
                with st.lock:
                    if pod.deleted_at is None:
                        pod.deleted_at = time.monotonic()
                    return self._send(200, st._render(pod))
            if sub == "/log" and method == "GET":
                return self._log(pod, query)
            if sub == "/exec" and method == "GET":
                return self._exec(pod, query)
        self._send(404, status_object(404, "NotFound", "the server could not find the requested resource"))

    def _list(self, ns: str, query: dict[str, list[str]]) -> None:
        selector = (query.get("labelSelector") or [""])[0]
        with self.state.lock:
            self.state._reap()
            items = [self.state._render(p) for (pns, _), p in self.state.pods.items()
                     if pns == ns and _matches(p.obj["metadata"].get("labels") or {}, selector)]
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

    def _delete_collection(self, ns: str, query: dict[str, list[str]]) -> None:
        selector = (query.get("labelSelector") or [""])[0]
        with self.state.lock:
            for (pns, _), pod in self.state.pods.items():
                if pns == ns and _matches(pod.obj["metadata"].get("labels") or {}, selector) and pod.deleted_at is None:
                    pod.deleted_at = time.monotonic()
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
            return self._send(400, status_object(400, "BadRequest", f"a container name must be specified for pod {name}"))
        with st.lock:
            rendered = st._render(pod)
        state = next(s["state"] for s in rendered["status"].get("containerStatuses", [{"name": c.name, "state": {"waiting": {"reason": "Pending"}}}])
                     if s["name"] == c.name)
        if "waiting" in state:
            return self._send(400, status_object(
                400, "BadRequest", f'container "{c.name}" in pod "{name}" is waiting to start: {state["waiting"]["reason"]}'))
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
        state = next(s["state"] for s in rendered["status"].get("containerStatuses", []) if s["name"] == c.name)
        if "running" not in state:
            # kubelet refuses before the upgrade; the client sees a failed handshake
            return self._send(400, status_object(400, "BadRequest", f'container "{c.name}" is not running'))
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
        with st.lock:
            stdout, stderr, code = st.exec(pod, c, argv)
        if code == 0:
            error = {"metadata": {}, "status": "Success"}
        else:
            error = {"metadata": {}, "status": "Failure",
                     "message": f"command terminated with non-zero exit code: exit status {code}",
                     "reason": "NonZeroExitCode",
                     "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
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
