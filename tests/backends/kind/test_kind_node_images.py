"""kind.node_images: published keeps the lab's kindest/node digests and the kind binaries
named in the settings; local creates the clusters from the node images built here, with the kind
releases of the tool cache, and records each image's ID and versions in the cluster's stamp (which
every raw log's environment carries). Under published with no registry the run stops before any job,
naming the setting that works."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from conftest import PROJECT
from throttlelab.backends.base import BackendError
from throttlelab.platform import kind_clusters as clusters
from throttlelab.model.config import ConfigError, load_design

pytestmark = pytest.mark.fast

KIND_DIR = PROJECT / "config" / "kind"


def _settings(**kind):
    return load_design({"backend": "kind", "kind": kind}, PROJECT / "config").kind


def test_the_setting_defaults_to_published_and_takes_only_its_two_values():
    assert _settings()["node_images"] == "published"
    assert _settings(node_images="local")["node_images"] == "local"
    with pytest.raises(ConfigError, match=re.escape("config.kind.node_images")):
        _settings(node_images="pulled")


def test_local_uses_the_tool_caches_kind_of_each_release(tmp_path):
    kind = {**_settings(node_images="local"), "cluster_tools": {"cache": str(tmp_path / "tools")}}
    found = clusters.clusters_from_settings(kind, tmp_path, KIND_DIR)
    assert found["new"].binary == str(tmp_path / "tools" / "kind-v0.33.0" / "bin" / "kind")
    assert found["old"].binary == str(tmp_path / "tools" / "kind-v0.30.0" / "bin" / "kind")
    assert {c.node_images for c in found.values()} == {"local"}
    with pytest.raises(BackendError, match=r"not in the tool cache .* snakemake --cores 2 kind_tools"):
        clusters.check_kind(found["old"])
    published = clusters.clusters_from_settings(_settings(), tmp_path, KIND_DIR)
    assert published["new"].binary == "kind" and published["old"].binary == "kind-v0.30.0"


def test_local_creates_from_the_projects_config_with_the_image_built_here(tmp_path):
    cluster = clusters.clusters_from_settings(_settings(node_images="local"), tmp_path, KIND_DIR)["old"]
    with pytest.raises(BackendError, match=r"has not been built here .* snakemake --cores 2 kind_node_images"):
        clusters.cluster_config(cluster)
    built = {
        "tag": "throttlelab/kind-node:old-0123456789ab",
        "image_id": "sha256:" + "e" * 64,
        "kind": "v0.30.0",
        "kubernetes": "v1.34.12",
        "runc": "runc-1.3.0",
        "suite": "bookworm",
        "key": "0123456789ab",
    }
    cluster.node_image_stamp.parent.mkdir(parents=True)
    cluster.node_image_stamp.write_text(json.dumps(built))
    config, facts = clusters.cluster_config(cluster)
    assert config == cluster.local_config and config.parent == cluster.directory
    data = yaml.safe_load(config.read_text())
    project = yaml.safe_load((KIND_DIR / "old.yaml").read_text())
    assert [n["image"] for n in data["nodes"]] == [built["tag"]] * 2
    assert [n["role"] for n in data["nodes"]] == [n["role"] for n in project["nodes"]]
    assert clusters.configured_images(config) == [built["tag"]] * 2
    assert facts == {
        "source": "local",
        "tag": built["tag"],
        "image_id": built["image_id"],
        "kind": "v0.30.0",
        "kubernetes": "v1.34.12",
        "runc": "runc-1.3.0",
        "debian": "bookworm",
        "key": built["key"],
    }
    with pytest.raises(BackendError, match=r"is not in this Docker engine .* --forcerun kind_node_image"):
        clusters.cluster_config(cluster, has_image=lambda ref: False)
    assert clusters.cluster_config(cluster, has_image=lambda ref: ref == built["image_id"])[1] == facts
    published = clusters.clusters_from_settings(_settings(), tmp_path, KIND_DIR)["old"]
    config, facts = clusters.cluster_config(published)
    assert config == KIND_DIR / "old.yaml" and facts["source"] == "published"
    assert facts["images"] == [clusters.NODE_IMAGES["old"]]


def test_published_with_no_registry_and_no_image_names_the_setting_that_works(tmp_path):
    found = clusters.clusters_from_settings(_settings(), tmp_path, KIND_DIR)
    problem = clusters.published_images_problem([found["new"]], lambda ref: False, lambda: False)
    assert "set kind.node_images to local" in problem and clusters.NODE_IMAGES["new"] in problem
    assert clusters.published_images_problem([found["new"]], lambda ref: True, lambda: False) is None
    assert clusters.published_images_problem([found["new"]], lambda ref: False, lambda: True) is None
    local = clusters.clusters_from_settings(_settings(node_images="local"), tmp_path, KIND_DIR)
    assert clusters.published_images_problem(list(local.values()), lambda ref: False, lambda: False) is None


def test_a_registry_that_does_not_resolve_is_unreachable():
    assert clusters.registry_reachable(("registry.invalid", 443), timeout_s=2) is False


def test_kind_commands_put_the_nodes_on_the_labs_own_network():
    env = clusters.kind_environment({"PATH": "/bin"})
    assert env == {"PATH": "/bin", "KIND_EXPERIMENTAL_DOCKER_NETWORK": clusters.KIND_NETWORK}


def test_a_stock_engine_on_a_root_without_every_capability_is_refused_naming_the_labs_engine():
    from throttlelab.host.facts import missing_capabilities

    problem = clusters.privileged_problem(["CAP_SYS_RESOURCE"], "runc")
    assert "lacks CAP_SYS_RESOURCE in its bounding set" in problem
    assert 'eval "$(.ci/start-kind-dockerd)"' in problem
    assert clusters.privileged_problem(["CAP_SYS_RESOURCE"], "capfilter") is None  # the lab's kind engine
    assert clusters.privileged_problem([], "runc") is None
    # this machine's own: the bounding set read from /proc, as the check before the jobs reads it
    status = "Name:\tx\nCapBnd:\t000001fffeffffff\n"
    assert missing_capabilities(status, 40) == ["CAP_SYS_RESOURCE"]
    assert missing_capabilities("CapBnd:\t000001ffffffffff\n", 40) == []
    assert missing_capabilities("CapBnd:\t0000000000000001\n", 1) == ["CAP_DAC_OVERRIDE"]


CAPFILTER = PROJECT / ".ci" / "runc-capfilter"


def _fake_runc(tmp_path):
    """A runc that records its arguments and the spec it was handed."""
    runc = tmp_path / "runc"
    runc.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > {tmp_path}/args\n'
        'for a in "$@"; do case "$prev" in --bundle|-b) cp "$a/config.json" '
        f'{tmp_path}/seen.json;; --process|-p) cp "$a" {tmp_path}/seen.json;; esac; prev=$a; done\n'
    )
    runc.chmod(0o755)
    return runc


def _capfilter(tmp_path, *args):
    import subprocess
    import sys

    env = {"PATH": "/usr/bin:/bin", "THROTTLELAB_RUNC": str(_fake_runc(tmp_path))}
    return subprocess.run([sys.executable, str(CAPFILTER), *args], env=env, capture_output=True, text=True)


def test_capfilter_leaves_out_what_the_bounding_set_lacks_and_runs_runc_with_the_same_arguments(tmp_path):
    from throttlelab.host.facts import missing_capabilities

    lacking = missing_capabilities()
    every = ["CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_SYS_RESOURCE"]
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    spec = {"process": {"args": ["sh"], "capabilities": {k: every for k in ("bounding", "effective", "permitted")}}}
    (bundle / "config.json").write_text(json.dumps(spec))
    proc = _capfilter(tmp_path, "--root", "/run/r", "create", "--bundle", str(bundle), "id1")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "args").read_text().split() == ["--root", "/run/r", "create", "--bundle", str(bundle), "id1"]
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["process"]["capabilities"]["bounding"] == [c for c in every if c not in lacking]
    assert seen["process"]["args"] == ["sh"]
    # exec: the process file
    process = tmp_path / "process.json"
    process.write_text(json.dumps({"args": ["cat"], "capabilities": {"effective": every}}))
    proc = _capfilter(tmp_path, "exec", "--process", str(process), "id1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "seen.json").read_text())["capabilities"]["effective"] == [
        c for c in every if c not in lacking
    ]
    # anything else is passed on untouched
    proc = _capfilter(tmp_path, "state", "id1")
    assert proc.returncode == 0 and (tmp_path / "args").read_text().split() == ["state", "id1"]


def test_a_failed_command_runs_its_clean_up_before_the_error_is_raised():
    done = []
    with pytest.raises(BackendError, match="false failed"):
        clusters._run(["false"], "false", 10, on_failure=lambda: done.append(1))
    assert done == [1]
    assert clusters._run(["true"], "true", 10, on_failure=lambda: done.append(2)) == "" and done == [1]


def test_a_clusters_node_image_in_words():
    """The environment's node_images text per cluster (the report's "Node image (<role> cluster)" rows)."""
    from throttlelab.backends.kind.kind_backend import node_image_text

    local = {
        "source": "local",
        "tag": "throttlelab-node:old-0e6dfe0ac307",
        "image_id": "sha256:0e6dfe0ac3070123456789",
        "kind": "v0.30.0",
        "kubernetes": "v1.34.12",
        "runc": "1.3.0",
        "debian": "bookworm",
    }
    assert node_image_text(local) == (
        "built here: throttlelab-node:old-0e6dfe0ac307 (sha256:0e6dfe0ac307), Kubernetes v1.34.12, runc 1.3.0, "
        "kind v0.30.0, Debian bookworm"
    )
    published = {"source": "published", "images": ["kindest/node:v1.34.0@sha256:7416a6"]}
    assert node_image_text(published) == "published: kindest/node:v1.34.0@sha256:7416a6"
    assert node_image_text({"source": "published", "images": []}).startswith("published (")
    assert node_image_text(None).startswith("not recorded")
