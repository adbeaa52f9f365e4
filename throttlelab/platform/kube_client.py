"""The one place that talks to a Kubernetes API server: the kind and kubernetes backends run their pods
through it, and creating a kind cluster (platform/kind_clusters.py) waits through it for the nodes.

Everything goes through the official `kubernetes` Python client (config
loading, authentication, TLS, exec over WebSocket); this module adds what the
lab needs on top, and nothing else:

    kc = KubeClient(Path("results/kind/clusters/throttlelab-new/kubeconfig"), "kind-throttlelab-new")
    kc.version()                                   GET    /version
    kc.nodes() / kc.node(name)                     GET    /api/v1/nodes[/{name}]
    kc.namespace(ns)                               GET    /api/v1/namespaces/{ns}
    kc.pods_on_node(node)                          GET    /api/v1/pods?fieldSelector=spec.nodeName=...  (cluster-wide)
    kc.list_pods(ns, selector)                     GET    /api/v1/namespaces/{ns}/pods?labelSelector=...
    kc.create_pod(ns, manifest)                    POST   /api/v1/namespaces/{ns}/pods
    kc.read_pod(ns, name) / kc.wait_pod(...)       GET    /api/v1/namespaces/{ns}/pods/{name}
    kc.logs(ns, name, container[, follow])         GET    /api/v1/namespaces/{ns}/pods/{name}/log
    kc.exec(ns, name, container, argv)             GET    /api/v1/namespaces/{ns}/pods/{name}/exec (WebSocket)
    kc.delete_pod(ns, name) / kc.delete_pods(...)  DELETE /api/v1/namespaces/{ns}/pods[/{name}]  (grace >= 1 s)
    kc.wait_deleted(ns, pods, ...)                 GET    /api/v1/namespaces/{ns}/pods/{name} until 404
    kc.delete_selected(ns, selector, ...)          list_pods, delete_pods, then wait_deleted
    kc.cadvisor(node)                              GET    /api/v1/nodes/{node}/proxy/metrics/cadvisor

The rights this needs: in the lab's namespace, pods (create, get, list, delete,
deletecollection), pods/log (get) and pods/exec (create, get); on the cluster,
get on the worker and load nodes and on their nodes/proxy (E6's cAdvisor). Only
`pods_on_node` lists the pods of every namespace, and only the kind backend,
which reads the node's QoS level back, calls it.

Deletion is always graceful (DELETE_GRACE_S): the API server then keeps the
object, Terminating, until kubelet has stopped its containers and removed its
cgroups, so "the object is gone" means "nothing of it runs on the node". A
grace of 0 would remove the object at once while kubelet kills the containers
some time later, and leftovers would run into the next job.

Objects come back as the API's own JSON (plain dicts, camelCase keys), not as
generated model classes: the manifests we send and the objects we read have
the same shape, and the fake API server of the tests speaks that shape.
Every call has a timeout; every failure becomes a KubeError whose message says
which server, which object and what to do.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from throttlelab.errors import BackendError

#: Container waiting reasons that never resolve by themselves (restartPolicy Never).
FATAL_WAITING = frozenset(
    {
        "ErrImageNeverPull",
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)


class KubeError(BackendError):
    """A Kubernetes API call failed; the message names the server, the object and the fix."""


class NotFound(KubeError):
    """The object does not exist (HTTP 404)."""


class Forbidden(KubeError):
    """The kubeconfig's user may not do this (HTTP 403: authenticated, not authorized)."""


#: The grace period of every deletion the lab asks for, in seconds: SIGTERM, then SIGKILL after one
#: second. Not 0: a forced deletion removes the API object before kubelet has stopped the containers.
DELETE_GRACE_S = 1

#: How long a gracefully deleted pod's object may take to go from the API (kubelet stopping its
#: containers and removing its cgroups), in seconds.
DELETION_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class ExecResult:
    stdout: str
    stderr: str
    returncode: int


@dataclass(frozen=True)
class Sample:
    """One Prometheus sample, with the exporter's own timestamp (ms since the epoch) when it gave one."""

    name: str
    labels: dict[str, str]
    value: float
    timestamp_ms: int | None


