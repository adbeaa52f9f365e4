"""kind's node side: the script that finds each pod's cgroups in a node container (here: run by
this host's sh on a fixture tree laid out as kubelet lays it out in a kind node), the files then
read as the backend reads a node's (through /proc/<pid>/root), the docs/LAB.md §2 values they must find, runc's conversion by version, the kind binary checks, and, where a
Docker engine answers, cpuset pinning of a real container, always restored (finally, sweep,
guardian after SIGKILL), and the kind image with podgate gating cpulab in a real container."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest

from conftest import PROJECT
from conftest import E1_NODE as E1
from throttlelab.host.docker_engine import kind_engine_client
from throttlelab.backends.kind import node_cgroups
from throttlelab.platform import kind_clusters as clusters, kind_pins as pins, workload_images
from throttlelab.platform import kind_nodes
from throttlelab.backends.kube import manifests as mf
from throttlelab.backends.base import BackendError
from throttlelab.backends.kube.pod_readback import compare, kube_design
from throttlelab.backends.kube.pod_workloads import records_from_log
from throttlelab.model.placement import Node
from throttlelab.model.runtime import runc_conversion

# -- the node-side scripts on a fixture tree -------------------------------------------------------------

UID = "3f1c2b7a-9d4e-4c1b-8a2f-6e5d4c3b2a10"
APP, SIDECAR, SANDBOX = "a" * 64, "b" * 64, "c" * 64
CORE_DNS = {
    "spec": {"containers": [{"resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "170Mi"}}}]},
    "status": {"qosClass": "Burstable"},
}


def write(path: Path, **files: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (path / name.replace("_", ".", 1) if name.startswith("cpu_") else path / name).write_text(content)


def cg(d: Path, weight: int, quota: str, cpus: str | None = None) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "cpu.weight").write_text(f"{weight}\n")
    (d / "cpu.max").write_text(f"{quota} 100000\n")
    (d / "cpu.stat").write_text("usage_usec 900\nnr_periods 3\nnr_throttled 1\nthrottled_usec 50\n")
    if cpus:
        (d / "cpuset.cpus.effective").write_text(f"{cpus}\n")


@pytest.fixture
def kind_node_tree(tmp_path) -> Path:
    """/sys/fs/cgroup of a kind worker on cgroup v2 (systemd driver, cgroup root /kubelet) holding E1
    all-limits on a 10-CPU node with the values of docs/LAB.md §2, next to kindnet (guaranteed) and coredns."""
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    pods = root / "kubelet.slice" / "kubelet-kubepods.slice"
    cg(pods, 391, "max", "0-9")
    cg(pods / "kubelet-kubepods-pod0a9e6c2e_7a51_4f2a_8c1e_000000000001.slice", 4, "10000")  # kindnet
    burstable = pods / "kubelet-kubepods-burstable.slice"
    cg(burstable, 28, "max")
    cg(burstable / "kubelet-kubepods-burstable-pod0a9e6c2e_7a51_4f2a_8c1e_000000000003.slice", 4, "max")  # coredns
    pod = burstable / f"kubelet-kubepods-burstable-pod{UID.replace('-', '_')}.slice"
    cg(pod, 24, "250000")
    cg(pod / f"cri-containerd-{SANDBOX}.scope", 1, "max")
    cg(pod / f"cri-containerd-{APP}.scope", 59, "200000")
    cg(pod / f"cri-containerd-{SIDECAR}.scope", 17, "50000")
    (root / "system.slice").mkdir()
    return root


def run_script(script: str, name: str, args: list[str], root: Path) -> str:
    out = subprocess.run(
        ["sh", "-c", script, name, *args],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "CGROUP_ROOT": str(root)},
        check=True,
    )
    return out.stdout


def read_files(paths: list[str]) -> dict[str, str | None]:
    """The files, read as the kind backend reads a node's: through /proc/<pid>/root (here this test's
    own process, whose root is this host's)."""
    files = kind_nodes.NodeFiles("this-host", os.getpid)
    try:
        return {path: files.read_optional(path) for path in paths}
    finally:
        files.close()


