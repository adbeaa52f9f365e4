"""The kind backend composed, as far as this machine allows: the loopback API server plays the
cluster (and kubelet, writing each pod's cgroup files with SPEC §2 values as kubelet and runc
lay them out in a kind node), and two REAL Docker containers play the kind node containers
(a shell, find, cat: what a kind node image offers; the fixture tree mounted where the node's
/sys/fs/cgroup would be). Pinning goes through the real engine; the readback runs the real
scripts by docker exec. No kind binary, no node image and no kubelet are involved: what a real
kind node does differently (the real cgroup files, runc's version) is not tested here."""

from __future__ import annotations

import io
import os
import shutil
import tarfile

import pytest

from kube_api_server import FakeKubeAPI
from conftest import PROJECT
from throttlelab.backends.kind import backend as kind_backend, clusters as kind_clusters, nodes, pins
from throttlelab.backends.base import BackendError
from throttlelab.model.config import load_design
from throttlelab.model.placement import Container, LoadPlacement, Node, Pod, parse_cpuset

pytestmark = pytest.mark.docker

TOOLS = ["/bin/dash", "/usr/bin/find", "/usr/bin/head", "/usr/bin/tr", "/bin/cat", "/bin/sleep"]
E1 = Node("node", (Pod("e1", (
    Container("app", ("info",), request_milli=500, limit_milli=2000),
    Container("sidecar", ("info",), request_milli=100, limit_milli=500),
)),))


def _libraries(binary: str) -> set[str]:
    import subprocess

    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    libs = set()
    for line in out.splitlines():
        parts = line.split()
        for part in parts:
            if part.startswith("/") and os.path.exists(part):
                libs.add(part)
    return libs


@pytest.fixture(scope="module")
def engine():
    try:
        client = nodes.docker_client()
    except BackendError as exc:
        pytest.skip(f"no Docker engine: {exc}")
    if not all(os.path.exists(t) for t in TOOLS) or shutil.which("ldd") is None:
        pytest.skip("this host lacks the tools the stand-in node image is made of")
    return client


@pytest.fixture(scope="module")
def node_image(engine):
    """An image with what the readback needs from a kind node: sh, find, head, tr, cat (this host's)."""
    tag = f"throttlelab-kindtest-node:{os.getpid()}"
    files = set(TOOLS) | {lib for t in TOOLS for lib in _libraries(t)}
    buf = io.BytesIO()
    dockerfile = b"FROM scratch\nCOPY rootfs/ /\n"
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
        for path in sorted(files):
            tar.add(os.path.realpath(path), arcname=f"rootfs{path}")
        link = tarfile.TarInfo("rootfs/bin/sh")
        link.type, link.linkname = tarfile.SYMTYPE, "dash"
        tar.addfile(link)
    buf.seek(0)
    engine.images.build(fileobj=buf, custom_context=True, tag=tag, pull=False, rm=True)
    yield tag
    engine.images.remove(tag, force=True)


@pytest.fixture
def cluster(engine, node_image, tmp_path):
    """The fake API as cluster `tlkt<pid>`, and its two stand-in node containers."""
    name = f"tlkt{os.getpid()}"
    api = FakeKubeAPI(pending_s=0.05, deletion_s=0.05)
    for node in api.nodes:
        role = node["metadata"]["name"].rsplit("-", 2 if node["metadata"]["name"].endswith("control-plane") else 1)[1:]
        new = f"{name}-{'-'.join(role)}"
        node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = new
    for pod in api.system_pods:
        pod["spec"]["nodeName"] = f"{name}-worker"
    api.images |= {kind_clusters.image_tag("go124mod"), kind_clusters.image_tag("go125mod")}
    tree = tmp_path / "cgroup"
    tree.mkdir()
    (tree / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    api.cgroup_dir, api.cgroup_node = tree, f"{name}-worker"
    containers = {}
    for node in (f"{name}-control-plane", f"{name}-worker"):
        containers[node] = engine.containers.run(
            node_image, ["/bin/sleep", "100000"], name=node, detach=True, network_mode="none",
            labels={"throttlelab.backend": "kind-test"}, environment={"CGROUP_ROOT": "/fixture"},
            volumes={str(tree): {"bind": "/fixture", "mode": "ro"}},
        )
    worker = containers[f"{name}-worker"]
    api.node_cpus = lambda: pins.current_cpuset(worker) or pins.usable_cpus(engine, worker)
    api.start()
    settings = {**load_design({"backend": "kind"}, PROJECT / "config").kind, "new_cluster": name, "old_cluster": f"{name}-old"}
    clusters = kind_clusters.clusters_from_settings(settings, tmp_path)
    clusters["new"].kubeconfig.parent.mkdir(parents=True)
    api.write_kubeconfig(clusters["new"].kubeconfig, context=f"kind-{name}")
    try:
        yield api, clusters, containers
    finally:
        api.stop()
        for c in containers.values():
            c.remove(force=True)
            pins.state_file(c.name).unlink(missing_ok=True)


class FastKindDeployment(kind_backend.KindDeployment):
    poll_s = 0.02


class FastKind(kind_backend.KindBackend):
    def deploy(self, node, load=None):
        dep = super().deploy(node, load)
        dep.__class__ = FastKindDeployment
        return dep

    def host_cgroup_version(self):
        # The stand-in nodes run no containers inside them, so `docker update --cpuset-cpus` meets no
        # child cpusets and works on a v1 host too; a real kind node on v1 is EBUSY (see
        # test_a_real_kind_node_on_a_v1_host_is_not_pinned), which is what the backend says there.
        return 2


def test_a_real_kind_node_on_a_v1_host_is_not_pinned(cluster):
    _, clusters, _ = cluster

    class OnV1(FastKind):
        def host_cgroup_version(self):
            return 1

    with pytest.raises(kind_backend.NotTestable, match="EBUSY"):
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
            "node": (391, None),  # SPEC §2: kubepods for 10 allocatable CPUs
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
        name: value or pins.usable_cpus(engine, containers[name]) for name, value in before.items()}
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
    assert caps.can_pin_cpus == (caps.cgroup_version != 1) and caps.has_pause_level and caps.cpus == engine.info()["NCPU"]
    with backend.deploy(E1):
        pass
    env = backend.environment()
    assert env["backend"] == "kind" and env["clusters"]["new"]["kubelet"] == "v1.34.11"
    assert env["clusters"]["new"]["runc"] is None  # the stand-in node has no runc: said, not invented
