"""Every variant of the `ci` profile through the kind backend, on the lab's two stand-in clusters
(kind_standins.py: the loopback API server per cluster, real Docker containers as their nodes):
each experiment runs as a job would, its pods deployed, read back at every level (the node's
files through /proc/<pid>/root), sampled, stopped and removed, the S2 cascade reaching its
upstream by pod IP; meanwhile the other, idle cluster is paused, and it is resumed however the
job ends (return, exception, Ctrl-C, SIGKILL of the runner); `kind load` into the idle cluster
waits for the job. What kind cannot run on this host is listed, with the reason, before any job.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import PROJECT
from kind_standins import (
    FastKind,
    FastKindDeployment,
    StandIn,
    build_node_image,
    engine_or_skip,
    lab_clusters,
    lab_settings,
    locks_free,
    stand_in,
    state_files,
)
from throttlelab.backends.base import BackendError, Capabilities, refuse_knobs
from throttlelab.platform import kind_clusters, kind_pauses as pauses, kind_pins as pins
from throttlelab.platform.workload_images import kind_tag
from throttlelab.backends.kind.kind_backend import KindBackend
from throttlelab.platform.kind_clusters import ROLE_OF_RUNTIME
from throttlelab.backends.kube import manifests as mf
from throttlelab.backends.kube.pod_readback import parse_cpu_stat
from throttlelab.experiments import REGISTRY, Context, services_experiments, smoke
from throttlelab.model.config import load_design
from throttlelab.model.coverage import V1_PIN_REASON, cadvisor_misfit, request_over_limit, untestable_variants
from throttlelab.model.placement import Container, Node, Pod, parse_cpuset

CI = load_design({"profile": "ci", "backend": "kind"}, PROJECT / "config")
VARIANTS = [(e, v) for e, exp in CI.experiments.items() for v in exp.variants]
#: What the plan leaves out on kind on a cgroup v2 host, whatever the host: E6 measured against the
#: kubelet's cAdvisor with scrapes closer than its housekeeping (model.coverage.cadvisor_misfit)
ON_V2 = untestable_variants("kind", {n: e.variants for n, e in CI.experiments.items()}, CI.runtime, cgroup_version=2)
RUNNABLE = [key for key in VARIANTS if key not in ON_V2]
E1 = Node("node", (Pod("e1", (Container("app", ("info",), request_milli=500, limit_milli=2000),)),))


# -- what kind can run: listed before any job ------------------------------------------------------------


class _Captured(Exception):
    def __init__(self, node, load) -> None:
        super().__init__(node.name)
        self.node, self.load = node, load


class _Capture:
    def deploy(self, node, load=None):
        raise _Captured(node, load)


def placements() -> dict[tuple[str, str], tuple[Node, Any]]:
    """(experiment, variant) -> the node and load placement its experiment deploys."""
    caps = Capabilities(cpus=2, cgroup_version=2, can_pin_cpus=True, has_pause_level=True, runtime="runc-new")
    out = {}
    for experiment, variant in VARIANTS:
        ctx = Context(backend=_Capture(), capabilities=caps, node_cpus=None, seed=1)
        with pytest.raises(_Captured) as captured:
            REGISTRY[experiment](CI.experiments[experiment].variants[variant], ctx)
        out[(experiment, variant)] = (captured.value.node, captured.value.load)
    return out


@pytest.mark.fast
def test_what_kind_cannot_run_is_listed_with_its_reason_and_the_backend_agrees():
    """The plan (model.coverage, used by rules/common.smk before any job) and the backend's own
    refusal (NotTestable at deploy) say the same, variant by variant: on a cgroup v2 host kind runs
    every variant of the ci profile but E6, whose scrapes are too close for the kubelet's cAdvisor
    (run_e6 refuses it before deploying), and X1's burst budget and X2's short period, which
    Kubernetes cannot write (refuse_knobs at deploy); on a v1 host, every variant that pins a node is
    left out with the EBUSY reason too, and nothing else."""
    experiments = {name: exp.variants for name, exp in CI.experiments.items()}
    # a request above its limit (the scaled E2b, E7, X5 kept the lab's request): the API server refuses the pod
    over = {(e, v) for e, vs in experiments.items() for v, spec in vs.items() if request_over_limit(spec)}
    assert over and all("requests more CPU than its limit" in ON_V2[k] for k in over)
    assert set(ON_V2) - over == {("E6", "limit"), ("X1", "budget-full"), ("X2", "period20")}
    assert "kubelet's real cAdvisor" in ON_V2[("E6", "limit")]
    assert "burst budget" in ON_V2[("X1", "budget-full")] and "cpuCFSQuotaPeriod" in ON_V2[("X2", "period20")]
    both = untestable_variants("kind", experiments, CI.runtime, cgroup_version=1)
    assert {k: both[k] for k in ON_V2} == ON_V2
    on_v1 = {k: r for k, r in both.items() if k not in ON_V2}
    for reason in on_v1.values():
        assert reason == f"not testable on the kind backend on this cgroup v1 host: {V1_PIN_REASON}"
    v1, v2 = SimpleNamespace(host_cgroup_version=lambda: 1), SimpleNamespace(host_cgroup_version=lambda: 2)
    placed = placements()
    assert set(placed) == set(VARIANTS)
    for key, (node, load) in placed.items():
        assert KindBackend.untestable(v2, node, load) is None, key
        if key[0] in ("X1", "X2"):
            knob = key in ON_V2
            try:
                refuse_knobs("kind", node)
            except BackendError as refused:
                assert knob and str(refused).rsplit(": ", 1)[1] in ON_V2[key], key
            else:
                assert not knob, key
        if key in over:  # left out first for its request (the API server refuses it), whatever else
            continue
        refused = KindBackend.untestable(v1, node, load)
        assert (refused is not None) == (key in on_v1), key
        assert refused is None or refused in on_v1[key], key
    pinned = {k for k, (node, load) in placed.items() if node.cpus or (load and load.cpus)}
    assert set(on_v1) == pinned - over and {"E5", "E10", "E2b", "E7", "E8", "S2", "X3", "X5", "X6"} == {
        e for e, _ in pinned
    }


# -- the lab: two stand-in clusters --------------------------------------------------------------------


@dataclass
class Lab:
    engine: Any
    workdir: Path
    name: str
    standins: dict[str, StandIn]

    @property
    def clusters(self):
        return {role: s.cluster for role, s in self.standins.items()}

    def nodes(self) -> dict[str, Any]:
        return {name: c for s in self.standins.values() for name, c in s.containers.items()}

    def status(self) -> dict[str, str]:
        return {name: status for s in self.standins.values() for name, status in s.status().items()}

    def cpusets(self) -> dict[str, list[int]]:
        """Each node's CPUs; no cpuset is every CPU (a restored pin writes them out)."""
        every = list(range(int(self.engine.info()["NCPU"])))
        return {name: parse_cpuset(pins.current_cpuset(c)) or every for name, c in self.nodes().items()}

    def live_pods(self) -> list[str]:
        return [pod for s in self.standins.values() for pod in s.api.live_pods()]

    def running_containers(self) -> list[dict[str, Any]]:
        """What still runs on the clusters' nodes, Pod object or not (a force-deleted pod's containers)."""
        return [c for s in self.standins.values() for c in s.api.running_containers()]

    def state_files(self) -> list[str]:
        return state_files(self.nodes())

    def locks_free(self) -> bool:
        """No lab process holds a lock on either cluster (an exclusive one can be taken at once)."""
        return locks_free(c.name for c in self.clusters.values())

    def assert_as_before(self, cpusets: dict[str, list[int]]) -> None:
        """Nothing of a job left: no pod in either cluster, every node running with its cpuset, no
        state file of a pin or a pause, no lock held."""
        assert self.live_pods() == [] and self.running_containers() == []
        assert set(self.status().values()) == {"running"}, self.status()
        assert self.cpusets() == cpusets
        assert self.state_files() == []
        assert self.locks_free()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    engine = engine_or_skip()
    workdir = tmp_path_factory.mktemp("kindlab")
    image = build_node_image(engine, f"throttlelab-kindlab-node:{os.getpid()}")
    name = f"tlkl{os.getpid()}"
    clusters = lab_clusters(workdir, name)
    standins: dict[str, StandIn] = {}
    try:
        for role in ("new", "old"):
            standins[role] = stand_in(engine, image, clusters[role], workdir)
        yield Lab(engine, workdir, name, standins)
    finally:
        for s in standins.values():
            s.remove()
        engine.images.remove(image, force=True)


