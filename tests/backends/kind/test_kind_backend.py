"""The kind backend composed, as far as this machine allows: the loopback API server plays the
cluster (and kubelet, writing each pod's cgroup files with docs/LAB.md §2 values as kubelet and runc
lay them out in a kind node), and two REAL Docker containers play the kind node containers
(kind_standins.py: a shell, find, cat, runc and crictl answering as a kind node's; the fixture
tree mounted where the node's cgroups are found). Pinning goes through the real engine; each
pod's cgroup directories are found by the real script (docker exec), then read from this host
through the node container's /proc/<pid>/root, as on a real kind node. No kind binary, no node
image and no kubelet are involved: what a real kind node does differently (the kernel's own
cgroup files) is not tested here."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections import Counter

import pytest

from kind_standins import FastKind, build_node_image, engine_or_skip, lab_clusters, stand_in
from conftest import E1_NODE as E1
from throttlelab.platform import kind_clusters as clusters, kind_pauses as pauses, kind_pins as pins
from throttlelab.backends.base import BackendError
from throttlelab.backends.kube.run_pods import NotTestable
from throttlelab.model.placement import LoadPlacement, Node, parse_cpuset

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def engine():
    return engine_or_skip()


@pytest.fixture(scope="module")
def node_image(engine):
    tag = build_node_image(engine, f"throttlelab-kindtest-node:{os.getpid()}")
    yield tag
    engine.images.remove(tag, force=True)


@pytest.fixture
def cluster(engine, node_image, tmp_path):
    """The fake API as cluster `tlkt<pid>`, and its two stand-in node containers."""
    clusters = lab_clusters(tmp_path, f"tlkt{os.getpid()}")
    new = stand_in(engine, node_image, clusters["new"], tmp_path)
    try:
        yield new.api, clusters, new.containers
    finally:
        new.remove()
        pauses.lock_file(clusters["old"].name).unlink(missing_ok=True)  # locked (never created) while jobs ran


def test_a_real_kind_node_on_a_v1_host_is_not_pinned(cluster):
    _, clusters, _ = cluster

    class OnV1(FastKind):
        def host_cgroup_version(self):
            return 1

    with pytest.raises(NotTestable, match="EBUSY"):
        with OnV1(clusters).deploy(Node("node", E1.pods, cpus="0")):
            pass


def test_a_pinned_node_is_read_back_at_every_level_and_restored(engine, cluster):
    api, clusters, containers = cluster
    backend = FastKind(clusters)
    backend.preflight()
    worker, control_plane = containers[clusters["new"].worker], containers[clusters["new"].control_plane]
    before = {c.name: pins.current_cpuset(c) for c in (worker, control_plane)}
    with backend.deploy(Node("node", E1.pods, cpus="0"), LoadPlacement(cpus="1")) as dep:
        assert pins.current_cpuset(worker) == "0" and pins.current_cpuset(control_plane) == "1"
        readback = {r.path: r for r in dep.verify()}
        got = {path: (r.actual.get("weight"), r.actual.get("quota_us")) for path, r in readback.items()}
        assert got == {
            "node": (391, None),  # docs/LAB.md §2: kubepods for 10 allocatable CPUs
            "node/burstable": (28, None),  # ours 600m + coredns 100m
            "node/burstable/pod-e1": (24, 250_000),
            "node/burstable/pod-e1/app": (59, 200_000),
            "node/burstable/pod-e1/sidecar": (17, 50_000),
            "node/burstable/pod-e1/pause": (1, None),
        }
        assert all(r.mismatches == [] for r in readback.values())
        assert parse_cpuset(readback["node"].actual["cpus"]) == [0]
        assert "kubelet-kubepods-burstable-pod" in readback["node/burstable/pod-e1"].actual["cgroup"]
        pod = dep.read_stat("e1")
        assert (pod["usage_usec"], pod["nr_throttled"]) == (3_000_000, 20)
        assert dep.run_job("e1", "app", timeout_s=10).returncode == 0
    assert {c.name: pins.current_cpuset(c) for c in (worker, control_plane)} == {
        name: value or pins.usable_cpus(engine, containers[name]) for name, value in before.items()
    }
    assert api.live_pods() == []
    assert not pins.state_file(worker.name).exists()


def test_a_level_missing_in_the_node_is_an_error_not_unreadable(engine, cluster):
    api, clusters, _ = cluster
    with FastKind(clusters).deploy(E1) as dep:
        shutil.rmtree(next(api.cgroup_dir.rglob("*pod*.slice")))
        with pytest.raises(BackendError, match="no cgroup of pod"):
            dep.verify()


def test_a_variant_for_the_other_runtime_needs_the_other_cluster(cluster):
    _, clusters, _ = cluster
    with pytest.raises(BackendError, match=r"the old cluster \(tlkt\d+-old\) has no kubeconfig.*create_clusters"):
        FastKind(clusters).deploy(Node("node", E1.pods, runtime="runc-old"))


def test_capabilities_and_environment(engine, cluster):
    _, clusters, _ = cluster
    backend = FastKind(clusters)
    caps = backend.capabilities()
    assert (
        caps.can_pin_cpus == (caps.cgroup_version != 1) and caps.has_pause_level and caps.cpus == engine.info()["NCPU"]
    )
    with backend.deploy(E1):
        pass
    env = backend.environment()
    assert env["backend"] == "kind" and env["clusters"]["new"]["kubelet"] == "v1.34.11"
    assert env["clusters"]["new"]["runc"] == "1.4.3"  # what the node's `runc --version` says
    assert env["node_images"]["setting"] == clusters["new"].node_images and set(env["node_images"]) >= {"new"}


def counting(monkeypatch) -> Counter:
    """Counts, from now on, what a reading could cost beside the read itself: a process started
    here (docker exec and kubectl alike start one, or ask the engine to), and a request to the
    Docker engine (inspect, exec)."""
    import docker.api.client

    counts: Counter = Counter()

    def counted(owner, name, key):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            counts[key] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    counted(subprocess.Popen, "__init__", "process started")
    counted(docker.api.client.APIClient, "request", "Docker engine request")
    return counts


def test_sampling_a_pod_starts_no_process_and_asks_neither_engine_nor_api(engine, cluster, monkeypatch, capsys):
    """A pod's (and a container's) counters are read from this host through the
    node's /proc/<pid>/root; once the directories are found, a sample is a file read, nothing else."""
    api, clusters, _ = cluster
    with FastKind(clusters).deploy(E1) as dep:
        dep.verify()  # finds every level's directory (one exec in the node) and reads them back
        # the pod's own files and the container's own files (the fake writes different counters to each)
        assert (dep.read_stat("e1")["usage_usec"], dep.read_stat("e1", "app")["usage_usec"]) == (3_000_000, 1_500_000)
        counts = counting(monkeypatch)
        api_requests = len(api.requests)
        rounds = 2000
        t0 = time.perf_counter()
        for _ in range(rounds):
            dep.read_stat("e1")
        t1 = time.perf_counter()
        for _ in range(rounds):
            dep.read_stat("e1", "app")
        t2 = time.perf_counter()
        monkeypatch.undo()
        assert dict(counts) == {} and len(api.requests) == api_requests, (
            f"a sample cost more than a file read: {dict(counts)}, {len(api.requests) - api_requests} API request(s)"
        )
        assert dep.access.files.located == 1  # the node's pid was asked once
    with capsys.disabled():
        print(
            f"\n[kind read_stat through /proc/{dep.access.files.pid}/root, {rounds} reads each] pod: "
            f"{(t1 - t0) / rounds * 1e6:.1f} us, container: {(t2 - t1) / rounds * 1e6:.1f} us per sample"
        )
    assert api.live_pods() == []


