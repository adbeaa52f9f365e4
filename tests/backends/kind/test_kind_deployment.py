"""The kind deployment with no Docker engine: the loopback API server plays the cluster (and kubelet,
writing each pod's cgroup files into a fixture tree), and an engine object stands in for Docker. Its
node containers are this process as the engine would name them (so a node's /proc/<pid>/root is this
host's root, where the fixture tree lies), their `docker exec` runs the command here with CGROUP_ROOT
at the tree, and their cpusets and pauses are attributes. What the real engine does (test_kind_backend.py,
marked docker) is not tested here: this is the deployment's own part, its pins, pauses and readback."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import docker.errors
import pytest

from conftest import E1_NODE as E1
from kind_standins import fake_cluster_api, lab_clusters
from throttlelab.backends.kind import kind_backend
from throttlelab.platform import kind_pauses as pauses, kind_pins as pins
from throttlelab.model.placement import LoadPlacement, Node

pytestmark = pytest.mark.kube_api

HOSTNAME = Path("/etc/hostname").read_text().strip()


class FakeNode:
    """A node container as the Docker SDK shows it."""

    def __init__(self, name: str, tree: Path, runc: str):
        self.name, self.tree, self.runc = name, tree, runc
        self.status = "running"
        self.attrs = {"State": {"Running": True, "Pid": os.getpid()}, "Config": {"Hostname": HOSTNAME}}
        self.attrs["HostConfig"] = {"CpusetCpus": ""}
        self.calls: list[str] = []

    def reload(self) -> None:
        pass

    def exec_run(self, argv, stdout=True, stderr=True, demux=True):
        if argv[0] == "runc":
            return 0, (f"runc version {self.runc}\n".encode(), b"")
        if argv[0] == "cat" and "cpuset" in argv[1]:  # the CPUs the node container may use
            return 0, (b"0-3\n", b"")
        done = subprocess.run(argv, capture_output=True, env={**os.environ, "CGROUP_ROOT": str(self.tree)})
        return done.returncode, (done.stdout, done.stderr)

    def update(self, cpuset_cpus: str) -> None:
        self.calls.append(f"cpuset {cpuset_cpus}")
        self.attrs["HostConfig"]["CpusetCpus"] = cpuset_cpus

    def pause(self) -> None:
        self.calls.append("pause")
        self.status = "paused"

    def unpause(self) -> None:
        self.calls.append("unpause")
        self.status = "running"


class FakeEngine:
    def __init__(self, nodes: list[FakeNode]):
        self.nodes = {n.name: n for n in nodes}
        self.containers = SimpleNamespace(get=self.get)

    def get(self, name: str) -> FakeNode:
        if name not in self.nodes:
            raise docker.errors.NotFound(f"no container {name}")
        return self.nodes[name]

    def info(self) -> dict:
        return {"CgroupVersion": "2", "NCPU": 2}


@pytest.fixture
def kind(tmp_path):
    """The lab's two clusters: the new one the fake API (its worker's cgroups in a fixture tree), the old
    one only node containers, to be paused while the new one measures."""
    clusters = lab_clusters(tmp_path, f"tlkd{os.getpid()}")
    new, old = clusters["new"], clusters["old"]
    tree = tmp_path / "cgroup"
    api = fake_cluster_api(new, tree)
    engine = FakeEngine(
        [FakeNode(n, tree, "1.4.3") for n in (new.worker, new.control_plane)]
        + [FakeNode(n, tree, "1.3.0") for n in (old.worker, old.control_plane)]
    )
    api.node_cpus = lambda: engine.nodes[new.worker].attrs["HostConfig"]["CpusetCpus"] or "0-9"
    api.start()
    new.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    api.write_kubeconfig(new.kubeconfig, context=new.context)

    backend = kind_backend.KindBackend(clusters)
    backend._docker = engine
    try:
        yield SimpleNamespace(api=api, backend=backend, engine=engine, new=new, old=old)
    finally:
        api.stop()
        for name in engine.nodes:
            pins.state_file(name).unlink(missing_ok=True)
            pauses.state_file(name).unlink(missing_ok=True)
        for cluster in (new, old):
            pauses.lock_file(cluster.name).unlink(missing_ok=True)


def test_a_pinned_node_is_read_back_at_every_level_while_the_idle_cluster_is_paused(kind):
    engine, new, old = kind.engine, kind.new, kind.old
    with kind.backend.deploy(Node("node", E1.pods, cpus="0"), LoadPlacement(cpus="0")) as dep:
        assert engine.nodes[new.worker].attrs["HostConfig"]["CpusetCpus"] == "0"
        assert {engine.nodes[n].status for n in (old.worker, old.control_plane)} == {"paused"}
        readback = {r.path: r for r in dep.verify()}
        assert {r.level for r in readback.values()} == {"node", "qos", "pod", "container", "pause"}
        assert all(not r.mismatches and "unreadable" not in r.actual for r in readback.values())
        assert readback["node"].actual["cpus"] == "0"
        assert (dep.read_stat("e1")["usage_usec"], dep.read_stat("e1", "app")["usage_usec"]) == (3_000_000, 1_500_000)
        assert dep.access.files.located == 1
        assert dep.run_job("e1", "app", timeout_s=10).returncode == 0
        assert dep.run_load(["load", "-rps=1"], timeout_s=10).returncode == 0
    assert {engine.nodes[n].status for n in (old.worker, old.control_plane)} == {"running"}
    for name in (new.worker, new.control_plane):
        assert engine.nodes[name].calls == ["cpuset 0", "cpuset 0-3"]  # pinned, then restored
    assert kind.api.live_pods() == [] and not any(Path(kind.api.cgroup_dir).rglob("*-pod*"))
    assert kind.backend.leftovers() == []


def test_a_variant_on_the_wrong_runc_is_refused_before_any_pod(kind):
    kind.engine.nodes[kind.new.worker].runc = "1.3.0"
    with pytest.raises(kind_backend.BackendError, match="runs runc 1.3.0, which converts shares with the runc-old"):
        with kind.backend.deploy(E1):
            pass
    assert kind.api.live_pods() == [] and not any(n.status == "paused" for n in kind.engine.nodes.values())