# -- every variant of the ci profile ---------------------------------------------------------------------


def level_in_tree(tree: Path, pod: dict[str, Any], container: str | None) -> Path:
    """A pod's directory in the fixture tree (`*pod<uid>.slice`, from the live pod's uid), or one of its
    container's (the child whose name holds the container's id in the pod's status)."""
    uid = pod["metadata"]["uid"].replace("-", "_")
    [pod_dir] = tree.rglob(f"*pod{uid}.slice")
    if container is None:
        return pod_dir
    [cid] = [s["containerID"].split("://", 1)[-1] for s in pod["status"]["containerStatuses"] if s["name"] == container]
    [container_dir] = [d for d in pod_dir.iterdir() if d.is_dir() and cid in d.name]
    return container_dir


class CheckedDeployment(FastKindDeployment):
    """Looks around once the experiment has verified its pods: what the job's deployment sees."""

    def verify(self):
        readbacks = super().verify()
        idle = [n for c in self.changes.idle for n in (c.control_plane, c.worker)]
        tree = self.backend.trees[self.cluster.role]
        levels = [(p.name, None) for p in self.pods.node.pods] + [
            (p.name, c.name) for p in self.pods.node.pods for c in p.containers
        ]
        counters = {}
        for pod, container in levels:
            got = {k: v for k, v in self.read_stat(pod, container).items() if k != "t_ns"}
            # the same level's cpu.stat as this host sees it in the fixture tree the node mounts at /fixture,
            # found there apart from the backend: the pod's directory by its uid, a container's by its id
            on_host = parse_cpu_stat((level_in_tree(tree, self.pods.live[pod], container) / "cpu.stat").read_text())
            counters[(pod, container)] = (got, on_host)
        self.backend.seen.append(
            {
                "cluster": self.cluster.role,
                "designed": {lv.design.path for lv in self.readback.levels},
                "readback": {r.path: r for r in readbacks},
                "counters": counters,
                "idle": {name: self.changes.docker.containers.get(name).status for name in idle},
                "pinned": {
                    self.cluster.worker: self.model.cpus,
                    self.cluster.control_plane: self.load.cpus if self.load else None,
                },
                "cpusets": {
                    name: pins.current_cpuset(self.changes.docker.containers.get(name))
                    for name in (self.cluster.worker, self.cluster.control_plane)
                },
                "pod_ips": {name: (obj.get("status") or {}).get("podIP") for name, obj in self.pods.live.items()},
                "names": {p.name: mf.pod_name(p, self.pods.ident.run) for p in self.pods.node.pods},
            }
        )
        return readbacks


