"""The lab's real node (platform/real_node.py): real etcd, API server, controller-manager, scheduler,
containerd, kubelet and both pinned runc releases on this host, started and taken down.

Needs root and the cluster tools built (`snakemake --cores 2 cluster_tools`; .ci/run builds them): skipped
with the reason otherwise. Each node checks that it leaves nothing: no process of it, no cgroup under its
root, no bridge or veth, no iptables rule, no mount, no folder, and the host sysctls kubelet would set
unchanged. The tests that start, kill or break a node have one each; those that only read a node or deploy
pods on it (and delete them) share one, at the module's end, which makes that check when it is taken down."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import cluster_tool_rows, real_node_missing
from guest_weights import node_kubectl as kubectl, pause_pod
from throttlelab.platform import real_node as nc
from throttlelab.errors import BackendError
from throttlelab.host.processes import running
from throttlelab.platform import real_node_layout as kn
from throttlelab.model import results_layout as layout
from throttlelab.model.coverage import request_over_limit

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.real_node]
PROJECT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def node_tools():
    rows = cluster_tool_rows()
    missing = real_node_missing(rows)
    if missing:
        pytest.skip(missing)
    return nc.split_tools([(r["project"], r["binary"].name, str(r["path"])) for r in rows])


def host_state() -> dict:
    """What a node could leave on this host."""
    procs = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if str(nc.NODES_DIR).encode() in cmd or b"throttlelab.platform.real_node" in cmd:
                procs.append(proc.name)
    cgroups = sorted(str(p) for p in Path("/sys/fs/cgroup").glob("*/throttlelab-node-*"))
    cgroups += sorted(str(p) for p in Path("/sys/fs/cgroup").glob("throttlelab-node-*"))
    links = sorted(p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(("tlnode", "veth")))
    mounts = [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(nc.NODES_DIR) in line]
    rules = (
        subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
        if Path("/usr/sbin/iptables-save").exists()
        else ""
    )
    rules = "\n".join(line for line in rules.splitlines() if not line.startswith("#") and not line.startswith(":"))
    folders = sorted(p.name for p in nc.NODES_DIR.iterdir() if p.is_dir()) if nc.NODES_DIR.is_dir() else []
    # kubelet's pod logs and its links to them (/var/log/pods, /var/log/containers by default)
    logs = sorted(
        str(p) for d in ("/var/log/pods", "/var/log/containers") if Path(d).is_dir() for p in Path(d).iterdir()
    )
    return {
        "processes": procs,
        "cgroups": cgroups,
        "links": links,
        "mounts": mounts,
        "iptables": rules,
        "folders": folders,
        "logs": logs,
        "sysctls": nc.host_sysctls(),
    }


def one_pause_pod(name: str, runtime_class: str) -> dict:
    return pause_pod(name, runtime_class, {"c": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}}})


#: Run as an unprivileged user (nobody), what a local user who is not root would try against a running
#: node: etcd over plain HTTP and over TLS without a certificate, kubelet's exec endpoint without
#: credentials, containerd's socket, the node's keys. Prints what each attempt met.
UNPRIVILEGED_PROBE = """
import json, os, socket, ssl, sys, urllib.error, urllib.request
facts = json.loads(sys.argv[1])
ports, root = facts["ports"], facts["root"]
bridge = facts["subnet"].rsplit(".", 1)[0] + ".1"
out = {}
def attempt(url, ctx=None, method="POST"):
    try:
        req = urllib.request.Request(url, data=b'{"key": "Lw=="}' if method == "POST" else None, method=method)
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ssl.SSLError):
        return "refused"
out["etcd_plain"] = attempt(f"http://127.0.0.1:{ports['etcd_client']}/v3/kv/range")
insecure = ssl.create_default_context()
insecure.check_hostname = False
insecure.verify_mode = ssl.CERT_NONE
out["etcd_tls_without_certificate"] = attempt(f"https://127.0.0.1:{ports['etcd_client']}/v3/kv/range", insecure)
out["kubelet_exec"] = attempt(
    f"https://{bridge}:{ports['kubelet']}/exec/default/p-runc-new/c?command=id&output=1", insecure
)
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.path.join(root, "containerd", "containerd.sock"))
    out["containerd_socket"] = "connected"
