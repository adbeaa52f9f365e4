"""throttlelab.platform.kube_client against a real HTTP server on 127.0.0.1 (tests/kube_api_server.py)
that speaks the Kubernetes API endpoints the lab uses; the kubernetes Python client does the talking.
The last tests here hold the fake to the cluster it stands for (deletion, admission, scheduling,
QoS, exec, authorization), so that the backends' tests against it can catch what a cluster would."""

from __future__ import annotations

import json
import math
import socket
import time

import pytest

from kube_api_server import FakeKubeAPI, Script, recorded_cadvisor
from throttlelab.platform import kube_client as kcm
from throttlelab.platform.kube_client import Forbidden, KubeClient, KubeError, NotFound

WORKER = "throttlelab-new-worker"
CONTROL_PLANE = "throttlelab-new-control-plane"
IMAGE = "cpulab-kind:go124mod"


@pytest.fixture
def api():
    server = FakeKubeAPI().start()
    server.images.add(IMAGE)
    yield server
    server.stop()


@pytest.fixture
def kc(api, tmp_path) -> KubeClient:
    return KubeClient(api.write_kubeconfig(tmp_path / "kubeconfig"), "kind-throttlelab-new")


def pod(
    name: str, node: str = WORKER, gated: bool = True, image: str = IMAGE, tolerate: bool = False, **labels
) -> dict:
    container = {
        "name": "app",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["/podgate", "run", "-gate", "/throttlelab/gate/app", "--", "/cpulab", "info"]
        if gated
        else ["/cpulab", "info"],
    }
    spec = {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node}, "containers": [container]}
    if tolerate:
        spec["tolerations"] = [
            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"lab": "t", **labels}},
        "spec": spec,
    }


def test_version_nodes_and_namespace(kc):
    assert kc.version()["gitVersion"] == "v1.34.11"
    assert [n["metadata"]["name"] for n in kc.nodes()] == [CONTROL_PLANE, WORKER]
    assert kc.node(WORKER)["status"]["allocatable"]["cpu"] == "10"
    assert kc.namespace("default")["status"]["phase"] == "Active"
    with pytest.raises(NotFound, match='nodes "nope" not found'):
        kc.node("nope")
    with pytest.raises(NotFound):
        kc.namespace("nope")


def test_kubeconfig_and_context_are_explicit(api, tmp_path):
    path = api.write_kubeconfig(tmp_path / "kubeconfig", context="mine")
    with pytest.raises(KubeError, match=r"cannot use context 'other'.*its contexts: mine"):
        KubeClient(path, "other")
    with pytest.raises(KubeError, match="does not exist"):
        KubeClient(tmp_path / "missing", "mine")
    assert KubeClient(path, "mine").server == api.url


def test_wrong_credentials_say_so(api, tmp_path):
    kc = KubeClient(api.write_kubeconfig(tmp_path / "kubeconfig", token="wrong"), "kind-throttlelab-new")
    with pytest.raises(KubeError, match=r"refused the credentials.*HTTP 401: Unauthorized"):
        kc.version()


def test_unreachable_server_is_named(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }
    (tmp_path / "kubeconfig").write_text(json.dumps(cfg))
    kc = KubeClient(tmp_path / "kubeconfig", "c")
    kc.api.configuration.retries = 0
    t0 = time.monotonic()
    with pytest.raises(KubeError, match=rf"API server http://127.0.0.1:{port} is unreachable.*is the cluster running"):
        kc.version()
    assert time.monotonic() - t0 < 30


