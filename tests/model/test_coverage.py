"""Which variants a backend leaves out, and why (model/coverage.py)."""

from pathlib import Path

from throttlelab.model.config import load_design
from throttlelab.model.coverage import untestable_variants

CONFIG = Path(__file__).resolve().parents[2] / "config"


def _experiments(profile):
    design = load_design({"profile": profile, "backend": "kind"}, CONFIG)
    return {name: exp.variants for name, exp in design.experiments.items()}


def test_kind_on_a_cgroup_v1_host_leaves_out_every_pinned_variant_with_the_reason():
    experiments = _experiments("quick")
    left = untestable_variants("kind", experiments, "runc-new", cgroup_version=1)
    pinned = {(e, v) for e, vs in experiments.items() for v, s in vs.items() if s.cpus or s.node_cpus or s.load_cpus}
    assert pinned and set(left) == pinned
    assert all("EBUSY" in reason and "cgroup v1" in reason for reason in left.values())


def test_kind_on_cgroup_v2_runs_everything():
    experiments = _experiments("quick")
    assert untestable_variants("kind", experiments, "runc-new", cgroup_version=2) == {}
    assert untestable_variants("kind", experiments, "runc-new") == {}
