"""Which variants a backend leaves out, and why (model/coverage.py)."""

from pathlib import Path

from throttlelab.model.config import load_design
from throttlelab.model.coverage import untestable_variants

CONFIG = Path(__file__).resolve().parents[2] / "config"


def _experiments(profile):
    design = load_design({"profile": profile, "backend": "kind"}, CONFIG)
    return {name: exp.variants for name, exp in design.experiments.items()}


def _knobs(experiments):
    """Variants asking for a burst budget or a CFS period other than the default (X1, X2)."""
    return {(e, v) for e, vs in experiments.items() for v, s in vs.items()
            if s.burst_us or s.period_us not in (None, 100_000)}


def test_kind_on_a_cgroup_v1_host_leaves_out_every_pinned_variant_with_the_reason():
    experiments = _experiments("quick")
    left = untestable_variants("kind", experiments, "runc-new", cgroup_version=1)
    pinned = {(e, v) for e, vs in experiments.items() for v, s in vs.items() if s.cpus or s.node_cpus or s.load_cpus}
    assert pinned and set(left) - _knobs(experiments) == pinned
    assert all("EBUSY" in left[key] and "cgroup v1" in left[key] for key in pinned)


def test_kind_on_cgroup_v2_runs_everything_but_a_burst_budget_or_a_period():
    experiments = _experiments("quick")
    knobs = _knobs(experiments)
    assert knobs == {("X1", "budget-half"), ("X1", "budget-full"), ("X2", "period20"), ("X2", "period5")}
    assert set(untestable_variants("kind", experiments, "runc-new", cgroup_version=2)) == knobs
    assert set(untestable_variants("kind", experiments, "runc-new")) == knobs


def test_burst_budget_is_local_only_and_a_period_local_or_docker():
    experiments = _experiments("quick")
    assert untestable_variants("local", experiments, "runc-new") == {}
    docker = untestable_variants("docker", experiments, "runc-new", cgroup_version=1)
    assert set(docker) == {("X1", "budget-half"), ("X1", "budget-full")}  # --cpu-period expresses X2
    assert all("no flag" in reason for reason in docker.values())
    kube = untestable_variants("kubernetes", experiments, "runc-new")
    assert "cpuCFSQuotaPeriod" in kube[("X2", "period20")] and "burst budget" in kube[("X1", "budget-full")]
    assert ("X2", "period100") not in kube  # the default period is what every cluster has