except OSError as exc:
    out["containerd_socket"] = type(exc).__name__
try:
    open(os.path.join(root, "pki", "apiserver-etcd-client.key")).read()
    out["node_keys"] = "read"
except OSError as exc:
    out["node_keys"] = type(exc).__name__
print(json.dumps(out))
"""


def as_unprivileged_user(facts: dict) -> dict:
    # the system's interpreter: the project's may live under /root, which nobody cannot enter
    python = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if Path(p).is_file()), None)
    if python is None:
        pytest.fail("no system python3 to run the unprivileged user's attempts with")
    done = subprocess.run(
        [python, "-c", UNPRIVILEGED_PROBE, json.dumps(facts)],
        capture_output=True,
        text=True,
        timeout=120,
        user=65534,
        group=65534,
        extra_groups=[],
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def kubelet_status(facts: dict, who: str, path: str) -> int:
    """The HTTP status kubelet answers ``who`` (a client certificate of the node's CA) on ``path``."""
    import ssl
    import urllib.error
    import urllib.request

    pki = Path(facts["root"]) / "pki"
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # kubelet's serving certificate is its own self-signed one
    ctx.load_cert_chain(str(pki / f"{who}.crt"), str(pki / f"{who}.key"))
    bridge = facts["subnet"].rsplit(".", 1)[0] + ".1"
    try:
        with urllib.request.urlopen(
            f"https://{bridge}:{facts['ports']['kubelet']}{path}", context=ctx, timeout=10
        ) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_runner_killed_with_sigkill_leaves_nothing(node_tools, tmp_path):
    """The node's supervisor outlives the process that started it only until that process's pipe closes."""
    tools, runc = node_tools
    before = host_state()
    script = (
        "import json, sys, time\nfrom throttlelab.platform.real_node import LocalNode\n"
        "tools, runc = json.loads(sys.argv[1])\nwith LocalNode(tools, runc) as facts:\n"
        "    print(json.dumps(facts), flush=True)\n    time.sleep(600)\n"
    )
    runner = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps([tools, runc])],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
    )
    try:
        facts = json.loads(runner.stdout.readline())
        assert Path(facts["root"]).is_dir() and Path("/sys/class/net", facts["bridge"]).exists()
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    deadline = time.monotonic() + nc.STOP_TIMEOUT_S
    while time.monotonic() < deadline and running(facts["supervisor"]):
        time.sleep(0.2)
    assert host_state() == before


def test_node_up_prints_how_to_reach_the_node_and_ctrl_c_takes_it_down(node_tools, tmp_path):
    """`throttlelab node-up`: a node a person can look at with kubectl, gone after Ctrl-C."""
    tools, runc = node_tools
    before = host_state()
    manifest = tmp_path / "tools.json"
    projects: dict = {}
    for name, path in tools.items():
        projects.setdefault("tools", {"binaries": []})["binaries"].append({"name": name, "path": path})
    for handler, path in runc.items():
        projects[kn.RUNTIME_HANDLERS[handler]] = {"binaries": [{"name": "runc", "path": path}]}
    manifest.write_text(json.dumps({"projects": projects}))
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "throttlelab",
            "node-up",
            "--tools",
            str(manifest),
            "--keep-logs",
            str(tmp_path / "logs"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
    )
    try:
        said = [up.stdout.readline() for _ in range(5)]
        kubeconfig = next(line.split("=", 1)[1].strip() for line in said if "export KUBECONFIG=" in line)
        facts = {"kubeconfig": kubeconfig}
        nodes = json.loads(kubectl(facts, tools, "get", "nodes", "-o", "json"))["items"]
        assert [n["metadata"]["name"] for n in nodes] == [kn.NODE_NAME]
        assert "Ctrl-C takes it down" in said[-1]
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=nc.STOP_TIMEOUT_S) == 0
    assert (tmp_path / "logs" / "kubelet.log").is_file()
    assert host_state() == before


