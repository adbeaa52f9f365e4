"""The cluster tools' catalogue, pure parts: the pins read from go.mod, the cache folders, the version
ldflags each upstream sets, the build key, and the version commands' outputs (copied from the
binaries built here)."""

from __future__ import annotations

import re

import pytest

from conftest import PROJECT
from throttlelab.errors import BuildError
from throttlelab.platform import tool_catalogue as ct

DATE = "2026-09-23T17:08:30Z"


def binary(project: str, name: str) -> ct.Binary:
    return next(b for b in ct.project(project).binaries if b.name == name)


def test_the_pin_is_read_from_a_require_block_or_line():
    gomod = (
        "module throttlelab/cluster\n\ngo 1.25.0\n\nrequire (\n"
        "\tgithub.com/cilium/ebpf v0.17.3 // indirect\n\tk8s.io/kubernetes v1.34.12\n)\n\n"
        "require sigs.k8s.io/cri-tools v1.34.0\n\nreplace k8s.io/api => k8s.io/api v0.34.12\n"
    )
    assert ct.required_version(gomod, "k8s.io/kubernetes") == "v1.34.12"
    assert ct.required_version(gomod, "sigs.k8s.io/cri-tools") == "v1.34.0"
    with pytest.raises(BuildError, match="does not require k8s.io/api; pin it"):
        ct.required_version(gomod, "k8s.io/api")  # a replace is not a requirement
    with pytest.raises(BuildError, match="requires 2 times"):
        ct.required_version(gomod + "require k8s.io/kubernetes v1.34.11\n", "k8s.io/kubernetes")


def test_every_project_of_the_catalogue_is_a_module_of_cluster_with_a_tool_line_per_binary():
    for row in ct.PROJECTS:
        gomod = (PROJECT / "cluster" / row.folder / "go.mod").read_text()
        version = ct.required_version(gomod, row.module)
        assert re.fullmatch(r"v\d+\.\d+\.\d+", version), (row.name, version)
        block = re.search(r"^tool \((.*?)^\)", gomod, re.MULTILINE | re.DOTALL)
        tools = set(re.findall(r"^tool\s+([^\s(]\S*)$", gomod, re.MULTILINE)) | (
            set(block.group(1).split()) if block else set()
        )
        assert {b.package for b in row.binaries} == tools, row.name
    assert ct.NODE_PROJECT_NAMES[-1] == "kubernetes"  # the long build last
    assert set(ct.NODE_PROJECT_NAMES) | set(ct.KIND_PROJECT_NAMES) == set(ct.PROJECT_NAMES)
    assert set(ct.KIND_PROJECT_NAMES) == {"kind-0.30.0", "kind-0.33.0", "kubernetes-node", "coredns"}
    assert (
        ct.required_version((PROJECT / "cluster/runc-1.3.0/go.mod").read_text(), ct.project("runc-1.3.0").module)
        == "v1.3.0"
    )


def test_the_cache_folder_is_the_project_and_its_version():
    assert ct.cache_folder(ct.project("runc-1.3.0"), "v1.3.0") == "runc-v1.3.0"
    assert ct.cache_folder(ct.project("runc-1.4.3"), "v1.4.3") == "runc-v1.4.3"
    assert ct.cache_folder(ct.project("kubernetes"), "v1.34.12") == "kubernetes-v1.34.12"
    with pytest.raises(BuildError, match="unknown cluster tools project 'kube'; choose one of runc-1.3.0"):
        ct.project("kube")


def test_kubernetes_sets_every_version_key_in_both_packages_as_version_sh_does():
    values = ct.version_values("v1.34.12", DATE, None)
    flags = ct.version_ldflags(binary("kubernetes", "kubelet"), values)
    expected = []
    for key, value in [
        ("buildDate", DATE),
        ("gitTreeState", "archive"),
        ("gitVersion", "v1.34.12"),
        ("gitMajor", "1"),
        ("gitMinor", "34"),
    ]:
        expected += [
            f"-X k8s.io/client-go/pkg/version.{key}={value}",
            f"-X k8s.io/component-base/version.{key}={value}",
        ]
    assert flags == expected  # gitCommit left out: the commit of v1.34.12 is not known here
    with_commit = ct.version_ldflags(binary("kubernetes", "kubectl"), ct.version_values("v1.34.12", DATE, "1f328c5e"))
    assert with_commit[2:4] == [
        "-X k8s.io/client-go/pkg/version.gitCommit=1f328c5e",
        "-X k8s.io/component-base/version.gitCommit=1f328c5e",
    ]
    assert ct.ldflags(binary("kubernetes", "kube-apiserver"), values).endswith("gitMinor=34 -s -w")


