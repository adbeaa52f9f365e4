"""The docker backend on a real Docker engine: throttling under --cpus, GOMAXPROCS by
module line, the pod-level cgroup parent, services on loopback, clear errors, and
cleanup after Ctrl-C to Snakemake and SIGKILL of the runner.

Needs root (the backend writes the pod cgroups) and a Docker engine; without one,
every test here is skipped with the reason (.ci/start-dockerd starts one in CI).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import lab_cgroups, PROJECT, runner_arguments, snakemake as run_snakemake, snakemake_command
from throttlelab.platform import workload_images as images
from throttlelab.backends.base import BackendError
from throttlelab.backends.docker import DockerBackend, lab_containers
from throttlelab.host.docker_engine import EnginePermissionDenied, EngineUnreachable, connect
from throttlelab.model.digest import sha256_file
from throttlelab.model.placement import Container, LoadPlacement, Node, Pod
from throttlelab.model.quantities import go_default_gomaxprocs
from throttlelab.model.runtime import runc_conversion

pytestmark = [pytest.mark.docker]

GO_LINES = {"go124mod": "1.24", "go125mod": "1.25"}


# --------------------------------------------------------------------------
# engine and images


@pytest.fixture(scope="module")
def engine():
    """A client of a running engine, or a skip that says why there is none."""
    if os.geteuid() != 0:
        pytest.skip("the docker backend writes pod cgroups: needs root")
    try:
        client = connect(timeout_s=30)
    except (EngineUnreachable, EnginePermissionDenied) as exc:
        pytest.skip(f"no usable Docker engine: {exc}")
    yield client
    assert lab_containers(client) == [], "a test left lab containers behind"
    client.close()


@pytest.fixture(scope="module")
def backend(engine, binaries) -> DockerBackend:
    for variant, path in binaries.items():
        images.build_image(engine, variant, path)
    b = DockerBackend(binaries, client=engine)
    b.preflight()
    return b


def docker_cgroups() -> list[str]:
    """Run cgroups of the docker backend (`throttlelab-<pid>-<n>`, n >= 1000), in any hierarchy.
    The local backend's runs (n < 1000) may come and go meanwhile: other work on this host."""
    return [p for p in lab_cgroups() if re.fullmatch(r"throttlelab-\d+-\d{4,}", Path(p).name)]


@pytest.fixture
def no_leftovers(engine):
    """Every test leaves no container and no cgroup of its own behind."""
    yield
    deadline = time.monotonic() + 15
    while (lab_containers(engine) or docker_cgroups()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [c.name for c in lab_containers(engine)] == []
    assert docker_cgroups() == []


# --------------------------------------------------------------------------
# pure parts


@pytest.mark.parametrize(
    "version, conversion",
    [("1.1.5+ds1", "runc-old"), ("1.3.1", "runc-old"), ("1.3.2", "runc-new"), ("v1.4.3", "runc-new"), ("", None)],
)
def test_runc_version_decides_the_container_conversion(version, conversion):
    assert runc_conversion(version) == conversion


def test_image_context_is_the_binary_alone(tmp_path):
    import tarfile

    binary = tmp_path / "cpulab"
    binary.write_bytes(b"\x7fELF not really")
    with tarfile.open(fileobj=images.build_context(binary)) as tar:
        assert sorted(tar.getnames()) == ["Dockerfile", "cpulab"]
        dockerfile = tar.extractfile("Dockerfile").read().decode()
    assert dockerfile.startswith("FROM scratch\n")


# --------------------------------------------------------------------------
# clear errors


def _runner(env: dict[str, str], tmp_path: Path, binaries: dict[str, Path]) -> subprocess.CompletedProcess:
    spec = {"build": "go125mod", "limit": None}
    cmd = [
        sys.executable,
        "-m",
        "throttlelab.experiments.runner",
        *runner_arguments("docker", "E3", "go125mod-none", spec, binaries, tmp_path / "out.jsonl"),
    ]
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=PROJECT,
        env={**os.environ, "PYTHONPATH": str(PROJECT), **env},
    )


