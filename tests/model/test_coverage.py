"""Which variants a backend leaves out, and why (model/coverage.py)."""

from pathlib import Path

import pytest

from throttlelab.model.config import load_design
from throttlelab.model.coverage import cadvisor_misfit, request_over_limit, untestable_variants

CONFIG = Path(__file__).resolve().parents[2] / "config"


def _experiments(profile):
    design = load_design({"profile": profile, "backend": "kind"}, CONFIG)
    return {name: exp.variants for name, exp in design.experiments.items()}


def _e6(profile):
    return _experiments(profile)["E6"]["limit"]


def _over(experiments):
    """Variants with a request above its limit (the scaled profiles' E2b, E7, ...): no Kubernetes backend runs them."""
    return {(e, v) for e, vs in experiments.items() for v, s in vs.items() if request_over_limit(s)}


def _knobs(experiments):
    """Variants asking for a burst budget or a CFS period other than the default (X1, X2)."""
    return {
        (e, v)
        for e, vs in experiments.items()
        for v, s in vs.items()
        if s.burst_us or s.period_us not in (None, 100_000)
    }


def test_kind_on_a_cgroup_v1_host_leaves_out_every_pinned_variant_with_the_reason():
    experiments = _experiments("quick")
    left = untestable_variants("kind", experiments, "runc-new", cgroup_version=1)
    pinned = {(e, v) for e, vs in experiments.items() for v, s in vs.items() if s.cpus or s.node_cpus or s.load_cpus}
    assert pinned and set(left) - {("E6", "limit")} - _knobs(experiments) - _over(experiments) == pinned - _over(
        experiments
    )
    assert all("EBUSY" in left[key] and "cgroup v1" in left[key] for key in pinned - _over(experiments))


def test_kind_on_cgroup_v2_runs_everything_but_an_e6_too_short_for_cadvisor_a_burst_budget_or_a_period():
    experiments = _experiments("quick")
    knobs = _knobs(experiments)
    assert knobs == {("X1", "budget-full"), ("X2", "period20"), ("X2", "period5")}
    for version in (2, None):
        left = untestable_variants("kind", experiments, "runc-new", cgroup_version=version)
        assert set(left) == {("E6", "limit")} | knobs | _over(experiments)


@pytest.mark.parametrize("backend", ["kind", "kubernetes"])
@pytest.mark.parametrize("profile", ["ci", "quick"])
def test_e6_scraped_closer_than_cadvisors_housekeeping_is_listed_on_the_cluster_backends(backend, profile):
    """E6 reads the kubelet's real cAdvisor on kind and kubernetes, which reads a container every
    10-15 s: the ci and quick profiles' scrapes (1.5 s, 4 s apart) cannot be measured there, and the
    plan says so with the reason; local and docker emulate cAdvisor and keep them."""
    experiments = _experiments(profile)
    reason = untestable_variants(backend, experiments, "runc-new", cgroup_version=2)[("E6", "limit")]
    gap = _e6(profile).scrape_gap_ms / 1000
    assert reason == (
        f"not testable on the {backend} backend: it is measured against the kubelet's real cAdvisor "
        f"on the {backend} backend, and {cadvisor_misfit(_e6(profile))}"
    )
    assert f"its scrapes are {gap:g} s apart" in reason and "10-15 s" in reason
    assert untestable_variants("local", experiments, "runc-new", cgroup_version=2) == {}
    assert set(untestable_variants("docker", experiments, "runc-new", cgroup_version=2)) <= _knobs(experiments)


def test_the_papers_e6_fits_cadvisor_and_is_planned_on_the_cluster_backends():
    experiments = _experiments("paper")
    assert cadvisor_misfit(_e6("paper")) is None  # the lab's: a 30 s job, scrapes 19 s apart
    for backend in ("kind", "kubernetes"):
        assert ("E6", "limit") not in untestable_variants(backend, experiments, "runc-new", cgroup_version=2)


def test_an_e6_job_that_ends_before_the_second_scrape_does_not_fit():
    paper = _e6("paper")
    assert cadvisor_misfit(paper.with_changes(rounds=29)) == (
        "its job lasts 29 s (rounds x interval_ms) and the second scrape comes at 29 s; cAdvisor drops a "
        "container's series when the container ends"
    )
    assert "scrapes are 9.999 s apart" in cadvisor_misfit(paper.with_changes(scrape_gap_ms=9999, rounds=40))


def test_burst_budget_is_local_only_and_a_period_local_or_docker():
    experiments = _experiments("quick")
    assert untestable_variants("local", experiments, "runc-new") == {}
    docker = untestable_variants("docker", experiments, "runc-new", cgroup_version=1)
    assert set(docker) == {("X1", "budget-full")}  # --cpu-period expresses X2
    assert all("no flag" in reason for reason in docker.values())
    kube = untestable_variants("kubernetes", experiments, "runc-new")
    assert "cpuCFSQuotaPeriod" in kube[("X2", "period20")] and "burst budget" in kube[("X1", "budget-full")]
    assert ("X2", "period100") not in kube  # the default period is what every cluster has


