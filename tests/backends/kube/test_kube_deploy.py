"""The Kubernetes deployment (shared by the kind and kubernetes backends) against the loopback
API server: pods behind their start gates, readback, jobs, services, load, cAdvisor, errors,
and cleanup on success, failure, Ctrl-C, a dead runner's leftovers and SIGKILL of the runner:
each time until the API objects are gone AND nothing of them runs on a node any more."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace

import pytest

from conftest import PROJECT
from conftest import E1_NODE as E1
from kube_api_server import FakeKubeAPI, Script, _qos as api_server_qos, recorded_cadvisor
from throttlelab.backends.kube import manifests as mf
from throttlelab.backends.base import CADVISOR_COUNTERS, BackendError, DesignMismatch
from throttlelab.platform.kube_client import Forbidden, KubeClient, KubeError, NotFound, all_running, container_state
from throttlelab.backends.kube.kube_backend import KubeBackend, KubeDeployment
from throttlelab.backends.kube.run_pods import KubeSettings, NodeAccess, NotTestable, PodLimits
from throttlelab.model.placement import Container, LoadPlacement, Node, Pod

WORKER = "throttlelab-new-worker"
CONTROL_PLANE = "throttlelab-new-control-plane"


class FastDeployment(KubeDeployment):
    limits = PodLimits(
        poll_s=0.02,
        term_grace_s=0.3,
        unschedulable_grace_s=0.2,
        deletion_timeout_s=10.0,
        containers_gone_timeout_s=10.0,
    )


class FastKube(KubeBackend):
    deployment = FastDeployment

    def deploy(self, node, load=None):
        return self.deployment(self, node, load, self.settings, self.client)


@pytest.fixture
def api():
    server = FakeKubeAPI(pending_s=0.05, deletion_s=0.05).start()
    server.images |= {"cpulab-kind:go124mod", "cpulab-kind:go125mod"}
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def nothing_left_running(api):
    """After every test: no container of the lab runs on any node (a force-deleted pod's would)."""
    yield
    assert api.running_containers() == [], "containers left running on a node"


def settings(api, tmp_path, **changes) -> KubeSettings:
    base = dict(
        kubeconfig=api.write_kubeconfig(tmp_path / "kubeconfig"),
        context="kind-throttlelab-new",
        worker_node=WORKER,
        load_node=CONTROL_PLANE,
        pull_policy="Never",
    )
    return KubeSettings(**{**base, **changes})


@pytest.fixture
def backend(api, tmp_path):
    return FastKube(settings(api, tmp_path), "runc-new")


def test_pods_wait_at_their_gates_then_run_and_are_removed(api, backend):
    with backend.deploy(E1) as dep:
        (name,) = api.live_pods()
        pod = backend.client.read_pod("default", name)
        assert pod["status"]["phase"] == "Running"
        assert backend.client.logs("default", name, "app") == ""  # nothing has started yet
        readback = {r.path: r for r in dep.verify()}
        assert readback["node/burstable/pod-e1/app"].actual["quota_us"] == 200_000
        assert readback["node/burstable/pod-e1/app"].actual["weight"] == 59
        assert readback["node/burstable/pod-e1/sidecar"].actual["weight"] == 17
        # an existing cluster gives no node access: the levels above are recorded as unreadable, not as matching
        for path in ("node", "node/burstable", "node/burstable/pod-e1"):
            assert readback[path].actual == {"unreadable": backend.unreadable_reason}
            assert readback[path].mismatches == []
        assert readback["node/burstable/pod-e1"].design["quota_us"] == 250_000
        out = dep.run_job("e1", "app", timeout_s=10)
        assert out.returncode == 0 and out.source == "e1/app"
        assert [r["type"] for r in out.records] == ["header", "summary"]
        assert out.stderr == "info: done\n"  # stderr lines are kept apart from the records
        assert dep.run_job("e1", "sidecar", timeout_s=10).returncode == 0
    assert api.live_pods() == []


class ReadsTheNode(FastDeployment):
    """A deployment that reads the levels above the containers back (as kind's does)."""

    class Strict(NodeAccess):
        strict = True  # (and finds none of them: upper_levels is NodeAccess's)

    def __init__(self, *args):
        super().__init__(*args, access=self.Strict())


def test_the_burstable_level_counts_the_nodes_other_pods_where_it_is_read(api, backend):
    with ReadsTheNode(backend, E1, None, backend.settings, backend.client) as dep:
        levels = {lv.design.path: lv for lv in dep.readback.levels}
    qos = levels["node/burstable"]
    assert "other burstable pods 100m" in qos.design.formula  # coredns on the worker (fixture)
    assert qos.design.weight == 1 + ((700 * 1024 // 1000 - 2) * 9999) // 262142
    assert levels["node"].design.weight == 391  # docs/LAB.md §2: kubepods for 10 allocatable CPUs
    assert ("GET", "/api/v1/pods") in {(m, p) for m, p, _q, _b in api.requests}  # every namespace's pods


def test_an_existing_cluster_needs_no_right_beyond_the_namespace(api, tmp_path):
    """The kubernetes backend lists no pods of other namespaces (the design uses
    them only for the burstable level, which it cannot read there), lists no nodes and reads no
    namespace object: a user with a Role in its namespace (pods, pods/log, pods/exec) and get on
    the two nodes and their proxy runs every step. The fake answers 403 to anything else."""
    api.restricted_to = "default"
    backend = FastKube(settings(api, tmp_path), "runc-new")
    backend.preflight()
    assert backend.capabilities().cpus == 10 and backend.environment()["worker_node"] == WORKER
    node = Node(
        "node",
        (*E1.pods, Pod("e6", (Container("burst", ("burst", "-threads=8"), request_milli=100, limit_milli=1000),))),
    )
    with backend.deploy(node) as dep:
        dep.verify()
        assert dep.run_job("e1", "app", timeout_s=10).returncode == 0
        assert dep.read_stat("e6", "burst")["nr_periods"] == 40
        assert dep.run_load(["load", "-target=http://10.244.1.12:41234", "-rps=10"], timeout_s=10).returncode == 0
        assert dep.monitoring_sample("e6", "burst")["container_cpu_cfs_periods_total"] == 40
        burstable = next(lv.design for lv in dep.readback.levels if lv.design.path == "node/burstable")
    assert "other burstable pods not counted" in burstable.formula
    asked = {(m, p) for m, p, _q, _b in api.requests}
    assert ("GET", "/api/v1/pods") not in asked and ("GET", "/api/v1/nodes") not in asked
    assert api.live_pods() == []


def test_a_forbidden_call_says_what_right_is_missing(api, tmp_path):
    api.restricted_to = "default"
    kc = FastKube(settings(api, tmp_path), "runc-new").client
    with pytest.raises(
        KubeError,
        match=r'cannot list resource "pods" in API group "" at the cluster scope.*'
        r"grant the right with a Role or ClusterRole",
    ):
        kc.pods_on_node(WORKER)


def test_a_wrong_runtime_conversion_is_a_design_mismatch(api, backend):
    api.runc = "old"  # the node's runc converts linearly; the design says runc-new
    with backend.deploy(E1) as dep:
        with pytest.raises(
            DesignMismatch,
            match=r"(?s)weight: designed 59, read 20.*weight: designed 17, read 4.*set runtime accordingly",
        ):
            dep.verify()
    assert api.live_pods() == []


def test_a_failure_inside_the_block_still_removes_every_pod(api, backend):
    with pytest.raises(RuntimeError, match="boom"):
        with backend.deploy(E1):
            assert len(api.live_pods()) == 1
            raise RuntimeError("boom")
    assert api.live_pods() == []


def test_a_failing_workload_says_how(api, backend):
    api.scripts["app"] = Script(stdout="", stderr="cpulab info: bad flag\n", exit_code=2, run_s=0.05)
    with backend.deploy(E1) as dep:
        with pytest.raises(BackendError, match=r"e1/app: exited with 2 \(Error\); stderr: 'cpulab info: bad flag'"):
            dep.run_job("e1", "app", timeout_s=10)
    assert api.live_pods() == []


def test_a_job_past_its_timeout_is_killed(api, backend):
    node = Node("node", (Pod("s", (Container("spin", ("spin", "-threads=1"), request_milli=100),)),))
    with backend.deploy(node) as dep:
        t0 = time.monotonic()
        with pytest.raises(BackendError, match="s/spin: still running after 0 s; stopped with SIGTERM"):
            dep.run_job("s", "spin", timeout_s=0.3)
        assert time.monotonic() - t0 < 10
    stops = [q["command"] for m, p, q, _ in api.requests if p.endswith("/exec")]
    assert ["/podgate", "signal", "TERM"] in stops


def test_a_job_that_ignores_sigterm_loses_its_pod(api, backend):
    api.scripts["spin"] = Script(stdout="", run_s=None, ignores_term=True)
    node = Node("node", (Pod("s", (Container("spin", ("spin", "-threads=1"), request_milli=100),)),))
    with backend.deploy(node) as dep:
        with pytest.raises(BackendError, match="still running after 0 s; its pod was deleted"):
            dep.run_job("s", "spin", timeout_s=0.2)
    assert api.live_pods() == []


def test_a_service_reports_a_reachable_address_and_stops_on_sigterm(api, backend):
    node = Node(
        "node", (Pod("svc", (Container("server", ("serve", "-addr=127.0.0.1:0"), request_milli=500, role="service"),)),)
    )
    with backend.deploy(node) as dep:
        handle = dep.start("svc", "server")
        listening = dep.wait_for_record(handle, "listening", timeout_s=5)
        pod = backend.client.read_pod("default", handle.pod_name)
        assert listening["addr"] == f"{pod['status']['podIP']}:41234"  # not the pod's wildcard address
        assert listening["listen_addr"] == "[::]:41234"
        stat = dep.read_stat("svc", "server")
        # the usage includes what the execs into the container cost it (the open and earlier reads; the
        # fake charges an exec when it ends, so not this read itself)
        charged = api.charged_us(handle.pod_name, "server") - api.exec_cpu_us
        # (no CPU limit: the kernel counts no CFS periods for it)
        assert stat["nr_periods"] == stat["nr_throttled"] == 0
        assert stat["usage_usec"] == 1_500_000 + charged and stat["t_ns"] > 0
        pod_stat = dep.read_stat("svc")
        assert pod_stat["level"].startswith("container") and pod_stat["usage_usec"] > stat["usage_usec"]
        out = dep.stop(handle)
        assert out.returncode == 0 and [r["type"] for r in out.records] == ["header", "listening"]
    execs = [q["command"] for m, p, q, _ in api.requests if p.endswith("/exec")]
    assert ["/podgate", "signal", "TERM"] in execs
    assert api.live_pods() == []


def test_a_downstream_gets_its_upstream_pods_address_when_it_starts(api, backend):
    upstream = Container(
        "server", ("serve", "-addr=127.0.0.1:9001"), request_milli=100, limit_milli=100, role="service"
    )
    downstream = Container(
        "server", ("serve", "-addr=127.0.0.1:0", "-upstream=http://127.0.0.1:9001"), request_milli=500, role="service"
    )
    node = Node("node", (Pod("upstream", (upstream,)), Pod("downstream", (downstream,))))
    with backend.deploy(node) as dep:
        up = dep.start("upstream", "server")
        assert dep.wait_for_record(up, "listening", timeout_s=5)["addr"].endswith(":9001")
        dep.start("downstream", "server")
        up_ip = backend.client.read_pod("default", up.pod_name)["status"]["podIP"]
        opened = [q["command"] for m, p, q, _ in api.requests if p.endswith("/exec") and "open" in q["command"]]
        assert opened[-1] == ["/podgate", "open", "/throttlelab/gate/server", f"serve:9001={up_ip}:9001"]
    (down,) = [
        b
        for b in api.sent("POST", r"/api/v1/namespaces/default/pods")
        if b["metadata"]["labels"][mf.LABEL_POD] == "downstream"
    ]
    assert "-upstream=http://{{serve:9001}}" in down["spec"]["containers"][0]["command"]


def test_pod_level_counters_of_a_multi_container_pod_need_the_node(backend):
    with backend.deploy(E1) as dep:
        with pytest.raises(NotTestable, match="pod-level counters of e1 need node access"):
            dep.read_stat("e1")


def test_the_load_generator_runs_on_the_load_node(api, backend, tmp_path):
    with backend.deploy(E1) as dep:
        out = dep.run_load(["load", "-target=http://10.244.1.12:41234", "-rps=10"], timeout_s=10)
        assert out.source == "load/generator" and out.returncode == 0
        assert [r["type"] for r in out.records] == ["header", "summary"]
    (load,) = [
        b
        for b in api.sent("POST", r"/api/v1/namespaces/default/pods")
        if b["metadata"]["labels"][mf.LABEL_ROLE] == "load"
    ]
    deleted = [p for m, p, _q, _b in api.requests if m == "DELETE"]
    assert f"/api/v1/namespaces/default/pods/{load['metadata']['name']}" in deleted  # deleted as soon as it is read
    assert load["spec"]["affinity"] == mf.node_affinity(CONTROL_PLANE)
    assert load["spec"]["containers"][0]["command"][:2] == ["/cpulab", "load"]


def test_the_load_generator_is_not_besteffort(api, backend):
    """The load generator requests CPU (mf.LOAD_CPU_REQUEST_MILLI; no limit), so
    the API server makes it Burstable; BestEffort it would weigh 1 beside the control plane."""
    with backend.deploy(E1) as dep:
        dep.run_load(["load", "-target=http://10.244.1.12:41234", "-rps=10"], timeout_s=10)
    (load,) = [
        b
        for b in api.sent("POST", r"/api/v1/namespaces/default/pods")
        if b["metadata"]["labels"][mf.LABEL_ROLE] == "load"
    ]
    (c,) = load["spec"]["containers"]
    assert c["resources"] == {"requests": {"cpu": "1"}}
    assert api_server_qos(load["spec"]["containers"]) == "Burstable"


def test_a_load_generator_the_load_node_has_no_room_for_is_reported_at_once(api, backend):
    api.system_pods.append(
        {
            "metadata": {"name": "etcd", "namespace": "kube-system"},
            "spec": {
                "nodeName": CONTROL_PLANE,
                "containers": [{"name": "etcd", "resources": {"requests": {"cpu": "9500m"}}}],
            },
            "status": {"phase": "Running", "qosClass": "Burstable"},
        }
    )
    with backend.deploy(E1) as dep:
        t0 = time.monotonic()
        with pytest.raises(
            KubeError, match=r"Insufficient cpu.*the load generator requests 1 CPU .* more than that node has left"
        ):
            dep.run_load(["load", "-rps=1"], timeout_s=10)
        assert time.monotonic() - t0 < 5
    assert api.live_pods() == []


def test_without_the_toleration_the_control_plane_refuses_the_load(api, tmp_path):
    backend = FastKube(settings(api, tmp_path, tolerate_control_plane=False), "runc-new")
    with backend.deploy(E1) as dep:
        with pytest.raises(KubeError, match="untolerated taint"):
            dep.run_load(["load", "-rps=1"], timeout_s=10)
    assert api.live_pods() == []


def test_monitoring_uses_cadvisors_own_timestamps(api, backend):
    node = Node(
        "node", (Pod("e6", (Container("burst", ("burst", "-threads=8"), request_milli=100, limit_milli=1000),)),)
    )
    with backend.deploy(node) as dep:
        (live,) = api.live_pods()
        api.recorded_cadvisor = recorded_cadvisor()
        api.cadvisor_pods["tl-e6-abc123"] = live
        first = dep.monitoring_sample("e6", "burst")
        second = dep.monitoring_sample("e6", "burst")
    assert (second["t_ms"] - first["t_ms"]) / 1000 == pytest.approx(12.149)
    assert (
        second["container_cpu_cfs_throttled_periods_total"] - first["container_cpu_cfs_throttled_periods_total"] == 13
    )
    assert second["container_cpu_cfs_periods_total"] - first["container_cpu_cfs_periods_total"] == 37
    assert second["scraped_t_ns"] > first["scraped_t_ns"]


E6 = Node(
    "node",
    (
        Pod(
            "e6",
            (
                Container("burst", ("burst", "-threads=8"), request_milli=100, limit_milli=1000),
                Container("calm", ("spin",), request_milli=100),
            ),
        ),
    ),
)


def first_scrape(dep, pod, container, timeout_s=2.0):
    """monitoring_sample once cAdvisor has read the container (it reads a new one within its loop's tick)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return dep.monitoring_sample(pod, container)
        except BackendError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def test_cadvisor_serves_its_cached_readings_of_each_containers_cpu_stat(api, backend):
    """The node proxy's /metrics/cadvisor as the kubelet's: the container's cpu.stat as cAdvisor's
    housekeeping last read it, with that reading's time; a scrape between two readings gets the
    cached one; the CFS series only for a container with a quota; the pod's own series beside."""
    api.housekeeping_s = 0.4
    with backend.deploy(E6) as dep:
        first = first_scrape(dep, "e6", "burst")
        again = dep.monitoring_sample("e6", "burst")
        assert again["t_ms"] == first["t_ms"] and again["scraped_t_ns"] > first["scraped_t_ns"]  # cached
        assert first["container_cpu_usage_seconds_total"] == 1.5  # its cpu.stat: usage_usec 1500000, no exec yet
        assert (
            first["container_cpu_cfs_periods_total"],
            first["container_cpu_cfs_throttled_periods_total"],
            first["container_cpu_cfs_throttled_seconds_total"],
        ) == (40, 12, 7.0525)
        dep.read_stat("e6", "burst")  # an exec in the container: its cpu.stat counts the CPU it cost
        charged = api.charged_us(api.live_pods()[0], "burst")
        time.sleep(0.45)
        later = dep.monitoring_sample("e6", "burst")
        assert later["t_ms"] - first["t_ms"] >= 400
        assert later["container_cpu_usage_seconds_total"] == pytest.approx(1.5 + charged / 1e6)
        samples = dep.kc.cadvisor(WORKER)
        (live,) = api.live_pods()
        mine = [s for s in samples if s.labels.get("pod") == live]
        calm = {s.name for s in mine if s.labels["container"] == "calm"}
        assert calm == {"container_cpu_usage_seconds_total"}  # no quota: no CFS periods, no CFS series
        pod_level = {s.name for s in mine if s.labels["container"] == ""}
        assert pod_level == set(CADVISOR_COUNTERS)
        assert all(s.labels["namespace"] == "default" and s.timestamp_ms for s in mine)
    assert not [s for s in dep.kc.cadvisor(WORKER) if s.labels.get("pod") == live]  # gone with its containers


def test_cadvisor_without_rights_on_the_node_proxy_is_a_clear_error(api, tmp_path):
    api.restricted_to, api.proxy_allowed = "default", False
    backend = FastKube(settings(api, tmp_path), "runc-new")
    with backend.deploy(E6) as dep:
        with pytest.raises(
            BackendError,
            match=rf'may not: .*HTTP 403: nodes "{WORKER}" is forbidden: .* cannot get '
            r'resource "nodes/proxy".*the lab needs get on the resource nodes/proxy',
        ):
            dep.monitoring_sample("e6", "burst")
    with pytest.raises(Forbidden):  # the API server authorizes before it looks the node up
        backend.client.cadvisor("nope")
    api.proxy_allowed = True
    with pytest.raises(NotFound, match='nodes "nope" not found'):
        backend.client.cadvisor("nope")


def test_leftovers_are_the_labs_pods_still_in_the_namespace(api, backend):
    """What the smoke test's last step asks: none once a deployment is over, each live pod while one lives."""
    assert backend.leftovers() == []
    with backend.deploy(E1):
        (left,) = backend.leftovers()
        assert left.startswith(f"a pod of the lab in default: {api.live_pods()[0]} (not being deleted on {WORKER}")
    assert backend.leftovers() == []


def test_node_level_placements_are_not_testable_on_an_existing_cluster(api, backend):
    pinned = Node("node", E1.pods, cpus="0")
    with pytest.raises(NotTestable, match="pinning node CPUs"):
        with backend.deploy(pinned):
            pass
    with pytest.raises(NotTestable, match="load generator 8-9"):
        with backend.deploy(E1, LoadPlacement(cpus="8-9")):
            pass
    with pytest.raises(NotTestable, match="asks for runc-old"):
        with backend.deploy(Node("node", E1.pods, runtime="runc-old")):
            pass
    assert api.sent("POST", r"/api/v1/namespaces/default/pods") == []
    caps = backend.capabilities()
    assert caps.can_pin_cpus is False and caps.has_pause_level and caps.cpus == 10


def test_preflight_names_what_is_wrong(api, tmp_path):
    FastKube(settings(api, tmp_path), "runc-new").preflight()
    with pytest.raises(
        BackendError,
        match=r"worker_node 'worker-7' is not a node.*its nodes: throttlelab-new-control-plane, throttlelab-new-worker",
    ):
        FastKube(settings(api, tmp_path, worker_node="worker-7"), "runc-new").preflight()
    with pytest.raises(BackendError, match="load_node 'cp' is not a node"):
        FastKube(settings(api, tmp_path, load_node="cp"), "runc-new").preflight()
    with pytest.raises(BackendError, match="namespace 'lab' does not exist"):
        FastKube(settings(api, tmp_path, namespace="lab"), "runc-new").preflight()
    with pytest.raises(BackendError, match="kubeconfig .*nowhere does not exist"):
        FastKube(settings(api, tmp_path, kubeconfig=tmp_path / "nowhere"), "runc-new").preflight()


def test_an_image_that_is_not_in_the_cluster_stops_the_deployment(api, backend):
    api.images.discard("cpulab-kind:go124mod")
    with pytest.raises(KubeError, match="ErrImageNeverPull"):
        with backend.deploy(E1):
            pass
    assert api.live_pods() == []


def test_the_environment_names_the_cluster(backend):
    env = backend.environment()
    assert env["backend"] == "kubernetes" and env["server_version"] == "v1.34.11"
    assert env["kubelet"] == "v1.34.11" and env["container_runtime"] == "containerd://2.3.4"
    assert env["kernel"] == "7.0.0" and env["cpu_count"] == 10 and env["worker_node"] == WORKER


def test_the_sweep_removes_what_dead_runners_left(api, backend):
    kc = backend.client
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = mf.RunIdentity.here("stale-run", dead.pid)
    mine = mf.RunIdentity.here("live-run", os.getpid())
    for ident in (stale, mine):
        kc.create_pod(
            "default", mf.pod_manifest(E1.pods[0], node_name=WORKER, image_of=lambda v: f"cpulab-kind:{v}", ident=ident)
        )
    kc.wait_pod("default", mf.pod_name(E1.pods[0], "stale-run"), all_running, 5, "running")
    with backend.deploy(Node("node", (Pod("x", (Container("c", ("info",)),)),))):
        names = api.live_pods()
        # the stale pod is gone, and so are its containers: none of them runs beside this job
        assert [c for c in api.running_containers() if c["pod"] == mf.pod_name(E1.pods[0], "stale-run")] == []
    assert mf.pod_name(E1.pods[0], "stale-run") not in names
    assert mf.pod_name(E1.pods[0], "live-run") in names
    kc.delete_selected("default", mine.selector, timeout_s=5)


RUNNER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {project!r})
    from throttlelab.backends.kube.kube_backend import KubeBackend, KubeSettings
    from throttlelab.model.placement import Container, Node, Pod
    s = KubeSettings(kubeconfig=Path({kubeconfig!r}), context="kind-throttlelab-new", worker_node={worker!r},
                     load_node={cp!r}, pull_policy="Never")
    node = Node("node", (Pod("victim", (Container("spin", ("spin", "-threads=1"), request_milli=100),)),))
    dep = KubeBackend(s, "runc-new").deploy(node).__enter__()
    dep.start("victim", "spin")
    print("ready", flush=True)
    time.sleep(600)
""")


def test_the_guardian_removes_the_pods_when_the_runner_is_sigkilled(api, tmp_path):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    script = RUNNER.format(project=str(PROJECT), kubeconfig=str(kubeconfig), worker=WORKER, cp=CONTROL_PLANE)
    runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert runner.stdout.readline().strip() == "ready"
        assert len(api.live_pods()) == 1
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
        deadline = time.monotonic() + 30
        while api.live_pods() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert api.live_pods() == [], "the guardian did not delete the dead runner's pods"
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def test_a_client_is_named_in_the_errors_when_the_cluster_goes_away(api, backend):
    kc: KubeClient = backend.client
    api.stop()
    kc.api.configuration.retries = 0
    kc.api.rest_client.pool_manager.clear()  # drop kept-alive connections to the stopped server
    with pytest.raises(KubeError, match="is unreachable"):
        kc.nodes()


def test_the_s2_cascade_runs_by_pod_ips(api, backend):
    """S2's cascade on kind/kubernetes: the upstream is a pod IP, not 127.0.0.1; the experiment
    checks the port it asked for, and the downstream reaches its upstream by the pod's address."""
    from pathlib import Path

    from throttlelab.backends.base import Capabilities
    from throttlelab.experiments import REGISTRY, Context
    from throttlelab.model.config import load_design

    design = load_design({"profile": "ci", "backend": "kind"}, Path(PROJECT) / "config")
    (variant, spec), *_ = [(v, s) for v, s in design.experiments["S2"].variants.items() if s.mode == "cascade"]
    spec = spec.with_changes(node_cpus=None, load_cpus=None)
    caps = Capabilities(cpus=2, cgroup_version=2, can_pin_cpus=False, has_pause_level=True, runtime="runc-new")
    result = REGISTRY["S2"](spec, Context(backend=backend, capabilities=caps, node_cpus=None, seed=1))
    opened = [q["command"] for m, p, q, _ in api.requests if p.endswith("/exec") and "open" in q["command"]]
    assert any(arg.startswith("serve:") for cmd in opened for arg in cmd[3:]), opened
    assert any(r.get("src") == "load/generator" for r in result.records)


def test_preflight_waits_for_every_node_to_be_ready(api, tmp_path):
    api.not_ready_for(WORKER, 0.6)  # still joining, as after `kind create --wait`
    t0 = time.monotonic()
    FastKube(settings(api, tmp_path), "runc-new").preflight()
    assert time.monotonic() - t0 >= 0.5

    class Impatient(FastKube):
        node_ready_timeout_s = 0.3

    api.not_ready_for(WORKER, 30)
    with pytest.raises(BackendError, match=rf"not Ready.*{WORKER}: Ready=False \(KubeletNotReady"):
        Impatient(settings(api, tmp_path), "runc-new").preflight()


def test_a_pod_refused_by_kubelets_admission_fails_at_once(api, backend):
    api.kubelet_allocatable[WORKER] = "500m"  # the kubelet counts less than the Node object told the scheduler
    t0 = time.monotonic()
    with pytest.raises(KubeError, match="failed: OutOfcpu: Pod was rejected: Node didn't have enough resource: cpu"):
        with backend.deploy(E1):
            pass
    assert time.monotonic() - t0 < 2
    assert api.live_pods() == []


class Patient(FastDeployment):
    limits = replace(FastDeployment.limits, unschedulable_grace_s=60.0)


class PatientKube(KubeBackend):
    def deploy(self, node, load=None):
        return Patient(self, node, load, self.settings, self.client)


def test_a_pod_pending_on_a_taint_is_reported_at_once(api, tmp_path):
    backend = PatientKube(settings(api, tmp_path, tolerate_control_plane=False), "runc-new")
    t0 = time.monotonic()
    with backend.deploy(E1) as dep:
        with pytest.raises(KubeError, match="untolerated taint"):
            dep.run_load(["load", "-rps=1"], timeout_s=10)
    assert time.monotonic() - t0 < 5


def test_a_pod_waits_out_a_node_that_is_not_ready_yet(api, tmp_path):
    api.not_ready_for(WORKER, 0.5)  # the not-ready taint passes: the scheduler places the pod then
    with PatientKube(settings(api, tmp_path), "runc-new").deploy(E1) as dep:
        assert dep.pods.live["e1"]["spec"]["nodeName"] == WORKER


class Impatient(FastDeployment):
    limits = replace(
        FastDeployment.limits, unschedulable_grace_s=0.0
    )  # not even the scheduler's catching up: a Ready node must take the pod at once


class ImpatientKube(KubeBackend):
    def deploy(self, node, load=None):
        return Impatient(self, node, load, self.settings, self.client)


def test_a_not_ready_node_is_waited_out_whatever_the_other_nodes_refuse(api, tmp_path):
    """The scheduler's message sums up every node: the control-plane's own taint is in it too, and
    says nothing about the worker; whether to wait is decided by the worker itself (not Ready yet)."""
    api.not_ready_for(WORKER, 0.5)
    with ImpatientKube(settings(api, tmp_path), "runc-new").deploy(E1) as dep:
        assert dep.pods.live["e1"]["spec"]["nodeName"] == WORKER


def test_a_node_that_turns_ready_between_the_pods_read_and_its_own_is_given_its_grace_from_then(api, tmp_path):
    """The worker turns Ready after a poll's read of the refused pod and before its read of the node: the
    scheduler has not retried yet. The grace a Ready node gets counts from the poll that first sees it
    Ready, not from the polls that saw it NotReady, so even no grace at all (Impatient) lets that poll
    pass, and the next read finds the pod scheduled. (Counting from the NotReady polls failed this test
    at once; under load the same order came by chance.)"""
    api.not_ready_for_refusals(WORKER, 2)  # Ready right after the second read of the refused pod
    with ImpatientKube(settings(api, tmp_path), "runc-new").deploy(E1) as dep:
        assert dep.pods.live["e1"]["spec"]["nodeName"] == WORKER
    assert api.not_ready_refusals == {}  # the node did turn Ready between the two reads


def test_a_taint_on_the_pinned_node_is_reported_at_once(api, tmp_path):
    api._nodes[1]["spec"]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    t0 = time.monotonic()
    with pytest.raises(KubeError, match=rf"node {WORKER} has the taint\(s\) dedicated=gpu:NoSchedule"):
        with PatientKube(settings(api, tmp_path), "runc-new").deploy(E1):
            pass
    assert time.monotonic() - t0 < 5


def test_pods_are_bound_to_the_node_by_its_name_not_its_hostname_label(api, backend):
    """The backend is given node names; a node's kubernetes.io/hostname label is
    the kubelet's hostname, which differs from the name where kubelet runs with --hostname-override
    (and on clouds that name nodes otherwise). The pods are bound by metadata.name (matchFields)."""
    for node in api.nodes:
        node["metadata"]["labels"]["kubernetes.io/hostname"] = node["metadata"]["name"].removeprefix("throttlelab-new-")
    with backend.deploy(E1) as dep:
        assert dep.pods.live["e1"]["spec"]["nodeName"] == WORKER
        assert dep.run_load(["load", "-rps=1"], timeout_s=10).returncode == 0
    for body in api.sent("POST", r"/api/v1/namespaces/default/pods"):
        assert "nodeSelector" not in body["spec"]


# -- deletion: the API object gone AND nothing of the pod left on the node -------------------------------

SPIN = Node("node", (Pod("s", (Container("spin", ("spin", "-threads=1"), request_milli=100),)), *E1.pods))


def test_deleted_pods_are_gone_from_the_node_not_only_from_the_api(api, backend):
    """A forced deletion (grace 0) removes the API object at once while kubelet kills
    the containers later (the fake lets them run on for 5 s), so "gone from the API" proved nothing and
    a workload could run into the next job. The deployment deletes with grace 1 and returns only when
    the objects are gone, which after a graceful deletion means their containers have stopped."""
    api.force_linger_s = 5.0
    with backend.deploy(SPIN) as dep:
        dep.start("s", "spin")  # running when the block ends
        dep.run_load(["load", "-rps=1"], timeout_s=10)
        assert api.running_containers(CONTROL_PLANE) == []  # the load pod: gone before run_load returned
    assert api.running_containers() == [] and api.live_pods() == []
    graces = [q.get("gracePeriodSeconds") for m, _p, q, _b in api.requests if m == "DELETE"]
    assert graces and all(g == ["1"] for g in graces), graces


def test_ctrl_c_inside_the_block_still_removes_everything(api, backend):
    with pytest.raises(KeyboardInterrupt):
        with backend.deploy(SPIN) as dep:
            dep.start("s", "spin")
            raise KeyboardInterrupt
    assert api.running_containers() == [] and api.live_pods() == []


def looking_at(api, gone=None):
    """A deployment that, as kind does (crictl, or the pod's cgroup directory in the node), looks at the
    node for a deleted pod's containers: here at the fake's node. `gone` overrides the answer."""

    class TheFakesNode(NodeAccess):
        def containers_gone(self, pods, pod):
            LooksAtTheNode.asked.append(pod)
            if gone is not None:
                return gone
            return not [c for c in api.running_containers() if c["uid"] == pod["metadata"]["uid"]]

    class LooksAtTheNode(FastDeployment):
        limits = replace(FastDeployment.limits, containers_gone_timeout_s=0.3)
        asked: list[dict] = []

        def __init__(self, *args):
            super().__init__(*args, access=TheFakesNode())

    return LooksAtTheNode


def test_a_backend_with_node_access_waits_for_the_node_too(api, backend):
    deployment = looking_at(api)
    with deployment(backend, SPIN, None, backend.settings, backend.client) as dep:
        dep.start("s", "spin")
        uids = {obj["metadata"]["uid"] for obj in dep.pods.live.values()}
    assert {p["metadata"]["uid"] for p in deployment.asked} == uids
    # what the hook gets names what to look for on the node: the pod's uid and the runtime's container ids
    for pod in deployment.asked:
        assert all(s["containerID"].startswith("containerd://") for s in pod["status"]["containerStatuses"])


def test_containers_left_on_the_node_are_an_error_naming_the_pod(api, backend):
    t0 = time.monotonic()
    with pytest.raises(
        BackendError,
        match=r"pod\(s\) tl-e1-\S+ \(uid [0-9a-f-]+\): deleted from the API, but node "
        rf"{WORKER} still holds their containers 0 s later",
    ):
        with looking_at(api, gone=False)(backend, E1, None, backend.settings, backend.client):
            pass
    assert time.monotonic() - t0 < 10


def test_a_cleanup_problem_under_ctrl_c_is_said_and_the_ctrl_c_goes_on(api, backend, capsys):
    with pytest.raises(KeyboardInterrupt):
        with looking_at(api, gone=False)(backend, E1, None, backend.settings, backend.client):
            raise KeyboardInterrupt
    err = capsys.readouterr().err
    assert "incomplete (its guardian tried again): pod(s) tl-e1-" in err and "still holds their containers" in err


def test_a_pod_kubelet_cannot_stop_is_an_error_naming_it(api, backend):
    """A container that outlives its SIGKILL (stuck in the kernel) keeps its pod Terminating: the
    wait is bounded, and the error names the pod and where to look."""
    api.scripts["spin"] = Script(stdout="", run_s=None, stuck_s=1.0)

    class Hasty(FastDeployment):
        limits = replace(FastDeployment.limits, deletion_timeout_s=0.3)

    with pytest.raises(
        BackendError,
        match=r"not gone 0 s after their deletion: tl-s-\S+ \(Terminating on "
        rf"{WORKER}; .*spin: running.*kubelet has not confirmed",
    ):
        with Hasty(backend, SPIN, None, backend.settings, backend.client):
            pass
    # the guardian finished the job once the container ended


def test_a_qos_class_other_than_the_designs_is_a_design_mismatch(api, backend):
    """The API server's status.qosClass decides where kubelet puts the pod; the deployment checks it
    against the design (a cluster whose rule is the old, CPU-only one is caught)."""

    def cpu_only(containers):
        res = [c.get("resources") or {} for c in containers]
        if all(
            (r.get("limits") or {}).get("cpu")
            and (r.get("requests") or {}).get("cpu", r["limits"]["cpu"]) == r["limits"]["cpu"]
            for r in res
        ):
            return "Guaranteed"
        return api_server_qos(containers)

    api.qos_rule = cpu_only
    node = Node("node", (Pod("g", (Container("c", ("info",), request_milli=1000, limit_milli=1000),)),))
    with pytest.raises(DesignMismatch, match="g: the API server made it guaranteed, the design expects burstable"):
        with backend.deploy(node):
            pass
    assert api.live_pods() == []


def test_counters_are_stamped_with_the_middle_of_their_exec(api, backend):
    """An exec takes time (here 0.4 s); the files are read inside it, not when it has returned."""
    with backend.deploy(E1) as dep:
        api.exec_latency_s = 0.4
        stat = dep.read_stat("e1", "app")
        read_at = api.execs[-1][0]
    assert abs(stat["t_ns"] - read_at) < 0.1e9, (stat["t_ns"] - read_at) / 1e9


def test_a_node_on_a_loopback_address_cannot_be_scraped_and_says_why(api, backend):
    """The real API server's node proxy dials global unicast addresses only ("address not allowed"), which the
    real node showed (docs/KUBE_REAL.md): the stand-in refuses the same, and E6 says what to change."""
    node = next(n for n in api._nodes if n["metadata"]["name"] == WORKER)
    for address in node["status"]["addresses"]:
        if address["type"] == "InternalIP":
            address["address"] = "127.0.0.1"
    with backend.deploy(E6) as dep:
        with pytest.raises(BackendError, match=r"HTTP 400.*address not allowed.*only global unicast addresses"):
            dep.monitoring_sample("e6", "burst")


def test_a_pod_naming_a_runtime_class_that_does_not_exist_is_refused(api, backend):
    """The RuntimeClass admission plugin of the real API server (and the stand-in): Forbidden, naming the class."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "rc"},
        "spec": {"runtimeClassName": "runc-nope", "containers": [{"name": "c", "image": "cpulab-kind:go124mod"}]},
    }
    with pytest.raises(Forbidden, match=r'pod rejected: RuntimeClass "runc-nope" not found'):
        backend.client.create_pod("default", pod)
    assert api.live_pods() == []


def test_a_request_above_its_limit_is_refused_as_the_api_server_refuses_it(api, backend):
    """The ci and quick profiles' E2b asked for 500m under a limit of 200m, which cgroups hold and the real
    API server refuses (422; the real node showed it, docs/KUBE_REAL.md): the stand-in refuses it too."""
    node = Node("node", (Pod("bad", (Container("app", ("info",), request_milli=500, limit_milli=200),)),))
    with pytest.raises(
        KubeError,
        match=r'spec.containers\[0\].resources.requests: Invalid value: "500m": must be '
        r"less than or equal to cpu limit of 200m",
    ):
        with backend.deploy(node):
            pass
    assert api.live_pods() == []


def test_stopping_a_container_that_ended_since_its_state_was_read_is_no_error(api, backend, monkeypatch):
    """The real node's race (docs/KUBE_REAL.md): stop() read "running", the burst ended, the exec of SIGTERM
    was refused (container not found). What counts is the state after: it ended, so its output is collected."""
    node = Node(
        "node",
        (
            Pod(
                "p", (Container("burst", ("burst", "-rounds=1", "-interval=10ms"), request_milli=100, limit_milli=500),)
            ),
        ),
    )
    with backend.deploy(node) as dep:
        handle = dep.start("p", "burst")
        stale = dep.kc.read_pod("default", handle.pod_name)  # read while it runs
        dep.kc.wait_pod("default", handle.pod_name, lambda p: "terminated" in container_state(p, "burst"), 5, "ended")
        reads = iter([stale])
        real_read = dep.kc.read_pod
        monkeypatch.setattr(dep.kc, "read_pod", lambda ns, name: next(reads, None) or real_read(ns, name))
        out = dep.stop(handle)
        assert out.returncode == 0 and any(r.get("type") == "summary" for r in out.records)


class BriefDeployment(FastDeployment):
    limits = replace(FastDeployment.limits, deletion_timeout_s=0.4, containers_gone_timeout_s=0.4, exec_timeout_s=5.0)


class BriefKube(FastKube):
    deployment = BriefDeployment


def test_a_slow_node_is_waited_out_by_a_backend_with_patience(api, tmp_path):
    """The real node in an emulated guest is slow in every step (there a read-back exec outlasted 30 s
    and a deletion 90 s): its backend's ``patience`` multiplies each of the deployment's limits, and the
    guardian's; with patience 1 the same node's slow deletion is a cleanup problem."""
    api.deletion_s = 1.0  # kubelet's cleanup after the containers stopped: longer than the 0.4 s limit
    impatient = BriefKube(settings(api, tmp_path), "runc-new")
    with pytest.raises(BackendError, match="not gone 0 s after their deletion"):
        with impatient.deploy(E1):
            pass
    api_deadline = time.monotonic() + 10
    while api.live_pods() and time.monotonic() < api_deadline:
        time.sleep(0.05)  # the first run's guardian finishes its cleanup
    patient = BriefKube(settings(api, tmp_path), "runc-new")
    patient.patience = 8.0
    with patient.deploy(E1) as dep:
        assert (dep.limits.deletion_timeout_s, dep.limits.containers_gone_timeout_s, dep.limits.exec_timeout_s) == (
            3.2,
            3.2,
            40.0,
        )
        assert dep.lifecycle.guardian_description()["deletion_timeout_s"] == 3.2
    assert api.live_pods() == []


def test_a_job_whose_end_a_slow_node_reports_late_is_waited_out_with_patience(api, tmp_path):
    """The real node in an emulated guest reported a 2 s `info` job still running after its experiment's
    30 s: a job's own limit is multiplied by its backend's patience too. Without patience the same job is
    an overdue workload (stopped and reported); with it, its output is collected."""
    node = Node(
        "node",
        (
            Pod(
                "p",
                (Container("burst", ("burst", "-rounds=4", "-interval=100ms"), request_milli=100, limit_milli=500),),
            ),
        ),
    )
    impatient = FastKube(settings(api, tmp_path), "runc-new")
    with impatient.deploy(node) as dep:
        with pytest.raises(BackendError, match=r"p/burst: still running after 0 s"):
            dep.run_job("p", "burst", timeout_s=0.1)
    patient = FastKube(settings(api, tmp_path), "runc-new")
    patient.patience = 8.0
    with patient.deploy(node) as dep:
        assert dep.limits.term_grace_s == 8 * FastDeployment.limits.term_grace_s
        out = dep.run_job("p", "burst", timeout_s=0.1)  # 0.4 s of rounds, 0.8 s with patience
        assert out.returncode == 0 and any(r.get("type") == "summary" for r in out.records)
    assert api.live_pods() == []


def _shrink_worker(api, cpus: str) -> None:
    for node in api._nodes:
        if node["metadata"]["name"] == WORKER:
            node["status"]["allocatable"]["cpu"] = node["status"]["capacity"]["cpu"] = cpus


class ListingKube(FastKube):
    lists_node_pods = True  # as the lab's own nodes do (NodeBackend)


def _run_e4(backend, caps=None):
    """The ci profile's E4 (runc-new) on this backend, as the runner calls it."""
    from pathlib import Path

    from throttlelab.experiments import REGISTRY, Context
    from throttlelab.model.config import load_design

    spec = load_design({"profile": "ci"}, Path(PROJECT) / "config").experiments["E4"].variants["runc-new"]
    caps = caps or backend.capabilities()
    return REGISTRY["E4"](spec, Context(backend=backend, capabilities=caps, node_cpus=None, seed=1))


def test_an_existing_cluster_counts_its_allocatable_cpu_and_the_labs_own_node_what_its_pods_leave(api, tmp_path):
    _shrink_worker(api, "3")
    assert FastKube(settings(api, tmp_path), "runc-new").capabilities().free_cpu_milli == 3000
    assert ListingKube(settings(api, tmp_path), "runc-new").capabilities().free_cpu_milli == 3000 - 200


def test_e4_reads_the_lab_back_a_few_pods_at_a_time_on_a_node_smaller_than_the_labs(api, tmp_path):
    """E4's pods request 5.2 CPUs. On a worker of 3 whose system pods request 200m, the backend says 2.8 are
    free, and E4 deploys the lab's pods in the waves weight_pods.deployment_waves plans for that: each one
    admitted (the stand-in's kubelet refuses what does not fit: OutOfcpu), each read back, nothing left."""
    from throttlelab.model.weight_pods import deployment_waves, lab_pods, pod_names

    _shrink_worker(api, "3")
    backend = ListingKube(settings(api, tmp_path), "runc-new")
    caps = backend.capabilities()
    assert caps.free_cpu_milli == 3000 - 200  # kindnet's and coredns' requests on the worker
    result = _run_e4(backend, caps)
    planned = [[p.name for p in wave] for wave in deployment_waves(lab_pods(pod_names("E4", None), (), "x"), 2800)]
    assert len(planned) == 3
    posted = [m["metadata"]["labels"][mf.LABEL_POD] for m in api.sent("POST", r"/api/v1/namespaces/default/pods")]
    assert posted == [name for wave in planned for name in wave]
    assert f"read back in 3 deployments ({'; '.join(', '.join(w) for w in planned)})" in result.notes[0]
    pods_read = {
        r["path"].rsplit("/", 1)[-1] for r in result.records if r.get("type") == "readback" and r["level"] == "pod"
    }
    assert len(pods_read) == 5, pods_read
    assert api.live_pods() == []


def test_e4_on_a_node_smaller_than_its_largest_pod_says_so(api, tmp_path):
    _shrink_worker(api, "2")  # 1.8 free: the lab's p2 (2 CPUs) fits nowhere
    backend = ListingKube(settings(api, tmp_path), "runc-new")
    with pytest.raises(BackendError, match=r"E4: pod\(s\) p2 \(2\) request more CPU than the node leaves free"):
        _run_e4(backend)
    assert api.sent("POST", r"/api/v1/namespaces/default/pods") == []
