"""The jobs of a profile (pure): what a run measures and what each of its jobs is handed.

:func:`make_plan` loads the design (model/config.py) and leaves out what the backend cannot
express (model/coverage.py); the :class:`Plan` then answers what runs: the raw logs of each
experiment, the seeded measuring order as job priorities (model/seeds.py), a variant's parameters,
the calibration step's pilots before them, the vm backend's batch of one experiment, and the
runner's settings as shell words. Where each file lives is model/results_layout.py's; what the
places to run need (kind's clusters, the node images, the cluster tools, the vm guests) is
platform/platform_jobs.py's. rules/common.smk keeps only the input and param functions that call
these, so all of it is tested here (tests/model/test_plan.py) and not only through ``snakemake -n``.
"""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from throttlelab.model import calibration, seeds
from throttlelab.model import results_layout as layout
from throttlelab.model.builds import BUILDS
from throttlelab.model.config import Design, load_design
from throttlelab.model.coverage import untestable_variants


def shell_word(value: Any) -> str:
    """A JSON value as one shell word, compact and with sorted keys (a param: a change reruns)."""
    return shlex.quote(json.dumps(value, sort_keys=True, separators=(",", ":")))


def workload_sources(workload_dir: Path) -> list[str]:
    """Every file the workload's Go build reads: a change to any of them rebuilds both binaries
    (podgate/ and podnet/ are modules of their own: platform/platform_jobs.py's module_sources)."""
    root = Path(workload_dir)
    return sorted(
        str(p)
        for p in root.rglob("*")
        if p.is_file()
        and (p.suffix == ".go" or p.name == "go.mod")
        and not {"podgate", "podnet"} & set(p.relative_to(root).parts)
    )


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


def real_node_on_host(design: Design) -> bool:
    """kubernetes: {cluster: local}: the lab's own real node on this host (backends/node)."""
    return design.backend == "kubernetes" and design.kubernetes.get("cluster") == "local"


def real_node_in_guest(design: Design) -> bool:
    """vm: {node: kubernetes}: the real node inside each guest of the vm backend."""
    return design.backend == "vm" and design.vm.get("node") == "kubernetes"


def measuring_priorities(design: Design) -> dict[tuple[str, str, int], int]:
    """(experiment, variant, repeat) -> its place in the measuring order, highest first: the
    experiments in the profile's order, and inside each one randomized complete blocks, repeat k of every
    variant in block k, in an order seeded by the config's seed (model/seeds.py, docs/STATISTICS.md §6), so drift
    over a run cannot masquerade as a difference between variants. Snakemake runs the ready job of highest
    priority first. The seed is in every raw log (config_seed)."""
    order = {}
    place = len(design.jobs())
    for name, exp in design.experiments.items():
        jobs = [(name, v, r) for v, r in exp.runs()]
        for job in seeds.measuring_order(design.seed, name, jobs):
            order[job] = place
            place -= 1
    return order


