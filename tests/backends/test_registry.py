"""The backend registry: a backend made by name, its module imported only then."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROJECT
from throttlelab.backends.base import BACKENDS, BackendError, make_backend


def test_every_backend_has_a_module_with_a_factory():
    assert set(BACKENDS) == {"local", "docker", "kind", "kubernetes", "vm"}
    local = make_backend("local", {"go124mod": "/x/cpulab"}, "runc-old")
    assert local.name == "local" and local.runtime == "runc-old" and local.binaries == {"go124mod": Path("/x/cpulab")}
    assert make_backend("docker", {}, "runc-new").name == "docker"
    assert make_backend("vm", {}, "runc-new").name == "vm"


def test_the_config_schema_offers_exactly_the_backends_of_the_registry():
    # the schema is the one check of --config backend=NAME (the rules plan nothing else)
    import yaml

    schema = yaml.safe_load((PROJECT / "config" / "config.schema.yaml").read_text())
    assert schema["properties"]["backend"]["enum"] == list(BACKENDS)


def test_the_vm_backend_on_the_host_says_it_runs_in_its_guest(monkeypatch):
    monkeypatch.delenv("THROTTLELAB_VM_GUEST", raising=False)
    with pytest.raises(BackendError, match="the vm backend runs inside its guest: `throttlelab vm-batch`"):
        make_backend("vm", {}, "runc-new").preflight()


def test_the_vm_backend_says_where_it_measured(monkeypatch):
    monkeypatch.setenv("THROTTLELAB_VM_GUEST", '{"accel": "tcg", "vcpus": 10, "memory": "4G", "kernel": "/boot/k"}')
    backend = make_backend("vm", {}, "runc-new")
    env = backend.environment()
    assert env["backend"] == "vm" and env["vm"] == {
        "accel": "tcg",
        "cpu_emulated": True,
        "vcpus": 10,
        "memory": "4G",
        "kernel_image": "/boot/k",
        "kubernetes": False,  # vm.node cgroups: the local backend in the guest
    }
    assert any("emulated (TCG)" in note for note in backend.capabilities().notes)


def test_a_backend_without_its_settings_or_an_unknown_name_says_what_to_do():
    with pytest.raises(BackendError, match="set kubernetes.kubeconfig, kubernetes.worker_node, kubernetes.load_node"):
        make_backend("kubernetes", {}, "runc-new", {})
    with pytest.raises(BackendError, match="kind backend: no settings given"):
        make_backend("kind", {}, "runc-new", None)
    with pytest.raises(BackendError, match="backend 'podman' is not implemented; use one of local, docker, kind"):
        make_backend("podman", {}, "runc-new")


def test_naming_a_backend_loads_no_other_backend():
    code = (
        "import sys; from throttlelab.backends.base import make_backend; make_backend('local', {}, 'runc-new'); "
        "print(sorted(m for m in sys.modules if m.startswith(('throttlelab.backends', 'docker', 'kubernetes'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT, check=True).stdout
    assert out.strip() == str(
        sorted(
            [
                "throttlelab.backends",
                "throttlelab.backends.base",
                "throttlelab.backends.cgroup_tree",
                "throttlelab.backends.local",
            ]
        )
    )


def test_a_burst_budget_or_period_a_backend_cannot_write_is_refused_with_the_reason():
    """X1/X2 (docs/EXPERIMENTS.md): never run with the default silently."""
    from throttlelab.backends.base import refuse_knobs
    from throttlelab.model.placement import Container, Node, Pod

    burst = Node("node", (Pod("p", (Container("c", ("burst",), limit_milli=250, burst_us=25_000),)),))
    period = Node("node", (Pod("p", (Container("c", ("burst",), limit_milli=250),)),), period_us=20_000)
    for backend in ("docker", "kind", "kubernetes"):
        with pytest.raises(BackendError, match="burst budget"):
            refuse_knobs(backend, burst)
    for backend in ("kind", "kubernetes"):
        with pytest.raises(BackendError, match="cpuCFSQuotaPeriod"):
            refuse_knobs(backend, period)
    refuse_knobs("docker", period)  # --cpu-period
    refuse_knobs("local", burst)
    refuse_knobs("local", period)