@pytest.mark.fast
def test_the_node_scripts_find_and_read_every_level(kind_node_tree):
    layout = node_cgroups.parse_discover(run_script(node_cgroups.DISCOVER, "discover", [UID], kind_node_tree))
    assert layout.version == 2
    assert layout.pod_dirs[UID].endswith(f"pod{UID.replace('-', '_')}.slice")
    assert len(layout.children[UID]) == 3
    ids = {("e1", "app"): APP, ("e1", "sidecar"): SIDECAR}
    dirs = node_cgroups.level_dirs(E1, layout, {"e1": UID}, ids)
    assert set(dirs) == {
        "node",
        "node/burstable",
        "node/burstable/pod-e1",
        "node/burstable/pod-e1/app",
        "node/burstable/pod-e1/sidecar",
        "node/burstable/pod-e1/pause",
    }
    assert dirs["node/burstable/pod-e1/pause"].endswith(f"cri-containerd-{SANDBOX}.scope")
    paths = [f"{d}/{f}" for d in dirs.values() for f in node_cgroups.V2_FILES]
    files = read_files(paths)
    read = {path: node_cgroups.settings_of(d, files, 2) for path, d in dirs.items()}
    assert read["node"]["cpus"] == "0-9" and read["node/burstable/pod-e1/app"]["cpus"] is None

    # the design for a real node (allocatable 10 CPUs, coredns beside us) gives the lab's own numbers (docs/LAB.md §4)
    levels = kube_design(mf.kube_node(E1, 10_000), "runc-new", [CORE_DNS])
    for level in levels:
        d = level.design
        designed = {"quota_us": d.quota_us, "period_us": d.period_us, "weight": d.weight}
        assert compare(designed, read[d.path], 2) == [], d.path
    assert {lv.design.path: lv.design.weight for lv in levels} == {
        "node": 391,
        "node/burstable": 28,
        "node/burstable/pod-e1": 24,
        "node/burstable/pod-e1/app": 59,
        "node/burstable/pod-e1/sidecar": 17,
    }


@pytest.mark.fast
def test_a_missing_file_reads_as_none(kind_node_tree, tmp_path):
    files = read_files([f"{kind_node_tree}/cgroup.controllers", "/nope/cpu.max"])
    assert files["/nope/cpu.max"] is None and files[f"{kind_node_tree}/cgroup.controllers"].startswith("cpuset")


@pytest.mark.fast
def test_an_unknown_pod_is_not_found(kind_node_tree):
    layout = node_cgroups.parse_discover(
        run_script(node_cgroups.DISCOVER, "discover", ["00000000-0000-0000-0000-000000000000"], kind_node_tree)
    )
    assert layout.pod_dirs == {}


@pytest.mark.fast
def test_cgroup_v1_node_layout(tmp_path):
    root = tmp_path / "cgroup"
    pod = root / "cpu,cpuacct" / "kubelet" / "kubepods" / "burstable" / f"pod{UID}"
    (pod / APP).mkdir(parents=True)
    (root / "cpu,cpuacct" / "cpu.shares").write_text("1024\n")  # the hierarchy's root, as the kernel has it
    (pod / APP / "cpu.shares").write_text("512\n")
    (pod / APP / "cpu.cfs_quota_us").write_text("200000\n")
    (pod / APP / "cpu.cfs_period_us").write_text("100000\n")
    (root / "memory" / "kubelet" / "kubepods" / "burstable" / f"pod{UID}").mkdir(parents=True)
    # on v1 the cpuset is the cpuset controller's hierarchy, not a file of the cpu controller's directory
    cpuset = root / "cpuset" / "kubelet" / "kubepods" / "burstable" / f"pod{UID}" / APP
    cpuset.mkdir(parents=True)
    (cpuset / "cpuset.effective_cpus").write_text("0-1\n")
    layout = node_cgroups.parse_discover(run_script(node_cgroups.DISCOVER, "discover", [UID], root))
    assert layout.version == 1 and "/cpu,cpuacct/" in layout.pod_dirs[UID]
    paths = node_cgroups.level_files(str(pod / APP), 1)
    assert f"{cpuset}/cpuset.effective_cpus" in paths
    files = read_files(paths)
    got = node_cgroups.settings_of(str(pod / APP), files, 1)
    assert (got["quota_us"], got["period_us"], got["shares"], got["cpus"]) == (200_000, 100_000, 512, "0-1")


