"""What the jobs about to run need from this host, checked before the first of them.

Snakemake's ``onstart`` (rules/experiments.smk; never on a dry run) hands :func:`check` the jobs it
is about to run as (rule name, wildcards); a missing tool or an unreachable cluster is one
BackendError naming every problem and its fix, before any job starts:

- vm: QEMU, virtme-ng, a static busybox and the guest kernel, and the accelerator asked for,
  when a batch (``run_batch_<experiment>``) is about to boot a guest;
- kind: the kind binaries and the Docker engine the cluster, image and experiment jobs use
  (:func:`kind_needs`), and the clusters' state;
- kubernetes: the cluster itself (its kubeconfig, context and nodes), before an experiment or the
  smoke test;
- local and docker: nothing here (the runner's own preflight checks them).

The backends' libraries are imported only when their backend is checked, so a vm run never loads
the Kubernetes client.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from throttlelab.model.config import Design

Job = tuple[str, Mapping[str, str]]


def kind_needs(jobs: Iterable[Job]) -> tuple[set[str], set[str]]:
    """The tools (kind, docker) and the cluster roles (new, old) the kind jobs about to run need."""
    jobs = list(jobs)
    names = {name for name, _ in jobs}
    need: set[str] = set()
    roles: set[str] = set()
    if names & {"create_cluster", "load_image"}:
        need |= {"kind", "docker"}
        roles |= {w["role"] for _, w in jobs if "role" in w}
    if names & {"clean"}:
        need.add("kind")
        roles |= {"new", "old"}
    if names & {"build_kind_image", "run_experiment", "smoke", "kind_node_image"}:
        need.add("docker")
    return need, roles


def boots_a_guest(jobs: Iterable[Job]) -> bool:
    """Whether a vm batch is about to run (each boots a guest)."""
    return any(name.startswith("run_batch_") for name, _ in jobs)


def check(design: Design, jobs: Iterable[Job], project: Path, workdir: Path) -> None:
    """Check what ``jobs`` need on ``design.backend``; raises BackendError with every problem.
    ``project``: the checkout (config/kind/ holds the clusters' configs); ``workdir``: Snakemake's
    working directory (results/kind/clusters/ under it)."""
    jobs = list(jobs)
    if design.backend == "vm":
        if boots_a_guest(jobs):
            from throttlelab.platform.vm_guest import VmSettings, choose_accel, find_tools

            settings = VmSettings.from_mapping(design.vm)
            find_tools(settings)
            choose_accel(settings.accel)
    elif design.backend == "kind":
        from throttlelab.platform.kind_clusters import clusters_from_settings, preflight_tools

        need, roles = kind_needs(jobs)
        clusters = clusters_from_settings(design.kind, Path(workdir), Path(project) / "config" / "kind")
        preflight_tools(clusters, sorted(roles), need)
    elif design.backend == "kubernetes" and design.kubernetes.get("cluster") != "local":
        # the real node (kubernetes: {cluster: local}) starts with its first job
        if {name for name, _ in jobs} & {"run_experiment", "smoke"}:
            from throttlelab.backends.base import make_backend

            make_backend("kubernetes", {}, design.runtime, design.kubernetes).preflight()
