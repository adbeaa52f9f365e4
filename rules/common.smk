# The rules' helpers: the plan, the shell prelude, wildcard constraints and the input and param
# functions. Each is a call into the package, unit-tested there: the jobs of the profile are
# throttlelab/model/plan.py's (PLAN), where every result lives throttlelab/model/results_layout.py's
# (layout), what the places to run need throttlelab/platform/platform_jobs.py's (PLATFORM), the
# checks before the first job throttlelab/experiments/preflight.py's. Parsing imports the pure model,
# the figure registry (standard library only) and host.facts' cgroup_version: no backend, no Docker or
# Kubernetes client, no plotting library is loaded to build the DAG.

import os
import re
import sys
from pathlib import Path

sys.path.insert(0, workflow.basedir)  # the package works from a plain checkout too

from throttlelab import snakemake_params, snakemake_scheduler

# Snakemake 9's scheduler loop arms a timer chain per finished job and ran ~22% of a CPU inside the
# measuring windows; this makes it wake only when a job ends (throttlelab/snakemake_scheduler.py).
snakemake_scheduler.install()
# Its params check imported pandas on every plan (0.6 s of a no-op run); the same check without it
# (throttlelab/snakemake_params.py).
snakemake_params.install()

# Each job starts Python afresh; where the environment forbids writing bytecode, each one compiled the
# package again (~40 ms a job, ~280 jobs a quick run): compile it once here (throttlelab/bytecode.py).
from throttlelab import bytecode

bytecode.compile_package(Path(workflow.basedir) / "throttlelab")

from throttlelab.figures.registry import FIGURES, figures_for
from throttlelab.host.facts import cgroup_version
from throttlelab.model import plan
from throttlelab.model import results_layout as layout
from throttlelab.model.builds import BUILDS
from throttlelab.platform import platform_jobs
from throttlelab.platform.tool_catalogue import PROJECT_NAMES as CLUSTER_PROJECTS
from throttlelab.platform.tool_catalogue import KIND_PROJECT_NAMES, NODE_PROJECT_NAMES
from throttlelab.platform.kind_node_recipe import BUILDER_REVISION as KIND_NODE_REVISION
from throttlelab.model.config import ConfigError
from throttlelab.model import look_file

try:
    PLAN = plan.make_plan(config, Path(workflow.basedir) / "config", cgroup_version, node_cpus=os.cpu_count())
except ConfigError as exc:
    sys.exit(f"throttlelab: bad configuration, nothing was run:\n{exc}")
for _line in PLAN.left_out_lines():
    print(_line, file=sys.stderr)
DESIGN = PLAN.design
PLATFORM = platform_jobs.PlatformPlan(DESIGN)
BACKEND = PLAN.backend
PROFILE_NAME = PLAN.profile_name

shell.executable("bash")
shell.prefix(plan.shell_prelude(workflow.basedir, sys.executable, os.getpid()))


wildcard_constraints:
    build="|".join(BUILDS),
    backend="[a-z]+",
    experiment="|".join(DESIGN.experiments),
    variant="[a-z0-9][a-z0-9-]*",
    rep="[0-9]+",
    project="|".join(re.escape(name) for name in CLUSTER_PROJECTS),


# The workload and its builds (rules/build.smk, rules/platform/kind_clusters.smk).
def workload_sources():
    return plan.workload_sources(Path(workflow.basedir) / "workload")


def podnet_sources():
    return platform_jobs.module_sources(Path(workflow.basedir) / "workload" / "podnet")


def kind_node_inputs(wildcards):
    return PLATFORM.kind_node_inputs(wildcards.role)


def kind_module_gomod(wildcards):
    """The go.mod pinning the kind release of a node image (the base's recipe is in that module)."""
    return str(Path(workflow.basedir) / "cluster" / platform_jobs.kind_node_projects(wildcards.role)[-1] / "go.mod")


def kind_node_tool_manifests(wildcards):
    """The cluster tools a kind node image is made of (rules/platform/kind_node.smk)."""
    return [layout.cluster_tool_manifest(project) for project in platform_jobs.kind_node_projects(wildcards.role)]


def podgate_sources():
    return platform_jobs.module_sources(Path(workflow.basedir) / "workload" / "podgate")


# The experiments (rules/experiments.smk).
def run_priority(wildcards):
    return PLAN.priority(wildcards.experiment, wildcards.variant, wildcards.rep)


def look_input(wildcards):
    """A look's input: its experiment's first stage."""
    return PLAN.raw_logs(wildcards.experiment, stage=1)


def look_priority(wildcards):
    return PLAN.look_priority(wildcards.experiment)


def look_fraction(wildcards):
    return PLAN.look_fraction(wildcards.experiment)


#: The look files of the experiments measured in two stages (docs/STATISTICS.md §6).
LOOK_FILES = [PLAN.look_file(e) for e in PLAN.looks]


def experiment_raw_logs(experiment, look=True):
    """The files the analysis reads of one experiment: its raw logs, and for one measured in two stages its
    first stage's, its look file (``look``), and the second stage's of the variants the look file says go on.
    The look is a checkpoint, so Snakemake lists these again when it has run; until then the decision of the
    look file on disk stands (a look whose first stage changed runs again first, its priority above the second
    stage's). Reading the file, not asking Snakemake whether the checkpoint is done, keeps the list the same on a
    rerun with nothing changed, which then runs nothing. The second stage's jobs are the same run_experiment jobs
    whatever the look decides."""
    if experiment not in PLAN.looks:
        return PLAN.raw_logs(experiment)
    path = PLAN.look_file(experiment)
    files = PLAN.raw_logs(experiment, stage=1) + ([path] if look else [])
    if Path(path).exists():
        files += PLAN.raw_logs(experiment, stage=2, variants=look_file.going_on(path))
    return files


