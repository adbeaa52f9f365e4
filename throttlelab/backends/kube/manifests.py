"""The Pod manifests the kind and kubernetes backends send, from the placement model.

Pure functions, no API calls: tests validate every manifest built here against
the Kubernetes 1.34 schemas (kubernetes-validate) and the "restricted" Pod
Security Standard without a cluster.

Mapping (docs/LAB.md §4, §6):
* a model Pod -> a v1 Pod bound to the worker node by its name (required node
  affinity, matchFields metadata.name: the node's name is what the backend is
  given, while its kubernetes.io/hostname label may differ), restartPolicy
  Never, one container per model container;
* requests / limits -> resources.requests.cpu / resources.limits.cpu; a limit
  without a request gets request = limit written out, which is what the API
  server's defaulting would do anyway (so what we send is what runs);
* env (GOMAXPROCS, GODEBUG) -> env; service links off, so Kubernetes adds no
  variables of its own;
* every container starts behind `podgate` (a start gate in the image): the
  pod and all its cgroups exist, idle, until the backend opens a container's
  gate; then podgate execs cpulab, which becomes the container's main process;
* every container runs as a non-root user with no capabilities, no privilege
  escalation and the runtime's default seccomp profile, so the pods pass the
  "restricted" Pod Security Standard (namespaces that enforce it admit them).
  Nothing in them needs root: cpulab and podgate only READ cgroup and proc
  files (world-readable), podgate writes its gate files in an emptyDir (which
  kubelet makes world-writable) and signals PID 1, its own user's process;
* the load generator -> a Pod on the load node (the control-plane on kind) with
  a toleration of the control-plane taint and a CPU request (LOAD_CPU_REQUEST_MILLI,
  or its load_cpus), no limit;
* every object carries labels naming the lab, the run, the host and the runner's
  pid, so a sweep can find and delete exactly what a dead run left behind.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass, replace
from typing import Any, Callable

from throttlelab.model import quantities as q
from throttlelab.model.placement import Container, Node, Pod, parse_cpuset, qos_class
from throttlelab.model.builds import CPULAB, PODGATE

LABEL_MANAGED = "app.kubernetes.io/managed-by"
MANAGED_BY = "throttlelab"
LABEL_RUN = "throttlelab.io/run"
LABEL_HOST = "throttlelab.io/host"
LABEL_PID = "throttlelab.io/pid"
LABEL_POD = "throttlelab.io/pod"
LABEL_ROLE = "throttlelab.io/role"
MANAGED_SELECTOR = f"{LABEL_MANAGED}={MANAGED_BY}"

CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"

GATE_VOLUME = "throttlelab-gate"
GATE_DIR = "/throttlelab/gate"
#: Port serve listens on inside a pod when the model asked for loopback port 0 or none.
SERVE_PORT = 8080
#: The user (and group) every container runs as: not root, so the pods pass the "restricted" Pod
#: Security Standard. 65532 is the conventional "nonroot" id of distroless images; the lab's
#: images hold static binaries only (mode 0755, owned by root), so no account entry is needed.
RUN_AS_USER = 65532
#: The load generator's CPU request when its placement names no CPUs (load_cpus), in millicores.
#: Without a request it would be BestEffort: its cgroup under kubepods/besteffort weighs 1 beside
#: the control plane's Burstable pods (API server 250m, controller manager 200m, etcd and
#: scheduler 100m each on kind), so under contention the instrument would measure the control
#: plane instead of the service. One CPU is what one `cpulab load` process, a pacer goroutine and
#: its HTTP clients, uses at the profiles' rates. No limit: a quota would throttle the instrument.
LOAD_CPU_REQUEST_MILLI = 1000

_LABEL_VALUE = re.compile(r"[^A-Za-z0-9_.-]")


def label_value(text: str) -> str:
    """A string made safe as a label value: [A-Za-z0-9_.-], at most 63, alphanumeric at both ends."""
    value = _LABEL_VALUE.sub("-", text)[:63].strip("-_.")
    return value or "unknown"


@dataclass(frozen=True)
class RunIdentity:
    """Who made an object: the run (one deployment), the host and the runner's pid."""

    run: str
    host: str
    pid: int

    @classmethod
    def here(cls, run: str, pid: int) -> "RunIdentity":
        return cls(run=run, host=label_value(socket.gethostname()), pid=pid)

    def labels(self) -> dict[str, str]:
        return {
            LABEL_MANAGED: MANAGED_BY,
            LABEL_RUN: self.run,
            LABEL_HOST: self.host,
            LABEL_PID: str(self.pid),
        }

    @property
    def selector(self) -> str:
        return f"{MANAGED_SELECTOR},{LABEL_RUN}={self.run}"