def test_no_engine_is_one_message_saying_how_to_start_it(tmp_path, monkeypatch, binaries):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/missing.sock")
    with pytest.raises(EngineUnreachable, match="no Docker engine answers") as info:
        connect()
    assert "dockerd" in str(info.value) and "systemctl start docker" in str(info.value)
    proc = _runner({"DOCKER_HOST": f"unix://{tmp_path}/missing.sock"}, tmp_path, binaries)
    assert proc.returncode == 1
    assert "no Docker engine answers" in proc.stderr and "no such socket" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_an_engine_without_the_image_gets_it_built_at_preflight(engine, binaries, tmp_path):
    """The stamp under results/build/ says an image was built, not in which engine: an engine that lacks
    the image of this exact binary (another engine of the lab's, a binary no image was built from) gets it
    built by the first run's preflight instead of stopping it; the next preflight finds it."""
    odd = tmp_path / "cpulab"
    odd.write_bytes(binaries["go124mod"].read_bytes() + b"\0")  # a binary no image was built from
    variant = f"preflight-test-{os.getpid()}"
    said: list[str] = []
    try:
        b = DockerBackend({variant: odd}, client=engine, progress=said.append)
        b.preflight()
        assert len(said) == 1 and "building it here" in said[0], said
        built = engine.images.get(b.image_ids[variant])
        assert built.labels[images.LABEL_BINARY] == sha256_file(odd)
        again: list[str] = []
        b2 = DockerBackend({variant: odd}, client=engine, progress=again.append)
        b2.preflight()
        assert again == [] and b2.image_ids[variant] == built.id
    finally:
        engine.images.remove(images.tag_of(variant), force=True)


def test_a_missing_binary_says_how_to_build_it(engine, tmp_path):
    b = DockerBackend({"go124mod": tmp_path / "no-such-cpulab"}, client=engine)
    with pytest.raises(BackendError, match="build it first"):
        b.preflight()


# --------------------------------------------------------------------------
# the backend on the engine


def _spin_node(build: str, limit_milli: int | None, threads: int = 4) -> Node:
    spin = Container(
        "spin",
        ("spin", f"-threads={threads}", "-report=500ms", "-duration=2s"),
        variant=build,
        request_milli=100,
        limit_milli=limit_milli,
    )
    return Node("node", (Pod("s", (spin,)),))


@pytest.mark.parametrize("build", ["go124mod", "go125mod"])
def test_half_a_cpu_with_four_busy_threads_is_throttled(backend, no_leftovers, build):
    with backend.deploy(_spin_node(build, 500)) as dep:
        readback = {r.path: r for r in dep.verify()}
        out = dep.run_job("s", "spin", timeout_s=60)
    assert readback["node/burstable/pod-s/spin"].actual["quota_us"] == 50_000
    assert readback["node/burstable/pod-s"].actual["quota_us"] == 50_000  # the pod level, as kubelet writes it
    header = next(r for r in out.records if r["type"] == "header")
    summary = next(r for r in out.records if r["type"] == "summary")
    assert header["pid"] == 1, "cpulab must be the container's own process 1"
    assert header["cgroup"]["quota_us"] == 50_000 and header["cgroup"]["period_us"] == 100_000
    assert summary["nr_throttled"] > 0
    assert summary["avg_cores"] < 0.6
    # GOMAXPROCS: what Go reports for --cpus=0.5 and this module line (on 2 CPUs both lines give 2)
    usable = backend.capabilities().cpus
    assert header["gomaxprocs"] == go_default_gomaxprocs(GO_LINES[build], 500, usable)


