"""What the rules plan from the design (model/plan.py): the raw logs, the seeded measuring order as
priorities, the vm batch plans, kind's clusters, the shell words handed to the command line, and
the shell prelude. Snakemake's DAG is built from these (rules/common.smk calls nothing else)."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from conftest import PROJECT
from throttlelab.model import plan, seeds
from throttlelab.model import results_layout as layout
from throttlelab.platform import platform_jobs
from throttlelab.model.builds import BUILDS
from throttlelab.model.config import ConfigError
from throttlelab.model.coverage import V1_PIN_REASON

CONFIG = PROJECT / "config"


def _plan(backend="local", profile="ci", cgroup_version=2, **config):
    return plan.make_plan({"backend": backend, "profile": profile, **config}, CONFIG, lambda: cgroup_version)


def test_every_job_of_the_design_has_its_raw_log_and_a_place_in_the_measuring_order():
    p = _plan()
    jobs = p.design.jobs()
    assert len(p.all_raw_logs()) == len(jobs) == len(set(p.all_raw_logs()))
    first = next(iter(p.design.experiments["E2a"].variants))
    assert p.raw_logs("E2a")[0] == f"results/local/raw/E2a/{first}/rep0.jsonl"
    assert sorted(p.priority(e, v, r) for e, v, r in jobs) == list(range(1, len(jobs) + 1))
    assert p.priority("E2a", "no-such-variant", 0) == 0
    assert p.priority("E2a", first, "0") == p.priorities[("E2a", first, 0)]  # a wildcard is a string


def test_the_experiments_are_measured_in_the_profiles_order_each_in_its_seeded_order():
    p = _plan()
    first, second = p.experiments[:2]
    assert min(p.priority(e, v, r) for e, v, r in p.design.jobs() if e == first) > max(
        p.priority(e, v, r) for e, v, r in p.design.jobs() if e == second
    )
    exp = p.design.experiments["E2a"]
    jobs = [("E2a", v, r) for v in exp.variants for r in range(exp.repeats)]
    by_priority = sorted(jobs, key=lambda job: -p.priority(*job))
    assert by_priority == seeds.measuring_order(p.design.seed, "E2a", jobs)


def test_a_variant_is_its_canonical_json_and_an_unknown_one_is_named():
    p = _plan()
    first = next(iter(p.design.experiments["E2a"].variants))
    spec = json.loads(p.variant_spec("E2a", first))
    assert spec == p.design.experiments["E2a"].variants[first].to_dict()
    with pytest.raises(ValueError, match="E2a has no variant 'nope' in profile ci"):
        p.variant_spec("E2a", "nope")


def test_the_backend_decides_the_images_and_the_settings_handed_to_the_runner():
    assert _plan("local").images() == [] and _plan("local").backend_settings_arg() == ""
    assert _plan("docker").images() == [f"results/build/{b}/image.json" for b in BUILDS]
    word = _plan("kubernetes").backend_settings_arg()
    assert word.startswith("--backend-settings ")
    assert json.loads(shlex.split(word)[1]) == _plan("kubernetes").design.kubernetes
    assert (
        _plan().binary_args(["a/cpulab", "b/cpulab"]) == f"--binary {BUILDS[0]}=a/cpulab --binary {BUILDS[1]}=b/cpulab"
    )
    assert _plan().node_cpus_arg() == "" and _plan(node_cpus="0-1").node_cpus_arg() == "--node-cpus 0-1"


def test_the_real_node_in_a_vm_guest_is_one_setting_with_the_nodes_images_and_the_guests_size():
    """vm: {node: kubernetes}: each batch needs the real node's OCI archives and cluster tools, and the plan
    sizes the node by vm.vcpus (E5's 2.2 CPUs of requests together: left out on 2 vCPUs, planned on 10;
    E4 is read back a few pods at a time on 2)."""
    plain = _plan("vm")
    assert not plain.vm_node and plain.images() == []
    small = _plan("vm", vm={"node": "kubernetes"})
    assert small.vm_node and not small.local_node
    assert small.images() == [layout.node_image_archive(b) for b in BUILDS] + [layout.TOOLS_MANIFEST]
    assert ("E5", "pods") in small.left_out and "in the vm guest (2 vCPUs)" in small.left_out[("E5", "pods")]
    assert ("E4", "runc-old") not in small.left_out
    big = _plan("vm", vm={"node": "kubernetes", "vcpus": 10})
    assert ("E5", "pods") not in big.left_out
    assert ("E4", "runc-old") not in big.left_out and ("E4", "runc-new") not in big.left_out
    assert json.loads(shlex.split(big.vm_settings_arg())[0])["node"] == "kubernetes"


def test_a_vm_batch_is_the_experiments_jobs_in_the_measuring_order_with_the_runner_options():
    p = _plan("vm", node_cpus="0")
    batch = json.loads(shlex.split(p.batch_plan("E2a"))[0])
    assert batch["common"][:4] == ["--runtime", "runc-new", "--seed", str(p.design.seed)]
    assert batch["common"][-2:] == ["--node-cpus", "0"]
    assert f"--binary={BUILDS[0]}=results/build/{BUILDS[0]}/cpulab" in batch["common"]
    priorities = [p.priority("E2a", job["variant"], job["repeat"]) for job in batch["jobs"]]
    assert priorities == sorted(priorities, reverse=True) and len(priorities) == len(p.raw_logs("E2a"))
    assert sorted(job["out"] for job in batch["jobs"]) == sorted(p.raw_logs("E2a"))
    assert json.loads(shlex.split(p.vm_settings_arg())[0]) == p.design.vm


def test_kind_runs_a_variant_on_the_cluster_of_its_runtime_and_is_asked_the_hosts_cgroup_version():
    asked = []

    def version():
        asked.append(True)
        return 2

    plan.make_plan({"backend": "local", "profile": "quick"}, CONFIG, version)
    assert asked == []  # only kind's nodes share this host's kernel
    p = plan.make_plan({"backend": "kind", "profile": "quick"}, CONFIG, version)
    assert asked == [True]
    assert p.variant_role("E4", "runc-old") == "old" and p.variant_role("E1", "all-limits") == "new"
    assert p.kind_roles() == ["new", "old"]
    assert p.cluster_inputs("E4", "runc-old") == [
        "results/kind/clusters/old/kubeconfig",
        "results/kind/clusters/old/cluster.json",
        *(f"results/kind/clusters/old/images/{b}.json" for b in BUILDS),
    ]
    assert _plan("local").cluster_inputs("E1", "all-limits") == []
    # the clusters' settings, and the tool cache's (under node_images local the kind binaries are there)
    assert set(json.loads(shlex.split(p.kind_settings_arg())[0])) == {*plan.KIND_CLUSTER_KEYS, "cluster_tools"}


def test_what_a_backend_cannot_express_is_left_out_of_the_plan_with_its_reason():
    p = _plan("kind", profile="quick", cgroup_version=1)
    assert p.left_out and all(reason.startswith("not testable") for reason in p.left_out.values())
    assert any(V1_PIN_REASON in reason for reason in p.left_out.values())
    kept = {(e, v) for e, exp in p.design.experiments.items() for v in exp.variants}
    assert kept and not kept & set(p.left_out)
    assert p.left_out_lines() == sorted(p.left_out_lines())
    assert p.left_out_lines()[0].startswith("throttlelab: ")
    assert json.loads(shlex.split(p.left_out_arg())[0]) == {f"{e}/{v}": r for (e, v), r in p.left_out.items()}
    assert _plan().left_out == {} and json.loads(shlex.split(_plan().left_out_arg())[0]) == {}


def test_the_smoke_target_is_refused_off_a_cluster_and_needs_kinds_cluster_on_kind():
    with pytest.raises(ValueError, match="runs on kind or kubernetes only; this run's backend is 'local'"):
        _plan("local").smoke_inputs()
    assert _plan("kubernetes").smoke_inputs() == []
    # the real node starts from this project's builds: the smoke target builds them first
    local_node = _plan("kubernetes", kubernetes={"cluster": "local"}).smoke_inputs()
    assert "results/cluster-tools/tools.json" in local_node
    assert {"results/node/images/go124mod.tar", "results/build/go124mod/cpulab"} <= set(local_node)
    assert _plan("kind").smoke_inputs()[0] == "results/kind/clusters/new/kubeconfig"


def test_a_bad_configuration_is_a_config_error():
    with pytest.raises(ConfigError, match="backend"):
        _plan("nomad")


def test_a_profile_given_as_a_path_is_named_by_its_stem():
    assert _plan(profile=str(CONFIG / "profiles" / "ci.yaml")).profile_name == "ci"
    assert _plan().repeats("E2a") == _plan().design.experiments["E2a"].repeats and _plan().repeats(None) == 0


def test_the_shell_prelude_runs_the_package_in_snakemakes_interpreter():
    text = plan.shell_prelude("/the project", "/usr/bin/python3", 4242).format()  # shell.prefix() formats it
    assert "export THROTTLELAB_ORCHESTRATOR_PID=4242; " in text
    assert "export THROTTLELAB_PROJECT='/the project'; " in text
    proc = subprocess.run(["bash", "-c", text + "type throttlelab"], capture_output=True, text=True)
    assert proc.returncode == 0 and "/usr/bin/python3 -m throttlelab" in proc.stdout, proc.stderr


def test_the_builds_read_every_go_file_and_go_mod_podgate_apart(tmp_path):
    for name in ("main.go", "go.mod", "README.md", "internal/x/x.go", "podgate/main.go", "podgate/main_test.go"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert plan.workload_sources(tmp_path) == [str(tmp_path / n) for n in ("go.mod", "internal/x/x.go", "main.go")]
    assert plan.podgate_sources(tmp_path / "podgate") == [str(tmp_path / "podgate/main.go")]


def test_a_cluster_tool_projects_job_reads_its_module_and_its_recipe():
    name = "etcd"
    files = platform_jobs.cluster_module_files(PROJECT / "cluster", name)
    assert files == {"gomod": str(PROJECT / "cluster/etcd/go.mod"), "gosum": str(PROJECT / "cluster/etcd/go.sum")}
    recipe = platform_jobs.cluster_project_recipe(name)
    assert len(recipe) == 16 and recipe == platform_jobs.cluster_project_recipe(name)
    assert layout.cluster_tool_manifest(name) == "results/cluster-tools/etcd.json"


# --------------------------------------------------------------------------
# the calibration step (model/calibration.py)


def test_the_calibrated_experiments_get_a_pilot_and_every_metered_run_the_quiet_hosts_floor():
    p = _plan(profile="quick")
    assert p.calibrated_experiments() == ["X5"]
    assert p.pilot_inputs("X5") == ["results/local/calibration/X5.json"] and p.pilot_inputs("E2a") == []
    assert p.host_calibration_file() == "results/local/calibration/host.json"
    assert p.calibration_priority > max(p.priorities.values())
    pilots = json.loads(p.pilot_spec("X5"))
    assert [pilot["rps"] for pilot in pilots] == [15.0, 45.0] and all("target_use" not in p for p in pilots)
    words = p.calibration_args(p.pilot_inputs("X5"), [p.host_calibration_file()])
    assert shlex.split(words) == [
        "--calibration",
        "results/local/calibration/X5.json",
        "--host-calibration",
        "results/local/calibration/host.json",
    ]
    assert p.calibration_args([], []) == ""


def test_editing_one_calibrated_arm_leaves_the_pilot_as_it_was(tmp_path):
    import yaml

    profile = yaml.safe_load((CONFIG / "profiles" / "quick.yaml").read_text())
    before = _plan(profile="quick").pilot_spec("X5")
    profile["experiments"]["X5"]["variants"]["use90"]["target_use"] = 0.85
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump(profile))
    edited = _plan(profile=str(path))
    assert edited.pilot_spec("X5") == before  # so the other arms' runs keep their inputs and params
    assert edited.variant_spec("X5", "use90") != _plan(profile="quick").variant_spec("X5", "use90")


def test_no_quiet_host_calibration_where_runs_are_not_metered_or_none_is_asked_for():
    assert _plan(profile="quick", disturbance={"quiet_calibration_s": 0}).host_calibration_file() is None
    assert _plan(backend="kind", profile="quick").host_calibration_file() is None
    vm = _plan(backend="vm", profile="ci")
    assert vm.host_calibration_file() is None and vm.calibrated_experiments() == []
