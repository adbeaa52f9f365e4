"""The pipeline on the vm backend, for real: QEMU guests with cgroup v2 on this host.

- the `lab-node` profile in a 10-vCPU guest: F5 reproduced and the lab's E3 table equal to ours in
  every cell (E3 only: what the assertions read);
- the `ci` profile's E2a, E4 and E5 in 2-vCPU guests, on the local backend under v2 (E3 runs in the
  test above, E1 among the cgroup v2 kernel tests): every raw log says where it ran, E4's readback
  matches the design at every level for both runtime conversions, and an edit of one variant reruns
  only its experiment's guest.

Skipped, with the reason, without QEMU, virtme-ng, busybox-static and a kernel (docs/BACKENDS.md).
"""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest

from conftest import PROJECT, snakemake as run_snakemake
from throttlelab.errors import BackendError
from throttlelab.platform import vm_guest
from throttlelab.model.reference import lab_values

pytestmark = [pytest.mark.vm, pytest.mark.slow, pytest.mark.root]


def _tools_or_skip() -> None:
    try:
        vm_guest.find_tools(vm_guest.VmSettings())
    except BackendError as exc:
        pytest.skip(str(exc))


def snakemake(workdir: Path, *args: str, timeout: float = 2400) -> subprocess.CompletedProcess:
    return run_snakemake(workdir, *args, timeout=timeout)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _guests_of(workdir: Path) -> set[int]:
    """The QEMU processes of a run in ``workdir``: their command line names its results folder (the guest's
    writable folder), which another run's guest on this host does not."""
    found = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if (proc / "comm").read_text().strip().startswith("qemu-system") and str(
                    workdir.resolve()
                ).encode() in (proc / "cmdline").read_bytes():
                    found.add(int(proc.name))
            except OSError:
                continue
    return found


#: What the lab-node test runs of its profile: E3, whose GOMAXPROCS F5, the metrics and the page's cells read.
#: E1, S1 and E4 add 10-vCPU guests and nothing these assertions read (the ci test below checks that an edit
#: reruns only its experiment's batch).
LAB_NODE_EXPERIMENTS = "experiments=[E3]"


def test_lab_node_reproduces_f5_and_the_labs_e3_table_cell_by_cell(tmp_path):
    _tools_or_skip()
    proc = snakemake(tmp_path, "report", "--config", "backend=vm", "profile=lab-node", LAB_NODE_EXPERIMENTS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert not _guests_of(tmp_path), "a QEMU guest outlived the run"
    tables = tmp_path / "results/vm/tables"
    findings = {row["id"]: row for row in _rows(tables / "findings.csv")}
    assert findings["F5"]["verdict"] == "reproduced", findings["F5"]
    lab = lab_values("E3", "gomaxprocs")
    ours = {
        row["variant"]: float(row["value"])
        for row in _rows(tables / "metrics.csv")
        if row["experiment"] == "E3" and row["metric"] == "gomaxprocs"
    }
    assert set(ours) == set(lab)
    assert {v: ours[v] for v in lab} == {v: float(x) for v, x in lab.items()}
    runs = _rows(tables / "runs.csv")
    assert {row["cpus"] for row in runs} == {"10"} and {row["cgroup_version"] for row in runs} == {"2"}
    page = (tmp_path / "results/report/vm-lab-node/index.html").read_text()
    assert "The lab&#39;s values beside ours, cell by cell" in page or "The lab's values beside ours" in page
    assert "14 of 14 cells equal the lab" in page
    assert {row["cpu_accel"] for row in runs} <= {"tcg", "kvm"}


def test_ci_profile_in_a_v2_guest(tmp_path):
    """E2a, E4 and E5 of the ci profile, each experiment in one 2-vCPU guest (E3 runs in the lab-node guest
    above, E1 among the cgroup v2 kernel tests). One repeat of each variant: what is checked here is where
    each run's cgroups are and what was read back, which a repeat does not change (an emulated guest's wall
    clock decides no finding); then that an edit of one variant reruns only its experiment's guest."""
    _tools_or_skip()
    experiments = ("E2a", "E4", "E5")
    targets = [f"raw_{e}" for e in experiments]
    proc = snakemake(tmp_path, *targets, "--config", "backend=vm", "profile=ci", "repeats=1")
    assert proc.returncode == 0, proc.stderr[-4000:]
    raw = tmp_path / "results/vm/raw"
    logs = sorted(p for p in raw.glob("*/*/rep[0-9]*.jsonl") if ".disturbed-" not in p.name)
    assert {p.parent.parent.name for p in logs} == set(experiments)
    for path in logs:
        meta = json.loads(path.read_text().splitlines()[0])
        env = meta["environment"]
        assert meta["backend"] == "vm" and env["cgroup_version"] == 2 and env["vm"]["vcpus"] == 2
        assert env["vm"]["accel"] in ("tcg", "kvm") and env["cpu_count"] == 2
    for runtime in ("runc-new", "runc-old"):
        records = [json.loads(line) for line in (raw / "E4" / runtime / "rep0.jsonl").read_text().splitlines()]
        levels = [r for r in records if r["type"] == "readback"]
        assert {r["level"] for r in levels} >= {"node", "qos", "pod", "container"}
        assert all(not r["mismatches"] for r in levels)
        assert all(r["actual"]["weight"] is not None and r["actual"]["burst_us"] == 0 for r in levels)
    # the batches' logs say each experiment booted one guest
    for experiment in experiments:
        text = (tmp_path / f"results/vm/logs/{experiment}/batch.log").read_text()
        assert text.count("booting a 2-vCPU guest") == 1
    # one edited variant of E2a reruns E2a's batch (its guest), and no other experiment's
    edited = tmp_path / "ci-edited.yaml"
    profile = (PROJECT / "config/profiles/ci.yaml").read_text()
    assert profile.count("limit500m: {limit: 125m}") == 1
    edited.write_text(profile.replace("limit500m: {limit: 125m}", "limit500m: {limit: 130m}"))
    dry = snakemake(tmp_path, "-n", *targets, "--config", "backend=vm", f"profile={edited}", "repeats=1")
    assert dry.returncode == 0, dry.stderr[-3000:]
    batches = {line.split()[0] for line in dry.stdout.splitlines() if line.startswith("run_batch_")}
    assert batches == {"run_batch_E2a"}, dry.stdout[-3000:]