class CheckedKind(FastKind):
    deployment_class = CheckedDeployment

    def __init__(self, *args, trees: dict[str, Path], **kwargs):
        super().__init__(*args, **kwargs)
        self.trees = trees  # role -> the fixture tree its worker mounts at /fixture
        self.seen: list[dict[str, Any]] = []


def run_variant(lab: Lab, experiment: str, variant: str) -> tuple[CheckedKind, Any]:
    backend = CheckedKind(lab.clusters, runtime=CI.runtime, trees={role: s.tree for role, s in lab.standins.items()})
    ctx = Context(backend=backend, capabilities=backend.capabilities(), node_cpus=None, seed=1)
    return backend, REGISTRY[experiment](CI.experiments[experiment].variants[variant], ctx)


@pytest.mark.docker
@pytest.mark.parametrize("experiment, variant", RUNNABLE, ids=[f"{e}/{v}" for e, v in RUNNABLE])
def test_every_ci_variant_runs_through_kind(lab, experiment, variant):
    spec = CI.experiments[experiment].variants[variant]
    before = lab.cpusets()
    backend, result = run_variant(lab, experiment, variant)
    assert len(backend.seen) == 1, "one deployment per job"
    seen = backend.seen[0]
    assert seen["cluster"] == ROLE_OF_RUNTIME[spec.runtime or CI.runtime]
    # the design read back at every level (node, QoS, pod, container, and each pod's pause container):
    # every value found in the node, none "unreadable", none different (verify() raised otherwise)
    readback = seen["readback"]
    pods = {p for p in seen["designed"] if p.rsplit("/", 1)[-1].startswith("pod-")}
    assert set(readback) == seen["designed"] | {f"{p}/pause" for p in pods}
    assert all(not r.mismatches and "unreadable" not in r.actual for r in readback.values())
    assert {r["path"] for r in result.records if r["type"] == "readback"} == set(readback)  # and kept in the log
    # the counters of each pod and each container: its own cpu.stat in the node, read through the
    # node's /proc/<pid>/root, equal to that file as this host sees it (a pod's differ from its
    # containers', so a level read from the wrong directory shows)
    for level, (got, on_host) in seen["counters"].items():
        assert got == on_host and got["usage_usec"], level
    assert {got["usage_usec"] for (_, c), (got, _) in seen["counters"].items() if c is None}.isdisjoint(
        {got["usage_usec"] for (_, c), (got, _) in seen["counters"].items() if c is not None}
    )
    # while the job ran the idle cluster was paused, and this one's nodes pinned as the variant asks
    assert set(seen["idle"].values()) == {"paused"}, seen["idle"]
    for node, cpus in seen["pinned"].items():
        if cpus:
            assert seen["cpusets"][node] == cpus, node
    # and afterwards nothing is left: no pod, no pin, no pause, no lock
    lab.assert_as_before(before)