@dataclass(frozen=True)
class Plan:
    """The jobs of a profile: the design a run measures (less what its backend cannot express) and
    what each job of it is handed. ``left_out``: (experiment, variant) -> why it is not in this run."""

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

    # -- the experiments' jobs -------------------------------------------------------------------

    def raw_log(self, experiment: str, variant: str, repeat: int) -> str:
        return layout.raw_log(self.backend, experiment, variant, repeat)

    def raw_logs(self, experiment: str, stage: int | None = None, variants: Collection[str] | None = None) -> list[str]:
        """Every raw log of one experiment, variant by variant, repeat by repeat (``stage``: only those measured
        before its first look, 1, or after it, 2; ``variants``: only theirs)."""
        return [
            self.raw_log(experiment, v, r)
            for v, r in self.design.experiments[experiment].runs(stage)
            if variants is None or v in variants
        ]

    @property
    def looks(self) -> list[str]:
        """The experiments measured in two stages, a look between them (docs/STATISTICS.md §6). The vm backend
        measures an experiment in one guest, so it looks once, after every run."""
        if self.backend == "vm":
            return []
        return [name for name, exp in self.design.experiments.items() if exp.first_look is not None]

    def look_file(self, experiment: str) -> str:
        return layout.LOOK.format(backend=self.backend, experiment=experiment)

    def look_priority(self, experiment: str) -> int:
        """The look runs as soon as its first stage is measured: just below that stage's last job, above its
        second stage and every later experiment."""
        return min(self.priority(experiment, v, r) for v, r in self.design.experiments[experiment].runs(1))

    def look_fraction(self, experiment: str) -> float:
        return self.design.experiments[experiment].look_fraction

    def all_raw_logs(self) -> list[str]:
        return [log for experiment in self.design.experiments for log in self.raw_logs(experiment)]

    def priority(self, experiment: str, variant: str, repeat: int) -> int:
        """The job's place in the seeded measuring order (0 for a job outside the design)."""
        return self.priorities.get((experiment, variant, int(repeat)), 0)

    def variant_spec(self, experiment: str, variant: str) -> str:
        """The variant's parameters as canonical JSON; as a param, editing it reruns only it."""
        exp = self.design.experiments[experiment]
        if variant not in exp.variants:
            raise ValueError(f"{experiment} has no variant {variant!r} in profile {self.design.profile}")
        return exp.spec_json(variant)

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

    def host_calibration_file(self) -> str | None:
        """The quiet host's floor (rule calibrate_host), where runs are metered and a calibration is asked for."""
        if self.backend not in calibration.METERED_BACKENDS or not self.design.disturbance.get("quiet_calibration_s"):
            return None
        return layout.host_calibration(self.backend)

    def pilot_inputs(self, experiment: str) -> list[str]:
        """A run's pilot: the experiment's, when its variants are calibrated; a new pilot reruns them."""
        return [layout.pilot(self.backend, experiment)] if experiment in self.calibrated_experiments() else []

    def pilot_spec(self, experiment: str) -> str:
        """The pilots' parameters as canonical JSON, a list (a param: editing them recalibrates)."""
        specs = list(self.design.experiments[experiment].variants.values())
        pilots = [p.to_dict() for p in calibration.pilot_specs(specs)]
        return json.dumps(pilots, sort_keys=True, separators=(",", ":"))

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

    # -- what the runner is handed ---------------------------------------------------------------

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
        jobs = sorted(exp.runs(), key=lambda job: -self.priorities[(experiment, *job)])
        plan = {
            "common": common,
            "jobs": [
                {"variant": v, "repeat": r, "spec": exp.spec_json(v), "out": self.raw_log(experiment, v, r)}
                for v, r in jobs
            ],
        }
        return shell_word(plan)


def make_plan(
    config: dict[str, Any], config_dir: Path, cgroup_version: Callable[[], int], node_cpus: int | None = None
) -> Plan:
    """The plan of Snakemake's config: the validated design (a ConfigError names what is wrong)
    less the variants its backend cannot express. ``cgroup_version`` says this host's (kind's nodes
    share its kernel); it is asked only when the backend is kind. ``node_cpus``: this host's CPUs,
    all of which the real node's kubelet counts (kubernetes: {cluster: local}); on the vm backend
    with ``vm: {node: kubernetes}`` the node is the guest's, of vm.vcpus CPUs."""
    design = load_design(config, config_dir)
    in_guest = real_node_in_guest(design)
    left_out = untestable_variants(
        design.backend,
        {name: exp.variants for name, exp in design.experiments.items()},
        design.runtime,
        cgroup_version() if design.backend == "kind" else None,
        cluster="local" if in_guest else design.kubernetes.get("cluster"),
        node_cpus=design.vm.get("vcpus") if in_guest else node_cpus,
    )
    return Plan(design.without(left_out), left_out)
