"""Which variants a backend leaves out, and why (model/coverage.py)."""

from pathlib import Path

import pytest

from throttlelab.model.config import load_design
from throttlelab.model.coverage import cadvisor_misfit, untestable_variants

CONFIG = Path(__file__).resolve().parents[2] / "config"


def _experiments(profile):
    design = load_design({"profile": profile, "backend": "kind"}, CONFIG)
    return {name: exp.variants for name, exp in design.experiments.items()}


def _e6(profile):
    return _experiments(profile)["E6"]["limit"]


def test_kind_on_a_cgroup_v1_host_leaves_out_every_pinned_variant_with_the_reason():
    experiments = _experiments("quick")
    left = untestable_variants("kind", experiments, "runc-new", cgroup_version=1)
    pinned = {(e, v) for e, vs in experiments.items() for v, s in vs.items() if s.cpus or s.node_cpus or s.load_cpus}
    assert pinned and set(left) - {("E6", "limit")} == pinned
    assert all("EBUSY" in left[key] and "cgroup v1" in left[key] for key in pinned)


def test_kind_on_cgroup_v2_runs_everything_but_an_e6_too_short_for_cadvisor():
    experiments = _experiments("quick")
    for version in (2, None):
        left = untestable_variants("kind", experiments, "runc-new", cgroup_version=version)
        assert set(left) == {("E6", "limit")}


@pytest.mark.parametrize("backend", ["kind", "kubernetes"])
@pytest.mark.parametrize("profile", ["ci", "quick"])
def test_e6_scraped_closer_than_cadvisors_housekeeping_is_listed_on_the_cluster_backends(backend, profile):
    """E6 reads the kubelet's real cAdvisor on kind and kubernetes, which reads a container every
    10-15 s: the ci and quick profiles' scrapes (1.5 s, 4 s apart) cannot be measured there, and the
    plan says so with the reason; local and docker emulate cAdvisor and keep them."""
    experiments = _experiments(profile)
    reason = untestable_variants(backend, experiments, "runc-new", cgroup_version=2)[("E6", "limit")]
    gap = _e6(profile).scrape_gap_ms / 1000
    assert reason == (f"not testable on the {backend} backend: it is measured against the kubelet's real cAdvisor "
                      f"on the {backend} backend, and {cadvisor_misfit(_e6(profile))}")
    assert f"its scrapes are {gap:g} s apart" in reason and "10-15 s" in reason
    for other in ("local", "docker"):
        assert untestable_variants(other, experiments, "runc-new", cgroup_version=2) == {}


def test_the_papers_e6_fits_cadvisor_and_is_planned_on_the_cluster_backends():
    experiments = _experiments("paper")
    assert cadvisor_misfit(_e6("paper")) is None  # the lab's: a 30 s job, scrapes 19 s apart
    for backend in ("kind", "kubernetes"):
        assert ("E6", "limit") not in untestable_variants(backend, experiments, "runc-new", cgroup_version=2)


def test_an_e6_job_that_ends_before_the_second_scrape_does_not_fit():
    paper = _e6("paper")
    assert cadvisor_misfit(paper.with_changes(rounds=29)) == (
        "its job lasts 29 s (rounds x interval_ms) and the second scrape comes at 29 s; cAdvisor drops a "
        "container's series when the container ends")
    assert "scrapes are 9.999 s apart" in cadvisor_misfit(paper.with_changes(scrape_gap_ms=9999, rounds=40))
