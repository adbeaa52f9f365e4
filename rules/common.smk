# Shared helpers of the rules: the validated design, paths and input functions.
# Parsing imports only the pure model (throttlelab.model): no backend, no Docker or
# Kubernetes client, no plotting library is loaded to build the DAG.

import hashlib
import json
import os
import re
import shlex
import sys
from pathlib import Path

sys.path.insert(0, workflow.basedir)  # the package works from a plain checkout too

from throttlelab import snakemake_scheduler

# Snakemake 9's scheduler loop arms a timer chain per finished job and ran ~22% of a CPU inside the
# measuring windows; this makes it wake only when a job ends (throttlelab/snakemake_scheduler.py).
snakemake_scheduler.install()

from throttlelab.figures.registry import FIGURES, figures_for, report_caption
from throttlelab.host.facts import cgroup_version
from throttlelab.model.builds import BUILDS
from throttlelab.model.clustertools import PROJECT_NAMES as CLUSTER_PROJECTS, project as cluster_project
from throttlelab.model.config import ConfigError, load_design
from throttlelab.model.coverage import CLUSTER_BACKENDS, untestable_variants
from throttlelab.model import kubenode, seeds

IMPLEMENTED_BACKENDS = ("local", "docker", "kind", "kubernetes", "vm")


def planned_design():
    """The validated design, less the variants this backend cannot express (each printed with
    its reason), and those variants with their reasons: every rule plans from this one object."""
    try:
        design = load_design(config, Path(workflow.basedir) / "config")
    except ConfigError as exc:
        sys.exit(f"throttlelab: bad configuration, nothing was run:\n{exc}")
    if design.backend not in IMPLEMENTED_BACKENDS:
        sys.exit(
            f"throttlelab: backend {design.backend!r} is not available yet in this version; "
            f"use --config backend=NAME with one of {', '.join(IMPLEMENTED_BACKENDS)}"
        )
    left_out = untestable_variants(
        design.backend,
        {name: exp.variants for name, exp in design.experiments.items()},
        design.runtime,
        cgroup_version(),  # kind's nodes share this host's kernel
        cluster=design.kubernetes.get("cluster"),
        node_cpus=os.cpu_count(),  # the real node's kubelet counts every CPU of this host
    )
    for (experiment, variant), reason in sorted(left_out.items()):
        print(f"throttlelab: {experiment}/{variant} {reason}", file=sys.stderr)
    return design.without(left_out), left_out


DESIGN, LEFT_OUT = planned_design()
BACKEND = DESIGN.backend
PROFILE_NAME = Path(DESIGN.profile).stem  # a profile given as a file path is named by its stem


def shell_prelude():
    """What every rule's shell starts with: strict mode, the package of this checkout first on
    the path, and `throttlelab` as a shell function running the package's command line
    (throttlelab/cli.py) in the interpreter that runs Snakemake. Rules then call
    `throttlelab SUBCOMMAND ...` and name no Python variable of this file."""
    here = shlex.quote(str(workflow.basedir))
    python = shlex.quote(sys.executable)
    text = (
        "set -euo pipefail; "
        f"export PYTHONPATH={here}${{PYTHONPATH:+:$PYTHONPATH}}; "
        f"export THROTTLELAB_PROJECT={here}; "
        # the runner's meter counts this process tree's CPU apart, as the orchestrator's
        f"export THROTTLELAB_ORCHESTRATOR_PID={os.getpid()}; "
        f'throttlelab() {{ {python} -m throttlelab "$@"; }}; '
    )
    return text.replace("{", "{{").replace("}", "}}")  # shell.prefix() formats its text


shell.executable("bash")
shell.prefix(shell_prelude())


wildcard_constraints:
    build="|".join(BUILDS),
    backend="[a-z]+",
    experiment="|".join(DESIGN.experiments),
    variant="[a-z0-9][a-z0-9-]*",
    rep="[0-9]+",
    project="|".join(re.escape(name) for name in CLUSTER_PROJECTS),


def workload_sources():
    """Every file the Go build reads: a change to any of them rebuilds both binaries."""
    root = Path(workflow.basedir) / "workload"
    return sorted(
        str(p)
        for p in root.rglob("*")
        if p.is_file() and (p.suffix == ".go" or p.name == "go.mod") and "podgate" not in p.relative_to(root).parts
    )