def test_a_cfs_period_is_passed_and_a_burst_budget_is_refused_with_the_reason(backend, no_leftovers):
    """X2 on docker: --cpu-period writes the node's period at the pod and container levels (the quota
    follows it: 500m of 20 ms = 10 ms); X1's burst budget has no docker flag and is refused at deploy."""
    node = dataclasses.replace(_spin_node("go124mod", 500, threads=2), period_us=20_000)
    with backend.deploy(node) as dep:
        readback = {r.path: r for r in dep.verify()}
        out = dep.run_job("s", "spin", timeout_s=60)
    for level in ("node/burstable/pod-s", "node/burstable/pod-s/spin"):
        assert (readback[level].actual["quota_us"], readback[level].actual["period_us"]) == (10_000, 20_000), level
    header = next(r for r in out.records if r["type"] == "header")
    summary = next(r for r in out.records if r["type"] == "summary")
    assert (header["cgroup"]["quota_us"], header["cgroup"]["period_us"]) == (10_000, 20_000)
    assert summary["nr_periods"] > 50  # 2 s of 20 ms periods (100 ms periods would give at most 21)
    budget = Container(
        "spin", ("spin", "-threads=1", "-duration=1s"), request_milli=100, limit_milli=500, burst_us=25_000
    )
    with pytest.raises(BackendError, match="docker cannot express a CFS burst budget"):
        backend.deploy(Node("node", (Pod("s", (budget,)),)))


def test_no_limit_is_never_throttled(backend, no_leftovers):
    with backend.deploy(_spin_node("go125mod", None, threads=1)) as dep:
        out = dep.run_job("s", "spin", timeout_s=60)
    header = next(r for r in out.records if r["type"] == "header")
    assert header["cgroup"]["quota_us"] is None
    assert next(r for r in out.records if r["type"] == "summary")["nr_throttled"] == 0
    assert header["gomaxprocs"] == backend.capabilities().cpus


def test_a_pod_of_two_containers_shares_one_parent_cgroup(backend, no_leftovers):
    def pod(sidecar_limit):
        return Node(
            "node",
            (
                Pod(
                    "e1",
                    (
                        Container("app", ("info",), request_milli=500, limit_milli=2000),
                        Container("sidecar", ("info",), request_milli=100, limit_milli=sidecar_limit),
                    ),
                ),
            ),
        )

    with backend.deploy(pod(500)) as dep:
        levels = {r.path: r for r in dep.verify()}
        app = dep.run_job("e1", "app", timeout_s=30)
        sidecar = dep.run_job("e1", "sidecar", timeout_s=30)
        root = dep.root
    assert levels["node/burstable/pod-e1"].actual["quota_us"] == 250_000
    assert levels["node/burstable/pod-e1/app"].actual["quota_us"] == 200_000
    assert levels["node/burstable/pod-e1/sidecar"].actual["quota_us"] == 50_000
    if backend.fs.version == 1:  # docker writes kubelet's shares as they are
        assert levels["node/burstable/pod-e1/app"].actual["shares"] == 512
        assert levels["node/burstable/pod-e1/sidecar"].actual["shares"] == 102
    parents = {os.path.dirname(out.records[0]["cgroup"]["path"]) for out in (app, sidecar)}
    assert parents == {f"/{root}/node/burstable/pod-e1"}
    with backend.deploy(pod(None)) as dep:
        partial = {r.path: r for r in dep.verify()}
    assert partial["node/burstable/pod-e1"].actual["quota_us"] is None