def test_a_pre_release_gets_upstreams_minor_with_a_plus_and_a_bad_version_is_refused():
    assert ct.version_values("v1.35.0-alpha.1", DATE, None)["minor"] == "35+"
    assert ct.version_values("v1.34.12", DATE, None)["major"] == "1"
    with pytest.raises(BuildError, match="is not vMAJOR.MINOR.PATCH"):
        ct.version_values("1.34.12", DATE, None)


def test_the_other_projects_version_variables():
    values = ct.version_values("v2.4.2", DATE, None)
    assert ct.version_ldflags(binary("containerd", "containerd"), values) == [
        "-X github.com/containerd/containerd/v2/version.Version=v2.4.2",
        "-X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2",
    ]  # Revision: no commit known
    assert ct.version_ldflags(binary("cri-tools", "crictl"), ct.version_values("v1.34.0", DATE, None)) == [
        "-X sigs.k8s.io/cri-tools/pkg/version.Version=1.34.0"
    ]  # the Makefile strips the v
    etcd = ct.project("etcd")
    assert ct.version_ldflags(etcd.binaries[0], ct.version_values("v3.6.5", DATE, etcd.commit)) == [
        "-X go.etcd.io/etcd/api/v3/version.GitSHA=a061450"
    ]
    runc = binary("runc-1.4.3", "runc")
    assert ct.version_ldflags(runc, ct.version_values("v1.4.3", DATE, None)) == []  # VERSION is embedded
    assert ct.version_ldflags(runc, ct.version_values("v1.4.3", DATE, "abcdef0123")) == ["-X main.gitCommit=abcdef0123"]


def test_build_flags_follow_each_upstream_makefile():
    values = ct.version_values("v1.3.0", DATE, None)
    assert ct.go_build_flags(binary("runc-1.3.0", "runc"), values) == [
        "-trimpath",
        "-buildmode=pie",
        "-tags",
        "seccomp,urfave_cli_no_docs",
        "-ldflags",
        "",
    ]
    kube = ct.go_build_flags(binary("kubernetes", "kubelet"), ct.version_values("v1.34.12", DATE, None))
    assert kube[:3] == ["-trimpath", "-tags", "selinux,notest,grpcnotrace"]
    assert binary("kubernetes", "kubelet").cgo and not binary("kubernetes", "kube-apiserver").cgo
    shim = binary("containerd", "containerd-shim-runc-v2")
    assert not shim.cgo and "no_grpc" in shim.tags and shim.buildmode is None
    assert "-p" not in kube  # the parallelism does not change the binary, so it is not in the key


def test_a_value_go_cannot_carry_is_refused():
    odd = ct.Binary("x", "example.com/x", ("--version",), r"(.*)", symbols=(("main.v", "{date}"),))
    with pytest.raises(BuildError, match="has a space or quote"):
        ct.version_ldflags(odd, {"date": "2026-09-23 17:08"})


def test_the_build_date_is_the_release_time_in_utc():
    assert ct.build_date("2026-09-23T17:08:30Z") == DATE
    assert ct.build_date("2026-09-23T19:08:30.5+02:00") == DATE
    for bad in ("yesterday", "2026-09-23T17:08:30"):
        with pytest.raises(BuildError):
            ct.build_date(bad)


def test_the_build_key_changes_with_every_input_and_not_with_their_order():
    inputs = {"version": "v1.3.0", "go.sum": "ab", "flags": ["-trimpath"], "go": {"GOVERSION": "go1.27.3"}}
    key = ct.build_key(inputs)
    assert re.fullmatch(r"[0-9a-f]{64}", key)
    assert ct.build_key(dict(reversed(list(inputs.items())))) == key
    for field, other in [("version", "v1.4.3"), ("go.sum", "cd"), ("flags", []), ("go", {"GOVERSION": "go1.27.4"})]:
        assert ct.build_key({**inputs, field: other}) != key, field