@pytest.mark.docker
def test_e6_on_kind_scrapes_the_workers_cadvisor_through_the_node_proxy(lab):
    """E6 on kind reads the kubelet's real cAdvisor, as the lab did, not an emulation: two scrapes of
    the worker's /metrics/cadvisor through the API server's node proxy, each holding a different
    reading of cAdvisor's housekeeping (every 10 s) with cAdvisor's own sample time, and counters
    that are the e6 container's cpu.stat in the worker, which advances while its job runs (the fake:
    at its 250m limit, 10 periods a second, each throttled for 50 ms), between the two readings'
    times. The ci profile's E6 is too short for that (the plan leaves it out); this one has the
    lab's shape at a smaller scale."""
    spec = (
        CI.experiments["E6"]
        .variants["limit"]
        .with_changes(
            interval_ms=500,
            rounds=22,
            calibration_rounds=1,
            housekeeping_ms=200,
            first_scrape_ms=200,
            scrape_gap_ms=10_000,
        )
    )
    assert cadvisor_misfit(spec) is None
    before = lab.cpusets()
    api = lab.standins["new"].api
    sent = len(api.requests)
    backend = CheckedKind(lab.clusters, runtime=CI.runtime, trees={role: s.tree for role, s in lab.standins.items()})
    ctx = Context(backend=backend, capabilities=backend.capabilities(), node_cpus=None, seed=1)
    result = REGISTRY["E6"](spec, ctx)
    worker = lab.clusters["new"].worker
    scraped = [p for m, p, _q, _b in api.requests[sent:] if m == "GET" and p.endswith("/metrics/cadvisor")]
    assert len(scraped) >= 2 and set(scraped) == {f"/api/v1/nodes/{worker}/proxy/metrics/cadvisor"}
    scrapes = [r for r in result.records if r["type"] == "podstat" and r["when"] == "scrape"]
    assert [r["source"] for r in scrapes] == ["cadvisor", "cadvisor"]
    first, second = scrapes
    assert second["cadvisor_ms"] - first["cadvisor_ms"] >= api.housekeeping_s * 1000  # two readings, not one
    gap_s = (second["cadvisor_ms"] - first["cadvisor_ms"]) / 1000
    periods = second["nr_periods"] - first["nr_periods"]
    # (the first reading may predate the job: cAdvisor read the container when it started, gated)
    assert 0 < periods <= 10 * gap_s + 1 and second["nr_throttled"] - first["nr_throttled"] == periods
    assert second["throttled_usec"] - first["throttled_usec"] == 50_000 * periods
    # 25 ms of CPU per period at 250m, and what the execs into it cost (podgate open)
    assert second["usage_usec"] - first["usage_usec"] >= 25_000 * (periods - 1)
    assert any("kubelet's cAdvisor" in note for note in result.notes)
    lab.assert_as_before(before)


