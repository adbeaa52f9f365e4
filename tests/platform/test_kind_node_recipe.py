"""The kind node images made here, pure parts: kind's base Dockerfile read for its
Debian release, packages and files; the control plane's images named as kubeadm lists them; the
runtime spec; the pod network; the sysctl guard; the settings' error."""

from __future__ import annotations

import json

import pytest
import yaml

from throttlelab.errors import BuildError
from throttlelab.platform import tool_catalogue as ct
from throttlelab.platform import kind_node_recipe as kn
from throttlelab.platform.real_node_layout import KUBELET_SYSCTLS
from throttlelab.platform.tool_build import ToolsSettings

pytestmark = pytest.mark.fast

# the shape of kind's base Dockerfile (its first stage and the start of the next), written for this test
DOCKERFILE = """\
ARG BASE_IMAGE=debian:trixie-slim
FROM $BASE_IMAGE AS base

# copy in static files
COPY --chmod=0755 files/usr/local/bin/* /usr/local/bin/
COPY --chmod=0644 files/kind/ /kind/
COPY --chmod=0644 files/LICENSES/* /LICENSES/*
RUN chmod 755 /kind /kind/bin && \\
    echo "Installing Packages ..." \\
    && DEBIAN_FRONTEND=noninteractive clean-install \\
      systemd \\
      conntrack iptables \\
      bash ca-certificates \\
    && rm -f /lib/systemd/system/multi-user.target.wants/* \\
    && ln -s /usr/lib/systemd/systemd /sbin/init

FROM --platform=$BUILDPLATFORM $BASE_IMAGE AS go-build
COPY --chmod=0755 scripts/target-cc /usr/local/bin/
RUN clean-install git make
"""


def test_the_base_is_read_from_the_first_stage_of_kinds_dockerfile():
    base = kn.parse_base_dockerfile(DOCKERFILE)
    assert base.suite == "trixie"
    assert base.packages == ("systemd", "conntrack", "iptables", "bash", "ca-certificates")  # not the go-build's
    assert base.copies == (
        kn.Copy("files/usr/local/bin/*", "/usr/local/bin/", 0o755),
        kn.Copy("files/kind/", "/kind/", 0o644),
        kn.Copy("files/LICENSES/*", "/LICENSES/", 0o644),
    )
    assert base.init == "/usr/lib/systemd/systemd"
    # kind v0.30.0 links $(which systemd), which is the same file on Debian
    older = DOCKERFILE.replace("/usr/lib/systemd/systemd /sbin/init", '"$(which systemd)" /sbin/init')
    assert kn.parse_base_dockerfile(older).init == "/usr/lib/systemd/systemd"


def test_a_dockerfile_that_is_not_kinds_base_is_refused_naming_what_is_missing():
    with pytest.raises(BuildError, match="no `ARG BASE_IMAGE=debian:<release>-slim`"):
        kn.parse_base_dockerfile(DOCKERFILE.replace("debian:trixie-slim", "ubuntu:24.04"))
    with pytest.raises(BuildError, match="no `clean-install` of packages"):
        kn.parse_base_dockerfile(DOCKERFILE.replace("clean-install", "apt-get install"))


#: where `snakemake kind_tools` downloads kind's modules (config.yaml's cluster_tools.go_mod_cache default)
MODULES = ToolsSettings.from_mapping(None).go_mod_cache


@pytest.mark.parametrize(("release", "suite"), [("v0.30.0", "bookworm"), ("v0.33.0", "trixie")])
def test_the_pinned_kind_modules_base_dockerfiles_parse(release, suite):
    dockerfile = MODULES / f"sigs.k8s.io/kind@{release}/images/base/Dockerfile"
    if not dockerfile.is_file():
        pytest.skip(f"kind {release} is not in the module cache {MODULES} (snakemake --cores 2 kind_tools)")
    base = kn.parse_base_dockerfile(dockerfile.read_text())
    assert base.suite == suite
    assert {"systemd", "iptables", "conntrack", "libseccomp2", "fuse-overlayfs"} <= set(base.packages)
    assert ("e2fsprogs" in base.packages) == (release == "v0.33.0")  # v0.33.0 added it
    assert kn.Copy("files/etc/containerd/*", "/etc/containerd/", 0o644) in base.copies
    assert all((dockerfile.parent / c.source.rstrip("/*")).exists() for c in base.copies)


def test_each_base_has_its_own_cache_folder_keyed_by_what_it_is_made_of():
    base = kn.parse_base_dockerfile(DOCKERFILE)
    folder = kn.base_folder(base, "http://deb.debian.org/debian")
    assert folder.startswith("debian-trixie-") and len(folder) == len("debian-trixie-") + 12
    assert kn.base_folder(base, "http://other.mirror/debian") != folder


KUBEADM_LIST = """\
registry.k8s.io/kube-apiserver:v1.34.12
registry.k8s.io/kube-controller-manager:v1.34.12
registry.k8s.io/kube-scheduler:v1.34.12
registry.k8s.io/kube-proxy:v1.34.12
registry.k8s.io/coredns/coredns:v1.12.1
registry.k8s.io/pause:3.10.1
registry.k8s.io/etcd:3.6.5-0
"""