def test_pod_lifecycle_logs_exec_and_delete(api, kc):
    api.scripts["app"] = Script(
        stdout='{"type":"header","command":"info"}\n{"type":"summary"}\n', stderr="GOMAXPROCS=2\n", run_s=0.2
    )
    created = kc.create_pod("default", pod("p1"))
    assert created["metadata"]["uid"] and created["spec"]["nodeName"] == WORKER
    with pytest.raises(KubeError, match="already exists"):
        kc.create_pod("default", pod("p1"))
    running = kc.wait_pod("default", "p1", kcm.all_running, 5, "running")
    assert "running" in kcm.container_state(running, "app")
    assert kcm.container_id(running, "app")
    assert kc.logs("default", "p1", "app") == ""  # behind its gate: nothing written yet

    cat = kc.exec("default", "p1", "app", ["/podgate", "cat", "/sys/fs/cgroup/cpu.max", "/nope"])
    assert cat.returncode == 1 and json.loads(cat.stdout) == {"/sys/fs/cgroup/cpu.max": "max 100000\n", "/nope": None}
    missing = kc.exec("default", "p1", "app", ["cat", "/sys/fs/cgroup/cpu.max"])
    assert missing.returncode == 126 and "executable file not found" in missing.stderr

    assert kc.exec("default", "p1", "app", ["/podgate", "open", "/throttlelab/gate/app"]).returncode == 0
    streamed = b"".join(kc.follow_logs("default", "p1", "app")).decode()
    assert streamed == '{"type":"header","command":"info"}\n{"type":"summary"}\nGOMAXPROCS=2\n'
    done = kc.wait_pod("default", "p1", kcm.finished, 5, "finished")
    assert done["status"]["phase"] == "Succeeded"
    assert kcm.container_state(done, "app")["terminated"]["exitCode"] == 0
    assert kc.logs("default", "p1", "app") == streamed
    # what the real node answers (docs/KUBE_REAL.md): containerd no longer knows a container that has ended
    with pytest.raises(
        KubeError,
        match=r"HTTP 500: Internal error occurred: unable to upgrade connection: container "
        r"not found \(\"app\"\)",
    ) as refused:
        kc.exec("default", "p1", "app", ["/podgate", "cat", "/x"])
    assert "unreachable" not in str(refused.value)

    assert kc.delete_pod("default", "p1") is True
    kc.wait_deleted("default", [done], timeout_s=5)
    assert kc.delete_pod("default", "p1") is False
    with pytest.raises(NotFound):
        kc.read_pod("default", "p1")


def test_exit_code_of_a_failed_exec_and_a_failed_container(api, kc):
    api.scripts["app"] = Script(stdout="", stderr="boom\n", exit_code=3, run_s=0.05)
    kc.create_pod("default", pod("p2"))
    kc.wait_pod("default", "p2", kcm.all_running, 5, "running")
    assert kc.exec("default", "p2", "app", ["/podgate", "dance"]).returncode == 2
    kc.exec("default", "p2", "app", ["/podgate", "open", "/throttlelab/gate/app"])
    done = kc.wait_pod("default", "p2", kcm.finished, 5, "finished")
    assert done["status"]["phase"] == "Failed"
    assert kcm.container_state(done, "app")["terminated"]["exitCode"] == 3


def test_scheduling_failures_are_explained_at_once(kc):
    kc.create_pod("default", pod("on-nothing", node="no-such-node"))
    # the scheduler's filters in their order: the control-plane fails on its taint before its labels
    with pytest.raises(
        KubeError,
        match=r"cannot be scheduled: 0/2 nodes are available: 1 node\(s\) didn't match Pod's "
        r"node affinity/selector, 1 node\(s\) had untolerated taint \{node-role",
    ):
        kc.wait_pod("default", "on-nothing", kcm.all_running, 30, "running", unschedulable_grace_s=0.3)
    # the control-plane is tainted: without the toleration a pod cannot go there, with it it can
    kc.create_pod("default", pod("untolerated", node=CONTROL_PLANE))
    with pytest.raises(KubeError, match="untolerated taint {node-role.kubernetes.io/control-plane: }"):
        kc.wait_pod("default", "untolerated", kcm.all_running, 30, "running", unschedulable_grace_s=0.3)
    kc.create_pod("default", pod("tolerated", node=CONTROL_PLANE, tolerate=True))
    assert kc.wait_pod("default", "tolerated", kcm.all_running, 5, "running")["spec"]["nodeName"] == CONTROL_PLANE


def test_an_image_that_was_not_loaded_fails_with_the_fix(kc):
    kc.create_pod("default", pod("no-image", image="cpulab-kind:never-loaded"))
    with pytest.raises(KubeError, match=r"ErrImageNeverPull.*must be loaded into the cluster's nodes first"):
        kc.wait_pod("default", "no-image", kcm.all_running, 5, "running")