def test_a_supervisor_killed_with_sigkill_is_swept_by_clean(node_tools, tmp_path):
    """With the supervisor itself gone, nothing takes the node down by itself: `throttlelab node-sweep` (what
    `snakemake clean` runs first) removes its processes, cgroups, bridge, mounts and folder."""
    tools, runc = node_tools
    before = host_state()
    node = nc.LocalNode(tools, runc)
    facts = node.__enter__()
    try:
        os.kill(facts["supervisor"], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and running(facts["supervisor"]):
            time.sleep(0.1)
        assert Path(facts["root"]).is_dir() and Path("/sys/class/net", facts["bridge"]).exists()  # left behind
        swept = subprocess.run(
            [sys.executable, "-m", "throttlelab", "node-sweep"],
            capture_output=True,
            text=True,
            timeout=nc.STOP_TIMEOUT_S,
            env={**os.environ, "PYTHONPATH": str(PROJECT)},
        )
        assert swept.returncode == 0, swept.stderr
        assert f"removed the node left by supervisor {facts['supervisor']}" in swept.stderr
    finally:
        with pytest.raises(BackendError, match="supervisor was killed by SIGKILL; `snakemake --cores 1 clean`"):
            node.__exit__(None, None, None)
    assert host_state() == before


def test_a_node_that_does_not_start_says_why_and_leaves_nothing(node_tools):
    """Each start step's limit is scaled by ``patience`` (an emulated guest's is 8): limits of a few ms
    fail the start at the first step not ready at once, named, the take-down after it succeeds, and its report
    does not claim a failed take-down (it did, before: supervise exited 1 for both)."""
    tools, runc = node_tools
    before = host_state()
    with pytest.raises(BackendError) as failed:
        with nc.LocalNode(tools, runc, patience=1e-4):
            pytest.fail("the node started within limits of 6-12 ms a step")
    said = str(failed.value)
    assert re.match(r"the real node did not start: [^:]+: not within 0 s; ", said), said
    assert "taking the real node down failed" not in said
    assert host_state() == before


def test_a_node_whose_kubelet_never_gets_ready_fails_in_time_and_keeps_its_logs(node_tools, tmp_path):
    """A kubelet that runs but never registers: the start fails within its (scaled) limit, the error names
    the step and where the components' logs were kept, and those logs are there."""
    tools, runc = node_tools
    stuck = tmp_path / "kubelet"
    stuck.write_text('#!/bin/sh\necho "a kubelet that never registers"\nexec sleep 3600\n')
    stuck.chmod(0o755)
    before = host_state()
    patience = 0.25  # the node-Ready step's 120 s become 30 s; etcd's and the API server's still 15 and 30 s
    started = time.monotonic()
    with pytest.raises(BackendError) as failed:
        with nc.LocalNode({**tools, "kubelet": str(stuck)}, runc, keep_logs=tmp_path / "logs", patience=patience):
            pytest.fail("a node without a working kubelet started")
    took = time.monotonic() - started
    said = str(failed.value)
    assert "the node Ready: not within 30 s" in said and "a kubelet that never registers" in said, said
    assert said.endswith(f"its components' logs: {tmp_path / 'logs'}"), said
    assert "a kubelet that never registers" in (tmp_path / "logs" / "kubelet.log").read_text()
    assert (tmp_path / "logs" / "kube-apiserver.log").is_file()
    assert took < 30 + 60, took  # its own limit, plus the steps before it and the take-down
    assert host_state() == before


@pytest.fixture(scope="module")
def node_inputs(node_tools, binaries, tmp_path_factory):
    """A working directory as the rules leave it for the real node: the workload images (the session's
    cpulab builds and podgate) and the cluster tools manifest, under results/."""
    from throttlelab.platform import real_node_images as ni
    from throttlelab.platform.workload_images import build_podgate

    tools, runc = node_tools
    work = tmp_path_factory.mktemp("node-work")
    podgate = build_podgate(work / "podgate", PROJECT / "workload" / "podgate")
    for build, cpulab in binaries.items():
        ni.build_image(build, cpulab, podgate, ni.archive_path(work / layout.NODE_IMAGE_DIR, build))
    rows = [{"name": name, "path": path, "version_line": ""} for name, path in tools.items()]
    manifest = {
        "projects": {
            "tools": {"binaries": rows},
            **{
                kn.RUNTIME_HANDLERS[h]: {"binaries": [{"name": "runc", "path": p, "version_line": ""}]}
                for h, p in runc.items()
            },
        }
    }
    (work / layout.TOOLS_MANIFEST).parent.mkdir(parents=True, exist_ok=True)
    (work / layout.TOOLS_MANIFEST).write_text(json.dumps(manifest))
    return work


def _cpuset_cgroup(pid: int) -> str:
    """A process's cgroup in the cpuset hierarchy (v1) or the unified one (v2)."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    v1 = [line.split(":", 2)[2] for line in lines if "cpuset" in line.split(":", 2)[1].split(",")]
    return v1[0] if v1 else next(line.split(":", 2)[2] for line in lines if line.startswith("0::"))


def _node_daemons(folder: Path) -> dict[str, list[int]]:
    """The node's own processes by command name: those whose command line names its folder, and the shims."""
    found: dict[str, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if nc.names_folder((proc / "cmdline").read_bytes(), folder):
                found.setdefault((proc / "comm").read_text().strip(), []).append(int(proc.name))
        except OSError:
            continue
    return found


def test_the_runner_killed_mid_e2b_leaves_nothing_and_the_sysctls_unchanged(node_inputs, binaries):
    """`throttlelab run` of E2b on a real node of its own, SIGKILLed while its service is under load: the
    node's supervisor notices the closed pipe and takes everything down."""
    from throttlelab.model.config import load_design

    design = load_design({"profile": "ci", "backend": "kubernetes"}, PROJECT / "config")
    experiment = design.experiments["E2b"]
    variant = next(v for v, s in experiment.variants.items() if not request_over_limit(s))
    before = host_state()
    env = {k: v for k, v in os.environ.items() if k != "THROTTLELAB_ORCHESTRATOR_PID"}
    argv = [
        sys.executable,
        "-m",
        "throttlelab",
        "run",
        "--backend",
        "kubernetes",
        "--experiment",
        "E2b",
        "--variant",
        variant,
        "--repeat",
        "0",
        "--spec",
        experiment.spec_json(variant),
        "--backend-settings",
        json.dumps({"cluster": "local"}),
        "--out",
        str(node_inputs / "rep0.jsonl"),
        *[f"--binary={b}={p}" for b, p in binaries.items()],
    ]
    runner = subprocess.Popen(
        argv, cwd=node_inputs, stderr=subprocess.PIPE, text=True, env={**env, "PYTHONPATH": str(PROJECT)}
    )
    seen = []
    try:
        for line in runner.stderr:  # until its pods are at their gates, then into the load
            seen.append(line)
            if "at their start gates" in line:
                time.sleep(2.0)
                break
        assert any("at their start gates" in line for line in seen), "".join(seen)[-2000:]
        during = host_state()
        assert during["folders"] and during["sysctls"] == before["sysctls"]
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    supervisors = [int(f) for f in during["folders"] if f not in before["folders"]]
    deadline = time.monotonic() + nc.STOP_TIMEOUT_S
    while time.monotonic() < deadline and any(running(s) for s in supervisors):
        time.sleep(0.2)
    assert host_state() == before


def test_a_failed_run_keeps_the_pods_events_and_the_nodes_logs(node_inputs, binaries, tmp_path, monkeypatch):
    """A pod the scheduler cannot place (it asks for 64 CPUs) fails the deployment; what the backend keeps
    for a look says why: the scheduler's event, and the node's component logs as they stood."""
    from throttlelab.backends.node.node_backend import NodeBackend
    from throttlelab.model.placement import Container, Node, Pod

    monkeypatch.delenv("THROTTLELAB_ORCHESTRATOR_PID", raising=False)
    backend = NodeBackend(
        node_inputs / layout.TOOLS_MANIFEST,
        node_inputs / layout.NODE_IMAGE_DIR,
        binaries=binaries,
        pod_start_timeout_s=8,
        node_logs=tmp_path / "node-logs-at-end",
    )
    before = host_state()
    backend.preflight()
    try:
        huge = Node("node", (Pod("huge", (Container("app", ("info",), request_milli=64000),)),))
        with pytest.raises(BackendError):
            with backend.deploy(huge):
                pytest.fail("a pod asking for 64 CPUs was placed on a node of this host")
        kept = backend.keep_failure_evidence(tmp_path / "failure")
        assert kept == [str(tmp_path / "failure" / "events.json"), str(tmp_path / "failure" / "node-logs")]
        events = json.loads((tmp_path / "failure" / "events.json").read_text())
        assert any(e.get("reason") == "FailedScheduling" and "cpu" in e.get("message", "") for e in events), events
        assert (tmp_path / "failure" / "node-logs" / "kubelet.log").is_file()
    finally:
        backend.close()
    assert host_state() == before


# -- one node for the tests that only read it or deploy pods and take them down: they run last, on a node the
# module's end takes down


@pytest.fixture(scope="module")
def host_before() -> dict:
    """What this host held before the shared node started."""
    return host_state()


@pytest.fixture(scope="module")
def node_backend(host_before, node_inputs, binaries):
    """The kubernetes backend on one real node of its own (no orchestrator), shared by the tests below;
    taken down at the module's end, after which the host is as it was and the node's logs are kept."""
    from throttlelab.backends.node.node_backend import NodeBackend

    with pytest.MonkeyPatch.context() as env:
        env.delenv("THROTTLELAB_ORCHESTRATOR_PID", raising=False)
        backend = NodeBackend(
            node_inputs / layout.TOOLS_MANIFEST,
            node_inputs / layout.NODE_IMAGE_DIR,
            binaries=binaries,
            node_logs=node_inputs / layout.NODE_LOGS,
        )
        backend.preflight()
        try:
            yield backend
        finally:
            backend.close()
    assert host_state() == host_before
    assert (node_inputs / layout.NODE_LOGS / "kubelet.log").is_file()


def delete_pods(facts: dict, tools: dict, *names: str) -> None:
    """Delete a test's pods from the shared node and wait until they are gone."""
    kubectl(facts, tools, "delete", "pod", *names, "--wait=true", "--timeout=120s")


def test_readback_at_every_level_under_both_runtimes_and_a_pinned_node(node_backend):
    """Every level read back on a pinned node under both runtimes; kubelet, containerd and the shims pinned
    with the pods (kind's worker container), the control plane with the load generator (kind's
    control-plane node), both given every CPU again afterwards."""
    from throttlelab.model.placement import Container, LoadPlacement, Node, Pod

    facts = node_backend.node_facts
    daemons = _node_daemons(Path(facts["root"]))
    where = {comm: {_cpuset_cgroup(pid) for pid in pids} for comm, pids in daemons.items()}
    node_cgroup, control = facts["cgroup_root"], facts["control_plane_cgroup"]
    for comm in ("kubelet", "containerd"):
        assert where.get(comm) == {f"{node_cgroup}/daemons"}, where
    for comm in ("etcd", "kube-apiserver"):
        assert where.get(comm) == {control}, where
    assert control.rsplit("/", 1)[0] == node_cgroup.rsplit("/", 1)[0]  # one node cgroup holds both
    for runtime in ("runc-new", "runc-old"):
        node = Node(
            "node",
            (Pod("e1", (Container("app", ("info",), request_milli=500, limit_milli=2000),)),),
            cpus="0",
            runtime=runtime,
        )
        with node_backend.deploy(node, LoadPlacement(cpus="1")) as dep:
            readback = dep.verify()  # DesignMismatch if any level differs from docs/LAB.md §2
            levels = {r.level for r in readback}
            assert levels == {"node", "qos", "pod", "container", "pause"}
            upper = [r for r in readback if r.level != "container"]
            assert all(r.actual["cpus"] == "0" for r in upper), [(r.path, r.actual["cpus"]) for r in upper]
            pod = dep.pods.live["e1"]
            assert pod["spec"]["runtimeClassName"] == runtime
            assert node_backend.node_cpusets() == {kn.NODE_NAME: "0", "control-plane": "1"}
            shims = [pid for comm, pids in _node_daemons(Path(facts["root"])).items() if "shim" in comm for pid in pids]
            assert shims and {_cpuset_cgroup(pid) for pid in shims} == {f"{node_cgroup}/daemons"}
            for pid in daemons["kubelet"] + daemons["etcd"]:  # every thread, through the cgroup's cpuset
                assert os.sched_getaffinity(pid) == ({0} if pid in daemons["kubelet"] else {1})
    assert node_backend.node_cpusets() == {kn.NODE_NAME: nc.host_cpus(), "control-plane": nc.host_cpus()}


def test_the_smoke_target_passes_every_step_on_the_real_node(node_backend):
    """docs/KIND_SMOKE.md's five steps against the real node: its cAdvisor labels the burst's series
    (two different readings), a load by pod IP, the node's cgroup root pinned to CPU 0 and restored."""
    from throttlelab.experiments.smoke import run_smoke

    report = run_smoke(node_backend)
    steps = {s["step"]: s for s in report["steps"]}
    assert report["ok"], report
    assert len(steps["burst and cAdvisor"]["cadvisor"]) == 2
    assert steps["pin and restore"]["pinned"] == {kn.NODE_NAME: "0"}
    assert steps["pin and restore"]["restored"] == {kn.NODE_NAME: nc.host_cpus(), "control-plane": nc.host_cpus()}
    assert steps["nothing left"]["left"] == []


def test_node_runs_pods_under_both_runc_releases(node_tools, node_backend, host_before):
    tools, _ = node_tools
    facts = node_backend.node_facts
    during = nc.host_sysctls()
    nodes = json.loads(kubectl(facts, tools, "get", "nodes", "-o", "json"))["items"]
    assert [n["metadata"]["name"] for n in nodes] == [kn.NODE_NAME]
    info = nodes[0]["status"]["nodeInfo"]
    assert info["kubeletVersion"].startswith("v1.34.") and info["containerRuntimeVersion"].startswith("containerd://2.")
    addresses = {a["type"]: a["address"] for a in nodes[0]["status"]["addresses"]}
    assert addresses == {"InternalIP": facts["subnet"].rsplit(".", 1)[0] + ".1", "Hostname": kn.NODE_NAME}
    for handler in kn.RUNTIME_HANDLERS:
        kubectl(facts, tools, "apply", "-f", "-", stdin=json.dumps(one_pause_pod(f"p-{handler}", handler)))
    kubectl(facts, tools, "wait", "--for=condition=Ready", "pod/p-runc-new", "pod/p-runc-old", "--timeout=120s")
    pods = {p["metadata"]["name"]: p for p in json.loads(kubectl(facts, tools, "get", "pods", "-o", "json"))["items"]}
    for name, pod in pods.items():
        uid = pod["metadata"]["uid"]
        found = (
            list(
                Path("/sys/fs/cgroup/cpu").glob(
                    f"{facts['cgroup_root'].lstrip('/')}/kubepods/burstable/pod{uid}/*/cpu.cfs_quota_us"
                )
            )
            if facts["cgroup_version"] == 1
            else list(
                Path("/sys/fs/cgroup").glob(f"{facts['cgroup_root'].lstrip('/')}/kubepods/burstable/pod{uid}/*/cpu.max")
            )
        )
        quotas = sorted(f.read_text().split()[0] for f in found)
        assert "50000" in quotas, (name, quotas)  # the container's limit of 500m, under the node's cgroup root
        assert pod["status"]["podIP"].startswith(facts["subnet"].rsplit(".", 1)[0] + ".")
    # each pod's sandbox ran under its RuntimeClass's runc: containerd's state of each handler holds its tasks
    state = Path(facts["root"]) / "containerd" / "state" / "runc"
    assert sorted(p.name for p in state.iterdir()) == sorted(kn.RUNTIME_HANDLERS)
    assert all(any((state / h).rglob("state.json")) for h in kn.RUNTIME_HANDLERS)
    # kubelet's cAdvisor (through the API server's node proxy) labels the containers' series by pod and
    # container, as E6 selects them: it reaches this node's containerd (kubelet's --containerd)
    labelled, deadline = set(), time.monotonic() + 60
    while labelled != set(pods) and time.monotonic() < deadline:
        metrics = kubectl(facts, tools, "get", "--raw", f"/api/v1/nodes/{kn.NODE_NAME}/proxy/metrics/cadvisor")
        labelled = {
            name
            for name in pods
            if any(
                line.startswith("container_cpu_usage_seconds_total{")
                and 'container="c"' in line
                and f'pod="{name}"' in line
                for line in metrics.splitlines()
            )
        }
        time.sleep(2)
    assert labelled == set(pods), f"cAdvisor has no series labelled pod/container c for {set(pods) - labelled}"
    refused = as_unprivileged_user(facts)
    assert refused == {
        "etcd_plain": "refused",
        "etcd_tls_without_certificate": "refused",
        "kubelet_exec": 401,
        "containerd_socket": "PermissionError",
        "node_keys": "PermissionError",
    }, refused
    # kubelet asks the API server what a client may do: the scheduler's identity is known, but may not
    # list or exec into pods through kubelet (with AlwaysAllow it could)
    assert kubelet_status(facts, "scheduler", "/pods") == 403
    assert kubelet_status(facts, "apiserver-kubelet-client", "/pods") == 200
    delete_pods(facts, tools, *pods)
    assert during == host_before["sysctls"]  # kubelet wrote only its copies, never the host's


def test_volumes_kubelet_mounts_reach_the_containers(node_tools, node_backend):
    """kubelet and containerd share one mount namespace: a Secret volume and the projected service-account
    token, both tmpfs mounts kubelet makes, are inside the container (read on the host through its root)."""
    tools, _ = node_tools
    facts = node_backend.node_facts
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "stringData": {"key": "a secret value"},
    }
    kubectl(facts, tools, "apply", "-f", "-", stdin=json.dumps(secret))
    pod = one_pause_pod("with-volumes", "runc-new")
    pod["spec"]["automountServiceAccountToken"] = True
    pod["spec"]["volumes"] = [{"name": "s", "secret": {"secretName": "s"}}]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "s", "mountPath": "/s"}]
    kubectl(facts, tools, "apply", "-f", "-", stdin=json.dumps(pod))
    kubectl(facts, tools, "wait", "--for=condition=Ready", "pod/with-volumes", "--timeout=120s")
    uid = json.loads(kubectl(facts, tools, "get", "pod", "with-volumes", "-o", "json"))["metadata"]["uid"]
    hierarchy = "cpu" if facts["cgroup_version"] == 1 else ""
    pod_dir = Path("/sys/fs/cgroup", hierarchy, facts["cgroup_root"].lstrip("/"), "kubepods")
    pids = [int(p) for f in pod_dir.glob(f"**/pod{uid}/*/cgroup.procs") for p in f.read_text().split()]
    seen = {}
    for pid in pids:
        root = Path(f"/proc/{pid}/root")
        if (root / "s" / "key").is_file():
            seen["secret"] = (root / "s" / "key").read_text()
            token = root / "var/run/secrets/kubernetes.io/serviceaccount/token"
            seen["token"] = token.read_text().count(".") if token.is_file() else None
    assert seen == {"secret": "a secret value", "token": 2}, (pids, seen)  # a JWT: three parts
    delete_pods(facts, tools, "with-volumes")
    kubectl(facts, tools, "delete", "secret", "s")
