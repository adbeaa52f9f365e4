"""The node image builder's steps that need no root, no debootstrap and no engine
(platform/kind_node_image.py): kind's base files copied with their Dockerfile's modes, the
systemd set-up's removals, the import containerd's config, the mounts a killed debootstrap leaves,
and the tools a node image needs named with the target that builds them."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

import pytest

from conftest import PROJECT
from throttlelab.platform import kind_node_image as ni
from throttlelab.errors import BuildError
from throttlelab.platform.tool_build import ToolsSettings
from throttlelab.platform import tool_catalogue as ct
from throttlelab.platform import kind_node_recipe as kn

pytestmark = pytest.mark.fast


def _module(tmp_path: Path) -> ni.KindModule:
    base = tmp_path / "kind@v9.9.9" / "images" / "base"
    for path, text in {
        "files/usr/local/bin/entrypoint": "#!/bin/sh\n",
        "files/usr/local/bin/clean-install": "#!/bin/sh\n",
        "files/kind/README.txt": "kind\n",
        "files/kind/bin/mount-product-files.sh": "#!/bin/sh\n",
        "files/etc/crictl.yaml": "runtime-endpoint: x\n",
        "files/etc/containerd/config.toml": "version = 2\n",
    }.items():
        (base / path).parent.mkdir(parents=True, exist_ok=True)
        (base / path).write_text(text)
    return ni.KindModule("v9.9.9", tmp_path / "kind@v9.9.9")


RECIPE = kn.BaseRecipe(
    "trixie",
    ("systemd",),
    (
        kn.Copy("files/usr/local/bin/*", "/usr/local/bin/", 0o755),
        kn.Copy("files/kind/", "/kind/", 0o644),
        kn.Copy("files/kind/bin/", "/kind/bin/", 0o755),
        kn.Copy("files/etc/*", "/etc/", 0o644),
        kn.Copy("files/etc/containerd/*", "/etc/containerd/", 0o644),
    ),
    "/usr/lib/systemd/systemd",
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_kinds_files_land_with_the_modes_of_their_copy_lines(tmp_path):
    rootfs = tmp_path / "rootfs"
    written = ni.apply_copies(_module(tmp_path), RECIPE, rootfs)
    assert _mode(rootfs / "usr/local/bin/entrypoint") == 0o755
    assert _mode(rootfs / "kind/README.txt") == 0o644
    assert _mode(rootfs / "kind/bin/mount-product-files.sh") == 0o755  # the later COPY wins
    assert _mode(rootfs / "kind") == 0o755 and _mode(rootfs / "kind/bin") == 0o755
    assert (rootfs / "etc/containerd/config.toml").read_text() == "version = 2\n"
    # a glob copies the files it matches; the folder files/etc/containerd has its own line
    assert not (rootfs / "etc/config.toml").exists() and (rootfs / "etc/crictl.yaml").is_file()
    assert "/kind/bin/mount-product-files.sh" in written


def test_a_copy_line_that_matches_nothing_is_an_error(tmp_path):
    recipe = kn.BaseRecipe("trixie", ("systemd",), (kn.Copy("files/nothing/*", "/x/", 0o644),), "/sbin/x")
    with pytest.raises(BuildError, match=r"COPY files/nothing/\* matches no file"):
        ni.apply_copies(_module(tmp_path), recipe, tmp_path / "rootfs")


def test_the_import_containerd_keeps_to_the_rootfs_and_its_own_folder(tmp_path):
    text = ni.containerd_import_config(tmp_path / "rootfs/var/lib/containerd", tmp_path / "state", tmp_path / "c.sock")
    config = tomllib.loads(text)
    assert config["version"] == 3
    assert config["root"] == str(tmp_path / "rootfs/var/lib/containerd")
    assert config["grpc"]["address"] == str(tmp_path / "c.sock")
    assert config["plugins"]["io.containerd.internal.v1.opt"]["path"] == str(tmp_path / "state" / "opt")
    assert "io.containerd.grpc.v1.cri" in config["disabled_plugins"]  # no CRI: nothing runs, it only stores
    assert config["debug"]["address"] == "" and config["metrics"]["address"] == ""


def test_a_tool_not_built_is_named_with_the_target_that_builds_it(tmp_path):
    tools = ToolsSettings(tmp_path / "cache", tmp_path / "mod", tmp_path / "build")
    with pytest.raises(BuildError, match=r"needs kubeadm of kubernetes-node \(v1\.34\.12\): not built; .* kind_tools"):
        ni.tool_path(tools, PROJECT / "cluster", "kubernetes-node", "kubeadm")
    with pytest.raises(BuildError, match=r"needs runc of runc-1\.3\.0 \(v1\.3\.0\): not built; .* cluster_tools"):
        ni.tool_path(tools, PROJECT / "cluster", "runc-1.3.0", "runc")


def test_every_binary_the_node_gets_is_one_of_the_catalogue():
    for project, binary, path in ni.NODE_BINARIES:
        assert binary in {b.name for b in ct.project(project).binaries}
        assert project in kn.TOOL_PROJECTS and path.startswith("/usr/")
    assert (
        ni.IMAGE_CHANGES[-1]
        == 'ENTRYPOINT ["/usr/local/bin/throttlelab-sysctl-guard", "/usr/local/bin/entrypoint", "/sbin/init"]'
    )
    assert "STOPSIGNAL SIGRTMIN+3" in ni.IMAGE_CHANGES and "ENV container=docker" in ni.IMAGE_CHANGES


def test_a_new_node_image_removes_the_superseded_ones_of_its_role_only(monkeypatch):
    import subprocess

    calls = []

    def run(argv, **kwargs):
        calls.append(argv)
        out = "throttlelab/kind-node:new-aaa\nthrottlelab/kind-node:new-bbb\nthrottlelab/kind-node:old-ccc\n"
        in_use = argv[-1] == "throttlelab/kind-node:new-bbb"  # a cluster still runs from it
        return subprocess.CompletedProcess(argv, 1 if in_use else 0, stdout=out if "ls" in argv else "")

    monkeypatch.setattr(ni.subprocess, "run", run)
    assert ni.remove_superseded("new", "throttlelab/kind-node:new-ccc") == ["throttlelab/kind-node:new-aaa"]
    assert ["docker", "image", "rm", "throttlelab/kind-node:old-ccc"] not in calls