@pytest.mark.fast
def test_cgroup_v1_with_cpu_and_cpuacct_apart_is_found_in_cpu_beside_an_empty_cpu_cpuacct(tmp_path):
    # what a real kind node showed on this host (cpu and cpuacct mounted apart): an empty cpu,cpuacct
    # folder beside the cpu hierarchy; the readback found no pod before (docs/KUBE_REAL.md)
    root = tmp_path / "cgroup"
    (root / "cpu,cpuacct").mkdir(parents=True)
    (root / "cpu" / "cpu.shares").parent.mkdir(parents=True)
    (root / "cpu" / "cpu.shares").write_text("1024\n")
    slice_ = "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice"
    pod = root / "cpu" / slice_ / f"kubelet-kubepods-burstable-pod{UID.replace('-', '_')}.slice"
    (pod / "cri-containerd-abc.scope").mkdir(parents=True)
    layout = node_cgroups.parse_discover(run_script(node_cgroups.DISCOVER, "discover", [UID], root))
    assert layout.version == 1 and layout.pod_dirs[UID] == str(pod)
    assert layout.children[UID] == [str(pod / "cri-containerd-abc.scope")]
    assert node_cgroups.stat_files(str(pod), 1)[1] == str(root / "cpuacct" / slice_ / pod.name / "cpuacct.usage")


@pytest.mark.fast
def test_counters_come_from_cpu_stat_and_on_v1_from_the_cpuacct_hierarchy():
    assert node_cgroups.stat_files("/sys/fs/cgroup/kubelet.slice/p", 2) == ["/sys/fs/cgroup/kubelet.slice/p/cpu.stat"]
    together = "/sys/fs/cgroup/cpu,cpuacct/kubelet/kubepods/burstable/pod1"
    assert node_cgroups.stat_files(together, 1) == [f"{together}/cpu.stat", f"{together}/cpuacct.usage"]
    apart = "/sys/fs/cgroup/cpu/kubelet/kubepods/burstable/pod1"
    assert node_cgroups.stat_files(apart, 1) == [
        f"{apart}/cpu.stat",
        "/sys/fs/cgroup/cpuacct/kubelet/kubepods/burstable/pod1/cpuacct.usage",
    ]


@pytest.mark.fast
def test_kind_cannot_pin_nodes_on_a_cgroup_v1_host():
    from types import SimpleNamespace

    from throttlelab.backends.kind.kind_backend import KindBackend
    from throttlelab.model.placement import LoadPlacement

    pinned = Node("node", E1.pods, cpus="0")
    v1, v2 = SimpleNamespace(host_cgroup_version=lambda: 1), SimpleNamespace(host_cgroup_version=lambda: 2)
    assert "EBUSY" in KindBackend.untestable(v1, pinned, None)
    assert "EBUSY" in KindBackend.untestable(v1, E1, LoadPlacement(cpus="1"))
    assert KindBackend.untestable(v1, E1, None) is None
    assert KindBackend.untestable(v2, pinned, LoadPlacement(cpus="1")) is None


@pytest.mark.fast
def test_kube_design_v1_shares_are_kubelets_raw_shares():
    levels = {lv.design.path: lv.v1_shares for lv in kube_design(mf.kube_node(E1, 10_000), "runc-old", [])}
    assert levels == {
        "node": 10240,
        "node/burstable": 614,
        "node/burstable/pod-e1": 614,
        "node/burstable/pod-e1/app": 512,
        "node/burstable/pod-e1/sidecar": 102,
    }


@pytest.mark.parametrize(
    "version, conversion",
    [("1.4.3", "runc-new"), ("1.3.2", "runc-new"), ("1.3.1", "runc-old"), ("1.3.0", "runc-old"), ("1.2.6", "runc-old")],
)
@pytest.mark.fast
def test_runc_release_decides_the_conversion(version, conversion):
    assert kind_nodes.node_conversion(version) == conversion
    assert runc_conversion(version) == conversion  # kind and docker read runc releases alike


@pytest.mark.fast
def test_kind_counts_a_runc_release_it_cannot_read_as_the_linear_formula():
    assert runc_conversion("unknown") is None
    assert kind_nodes.node_conversion("unknown") == "runc-old"


