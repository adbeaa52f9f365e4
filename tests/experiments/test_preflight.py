"""The checks before the first job (experiments/preflight.py): what each backend's jobs need, asked
of the right tool, and nothing asked on a dry plan's backends that need nothing."""

from __future__ import annotations

import pytest

from conftest import PROJECT
from throttlelab.errors import BackendError
from throttlelab.experiments import preflight
from throttlelab.model.config import load_design


def _design(backend):
    return load_design({"backend": backend, "profile": "ci"}, PROJECT / "config")


@pytest.mark.parametrize(
    ("jobs", "need", "roles"),
    [
        ([("create_cluster", {"role": "old"}), ("run_experiment", {})], {"kind", "docker"}, {"old"}),
        ([("load_image", {"role": "new", "build": "go124mod"})], {"kind", "docker"}, {"new"}),
        ([("clean", {})], {"kind"}, {"new", "old"}),
        ([("build_kind_image", {"build": "go125mod"})], {"docker"}, set()),
        ([("smoke", {})], {"docker"}, set()),
        ([("kind_node_image", {"role": "old"})], {"docker"}, set()),  # it ends in `docker import`
        ([("render_report", {})], set(), set()),
    ],
)
def test_the_kind_jobs_about_to_run_say_which_tools_and_clusters_they_need(jobs, need, roles):
    assert preflight.kind_needs(jobs) == (need, roles)


def test_kind_asks_its_tools_what_the_jobs_need(monkeypatch, tmp_path):
    from throttlelab.platform import kind_clusters as clusters

    asked = []
    monkeypatch.setattr(
        clusters, "preflight_tools", lambda found, roles, need: asked.append((sorted(found), roles, need))
    )
    preflight.check(_design("kind"), [("create_cluster", {"role": "new"})], PROJECT, tmp_path)
    assert asked == [(["new", "old"], ["new"], {"kind", "docker"})]


def test_kubernetes_asks_the_cluster_only_before_an_experiment_or_the_smoke_test(monkeypatch, tmp_path):
    from throttlelab.backends import base

    made = []

    class Cluster:
        def preflight(self):
            raise BackendError("no cluster at the kubeconfig")

    monkeypatch.setattr(base, "make_backend", lambda *args: made.append(args) or Cluster())
    preflight.check(_design("kubernetes"), [("render_report", {})], PROJECT, tmp_path)
    assert made == []
    with pytest.raises(BackendError, match="no cluster"):
        preflight.check(_design("kubernetes"), [("run_experiment", {})], PROJECT, tmp_path)
    assert made[0][0] == "kubernetes"


def test_vm_checks_its_tools_only_when_a_batch_is_about_to_boot_a_guest(monkeypatch, tmp_path):
    from throttlelab.platform import vm_guest

    found = []
    monkeypatch.setattr(vm_guest, "find_tools", lambda settings: found.append(settings))
    monkeypatch.setattr(vm_guest, "choose_accel", lambda accel: "tcg")
    preflight.check(_design("vm"), [("render_report", {})], PROJECT, tmp_path)
    assert found == [] and not preflight.boots_a_guest([("render_report", {})])
    preflight.check(_design("vm"), [("run_batch_E1", {})], PROJECT, tmp_path)
    assert len(found) == 1


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_the_host_backends_need_nothing_before_the_first_job(backend, tmp_path):
    preflight.check(_design(backend), [("run_experiment", {}), ("clean", {})], PROJECT, tmp_path)
