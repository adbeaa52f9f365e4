"""What the places a run's jobs run on need from the package: kind's clusters and their node images, the
real node's images and cluster tools, the vm guests. :class:`PlatformPlan` answers it for a run's design
(which cluster a variant runs on, which images and tools the experiments need, the settings each platform
job is handed); the functions below give the inputs and params that make a changed pin or recipe rerun
exactly the jobs it affects (rules/platform/)."""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from throttlelab.model import results_layout as layout
from throttlelab.model.builds import BUILDS
from throttlelab.model.config import Design
from throttlelab.model.coverage import CLUSTER_BACKENDS
from throttlelab.model.plan import real_node_in_guest, real_node_on_host, shell_word
from throttlelab.model.runtime import KIND_ROLE_OF_RUNTIME, RUNTIME_OF_KIND_ROLE
from throttlelab.platform import kind_node_recipe
from throttlelab.platform.tool_catalogue import project as cluster_project

#: The kind settings that define the clusters (binaries, releases, names): a changed pod timeout or
#: namespace must not rerun the cluster jobs.
KIND_CLUSTER_KEYS = (
    "binary",
    "release",
    "old_binary",
    "old_release",
    "new_cluster",
    "old_cluster",
    "node_images",
    "debian_mirror",
)


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


def module_sources(module_dir: Path) -> list[str]:
    """Every file of a Go module of the workload's folder built on its own, its tests aside: podgate/
    (the start gate in the pods, in the kind images and the real node's) and podnet/ (the kind node
    images' pod network). A change to any of them rebuilds it, then the images made with it."""
    return sorted(str(p) for p in Path(module_dir).rglob("*") if p.is_file() and not p.name.endswith("_test.go"))


@dataclass(frozen=True)
class PlatformPlan:
    """What a run's places to run need, for its design (less what its backend cannot express): the
    kind cluster of each variant, the images and cluster tools its experiments start from, and the
    settings the jobs that provision them are handed."""

    design: Design

    @property
    def local_node(self) -> bool:
        """kubernetes: {cluster: local}: the lab's own real node (rules/platform/real_node.smk, backends/node)."""
        return real_node_on_host(self.design)

    @property
    def vm_node(self) -> bool:
        """vm: {node: kubernetes}: the real node inside each guest of the vm backend."""
        return real_node_in_guest(self.design)

    @property
    def local_node_images(self) -> bool:
        """kind with kind.node_images local: the node images and kind binaries are built here."""
        return self.design.backend == "kind" and self.design.kind["node_images"] == "local"

    def images(self) -> list[str]:
        """What the experiments run from: the docker backend's image stamps, the real node's OCI
        archives and its cluster tools (on this host or in the vm backend's guests); none for the others."""
        if self.local_node or self.vm_node:
            return [*layout.node_image_archives(), layout.TOOLS_MANIFEST]
        return [layout.image_stamp(build) for build in BUILDS] if self.design.backend == "docker" else []

    # -- kind's clusters -------------------------------------------------------------------------

    def variant_role(self, experiment: str, variant: str) -> str:
        """The kind cluster a variant runs on: that of its runtime conversion (runc-old variants,
        E10 and E4 runc-old, on the old one)."""
        spec = self.design.experiments[experiment].variants[variant]
        return KIND_ROLE_OF_RUNTIME[spec.runtime or self.design.runtime]

    def kind_roles(self) -> list[str]:
        """The kind clusters this run's experiments need."""
        return sorted({self.variant_role(e, v) for e, exp in self.design.experiments.items() for v in exp.variants})

    @staticmethod
    def lab_kind_roles() -> list[str]:
        """The lab's two kind clusters (new runc, old runc), which `create_clusters` makes whatever the profile
        leaves out: on a 2-CPU cgroup v1 host no variant of the old cluster can run (E10 pins, E4's pods do not
        fit), yet a job still pauses it, and the lab is its two clusters."""
        return sorted(RUNTIME_OF_KIND_ROLE)

    def cluster_inputs(self, experiment: str, variant: str) -> list[str]:
        """kind: the files of the variant's cluster with both images loaded; none elsewhere."""
        if self.design.backend != "kind":
            return []
        return layout.kind_cluster_files(self.variant_role(experiment, variant))

    def pilot_cluster_inputs(self, experiment: str) -> list[str]:
        """kind: the cluster of the experiment's first variant (the pilot runs its service there)."""
        first = next(iter(self.design.experiments[experiment].variants))
        return self.cluster_inputs(experiment, first)

    def kind_node_inputs(self, role: str) -> list[str]:
        """What creating a kind cluster needs beyond its config: the node image built here (local)."""
        return [layout.kind_node_stamp(role)] if self.local_node_images else []

    def smoke_inputs(self) -> list[str]:
        """What `throttlelab smoke` needs: kind, the cluster of the configured runtime with both
        images loaded; the real node (kubernetes: {cluster: local}), its cluster tools, the
        workload's OCI archives and binaries (a pinned load generator runs on this host); an existing
        cluster, nothing of this project. Any other backend
        is refused, with what to do instead (a ValueError: Snakemake shows it when the smoke target
        is asked for)."""
        backend = self.design.backend
        if backend not in CLUSTER_BACKENDS:
            raise ValueError(
                f"the smoke target is the smallest real-cluster test and runs on "
                f"{' or '.join(CLUSTER_BACKENDS)} only; this run's backend is {backend!r}: use "
                "`snakemake --cores 1 smoke --config backend=kind` (docs/KIND_SMOKE.md), or for this backend "
                "`snakemake --cores 1 report --config profile=ci`"
            )
        if self.local_node:
            return [*self.images(), *layout.binary_paths()]
        if backend != "kind":
            return []
        return layout.kind_cluster_files(KIND_ROLE_OF_RUNTIME[self.design.runtime])

    # -- the settings the platform's jobs are handed ---------------------------------------------

    def kind_settings_arg(self) -> str:
        """The kind settings that define the clusters (KIND_CLUSTER_KEYS) and the tool cache's (under
        node_images local the kind binaries are the cache's), as one shell word."""
        settings = {k: self.design.kind[k] for k in KIND_CLUSTER_KEYS}
        settings["cluster_tools"] = self.design.cluster_tools
        return shlex.quote(json.dumps(settings, sort_keys=True))

    def kind_node_settings_arg(self) -> str:
        """What the kind node image jobs read: the tool cache's settings and the kind section's mirror."""
        return shell_word(
            {"cluster_tools": self.design.cluster_tools, "kind": {"debian_mirror": self.design.kind["debian_mirror"]}}
        )

    def cluster_tools_settings_arg(self) -> str:
        """config.yaml's cluster_tools section (cache folders) as one shell word."""
        return shell_word(self.design.cluster_tools)

    def vm_settings_arg(self) -> str:
        """config.yaml's vm section as one shell word (vcpus, memory, kernel, accel): the guests' size."""
        return shell_word(self.design.vm)
