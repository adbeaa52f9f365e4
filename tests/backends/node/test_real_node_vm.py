"""The real node on cgroup v2: inside a vm backend guest (Debian's kernel, QEMU), the lab's node runs a
pod under each RuntimeClass, and the container level's cpu.weight is what each runc writes: runc 1.4.3
(runc-new) the quadratic conversion of docs/LAB.md §2, runc 1.3.0 (runc-old) the linear one. A cgroup v1 host
cannot show this (runc writes cpu.shares unchanged there).

Needs root, the vm backend's tools (qemu-system-x86, linux-image-amd64, busybox-static, virtme-ng) and the
cluster tools built; skipped with the reason otherwise. The guest is the session's one v2 guest
(tests/v2_guest.py): the node starts there after the cgroup v2 kernel tests have run. Afterwards nothing of it is on this host: no QEMU
or vng, no process of the node, no cgroup, link or mount of the lab's, no node folder."""

from __future__ import annotations

import json

import pytest

from throttlelab.model import quantities as q

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.real_node, pytest.mark.vm]


def test_the_container_weight_is_each_runcs_conversion_on_cgroup_v2(v2_guest):
    """Read in the session's v2 guest (tests/v2_guest.py), after the cgroup v2 kernel tests there."""
    if v2_guest.node_skipped:
        pytest.skip(v2_guest.node_skipped)
    out = v2_guest.out
    assert v2_guest.weights.code == 0, (v2_guest.weights.log + v2_guest.log)[-4000:]
    assert not v2_guest.left, f"the guest left something on this host: {v2_guest.left}"
    read = json.loads((out / "weights.json").read_text())
    print(f"the shared guest: {v2_guest.took_s:.0f} s in all; the node's step in it: {json.dumps(read)}")
    assert read["cgroup_version"] == 2
    assert read["runc"]["runc-new"].startswith("runc version 1.4.3")
    assert read["runc"]["runc-old"].startswith("runc version 1.3.0")
    for runtime, conversion in (("runc-new", q.shares_to_weight_quadratic), ("runc-old", q.shares_to_weight_linear)):
        for name, container in read["pods"][runtime]["containers"].items():
            shares = q.milli_to_shares(q.parse_cpu(container["request"]))
            assert container["weight"] == conversion(shares), (runtime, name, container, shares)
            assert container["weight"] == q.container_weight(shares, runtime), (runtime, name)
        # the pod level is kubelet's (linear), the same under both runc releases: 600m -> 24
        assert read["pods"][runtime]["pod_weight"] == q.shares_to_weight_linear(q.milli_to_shares(600)) == 24
    new, old = read["pods"]["runc-new"]["containers"], read["pods"]["runc-old"]["containers"]
    assert (new["small"]["weight"], new["big"]["weight"]) == (17, 59)  # docs/LAB.md §2's examples
    assert (old["small"]["weight"], old["big"]["weight"]) == (4, 20)
    assert all(new[c]["weight"] != old[c]["weight"] for c in new)