# What the binaries built here print (copied from `throttlelab cluster-tools build`'s stamps).
OUTPUTS = {
    ("kubernetes", "kubelet"): "Kubernetes v1.34.12\n",
    ("kubernetes", "kubectl"): "Client Version: v1.34.12\nKustomize Version: v5.7.1\n",
    ("etcd", "etcd"): "etcd Version: 3.6.5\nGit SHA: a061450\nGo Version: go1.27.3\nGo OS/Arch: linux/amd64\n",
    ("etcd", "etcdctl"): "etcdctl version: 3.6.5\nAPI version: 3.6\n",
    ("containerd", "containerd"): "containerd github.com/containerd/containerd/v2 v2.4.2 \n",
    ("containerd", "containerd-shim-runc-v2"): "containerd-shim-runc-v2:\n  Version:  v2.4.2\n  Revision: \n"
    "  Go version: go1.27.3\n\n",
    ("containerd", "ctr"): "ctr github.com/containerd/containerd/v2 v2.4.2\n",
    ("cri-tools", "crictl"): "crictl version 1.34.0\n",
    ("runc-1.3.0", "runc"): "runc version 1.3.0\nspec: 1.2.1\ngo: go1.27.3\nlibseccomp: 2.5.4\n",
    ("runc-1.4.3", "runc"): "runc version 1.4.3\nspec: 1.3.0\ngo: go1.27.3\nlibseccomp: 2.5.4\n",
}
PINS = {
    "kubernetes": "v1.34.12",
    "etcd": "v3.6.5",
    "containerd": "v2.4.2",
    "cri-tools": "v1.34.0",
    "runc-1.3.0": "v1.3.0",
    "runc-1.4.3": "v1.4.3",
}


@pytest.mark.parametrize("project,name", sorted(OUTPUTS))
def test_each_version_command_output_names_the_pinned_version(project, name):
    tool = binary(project, name)
    assert ct.version_problems(tool, PINS[project], OUTPUTS[project, name]) == []
    assert ct.printed_version(tool, OUTPUTS[project, name]) == ct.expected_version(tool, PINS[project])


def test_a_binary_without_its_version_or_seccomp_is_a_failed_build():
    kubelet = binary("kubernetes", "kubelet")
    assert ct.version_problems(kubelet, "v1.34.12", "Kubernetes v0.0.0-master+$Format:%H$\n") == [
        "it says v0.0.0-master+$Format:%H$, the pin is v1.34.12"
    ]
    assert ct.version_problems(kubelet, "v1.34.12", "") == ["no line matches '^Kubernetes (v\\\\S+)$'"]
    runc = binary("runc-1.3.0", "runc")
    no_seccomp = "runc version 1.3.0\nspec: 1.2.1\ngo: go1.27.3\n"
    assert ct.version_problems(runc, "v1.3.0", no_seccomp) == [
        "no line matches '^libseccomp: \\\\d+\\\\.\\\\d+\\\\.\\\\d+$'"
    ]
    assert ct.version_problems(runc, "v1.4.3", OUTPUTS["runc-1.3.0", "runc"]) == ["it says 1.3.0, the pin is 1.4.3"]


def test_durations_read_as_people_write_them():
    assert [ct.duration_text(s) for s in (0.04, 9.96, 42.4, 185, 3725)] == [
        "0.0 s",
        "10.0 s",
        "42 s",
        "3 min 05 s",
        "1 h 02 min",
    ]


def test_the_kind_releases_each_have_a_cache_folder_of_their_version_and_print_it():
    assert ct.cache_folder(ct.project("kind-0.30.0"), "v0.30.0") == "kind-v0.30.0"
    assert ct.cache_folder(ct.project("kind-0.33.0"), "v0.33.0") == "kind-v0.33.0"
    kind = binary("kind-0.33.0", "kind")
    assert ct.version_problems(kind, "v0.33.0", "kind v0.33.0 go1.27.3 linux/amd64\n") == []
    assert ct.version_problems(kind, "v0.33.0", "kind v0.30.0 go1.27.3 linux/amd64\n") == [
        "it says v0.30.0, the pin is v0.33.0"
    ]
    # kind's Makefile: -buildid= and -w, v0.33.0 strips the symbol table too; the commit is not known here
    values = ct.version_values("v0.30.0", DATE, None)
    assert ct.ldflags(binary("kind-0.30.0", "kind"), values) == "-buildid= -w"
    assert ct.ldflags(kind, ct.version_values("v0.33.0", DATE, None)) == "-buildid= -s -w"


def test_kubeadm_kube_proxy_and_coredns_print_their_pins():
    kubeadm = binary("kubernetes-node", "kubeadm")
    assert kubeadm.version_args == ("version", "-o", "short")
    assert ct.version_problems(kubeadm, "v1.34.12", "v1.34.12\n") == []
    assert ct.version_problems(binary("kubernetes-node", "kube-proxy"), "v1.34.12", "Kubernetes v1.34.12\n") == []
    coredns = binary("coredns", "coredns")
    assert ct.version_problems(coredns, "v1.12.1", "CoreDNS-1.12.1\nlinux/amd64, go1.27.3, 707c7c1\n") == []
    assert ct.version_ldflags(coredns, ct.version_values("v1.12.1", DATE, ct.project("coredns").commit)) == [
        "-X github.com/coredns/coredns/coremain.GitCommit=707c7c1"
    ]