def test_a_restarted_node_is_found_again_and_a_vanished_pod_is_named(engine, cluster):
    api, clusters, containers = cluster
    worker = containers[clusters["new"].worker]
    with FastKind(clusters).deploy(E1) as dep:
        assert dep.read_stat("e1")["usage_usec"] == 3_000_000
        before = dep.access.files.pid
        worker.restart(timeout=0)  # the node container restarts: another main process, another pid
        assert dep.read_stat("e1")["usage_usec"] == 3_000_000
        assert dep.access.files.pid != before and dep.access.files.located == 2  # inspected once more, not per sample
        uid = dep.pods.live["e1"]["metadata"]["uid"].replace("-", "_")
        shutil.rmtree(next(api.cgroup_dir.rglob(f"*pod{uid}.slice")))  # kubelet removed the pod's cgroup
        with pytest.raises(
            BackendError,
            match=rf"the cgroup of pod e1 is gone from node {worker.name} "
            rf"\(/fixture/.*\).*describe pod tl-e1-",
        ):
            dep.read_stat("e1")
        with pytest.raises(BackendError, match=rf"the cgroup of container e1/app is gone from node {worker.name}"):
            dep.read_stat("e1", "app")
        assert dep.access.files.located == 2  # a missing file in a running node is not taken for a restart
    assert api.live_pods() == []


def test_a_node_whose_process_is_not_the_container_is_refused(engine, cluster, monkeypatch):
    """The pid the engine names must be the node container's on this host (not Docker Desktop's VM,
    a remote engine, a runner inside a container): checked by the node's /etc/hostname."""
    _, clusters, containers = cluster
    worker = containers[clusters["new"].worker]
    from throttlelab.platform import kind_nodes as nodes

    real = nodes.node_container

    def lying(client, name):
        container = real(client, name)
        container.attrs["State"]["Pid"] = os.getpid()  # a process of this host, not in the container
        return container

    monkeypatch.setattr(nodes, "node_container", lying)
    with pytest.raises(BackendError, match=rf"process {os.getpid()}.*node container {worker.name}.*not that container"):
        nodes.node_pid(engine, worker.name)


def test_clean_removes_the_labs_network_and_only_that_one():
    try:
        client = clusters.kind_engine_client()
    except BackendError as exc:
        pytest.skip(f"no Docker engine: {exc}")
    name = f"{clusters.KIND_NETWORK}-test-{os.getpid()}"
    other = client.networks.create(f"{name}-other", driver="bridge")
    try:
        client.networks.create(name, driver="bridge")
        assert clusters.remove_network(client, name) is True
        names = {n.name for n in client.networks.list()}
        assert name not in names and f"{name}-other" in names
        assert clusters.remove_network(client, name) is False  # gone already: nothing to do
    finally:
        other.remove()
