"""What the places a run's jobs run on need (platform/platform_jobs.py): the kind cluster of each variant,
the images and cluster tools the experiments start from, the smoke target's inputs, and the settings and
inputs the platform's own jobs are handed."""

from __future__ import annotations

import json
import shlex

import pytest

from conftest import PROJECT
from throttlelab.model import plan
from throttlelab.model import results_layout as layout
from throttlelab.model.builds import BUILDS
from throttlelab.platform import platform_jobs
from throttlelab.platform.platform_jobs import PlatformPlan

CONFIG = PROJECT / "config"


def _platform(backend="local", profile="ci", cgroup_version=2, **config) -> PlatformPlan:
    p = plan.make_plan({"backend": backend, "profile": profile, **config}, CONFIG, lambda: cgroup_version)
    return PlatformPlan(p.design)


def test_the_backend_decides_the_images_the_experiments_start_from():
    assert _platform("local").images() == [] and _platform("kubernetes").images() == []
    assert _platform("docker").images() == [f"results/build/{b}/image.json" for b in BUILDS]
    local_node = _platform("kubernetes", kubernetes={"cluster": "local"})
    assert local_node.local_node and not local_node.vm_node
    assert local_node.images() == [f"results/node/images/{b}.tar" for b in BUILDS] + [
        "results/cluster-tools/tools.json"
    ]


def test_the_real_node_in_a_vm_guest_needs_the_nodes_images_and_the_guests_size():
    """vm: {node: kubernetes}: each batch needs the real node's OCI archives and cluster tools."""
    plain = _platform("vm")
    assert not plain.vm_node and plain.images() == []
    guest = _platform("vm", vm={"node": "kubernetes", "vcpus": 10})
    assert guest.vm_node and not guest.local_node
    assert guest.images() == [layout.node_image_archive(b) for b in BUILDS] + [layout.TOOLS_MANIFEST]
    assert json.loads(shlex.split(guest.vm_settings_arg())[0]) == guest.design.vm
    assert json.loads(shlex.split(guest.vm_settings_arg())[0])["node"] == "kubernetes"


def test_kind_runs_a_variant_on_the_cluster_of_its_runtime():
    p = _platform("kind", profile="quick")
    assert p.variant_role("E4", "runc-old") == "old" and p.variant_role("E1", "all-limits") == "new"
    assert p.kind_roles() == ["new", "old"] and p.lab_kind_roles() == ["new", "old"]
    assert p.cluster_inputs("E4", "runc-old") == [
        "results/kind/clusters/old/kubeconfig",
        "results/kind/clusters/old/cluster.json",
        *(f"results/kind/clusters/old/images/{b}.json" for b in BUILDS),
    ]
    first = next(iter(p.design.experiments["E4"].variants))
    assert p.pilot_cluster_inputs("E4") == p.cluster_inputs("E4", first)
    assert _platform("local").cluster_inputs("E1", "all-limits") == []
    # the clusters' settings, and the tool cache's (under node_images local the kind binaries are there)
    assert set(json.loads(shlex.split(p.kind_settings_arg())[0])) == {*platform_jobs.KIND_CLUSTER_KEYS, "cluster_tools"}


def test_a_kind_cluster_waits_for_its_node_image_only_when_it_is_built_here():
    published = _platform("kind")
    assert not published.local_node_images and published.kind_node_inputs("new") == []
    local = _platform("kind", kind={"node_images": "local"})
    assert local.local_node_images and local.kind_node_inputs("old") == ["results/kind/node-images/old.json"]
    settings = json.loads(shlex.split(local.kind_node_settings_arg())[0])
    assert settings == {
        "cluster_tools": local.design.cluster_tools,
        "kind": {"debian_mirror": local.design.kind["debian_mirror"]},
    }
    assert json.loads(shlex.split(local.cluster_tools_settings_arg())[0]) == local.design.cluster_tools


def test_the_smoke_target_is_refused_off_a_cluster_and_needs_kinds_cluster_on_kind():
    with pytest.raises(ValueError, match="runs on kind or kubernetes only; this run's backend is 'local'"):
        _platform("local").smoke_inputs()
    assert _platform("kubernetes").smoke_inputs() == []
    # the real node starts from this project's builds: the smoke target builds them first
    local_node = _platform("kubernetes", kubernetes={"cluster": "local"}).smoke_inputs()
    assert "results/cluster-tools/tools.json" in local_node
    assert {"results/node/images/go124mod.tar", "results/build/go124mod/cpulab"} <= set(local_node)
    assert _platform("kind").smoke_inputs()[0] == "results/kind/clusters/new/kubeconfig"


def test_a_module_built_on_its_own_is_every_file_of_its_folder_but_its_tests(tmp_path):
    for name in ("main.go", "go.mod", "main_test.go", "internal/x.go"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert platform_jobs.module_sources(tmp_path) == [str(tmp_path / n) for n in ("go.mod", "internal/x.go", "main.go")]


def test_a_cluster_tool_projects_job_reads_its_module_and_its_recipe():
    name = "etcd"
    files = platform_jobs.cluster_module_files(PROJECT / "cluster", name)
    assert files == {"gomod": str(PROJECT / "cluster/etcd/go.mod"), "gosum": str(PROJECT / "cluster/etcd/go.sum")}
    recipe = platform_jobs.cluster_project_recipe(name)
    assert len(recipe) == 16 and recipe == platform_jobs.cluster_project_recipe(name)
    assert layout.cluster_tool_manifest(name) == "results/cluster-tools/etcd.json"
