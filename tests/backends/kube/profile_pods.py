"""Every node the experiments of a profile deploy, captured offline: each experiment runs against a
backend whose deploy() stops it at once, so what it would deploy (its node, and the load
generator's placement where it has one) is seen without a cluster or a workload.

Shared by the tests that check every Pod the kube backends would send (QoS, Pod Security)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from throttlelab.backends.base import Capabilities
from throttlelab.experiments import REGISTRY, Context
from throttlelab.model.config import load_design
from throttlelab.model.placement import LoadPlacement, Node

CONFIG = Path(__file__).resolve().parents[3] / "config"
PROFILES = ("ci", "quick", "paper")


class _Captured(Exception):
    def __init__(self, node: Node, load: LoadPlacement | None) -> None:
        super().__init__(node.name)
        self.node, self.load = node, load


class _CaptureBackend:
    def deploy(self, node, load=None):
        raise _Captured(node, load)

    def __getattr__(self, name):  # anything else an experiment asks before deploying
        raise AssertionError(f"experiment asked the backend for {name} before deploying")


def deployed_nodes(profile: str) -> Iterator[tuple[str, str, Node, LoadPlacement | None]]:
    """(experiment, variant, node, load placement) for every variant of the profile (kind's design)."""
    design = load_design({"profile": profile, "backend": "kind"}, CONFIG)
    caps = Capabilities(cpus=10, cgroup_version=2, can_pin_cpus=True, has_pause_level=True, runtime="runc-new")
    for exp in design.experiments.values():
        for variant, spec in exp.variants.items():
            ctx = Context(backend=_CaptureBackend(), capabilities=caps, node_cpus=None, seed=1)
            with pytest.raises(_Captured) as captured:
                REGISTRY[exp.name](spec, ctx)
            yield exp.name, variant, captured.value.node, captured.value.load
