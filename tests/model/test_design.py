"""The placement model and the per-level design reproduce the lab's E1/E4 numbers."""

import pytest

from throttlelab.model.design import design_node
from throttlelab.model.placement import Container, Node, Pod, format_cpuset, parse_cpuset


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
    assert (levels["node/burstable/pod-e1/sidecar"].quota_us, levels["node/burstable/pod-e1/sidecar"].weight) == (50_000, 17)


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
    node = Node("node", (Pod("g", (Container("c", ("info",), request_milli=1000, limit_milli=1000),)),))
    paths = [lvl.path for lvl in design_node(node, "runc-new", 2)]
    assert "node/pod-g" in paths and not any("burstable" in p for p in paths)


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
