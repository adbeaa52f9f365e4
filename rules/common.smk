# Shared helpers of the rules: the validated design, paths and input functions.

import sys
from pathlib import Path

sys.path.insert(0, workflow.basedir)  # the package works from a plain checkout too

from throttlelab.config import ConfigError, load_design
from throttlelab.workload_build import VARIANTS as BUILDS

try:
    DESIGN = load_design(config)
except ConfigError as exc:
    sys.exit(f"throttlelab: bad configuration, nothing was run:\n{exc}")

if DESIGN.backend != "local":
    sys.exit(
        f"throttlelab: backend {DESIGN.backend!r} is not available yet in this version; "
        "use --config backend=local"
    )

BACKEND = DESIGN.backend
# Every rule that runs Python calls the interpreter running Snakemake, with the package on its path.
PY = f"PYTHONPATH={workflow.basedir}${{PYTHONPATH:+:$PYTHONPATH}} {sys.executable}"


wildcard_constraints:
    build="|".join(BUILDS),
    backend="[a-z]+",
    experiment="|".join(DESIGN.experiments),
    variant="[a-z0-9][a-z0-9-]*",
    rep="[0-9]+",


def workload_sources():
    """Every file the Go build reads: a change to any of them rebuilds both binaries."""
    root = Path(workflow.basedir) / "workload"
    return sorted(str(p) for p in root.rglob("*") if p.is_file() and (p.suffix == ".go" or p.name == "go.mod"))


def binary_path(build):
    return f"results/build/{build}/cpulab"


def raw_logs(experiment):
    exp = DESIGN.experiments[experiment]
    return [
        f"results/{BACKEND}/raw/{experiment}/{variant}/rep{rep}.jsonl"
        for variant in exp.variants
        for rep in range(exp.repeats)
    ]


def variant_spec(wildcards):
    """The variant's parameters as canonical JSON; as a param, editing it reruns only it."""
    exp = DESIGN.experiments[wildcards.experiment]
    if wildcards.variant not in exp.variants:
        raise ValueError(f"{wildcards.experiment} has no variant {wildcards.variant!r} in profile {DESIGN.profile}")
    return exp.spec_json(wildcards.variant)


def binary_args(wildcards, input):
    return " ".join(f"--binary {build}={path}" for build, path in zip(BUILDS, input.binaries))


def node_cpus_arg(wildcards):
    return f"--node-cpus {DESIGN.node_cpus}" if DESIGN.node_cpus else ""


# Report helpers (rules/report.smk); functions live here so rule files hold rules only.
def figure_path(name):
    return f"results/report/figures/{name}.svg"


def repeats_of(experiment):
    exp = DESIGN.experiments.get(experiment)
    return exp.repeats if exp else 0


def table_args(wildcards, input):
    """--table NAME=PATH for every named input: the plot CLI reads what the rule declares."""
    return " ".join(f"--table {name}={path}" for name, path in input.items())


def profile_figures():
    """The figures of the experiments this profile runs (a profile may leave some out).
    Kept here rather than read from throttlelab.plots, whose matplotlib import would slow every parse.
    """
    by_experiment = {
        "E2a": [rules.plot_completion_times, rules.plot_cgroup_counters],
        "E3": [rules.plot_gomaxprocs],
        "S1": [rules.plot_throttling],
    }
    return [
        r.output.svg
        for e, plots in by_experiment.items()
        if e in DESIGN.experiments
        for r in plots
    ]