@pytest.mark.fast
def test_records_and_stderr_are_split_from_a_container_log():
    log = '{"type":"header","x":1}\nGOMAXPROCS=2\n{"not":"a record"}\n{"type":"summary"}\n{broken\n'
    records, stderr = records_from_log(log, "p/c")
    assert records == [{"type": "header", "x": 1}, {"type": "summary"}]
    assert stderr == 'GOMAXPROCS=2\n{"not":"a record"}\n{broken\n'


@pytest.mark.workload  # the Go toolchain: vet, gofmt and go test
@pytest.mark.parametrize("module", ["podgate", "podnet"])
def test_go_vet_gofmt_and_go_test_pass_in_the_node_modules(module):
    from throttlelab.host.gobuild import find_go, go_environment

    go, env = find_go(), go_environment()
    source = PROJECT / "workload" / module
    vet = subprocess.run([go, "vet", "./..."], cwd=source, env=env, capture_output=True, text=True)
    assert vet.returncode == 0, vet.stderr
    goroot = subprocess.run([go, "env", "GOROOT"], env=env, capture_output=True, text=True, check=True)
    fmt = subprocess.run(
        [str(Path(goroot.stdout.strip()) / "bin" / "gofmt"), "-l", "."], cwd=source, capture_output=True, text=True
    )
    assert fmt.returncode == 0 and fmt.stdout == "", f"not gofmt-clean: {fmt.stdout}{fmt.stderr}"
    tests = subprocess.run(
        [go, "test", "-count=1", "./..."], cwd=source, env=env, capture_output=True, text=True, timeout=240
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr


def test_podgate_gates_a_real_program(podgate, tmp_path):
    """The built binary, for real: nothing runs until the gate opens, then the program replaces podgate."""
    gate = tmp_path / "gate"
    proc = subprocess.Popen(
        [str(podgate), "run", "-gate", str(gate), "--", "/bin/sh", "-c", "echo started $$"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(0.5)
        assert proc.poll() is None
        assert subprocess.run([str(podgate), "open", str(gate)]).returncode == 0
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == 0 and out == f"started {proc.pid}\n"  # exec: same pid
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_podgate_binds_values_given_when_the_gate_opens(podgate, tmp_path):
    gate = tmp_path / "gate"
    proc = subprocess.Popen(
        [str(podgate), "run", "-gate", str(gate), "--", "/bin/sh", "-c", "echo $0", "http://{{serve:9001}}/work"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert subprocess.run([str(podgate), "open", str(gate), "serve:9001=10.244.1.7:9001"]).returncode == 0
        out, _ = proc.communicate(timeout=10)
        assert out == "http://10.244.1.7:9001/work\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- the kind binaries --------------------------------------------------------------------------------------


def stub_kind(tmp_path: Path, version: str) -> Path:
    path = tmp_path / f"kind-{version}"
    path.write_text(f"#!/bin/sh\necho 'kind {version} go1.24.6 linux/amd64'\n")
    path.chmod(0o755)
    return path


def lab_clusters(tmp_path: Path, **kind_cfg) -> dict[str, clusters.KindCluster]:
    """The two clusters as the rules make them: files under tmp_path, configs in the project's config/kind."""
    from throttlelab.model.config import load_design

    return clusters.clusters_from_settings(
        load_design({"backend": "kind", "kind": kind_cfg}, PROJECT / "config").kind,
        tmp_path,
        PROJECT / "config" / "kind",
    )


@pytest.mark.fast
def test_each_cluster_needs_the_kind_release_of_its_node_image(tmp_path):
    c = lab_clusters(
        tmp_path, binary=str(stub_kind(tmp_path, "v0.33.0")), old_binary=str(stub_kind(tmp_path, "v0.29.0"))
    )
    assert clusters.check_kind(c["new"]).endswith("kind-v0.33.0")
    with pytest.raises(
        BackendError,
        match=r"is kind v0.29.0, but the old cluster's node image kindest/node:v1.34.0 "
        r"is built for kind v0.30.0.*set kind.old_binary",
    ):
        clusters.check_kind(c["old"])
    missing = lab_clusters(tmp_path, binary="kind-not-installed-anywhere")
    with pytest.raises(BackendError, match=r"'kind-not-installed-anywhere' is not on PATH. Install kind v0.33.0"):
        clusters.check_kind(missing["new"])


@pytest.mark.fast
def test_cluster_files_stay_inside_the_project(tmp_path):
    c = lab_clusters(tmp_path)["old"]
    assert c.kubeconfig == tmp_path / "results/kind/clusters/old/kubeconfig"
    assert (c.context, c.worker, c.control_plane) == (
        "kind-throttlelab-old",
        "throttlelab-old-worker",
        "throttlelab-old-control-plane",
    )
    assert c.config == PROJECT / "config/kind/old.yaml" and c.runtime == "runc-old"


@pytest.mark.fast
def test_the_cli_preflight_names_what_is_missing(tmp_path):
    from throttlelab.model.config import load_design

    settings = {
        **load_design({"backend": "kind"}, PROJECT / "config").kind,
        "binary": "/nonexistent/kind",
        "old_binary": "/nonexistent/kind-old",
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "throttlelab",
            "kind",
            "preflight",
            "--settings",
            json.dumps(settings),
            "--need",
            "kind",
        ],
        capture_output=True,
        text=True,
        cwd=PROJECT,
    )
    assert proc.returncode == 1
    assert "'/nonexistent/kind' does not exist or is not executable" in proc.stderr
    assert "'/nonexistent/kind-old' does not exist" in proc.stderr


# -- a real Docker engine: pinning, restoring, the kind image ---------------------------------------------------

TEST_LABEL = {"throttlelab.backend": "kind-test"}  # not the docker backend's label: its sweeps leave these alone


@pytest.fixture(scope="module")
def engine():
    try:
        client = kind_engine_client()
    except BackendError as exc:
        pytest.skip(f"no Docker engine: {exc}")
    yield client


@pytest.fixture(scope="module")
def podgate(tmp_path_factory) -> Path:
    return workload_images.build_podgate(
        tmp_path_factory.mktemp("podgate") / "podgate", PROJECT / "workload" / "podgate"
    )


@pytest.fixture(scope="module")
def kind_image(engine, binaries, podgate, tmp_path_factory):
    """A base image as the docker backend builds it (FROM scratch + cpulab), then the kind image on it."""
    variant = f"kindtest-{os.getpid()}"
    base_tag = f"cpulab-kindtest-base:{os.getpid()}"
    buf = io.BytesIO()
    dockerfile = b'FROM scratch\nCOPY cpulab /cpulab\nENTRYPOINT ["/cpulab"]\n'
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
        tar.add(str(binaries["go125mod"]), arcname="cpulab")
    buf.seek(0)
    base, _ = engine.images.build(fileobj=buf, custom_context=True, tag=base_tag, pull=False, rm=True)
    stamp = tmp_path_factory.mktemp("stamp") / "image.json"
    stamp.write_text(json.dumps({"tag": base_tag, "id": base.id}))
    record = workload_images.build_kind_image(variant, stamp, podgate)
    yield record
    import docker.errors

    for tag in (record["tag"], base_tag):
        try:
            engine.images.remove(tag, force=True)
        except docker.errors.DockerException:
            pass  # best effort: a test image left behind harms nothing


@pytest.fixture
def idle_node(engine, kind_image):
    """A container standing in for a kind node: idle behind a gate that never opens."""
    name = f"tl-kindtest-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    container = engine.containers.run(
        kind_image["tag"],
        ["/podgate", "run", "-gate", "/gate/never", "--", "/cpulab", "info"],
        name=name,
        detach=True,
        labels=TEST_LABEL,
        network_mode="none",
        tmpfs={"/gate": ""},
        entrypoint=[],
    )
    yield container
    container.remove(force=True)
    pins.state_file(name).unlink(missing_ok=True)


@pytest.mark.docker
def test_the_kind_image_holds_cpulab_behind_podgate(engine, kind_image):
    assert kind_image["tag"].startswith("cpulab-kind:kindtest-")
    container = engine.containers.run(
        kind_image["tag"],
        ["/podgate", "run", "-gate", "/throttlelab/gate/app", "--", "/cpulab", "info"],
        detach=True,
        labels=TEST_LABEL,
        network_mode="none",
        tmpfs={"/throttlelab/gate": ""},
        entrypoint=[],
        nano_cpus=500_000_000,
        environment={"GOMAXPROCS": "3"},
    )
    try:
        time.sleep(1.0)
        container.reload()
        assert container.status == "running" and container.logs() == b""  # waiting at its gate
        _code, (out, _err) = container.exec_run(
            ["/podgate", "cat", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu.max"], demux=True
        )
        texts = json.loads(out)  # this host has cgroup v1 or v2: one of the two files exists
        assert "50000" in (
            texts.get("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") or texts.get("/sys/fs/cgroup/cpu.max") or ""
        )
        assert container.exec_run(["/podgate", "open", "/throttlelab/gate/app"]).exit_code == 0
        assert container.wait(timeout=30)["StatusCode"] == 0
        records, _stderr = records_from_log(container.logs(stdout=True, stderr=True).decode(), "app")
        header = next(r for r in records if r["type"] == "header")
        assert header["gomaxprocs"] == 3 and header["command"] == "info"  # the env reached cpulab through the gate
        assert header["cgroup"]["quota_us"] == 50_000
    finally:
        container.remove(force=True)


def _gated_spin(engine, kind_image, gate_tmpfs: str = "", **run_options):
    """A container of the kind image running cpulab spin (one thread, a report every 100 ms) behind
    podgate's gate /g/spin, on a tmpfs mounted with ``gate_tmpfs``."""
    return engine.containers.run(
        kind_image["tag"],
        ["/podgate", "run", "-gate", "/g/spin", "--", "/cpulab", "spin", "-threads=1", "-report=100ms"],
        detach=True,
        labels=TEST_LABEL,
        network_mode="none",
        tmpfs={"/g": gate_tmpfs},
        entrypoint=[],
        nano_cpus=200_000_000,
        **run_options,
    )


def _wait_for_a_report(container) -> None:
    """Until cpulab, past its gate, has reported once: a signal before then would find podgate or a starting
    cpulab (a fixed second was too short on a loaded host)."""
    deadline = time.monotonic() + 30
    while '"type":"report"' not in container.logs(stdout=True, stderr=True).decode().replace(" ", ""):
        assert time.monotonic() < deadline, "cpulab never reported after the gate opened"
        time.sleep(0.1)


@pytest.mark.docker
def test_podgate_stops_cpulab_as_the_containers_pid_1(engine, kind_image):
    """`podgate signal TERM` from an exec reaches the container's main process: cpulab, after the gate."""
    container = _gated_spin(engine, kind_image)
    try:
        assert container.exec_run(["/podgate", "open", "/g/spin"]).exit_code == 0
        _wait_for_a_report(container)
        # the exec itself may be killed (137) when cpulab, PID 1, exits before it does (seen under load);
        # the backends ignore the exec's exit code too: what counts is cpulab's clean end below
        assert container.exec_run(["/podgate", "signal", "TERM"]).exit_code in (0, 137)
        assert container.wait(timeout=30)["StatusCode"] == 0
        records, _ = records_from_log(container.logs(stdout=True, stderr=True).decode(), "spin")
        types = [r["type"] for r in records]
        assert types[0] == "header" and "report" in types and types[-1] == "summary"
        assert next(r for r in records if r["type"] == "header")["pid"] == 1  # cpulab is the main process
    finally:
        container.remove(force=True)


@pytest.mark.docker
def test_podgate_and_cpulab_run_as_the_restricted_pods_do_under_dockers_default_seccomp(engine, kind_image):
    """What the pods' security context asks (manifests: uid/gid 65532, every capability dropped, no
    privilege escalation, the runtime's default seccomp profile), in a real container of the kind
    image under Docker's default seccomp profile: podgate waits on inotify, opens, execs cpulab,
    and stops it with SIGTERM from an exec as the same user. (Docker's profile, not a cluster
    runtime's: containerd's and CRI-O's defaults have not been run here.)"""
    user = f"{mf.RUN_AS_USER}:{mf.RUN_AS_USER}"
    container = _gated_spin(
        engine, kind_image, "mode=1777", user=user, cap_drop=["ALL"], security_opt=["no-new-privileges"]
    )
    try:
        assert "seccomp" in " ".join(engine.info().get("SecurityOptions") or [])  # the engine applies its profile
        time.sleep(0.5)
        container.reload()
        assert container.status == "running" and container.logs() == b""  # waiting at its gate, on inotify
        assert container.exec_run(["/podgate", "open", "/g/spin"], user=user).exit_code == 0
        _wait_for_a_report(container)
        # the exec may be killed (137) when cpulab, the container's PID 1, exits before it does: what
        # counts is that cpulab got the signal and ended cleanly
        assert container.exec_run(["/podgate", "signal", "TERM"], user=user).exit_code in (0, 137)
        assert container.wait(timeout=30)["StatusCode"] == 0
        records, _ = records_from_log(container.logs(stdout=True, stderr=True).decode(), "spin")
        assert [r["type"] for r in records][-1] == "summary"
        assert next(r for r in records if r["type"] == "header")["pid"] == 1
    finally:
        container.remove(force=True)


@pytest.mark.docker
def test_a_node_is_pinned_and_always_restored(engine, idle_node):
    (pin,) = pins.plan_pins(engine, {idle_node.name: "0"})
    before = pins.current_cpuset(idle_node)
    assert pin.restore_to == (before or pins.usable_cpus(engine, idle_node))
    try:
        pins.apply_pins(engine, [pin], os.getpid())
        assert pins.current_cpuset(idle_node) == "0"
        assert json.loads(pins.state_file(idle_node.name).read_text())["restore_to"] == pin.restore_to
    finally:
        pins.restore_pins(engine, [pin])
    assert pins.current_cpuset(idle_node) == pin.restore_to
    assert not pins.state_file(idle_node.name).exists()
    with pytest.raises(BackendError, match="is not available"):
        pins.plan_pins(engine, {idle_node.name: "0-4095"})


@pytest.mark.docker
def test_the_sweep_restores_a_node_a_dead_run_left_pinned(engine, idle_node):
    (pin,) = pins.plan_pins(engine, {idle_node.name: "0"})
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    pins.apply_pins(engine, [pin], dead.pid)  # as if that runner had pinned it and died
    assert pins.current_cpuset(idle_node) == "0"
    assert f"{idle_node.name} -> {pin.restore_to}" in pins.sweep_pins(engine)
    assert pins.current_cpuset(idle_node) == pin.restore_to


GUARDED = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {project!r})
    from throttlelab.platform import kind_pins as pins
    from throttlelab.host.docker_engine import kind_engine_client
    from throttlelab.backends.kind.kind_backend import KindNodeChanges
    from throttlelab.backends.kube.pod_lifecycle import KubeGuardian
    engine = kind_engine_client()
    planned = pins.plan_pins(engine, {{{name!r}: "0"}})
    guardian = KubeGuardian({{"kubeconfig": {kubeconfig!r}, "context": "fake", "namespace": "default",
                             "selector": "app.kubernetes.io/managed-by=throttlelab,throttlelab.io/run=none",
                             "pins": [{{"container": p.container, "restore_to": p.restore_to}} for p in planned]}},
                            KindNodeChanges.guardian_module)
    pins.apply_pins(engine, planned, 0)
    print("pinned", flush=True)
    time.sleep(600)
""")


@pytest.mark.docker
def test_the_guardian_restores_the_node_when_the_runner_is_sigkilled(engine, idle_node, tmp_path):
    from kube_api_server import FakeKubeAPI

    api = FakeKubeAPI().start()
    try:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", context="fake")
        restore_to = pins.plan_pins(engine, {idle_node.name: "0"})[0].restore_to
        script = GUARDED.format(project=str(PROJECT), name=idle_node.name, kubeconfig=str(kubeconfig))
        runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        assert runner.stdout.readline().strip() == "pinned"
        assert pins.current_cpuset(idle_node) == "0"
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
        deadline = time.monotonic() + 60
        while pins.current_cpuset(idle_node) != restore_to and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pins.current_cpuset(idle_node) == restore_to, "the guardian did not restore the node's cpuset"
    finally:
        api.stop()
