"""Every pod of every profile gets, from the API server, the QoS class the design expects.

The experiments build their nodes (captured at deploy, before anything runs); the kube
backend's manifests of those nodes go through the API server's QoS rule (the fake's,
written from the API server's code, not from the model); the class must equal the
model's, and the designed pod directory must sit under that class's level, as kubelet
puts it. On the lab's pods (CPU only, no memory) that is Burstable throughout: the old
rule (Guaranteed when the CPU request equals the limit) fails here on E4, S1, S2 and E8.
"""

from __future__ import annotations

import pytest

from kube_api_server import _qos as api_server_qos
from profile_pods import PROFILES, deployed_nodes
from throttlelab.backends.kube import manifests as mf
from throttlelab.model.node_levels import design_node


@pytest.mark.parametrize("profile", PROFILES)
def test_api_server_qos_equals_the_design(profile):
    ident = mf.RunIdentity(run="r1", host="h", pid=1)
    seen = 0
    for exp, variant, node, _load in deployed_nodes(profile):
        kube = mf.kube_node(node, 10_000)
        paths = {lvl.pod: lvl.path for lvl in design_node(kube, "runc-new", 10) if lvl.level == "pod"}
        for pod in kube.pods:
            manifest = mf.pod_manifest(pod, node_name="worker", image_of=lambda v: f"cpulab:{v}", ident=ident)
            assigned = api_server_qos(manifest["spec"]["containers"]).lower()
            where = f"{profile} {exp}/{variant} pod {pod.name}"
            assert assigned == pod.qos, where
            assert mf.spec_qos(manifest) == assigned, where
            parent = node.name if assigned == "guaranteed" else f"{node.name}/{assigned}"
            assert paths[pod.name] == f"{parent}/pod-{pod.name}", where
            seen += 1
    assert seen > 10