def test_wait_times_out_with_the_pods_state(api, kc):
    api.pending_s = 60
    kc.create_pod("default", pod("slow"))
    with pytest.raises(KubeError, match=r"not running after 0 s; phase Pending; app: waiting \(ContainerCreating\)"):
        kc.wait_pod("default", "slow", kcm.all_running, 0.3, "running")


def test_delete_by_label_and_list_by_label(api, kc):
    for name, run in (("a", "1"), ("b", "1"), ("c", "2")):
        kc.create_pod("default", pod(name, run=run))
    assert sorted(p["metadata"]["name"] for p in kc.list_pods("default", "lab=t,run=1")) == ["a", "b"]
    kc.delete_selected("default", "lab=t,run=1", timeout_s=5)
    assert api.live_pods() == ["c"]
    on_worker = kc.pods_on_node(WORKER)
    assert {"c", "kindnet-x7k2p", "coredns-66bc5c9577-4hx2m"} <= {p["metadata"]["name"] for p in on_worker}
    assert ("DELETE", "/api/v1/namespaces/default/pods") in {(m, p) for m, p, _q, _b in api.requests}


def test_cadvisor_through_the_node_proxy_keeps_its_own_timestamps(api, kc):
    api.recorded_cadvisor = recorded_cadvisor()
    first, second = kc.cadvisor(WORKER), kc.cadvisor(WORKER)
    assert ("GET", f"/api/v1/nodes/{WORKER}/proxy/metrics/cadvisor") in {(m, p) for m, p, _q, _b in api.requests}

    def one(samples, name):
        (s,) = [s for s in samples if s.name == name and s.labels.get("container") == "burst"]
        return s

    a = one(first, "container_cpu_cfs_throttled_seconds_total")
    b = one(second, "container_cpu_cfs_throttled_seconds_total")
    assert a.labels["pod"] == "tl-e6-abc123" and a.labels["namespace"] == "default"
    assert (b.timestamp_ms - a.timestamp_ms) / 1000 == pytest.approx(
        12.149
    )  # docs/LAB.md §4, E6: not the 20 s between scrapes
    assert (b.value - a.value) / ((b.timestamp_ms - a.timestamp_ms) / 1000) == pytest.approx(0.4795, abs=1e-3)
    with pytest.raises(NotFound):
        kc.cadvisor("nope")


@pytest.mark.parametrize(
    "line, name, labels, value, ts",
    [
        ("up 1", "up", {}, 1.0, None),
        ('a_total{x="1",y="q\\"uote"} 2.5 1764504000123', "a_total", {"x": "1", "y": 'q"uote'}, 2.5, 1764504000123),
        ('b{path="C:\\\\dir",n="a\\nb",} +Inf', "b", {"path": "C:\\dir", "n": "a\nb"}, math.inf, None),
        ("c{} -3e-2 -5", "c", {}, -0.03, -5),
    ],
)
def test_prometheus_text_format(line, name, labels, value, ts):
    (s,) = kcm.parse_prometheus(f"# HELP x y\n# TYPE x counter\n\n{line}\n")
    assert (s.name, s.labels, s.value, s.timestamp_ms) == (name, labels, value, ts)


@pytest.mark.parametrize("bad", ["no value here", "x{a=1} 2", 'x{a="1"} seven'])
def test_prometheus_rejects_what_it_cannot_read(bad):
    with pytest.raises(KubeError, match="line 1"):
        kcm.parse_prometheus(bad)


def test_exec_exit_status_channel():
    assert kcm.exit_code('{"metadata":{},"status":"Success"}', "x") == 0
    failure = {
        "metadata": {},
        "status": "Failure",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": "137"}]},
    }
    assert kcm.exit_code(json.dumps(failure), "x") == 137
    with pytest.raises(KubeError, match="container not found"):
        kcm.exit_code('{"status":"Failure","message":"container not found"}', "x")
    with pytest.raises(KubeError, match="without an exit status"):
        kcm.exit_code("", "x")


