"""The jobs of a profile (model/plan.py): the raw logs, the seeded measuring order as priorities, the
calibration step, the vm batch plans, the shell words handed to the runner, and the shell prelude.
Snakemake's DAG is built from these, the results' layout and the platform's plan
(tests/platform/test_platform_jobs.py)."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from conftest import PROJECT
from throttlelab.model import plan, seeds
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
    jobs = [("E2a", v, r) for v in exp.variants for r in range(exp.repeats_of(v))]
    by_priority = sorted(jobs, key=lambda job: -p.priority(*job))
    assert by_priority == seeds.measuring_order(p.design.seed, "E2a", jobs)


def test_a_variant_is_its_canonical_json_and_an_unknown_one_is_named():
    p = _plan()
    first = next(iter(p.design.experiments["E2a"].variants))
    spec = json.loads(p.variant_spec("E2a", first))
    assert spec == p.design.experiments["E2a"].variants[first].to_dict()
    with pytest.raises(ValueError, match="E2a has no variant 'nope' in profile ci"):
        p.variant_spec("E2a", "nope")


def test_the_runner_is_handed_the_backends_settings_the_binaries_and_the_nodes_cpus():
    assert _plan("local").backend_settings_arg() == ""
    word = _plan("kubernetes").backend_settings_arg()
    assert word.startswith("--backend-settings ")
    assert json.loads(shlex.split(word)[1]) == _plan("kubernetes").design.kubernetes
    assert (
        _plan().binary_args(["a/cpulab", "b/cpulab"]) == f"--binary {BUILDS[0]}=a/cpulab --binary {BUILDS[1]}=b/cpulab"
    )
    assert _plan().node_cpus_arg() == "" and _plan(node_cpus="0-1").node_cpus_arg() == "--node-cpus 0-1"


def test_the_real_node_in_a_vm_guest_is_sized_by_the_guests_vcpus():
    """vm: {node: kubernetes}: the plan sizes the node by vm.vcpus (E5's 2.2 CPUs of requests together:
    left out on 2 vCPUs, planned on 10; E4 is read back a few pods at a time on 2)."""
    small = _plan("vm", vm={"node": "kubernetes"})
    assert plan.real_node_in_guest(small.design) and not plan.real_node_on_host(small.design)
    assert ("E5", "pods") in small.left_out and "in the vm guest (2 vCPUs)" in small.left_out[("E5", "pods")]
    assert ("E4", "runc-old") not in small.left_out
    big = _plan("vm", vm={"node": "kubernetes", "vcpus": 10})
    assert ("E5", "pods") not in big.left_out
    assert ("E4", "runc-old") not in big.left_out and ("E4", "runc-new") not in big.left_out


def test_only_kind_is_asked_the_hosts_cgroup_version():
    asked = []

    def version():
        asked.append(True)
        return 2

    plan.make_plan({"backend": "local", "profile": "quick"}, CONFIG, version)
    assert asked == []  # only kind's nodes share this host's kernel
    plan.make_plan({"backend": "kind", "profile": "quick"}, CONFIG, version)
    assert asked == [True]


def test_a_vm_batch_is_the_experiments_jobs_in_the_measuring_order_with_the_runner_options():
    p = _plan("vm", node_cpus="0")
    batch = json.loads(shlex.split(p.batch_plan("E2a"))[0])
    assert batch["common"][:4] == ["--runtime", "runc-new", "--seed", str(p.design.seed)]
    assert batch["common"][-2:] == ["--node-cpus", "0"]
    assert f"--binary={BUILDS[0]}=results/build/{BUILDS[0]}/cpulab" in batch["common"]
    priorities = [p.priority("E2a", job["variant"], job["repeat"]) for job in batch["jobs"]]
    assert priorities == sorted(priorities, reverse=True) and len(priorities) == len(p.raw_logs("E2a"))
    assert sorted(job["out"] for job in batch["jobs"]) == sorted(p.raw_logs("E2a"))
    assert p.raw_logs("E2a")[0].startswith("results/vm/raw/E2a/")


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


def test_a_bad_configuration_is_a_config_error():
    with pytest.raises(ConfigError, match="backend"):
        _plan("nomad")


def test_a_profile_given_as_a_path_is_named_by_its_stem():
    assert _plan(profile=str(CONFIG / "profiles" / "ci.yaml")).profile_name == "ci"


def test_the_builds_read_every_go_file_and_go_mod_podgate_and_podnet_apart(tmp_path):
    for name in ("main.go", "go.mod", "README.md", "internal/x/x.go", "podgate/main.go", "podnet/main.go"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert plan.workload_sources(tmp_path) == [str(tmp_path / n) for n in ("go.mod", "internal/x/x.go", "main.go")]


def test_the_shell_prelude_runs_the_package_in_snakemakes_interpreter():
    text = plan.shell_prelude("/the project", "/usr/bin/python3", 4242).format()  # shell.prefix() formats it
    assert "export THROTTLELAB_ORCHESTRATOR_PID=4242; " in text
    assert "export THROTTLELAB_PROJECT='/the project'; " in text
    proc = subprocess.run(["bash", "-c", text + "type throttlelab"], capture_output=True, text=True)
    assert proc.returncode == 0 and "/usr/bin/python3 -m throttlelab" in proc.stdout, proc.stderr


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


def test_an_experiment_with_a_first_look_has_its_stages_and_a_look_between_them():
    p = _plan(profile="quick")
    assert p.looks == [e for e, exp in p.design.experiments.items() if exp.first_look is not None] != []
    for experiment in p.looks:
        exp = p.design.experiments[experiment]
        first, second = p.raw_logs(experiment, stage=1), p.raw_logs(experiment, stage=2)
        assert sorted(first + second) == sorted(p.raw_logs(experiment)) and second
        # the second stage of the variants the look sends on, and of none when it stops
        one = second[0].split("/")[-2]  # a variant the second stage measures
        mine = p.raw_logs(experiment, stage=2, variants=[one])
        assert mine == [log for log in second if f"/{experiment}/{one}/" in log]
        assert p.raw_logs(experiment, stage=2, variants=[]) == []
        assert p.look_file(experiment) == f"results/local/looks/{experiment}.json"
        # the look runs right after its first stage: below each of its runs, above the second stage's and
        # every run of a later experiment
        look = p.look_priority(experiment)
        assert look == min(p.priority(experiment, v, r) for v, r in exp.runs(1))
        assert look > max(p.priority(experiment, v, r) for v, r in exp.runs(2))
        later = p.experiments[p.experiments.index(experiment) + 1 :]
        assert all(look > p.priority(e, v, r) for e, v, r in p.design.jobs() if e in later)


def test_the_vm_backend_measures_every_experiment_in_one_stage():
    assert _plan(backend="vm", profile="quick").looks == []
