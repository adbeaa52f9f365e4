"""Stand-ins for kind clusters, shared by the kind backend's tests (not a test module).

A stand-in cluster is the loopback API server (tests/kube_api_server.py) playing the
cluster and kubelet (it writes each pod's cgroup files with docs/LAB.md §2 values, laid out
as kubelet and runc lay them out in a kind node), plus two REAL Docker containers
playing its node containers, named as kind names them. Their image is built FROM
scratch around this host's tools (sh, find, cat: what a kind node image offers, and
`runc` / `crictl` scripts that answer as a kind node's would); the fixture cgroup tree
is bind-mounted where the node's cgroups are found (CGROUP_ROOT). So pinning, pausing
and the readback through /proc/<pid>/root go through the real engine and real
processes; what a real node does differently (the kernel's own cgroup files, kubelet)
is not tested here.
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conftest import PROJECT
from kube_api_server import FakeKubeAPI
from throttlelab.host.docker_engine import kind_engine_client
from throttlelab.backends.base import BackendError
from throttlelab.platform import kind_clusters, kind_pauses as pauses, kind_pins as pins
from throttlelab.platform.workload_images import kind_tag
from throttlelab.backends.kind import kind_backend
from throttlelab.backends.kube.run_pods import PodLimits
from throttlelab.model.builds import BUILDS
from throttlelab.model.config import load_design

TOOLS = ["/bin/dash", "/usr/bin/find", "/usr/bin/head", "/usr/bin/tr", "/bin/cat", "/bin/sleep"]
TEST_LABEL = {"throttlelab.backend": "kind-test"}  # not the docker backend's label: its sweeps leave these alone
#: What a kind node's `runc --version` and `crictl images -o json` say (RUNC_VERSION is set per cluster).
RUNC = '#!/bin/sh\necho "runc version ${RUNC_VERSION:-unknown}"\necho "spec: 1.2.1"\n'
CRICTL = (
    '#!/bin/sh\necho \'{"images": [{"repoTags": ["docker.io/library/cpulab-kind:go124mod", '
    '"docker.io/library/cpulab-kind:go125mod"]}]}\'\n'
)
RUNC_OF_ROLE = {"new": "1.4.3", "old": "1.3.0"}  # docs/LAB.md §4: the node images' runc releases


def engine_or_skip() -> Any:
    try:
        client = kind_engine_client()
    except BackendError as exc:
        pytest.skip(f"no Docker engine: {exc}")
    if not all(os.path.exists(t) for t in TOOLS) or shutil.which("ldd") is None:
        pytest.skip("this host lacks the tools the stand-in node image is made of")
    return client


def _libraries(binary: str) -> set[str]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    return {part for line in out.splitlines() for part in line.split() if part.startswith("/") and os.path.exists(part)}


def _add_text(tar: tarfile.TarFile, name: str, text: str, mode: int = 0o644) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def build_node_image(engine: Any, tag: str) -> str:
    """An image with what the lab needs from a kind node: sh, find, head, tr, cat (this host's), runc, crictl."""
    files = set(TOOLS) | {lib for t in TOOLS for lib in _libraries(t)}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _add_text(tar, "Dockerfile", "FROM scratch\nCOPY rootfs/ /\n")
        for path in sorted(files):
            tar.add(os.path.realpath(path), arcname=f"rootfs{path}")
        link = tarfile.TarInfo("rootfs/bin/sh")
        link.type, link.linkname = tarfile.SYMTYPE, "dash"
        tar.addfile(link)
        _add_text(tar, "rootfs/usr/bin/runc", RUNC, 0o755)
        _add_text(tar, "rootfs/usr/bin/crictl", CRICTL, 0o755)
    buf.seek(0)
    engine.images.build(fileobj=buf, custom_context=True, tag=tag, pull=False, rm=True)
    return tag


def lab_settings(name: str, **kind_cfg: Any) -> dict[str, Any]:
    """config.yaml's kind section (schema defaults) with the clusters named `name` and `name`-old."""
    return {
        **load_design({"backend": "kind"}, PROJECT / "config").kind,
        "new_cluster": name,
        "old_cluster": f"{name}-old",
        **kind_cfg,
    }


def lab_clusters(workdir: Path, name: str, **kind_cfg: Any) -> dict[str, kind_clusters.KindCluster]:
    """The lab's two clusters as the backend sees them, named `name` and `name`-old, files under `workdir`."""
    return kind_clusters.clusters_from_settings(lab_settings(name, **kind_cfg), workdir)


@dataclass
class StandIn:
    """One stand-in cluster: its API server, its cgroup tree and its two node containers."""

    cluster: kind_clusters.KindCluster
    api: FakeKubeAPI
    tree: Path
    containers: dict[str, Any] = field(default_factory=dict)

    @property
    def worker(self) -> Any:
        return self.containers[self.cluster.worker]

    @property
    def control_plane(self) -> Any:
        return self.containers[self.cluster.control_plane]

    def status(self) -> dict[str, str]:
        for c in self.containers.values():
            c.reload()
        return {name: c.status for name, c in self.containers.items()}

    def remove(self) -> None:
        self.api.stop()
        for c in self.containers.values():
            c.remove(force=True)
            pins.state_file(c.name).unlink(missing_ok=True)
            pauses.state_file(c.name).unlink(missing_ok=True)
        pauses.lock_file(self.cluster.name).unlink(missing_ok=True)  # a test cluster's name is not used again


def fake_cluster_api(cluster: kind_clusters.KindCluster, tree: Path) -> FakeKubeAPI:
    """The fake API as `cluster`: its nodes renamed as kind names them, the system pods on its worker, both
    kind images loaded, and the worker's pod cgroups written into a new cgroup v2 fixture tree at `tree`."""
    api = FakeKubeAPI(pending_s=0.05, deletion_s=0.05)
    for node in api.nodes:
        name = cluster.control_plane if node["metadata"]["name"].endswith("control-plane") else cluster.worker
        node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    for pod in api.system_pods:
        pod["spec"]["nodeName"] = cluster.worker
    api.images |= {kind_tag(build) for build in BUILDS}
    tree.mkdir()
    (tree / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    api.cgroup_dir, api.cgroup_node = tree, cluster.worker
    return api


def stand_in(engine: Any, image: str, cluster: kind_clusters.KindCluster, tmp: Path) -> StandIn:
    """The fake API as `cluster` (its nodes renamed as kind names them) and its node containers."""
    tree = tmp / f"cgroup-{cluster.role}"
    api = fake_cluster_api(cluster, tree)
    api.runc = cluster.role  # the conversion the node's runc applies: new (quadratic) or old (linear)
    standin = StandIn(cluster, api, tree)
    try:
        for node in (cluster.control_plane, cluster.worker):
            standin.containers[node] = engine.containers.run(
                image,
                ["/bin/sleep", "100000"],
                name=node,
                hostname=node,
                detach=True,
                network_mode="none",
                labels=TEST_LABEL,
                environment={"CGROUP_ROOT": "/fixture", "RUNC_VERSION": RUNC_OF_ROLE[cluster.role]},
                volumes={str(tree): {"bind": "/fixture", "mode": "ro"}},
            )
        worker = standin.worker
        api.node_cpus = lambda: pins.current_cpuset(worker) or pins.usable_cpus(engine, worker)
        api.start()
        cluster.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        api.write_kubeconfig(cluster.kubeconfig, context=cluster.context)
    except BaseException:
        standin.remove()
        raise
    return standin


class FastKindDeployment(kind_backend.KindDeployment):
    limits = PodLimits(poll_s=0.02)


class FastKind(kind_backend.KindBackend):
    deployment_class = FastKindDeployment

    def deploy(self, node, load=None):
        dep = super().deploy(node, load)  # its checks, and the cluster it chose
        return self.deployment_class(self, node, load, dep.cluster)

    def host_cgroup_version(self):
        # The stand-in nodes run no containers inside them, so `docker update --cpuset-cpus` meets no
        # child cpusets and works on a v1 host too; a real kind node on v1 is EBUSY (see
        # test_a_real_kind_node_on_a_v1_host_is_not_pinned), which is what the backend says there.
        return 2


def state_files(node_names) -> list[str]:
    """The pin and pause state files a job left for these node containers."""
    return [str(f(name)) for name in node_names for f in (pins.state_file, pauses.state_file) if f(name).exists()]


def locks_free(cluster_names) -> bool:
    """No lab process holds a lock on these clusters (an exclusive one can be taken at once)."""
    for name in cluster_names:
        with open(pauses.lock_file(name), "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(handle, fcntl.LOCK_UN)
    return True