@pytest.mark.docker
def test_the_s2_cascade_reaches_its_upstream_by_pod_ip(lab):
    """The downstream's gate opens with its upstream's address: the upstream pod's IP and the port
    it was asked to listen on (127.0.0.1 would be the downstream's own pod on a real cluster)."""
    (variant,) = [v for v, s in CI.experiments["S2"].variants.items() if s.mode == "cascade"]
    api = lab.standins["new"].api
    sent = len(api.requests)
    backend, result = run_variant(lab, "S2", variant)
    seen = backend.seen[0]
    downstream = seen["names"]["downstream"]
    opened = [
        q["command"]
        for _m, p, q, _b in api.requests[sent:]
        if p.endswith(f"/pods/{downstream}/exec") and q["command"][1:2] == ["open"]
    ]
    assert len(opened) == 1
    (binding,) = [a for a in opened[0][3:] if a.startswith("serve:")]
    port = binding.split("=", 1)[0].split(":", 1)[1]
    assert binding == f"serve:{port}={seen['pod_ips']['upstream']}:{port}"
    assert seen["pod_ips"]["upstream"] != seen["pod_ips"]["downstream"]
    assert any(r.get("src") == "load/generator" for r in result.records)
    assert lab.live_pods() == []


# -- the smoke target's steps (docs/KIND_SMOKE.md) ---------------------------------------------------------

SMOKE_STEPS = ["readback", "burst and cAdvisor", "load by pod IP", "pin and restore", "nothing left"]


@pytest.mark.docker
def test_the_smoke_tests_steps_pass_on_the_stand_in_clusters(lab):
    """`throttlelab smoke` on the stand-ins: what it can show offline. The fake's counters and the
    load's output are scripted (docs/KIND_SMOKE.md says which parts only a real cluster can show)."""
    before = lab.cpusets()
    api = lab.standins["new"].api
    sent = len(api.requests)
    report = smoke.run_smoke(FastKind(lab.clusters, runtime=CI.runtime))
    assert report["ok"], report
    steps = {s["step"]: s for s in report["steps"]}
    assert list(steps) == SMOKE_STEPS and all(s["ok"] for s in steps.values())
    readback = steps["readback"]
    assert readback["unreadable"] == [] and len(readback["pauses"]) == 2
    assert {q.rsplit("/", 1)[-1] for q in readback["qos"]} == {"burstable", "besteffort"}
    burst = steps["burst and cAdvisor"]
    assert burst["nr_throttled_after"] > burst["nr_throttled_before"]
    first, second = burst["cadvisor"]
    assert second["sample_ms"] - first["sample_ms"] >= api.housekeeping_s * 1000
    worker = lab.clusters["new"].worker
    assert [p for m, p, _q, _b in api.requests[sent:] if p.endswith("/metrics/cadvisor")].count(
        f"/api/v1/nodes/{worker}/proxy/metrics/cadvisor"
    ) >= 2
    load = steps["load by pod IP"]
    assert load["target"].startswith("10.244.") and load["answered"] > 0
    assert steps["pin and restore"]["pinned"] == {worker: "0"}
    assert steps["nothing left"]["left"] == []
    lab.assert_as_before(before)


@pytest.mark.docker
def test_a_failed_smoke_step_says_why_stops_the_next_ones_and_leaves_nothing(lab, monkeypatch):
    """A cAdvisor that serves no series for the container: the step fails naming cAdvisor, the load
    and pin steps do not run, the check for leftovers still does, and nothing is left."""
    monkeypatch.setattr(services_experiments, "CADVISOR_LONGEST_S", 1.0)
    monkeypatch.setattr(services_experiments, "RESCRAPE_EVERY_S", 0.2)
    before = lab.cpusets()
    api = lab.standins["new"].api
    monkeypatch.setattr(api, "recorded_cadvisor", ["# an empty page: no series\n"])
    report = smoke.run_smoke(FastKind(lab.clusters, runtime=CI.runtime))
    assert not report["ok"]
    steps = {s["step"]: s for s in report["steps"]}
    assert list(steps) == ["readback", "burst and cAdvisor", "nothing left"]
    assert not steps["burst and cAdvisor"]["ok"]
    assert "the kubelet's cAdvisor did not give a reading" in steps["burst and cAdvisor"]["error"]
    assert steps["nothing left"]["ok"]
    lab.assert_as_before(before)