def binary_path(build):
    return f"results/build/{build}/cpulab"


def image_stamp(build):
    """The docker image built from a binary: its id and the binary's hash (rules/build.smk)."""
    return f"results/build/{build}/image.json"


# kubernetes: {cluster: local}: the lab's own real node (rules/node.smk, backends/node)
LOCAL_NODE = BACKEND == "kubernetes" and DESIGN.kubernetes.get("cluster") == "local"
NODE_IMAGE_DIR = kubenode.IMAGE_DIR


def backend_images():
    """Images the experiments run from: the docker backend's, the real node's archives and its
    cluster tools; none for the local backend."""
    if LOCAL_NODE:
        return [f"{NODE_IMAGE_DIR}/{build}.tar" for build in BUILDS] + [kubenode.TOOLS_MANIFEST]
    return [image_stamp(build) for build in BUILDS] if BACKEND == "docker" else []


def stop_local_node():
    """onsuccess / onerror: wait until the real node this Snakemake process used is down."""
    if not LOCAL_NODE:
        return
    from throttlelab.backends.base import BackendError
    from throttlelab.backends.node.cluster import stop_nodes

    try:
        stop_nodes(os.getpid(), tell=lambda message: print(f"throttlelab: {message}", file=sys.stderr))
    except BackendError as exc:
        print(f"throttlelab: {exc}", file=sys.stderr)


# kind backend (rules/clusters.smk): a variant runs on the cluster of its runtime conversion.
KIND_ROLE_OF_RUNTIME = {"runc-new": "new", "runc-old": "old"}


def cluster_file(role, name):
    """A file of one kind cluster, inside the project: kubeconfig, cluster.json, images/<build>.json."""
    return f"results/kind/clusters/{role}/{name}"


def variant_role(experiment, variant):
    """The kind cluster a variant runs on: runc-old variants (E10, E4 runc-old) on the old one."""
    spec = DESIGN.experiments[experiment].variants[variant]
    return KIND_ROLE_OF_RUNTIME[spec.runtime or DESIGN.runtime]


def kind_roles():
    """The clusters this profile needs."""
    return sorted({variant_role(e, v) for e, exp in DESIGN.experiments.items() for v in exp.variants})


def cluster_inputs(wildcards):
    """kind: the variant's cluster with both images loaded. ancient(): once they exist, a
    recreated cluster or a reloaded image does not rerun a finished experiment."""
    if BACKEND != "kind":
        return []
    role = variant_role(wildcards.experiment, wildcards.variant)
    files = ["kubeconfig", "cluster.json"] + [f"images/{build}.json" for build in BUILDS]
    return [ancient(cluster_file(role, name)) for name in files]


def backend_settings_arg(wildcards):
    """The runner's --backend-settings: config.yaml's section of the kind or kubernetes backend."""
    section = {"kind": DESIGN.kind, "kubernetes": DESIGN.kubernetes}.get(BACKEND)
    if not section:
        return ""
    settings = json.dumps(section, sort_keys=True, separators=(",", ":"))
    return f"--backend-settings {shlex.quote(settings)}"


# kind rules (rules/clusters.smk) and the check before any job of a kind/kubernetes run.


def podgate_sources():
    """workload/podgate/ (the start gate in the pods): a change rebuilds it, then the kind images."""
    root = Path(workflow.basedir) / "workload" / "podgate"
    return sorted(str(p) for p in root.rglob("*") if p.is_file() and not p.name.endswith("_test.go"))


def kind_settings_arg(wildcards):
    """The kind settings that define the clusters (binaries, releases, names), as one shell word:
    a changed pod timeout or namespace must not rerun cluster jobs."""
    keys = (
        "binary",
        "release",
        "old_binary",
        "old_release",
        "new_cluster",
        "old_cluster",
    )
    return shlex.quote(json.dumps({k: DESIGN.kind[k] for k in keys}, sort_keys=True))


def jobs_to_run():
    """(rule, wildcards) of every job this invocation will run."""
    try:
        return [(job.rule.name, dict(job.wildcards_dict)) for job in workflow.dag.needrun_jobs()]
    except AttributeError:  # another Snakemake: check everything
        return [("create_cluster", {"role": r}) for r in ("new", "old")] + [("run_experiment", {})]


