"""The real node's deployment with no real node: the loopback API server plays the node's API server
and kubelet, and writes each pod's cgroup files (docs/LAB.md §2 values, laid out as kubelet lays them out)
into a fixture tree; the deployment finds them with the node-side script run on this host
(CGROUP_ROOT points it at the tree) and reads them as this host's files, as it reads the real node's.
The node's cgroup root is not pinned here: what the deployment asks of it is recorded instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import E1_NODE as E1
from kube_api_server import FakeKubeAPI
from throttlelab.backends.kube.run_pods import KubeSettings
from throttlelab.backends.node import node_backend
from throttlelab.model.placement import Node
from throttlelab.platform import real_node as nc

WORKER = "throttlelab-new-worker"


@pytest.fixture
def api(tmp_path):
    server = FakeKubeAPI(pending_s=0.05, deletion_s=0.05)
    server.images |= {node_backend.ni.image_reference(b) for b in node_backend.BUILDS}
    tree = tmp_path / "cgroup"
    tree.mkdir()
    (tree / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    server.cgroup_dir, server.cgroup_node = tree, WORKER
    server.start()
    yield server
    server.stop()


@pytest.fixture
def backend(api, tmp_path, monkeypatch):
    """A NodeBackend whose node is the fake: its facts given, its settings pointing at the fake's API."""
    pins: list[tuple[str, str | None]] = []

    def pin(root: str, cpus: str | None) -> str:
        pins.append((root, cpus))
        api.node_cpus = lambda: cpus or "0-9"  # what kubepods' cpuset.cpus.effective shows
        return cpus or "0-9"

    monkeypatch.setattr(nc, "pin_cgroup_root", pin)
    monkeypatch.setenv("CGROUP_ROOT", str(api.cgroup_dir))
    backend = node_backend.NodeBackend(tmp_path / "tools.json", tmp_path / "images")
    backend.node_facts = {"cgroup_root": "/kubelet.slice", "cgroup_version": 2, "versions": {}}
    backend.settings = KubeSettings(
        **{
            **backend.settings.__dict__,
            "kubeconfig": api.write_kubeconfig(tmp_path / "kubeconfig", context="throttlelab"),
            "context": "throttlelab",
            "worker_node": WORKER,
            "load_node": WORKER,
        }
    )
    backend.pins = pins
    return backend


def test_every_level_is_read_back_from_this_hosts_files_and_the_pods_name_their_runtime(api, backend):
    api.runc = "old"  # the runc the pods' RuntimeClass names converts shares linearly
    with backend.deploy(Node("node", E1.pods, cpus="0", runtime="runc-old")) as dep:
        readback = {r.path: r for r in dep.verify()}
        assert {r.level for r in readback.values()} == {"node", "qos", "pod", "container", "pause"}
        assert all(not r.mismatches and "unreadable" not in r.actual for r in readback.values())
        assert readback["node"].actual["cgroup"].startswith(str(api.cgroup_dir))
        assert dep.read_stat("e1")["usage_usec"] != dep.read_stat("e1", "app")["usage_usec"]
        assert dep.run_job("e1", "app", timeout_s=10).returncode == 0
        assert dep.run_load(["load", "-rps=1"], timeout_s=10).returncode == 0  # unpinned: a pod of the node
        assert dep.pods.live["e1"]["spec"]["runtimeClassName"] == "runc-old"
    assert backend.pins == [("/kubelet.slice", "0"), ("/kubelet.slice", None)]  # pinned, then every CPU again
    assert api.live_pods() == []
    assert not any(Path(api.cgroup_dir).rglob("*-pod*")), "a pod's cgroup left in the node"


def test_an_unpinned_node_is_given_every_cpu_and_not_restored(api, backend):
    with backend.deploy(E1) as dep:
        dep.verify()
    assert backend.pins == [("/kubelet.slice", None)]
