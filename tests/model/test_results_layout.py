"""Where every result lives (model/results_layout.py): the patterns the rules name their outputs with are
the paths the package fills in."""

from __future__ import annotations

import re
import string
from pathlib import PurePath

from throttlelab.model import results_layout as layout
from throttlelab.model.builds import BUILDS

PATTERNS = {name: value for name, value in vars(layout).items() if name.isupper() and isinstance(value, str)}


def wildcards(pattern: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(pattern) if field}


def test_every_path_is_under_results_and_its_wildcards_are_plain_names():
    # names inside a folder the package is handed
    inside = {"RAW_LOG_NAME", "RAW_LOG_IN_ROOT", "NODE_IMAGE_ARCHIVE_NAME", "FIGURES_FOLDER"}
    for name, pattern in PATTERNS.items():
        assert name in inside or pattern.startswith(layout.RESULTS), name
        assert all(re.fullmatch(r"[a-z]+", w) for w in wildcards(pattern)), name


def test_the_functions_fill_the_patterns_in():
    assert layout.raw_log("local", "E1", "all-limits", 2) == "results/local/raw/E1/all-limits/rep2.jsonl"
    assert layout.raw_log("vm", "E1", "v", 0) == f"{layout.raw_root('vm')}/{layout.raw_log_in_root('E1', 'v', 0)}"
    assert layout.pilot("docker", "X5") == "results/docker/calibration/X5.json"
    assert layout.host_calibration("local") == "results/local/calibration/host.json"
    assert layout.binary_paths() == [f"results/build/{b}/cpulab" for b in BUILDS]
    assert layout.node_image_archives() == [f"results/node/images/{b}.tar" for b in BUILDS]
    assert layout.kind_cluster_files("new") == [
        "results/kind/clusters/new/kubeconfig",
        "results/kind/clusters/new/cluster.json",
        *(f"results/kind/clusters/new/images/{b}.json" for b in BUILDS),
    ]
    assert layout.report_dir("kind", "ci") == "results/report/kind-ci"
    assert layout.figures_dir("kind", "ci") == "results/report/kind-ci/figures"
    assert layout.archive("kind", "ci") == "results/throttlelab-report-kind-ci.tar.gz"
    assert layout.BATCH_LOG.format(backend="vm", experiment="E3") == "results/vm/logs/E3/batch.log"


def test_a_raw_logs_path_names_its_job():
    path = PurePath(layout.raw_log("local", "E2a", "limit1", 12))
    assert layout.raw_log_job(path) == ("E2a", "limit1", 12)
    assert layout.raw_log_job(PurePath("copies/E2a-limit1.jsonl")) is None
    assert layout.raw_log_job(PurePath("a/b/rep1.jsonl.bak")) is None


def test_a_jobs_log_is_named_by_its_rule_and_its_wildcards():
    assert layout.job_log("clean") == "results/logs/clean.log"
    assert layout.job_log("load_image", "{role}-{build}") == "results/logs/load_image/{role}-{build}.log"
