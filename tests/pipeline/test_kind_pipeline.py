"""The pipeline with backend=kind (and kubernetes) as Snakemake sees it, without a cluster:
the DAG (clusters -> images -> experiments -> analysis -> report), a cluster that exists is not
recreated, `clean` deletes the clusters, and a real run on a machine without kind stops at once
naming what is missing. Nothing here creates a cluster."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PROJECT, snakemake as run_snakemake
from throttlelab.host.facts import cgroup_version
from throttlelab.model.config import load_design
from throttlelab.model.coverage import untestable_variants
from throttlelab.model.plan import make_plan
from throttlelab.platform.platform_jobs import PlatformPlan

pytestmark = [pytest.mark.full, pytest.mark.plan]  # the kind backend (CI runs it: --full), planned only

NO_KIND = "kind={binary: /nonexistent/kind, old_binary: /nonexistent/kind-v0.30.0}"


def needed_roles(**config) -> list[str]:
    """The kind clusters a run of this config needs on this host, planned as the rules plan it (this
    host's cgroup version and CPUs: on 2 CPUs of cgroup v1 no variant of the old cluster can run)."""
    plan = make_plan({"backend": "kind", **config}, PROJECT / "config", cgroup_version, node_cpus=os.cpu_count())
    return PlatformPlan(plan.design).kind_roles()


def snakemake(workdir: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return run_snakemake(workdir, *args, timeout=timeout)


def dag(workdir: Path, *config: str) -> tuple[dict[str, str], set[tuple[str, str]]]:
    proc = snakemake(workdir, "-n", "--dag", "--config", "backend=kind", *config)
    assert proc.returncode == 0, proc.stderr[-3000:]
    nodes = dict(re.findall(r'^\s*(\d+)\[label = "([^"]*)"', proc.stdout, re.M))
    edges = set(re.findall(r"^\s*(\d+) -> (\d+)", proc.stdout, re.M))
    return nodes, edges


def reaches(edges: set[tuple[str, str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        here = todo.pop()
        if here == goal:
            return True
        if here not in seen:
            seen.add(here)
            todo += [b for a, b in edges if a == here]
    return False


@pytest.fixture(scope="module")
def kind_dag(tmp_path_factory):
    return dag(tmp_path_factory.mktemp("dag"), "profile=ci")


def rule_of(label: str) -> str:
    return label.split("\\n")[0]


def test_the_dag_runs_clusters_then_images_then_experiments_then_analysis_then_the_report(kind_dag):
    nodes, edges = kind_dag
    by_rule: dict[str, list[str]] = {}
    for node, label in nodes.items():
        by_rule.setdefault(rule_of(label), []).append(node)
    chain = [
        "create_cluster",
        "load_image",
        "run_experiment",
        "parse_runs",
        "compute_stats",
        "evaluate_findings",
        "render_report",
    ]
    for rule in chain + ["build_image", "build_kind_image", "build_podgate", "build_workload"]:
        assert rule in by_rule, f"{rule} missing from the kind DAG"
    for earlier, later in zip(chain, chain[1:]):
        assert any(reaches(edges, a, b) for a in by_rule[earlier] for b in by_rule[later]), f"{earlier} -> {later}"
    # images: the docker backend's image + podgate -> the kind image -> loaded into a cluster
    for earlier, later in (
        ("build_workload", "build_image"),
        ("build_image", "build_kind_image"),
        ("build_podgate", "build_kind_image"),
        ("build_kind_image", "load_image"),
    ):
        assert any((a, b) in edges for a in by_rule[earlier] for b in by_rule[later]), f"{earlier} -> {later}"
    # no experiment runs before its cluster exists and holds both images
    for run in by_rule["run_experiment"]:
        assert any(reaches(edges, c, run) for c in by_rule["create_cluster"])
        assert sum((load, run) in edges for load in by_rule["load_image"]) == 2


def test_each_variant_runs_on_the_cluster_of_its_runtime(kind_dag):
    nodes, edges = kind_dag
    clusters = {
        node: re.search(r"role: (\w+)", label).group(1)
        for node, label in nodes.items()
        if rule_of(label) == "create_cluster"
    }
    assert sorted(clusters.values()) == needed_roles(profile="ci")
    for node, label in nodes.items():
        if rule_of(label) != "run_experiment":
            continue
        roles = {role for c, role in clusters.items() if reaches(edges, c, node)}
        old = "experiment: E10" in label or "variant: runc-old" in label
        assert roles == ({"old"} if old else {"new"}), label


def test_an_existing_cluster_is_not_recreated(tmp_path):
    for role in ("new", "old"):
        d = tmp_path / "results" / "kind" / "clusters" / role
        d.mkdir(parents=True)
        (d / "kubeconfig").write_text("")
        (d / "cluster.json").write_text("{}")
    proc = snakemake(tmp_path, "-n", "create_clusters", "--config", "backend=kind", "profile=ci")
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout, re.M))
    assert "create_cluster" not in jobs and jobs["load_image"] == "4"


def test_clean_deletes_the_clusters(tmp_path):
    proc = snakemake(tmp_path, "-n", "-p", "clean", "--config", "backend=kind")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "throttlelab kind delete --settings" in proc.stdout


def test_a_run_without_kind_stops_at_once_naming_what_is_missing(tmp_path):
    t0 = time.monotonic()
    proc = snakemake(tmp_path, "report", "--config", "backend=kind", NO_KIND)
    took = time.monotonic() - t0
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "the kind binary for the new cluster is missing: '/nonexistent/kind'" in out
    assert "Install kind v0.33.0" in out
    if "old" in needed_roles():  # only the clusters the run needs are checked
        assert "the kind binary for the old cluster is missing: '/nonexistent/kind-v0.30.0'" in out
        assert "Install kind v0.30.0" in out
    assert "(nothing was run)" in out
    assert not (tmp_path / "results").exists(), "a job ran before the check"
    assert took < 60


def test_published_node_images_without_a_registry_stop_the_run_naming_the_setting_that_works(tmp_path):
    from throttlelab.backends.base import BackendError
    from throttlelab.platform.kind_clusters import NODE_IMAGES, registry_reachable
    from throttlelab.host.docker_engine import kind_engine_client

    if registry_reachable():
        pytest.skip("a container registry can be reached from here: published node images can be pulled")
    try:
        kind_engine_client()
    except BackendError as exc:
        pytest.skip(f"no Docker engine: {exc}")
    proc = snakemake(tmp_path, "create_clusters", "--config", "backend=kind", NO_KIND)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "set kind.node_images to local (--config 'kind={node_images: local}')" in out
    assert NODE_IMAGES["new"] in out and "(nothing was run)" in out
    assert not (tmp_path / "results").exists(), "a job ran before the check"


def test_a_dry_run_needs_no_kind(tmp_path):
    proc = snakemake(tmp_path, "-n", "report", "--config", "backend=kind", NO_KIND)
    assert proc.returncode == 0, proc.stderr[-3000:]


def listed_as_untestable(output: str, backend: str) -> dict[tuple[str, str], str]:
    """The variants a run printed as left out, with their reasons (rules/common.smk, while parsing)."""
    found = re.findall(rf"^throttlelab: ([^/\s]+)/(\S+) (not testable on the {backend} backend.*)$", output, re.M)
    return {(e, v): reason for e, v, reason in found}


def test_the_quick_plan_on_kind_runs_what_kind_can_and_lists_the_rest_with_reasons_first(tmp_path):
    """`snakemake -n report --config backend=kind profile=quick`, with no kind installed: every
    repeat of every variant kind can run on this host is planned, and every other variant is listed
    with the reason model.coverage gives (E6: scrapes too close for the kubelet's cAdvisor; on a
    cgroup v1 host also every pinned variant). A real run prints the same list while parsing, before
    its first job: here it stops at the missing kind with the list printed and nothing made."""
    design = load_design({"profile": "quick", "backend": "kind"}, PROJECT / "config")
    left = untestable_variants(
        "kind",
        {n: e.variants for n, e in design.experiments.items()},
        design.runtime,
        cgroup_version(),
        node_cpus=os.cpu_count(),
    )
    assert ("E6", "limit") in left
    proc = snakemake(tmp_path, "-n", "report", "--config", "backend=kind", "profile=quick", NO_KIND)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert listed_as_untestable(proc.stderr, "kind") == left
    planned = set(re.findall(r"results/kind/raw/([^/\s]+)/([^/\s]+)/rep(\d+)\.jsonl", proc.stdout))
    runnable = {
        (e, v, str(r))
        for e, exp in design.experiments.items()
        for v in exp.variants
        if (e, v) not in left
        for r in range(exp.repeats_of(v))
    }
    assert planned == runnable
    assert {e for e, _v, _r in planned} == {
        e for e, exp in design.experiments.items() if any((e, v) not in left for v in exp.variants)
    }
    real = snakemake(tmp_path, "report", "--config", "backend=kind", "profile=quick", NO_KIND)
    assert real.returncode != 0 and "(nothing was run)" in real.stdout + real.stderr
    assert listed_as_untestable(real.stderr, "kind") == left
    assert not (tmp_path / "results").exists(), "a job ran"


def test_the_smoke_target_plans_the_new_cluster_its_images_and_the_smoke_without_kind(tmp_path):
    """`snakemake -n smoke --config backend=kind`: the runtime's cluster, both images loaded into it,
    then the smoke job; no experiment, no second cluster. A real run without kind stops first."""
    proc = snakemake(tmp_path, "-n", "smoke", "--dag", "--config", "backend=kind", NO_KIND)
    assert proc.returncode == 0, proc.stderr[-3000:]
    nodes = dict(re.findall(r'^\s*(\d+)\[label = "([^"]*)"', proc.stdout, re.M))
    edges = set(re.findall(r"^\s*(\d+) -> (\d+)", proc.stdout, re.M))
    rules = sorted(rule_of(label) for label in nodes.values())
    assert rules.count("create_cluster") == 1 and rules.count("load_image") == 2 and rules.count("smoke") == 1
    assert "run_experiment" not in rules
    (smoke,) = [n for n, label in nodes.items() if rule_of(label) == "smoke"]
    (cluster,) = [label for label in nodes.values() if rule_of(label) == "create_cluster"]
    assert "role: new" in cluster
    assert sum((n, smoke) in edges for n, label in nodes.items() if rule_of(label) == "load_image") == 2
    real = snakemake(tmp_path, "smoke", "--config", "backend=kind", NO_KIND)
    assert real.returncode != 0 and "(nothing was run)" in real.stdout + real.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_the_smoke_target_refuses_a_backend_without_a_cluster(tmp_path, backend):
    proc = snakemake(tmp_path, "-n", "smoke", "--config", f"backend={backend}")
    assert proc.returncode != 0
    assert (
        f"the smoke target is the smallest real-cluster test and runs on kind or kubernetes only; this "
        f"run's backend is '{backend}'"
    ) in proc.stdout + proc.stderr


def test_kubernetes_leaves_out_what_it_cannot_do_and_says_why(tmp_path):
    proc = snakemake(tmp_path, "-n", "--config", "backend=kubernetes", "profile=ci")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "E5/pods not testable on the kubernetes backend: it pins the worker node to CPU 0" in proc.stderr
    assert "E2b/clumped-nolimit not testable on the kubernetes backend: it pins the node to CPUs 0" in proc.stderr
    assert (
        "E2b/clumped-limit not testable on the kubernetes backend: a container requests more CPU than its limit"
        in proc.stderr
    )
    assert "E4/runc-old not testable on the kubernetes backend: it asks for the runc-old conversion" in proc.stderr
    assert "results/kubernetes/raw/E5/" not in proc.stdout and "results/kubernetes/raw/E10/" not in proc.stdout
    assert "results/kubernetes/raw/E4/runc-new/rep0.jsonl" in proc.stdout
    assert "create_cluster" not in proc.stdout


def test_kubernetes_without_its_settings_stops_at_once(tmp_path):
    proc = snakemake(tmp_path, "report", "--config", "backend=kubernetes")
    assert proc.returncode != 0
    assert "set kubernetes.kubeconfig, kubernetes.worker_node, kubernetes.load_node" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_node_images_local_plans_the_images_before_the_clusters_and_published_does_not(tmp_path):
    local = snakemake(tmp_path, "-n", "-p", "create_clusters", "--config", "backend=kind", "kind={node_images: local}")
    assert local.returncode == 0, local.stderr[-2000:]
    for rule in ("kind_node_base", "kind_node_image", "build_podnet", "create_cluster"):
        assert re.search(rf"^rule {rule}:", local.stdout, re.MULTILINE), rule
    assert "throttlelab kind-node build --role old" in local.stdout
    published = snakemake(tmp_path / "p", "-n", "-p", "create_clusters", "--config", "backend=kind")
    assert published.returncode == 0, published.stderr[-2000:]
    assert not re.search(r"^rule kind_node_image:", published.stdout, re.MULTILINE)
