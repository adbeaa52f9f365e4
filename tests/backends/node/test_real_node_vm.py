"""The real node on cgroup v2: inside a vm backend guest (Debian's kernel, QEMU), the lab's node runs a
pod under each RuntimeClass, and the container level's cpu.weight is what each runc writes: runc 1.4.3
(runc-new) the quadratic conversion of docs/LAB.md §2, runc 1.3.0 (runc-old) the linear one. A cgroup v1 host
cannot show this (runc writes cpu.shares unchanged there).

Needs root, the vm backend's tools (qemu-system-x86, linux-image-amd64, busybox-static, virtme-ng) and the
cluster tools built; skipped with the reason otherwise. Afterwards nothing of it is on this host: no QEMU
or vng, no process of the node, no cgroup, link or mount of the lab's, no node folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from throttlelab.platform import real_node as nc
from throttlelab.errors import BackendError
from throttlelab.platform import vm_guest
from throttlelab.platform.tool_build import ToolsSettings, cached
from throttlelab.model import quantities as q

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.real_node, pytest.mark.vm]
PROJECT = Path(__file__).resolve().parents[3]
GUEST_SCRIPT = Path(__file__).with_name("guest_weights.py")
VCPUS = 2  # the two pods request 1.2 CPUs in all


def _skip_without_tools() -> None:
    if os.geteuid() != 0:
        pytest.skip("the real node needs root")
    try:
        vm_guest.find_tools(vm_guest.VmSettings())
    except BackendError as exc:
        pytest.skip(str(exc))
    rows = cached(PROJECT / "cluster", ToolsSettings.from_mapping(None))
    problems = [f"{r['binary'].name}: {r['problem']}" for r in rows if r["problem"] and nc.node_needs(r)]
    if problems:
        pytest.skip("the cluster tools are not built (snakemake --cores 2 cluster_tools): " + "; ".join(problems[:3]))
    if not any(Path(d, "catatonit").is_file() for d in ("/usr/bin", "/usr/sbin", "/bin")):
        pytest.skip("catatonit is not installed (apt-get install catatonit)")
    if not any(Path(d, "bridge").is_file() for d in nc.CNI_BIN_DIRS):
        pytest.skip("the CNI plugins are not installed (apt-get install containernetworking-plugins)")


def _others(name: str) -> bool:
    """Whether a node folder, cgroup or bridge belongs to another real node of this host that is running
    now (another run's supervisor: named by its pid, the bridge by its pid mod 100000)."""
    digits = "".join(c for c in name if c.isdigit())
    if not digits:
        return False
    alive = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    return any(pid == int(digits) or (name.startswith("tlnode") and pid % 100000 == int(digits)) for pid in alive)


def host_state(out: Path) -> dict:
    """What a guest running the node could leave on this host (less what other runs' live nodes hold)."""
    procs = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            # vng, virtme-run and QEMU name the guest's writable folder (out): this test's guest, not another run's
            if str(out).encode() in cmd or GUEST_SCRIPT.name.encode() in cmd:
                procs.append(f"{proc.name}: {cmd[:80]!r}")
    cgroups = sorted(str(p) for p in Path("/sys/fs/cgroup").glob("*/throttlelab-node-*"))
    cgroups += sorted(str(p) for p in Path("/sys/fs/cgroup").glob("throttlelab-node-*"))
    links = sorted(p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith("tlnode"))
    mounts = [
        line
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if str(nc.NODES_DIR) in line or str(out) in line
    ]
    folders = sorted(p.name for p in nc.NODES_DIR.iterdir() if p.is_dir()) if nc.NODES_DIR.is_dir() else []
    return {
        "processes": procs,
        "cgroups": [c for c in cgroups if not _others(Path(c).name)],
        "links": [link for link in links if not _others(link)],
        "mounts": mounts,
        "folders": [f for f in folders if not _others(f)],
    }


def test_the_container_weight_is_each_runcs_conversion_on_cgroup_v2(tmp_path):
    _skip_without_tools()
    out = tmp_path / "guest"
    before = host_state(out)
    assert not before["processes"], before
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "throttlelab.platform.vm_guest",
            "run",
            "--vcpus",
            str(VCPUS),
            "--memory",
            "3G",
            "--kubernetes",
            "--rwdir",
            str(out),
            "--timeout-s",
            "1500",
            "--env",
            f"PYTHONPATH={PROJECT}",
            "--",
            sys.executable,
            str(GUEST_SCRIPT),
            str(out),
        ],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=1600,
    )
    took = time.monotonic() - started
    after = host_state(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "guest.log").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert after == before, "the guest left something on this host"
    read = json.loads((out / "weights.json").read_text())
    print(f"guest with the real node: {took:.0f} s in all; in it: {json.dumps(read)}")
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
