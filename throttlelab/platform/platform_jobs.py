"""What the platform's Snakemake jobs need from the package: the inputs and params that make a changed pin
or recipe rerun exactly the jobs it affects (rules/platform/cluster_tools.smk, rules/platform/kind_node.smk)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from throttlelab.platform import kind_node_recipe
from throttlelab.platform.tool_catalogue import project as cluster_project


def cluster_project_recipe(project: str) -> str:
    """A digest of the project's catalogue row (packages, tags, linker flags): editing how a tool is
    built reruns its job, which rebuilds exactly the binaries whose build key changed."""
    return hashlib.sha256(repr(cluster_project(project)).encode()).hexdigest()[:16]


def cluster_module_files(cluster_dir: Path, project: str) -> dict[str, str]:
    """The go.mod and go.sum of a project's folder under cluster/: a changed pin reruns its job."""
    folder = Path(cluster_dir) / cluster_project(project).folder
    return {"gomod": str(folder / "go.mod"), "gosum": str(folder / "go.sum")}


def kind_node_projects(role: str) -> list[str]:
    """The cluster tools projects (their jobs) the kind node image of ``role`` is made of."""
    return kind_node_recipe.node_projects(role)