def vm_preflight():
    """vm: QEMU, virtme-ng, a static busybox and the guest kernel, before any batch boots a guest."""
    if not any(name.startswith("run_batch_") for name, _ in jobs_to_run()):
        return
    from throttlelab.errors import BackendError
    from throttlelab.host.vm import VmSettings, choose_accel, find_tools

    try:
        settings = VmSettings.from_mapping(DESIGN.vm)
        find_tools(settings)
        choose_accel(settings.accel)
    except BackendError as exc:
        sys.exit(f"throttlelab: {exc}\n(nothing was run)")


def backend_preflight():
    """kind / kubernetes: what the jobs about to run need, checked before the first of them
    (onstart: never on a dry run). Exits with every problem named."""
    if BACKEND == "vm":
        vm_preflight()
        return
    if BACKEND not in ("kind", "kubernetes"):
        return
    # imported here, not at parse: only a kind or kubernetes run that starts loads these clients
    from throttlelab.backends.base import BackendError, make_backend
    from throttlelab.backends.kind.clusters import clusters_from_settings, preflight_tools

    jobs = jobs_to_run()
    names = {name for name, _ in jobs}
    try:
        if BACKEND == "kind":
            need, roles = set(), set()
            if names & {"create_cluster", "load_image"}:
                need |= {"kind", "docker"}
                roles |= {w["role"] for name, w in jobs if "role" in w}
            if names & {"clean"}:
                need.add("kind")
                roles |= {"new", "old"}
            if names & {"build_kind_image", "run_experiment", "smoke"}:
                need.add("docker")
            clusters = clusters_from_settings(DESIGN.kind, Path.cwd(), Path(workflow.basedir) / "config" / "kind")
            preflight_tools(clusters, sorted(roles), need)
        elif names & {"run_experiment", "smoke"} and not LOCAL_NODE:  # the real node starts with its first job
            make_backend("kubernetes", {}, DESIGN.runtime, DESIGN.kubernetes).preflight()
    except BackendError as exc:
        sys.exit(f"throttlelab: {exc}\n(nothing was run)")


def raw_logs(experiment):
    exp = DESIGN.experiments[experiment]
    return [
        f"results/{BACKEND}/raw/{experiment}/{variant}/rep{rep}.jsonl"
        for variant in exp.variants
        for rep in range(exp.repeats)
    ]


def run_order():
    """(experiment, variant, repeat) -> its place in the measuring order, highest first: the
    experiments in the profile's order, and inside each one its variants' repeats interleaved
    in a random order seeded by the config's seed (model/seeds.py, STATS.md §6), so drift over a run
    cannot masquerade as a difference between variants. The seed is in every raw log (config_seed)."""
    order = {}
    place = len(DESIGN.jobs())
    for name, exp in DESIGN.experiments.items():
        jobs = [(name, v, r) for v in exp.variants for r in range(exp.repeats)]
        for job in seeds.measuring_order(DESIGN.seed, name, jobs):
            order[job] = place
            place -= 1
    return order


RUN_ORDER = run_order()


def run_priority(wildcards):
    """Snakemake runs the ready job of highest priority first: the seeded interleaved order."""
    return RUN_ORDER.get((wildcards.experiment, wildcards.variant, int(wildcards.rep)), 0)


def variant_spec(wildcards):
    """The variant's parameters as canonical JSON; as a param, editing it reruns only it."""
    exp = DESIGN.experiments[wildcards.experiment]
    if wildcards.variant not in exp.variants:
        raise ValueError(f"{wildcards.experiment} has no variant {wildcards.variant!r} in profile {DESIGN.profile}")
    return exp.spec_json(wildcards.variant)


def binary_args(wildcards, input):
    return " ".join(f"--binary {build}={path}" for build, path in zip(BUILDS, input.binaries))