def test_every_image_kubeadm_lists_is_made_here_under_its_exact_name_and_the_sandbox_too():
    wanted = kn.images_to_build(KUBEADM_LIST, "registry.k8s.io/pause:3.10")
    assert wanted == {
        "kube-apiserver": ["registry.k8s.io/kube-apiserver:v1.34.12"],
        "kube-controller-manager": ["registry.k8s.io/kube-controller-manager:v1.34.12"],
        "kube-scheduler": ["registry.k8s.io/kube-scheduler:v1.34.12"],
        "kube-proxy": ["registry.k8s.io/kube-proxy:v1.34.12"],
        "coredns": ["registry.k8s.io/coredns/coredns:v1.12.1"],
        "pause": ["registry.k8s.io/pause:3.10.1", "registry.k8s.io/pause:3.10"],  # kubeadm's and containerd's
        "etcd": ["registry.k8s.io/etcd:3.6.5-0"],
    }
    assert kn.IMAGE_RECIPES["kube-proxy"].iptables and kn.IMAGE_RECIPES["pause"].pause
    with pytest.raises(
        BuildError, match=r"kubeadm needs the image registry.k8s.io/kindnetd:v1, .* no recipe for .kindnetd."
    ):
        kn.images_to_build(KUBEADM_LIST + "registry.k8s.io/kindnetd:v1\n", "registry.k8s.io/pause:3.10")
    with pytest.raises(BuildError, match="printed no image"):
        kn.images_to_build("\n", "registry.k8s.io/pause:3.10")


def test_every_binary_an_image_holds_is_a_cluster_tool_of_the_catalogue():
    for image in kn.IMAGE_RECIPES.values():
        for part in image.parts:
            assert part.binary in {b.name for b in ct.project(part.project).binaries}, part
            assert part.project in kn.TOOL_PROJECTS
        assert image.entrypoint[0] in {p.path for p in image.parts} | ({"/pause"} if image.pause else set())
    assert kn.node_projects("old")[-2:] == ["runc-1.3.0", "kind-0.30.0"]
    assert kn.node_projects("new")[-2:] == ["runc-1.4.3", "kind-0.33.0"]
    with pytest.raises(BuildError, match="unknown role 'mid'"):
        kn.recipe("mid")


def test_the_sandbox_image_is_read_from_either_containerd_config_version():
    assert kn.sandbox_image(
        '[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "registry.k8s.io/pause:3.10"\n'
    ) == ("registry.k8s.io/pause:3.10")
    assert kn.sandbox_image("[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = \"p:1\"\n") == "p:1"
    with pytest.raises(BuildError, match="names no sandbox image"):
        kn.sandbox_image("version = 2\n")


def test_the_runtime_spec_gets_kinds_hook_and_loses_the_rlimits():
    default = {"process": {"rlimits": [{"type": "RLIMIT_NOFILE"}], "args": ["sh"]}, "hooks": {}}
    spec = kn.cri_base_spec(default)
    assert spec["hooks"]["createContainer"] == [{"path": "/kind/bin/mount-product-files.sh"}]
    assert "rlimits" not in spec["process"] and spec["process"]["args"] == ["sh"]
    assert default["process"]["rlimits"]  # the input is left as it was


def test_the_pod_network_is_a_daemonset_of_podnet_kind_patches_with_the_api_servers_address():
    text = kn.pod_network_manifest()
    assert "would you kindly patch this file" in text  # kind adds CONTROL_PLANE_ENDPOINT to containers[0].env
    docs = {d["kind"]: d for d in yaml.safe_load_all(text)}
    assert set(docs) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"}
    pod = docs["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    container = pod["containers"][0]
    assert container["image"] == kn.POD_NETWORK_IMAGE and container["imagePullPolicy"] == "Never"
    assert isinstance(container["env"], list)  # kind's patch appends to it
    assert f"/host{kn.CNI_CONFIG}" in container["args"]
    assert docs["ClusterRole"]["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]


def test_the_sysctl_guard_covers_kubelets_tunables_and_leaves_only_net_writable():
    script = kn.sysctl_guard_script(tuple(KUBELET_SYSCTLS))
    assert script.startswith("#!/bin/sh\n") and script.rstrip().endswith('exec "$@"')
    assert f"for key in {' '.join(KUBELET_SYSCTLS)}; do" in script
    lines = script.splitlines()
    order = [
        lines.index("mount --bind /proc/sys /proc/sys"),
        lines.index("mount --bind /proc/sys/net /proc/sys/net"),
        lines.index("mount -o remount,bind,ro /proc/sys"),
    ]
    assert order == sorted(order)
    assert kn.ENTRYPOINT == (kn.SYSCTL_GUARD, "/usr/local/bin/entrypoint", "/sbin/init")


def test_published_without_a_registry_names_the_setting_that_works():
    assert kn.node_image_problem("published", has_registry=True) is None
    assert kn.node_image_problem("local", has_registry=False) is None
    problem = kn.node_image_problem("published", has_registry=False)
    assert "set kind.node_images to local" in problem and "--config 'kind={node_images: local}'" in problem
    assert "is not one of published, local" in kn.node_image_problem("pulled", has_registry=True)


def test_the_node_key_follows_every_input_and_names_the_tag():
    key = kn.node_key({"a": 1, "b": [1, 2]})
    assert key == kn.node_key({"b": [1, 2], "a": 1}) and len(key) == 12
    assert key != kn.node_key({"a": 2, "b": [1, 2]})
    assert kn.node_tag("old", key) == f"throttlelab/kind-node:old-{key}"
    json.dumps(kn.NODE_IMAGE_SOURCES)


def test_the_nodes_containerd_lowers_no_oom_score_below_its_own():
    kind = '[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "p"\n  restrict_oom_score_adj = false\n'
    assert kn.containerd_config(kind) == kind.replace("restrict_oom_score_adj = false", "restrict_oom_score_adj = true")
    with pytest.raises(BuildError, match="no `restrict_oom_score_adj = false`"):
        kn.containerd_config("version = 2\n")
