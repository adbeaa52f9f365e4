"""What the rules plan from the validated design (pure): the workflow's side of the package.

:func:`make_plan` loads the design (model/config.py) and leaves out what the backend cannot
express (model/coverage.py); the :class:`Plan` then answers every question a rule asks while
Snakemake builds its DAG: the raw logs of an experiment, the seeded measuring order as job
priorities (model/seeds.py), a variant's parameters, the vm backend's batch of one experiment, the
kind cluster of a variant, and the settings handed to the command line as one shell word.
rules/common.smk keeps only the input and param functions that call these, so all of it is tested
here (tests/model/test_plan.py) and not only through ``snakemake -n``.

Paths are relative to Snakemake's working directory, each model/results_layout.py's; the checkout's own
folders (``workload/``, ``cluster/``, ``config/``) are arguments.
"""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from throttlelab.model import calibration, seeds
from throttlelab.model import results_layout as layout
from throttlelab.model.builds import BUILDS
from throttlelab.model.config import Design, load_design
from throttlelab.model.coverage import CLUSTER_BACKENDS, untestable_variants
from throttlelab.model.runtime import KIND_ROLE_OF_RUNTIME, RUNTIME_OF_KIND_ROLE

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


def shell_word(value: Any) -> str:
    """A JSON value as one shell word, compact and with sorted keys (a param: a change reruns)."""
    return shlex.quote(json.dumps(value, sort_keys=True, separators=(",", ":")))


def workload_sources(workload_dir: Path) -> list[str]:
    """Every file the workload's Go build reads: a change to any of them rebuilds both binaries
    (podgate/ is a module of its own, built by the kind rules)."""
    root = Path(workload_dir)
    return sorted(
        str(p)
        for p in root.rglob("*")
        if p.is_file()
        and (p.suffix == ".go" or p.name == "go.mod")
        and not {"podgate", "podnet"} & set(p.relative_to(root).parts)
    )


def podnet_sources(podnet_dir: Path) -> list[str]:
    """workload/podnet/ (the kind node images' pod network): a change rebuilds it, then the node images."""
    return sorted(str(p) for p in Path(podnet_dir).rglob("*") if p.is_file() and not p.name.endswith("_test.go"))


def podgate_sources(podgate_dir: Path) -> list[str]:
    """workload/podgate/ (the start gate in the pods): a change rebuilds it, then the kind images."""
    return sorted(str(p) for p in Path(podgate_dir).rglob("*") if p.is_file() and not p.name.endswith("_test.go"))


def shell_prelude(project: Path | str, python: str, orchestrator_pid: int) -> str:
    """What every rule's shell starts with: strict mode, the package of this checkout first on the
    path, and `throttlelab` as a shell function running the package's command line
    (throttlelab/cli.py) in the interpreter that runs Snakemake. Rules then call
    `throttlelab SUBCOMMAND ...` and name no Python variable of the rules. Braces are doubled:
    Snakemake's shell.prefix() formats its text."""
    here = shlex.quote(str(project))
    text = (
        "set -euo pipefail; "
        f"export PYTHONPATH={here}${{PYTHONPATH:+:$PYTHONPATH}}; "
        f"export THROTTLELAB_PROJECT={here}; "
        # the runner's meter counts this process tree's CPU apart, as the orchestrator's
        f"export THROTTLELAB_ORCHESTRATOR_PID={orchestrator_pid}; "
        f'throttlelab() {{ {shlex.quote(python)} -m throttlelab "$@"; }}; '
    )
    return text.replace("{", "{{").replace("}", "}}")


def measuring_priorities(design: Design) -> dict[tuple[str, str, int], int]:
    """(experiment, variant, repeat) -> its place in the measuring order, highest first: the
    experiments in the profile's order, and inside each one its variants' repeats interleaved in a
    random order seeded by the config's seed (model/seeds.py, STATS.md §6), so drift over a run
    cannot masquerade as a difference between variants. Snakemake runs the ready job of highest
    priority first. The seed is in every raw log (config_seed)."""
    order = {}
    place = len(design.jobs())
    for name, exp in design.experiments.items():
        jobs = [(name, v, r) for v in exp.variants for r in range(exp.repeats)]
        for job in seeds.measuring_order(design.seed, name, jobs):
            order[job] = place
            place -= 1
    return order


