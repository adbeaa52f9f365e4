"""Where every result lives under Snakemake's working directory: one pattern per kind of file.

The patterns are written in Snakemake's wildcard form, so a rule names its output with the pattern as it
is (its braces are the rule's wildcards) and the package fills the same pattern in (``str.format``): no
path is written twice. rules/common.smk imports this module as ``layout``.
"""

from __future__ import annotations

# -- the workload (rules/build.smk)
BINARY = "results/build/{build}/cpulab"
IMAGE_STAMP = "results/build/{build}/image.json"

# -- the experiments (rules/experiments.smk)
RAW_LOG = "results/{backend}/raw/{experiment}/{variant}/rep{rep}.jsonl"
RUN_LOG = "results/{backend}/logs/{experiment}/{variant}/rep{rep}.log"
HOST_CALIBRATION = "results/{backend}/calibration/host.json"
HOST_CALIBRATION_LOG = "results/{backend}/logs/calibration/host.log"
PILOT = "results/{backend}/calibration/{experiment}.json"
PILOT_LOG = "results/{backend}/logs/calibration/{experiment}.log"

# -- the platform (rules/platform/, rules/clusters.smk)
KIND_CLUSTER_FILE = "results/kind/clusters/{role}/{name}"
TOOLS_MANIFEST = "results/cluster-tools/tools.json"
CLUSTER_TOOL_MANIFEST = "results/cluster-tools/{project}.json"
NODE_IMAGE_DIR = "results/node/images"
NODE_IMAGE_ARCHIVE = NODE_IMAGE_DIR + "/{build}.tar"
KIND_NODE_BASE_STAMP = "results/kind/node-images/base-{role}.json"
KIND_NODE_STAMP = "results/kind/node-images/{role}.json"
