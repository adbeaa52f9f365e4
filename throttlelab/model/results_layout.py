"""Where every result lives under Snakemake's working directory: one pattern per kind of file.

The patterns are written in Snakemake's wildcard form, so a rule names its output with the pattern as it
is (its braces are the rule's wildcards) and the package fills the same pattern in (``str.format``, or the
functions below): no path is written twice. A folder the package is handed as an argument (the raw logs'
root, the node's image folder) has the names inside it here too. rules/common.smk imports this module as
``layout``.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePath

from throttlelab.model.builds import BUILDS

RESULTS = "results"
#: Each job's log, by its rule (and its wildcards): results/logs/<rule>[/<wildcards>].log
JOB_LOGS = f"{RESULTS}/logs"

# -- the workload and its images (rules/build.smk, rules/platform/)
BINARY = f"{RESULTS}/build/{{build}}/cpulab"
IMAGE_STAMP = f"{RESULTS}/build/{{build}}/image.json"
PODGATE_BINARY = f"{RESULTS}/build/podgate/podgate"
PODNET_BINARY = f"{RESULTS}/build/podnet/podnet"

# -- one backend's run (rules/experiments.smk, rules/analysis.smk, rules/smoke.smk)
BACKEND_DIR = f"{RESULTS}/{{backend}}"
BACKEND_LOGS = f"{BACKEND_DIR}/logs"
RAW_ROOT = f"{BACKEND_DIR}/raw"
RAW_LOG_NAME = "rep{rep}.jsonl"
#: A raw log inside the raw logs' root (the report links it from there, the archive packs it)
RAW_LOG_IN_ROOT = f"{{experiment}}/{{variant}}/{RAW_LOG_NAME}"
RAW_LOG = f"{RAW_ROOT}/{RAW_LOG_IN_ROOT}"
RUN_LOG = f"{BACKEND_LOGS}/{{experiment}}/{{variant}}/rep{{rep}}.log"
#: The vm backend's log of one experiment's batch (all its runs in one guest)
BATCH_LOG = f"{BACKEND_LOGS}/{{experiment}}/batch.log"
#: An experiment's first look at its first stage's runs: whether the rest are measured (rules/experiments.smk)
LOOK = f"{BACKEND_DIR}/looks/{{experiment}}.json"
LOOK_LOG = f"{BACKEND_LOGS}/looks/{{experiment}}.log"
HOST_CALIBRATION = f"{BACKEND_DIR}/calibration/host.json"
HOST_CALIBRATION_LOG = f"{BACKEND_LOGS}/calibration/host.log"
PILOT = f"{BACKEND_DIR}/calibration/{{experiment}}.json"
PILOT_LOG = f"{BACKEND_LOGS}/calibration/{{experiment}}.log"
TABLES = f"{BACKEND_DIR}/tables"
ANALYSIS_LOGS = f"{BACKEND_LOGS}/analysis"
SMOKE_REPORT = f"{BACKEND_DIR}/smoke/smoke.json"
SMOKE_LOG = f"{BACKEND_LOGS}/smoke.log"
#: The vm guest's real node leaves its logs here (the guest's writable folder is the vm backend's)
GUEST_NODE_LOGS = f"{RESULTS}/vm/node-logs"
#: the real node's component logs (etcd, the control plane, containerd, kubelet), copied when it goes
NODE_LOGS = f"{RESULTS}/kubernetes/logs/node"

# -- the report (rules/report.smk): one per (backend, profile), and the page a user opens first
REPORT_ROOT = f"{RESULTS}/report"
FRONT_PAGE = f"{REPORT_ROOT}/index.html"
REPORT_DIR = f"{REPORT_ROOT}/{{backend}}-{{profile}}"
#: The report's figures, a folder beside its page
FIGURES_FOLDER = "figures"
FIGURES_DIR = f"{REPORT_DIR}/{FIGURES_FOLDER}"
REPORT_LOGS = f"{BACKEND_LOGS}/report"
ARCHIVE = f"{RESULTS}/throttlelab-report-{{backend}}-{{profile}}.tar.gz"
#: The page comparing several runs (rule compare); archives it reads are unpacked beside it
COMPARE_PAGE = f"{RESULTS}/compare/index.html"

# -- the platform (rules/platform/)
KIND_IMAGE_STAMP = f"{RESULTS}/kind/images/{{build}}.json"
KIND_CLUSTER_DIR = f"{RESULTS}/kind/clusters/{{role}}"
KIND_KUBECONFIG = f"{KIND_CLUSTER_DIR}/kubeconfig"
KIND_CLUSTER_STAMP = f"{KIND_CLUSTER_DIR}/cluster.json"
#: An image loaded into one kind cluster
KIND_LOADED_IMAGE = f"{KIND_CLUSTER_DIR}/images/{{build}}.json"
KIND_NODE_BASE_STAMP = f"{RESULTS}/kind/node-images/base-{{role}}.json"
KIND_NODE_STAMP = f"{RESULTS}/kind/node-images/{{role}}.json"
CLUSTER_TOOL_MANIFEST = f"{RESULTS}/cluster-tools/{{project}}.json"
#: The cluster tools' summary (rule cluster_tools): every binary the real node runs
TOOLS_MANIFEST = f"{RESULTS}/cluster-tools/tools.json"
#: The kind node images' tools (rule kind_tools)
KIND_TOOLS_MANIFEST = f"{RESULTS}/cluster-tools/kind-tools.json"
#: The real node's OCI archives of the workload, one per build
NODE_IMAGE_DIR = f"{RESULTS}/node/images"
NODE_IMAGE_ARCHIVE_NAME = "{build}.tar"
NODE_IMAGE_ARCHIVE = f"{NODE_IMAGE_DIR}/{NODE_IMAGE_ARCHIVE_NAME}"


def job_log(rule: str, name: str | None = None) -> str:
    """A job's log: results/logs/<rule>.log, or results/logs/<rule>/<name>.log where the rule has
    wildcards (``name`` a wildcard pattern such as ``{build}``)."""
    return f"{JOB_LOGS}/{rule}.log" if name is None else f"{JOB_LOGS}/{rule}/{name}.log"


def binary_path(build: str) -> str:
    """The workload binary of one build (rules/build.smk)."""
    return BINARY.format(build=build)


def binary_paths() -> list[str]:
    """The workload binary of every build, in BUILDS' order."""
    return [binary_path(build) for build in BUILDS]