def cpu_quantity(milli: int) -> str:
    """Kubernetes' canonical CPU quantity: whole CPUs as integers ("2"), else millicores ("500m")."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def kube_container(c: Container) -> Container:
    """The container as the API server stores it: a limit without a request gets request = limit."""
    if c.request_milli is None and c.limit_milli is not None:
        return replace(c, request_milli=c.limit_milli)
    return c


def kube_node(node: Node, allocatable_milli: int | None = None) -> Node:
    """The node as it runs on Kubernetes (defaulted requests, the node's real allocatable CPUs)."""
    pods = tuple(replace(p, containers=tuple(kube_container(c) for c in p.containers)) for p in node.pods)
    return replace(node, pods=pods, allocatable_milli=allocatable_milli or node.allocatable_milli)


def pod_name(pod: Pod, run: str) -> str:
    return f"tl-{pod.name}-{run}"[:63].rstrip("-")


def _listen_anywhere(value: str) -> str:
    host, _, port = value.rpartition(":")
    if host in ("127.0.0.1", "localhost", "[::1]", ""):
        return f"0.0.0.0:{port or SERVE_PORT}"
    return value


_LOOPBACK_URL = re.compile(r"^(?P<scheme>https?://)(?:127\.0\.0\.1|localhost|\[::1\]):(?P<port>\d+)(?P<rest>.*)$")


def bound_key(port: str | int) -> str:
    """podgate's placeholder key for "the address of the pod whose serve listens on this port"."""
    return f"serve:{port}"


def listen_port(args: tuple[str, ...]) -> str | None:
    """The port a `serve` command line listens on (cpulab's default 8080), or None for other commands."""
    if not args or args[0] != "serve":
        return None
    for i, arg in enumerate(args):
        if arg.startswith(("-addr=", "--addr=")):
            return arg.rpartition(":")[2]
        if arg in ("-addr", "--addr") and i + 1 < len(args):
            return args[i + 1].rpartition(":")[2]
    return str(SERVE_PORT)


def container_args(args: tuple[str, ...]) -> list[str]:
    """cpulab's arguments inside a pod. serve listens on every address of the pod (its
    loopback cannot be reached from another pod), and an `-upstream` on this host's
    loopback becomes a placeholder that podgate fills with that upstream pod's address
    when the gate opens ({{serve:PORT}}); nothing else changes."""
    out = list(args)
    if not out or out[0] != "serve":
        return out
    for i, arg in enumerate(out):
        flag, eq, value = arg.partition("=")
        if flag in ("-upstream", "--upstream") and eq:
            match = _LOOPBACK_URL.match(value)
            if match:
                out[i] = f"{flag}={match['scheme']}{{{{{bound_key(match['port'])}}}}}{match['rest']}"
    for i, arg in enumerate(out):
        if arg.startswith(("-addr=", "--addr=")):
            flag, _, value = arg.partition("=")
            out[i] = f"{flag}={_listen_anywhere(value)}"
            return out
        if arg in ("-addr", "--addr") and i + 1 < len(out):
            out[i + 1] = _listen_anywhere(out[i + 1])
            return out
    return [*out, f"-addr=0.0.0.0:{SERVE_PORT}"]


def resources(c: Container) -> dict[str, Any]:
    c = kube_container(c)
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if c.request_milli is not None:
        requests["cpu"] = cpu_quantity(c.request_milli)
    if c.limit_milli is not None:
        limits["cpu"] = cpu_quantity(c.limit_milli)
    if c.request_memory is not None or c.limit_memory is not None:
        requests["memory"] = str(c.request_memory if c.request_memory is not None else c.limit_memory)
    if c.limit_memory is not None:
        limits["memory"] = str(c.limit_memory)
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def gate_file(container: str) -> str:
    return f"{GATE_DIR}/{container}"


def node_affinity(node_name: str) -> dict[str, Any]:
    """spec.affinity that binds a pod to the Node whose metadata.name is `node_name` (matchFields,
    as the DaemonSet controller pins its pods): a node's kubernetes.io/hostname label is the
    kubelet's hostname, which differs from the node's name wherever the kubelet runs with
    --hostname-override or the cloud names nodes otherwise."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def pod_security_context() -> dict[str, Any]:
    """The pod-level settings of the "restricted" Pod Security Standard: a non-root user and the
    runtime's default seccomp profile."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    """The container-level settings of the "restricted" Pod Security Standard: no privilege
    escalation, every capability dropped."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def load_request_milli(cpus: str | None) -> int:
    """The load generator's CPU request: one CPU per CPU of its placement (load_cpus), so on a
    pinned control-plane it weighs as much as the CPUs it was given; else LOAD_CPU_REQUEST_MILLI."""
    return len(parse_cpuset(cpus)) * 1000 if cpus else LOAD_CPU_REQUEST_MILLI


def _pod_spec(node_name: str, grace_s: int, runtime_class: str | None = None) -> dict[str, Any]:
    """What the spec of every pod of the lab holds: never restarted, bound to `node_name`, the
    restricted pod security context, no service links and no service account token; on a cluster
    with one RuntimeClass per runc (the real node), the one named."""
    return {
        **({"runtimeClassName": runtime_class} if runtime_class else {}),
        "restartPolicy": "Never",
        "affinity": node_affinity(node_name),
        "securityContext": pod_security_context(),
        "terminationGracePeriodSeconds": grace_s,
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
    }


def _container_spec(
    name: str, image: str, pull_policy: str, command: list[str], resources: dict[str, Any]
) -> dict[str, Any]:
    """What every container of the lab holds: the restricted container security context, and
    its last log lines kept when it fails."""
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": command,
        "resources": resources,
        "securityContext": container_security_context(),
        # a container that ends with an error (podgate unable to wait, cpulab refusing its flags)
        # leaves its last log lines in its terminated state, where the backend's errors quote them
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def _container(c: Container, image: str, pull_policy: str, gated: bool) -> dict[str, Any]:
    argv = [CPULAB, *container_args(c.args)]
    command = [PODGATE, "run", "-gate", gate_file(c.name), "--", *argv] if gated else argv
    spec = _container_spec(c.name, image, pull_policy, command, resources(c))
    if c.env:
        spec["env"] = [{"name": k, "value": v} for k, v in c.env]
    if gated:
        spec["volumeMounts"] = [{"name": GATE_VOLUME, "mountPath": GATE_DIR}]
    return spec


def pod_manifest(
    pod: Pod,
    *,
    node_name: str,
    image_of: Callable[[str], str],
    ident: RunIdentity,
    pull_policy: str = "Never",
    grace_s: int = 30,
    runtime_class: str | None = None,
) -> dict[str, Any]:
    """A model pod as a v1 Pod pinned to `node_name`, every container behind its gate."""
    labels = {**ident.labels(), LABEL_POD: pod.name, LABEL_ROLE: "workload"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name(pod, ident.run), "labels": labels},
        "spec": {
            **_pod_spec(node_name, grace_s, runtime_class),
            "volumes": [{"name": GATE_VOLUME, "emptyDir": {"sizeLimit": "1Mi"}}],
            "containers": [_container(c, image_of(c.variant), pull_policy, gated=True) for c in pod.containers],
        },
    }


