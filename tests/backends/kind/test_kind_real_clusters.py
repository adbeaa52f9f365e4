"""The runner killed on the lab's REAL kind clusters: Ctrl-C and SIGKILL of a
runner that has deployed a pod on the new cluster (the old one paused meanwhile, as every job
pauses the idle cluster) leave no pod of the lab's, no paused node, no pin or pause state file, no
lock held, and the host's sysctls as they were (kubelet inside a privileged node would write them).

The clusters are the ones `snakemake --cores 1 create_clusters --config backend=kind 'kind={node_images:
local}'` makes in this checkout; .ci/kind-smoke creates them, runs this module, then `clean`. Skipped,
saying so, when they are not running.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import PROJECT
from kind_standins import locks_free, state_files
from throttlelab.platform.kind_clusters import clusters_from_settings
from throttlelab.backends.kube.manifests import MANAGED_SELECTOR
from throttlelab.platform.real_node import host_sysctls
from throttlelab.model.config import load_design

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SETTINGS = {"backend": "kind", "kind": {"node_images": "local"}}


def _docker() -> object:
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # no engine: nothing of the real clusters can be here
        pytest.skip(f"no Docker engine ({exc}); the real clusters need the lab's kind engine: .ci/start-kind-dockerd")
    return client


@pytest.fixture(scope="module")
def real():
    """The two clusters of this checkout, running: their KindCluster objects and node containers."""
    client = _docker()
    design = load_design(SETTINGS, PROJECT / "config")
    clusters = clusters_from_settings(design.kind, PROJECT, PROJECT / "config" / "kind")
    nodes = {}
    for cluster in clusters.values():
        if not cluster.kubeconfig.is_file():
            pytest.skip(
                f"no real kind cluster {cluster.name} in this checkout: snakemake --cores 1 create_clusters "
                "--config backend=kind 'kind={node_images: local}' (.ci/kind-smoke runs this module after it)"
            )
        for name in (cluster.control_plane, cluster.worker):
            try:
                nodes[name] = client.containers.get(name)
            except Exception:
                pytest.skip(f"kind cluster {cluster.name} has a kubeconfig but no node {name}: recreate it")
    return clusters, nodes


def _status(nodes: dict) -> dict[str, str]:
    for c in nodes.values():
        c.reload()
    return {name: c.status for name, c in nodes.items()}


def _lab_pods(clusters, roles: tuple[str, ...] = ("new", "old")) -> list[str]:
    """The lab's pods on the clusters of ``roles`` (never ask a paused cluster: its API server cannot answer)."""
    from kubernetes import client, config

    found = []
    for cluster in (clusters[role] for role in roles):
        api = client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig), context=cluster.context))
        pods = api.list_pod_for_all_namespaces(label_selector=MANAGED_SELECTOR, _request_timeout=60).items
        found += [f"{cluster.name}/{p.metadata.namespace}/{p.metadata.name}" for p in pods]
    return found


def _left(clusters, nodes) -> list[str]:
    """What of a job is still there (empty: nothing)."""
    status = _status(nodes)
    left = [f"node {n} {s}" for n, s in status.items() if s != "running"]
    running = tuple(r for r, c in clusters.items() if {status[c.control_plane], status[c.worker]} == {"running"})
    left += [f"pod {p}" for p in _lab_pods(clusters, running)]
    left += [f"state file {f}" for f in state_files(nodes)]
    if not locks_free(c.name for c in clusters.values()):
        left.append("a cluster lock still held")
    return left


RUNNER = textwrap.dedent("""
    import json, signal, sys, time
    from pathlib import Path
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C even when started in the background
    sys.path.insert(0, {project!r})
    from throttlelab.backends.kind.kind_backend import KindBackend
    from throttlelab.platform.kind_clusters import clusters_from_settings
    from throttlelab.model.config import load_design
    from throttlelab.model.placement import Container, Node, Pod
    design = load_design(json.loads({settings!r}), Path({project!r}) / "config")
    clusters = clusters_from_settings(design.kind, Path({project!r}), Path({project!r}) / "config" / "kind")
    node = Node("node", (Pod("e1", (Container("app", ("info",), request_milli=500, limit_milli=2000),)),))
    with KindBackend(clusters).deploy(node) as dep:
        print("deployed", flush=True)
        time.sleep(600)
""")


@contextlib.contextmanager
def deployed_runner(clusters, nodes) -> Iterator[subprocess.Popen]:
    """A runner that has deployed on the new cluster, the old one paused; killed on the way out."""
    script = RUNNER.format(project=str(PROJECT), settings=json.dumps(SETTINGS))
    runner = subprocess.Popen(
        [sys.executable, "-c", script], cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = runner.stdout.readline().strip()
        if line != "deployed":
            runner.kill()
            raise AssertionError(f"the runner did not deploy: {line!r} {runner.stderr.read()[-3000:]}")
        old = clusters["old"]
        assert {_status(nodes)[n] for n in (old.control_plane, old.worker)} == {"paused"}
        assert _lab_pods(clusters, ("new",)), "the runner said deployed, but no pod of the lab's is listed"
        yield runner
    finally:
        if runner.poll() is None:
            runner.kill()
        runner.wait()


def _wait_for_nothing_left(clusters, nodes, within_s: float) -> list[str]:
    deadline = time.monotonic() + within_s
    while (left := _left(clusters, nodes)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def test_ctrl_c_of_a_runner_on_the_real_clusters_leaves_nothing(real):
    clusters, nodes = real
    sysctls = host_sysctls()
    assert _left(clusters, nodes) == [], "something of an earlier job was left before this test"
    with deployed_runner(clusters, nodes) as runner:
        runner.send_signal(signal.SIGINT)
        try:
            _out, err = runner.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            raise AssertionError("the runner did not finish within 180 s of Ctrl-C") from None
        assert runner.returncode != 0 and "KeyboardInterrupt" in err, err[-3000:]
    # undone by the runner on its way out; a pod's deletion is asked for, its end may take a while
    assert _wait_for_nothing_left(clusters, nodes, 120) == [], err[-3000:]
    assert host_sysctls() == sysctls


def test_sigkill_of_a_runner_on_the_real_clusters_leaves_nothing(real):
    clusters, nodes = real
    sysctls = host_sysctls()
    assert _left(clusters, nodes) == [], "something of an earlier job was left before this test"
    with deployed_runner(clusters, nodes) as runner:
        guardians = Path(f"/proc/{runner.pid}/task/{runner.pid}/children").read_text().split()
        assert guardians, "the runner has no guardian process"
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
    # the guardian resumes the paused cluster and deletes the pods, in its own process
    assert _wait_for_nothing_left(clusters, nodes, 180) == []
    assert host_sysctls() == sysctls
