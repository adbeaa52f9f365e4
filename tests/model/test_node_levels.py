"""The placement model and the per-level design reproduce the lab's E1/E4 numbers."""

import pytest

from throttlelab.model.node_levels import design_node
from throttlelab.model.placement import Container, Node, Pod, format_cpuset, parse_cpuset, qos_class


def _c(name, req, lim):
    return Container(name, ("info",), request_milli=req, limit_milli=lim)


def _levels(node, runtime="runc-new", cpus=10):
    return {lvl.path: lvl for lvl in design_node(node, runtime, cpus)}


def test_e1_all_limits_matches_the_lab():
    node = Node("node", (Pod("e1", (_c("app", 500, 2000), _c("sidecar", 100, 500))),))
    levels = _levels(node)
    assert levels["node"].weight == 391  # kubepods for 10 allocatable CPUs
    pod = levels["node/burstable/pod-e1"]
    assert (pod.quota_us, pod.weight) == (250_000, 24)
    assert (levels["node/burstable/pod-e1/app"].quota_us, levels["node/burstable/pod-e1/app"].weight) == (200_000, 59)
    assert (levels["node/burstable/pod-e1/sidecar"].quota_us, levels["node/burstable/pod-e1/sidecar"].weight) == (
        50_000,
        17,
    )


def test_e1_partial_pod_has_no_quota():
    node = Node("node", (Pod("e1", (_c("app", 500, 2000), _c("sidecar", 100, None))),))
    levels = _levels(node)
    assert levels["node/burstable/pod-e1"].quota_us is None
    assert levels["node/burstable/pod-e1/sidecar"].quota_us is None


def test_e4_weights_for_both_runtimes():
    two = Pod("two", (_c("small", 100, None), _c("big", 1000, None)))
    node = Node("node", (Pod("p100m", (_c("spin", 100, None),)), Pod("p1", (_c("spin", 1000, None),)), two))
    new, old = _levels(node, "runc-new"), _levels(node, "runc-old")
    assert new["node/burstable/pod-p100m"].weight == 4
    assert new["node/burstable/pod-p1"].weight == 39
    assert new["node/burstable/pod-two"].weight == 43
    assert (new["node/burstable/pod-two/small"].weight, new["node/burstable/pod-two/big"].weight) == (17, 100)
    assert (old["node/burstable/pod-two/small"].weight, old["node/burstable/pod-two/big"].weight) == (4, 39)


def test_guaranteed_pod_sits_under_the_node():
    # Guaranteed needs cpu AND memory limits equal to their requests (kubelet's GetPodQOS)
    gib = 1 << 30
    node = Node(
        "node",
        (
            Pod(
                "g",
                (
                    Container(
                        "c", ("info",), request_milli=1000, limit_milli=1000, request_memory=gib, limit_memory=gib
                    ),
                ),
            ),
        ),
    )
    paths = [lvl.path for lvl in design_node(node, "runc-new", 2)]
    assert "node/pod-g" in paths and not any("burstable" in p for p in paths)


def test_cpu_only_request_equal_limit_is_burstable():
    # the lab on e4-req1-limit1: only CPU is set, no memory, so it is still Burstable
    node = Node("node", (Pod("g", (_c("c", 1000, 1000),)),))
    levels = _levels(node)
    assert node.pods[0].qos == "burstable"
    assert "node/burstable/pod-g" in levels and "node/pod-g" not in levels
    assert levels["node/burstable"].weight == 39  # its request counts at the burstable level


@pytest.mark.parametrize(
    "containers, qos",
    [
        ([((None, None), (None, None))], "besteffort"),
        ([((None, 1000), (None, 1 << 30))], "guaranteed"),  # requests default to limits
        ([((1000, 1000), (1 << 30, 1 << 30)), ((100, 100), (None, None))], "burstable"),  # every container
        ([((500, 1000), (1 << 30, 1 << 30))], "burstable"),
        ([((None, None), (1 << 20, None))], "burstable"),
        ([((0, 0), (0, 0))], "besteffort"),  # zero counts as unset
    ],
)
def test_qos_class_as_kubelet(containers, qos):
    assert qos_class(containers) == qos


def test_e4_burstable_level_is_what_kubelet_writes():
    # all five lab pods are burstable (p1-limited too): 100m + 1 + 2 + 1 + 1.1 = 5.2 CPUs -> 203,
    # the lab's 203-207 with the node's other burstable pods on top
    from throttlelab.model.weight_pods import E4_PODS, lab_pods

    node = Node("node", lab_pods(tuple(n for n, _ in E4_PODS), ("info",), "go124mod"))
    levels = _levels(node)
    assert levels["node/burstable"].weight == 203
    assert "node/burstable/pod-p1-limited" in levels


def test_besteffort_qos_level_has_minimum_weight():
    node = Node("node", (Pod("b", (Container("c", ("info",)),)),))
    levels = _levels(node)
    assert levels["node/besteffort"].weight == 1


def test_parents_come_before_children():
    node = Node("node", (Pod("e1", (_c("app", 500, 2000),)),))
    paths = [lvl.path for lvl in design_node(node, "runc-new", 2)]
    for i, path in enumerate(paths):
        assert all(not p.startswith(path + "/") for p in paths[:i])


@pytest.mark.parametrize("bad", ["Node", "a_b", "-a", ""])
def test_names_are_checked(bad):
    with pytest.raises(ValueError):
        Node(bad, ())


def test_cpuset_round_trip():
    assert parse_cpuset("0-2,5") == [0, 1, 2, 5]
    assert format_cpuset([0, 1, 2, 5]) == "0-2,5"
    assert format_cpuset([1]) == "1"


def test_node_period_sets_every_quota_and_burst_budget_sums_at_the_pod():
    """X1/X2: the node's CFS period scales every quota; a pod's budget is its containers' sum."""
    app = Container("app", ("burst",), request_milli=100, limit_milli=250, burst_us=2_500)
    side = Container("side", ("burst",), request_milli=100, limit_milli=250, burst_us=1_000)
    levels = _levels(Node("node", (Pod("x", (app, side)),), period_us=20_000))
    pod = levels["node/burstable/pod-x"]
    assert (pod.quota_us, pod.period_us, pod.burst_us) == (10_000, 20_000, 3_500)
    assert (levels["node/burstable/pod-x/app"].quota_us, levels["node/burstable/pod-x/app"].burst_us) == (5_000, 2_500)
    assert levels["node"].period_us == 20_000
    # no budget asked: nothing is written (the kernel's 0 stays)
    plain = _levels(Node("node", (Pod("x", (_c("app", 100, 250),)),)))
    assert plain["node/burstable/pod-x"].burst_us is None and plain["node/burstable/pod-x"].period_us == 100_000


def test_burst_budget_above_the_quota_or_without_a_limit_is_refused():
    with pytest.raises(ValueError, match="exceeds the quota"):
        design_node(
            Node("node", (Pod("x", (Container("a", ("burst",), limit_milli=250, burst_us=25_001),)),)), "runc-new", 2
        )
    with pytest.raises(ValueError, match="needs a CPU limit"):
        Container("a", ("burst",), burst_us=1_000)
    with pytest.raises(ValueError, match="outside the kernel"):
        Node("node", (), period_us=500)