def load_manifest(
    args: list[str],
    *,
    name: str,
    node_name: str,
    image: str,
    ident: RunIdentity,
    pull_policy: str = "Never",
    tolerate_control_plane: bool = True,
    cpu_request_milli: int = LOAD_CPU_REQUEST_MILLI,
    runtime_class: str | None = None,
) -> dict[str, Any]:
    """The load generator: `cpulab load ...` on the load node, ungated, with a CPU request and no
    limit (Burstable: see LOAD_CPU_REQUEST_MILLI)."""
    generator = _container_spec(
        "generator", image, pull_policy, [CPULAB, "load", *args], {"requests": {"cpu": cpu_quantity(cpu_request_milli)}}
    )
    spec: dict[str, Any] = {**_pod_spec(node_name, 10, runtime_class), "containers": [generator]}
    if tolerate_control_plane:
        spec["tolerations"] = [{"key": CONTROL_PLANE_TAINT, "operator": "Exists", "effect": "NoSchedule"}]
    labels = {**ident.labels(), LABEL_POD: "load", LABEL_ROLE: "load"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


def pod_request_milli(pod: dict[str, Any]) -> int:
    """Σ CPU requests of a Pod object's containers (what kubelet sums for the QoS level)."""
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        cpu = (res.get("requests") or {}).get("cpu") or (res.get("limits") or {}).get("cpu")
        if cpu:
            total += q.parse_cpu(cpu, "cpu")
    return total


def _memory_bytes(value: Any) -> int | None:
    if value in (None, ""):
        return None
    text = str(value)
    units = {
        "Ki": 1 << 10,
        "Mi": 1 << 20,
        "Gi": 1 << 30,
        "Ti": 1 << 40,
        "k": 10**3,
        "M": 10**6,
        "G": 10**9,
        "T": 10**12,
    }
    for unit, factor in units.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(float(text))


def spec_qos(pod: dict[str, Any]) -> str:
    """The QoS class the API server assigns to a Pod object from its spec (kubelet's GetPodQOS,
    cpu and memory; see placement.qos_class)."""
    containers = (pod.get("spec") or {}).get("containers") or []
    rows = []
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        cpu = tuple(None if not x.get("cpu") else q.parse_cpu(str(x["cpu"]), "cpu") for x in (req, lim))
        mem = tuple(_memory_bytes(x.get("memory")) for x in (req, lim))
        rows.append((cpu, mem))
    return qos_class(rows)


def pod_qos(pod: dict[str, Any]) -> str:
    """The QoS class of a Pod object: status.qosClass when the API server set it, else from its spec."""
    cls = (pod.get("status") or {}).get("qosClass")
    if cls:
        return cls.lower()
    return spec_qos(pod)