def test_the_real_node_runs_both_runtimes_and_every_pinned_variant():
    experiments = _experiments("ci")
    existing = untestable_variants("kubernetes", experiments, "runc-new", 1)
    local = untestable_variants("kubernetes", experiments, "runc-new", 1, cluster="local", node_cpus=16)
    runc_old = {
        key
        for key, spec in ((k, experiments[k[0]][k[1]]) for k in existing)
        if spec.runtime == "runc-old" and not (spec.cpus or spec.node_cpus or spec.load_cpus)
    }
    assert runc_old and not runc_old & set(local)  # one node, both runc releases: E4's runc-old variant runs
    pinned = {(e, v) for e, vs in experiments.items() for v, s in vs.items() if s.cpus or s.node_cpus or s.load_cpus}
    # its own cgroup root pinned, a pinned generator on this host
    assert pinned and not (pinned - _over(experiments)) & set(local)
    # cAdvisor's housekeeping; no burst, no period; no request above its limit
    assert set(local) == {("E6", "limit")} | _knobs(experiments) | _over(experiments)


def test_the_real_node_leaves_out_weight_pods_that_ask_for_more_cpu_than_it_has():
    """E5's and E10's "pods" phase request 2.2 CPUs together: a real scheduler refuses them on 2 CPUs
    (the stand-in's nodes had 10; the real node showed it, docs/KUBE_REAL.md). E4's 5.2 are read back a
    few pods at a time (weight_pods.deployment_waves): only a node smaller than its largest pod (2) leaves
    it out."""
    local = untestable_variants("kubernetes", _experiments("ci"), "runc-new", 1, cluster="local", node_cpus=2)
    crowded = {k for k, why in local.items() if "Insufficient cpu" in why}
    assert crowded == {("E5", "pods"), ("E10", "pods")}
    tiny = untestable_variants("kubernetes", _experiments("ci"), "runc-new", 1, cluster="local", node_cpus=1)
    assert "its largest pod requests 2 CPUs and the real node has 1" in tiny[("E4", "runc-old")]


def test_kind_leaves_out_weight_pods_that_ask_for_more_cpu_than_this_host_has():
    """A kind worker is a container of this host and its kubelet counts the host's CPUs: E4's 5.2 CPUs of
    requests do not fit on 2 (the ci profile on the real kind clusters stopped there: Insufficient cpu)."""
    v1 = untestable_variants("kind", _experiments("ci"), "runc-new", 1, node_cpus=2)
    crowded = {k for k, why in v1.items() if "Insufficient cpu" in why}
    assert crowded == {("E4", "runc-new"), ("E4", "runc-old")}  # E5's and E10's pinned phases: v1's reason
    assert "request 5.2 CPUs and a kind worker of this host has 2" in v1[("E4", "runc-old")]
    v2 = untestable_variants("kind", _experiments("ci"), "runc-new", 2, node_cpus=2)
    assert {k for k, why in v2.items() if "Insufficient cpu" in why} == {
        ("E4", "runc-new"),
        ("E4", "runc-old"),
        ("E5", "pods"),
        ("E10", "pods"),
    }
    roomy = untestable_variants("kind", _experiments("ci"), "runc-new", 2, node_cpus=10)
    assert not any("Insufficient cpu" in why for why in roomy.values())


@pytest.mark.parametrize("backend", ["kind", "kubernetes"])
def test_a_request_above_its_limit_is_left_out_on_the_cluster_backends(backend):
    experiments = _experiments("quick")
    left = untestable_variants(backend, experiments, "runc-new", 2)
    over = {(e, v) for e, vs in experiments.items() for v, s in vs.items() if request_over_limit(s)}
    assert ("E2b", "clumped-limit") in over
    assert over <= set(left) and all("requests more CPU than its limit" in left[k] for k in over)
    assert untestable_variants("local", experiments, "runc-new", 2).keys().isdisjoint(over)


def test_the_real_node_in_a_vm_guest_leaves_out_what_the_real_node_does_sized_by_the_guests_vcpus():
    """vm: {node: kubernetes}: the real node's reasons (requests above limits, X1/X2, E6 against cAdvisor,
    weight pods larger than the node), said of the guest; with 10 vCPUs E4's 5.2 CPUs fit at once, with 2 in
    three deployments, with 1 not."""
    experiments = _experiments("ci")
    on_host = untestable_variants("kubernetes", experiments, "runc-new", 1, cluster="local", node_cpus=10)
    in_guest = untestable_variants("vm", experiments, "runc-new", None, cluster="local", node_cpus=10)
    assert set(in_guest) == set(on_host)
    assert all(
        why.startswith("not testable on the real node in the vm guest (10 vCPUs): ") for why in in_guest.values()
    )
    assert not {("E4", "runc-new"), ("E4", "runc-old")} & set(in_guest)  # both runc releases, 5.2 of 10 CPUs
    small = untestable_variants("vm", experiments, "runc-new", None, cluster="local", node_cpus=2)
    assert not {("E4", "runc-new"), ("E4", "runc-old")} & set(small)  # read back in three deployments
    assert ("E5", "pods") in small
    one = untestable_variants("vm", experiments, "runc-new", None, cluster="local", node_cpus=1)
    assert "(1 vCPUs): its largest pod requests 2 CPUs" in one[("E4", "runc-old")]
    # the vm backend's own cgroups (no kubernetes) leave nothing out, as before
    assert untestable_variants("vm", experiments, "runc-new", None) == {}