def batch_plan(experiment):
    """The vm backend's batch of one experiment, as one shell word: the runner options every job
    shares, then each job (variant, repeat, spec, raw log) in the seeded measuring order."""
    exp = DESIGN.experiments[experiment]
    common = ["--runtime", DESIGN.runtime, "--seed", str(DESIGN.seed)]
    common += [f"--binary={build}={binary_path(build)}" for build in BUILDS]
    common += ["--max-other-share", str(DESIGN.disturbance["max_other_share"])]
    common += ["--retries", str(DESIGN.disturbance["retries"])]
    if DESIGN.node_cpus:
        common += ["--node-cpus", DESIGN.node_cpus]
    jobs = sorted(
        ((v, r) for v in exp.variants for r in range(exp.repeats)),
        key=lambda job: -RUN_ORDER[(experiment, *job)],
    )
    plan = {
        "common": common,
        "jobs": [
            {
                "variant": v,
                "repeat": r,
                "spec": exp.spec_json(v),
                "out": f"results/vm/raw/{experiment}/{v}/rep{r}.jsonl",
            }
            for v, r in jobs
        ],
    }
    return shlex.quote(json.dumps(plan, sort_keys=True, separators=(",", ":")))


def vm_settings_arg():
    """config.yaml's vm section as one shell word (vcpus, memory, kernel, accel)."""
    return shlex.quote(json.dumps(DESIGN.vm, sort_keys=True, separators=(",", ":")))


def node_cpus_arg(wildcards):
    return f"--node-cpus {DESIGN.node_cpus}" if DESIGN.node_cpus else ""


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


# The figures (rules/report.smk): one rule draws any figure of the registry
# (throttlelab/figures/registry.py, a light module read while parsing).
def figure_tables(wildcards):
    """The tidy tables a figure reads, named as `throttlelab figure --table NAME=PATH` takes them."""
    tables = {**dict(rules.parse_runs.output.items()), **dict(rules.compute_stats.output.items())}
    return {name: tables[name] for name in FIGURES[wildcards.figure].tables}


def figure_category(wildcards):
    return FIGURES[wildcards.figure].category


def table_args(wildcards, input):
    return " ".join(f"--table {name}={path}" for name, path in input.items())


def figure_repeats(wildcards):
    exp = DESIGN.experiments.get(FIGURES[wildcards.figure].experiment)
    return exp.repeats if exp else 0


def figure_caption(wildcards):
    """The figure's own caption, rendered for Snakemake's report (a param: editing it redraws)."""
    return report_caption(
        wildcards.figure,
        workflow.basedir,
        repeats=figure_repeats(wildcards),
        confidence=DESIGN.confidence,
    )


# The smoke test (rules/smoke.smk, docs/KIND_SMOKE.md): kind and kubernetes only.
def smoke_inputs(wildcards):
    """What `throttlelab smoke` needs: kind, the cluster of the configured runtime with both images
    loaded; kubernetes, nothing of this project (the cluster exists). Any other backend is refused
    here, when the smoke target is asked for, with what to do instead."""
    if BACKEND not in CLUSTER_BACKENDS:
        raise ValueError(
            f"the smoke target is the smallest real-cluster test and runs on "
            f"{' or '.join(CLUSTER_BACKENDS)} only; this run's backend is {BACKEND!r}: use "
            "`snakemake --cores 1 smoke --config backend=kind` (docs/KIND_SMOKE.md), or for this backend "
            "`snakemake --cores 1 report --config profile=ci`"
        )
    if BACKEND != "kind":
        return []
    role = KIND_ROLE_OF_RUNTIME[DESIGN.runtime]
    names = ["kubeconfig", "cluster.json"] + [f"images/{build}.json" for build in BUILDS]
    return [cluster_file(role, name) for name in names]


# The cluster tools (rules/cluster_tools.smk, model/clustertools.py): one job per module of cluster/.
def cluster_module_files(wildcards):
    """The go.mod and go.sum of a project's folder under cluster/: a changed pin reruns its job."""
    folder = Path(workflow.basedir) / "cluster" / cluster_project(wildcards.project).folder
    return {"gomod": str(folder / "go.mod"), "gosum": str(folder / "go.sum")}


def cluster_project_recipe(wildcards):
    """A digest of the project's catalogue row (packages, tags, linker flags): editing how a tool is
    built reruns its job, which rebuilds exactly the binaries whose build key changed."""
    return hashlib.sha256(repr(cluster_project(wildcards.project)).encode()).hexdigest()[:16]


def cluster_tools_settings_arg():
    """config.yaml's cluster_tools section (cache folders) as one shell word."""
    return shlex.quote(json.dumps(DESIGN.cluster_tools, sort_keys=True, separators=(",", ":")))


def cluster_tools_manifest(project):
    """What one project's job leaves in results/: the binaries' paths, hashes, versions, build times."""
    return f"results/cluster-tools/{project}.json"
