"""E4's deployments on a node smaller than the lab's (model/weight_pods.deployment_waves)."""

from __future__ import annotations

import itertools
import random

import pytest

from throttlelab.model.placement import Container, Pod
from throttlelab.model.weight_pods import deployment_waves, lab_pods, largest_pod_milli, pod_names, requested_milli

LAB = lab_pods(pod_names("E4", None), ("info",), "go124mod")


def names(waves):
    return [[p.name for p in wave] for wave in waves]


def test_all_at_once_where_they_fit_or_where_nothing_refuses_them():
    assert requested_milli(pod_names("E4", None)) == 5200 and largest_pod_milli(pod_names("E4", None)) == 2000
    assert names(deployment_waves(LAB, None)) == [[p.name for p in LAB]]
    assert names(deployment_waves(LAB, 5200)) == [[p.name for p in LAB]]


def test_a_two_cpu_node_reads_the_lab_back_in_three_deployments():
    # largest first: p2 fills one; two (1.1) starts the second; p1 does not fit beside it and starts a
    # third, which p1-limited fills; p100m joins the second. Each keeps the lab's order.
    assert names(deployment_waves(LAB, 2000)) == [["p2"], ["p100m", "two"], ["p1", "p1-limited"]]
    assert names(deployment_waves(LAB, 3000)) == [["p1", "p2"], ["p100m", "p1-limited", "two"]]


def test_a_pod_larger_than_the_node_is_named():
    with pytest.raises(ValueError, match=r"p2 \(2\) request more CPU than the node leaves free \(1900m\)"):
        deployment_waves(LAB, 1900)


def _pod(k: int, milli: int) -> Pod:
    return Pod(f"p{k}", (Container("c", ("info",), request_milli=milli),))


def test_every_pod_once_no_deployment_over_the_node_and_none_that_could_merge():
    rng = random.Random(24)
    for _ in range(500):
        requests = [rng.randint(1, 2000) for _ in range(rng.randint(1, 8))]
        free = rng.randint(2000, 6000)
        pods = tuple(_pod(k, m) for k, m in enumerate(requests))
        waves = deployment_waves(pods, free)
        assert sorted(p.name for wave in waves for p in wave) == sorted(p.name for p in pods)
        loads = [sum(p.request_milli for p in wave) for wave in waves]
        assert all(load <= free for load in loads)
        # first fit never leaves two deployments that one could hold
        assert all(a + b > free for a, b in itertools.combinations(loads, 2))
        order = {p.name: k for k, p in enumerate(pods)}
        assert all([order[p.name] for p in wave] == sorted(order[p.name] for p in wave) for wave in waves)