def _import_kubernetes():
    try:
        from kubernetes import client, config
        from kubernetes.stream import stream
    except ImportError as exc:  # pragma: no cover - it is a dependency of the package
        raise KubeError(
            f"the kubernetes Python client is not installed ({exc}); pip install -e . installs it"
        ) from None
    return client, config, stream


def _raw(response: Any) -> Any:
    """The urllib3 response behind what a generated method returns with _preload_content=False
    (older clients return it directly, newer ones wrap it in a RESTResponse)."""
    return getattr(response, "response", response)


def _body(response: Any) -> bytes:
    raw = _raw(response)
    data = raw.data if hasattr(raw, "data") else raw.read()
    return data if isinstance(data, bytes) else str(data).encode()


class KubeClient:
    """One cluster, reached through a kubeconfig file and a context named explicitly."""

    def __init__(self, kubeconfig: Path, context: str | None, timeout_s: float = 30.0):
        client, config, self._stream = _import_kubernetes()
        self.kubeconfig = Path(kubeconfig)
        self.context = context
        self.timeout_s = timeout_s
        if not self.kubeconfig.is_file():
            raise KubeError(f"kubeconfig {self.kubeconfig} does not exist")
        try:
            self.api = config.new_client_from_config(
                config_file=str(self.kubeconfig), context=context, persist_config=False
            )
        except (config.ConfigException, ValueError, KeyError, TypeError, OSError) as exc:
            contexts = _context_names(self.kubeconfig)
            raise KubeError(
                f"kubeconfig {self.kubeconfig}: cannot use context {context!r} ({exc}); "
                f"its contexts: {', '.join(contexts) or 'none'}"
            ) from None
        self.server = self.api.configuration.host
        self.core = client.CoreV1Api(self.api)
        # kubernetes.stream swaps the ApiClient's call_api for a WebSocket one while it connects:
        # execs get an ApiClient of their own, and connect one at a time, so that calls made by
        # other threads meanwhile (a sampler, a job waiting) keep plain HTTP.
        self._exec_core = client.CoreV1Api(
            config.new_client_from_config(config_file=str(self.kubeconfig), context=context, persist_config=False)
        )
        self._exec_lock = threading.Lock()
        self.version_api = client.VersionApi(self.api)
        self._api_exception = client.ApiException

    # -- plumbing ---------------------------------------------------------------
    def _timeout(self, seconds: float | None = None) -> tuple[float, float]:
        return (min(10.0, seconds or self.timeout_s), seconds or self.timeout_s)

    def _call(
        self, what: str, method: Callable[..., Any], *args: Any, timeout_s: float | None = None, **kwargs: Any
    ) -> bytes:
        """Call a generated method without deserialising; return the body, or raise a KubeError."""
        try:
            response = method(*args, _preload_content=False, _request_timeout=self._timeout(timeout_s), **kwargs)
            return _body(response)
        except self._api_exception as exc:
            raise self._api_error(what, exc) from None
        except _CONNECTION_ERRORS as exc:
            raise KubeError(
                f"{what}: the API server {self.server} is unreachable ({_short(exc)}); is the cluster running? "
                f"(kubeconfig {self.kubeconfig}, context {self.context})"
            ) from None

    def _json(self, what: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        body = self._call(what, method, *args, **kwargs)
        try:
            return json.loads(body)
        except json.JSONDecodeError:
            raise KubeError(
                f"{what}: the API server {self.server} answered with something that is not JSON: {body[:200]!r}"
            ) from None

    def _api_error(self, what: str, exc: Any) -> KubeError:
        status = getattr(exc, "status", 0)
        message = ""
        body = getattr(exc, "body", None)
        if body:
            try:
                message = json.loads(body).get("message", "")
            except (json.JSONDecodeError, AttributeError, TypeError):
                message = str(body)[:300]
        message = message or getattr(exc, "reason", "") or str(exc)
        if status == 404:
            return NotFound(f"{what}: not found ({message})")
        if status == 403:
            return Forbidden(
                f"{what}: the API server {self.server} does not allow the user of kubeconfig {self.kubeconfig} "
                f"context {self.context} to do this (HTTP 403: {message}); grant the right with a Role or ClusterRole"
            )
        if status == 401:
            return KubeError(
                f"{what}: the API server {self.server} refused the credentials of kubeconfig {self.kubeconfig} "
                f"context {self.context} (HTTP {status}: {message})"
            )
        if status == 0:
            return KubeError(f"{what}: the API server {self.server} is unreachable ({message})")
        return KubeError(f"{what}: HTTP {status} from {self.server}: {message}")

    # -- cluster ------------------------------------------------------------------
    def version(self) -> dict[str, Any]:
        return self._json("GET /version", self.version_api.get_code, timeout_s=10)

    def nodes(self) -> list[dict[str, Any]]:
        return self._json("list nodes", self.core.list_node)["items"]

    def node(self, name: str) -> dict[str, Any]:
        return self._json(f"node {name}", self.core.read_node, name)

    def namespace(self, name: str) -> dict[str, Any]:
        return self._json(f"namespace {name}", self.core.read_namespace, name)

    # -- pods ---------------------------------------------------------------------
    def pods_on_node(self, node: str) -> list[dict[str, Any]]:
        """Every pod bound to a node, in every namespace (for the QoS-level design where that level is
        read back). Needs the right to list pods cluster-wide, which a namespaced user lacks."""
        return self._json(
            f"pods on node {node}", self.core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={node}"
        )["items"]

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self._json(
            f"pods {selector} in {namespace}", self.core.list_namespaced_pod, namespace, label_selector=selector
        )["items"]

    def events(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's events (what the scheduler, kubelet and the runtime said about its objects)."""
        return self._json(f"events in {namespace}", self.core.list_namespaced_event, namespace)["items"]

    def create_pod(self, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
        name = manifest["metadata"]["name"]
        return self._json(f"create pod {namespace}/{name}", self.core.create_namespaced_pod, namespace, manifest)

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self._json(f"pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace)

    def wait_pod(
        self,
        namespace: str,
        name: str,
        until: Callable[[dict[str, Any]], bool],
        timeout_s: float,
        what: str,
        poll_s: float = 0.25,
        unschedulable_grace_s: float = 5.0,
        node: str | None = None,
    ) -> dict[str, Any]:
        """Poll the pod until `until(pod)`; fail at once when it cannot get there by itself.

        `node`: the node the pod is bound to by its affinity. The scheduler's refusal is then judged
        by that node (`pinned_refusal`): final at once when it has too little of a resource or a
        taint the pod does not tolerate; waited out while it is not Ready (still joining: its
        not-ready taint goes when it is), and for `unschedulable_grace_s` after (the scheduler
        retries). The scheduler's message alone cannot tell: it sums up the reasons of every
        node, and the other nodes refuse a pinned pod for reasons of their own (their taints)."""
        deadline = time.monotonic() + timeout_s
        unschedulable_since: float | None = None
        pod: dict[str, Any] = {}
        while True:
            pod = self.read_pod(namespace, name)
            if until(pod):
                return pod
            fatal = fatal_reason(pod) or ended_reason(pod)
            if fatal:
                raise KubeError(f"pod {namespace}/{name}: {fatal}")
            status = pod.get("status") or {}
            if status.get("phase") == "Failed":  # admission (OutOfcpu, ...) or a crash: never waited out
                raise KubeError(
                    f"pod {namespace}/{name} failed: {status.get('reason') or 'Failed'}: "
                    f"{status.get('message', '')}; {describe_pod(pod)}"
                )
            unschedulable = unschedulable_reason(pod)
            if unschedulable:
                now = time.monotonic()
                joining = False  # a pinned pod's node that is not Ready yet: waited out, with no grace running
                if node is not None:
                    target = self.node(node)
                    final = pinned_refusal(pod, target)
                    if final:
                        raise KubeError(f"pod {namespace}/{name} cannot be scheduled: {final}")
                    joining = not node_ready(target)[0]
                if joining:
                    unschedulable_since = None  # the grace counts from the first poll that sees the node Ready
                else:
                    unschedulable_since = now if unschedulable_since is None else unschedulable_since
                    passing = now - unschedulable_since <= unschedulable_grace_s
                    if not passing or (node is None and not passing_unschedulable(unschedulable)):
                        raise KubeError(f"pod {namespace}/{name} cannot be scheduled: {unschedulable}")
            if time.monotonic() > deadline:
                raise KubeError(f"pod {namespace}/{name}: not {what} after {timeout_s:.0f} s; {describe_pod(pod)}")
            time.sleep(poll_s)

    def wait_nodes_ready(self, names: list[str], timeout_s: float, poll_s: float = 1.0) -> None:
        """Every node in ``names`` Ready, or a KubeError naming those that are not (`kind create
        --wait` waits for the control plane only; a worker may still be joining). Reads each node
        by name: a user who may get these nodes need not be allowed to list all of them."""
        deadline = time.monotonic() + timeout_s
        while True:
            waiting = {}
            for name in names:
                try:
                    ok, why = node_ready(self.node(name))
                except NotFound:
                    ok, why = False, "not a node of the cluster"
                if not ok:
                    waiting[name] = why
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise KubeError(
                    f"node(s) not Ready after {timeout_s:.0f} s at {self.server}: "
                    + "; ".join(f"{n}: {w}" for n, w in waiting.items())
                )
            time.sleep(poll_s)

    def logs(self, namespace: str, name: str, container: str) -> str:
        body = self._call(
            f"logs of {namespace}/{name}/{container}",
            self.core.read_namespaced_pod_log,
            name,
            namespace,
            container=container,
        )
        return body.decode("utf-8", "replace")

    def follow_logs(self, namespace: str, name: str, container: str, quiet_s: float = 6 * 3600) -> Iterator[bytes]:
        """The container's log as it is written, until the container ends (chunks of bytes).
        `quiet_s` bounds a silence between chunks: a quiet workload is not a dead connection."""
        what = f"follow logs of {namespace}/{name}/{container}"
        try:
            response = self.core.read_namespaced_pod_log(
                name,
                namespace,
                container=container,
                follow=True,
                _preload_content=False,
                _request_timeout=(min(10.0, self.timeout_s), quiet_s),
            )
        except self._api_exception as exc:
            raise self._api_error(what, exc) from None
        raw = _raw(response)
        try:
            yield from raw.stream(4096, decode_content=False)
        finally:
            raw.release_conn()

    def exec(
        self, namespace: str, name: str, container: str, argv: list[str], timeout_s: float | None = None
    ) -> ExecResult:
        """Run argv in a running container (no stdin, no TTY); stdout and stderr apart, and the exit code."""
        what = f"exec {' '.join(argv)!r} in {namespace}/{name}/{container}"
        limit = timeout_s or self.timeout_s
        try:
            with self._exec_lock:
                ws = self._stream(
                    self._exec_core.connect_get_namespaced_pod_exec,
                    name,
                    namespace,
                    container=container,
                    command=argv,
                    stderr=True,
                    stdin=False,
                    stdout=True,
                    tty=False,
                    _preload_content=False,
                )
        except self._api_exception as exc:
            # the WebSocket transport reports every failure as status 0 with the reason as text
            text = f"{getattr(exc, 'reason', '')} {exc}"
            if getattr(exc, "status", 0) == 0:
                refused = handshake_error(text)
                if refused:
                    code, message = refused
                    error = NotFound if code == 404 else KubeError
                    raise error(f"{what}: HTTP {code}: {message}") from None
                if _looks_unreachable(text):
                    raise KubeError(f"{what}: the API server {self.server} is unreachable ({_short(exc)})") from None
            raise self._api_error(what, exc) from None
        try:
            ws.run_forever(timeout=limit)
            if ws.is_open():
                raise KubeError(f"{what}: still running after {limit:.0f} s")
            stdout = ws.read_channel(1)
            stderr = ws.read_channel(2)
            error = ws.read_channel(3)
        finally:
            ws.close()
        return ExecResult(stdout=stdout, stderr=stderr, returncode=exit_code(error, what))

    def delete_pod(self, namespace: str, name: str, grace_s: int = DELETE_GRACE_S) -> bool:
        """Ask for the pod's graceful deletion; False when it was already gone. The object stays,
        Terminating, until kubelet has stopped its containers (wait_deleted)."""
        _check_grace(grace_s)
        try:
            self._call(
                f"delete pod {namespace}/{name}",
                self.core.delete_namespaced_pod,
                name,
                namespace,
                grace_period_seconds=grace_s,
            )
        except NotFound:
            return False
        return True

    def delete_pods(self, namespace: str, selector: str, grace_s: int = DELETE_GRACE_S) -> None:
        """Ask for the graceful deletion of every pod matching `selector` (see delete_pod)."""
        _check_grace(grace_s)
        self._call(
            f"delete pods {selector} in {namespace}",
            self.core.delete_collection_namespaced_pod,
            namespace,
            label_selector=selector,
            grace_period_seconds=grace_s,
        )

    def wait_deleted(self, namespace: str, pods: list[dict[str, Any]], timeout_s: float, poll_s: float = 0.25) -> None:
        """Until each of these Pod objects (as last read) is gone from the API: after a graceful
        deletion the API server removes a pod only once kubelet has stopped its containers. A pod
        of the same name but another uid is a new pod, so the old one is gone."""
        deadline = time.monotonic() + timeout_s
        left = list(pods)
        while True:
            still = []
            for pod in left:
                meta = pod["metadata"]
                try:
                    current = self.read_pod(namespace, meta["name"])
                except NotFound:
                    continue
                if current["metadata"].get("uid") == meta.get("uid"):
                    still.append(current)
            if not still:
                return
            if time.monotonic() > deadline:
                raise KubeError(
                    f"pod(s) in {namespace} not gone {timeout_s:.0f} s after their deletion: "
                    + "; ".join(still_there(p) for p in still)
                )
            left = still
            time.sleep(poll_s)

    def delete_selected(
        self, namespace: str, selector: str, timeout_s: float, poll_s: float = 0.25
    ) -> list[dict[str, Any]]:
        """Delete every pod matching `selector`, gracefully, and wait until the API has removed
        each of them (wait_deleted: kubelet has stopped their containers). Returns the pods
        deleted, as read before their deletion (none: nothing is deleted)."""
        pods = self.list_pods(namespace, selector)
        if pods:
            self.delete_pods(namespace, selector)
            self.wait_deleted(namespace, pods, timeout_s, poll_s)
        return pods

    # -- monitoring -----------------------------------------------------------------
    def cadvisor(self, node: str) -> list[Sample]:
        """The kubelet's cAdvisor metrics of a node, through the API server's node proxy."""
        body = self._call(
            f"cAdvisor metrics of node {node}", self.core.connect_get_node_proxy_with_path, node, "metrics/cadvisor"
        )
        return parse_prometheus(body.decode("utf-8", "replace"))


# -- pure helpers (tested on their own) -------------------------------------------------


def _context_names(path: Path) -> list[str]:
    try:
        import yaml

        data = yaml.safe_load(path.read_text()) or {}
        return [c.get("name", "?") for c in data.get("contexts") or []]
    except (OSError, ValueError, AttributeError):
        return []


def _short(exc: BaseException) -> str:
    text = str(exc)
    match = re.search(
        r"(Connection refused|Name or service not known|timed out|No route to host|Connection reset)", text
    )
    return match.group(1) if match else text[:200]


def _looks_unreachable(text: str) -> bool:
    return bool(re.search(r"Connection refused|Name or service not known|timed out|No route to host|Errno", text))


def _connection_errors() -> tuple[type[BaseException], ...]:
    import urllib3.exceptions

    # urllib3's HTTPError is the base of MaxRetryError, NewConnectionError, ProtocolError, timeouts
    return (urllib3.exceptions.HTTPError, OSError)


_CONNECTION_ERRORS = _connection_errors()


def handshake_error(text: str) -> tuple[int, str] | None:
    """A refused WebSocket upgrade, as websocket-client reports it ("Handshake status 400 Bad Request
    -+-+- {headers} -+-+- {body}"): the HTTP status and the Status message of the body."""
    match = re.search(r"Handshake status (\d{3})", text)
    if not match:
        return None
    message = text.rsplit("-+-+-", 1)[-1].strip()
    try:
        message = json.loads(message).get("message", message)
    except (json.JSONDecodeError, AttributeError):
        message = message[:300]
    return int(match.group(1)), message


def exit_code(error_channel: str, what: str) -> int:
    """The exit code from the exec error channel: a metav1.Status, Success or NonZeroExitCode."""
    if not error_channel.strip():
        raise KubeError(f"{what}: the connection ended without an exit status")
    try:
        status = json.loads(error_channel)
    except json.JSONDecodeError:
        raise KubeError(f"{what}: unreadable exit status {error_channel[:200]!r}") from None
    if status.get("status") == "Success":
        return 0
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            return int(cause["message"])
    raise KubeError(f"{what}: {status.get('message') or status}")


def _check_grace(grace_s: int) -> None:
    if grace_s < 1:
        raise ValueError(
            f"grace period {grace_s} s: a deletion without grace removes the Pod object while "
            f"kubelet kills its containers later; use {DELETE_GRACE_S} s or more"
        )


def still_there(pod: dict[str, Any]) -> str:
    """A pod that should be gone, for an error message: name, whether it is Terminating, its containers."""
    meta = pod.get("metadata") or {}
    how = "Terminating" if meta.get("deletionTimestamp") else "not being deleted"
    where = (pod.get("spec") or {}).get("nodeName") or "no node"
    return (
        f"{meta.get('name')} ({how} on {where}; {describe_pod(pod)}): kubelet has not confirmed that its "
        "containers stopped; look at the node (kubectl describe pod, kubelet's log)"
    )


def container_state(pod: dict[str, Any], container: str) -> dict[str, Any]:
    """{"waiting": {...}} | {"running": {...}} | {"terminated": {...}} | {} for one container."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return status.get("state") or {}
    return {}


def container_id(pod: dict[str, Any], container: str) -> str | None:
    """The runtime's id of a container ("containerd://<id>" -> "<id>")."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container and status.get("containerID"):
            return status["containerID"].split("://", 1)[-1]
    return None


def all_running(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    wanted = len((pod.get("spec") or {}).get("containers") or [])
    return (
        (pod.get("status") or {}).get("phase") == "Running"
        and len(statuses) == wanted
        and all("running" in (s.get("state") or {}) for s in statuses)
    )


def finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def fatal_reason(pod: dict[str, Any]) -> str | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FATAL_WAITING:
            hint = ""
            if waiting["reason"] in ("ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff"):
                hint = "; the image must be loaded into the cluster's nodes first (kind: the load_images rule)"
            return f"container {status.get('name')}: {waiting['reason']}: {waiting.get('message', '')}{hint}"
    return None


def ended_reason(pod: dict[str, Any]) -> str | None:
    """A container that has ended in a pod that never restarts one (restartPolicy Never): whatever
    the caller waits for that needs it running will not come."""
    if (pod.get("spec") or {}).get("restartPolicy") != "Never":
        return None
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        ended = (status.get("state") or {}).get("terminated")
        if ended is not None:
            message = (ended.get("message") or "").strip()
            return f"container {status.get('name')} ended (exit {ended.get('exitCode')}, {ended.get('reason', '')})" + (
                f": {message[-300:]!r}" if message else ""
            )
    return None


def unschedulable_reason(pod: dict[str, Any]) -> str | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (
            cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            return cond.get("message", "Unschedulable")
    return None


#: Taints a node carries while it becomes Ready: a pod refused for them alone may still be placed.
PASSING_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def passing_unschedulable(message: str) -> bool:
    """Whether the scheduler's refusal can pass by itself: only while the sole taint it names
    is a node's not-ready / unreachable one. An untolerated taint of another kind, too little
    CPU or a node selector no node matches stays, and is reported at once."""
    taints = re.findall(r"untolerated taint\(?s?\)? \{([^:}]+)", message)
    if not taints:
        return False
    permanent = ("Insufficient", "didn't match Pod's node affinity", "didn't have free ports")
    only_matches = re.sub(r"\d+ node\(s\) didn't match Pod's node affinity/selector", "", message)
    return all(t.strip() in PASSING_TAINTS for t in taints) and not any(w in only_matches for w in permanent)


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    """Whether one of the pod's tolerations matches a node's taint (core/v1 Toleration semantics)."""
    for t in tolerations:
        if t.get("effect") not in (None, "", taint.get("effect")):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t["key"] == taint.get("key")):
            return True
        if (
            t.get("key") == taint.get("key")
            and t.get("operator", "Equal") == "Equal"
            and (t.get("value") or "") == (taint.get("value") or "")
        ):
            return True
    return False


def pinned_refusal(pod: dict[str, Any], node: dict[str, Any]) -> str | None:
    """Why the scheduler's refusal of a pod bound to `node` (by its affinity) is final, or None
    while it may still pass: the node lacks a resource the pod requests ("Insufficient cpu": the
    other nodes of a pinned pod fail earlier filters, so the shortage is this node's), or it
    has a NoSchedule / NoExecute taint the pod does not tolerate other than the not-ready /
    unreachable ones a joining node carries."""
    message = unschedulable_reason(pod) or ""
    name = (node.get("metadata") or {}).get("name")
    short = re.findall(r"Insufficient [\w./-]+", message)
    if short:
        return f"{message} (node {name}: {', '.join(sorted(set(short)))})"
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    taints = [
        t
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute")
        and t.get("key") not in PASSING_TAINTS
        and not tolerates(tolerations, t)
    ]
    if taints:
        listed = ", ".join(f"{t['key']}={t.get('value') or ''}:{t['effect']}" for t in taints)
        return f"{message} (node {name} has the taint(s) {listed}, which the pod does not tolerate)"
    return None


def node_ready(node: dict[str, Any]) -> tuple[bool, str]:
    """(Ready?, why not) from a Node object's Ready condition."""
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            if cond.get("status") == "True":
                return True, ""
            return False, f"Ready={cond.get('status')} ({cond.get('reason', '')}: {cond.get('message', '')})"
    return False, "no Ready condition yet"


def describe_pod(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    parts = [f"phase {status.get('phase', '?')}"]
    for s in status.get("containerStatuses") or []:
        state = s.get("state") or {}
        for key, value in state.items():
            reason = (value or {}).get("reason")
            parts.append(f"{s.get('name')}: {key}" + (f" ({reason})" if reason else ""))
    for cond in status.get("conditions") or []:
        if cond.get("status") == "False" and cond.get("message"):
            parts.append(f"{cond.get('type')}: {cond['message']}")
    return "; ".join(parts)


_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+(?P<ts>-?\d+))?\s*$"
)
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}.get(m.group(1), m.group(0)), value)


def parse_prometheus(text: str) -> list[Sample]:
    """Prometheus text exposition format 0.0.4 -> samples (comments and blank lines skipped)."""
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise KubeError(f"metrics line {number} is not in the Prometheus text format: {line[:160]!r}")
        labels: dict[str, str] = {}
        rest = match["labels"] or ""
        pos = 0
        while pos < len(rest):
            lm = _LABEL.match(rest, pos)
            if not lm:
                raise KubeError(f"metrics line {number}: cannot read the labels {rest!r}")
            labels[lm.group(1)] = _unescape(lm.group(2))
            pos = lm.end()
        raw = match["value"]
        value = {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}.get(raw)
        if value is None:
            try:
                value = float(raw)
            except ValueError:
                raise KubeError(f"metrics line {number}: value {raw!r} is not a number") from None
        samples.append(Sample(match["name"], labels, value, int(match["ts"]) if match["ts"] else None))
    return samples
