"""A kind node image built here (`snakemake --cores 1 kind_node_images`), for real in the engine
DOCKER_HOST names: what kind's nodes will find in it, and its sysctl guard in a privileged
container (as kind runs its nodes): the host's sysctls cannot be changed from inside, kubelet's
tunables can (on copies), the node's own network keys can. Skipped, with the command, when no
image is built or the engine cannot start a privileged container (root without every capability
needs the lab's kind engine: .ci/start-kind-dockerd)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from throttlelab.platform.tool_build import ToolsSettings
from throttlelab.platform import kind_node_recipe as kn

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def built_image() -> dict:
    stamps = sorted(
        (ToolsSettings.from_mapping({}).cache / "kind-node").glob("*-*/node.json"), key=lambda p: p.stat().st_mtime
    )
    for stamp in reversed(stamps):
        record = json.loads(stamp.read_text())
        proc = subprocess.run(["docker", "image", "inspect", record["tag"]], capture_output=True)
        if proc.returncode == 0:
            return record
    pytest.skip("no kind node image built into this Docker engine: snakemake --cores 1 kind_node_images")


def in_node(tag: str, script: str, entrypoint: str = kn.SYSCTL_GUARD) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker", "run", "--rm", "--privileged", "--tmpfs", "/run", "--entrypoint", entrypoint, tag, "/bin/sh", "-c"]
        + [script],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def image() -> dict:
    record = built_image()
    probe = in_node(record["tag"], "true", entrypoint="/bin/true")
    if probe.returncode != 0:
        pytest.skip(
            f"this engine cannot start a privileged container ({probe.stderr.strip()[-200:]}): "
            'eval "$(.ci/start-kind-dockerd)"'
        )
    return record


def test_the_image_holds_the_pinned_tools_and_kubeadms_images(image):
    proc = in_node(
        image["tag"],
        "runc --version | head -1; containerd --version; kubeadm version -o short; kubelet --version; cat /kind/version",
        entrypoint="/usr/bin/env",
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    runc = {"runc-1.4.3": "1.4.3", "runc-1.3.0": "1.3.0"}[image["runc"]]
    assert lines[0] == f"runc version {runc}"
    assert "v2.4.2" in lines[1] and lines[2] == "v1.34.12" and lines[3] == "Kubernetes v1.34.12"
    assert lines[4] == image["kubernetes"]
    assert set(image["kubeadm_images"]) <= set(image["imported"]) and image["sandbox_image"] in image["imported"]


def test_the_sysctl_guard_keeps_the_host_s_sysctls_and_gives_kubelet_copies(image):
    host_panic = Path("/proc/sys/kernel/panic").read_text()
    host_pid_max = Path("/proc/sys/kernel/pid_max").read_text()
    script = (
        "echo 10 > /proc/sys/kernel/panic && cat /proc/sys/kernel/panic; "
        "if echo 4194304 > /proc/sys/kernel/pid_max; then echo pid_max-written; else echo pid_max-refused; fi; "
        "echo 1 > /proc/sys/net/ipv4/conf/all/route_localnet && cat /proc/sys/net/ipv4/conf/all/route_localnet"
    )
    proc = in_node(image["tag"], script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["10", "pid_max-refused", "1"]
    assert Path("/proc/sys/kernel/panic").read_text() == host_panic
    assert Path("/proc/sys/kernel/pid_max").read_text() == host_pid_max