# -- the idle cluster: paused while a job runs, always resumed ------------------------------------------------


@pytest.mark.docker
def test_the_idle_cluster_is_paused_during_a_job_and_resumed_when_it_fails(lab):
    before = lab.cpusets()
    old = lab.standins["old"]
    with pytest.raises(RuntimeError, match="boom"):
        with FastKind(lab.clusters).deploy(E1):
            assert set(old.status().values()) == {"paused"}
            assert set(lab.standins["new"].status().values()) == {"running"}
            assert all(pauses.state_file(name).exists() for name in old.containers)  # for the sweep
            raise RuntimeError("boom")
    lab.assert_as_before(before)


@pytest.mark.docker
def test_a_job_on_the_old_cluster_pauses_the_new_one(lab):
    before = lab.cpusets()
    with FastKind(lab.clusters).deploy(Node("node", E1.pods, runtime="runc-old")) as dep:
        assert dep.cluster.role == "old"
        assert set(lab.standins["new"].status().values()) == {"paused"}
        assert set(lab.standins["old"].status().values()) == {"running"}
    lab.assert_as_before(before)


RUNNER = textwrap.dedent("""
    import faulthandler, json, signal, sys, time
    from pathlib import Path
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks where a stuck runner is
    # Ctrl-C raises KeyboardInterrupt even when the tests were started in the background, where the
    # shell hands every child SIGINT ignored (the lab's runner installs its own handlers likewise)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, {project!r})
    from throttlelab.backends.kind.kind_backend import KindBackend
    from throttlelab.platform.kind_clusters import clusters_from_settings
    from throttlelab.model.placement import Container, Node, Pod, parse_cpuset
    clusters = clusters_from_settings(json.loads({settings!r}), Path({workdir!r}))
    node = Node("node", (Pod("e1", (Container("app", ("info",), request_milli=500, limit_milli=2000),)),))
    with KindBackend(clusters).deploy(node) as dep:
        print("deployed", flush=True)
        time.sleep(600)
""")


@contextmanager
def deployed_runner(lab: Lab) -> Iterator[subprocess.Popen]:
    """A runner process that has deployed on the new cluster (the old one paused); killed on the way out."""
    script = RUNNER.format(project=str(PROJECT), settings=json.dumps(lab_settings(lab.name)), workdir=str(lab.workdir))
    runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = runner.stdout.readline().strip()
        if line != "deployed":
            raise AssertionError(f"the runner did not deploy: {line!r} {runner.stderr.read()[-2000:]}")
        assert set(lab.standins["old"].status().values()) == {"paused"}
        yield runner
    finally:
        if runner.poll() is None:
            runner.kill()
        runner.wait()


@pytest.mark.docker
def test_ctrl_c_of_the_runner_resumes_the_idle_cluster(lab):
    before = lab.cpusets()
    with deployed_runner(lab) as runner:
        runner.send_signal(signal.SIGINT)
        try:
            _out, err = runner.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            runner.send_signal(signal.SIGUSR1)  # faulthandler: every thread's stack
            time.sleep(2)
            runner.kill()
            _out, err = runner.communicate()
            raise AssertionError(
                f"the runner did not finish within 120 s of Ctrl-C; where it was:\n{err[-8000:]}"
            ) from None
        assert runner.returncode != 0 and "KeyboardInterrupt" in err, err[-3000:]
    try:
        lab.assert_as_before(before)  # undone by the runner itself, on its way out
    except AssertionError as exc:  # what the runner said on its way out tells why
        raise AssertionError(f"{exc}\nthe runner's stderr:\n{err[-3000:]}") from None


