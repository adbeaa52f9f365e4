"""The kind cluster configs kept in the project, checked against kind's config format
(config/kind/cluster.schema.yaml: a JSON Schema written from kind's v1alpha4 Go types and its
validation, strict like kind's decoder) and against the lab's clusters (docs/LAB.md); and the kind /
kubernetes settings of config.yaml."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from conftest import PROJECT, snakemake
from throttlelab.backends.base import BackendError
from throttlelab.platform import kind_clusters as clusters
from throttlelab.model.config import ConfigError, load_design

KIND_DIR = PROJECT / "config" / "kind"
SCHEMA = yaml.safe_load((KIND_DIR / "cluster.schema.yaml").read_text())
LAB = PROJECT / "docs" / "LAB.md"


def errors(config: dict) -> list[str]:
    return [e.message for e in jsonschema.Draft7Validator(SCHEMA).iter_errors(config)]


@pytest.mark.fast
def test_the_schema_is_a_valid_draft7_schema():
    jsonschema.Draft7Validator.check_schema(SCHEMA)


@pytest.mark.fast
@pytest.mark.parametrize("role", ["new", "old"])
def test_the_project_configs_are_valid_kind_configs(role):
    config = yaml.safe_load((KIND_DIR / f"{role}.yaml").read_text())
    assert errors(config) == []


@pytest.mark.fast
@pytest.mark.parametrize("role", ["new", "old"])
def test_each_cluster_is_the_labs_two_nodes_pinned_by_digest(role):
    config = yaml.safe_load((KIND_DIR / f"{role}.yaml").read_text())
    assert [n["role"] for n in config["nodes"]] == ["control-plane", "worker"]
    for node in config["nodes"]:
        assert node["image"] == clusters.NODE_IMAGES[role]
        assert re.fullmatch(r"kindest/node:v1\.34\.\d+@sha256:[0-9a-f]{64}", node["image"])
    defaults = load_design({"backend": "kind"}, PROJECT / "config").kind
    assert config["name"] == defaults[f"{role}_cluster"]


@pytest.mark.fast
def test_the_pinned_images_are_the_labs():
    text = LAB.read_text()
    for image in clusters.NODE_IMAGES.values():
        assert f"`{image}`" in text
    assert "kind v0.33.0" in text and "kind v0.30.0" in text
    defaults = load_design({"backend": "kind"}, PROJECT / "config").kind
    assert (defaults["release"], defaults["old_release"]) == ("v0.33.0", "v0.30.0")


BASE = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4"}


@pytest.mark.fast
@pytest.mark.parametrize(
    "config",
    [
        BASE,
        {**BASE, "nodes": [{}]},  # role defaults to control-plane, image to kind's default
        {**BASE, "name": "a.b-1", "nodes": [{"role": "control-plane"}, {"role": "worker", "labels": {"x": "y"}}]},
        {
            **BASE,
            "networking": {
                "ipFamily": "dual",
                "apiServerPort": -1,
                "kubeProxyMode": "nftables",
                "podSubnet": "10.0.0.0/16",
                "disableDefaultCNI": True,
                "dnsSearch": [],
            },
        },
        {
            **BASE,
            "featureGates": {"PodLogsQuerySplitStreams": True},
            "runtimeConfig": {"api/alpha": "false"},
            "kubeadmConfigPatches": ["kind: KubeletConfiguration\ncontainerLogMaxSize: 100Mi\n"],
            "containerdConfigPatches": ["[plugins]\n"],
        },
        {
            **BASE,
            "nodes": [
                {
                    "role": "control-plane",
                    "extraMounts": [
                        {"hostPath": "/a", "containerPath": "/b", "readOnly": True, "propagation": "HostToContainer"}
                    ],
                    "extraPortMappings": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
                    "kubeadmConfigPatchesJSON6902": [
                        {"group": "kubeadm.k8s.io", "version": "v1beta3", "kind": "ClusterConfiguration", "patch": "[]"}
                    ],
                }
            ],
        },
    ],
)
def test_kinds_documented_fields_are_accepted(config):
    assert errors(config) == []


@pytest.mark.fast
@pytest.mark.parametrize(
    "config, why",
    [
        ({**BASE, "apiVersion": "kind.x-k8s.io/v1alpha3"}, "v1alpha4"),
        ({"apiVersion": "kind.x-k8s.io/v1alpha4"}, "'kind' is a required property"),
        (
            {**BASE, "nodes": [{"role": "worker", "image": "kindest/node:v1.34.0"}]},
            "are valid under",
        ),  # no control-plane
        ({**BASE, "nodes": [{"role": "master"}]}, "'master' is not one of"),
        ({**BASE, "nodes": [{"role": "worker", "imgae": "x"}, {"role": "control-plane"}]}, "'imgae' was unexpected"),
        ({**BASE, "nodes": [{"image": ""}]}, "non-empty"),
        ({**BASE, "name": "Throttle_Lab"}, "does not match"),
        ({**BASE, "networking": {"ipFamily": "ipv5"}}, "'ipv5' is not one of"),
        ({**BASE, "networking": {"apiServerPort": 70000}}, "70000 is greater than"),
        ({**BASE, "nodes": [{"extraMounts": [{"propagation": "Sideways"}]}]}, "'Sideways' is not one of"),
        ({**BASE, "bogus": 1}, "'bogus' was unexpected"),
        ({**BASE, "featureGates": {"X": "yes"}}, "is not of type 'boolean'"),
    ],
)
def test_what_kind_would_reject_is_rejected(config, why):
    found = errors(config)
    assert found and any(why in e for e in found), found


@pytest.mark.fast
def test_kind_and_kubernetes_settings_have_defaults_and_are_checked():
    design = load_design(
        {"backend": "kubernetes", "kubernetes": {"kubeconfig": "/k", "worker_node": "w"}}, PROJECT / "config"
    )
    assert design.kubernetes["kubeconfig"] == "/k" and design.kubernetes["namespace"] == "default"
    assert design.kubernetes["load_node"] is None and design.kubernetes["pull_policy"] == "IfNotPresent"
    assert design.kind["old_binary"] == "kind-v0.30.0"
    for bad, field in (
        ({"kind": {"binray": "kind"}}, "config.kind"),
        ({"kind": {"new_cluster": "Has Spaces"}}, "config.kind.new_cluster"),
        ({"kubernetes": {"pull_policy": "Sometimes"}}, "config.kubernetes.pull_policy"),
        ({"kubernetes": {"images": {"go126mod": "x"}}}, "config.kubernetes.images"),
    ):
        with pytest.raises(ConfigError, match=re.escape(field)):
            load_design({"backend": "kind", **bad}, PROJECT / "config")


@pytest.mark.fast
def test_every_new_setting_is_described():
    schema = yaml.safe_load((PROJECT / "config" / "config.schema.yaml").read_text())
    for section in ("kind", "kubernetes"):
        prop = schema["properties"][section]
        assert prop["description"] and "default" in prop
        for key, sub in prop["properties"].items():
            assert sub.get("description") and "default" in sub, f"{section}.{key}"


@pytest.mark.plan  # a dry run
def test_the_kind_configs_live_where_the_backend_reads_them(tmp_path):
    # the rules hand the project's config/kind to `throttlelab kind create --config-dir`
    proc = snakemake(
        tmp_path, "-n", "-p", "results/kind/clusters/new/kubeconfig", "--config", "backend=kind", timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"--config-dir {KIND_DIR} " in proc.stdout
    for role in ("new", "old"):
        assert clusters.KindCluster(role, "x", "kind", "v0", Path("/w"), KIND_DIR).config == KIND_DIR / f"{role}.yaml"
    with pytest.raises(BackendError, match="--config-dir"):
        _ = clusters.KindCluster("new", "x", "kind", "v0", Path("/w")).config


@pytest.mark.fast
def test_kind_load_falls_back_to_an_image_archive_on_the_containerd_image_store():
    from throttlelab.backends.base import BackendError
    from throttlelab.platform.kind_clusters import load_into_cluster

    ran = []

    def run(argv, what, timeout_s):
        ran.append(argv[:3])
        if argv[1:3] == ["load", "docker-image"]:
            raise BackendError(
                f'{what} failed (exit 1): ERROR: failed to load image: command "docker save -o '
                '/tmp/images-tar/images.tar cpulab-kind:go124mod" failed with error: exit status 1: '
                "Error response from daemon: content digest sha256:0a1b: not found"
            )
        return ""

    assert load_into_cluster("kind", "cpulab-kind:go124mod", "throttlelab-new", run) == "image-archive"
    assert ran == [["kind", "load", "docker-image"], ["docker", "save", "-o"], ["kind", "load", "image-archive"]]


@pytest.mark.fast
def test_kind_load_other_failures_are_not_hidden():
    import pytest as _pytest

    from throttlelab.backends.base import BackendError
    from throttlelab.platform.kind_clusters import load_into_cluster

    def run(argv, what, timeout_s):
        raise BackendError(f'{what} failed (exit 1): ERROR: no nodes found for cluster "throttlelab-new"')

    with _pytest.raises(BackendError, match="no nodes found"):
        load_into_cluster("kind", "cpulab-kind:go124mod", "throttlelab-new", run)


@pytest.mark.fast
def test_kind_load_of_an_old_kind_into_a_newer_containerd_imports_with_the_nodes_ctr():
    from throttlelab.backends.base import BackendError
    from throttlelab.platform.kind_clusters import load_into_cluster

    ran = []

    def run(argv, what, timeout_s):
        ran.append(argv)
        if argv[1:3] == ["load", "docker-image"]:
            # kind v0.30.0 against the node images' containerd v2.4.2, as it failed on this machine
            raise BackendError(
                f"{what} failed (exit 1): ERROR: unknown containerd config version: 4 (supported versions: 2 and 3)"
            )
        return ""

    nodes = ("throttlelab-old-control-plane", "throttlelab-old-worker")
    assert load_into_cluster("kind", "cpulab-kind:go124mod", "throttlelab-old", run, nodes) == "ctr-import"
    assert ran[1][:3] == ["docker", "save", "-o"]
    archive = ran[1][3]
    for node in nodes:
        assert ["docker", "cp", archive, f"{node}:/kind/throttlelab-image.tar"] in ran
        assert [
            "docker",
            "exec",
            node,
            "ctr",
            "--namespace=k8s.io",
            "images",
            "import",
            "--all-platforms",
            "--digests",
            "/kind/throttlelab-image.tar",
        ] in ran
        assert ["docker", "exec", node, "rm", "-f", "/kind/throttlelab-image.tar"] in ran
    with pytest.raises(BackendError, match="unknown containerd config version"):
        load_into_cluster("kind", "cpulab-kind:go124mod", "throttlelab-old", run)  # no nodes named: not hidden