def test_execs_and_plain_calls_from_several_threads_do_not_mix(api, kc):
    """kubernetes.stream swaps the client's transport while an exec connects: a sampler thread's
    exec must not turn another thread's plain calls into WebSocket handshakes."""
    from concurrent.futures import ThreadPoolExecutor

    kc.create_pod("default", pod("busy"))
    kc.wait_pod("default", "busy", kcm.all_running, 5, "running")

    def exec_many(_):
        return [
            kc.exec("default", "busy", "app", ["/podgate", "cat", "/sys/fs/cgroup/cpu.stat"]).returncode
            for _ in range(10)
        ]

    def plain_many(i):
        out = []
        for j in range(10):
            kc.create_pod("default", pod(f"p-{i}-{j}"))
            out.append(kc.read_pod("default", "busy")["status"]["phase"])
        return out

    with ThreadPoolExecutor(6) as pool:
        execs = [pool.submit(exec_many, i) for i in range(3)]
        plains = [pool.submit(plain_many, i) for i in range(3)]
        assert all(code == 0 for f in execs for code in f.result())
        assert all(phase == "Running" for f in plains for phase in f.result())


# -- the fake behaves as the cluster does where the lab's code could get it wrong ------------------------


def wait_until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_a_forced_deletion_removes_the_object_while_the_containers_run_on(api, kc):
    api.force_linger_s = 0.5
    kc.create_pod("default", pod("forced"))
    kc.wait_pod("default", "forced", kcm.all_running, 5, "running")
    kc.core.delete_namespaced_pod("forced", "default", grace_period_seconds=0)  # what the lab never does
    with pytest.raises(NotFound):
        kc.read_pod("default", "forced")
    assert [c["pod"] for c in api.running_containers(WORKER)] == ["forced"]  # kubelet kills it later
    wait_until(lambda: api.running_containers() == [])


def test_a_graceful_deletion_keeps_the_pod_until_its_containers_stopped(api, kc):
    api.scripts["app"] = Script(stdout="", run_s=None, ignores_term=True)  # only the grace period's end stops it
    kc.create_pod("default", pod("stubborn"))
    kc.wait_pod("default", "stubborn", kcm.all_running, 5, "running")
    kc.exec("default", "stubborn", "app", ["/podgate", "open", "/throttlelab/gate/app"])
    t0 = time.monotonic()
    assert kc.delete_pod("default", "stubborn") is True
    terminating = kc.read_pod("default", "stubborn")
    assert terminating["metadata"]["deletionTimestamp"] and terminating["metadata"]["deletionGracePeriodSeconds"] == 1
    assert "running" in kcm.container_state(terminating, "app")
    kc.wait_deleted("default", [terminating], timeout_s=5, poll_s=0.02)
    assert time.monotonic() - t0 >= 1.0  # SIGKILL at the end of the 1 s grace, then the object went
    assert api.running_containers() == []


def test_a_gated_pod_stops_at_once_on_a_graceful_deletion(api, kc):
    kc.create_pod("default", pod("waiting"))
    kc.wait_pod("default", "waiting", kcm.all_running, 5, "running")
    before = kc.read_pod("default", "waiting")
    t0 = time.monotonic()
    kc.delete_pod("default", "waiting")
    kc.wait_deleted("default", [before], timeout_s=5, poll_s=0.02)
    assert time.monotonic() - t0 < 1.0  # podgate ends on SIGTERM, no need to wait out the grace period
    assert api.running_containers() == []


def test_the_client_never_forces_a_deletion(kc):
    with pytest.raises(ValueError, match="grace period 0 s: a deletion without grace removes the Pod object"):
        kc.delete_pod("default", "x", grace_s=0)
    with pytest.raises(ValueError, match="grace period 0 s"):
        kc.delete_pods("default", "lab=t", grace_s=0)


