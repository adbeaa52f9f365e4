# throttlelab: re-run a published CPU-throttling lab end to end.
# This file is the table of contents; the stages live in rules/, the logic in
# the throttlelab package. Quick start and targets: README.md.

from snakemake.utils import min_version

min_version("9.0")


configfile: f"{workflow.basedir}/config/config.yaml"


include: "rules/common.smk"
include: "rules/build.smk"
include: "rules/platform/kind_clusters.smk"
include: "rules/experiments.smk"
include: "rules/analysis.smk"
include: "rules/report.smk"
include: "rules/smoke.smk"
include: "rules/platform/cluster_tools.smk"
include: "rules/platform/real_node.smk"
include: "rules/platform/kind_node.smk"


rule all:
    default_target: True
    input:
        LOOK_FILES,
        raw_logs,
        rules.report.input,