def test_a_service_answers_on_loopback_and_its_counters_are_read(backend, no_leftovers):
    serve = Container(
        "server",
        ("serve", "-addr=127.0.0.1:0", "-live-mb=1", "-work=1ms"),
        request_milli=500,
        limit_milli=1000,
        role="service",
    )
    node = Node("node", (Pod("svc", (serve,)),))
    with backend.deploy(node, load=LoadPlacement()) as dep:
        dep.verify()
        assert dep.read_stat("svc", "server")["usage_usec"] == 0  # not started: nothing ran, as locally
        handle = dep.start("svc", "server")
        addr = dep.wait_for_record(handle, "listening", timeout_s=30)["addr"]
        assert addr.startswith("127.0.0.1:")
        before = dep.read_stat("svc", "server")
        load = dep.run_load(
            ["load", f"-target=http://{addr}", "-rps=50", "-duration=1s", "-warmup=200ms"], timeout_s=60
        )
        after = dep.read_stat("svc", "server")
        pod = dep.read_stat("svc")
        out = dep.stop(handle)
        final = dep.read_stat("svc", "server")  # ended: the last reading taken while it ran
    summary = next(r for r in load.records if r["type"] == "summary")
    assert final["usage_usec"] >= after["usage_usec"] and final["t_ns"] > after["t_ns"]
    assert summary["work"]["ok"] > 0 and summary["work"]["errors"] == 0
    assert after["usage_usec"] > before["usage_usec"] and after["t_ns"] > before["t_ns"]
    assert pod["usage_usec"] >= after["usage_usec"]
    assert next(r for r in out.records if r["type"] == "summary")["requests"] >= summary["work"]["ok"]


def test_environment_names_the_engine_containerd_and_runc(backend):
    env = backend.environment()
    assert env["backend"] == "docker"
    assert set(env["versions"]) == {"Docker engine", "containerd", "runc"}
    assert all(v and v != "unknown" for v in env["versions"].values())


# --------------------------------------------------------------------------
# through Snakemake and the runner: images, the pipeline, cleanup after interrupts