def image_stamp(build: str) -> str:
    """The docker image built from a binary: its id and the binary's hash (rules/build.smk)."""
    return IMAGE_STAMP.format(build=build)


def backend_dir(backend: str) -> str:
    """Everything one backend's runs leave: their raw logs, calibration, tables and logs."""
    return BACKEND_DIR.format(backend=backend)


def raw_root(backend: str) -> str:
    """The root of one backend's raw logs (raw/<experiment>/<variant>/rep<k>.jsonl)."""
    return RAW_ROOT.format(backend=backend)


def raw_log(backend: str, experiment: str, variant: str, rep: int) -> str:
    return RAW_LOG.format(backend=backend, experiment=experiment, variant=variant, rep=rep)


def raw_log_in_root(experiment: str, variant: str, rep: int) -> str:
    """A raw log's path inside its backend's raw logs' root."""
    return RAW_LOG_IN_ROOT.format(experiment=experiment, variant=variant, rep=int(rep))


_RAW_LOG_NAME = re.compile(re.escape(RAW_LOG_NAME).replace(re.escape("{rep}"), r"(\d+)"))


def failure_evidence(raw_log_path: PurePath) -> PurePath:
    """Where a failed run's evidence goes (the pods' events, the node's logs): beside its job log,
    results/<backend>/logs/<experiment>/<variant>/rep<N>.failure/, found from its raw log's path."""
    raw = PurePath(raw_log_path)
    backend_dir, experiment, variant = raw.parents[3], raw.parents[1].name, raw.parent.name
    return backend_dir / "logs" / experiment / variant / f"{raw.stem}.failure"


def raw_log_job(path: PurePath) -> tuple[str, str, int] | None:
    """The (experiment, variant, repeat) a raw log's path names (its two folders and its file name), or
    None for a file not named as a raw log is (a copied log)."""
    match = _RAW_LOG_NAME.fullmatch(path.name)
    if not match:
        return None
    return path.parent.parent.name, path.parent.name, int(match.group(1))


def pilot(backend: str, experiment: str) -> str:
    """An experiment's pilot (rule calibrate_service): its service's CPU per request on this host."""
    return PILOT.format(backend=backend, experiment=experiment)


def host_calibration(backend: str) -> str:
    """The quiet host's floor (rule calibrate_host)."""
    return HOST_CALIBRATION.format(backend=backend)


def report_dir(backend: str, profile: str) -> str:
    return REPORT_DIR.format(backend=backend, profile=profile)


def figures_dir(backend: str, profile: str) -> str:
    return FIGURES_DIR.format(backend=backend, profile=profile)


def archive(backend: str, profile: str) -> str:
    return ARCHIVE.format(backend=backend, profile=profile)


def compare_runs(results: Path, backends: list[str] | None = None) -> list[str]:
    """The run folders the compare page reads: results/<backend> of each backend named, or, when none is named,
    every results/<backend> that holds tables/findings.csv (sorted by name)."""
    if backends is not None:
        return [str(results / backend) for backend in backends]
    return sorted(str(p.parent.parent) for p in results.glob("*/tables/findings.csv"))


def kind_cluster_dir(role: str) -> str:
    """Every file of one kind cluster, inside the project (never ~/.kube)."""
    return KIND_CLUSTER_DIR.format(role=role)


def kind_kubeconfig(role: str) -> str:
    return KIND_KUBECONFIG.format(role=role)


def kind_loaded_image(role: str, build: str) -> str:
    return KIND_LOADED_IMAGE.format(role=role, build=build)


def kind_cluster_files(role: str) -> list[str]:
    """What a job that runs on one kind cluster needs: its kubeconfig, its stamp, every build's image loaded."""
    return [
        kind_kubeconfig(role),
        KIND_CLUSTER_STAMP.format(role=role),
        *(kind_loaded_image(role, build) for build in BUILDS),
    ]


def kind_node_stamp(role: str) -> str:
    """A kind node image built here (rules/platform/kind_node.smk): its tag, image ID, what it holds."""
    return KIND_NODE_STAMP.format(role=role)


def cluster_tool_manifest(project: str) -> str:
    """What one cluster tool project's job leaves: the binaries' paths, hashes, versions, times."""
    return CLUSTER_TOOL_MANIFEST.format(project=project)


def node_image_archive(build: str) -> str:
    """The real node's OCI archive of one build's workload (rules/platform/real_node.smk)."""
    return NODE_IMAGE_ARCHIVE.format(build=build)


def node_image_archives() -> list[str]:
    return [node_image_archive(build) for build in BUILDS]