@pytest.mark.docker
def test_the_guardian_resumes_the_idle_cluster_when_the_runner_is_sigkilled(lab):
    before = lab.cpusets()
    with deployed_runner(lab) as runner:
        # the guardian holds the runner's cluster locks too: a runner killed drops its own at once, and
        # the next run must not take the clusters before the guardian has resumed and restored them
        (guardian,) = Path(f"/proc/{runner.pid}/task/{runner.pid}/children").read_text().split()
        held = {os.path.realpath(f"/proc/{guardian}/fd/{fd}") for fd in os.listdir(f"/proc/{guardian}/fd")}
        assert {str(pauses.lock_file(c.name).resolve()) for c in lab.clusters.values()} <= held, held
        runner.kill()
        runner.wait()
        deadline = time.monotonic() + 90
        while (
            lab.live_pods() or lab.state_files() or set(lab.status().values()) != {"running"} or not lab.locks_free()
        ) and time.monotonic() < deadline:
            time.sleep(0.2)  # the guardian works in its own process: its results are what there is to wait for
    lab.assert_as_before(before)


@pytest.mark.docker
def test_the_next_run_resumes_nodes_a_dead_run_left_paused(lab):
    before = lab.cpusets()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    old = lab.standins["old"]
    pauses.pause(old.containers.values(), dead.pid)  # as if that runner had paused them and died unguarded
    assert set(old.status().values()) == {"paused"}
    FastKind(lab.clusters).preflight()  # the runner's first step: the sweep resumes them
    lab.assert_as_before(before)


@pytest.mark.docker
def test_a_node_another_process_resumed_meanwhile_counts_as_resumed(lab, monkeypatch):
    """A dead runner's guardian and the next run's sweep may both resume the same node: the one
    that comes second finds it paused when it reads it and running when it unpauses (docker: "is
    not paused"); that is the state it wanted, not an error."""
    before = lab.cpusets()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    old = lab.standins["old"]
    pauses.pause(old.containers.values(), dead.pid)
    stale = {name: lab.engine.containers.get(name) for name in old.containers}  # read while paused
    assert {c.status for c in stale.values()} == {"paused"}
    for container in stale.values():
        lab.engine.api.unpause(container.id)  # the other process wins the race
    real = pauses.node_container
    monkeypatch.setattr(
        pauses,
        "node_container",  # each node's first read is the stale one
        lambda client, name, missing_ok=False: stale.pop(name, None) or real(client, name, missing_ok),
    )
    assert pauses.sweep_pauses(lab.engine) == []  # nothing left for this one to do, and no error
    lab.assert_as_before(before)


@pytest.mark.docker
def test_kind_load_into_the_idle_cluster_waits_until_the_job_is_over(lab, tmp_path, monkeypatch):
    """Snakemake may run `kind load` for one cluster beside a job on the other: the load waits for
    the job (a paused node can be neither exec'd into nor loaded), and the job's measurement is
    not disturbed by it."""
    log = tmp_path / "kind.log"
    stub = tmp_path / "kind-old"
    release = lab.clusters["old"].release
    stub.write_text(
        f'#!/bin/sh\ncase "$1" in\n  version) echo "kind {release} go1.24.6 linux/amd64" ;;\n'
        f'  load) echo "$*" >> {log} ;;\n  *) exit 1 ;;\nesac\n'
    )
    stub.chmod(0o755)
    old = lab_clusters(lab.workdir, lab.name, old_binary=str(stub))["old"]
    image_stamp = tmp_path / "image.json"
    image_stamp.write_text(json.dumps({"tag": kind_tag("go124mod"), "id": "sha256:" + "0" * 64}))
    waiting = threading.Event()
    monkeypatch.setattr(
        kind_clusters, "_progress", lambda message: waiting.set() if "waiting for kind cluster" in message else None
    )
    outcome: dict[str, Any] = {}

    def load() -> None:
        try:
            outcome["record"] = kind_clusters.load_image(old, "go124mod", image_stamp, tmp_path / "loaded.json")
        except BaseException as exc:  # handed to the test's thread
            outcome["error"] = exc

    before = lab.cpusets()
    loader = threading.Thread(target=load)
    with FastKind(lab.clusters).deploy(E1):
        loader.start()
        assert waiting.wait(60), "kind load did not wait for the cluster the job has paused"
        assert not log.exists()  # nothing was loaded into the paused nodes
        assert set(lab.standins["old"].status().values()) == {"paused"}
    loader.join(120)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["record"]["cluster"] == old.name
    assert log.read_text() == f"load docker-image {kind_tag('go124mod')} --name {old.name}\n"
    lab.assert_as_before(before)