def snakemake(workdir: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return run_snakemake(workdir, *args, timeout=timeout)


def _profile(tmp_path: Path, name: str, experiments: dict) -> Path:
    profile = yaml.safe_load((PROJECT / "config/profiles/ci.yaml").read_text())
    profile["experiments"] = experiments
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


@pytest.fixture(scope="module")
def docker_run(engine, binaries, tmp_path_factory):
    """The pipeline on the docker backend: S1 as the book runs it, E1 and two E3 arms, then the report."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    workdir = tmp_path_factory.mktemp("docker-run")
    for variant, path in binaries.items():  # the workload is built already: start from the image rule
        (workdir / f"results/build/{variant}").mkdir(parents=True)
        shutil.copy(path, workdir / f"results/build/{variant}/cpulab")
    ci = yaml.safe_load((PROJECT / "config/profiles/ci.yaml").read_text())["experiments"]
    ci["E3"]["variants"] = {k: ci["E3"]["variants"][k] for k in ("go124mod-500m", "go125mod-500m")}
    profile = _profile(tmp_path_factory.mktemp("profile"), "docker", {k: ci[k] for k in ("E1", "E3", "S1")})
    proc = snakemake(workdir, "report", "--config", "backend=docker", f"profile={profile}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert lab_containers(engine) == [] and docker_cgroups() == []
    return workdir, profile


def _logs(workdir: Path, experiment: str) -> dict[str, list[dict]]:
    return {
        p.parent.name: [json.loads(line) for line in p.read_text().splitlines()]
        for p in sorted((workdir / "results/docker/raw" / experiment).glob("*/rep0.jsonl"))
    }


def test_s1_runs_as_the_book_does_in_containers(docker_run, backend):
    workdir, _ = docker_run
    runs = _logs(workdir, "S1")
    assert set(runs) == {"nolimit", "cpus1500m", "cpus1500m-gomaxprocs8", "cpus500m"}
    cpus = backend.capabilities().cpus
    expected = {"nolimit": cpus, "cpus1500m": min(cpus, 2), "cpus1500m-gomaxprocs8": 8, "cpus500m": min(cpus, 2)}
    for variant, records in runs.items():
        meta, header = records[0], next(r for r in records if r["type"] == "header")
        assert meta["backend"] == "docker" and meta["environment"]["versions"]["runc"]
        assert header["pid"] == 1  # in a container
        assert header["gomaxprocs"] == expected[variant], variant
    quota = {v: next(r for r in rs if r["type"] == "header")["cgroup"]["quota_us"] for v, rs in runs.items()}
    assert quota == {"nolimit": None, "cpus1500m": 150_000, "cpus1500m-gomaxprocs8": 150_000, "cpus500m": 50_000}
    assert next(r for r in runs["cpus500m"] if r["type"] == "summary")["nr_throttled"] > 0


def test_the_report_says_docker_and_the_engine_versions(docker_run, backend):
    workdir, _ = docker_run
    html = (workdir / "results/report/index.html").read_text()
    assert "on the docker backend" in html
    assert "measured on the <strong>docker</strong> backend" in html
    for name, version in backend.versions.items():
        assert re.search(rf"<dt>{re.escape(name)}</dt>\s*<dd>{re.escape(version)}</dd>", html), name


def test_images_rebuild_only_when_a_binary_changes(docker_run):
    workdir, profile = docker_run
    stamps = [f"results/build/{v}/image.json" for v in GO_LINES]
    proc = snakemake(workdir, "-n", *stamps, "--config", "backend=docker", f"profile={profile}")
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr
    binary = workdir / "results/build/go124mod/cpulab"
    os.utime(binary)  # a changed binary (same content, new mtime: Snakemake cannot tell the difference)
    proc = snakemake(workdir, "-n", *stamps, "--config", "backend=docker", f"profile={profile}")
    planned = [
        line.split(":", 1)[1].strip()
        for line in (proc.stdout + proc.stderr).splitlines()
        if line.strip().startswith("output:")
    ]
    assert planned == ["results/build/go124mod/image.json"]
    assert json.loads((workdir / stamps[0]).read_text())["id"].startswith("sha256:")


def _long_profile(tmp_path: Path) -> Path:
    ci = yaml.safe_load((PROJECT / "config/profiles/ci.yaml").read_text())["experiments"]["E2a"]
    ci["variants"] = {"long": {"limit": "500m", "rounds": 40, "interval_ms": 500}}
    return _profile(tmp_path, "long", {"E2a": ci})


def _wait_for_container(engine, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(
            c.status == "running" and c.labels.get("throttlelab.role") == "workload" for c in lab_containers(engine)
        ):
            time.sleep(1.0)  # let it run into a few rounds
            return
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.2)
    raise AssertionError("the workload container never started")


def test_ctrl_c_to_snakemake_leaves_no_container(docker_run, engine, tmp_path, no_leftovers):
    workdir, _ = docker_run
    profile = _long_profile(tmp_path)
    cmd = snakemake_command(
        workdir, "results/docker/raw/E2a/long/rep0.jsonl", "--config", "backend=docker", f"profile={profile}"
    )
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        _wait_for_container(engine, proc)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
        proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0
    assert not (workdir / "results/docker/raw/E2a/long/rep0.jsonl").exists()
    # no_leftovers: no lab container and no cgroup remain


def test_sigkill_of_the_runner_is_cleaned_up_by_the_guardian(docker_run, engine, tmp_path, no_leftovers):
    workdir, _ = docker_run
    spec = {
        "build": "go124mod",
        "threads": 4,
        "work_ms": 40,
        "interval_ms": 500,
        "rounds": 40,
        "request": "100m",
        "limit": "500m",
    }
    binaries = {v: workdir / "results" / "build" / v / "cpulab" for v in GO_LINES}
    cmd = [
        sys.executable,
        "-m",
        "throttlelab.experiments.runner",
        *runner_arguments("docker", "E2a", "long", spec, binaries, tmp_path / "x.jsonl"),
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=PROJECT,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
        start_new_session=True,
    )
    try:
        _wait_for_container(engine, proc)
        proc.kill()  # SIGKILL: no cleanup of its own can run
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "x.jsonl").exists()
    # no_leftovers waits for the guardian: no lab container and no cgroup remain