@dataclass(frozen=True)
class Plan:
    """The design a run measures (less what its backend cannot express) and what the rules derive
    from it. ``left_out``: (experiment, variant) -> why it is not in this run."""

    design: Design
    left_out: Mapping[tuple[str, str], str]
    priorities: dict[tuple[str, str, int], int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "priorities", measuring_priorities(self.design))

    # -- the run ---------------------------------------------------------------------------------

    @property
    def backend(self) -> str:
        return self.design.backend

    @property
    def profile_name(self) -> str:
        """The profile's name in paths: a profile given as a file path is named by its stem."""
        return Path(self.design.profile).stem

    @property
    def experiments(self) -> list[str]:
        return list(self.design.experiments)

    def left_out_lines(self) -> list[str]:
        """One line per variant left out of this run, with its reason, sorted (printed while parsing)."""
        return [f"throttlelab: {e}/{v} {reason}" for (e, v), reason in sorted(self.left_out.items())]

    def left_out_arg(self) -> str:
        """The left-out variants as one shell word for `throttlelab findings --left-out`."""
        return shlex.quote(json.dumps({f"{e}/{v}": why for (e, v), why in sorted(self.left_out.items())}))

    def repeats(self, experiment: str | None) -> int:
        """The repeats of an experiment of this run; 0 for one the run does not hold."""
        exp = self.design.experiments.get(experiment)
        return exp.repeats if exp else 0

    # -- the experiments' jobs -------------------------------------------------------------------

    def raw_log(self, experiment: str, variant: str, repeat: int, backend: str | None = None) -> str:
        return layout.raw_log(backend or self.backend, experiment, variant, repeat)

    def raw_logs(self, experiment: str) -> list[str]:
        """Every raw log of one experiment, variant by variant, repeat by repeat."""
        exp = self.design.experiments[experiment]
        return [self.raw_log(experiment, variant, rep) for variant in exp.variants for rep in range(exp.repeats)]

    def all_raw_logs(self) -> list[str]:
        return [log for experiment in self.design.experiments for log in self.raw_logs(experiment)]

    # -- the calibration step (model/calibration.py) ----------------------------------------------

    def calibrated_experiments(self) -> list[str]:
        """The experiments of this run whose variants take a rate from a pilot run on this host first."""
        return list(self._calibrated)

    @functools.cached_property
    def _calibrated(self) -> tuple[str, ...]:
        if self.backend not in calibration.PILOT_BACKENDS:
            return ()
        return tuple(
            name
            for name, exp in self.design.experiments.items()
            if any(calibration.calibrated(spec) for spec in exp.variants.values())
        )

    def pilot_file(self, experiment: str) -> str:
        """An experiment's pilot (rule calibrate_service): its service's CPU per request on this host."""
        return layout.pilot(self.backend, experiment)

    def host_calibration_file(self) -> str | None:
        """The quiet host's floor (rule calibrate_host), where runs are metered and a calibration is asked for."""
        if self.backend not in calibration.METERED_BACKENDS or not self.design.disturbance.get("quiet_calibration_s"):
            return None
        return layout.host_calibration(self.backend)

    def pilot_inputs(self, experiment: str) -> list[str]:
        """A run's pilot: the experiment's, when its variants are calibrated; a new pilot reruns them."""
        return [self.pilot_file(experiment)] if experiment in self.calibrated_experiments() else []

    def pilot_spec(self, experiment: str) -> str:
        """The pilots' parameters as canonical JSON, a list (a param: editing them recalibrates)."""
        specs = list(self.design.experiments[experiment].variants.values())
        pilots = [p.to_dict() for p in calibration.pilot_specs(specs)]
        return json.dumps(pilots, sort_keys=True, separators=(",", ":"))

    def pilot_cluster_inputs(self, experiment: str) -> list[str]:
        """kind: the cluster of the experiment's first variant (the pilot runs its service there)."""
        first = next(iter(self.design.experiments[experiment].variants))
        return self.cluster_inputs(experiment, first)

    @staticmethod
    def calibration_args(pilot: Iterable[str], quiet: Iterable[str]) -> str:
        """The runner's --calibration and --host-calibration, from its inputs (none when absent)."""
        words = [f"--calibration {shlex.quote(str(p))}" for p in pilot]
        words += [f"--host-calibration {shlex.quote(str(q))}" for q in quiet]
        return " ".join(words)

    @property
    def calibration_priority(self) -> int:
        """Above every measured job: the pilots and the quiet host come first."""
        return len(self.priorities) + 1

    def priority(self, experiment: str, variant: str, repeat: int) -> int:
        """The job's place in the seeded measuring order (0 for a job outside the design)."""
        return self.priorities.get((experiment, variant, int(repeat)), 0)

    def variant_spec(self, experiment: str, variant: str) -> str:
        """The variant's parameters as canonical JSON; as a param, editing it reruns only it."""
        exp = self.design.experiments[experiment]
        if variant not in exp.variants:
            raise ValueError(f"{experiment} has no variant {variant!r} in profile {self.design.profile}")
        return exp.spec_json(variant)

    @property
    def local_node(self) -> bool:
        """kubernetes: {cluster: local}: the lab's own real node (rules/platform/real_node.smk, backends/node)."""
        return self.backend == "kubernetes" and self.design.kubernetes.get("cluster") == "local"

    @property
    def vm_node(self) -> bool:
        """vm: {node: kubernetes}: the real node inside each guest of the vm backend."""
        return self.backend == "vm" and self.design.vm.get("node") == "kubernetes"

    def images(self) -> list[str]:
        """What the experiments run from: the docker backend's image stamps, the real node's OCI
        archives and its cluster tools (on this host or in the vm backend's guests); none for the others."""
        if self.local_node or self.vm_node:
            return [*layout.node_image_archives(), layout.TOOLS_MANIFEST]
        return [layout.image_stamp(build) for build in BUILDS] if self.backend == "docker" else []

    def binary_args(self, binaries: Iterable[str]) -> str:
        """`--binary BUILD=PATH` for each build, the binaries given in BUILDS' order."""
        return " ".join(f"--binary {build}={path}" for build, path in zip(BUILDS, binaries))

    def node_cpus_arg(self) -> str:
        return f"--node-cpus {self.design.node_cpus}" if self.design.node_cpus else ""

    def backend_settings_arg(self) -> str:
        """The runner's --backend-settings: config.yaml's section of the kind or kubernetes backend."""
        section = {"kind": self.design.kind, "kubernetes": self.design.kubernetes}.get(self.backend)
        if not section:
            return ""
        return f"--backend-settings {shell_word(section)}"

    def batch_plan(self, experiment: str) -> str:
        """The vm backend's batch of one experiment, as one shell word: the runner options every job
        shares, then each job (variant, repeat, spec, raw log) in the seeded measuring order
        (`throttlelab vm-batch --plan`, experiments/batch.py)."""
        design = self.design
        exp = design.experiments[experiment]
        common = ["--runtime", design.runtime, "--seed", str(design.seed)]
        common += [f"--binary={build}={layout.binary_path(build)}" for build in BUILDS]
        common += ["--max-other-share", str(design.disturbance["max_other_share"])]
        common += ["--retries", str(design.disturbance["retries"])]
        if design.node_cpus:
            common += ["--node-cpus", design.node_cpus]
        jobs = sorted(
            ((v, r) for v in exp.variants for r in range(exp.repeats)),
            key=lambda job: -self.priorities[(experiment, *job)],
        )
        plan = {
            "common": common,
            "jobs": [
                {"variant": v, "repeat": r, "spec": exp.spec_json(v), "out": self.raw_log(experiment, v, r, "vm")}
                for v, r in jobs
            ],
        }
        return shell_word(plan)

    def vm_settings_arg(self) -> str:
        """config.yaml's vm section as one shell word (vcpus, memory, kernel, accel)."""
        return shell_word(self.design.vm)

    def cluster_tools_settings_arg(self) -> str:
        """config.yaml's cluster_tools section (cache folders) as one shell word."""
        return shell_word(self.design.cluster_tools)

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
        if self.backend != "kind":
            return []
        return layout.kind_cluster_files(self.variant_role(experiment, variant))

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

    @property
    def local_node_images(self) -> bool:
        """kind with kind.node_images local: the node images and kind binaries are built here."""
        return self.backend == "kind" and self.design.kind["node_images"] == "local"

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
        if self.backend not in CLUSTER_BACKENDS:
            raise ValueError(
                f"the smoke target is the smallest real-cluster test and runs on "
                f"{' or '.join(CLUSTER_BACKENDS)} only; this run's backend is {self.backend!r}: use "
                "`snakemake --cores 1 smoke --config backend=kind` (docs/KIND_SMOKE.md), or for this backend "
                "`snakemake --cores 1 report --config profile=ci`"
            )
        if self.local_node:
            return [*self.images(), *layout.binary_paths()]
        if self.backend != "kind":
            return []
        return layout.kind_cluster_files(KIND_ROLE_OF_RUNTIME[self.design.runtime])


def make_plan(
    config: dict[str, Any], config_dir: Path, cgroup_version: Callable[[], int], node_cpus: int | None = None
) -> Plan:
    """The plan of Snakemake's config: the validated design (a ConfigError names what is wrong)
    less the variants its backend cannot express. ``cgroup_version`` says this host's (kind's nodes
    share its kernel); it is asked only when the backend is kind. ``node_cpus``: this host's CPUs,
    all of which the real node's kubelet counts (kubernetes: {cluster: local}); on the vm backend
    with ``vm: {node: kubernetes}`` the node is the guest's, of vm.vcpus CPUs."""
    design = load_design(config, config_dir)
    vm_node = design.backend == "vm" and design.vm.get("node") == "kubernetes"
    left_out = untestable_variants(
        design.backend,
        {name: exp.variants for name, exp in design.experiments.items()},
        design.runtime,
        cgroup_version() if design.backend == "kind" else None,
        cluster="local" if vm_node else design.kubernetes.get("cluster"),
        node_cpus=design.vm.get("vcpus") if vm_node else node_cpus,
    )
    return Plan(design.without(left_out), left_out)