def test_kubelets_admission_rejects_a_pod_it_has_no_cpu_for(kc):
    """A pod that names its node skips the scheduler; kubelet's admission rejects it (Failed, OutOfcpu),
    and waiting for it fails at once."""
    big = pod("big")
    big["spec"]["nodeName"] = WORKER
    big["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "12"}}
    kc.create_pod("default", big)
    t0 = time.monotonic()
    with pytest.raises(
        KubeError,
        match=r"failed: OutOfcpu: Pod was rejected: Node didn't have enough resource: cpu, "
        r"requested: 12000, used: 200, capacity: 10000",
    ):
        kc.wait_pod("default", "big", kcm.all_running, 30, "running")
    assert time.monotonic() - t0 < 2


def test_the_scheduler_refuses_a_pod_that_asks_more_than_its_node_has_left(kc):
    big = pod("big")
    big["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "9900m"}}  # 200m are coredns' and kindnet's
    kc.create_pod("default", big)
    t0 = time.monotonic()
    with pytest.raises(KubeError, match=rf"Insufficient cpu.*\(node {WORKER}: Insufficient cpu\)"):
        kc.wait_pod("default", "big", kcm.all_running, 30, "running", unschedulable_grace_s=30, node=WORKER)
    assert time.monotonic() - t0 < 2


def test_a_container_that_ends_at_its_gate_fails_the_wait_at_once(api, kc):
    api.scripts["app"] = Script(
        gate_error="podgate: cannot watch /throttlelab/gate for the gate: inotify_init1: "
        "too many open files (raise fs.inotify.max_user_instances on the node)"
    )
    manifest = pod("no-inotify")
    manifest["spec"]["containers"][0]["terminationMessagePolicy"] = "FallbackToLogsOnError"
    kc.create_pod("default", manifest)
    t0 = time.monotonic()
    with pytest.raises(
        KubeError, match=r"container app ended \(exit 1, Error\): .*raise fs.inotify.max_user_instances"
    ):
        kc.wait_pod("default", "no-inotify", kcm.all_running, 30, "running")
    assert time.monotonic() - t0 < 2


@pytest.mark.parametrize(
    "resources, qos",
    [
        ({}, "BestEffort"),
        ({"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}, "Burstable"),  # cpu only: never Guaranteed
        ({"limits": {"cpu": "500m", "memory": "64Mi"}}, "Guaranteed"),  # requests default to the limits
        ({"requests": {"cpu": "1", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "64Mi"}}, "Guaranteed"),
        ({"requests": {"cpu": "500m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "64Mi"}}, "Burstable"),
        ({"requests": {"memory": "64Mi"}}, "Burstable"),
    ],
)
def test_the_qos_class_is_the_api_servers(kc, resources, qos):
    manifest = pod("q")
    manifest["spec"]["containers"][0]["resources"] = resources
    assert kc.create_pod("default", manifest)["status"]["qosClass"] == qos


def test_an_exec_takes_time_and_costs_the_container_cpu(api, kc):
    api.exec_latency_s, api.exec_cpu_us = 0.3, 25_000
    kc.create_pod("default", pod("busy"))
    kc.wait_pod("default", "busy", kcm.all_running, 5, "running")

    def usage() -> int:
        text = json.loads(kc.exec("default", "busy", "app", ["/podgate", "cat", "/sys/fs/cgroup/cpu.stat"]).stdout)
        return int(text["/sys/fs/cgroup/cpu.stat"].split()[1])

    t0 = time.monotonic()
    first = usage()
    assert time.monotonic() - t0 >= 0.3
    assert usage() - first == 25_000  # the first read cost the container 25 ms of CPU
    assert api.charged_us("busy", "app") == 50_000


def test_a_restricted_user_is_refused_what_its_role_does_not_grant(api, kc):
    api.restricted_to = "default"
    with pytest.raises(Forbidden, match='cannot list resource "nodes" in API group "" at the cluster scope'):
        kc.nodes()
    with pytest.raises(Forbidden, match='cannot list resource "pods" in API group "" at the cluster scope'):
        kc.pods_on_node(WORKER)
    with pytest.raises(Forbidden, match='cannot get resource "namespaces"'):
        kc.namespace("default")
    with pytest.raises(Forbidden, match='in the namespace "kube-system"'):
        kc.list_pods("kube-system", "k8s-app=kube-dns")
    assert kc.list_pods("default", "lab=t") == [] and kc.node(WORKER)["metadata"]["name"] == WORKER