def raw_logs(wildcards):
    """Every raw log the analysis reads, experiment by experiment (:func:`experiment_raw_logs`), without the look
    files."""
    return [log for experiment in DESIGN.experiments for log in experiment_raw_logs(experiment, look=False)]


def variant_spec(wildcards):
    return PLAN.variant_spec(wildcards.experiment, wildcards.variant)


def binary_args(wildcards, input):
    return PLAN.binary_args(input.binaries)


def node_cpus_arg(wildcards):
    return PLAN.node_cpus_arg()


def backend_settings_arg(wildcards):
    return PLAN.backend_settings_arg()


def pilot_input(wildcards):
    """The experiment's pilot (model/calibration.py), when its variants take their rates from one."""
    return PLAN.pilot_inputs(wildcards.experiment)


def quiet_input(wildcards):
    """The quiet host's floor. ancient(): a new calibration judges the runs after it, it does not rerun
    the finished ones (each raw log keeps the threshold it was judged by)."""
    quiet = PLAN.host_calibration_file()
    return [ancient(quiet)] if quiet else []


def calibration_args(wildcards, input):
    return PLAN.calibration_args(input.pilot, input.quiet)


def pilot_spec(wildcards):
    return PLAN.pilot_spec(wildcards.experiment)


def pilot_cluster_inputs(wildcards):
    return [ancient(f) for f in PLATFORM.pilot_cluster_inputs(wildcards.experiment)]


def cluster_inputs(wildcards):
    """kind: the variant's cluster with both images loaded. ancient(): once they exist, a
    recreated cluster or a reloaded image does not rerun a finished experiment."""
    return [ancient(f) for f in PLATFORM.cluster_inputs(wildcards.experiment, wildcards.variant)]


# kind (rules/platform/kind_clusters.smk) and the checks before the first job of a run.
def kind_settings_arg(wildcards):
    return PLATFORM.kind_settings_arg()


def jobs_to_run():
    """(rule, wildcards) of every job this invocation will run."""
    try:
        return [(job.rule.name, dict(job.wildcards_dict)) for job in workflow.dag.needrun_jobs()]
    except AttributeError:  # another Snakemake: check everything
        return [("create_cluster", {"role": r}) for r in ("new", "old")] + [("run_experiment", {})]


def backend_preflight():
    """onstart (never on a dry run): what the jobs about to run need; exits with every problem named."""
    from throttlelab.errors import BackendError
    from throttlelab.experiments import preflight

    try:
        preflight.check(DESIGN, jobs_to_run(), Path(workflow.basedir), Path.cwd())
    except BackendError as exc:
        sys.exit(f"throttlelab: {exc}\n(nothing was run)")


def stop_local_node():
    """onsuccess / onerror (rules/platform/real_node.smk): wait until the real node this Snakemake process used is down."""
    if not PLATFORM.local_node:
        return
    from throttlelab.platform.real_node import stop_nodes
    from throttlelab.errors import BackendError

    try:
        stop_nodes(os.getpid(), tell=lambda message: print(f"throttlelab: {message}", file=sys.stderr))
    except BackendError as exc:
        print(f"throttlelab: {exc}", file=sys.stderr)


# Params that name a folder of a rule's own input or output (so the folder follows the files).
def input_folder(key, levels=1):
    """A param function: the folder `levels` up from input `key` (its first file)."""

    def folder(wildcards, input):
        files = input[key]
        path = files if isinstance(files, str) else files[0]
        return str(Path(path).parents[levels - 1])

    return folder


def output_folder(key, levels=1):
    """A param function: the folder `levels` up from output `key`."""

    def folder(wildcards, output):
        return str(Path(output[key]).parents[levels - 1])

    return folder


# The figures (rules/report.smk): one job draws every figure of the profile
# (throttlelab/figures/registry.py, a light module read while parsing).
def profile_figures():
    """The registry's entries of the experiments this profile runs, in its order."""
    return figures_for(DESIGN.experiments)


def figure_tables(wildcards):
    """The tidy tables the profile's figures and their captions read (each once), named as
    `throttlelab figure --table NAME=PATH` takes them."""
    tables = {
        **dict(rules.parse_runs.output.items()),
        **dict(rules.compute_stats.output.items()),
        **dict(rules.evaluate_findings.output.items()),
    }
    needed = {name for entry in profile_figures() for name in entry.reads}
    return {name: path for name, path in tables.items() if name in needed}


def figure_category(wildcards):
    """The figure's section in Snakemake's report; `figure` is the wildcard of the folder's file pattern."""
    return FIGURES[wildcards.figure].category


def figure_args(wildcards):
    return " ".join(f"--figure {entry.name}" for entry in profile_figures())


def table_args(wildcards, input):
    return " ".join(f"--table {name}={path}" for name, path in input.items())


# The smoke test (rules/smoke.smk, docs/KIND_SMOKE.md): kind and kubernetes only.
def smoke_inputs(wildcards):
    return PLATFORM.smoke_inputs()


# The cluster tools (rules/platform/cluster_tools.smk, platform/tool_catalogue.py): one job per module of cluster/.
def cluster_module_files(wildcards):
    return platform_jobs.cluster_module_files(Path(workflow.basedir) / "cluster", wildcards.project)


def cluster_project_recipe(wildcards):
    return platform_jobs.cluster_project_recipe(wildcards.project)
