"""The lab's own single-node Kubernetes cluster on this host: started for a run, gone after it.

`LocalNode` (a context manager) starts a supervisor process,
``python -m throttlelab.platform.real_node '<json>'``, in a session of its own,
and keeps a pipe to its stdin. The supervisor makes the node (platform.real_node_layout
says what it is), prints one JSON line ``{"ready": {...}}`` with the kubeconfig
and the node's facts, and waits for the pipe to close; then it takes the node
down. So the node ends with the runner however the runner ends: a clean exit,
an exception, Ctrl-C (the supervisor's own session does not get the terminal's
signals), SIGTERM or SIGKILL (the pipe closes with the process).

What taking it down undoes, each step whatever the others do: every pod
(gracefully through the API, so kubelet stops its containers), kubelet, every
pod sandbox (crictl: runc removes the containers' cgroups, CNI DEL their veths
and addresses), containerd and any shim of its socket, the control plane, every
process left under the node's cgroup root, the cgroup root itself in every
hierarchy, the bridge, and the node's folder. containerd and kubelet run in
mount namespaces of their own, so no mount they made outlives them; kubelet's
namespace covers the host sysctls it would set with copies, so the host's
values never change (checked before and after, and said if they did).

A supervisor that is itself killed leaves its folder with its pid in it; the
next node's start removes what such a node left (`sweep_stale`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from contextlib import closing
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from throttlelab.errors import BackendError, ThrottlelabError, every_step
from throttlelab.platform import oci_archive
from throttlelab.platform import pki
from throttlelab.host.mounts import cgroup_hierarchies, mounts_under
from throttlelab.host.processes import die_with_parent, kill_all, running, spawn_guardian
from throttlelab.host.state_dir import open_new, read_state, state_dir, state_root
from throttlelab.model.results_layout import TOOLS_MANIFEST
from throttlelab.platform import real_node_layout as kn

#: Parent of every node's folder (one per supervisor, named by its pid), in the lab's private state folder
#: (host/state_dir.py); nodes_dir() makes and checks it.
NODES_DIR = state_root() / "nodes"
START_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 120.0
# supervise's exit status: the node did not start (and was taken down), or taking it down failed; a
# crash of the supervisor itself exits 1 (Python's own status for an uncaught exception)
START_FAILED, TAKE_DOWN_FAILED = 3, 4
CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")
#: The binaries a node needs, by name in the cluster tools manifest (results/cluster-tools/tools.json).
NODE_BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "crictl",
)


def tools_from_manifest(manifest_path: Path) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """binary -> path, RuntimeClass -> runc, binary -> version line, from the cluster tools manifest
    (results/cluster-tools/tools.json)."""
    try:
        manifest = json.loads(Path(manifest_path).read_text())
    except (OSError, ValueError):
        raise BackendError(
            f"the real node's tools are not built (no {manifest_path}): "
            'snakemake --cores 2 cluster_tools (docs/PLATFORM.md, "Cluster tools")'
        ) from None
    rows, versions = [], {}
    for project, entry in manifest.get("projects", {}).items():
        for binary in entry.get("binaries", []):
            rows.append((project, binary["name"], binary["path"]))
            versions[f"runc {project.split('-', 1)[-1]}" if binary["name"] == "runc" else binary["name"]] = binary.get(
                "version_line", ""
            )
    tools, runc = split_tools(rows)
    return tools, runc, versions


def node_needs(row: dict[str, Any]) -> bool:
    """Whether a row of the cluster tools cache (tool_build.cached) is a binary the node runs (kind's
    tools and kubeadm are not)."""
    name = getattr(row["binary"], "name", row["binary"])  # a catalogue Binary, or its name
    return name in NODE_BINARIES or (name == "runc" and row["project"] in kn.RUNTIME_HANDLERS.values())


def split_tools(rows: list[tuple[str, str, str]]) -> tuple[dict[str, str], dict[str, str]]:
    """(project, binary, path) rows of the cluster tools -> (binary -> path, RuntimeClass -> runc)."""
    tools, runc = {}, {}
    for project, binary, path in rows:
        if binary == "runc":
            for handler, folder in kn.RUNTIME_HANDLERS.items():
                if project == folder:
                    runc[handler] = path
        else:
            tools[binary] = path
    return tools, runc


# -- small helpers ----------------------------------------------------------------------------------------------


def _say(message: str) -> None:
    print(f"  node: {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(argv: list[str], what: str, timeout_s: float = 60.0, check: bool = True) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BackendError(f"{what}: {exc}") from exc
    if check and done.returncode != 0:
        raise BackendError(f"{what}: exit {done.returncode}: {(done.stderr or done.stdout).strip()[-600:]}")
    return done.stdout


def _component_child() -> None:
    """In a component before exec: its own session, and SIGKILL when the supervisor dies."""
    os.setsid()
    die_with_parent()


def host_sysctls() -> dict[str, str]:
    """The host's values of the sysctls kubelet would set, and of IP forwarding."""
    out = {}
    for name in (*kn.KUBELET_SYSCTLS, *kn.FORWARDING_SYSCTLS):
        try:
            out[name] = (Path("/proc/sys") / name).read_text().strip()
        except OSError:
            out[name] = "unreadable"
    return out


def routes_in_use() -> list[str]:
    """Destinations of this host's IPv4 routes (ip -j route)."""
    try:
        routes = json.loads(_run(["ip", "-j", "-4", "route", "show", "table", "all"], "ip route") or "[]")
    except (ValueError, BackendError):
        return []
    return [r.get("dst", "") for r in routes]


def choose_subnet(in_use: list[str]) -> tuple[int, str]:
    """The first real_node_layout.pod_subnet no route of this host covers or overlaps."""
    import ipaddress

    taken = []
    for dst in in_use:
        if dst in ("default", ""):
            continue
        try:
            taken.append(ipaddress.ip_network(dst if "/" in dst else f"{dst}/32", strict=False))
        except ValueError:
            continue
    for index in range(256):
        subnet = ipaddress.ip_network(kn.pod_subnet(index))
        if not any(subnet.overlaps(t) for t in taken):
            return index, str(subnet)
    raise BackendError("no free /24 in 10.213.0.0/16 for the node's pods: every one is routed on this host")


def _client_context(layout: kn.NodeLayout, who: str = "admin") -> ssl.SSLContext:
    """TLS to the node's API server: its CA, and the client certificate ``who``."""
    ctx = ssl.create_default_context(cafile=str(layout.pki / "ca.crt"))
    ctx.load_cert_chain(str(layout.pki / f"{who}.crt"), str(layout.pki / f"{who}.key"))
    return ctx


def _https_ok(url: str, layout: kn.NodeLayout, who: str = "admin") -> bool:
    """Whether ``url`` answers 200 to the client certificate ``who``."""
    try:
        with urllib.request.urlopen(url, context=_client_context(layout, who), timeout=5) as r:
            return r.status == 200
    except (OSError, ValueError):
        return False


def _readable_within(stream: Any, timeout_s: float) -> bool:
    """Whether ``stream`` has a line (or its end) to read within ``timeout_s``."""
    import select

    ready, _, _ = select.select([stream], [], [], timeout_s)
    return bool(ready)


def nodes_dir() -> Path:
    """NODES_DIR, made where missing, and checked: the lab's own, private folder (else StateDirError)."""
    return state_dir(NODES_DIR.name)


def bridge_name(supervisor: int) -> str:
    """The node's bridge: its supervisor's pid in full (pid_max is at most 2^22, 7 digits, so the name
    fits Linux's 15 characters and no two live nodes share one)."""
    return f"tlnode{supervisor}"


# -- the supervisor: makes the node, waits, takes it down ------------------------------------------------------


class Supervisor:
    """One node's life (in the supervisor process)."""

    def __init__(self, desc: dict[str, Any]):
        self.tools: dict[str, str] = desc["tools"]
        self.runc: dict[str, str] = desc["runc"]
        self.images: list[dict[str, str]] = desc.get("images", [])
        self.keep_logs = Path(desc["keep_logs"]) if desc.get("keep_logs") else None
        self.cpus: str | None = desc.get("cpus")
        self.owner: int | None = desc.get("owner")
        # how much longer than on this host's own CPUs each start step may take (an emulated guest's are slower)
        self.patience: float = float(desc.get("patience") or 1.0)
        self.procs: dict[str, subprocess.Popen] = {}
        self._tls: ssl.SSLContext | None = None  # the admin's TLS to the API server, once the PKI is made
        self.log_files: dict[str, TextIO] = {}
        self.sysctls_before = host_sysctls()
        folder = nodes_dir() / str(os.getpid())
        index, subnet = choose_subnet(routes_in_use())
        ports = kn.Ports(free_port(), free_port(), free_port(), free_port())
        self.layout = kn.NodeLayout(
            root=folder,
            ports=ports,
            bridge=bridge_name(os.getpid()),
            subnet=subnet,
            cgroup_top=f"/throttlelab-node-{os.getpid()}",
        )

    # -- making ------------------------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str], cgroup: str, env: dict[str, str] | None = None) -> None:
        """Start a component in ``cgroup`` (the control plane's, or the node's daemons')."""
        log = open(self.layout.logs / f"{name}.log", "w")  # noqa: SIM115 - closed in take_down
        self.log_files[name] = log

        procs = cgroup_procs_files(cgroup)  # found here: the child between fork and exec only writes

        def child() -> None:
            for path in procs:
                path.write_text("0")  # "0": the writing process itself
            _component_child()

        self.procs[name] = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            preexec_fn=child,
        )

    def _wait(self, what: str, ready: Callable[[], bool], timeout_s: float, names: tuple[str, ...]) -> None:
        timeout_s *= self.patience
        deadline = time.monotonic() + timeout_s
        while not ready():
            for name in names:
                if self.procs[name].poll() is not None:
                    raise BackendError(
                        f"{name} exited ({self.procs[name].returncode}) before {what}: {self._tail(name)}"
                    )
            if time.monotonic() > deadline:
                raise BackendError(
                    f"{what}: not within {timeout_s:.0f} s; {names[-1]}'s log ends: {self._tail(names[-1])}"
                )
            time.sleep(0.25)

    def _tail(self, name: str, lines: int = 8) -> str:
        try:
            text = (self.layout.logs / f"{name}.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:])

    def make(self) -> dict[str, Any]:
        lay = self.layout
        lay.root.mkdir(mode=0o700)  # new: a folder left at this pid is swept before any node starts
        for d in (
            lay.logs,
            lay.pki,
            lay.etcd_data,
            lay.containerd_root,
            lay.containerd_state,
            lay.cni_conf_dir,
            lay.cni_ipam_dir,
            lay.kubelet_dir,
            lay.sysctl_copies,
        ):
            d.mkdir(parents=True, exist_ok=True)
        # whom the node serves: the orchestrator, or the runner that started it (its pipe)
        with open_new(lay.root / "owner") as handle:
            handle.write(f"{self.owner or os.getppid()}\n")
        started = time.monotonic()
        _say(f"certificates, configuration in {lay.root}")
        pki.make_pki(lay.pki, list(kn.CERTIFICATES))
        for who in ("admin", "controller-manager", "scheduler", "kubelet"):
            lay.kubeconfig(who).write_text(kn.kubeconfig_text(lay, who))
        self._tls = _client_context(lay)
        cni_bin = next((d for d in CNI_BIN_DIRS if Path(d, "bridge").is_file()), None)
        if cni_bin is None:
            raise BackendError(
                "the CNI plugins (bridge, host-local, loopback) are not installed: "
                "apt-get install containernetworking-plugins"
            )
        lay.containerd_config.write_text(kn.containerd_config_text(lay, self.runc, cni_bin))
        (lay.cni_conf_dir / "10-throttlelab.conflist").write_text(kn.cni_config_text(lay))
        lay.kubelet_config.write_text(kn.kubelet_config_text(lay))
        for copy, host_file in kn.sysctl_mounts(lay):
            copy.write_text(Path(host_file).read_text())
        lay.var_log.mkdir(parents=True, exist_ok=True)
        lay.pod_logs.mkdir(parents=True, exist_ok=True)
        _say(f"bridge {lay.bridge} {lay.bridge_address}/24, cgroup root {lay.cgroup_root}")
        _run(["ip", "link", "add", lay.bridge, "type", "bridge"], "making the node's bridge")
        _run(["ip", "addr", "add", f"{lay.bridge_address}/24", "dev", lay.bridge], "addressing the bridge")
        _run(["ip", "link", "set", lay.bridge, "up"], "bringing the bridge up")
        make_cgroup_root(lay.cgroup_root, self.cpus)
        make_cgroup_root(lay.daemons_cgroup, None, leaf=True)
        make_cgroup_root(lay.control_plane_cgroup, None, leaf=True)

        _say("etcd")
        control = lay.control_plane_cgroup
        self._spawn("etcd", kn.etcd_argv(self.tools["etcd"], lay), control)
        etcd_health = f"https://127.0.0.1:{lay.ports.etcd_client}/health"
        self._wait("etcd healthy", lambda: _https_ok(etcd_health, lay, "etcd-healthcheck-client"), 60, ("etcd",))
        _say("kube-apiserver")
        self._spawn("kube-apiserver", kn.apiserver_argv(self.tools["kube-apiserver"], lay), control)
        self._wait(
            "the API server ready", lambda: _https_ok(f"{lay.server}/readyz", lay), 120, ("etcd", "kube-apiserver")
        )
        _say("kube-controller-manager, kube-scheduler")
        self._spawn(
            "kube-controller-manager", kn.controller_manager_argv(self.tools["kube-controller-manager"], lay), control
        )
        self._spawn("kube-scheduler", kn.scheduler_argv(self.tools["kube-scheduler"], lay), control)
        _say("containerd")
        path = os.pathsep.join([str(Path(self.tools["containerd-shim-runc-v2"]).parent), os.environ.get("PATH", "")])
        self._spawn(
            "containerd",
            kn.private_mounts_argv("unshare", kn.containerd_argv(self.tools["containerd"], lay)),
            lay.daemons_cgroup,
            env={"PATH": path},
        )
        self._wait("containerd serving", lambda: self._ctr_ok(), 60, ("containerd",))
        for image in [{"reference": kn.PAUSE_IMAGE, "archive": str(self._pause_archive())}, *self.images]:
            _say(f"importing {image['reference']}")
            self._ctr("images", "import", "--no-unpack=false", image["archive"])
        self._ctr("images", "label", oci_archive.full_reference(kn.PAUSE_IMAGE), "io.cri-containerd.pinned=pinned")
        _say("kubelet")
        self._spawn(
            "kubelet",
            kn.joined_mounts_argv(
                "nsenter",
                self.procs["containerd"].pid,
                kn.kubelet_argv(self.tools["kubelet"], lay),
                kn.kubelet_mounts(lay),
            ),
            lay.daemons_cgroup,
        )
        self._wait("the node Ready", self._node_ready, 120, ("containerd", "kubelet"))
        for handler in kn.RUNTIME_HANDLERS:
            self._create_runtime_class(kn.runtime_class(handler))
        self._wait("the default ServiceAccount", self._default_sa, 60, ("kube-controller-manager",))
        took = time.monotonic() - started
        _say(f"ready in {took:.1f} s")
        return {
            "kubeconfig": str(lay.kubeconfig("admin")),
            "context": "throttlelab-node",
            "node": kn.NODE_NAME,
            "cgroup_root": lay.cgroup_root,
            "control_plane_cgroup": lay.control_plane_cgroup,
            "bridge": lay.bridge,
            "subnet": lay.subnet,
            "root": str(lay.root),
            "start_s": round(took, 2),
            "ports": asdict(lay.ports),
            "sysctls": self.sysctls_before,
            "cgroup_version": 2 if Path("/sys/fs/cgroup/cgroup.controllers").exists() else 1,
            "patience": self.patience,  # its take-down's limits too (stop_nodes)
        }

    def _pause_archive(self) -> Path:
        catatonit = shutil.which("catatonit") or "/usr/bin/catatonit"
        if not Path(catatonit).is_file():
            raise BackendError("catatonit (the pause image's init) is not installed: apt-get install catatonit")
        out = self.layout.root / "images" / "pause.tar"
        oci_archive.write_archive(
            out, kn.PAUSE_IMAGE, [oci_archive.ImageFile(Path(catatonit), "/catatonit")], ["/catatonit", "-P"]
        )
        return out

    def _ctr(self, *args: str) -> str:
        return _run(
            [self.tools["ctr"], "--address", str(self.layout.containerd_socket), "--namespace", "k8s.io", *args],
            f"ctr {' '.join(args[:2])}",
            timeout_s=120,
        )

    def _ctr_ok(self) -> bool:
        try:
            self._ctr("version")
            return True
        except BackendError:
            return False

    def _api(self, path: str, method: str = "GET", body: dict | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"{self.layout.server}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, context=self._tls, timeout=10) as r:
            return json.loads(r.read() or b"null")

    def _node_ready(self) -> bool:
        try:
            node = self._api(f"/api/v1/nodes/{kn.NODE_NAME}")
        except (OSError, ValueError):
            return False
        return any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in node.get("status", {}).get("conditions", [])
        )

    def _default_sa(self) -> bool:
        try:
            self._api("/api/v1/namespaces/default/serviceaccounts/default")
            return True
        except (OSError, ValueError):
            return False

    def _create_runtime_class(self, obj: dict) -> None:
        try:
            self._api("/apis/node.k8s.io/v1/runtimeclasses", method="POST", body=obj)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # already there
                raise BackendError(f"creating RuntimeClass {obj['metadata']['name']}: HTTP {exc.code}") from exc

    # -- taking down -------------------------------------------------------------------------------------------
    def _stop(self, name: str, timeout_s: float = 20.0) -> list[str]:
        proc = self.procs.get(name)
        if proc is None or proc.poll() is not None:
            return []
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
            return []
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            return [f"{name} did not stop on SIGTERM within {timeout_s:.0f} s: killed"]

    def _delete_pods(self) -> list[str]:
        if self.procs.get("kube-apiserver") is None or self.procs["kube-apiserver"].poll() is not None:
            return []
        try:
            pods = self._api("/api/v1/pods").get("items", [])
        except (OSError, ValueError):
            return []
        for pod in pods:
            meta = pod["metadata"]
            try:
                self._api(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", method="DELETE")
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 60
        while pods and time.monotonic() < deadline:
            try:
                pods = self._api("/api/v1/pods").get("items", [])
            except (OSError, ValueError):
                break
            time.sleep(0.5)
        return [f"{len(pods)} pod(s) still there after 60 s"] if pods else []

    def _remove_sandboxes(self) -> list[str]:
        if self.procs.get("containerd") is None or self.procs["containerd"].poll() is not None:
            return []
        crictl = [
            self.tools["crictl"],
            "--runtime-endpoint",
            f"unix://{self.layout.containerd_socket}",
            "--timeout",
            "30s",
        ]
        ids = _run([*crictl, "pods", "-q"], "crictl pods", check=False).split()
        for sandbox in ids:
            _run([*crictl, "stopp", sandbox], "crictl stopp", check=False)
            _run([*crictl, "rmp", "-f", sandbox], "crictl rmp", check=False)
        return [f"removed {len(ids)} pod sandbox(es) kubelet left"] if ids else []

    def _kill_leftovers(self) -> list[str]:
        return kill_node_processes(self.layout.root, self.layout.cgroup_top)

    def take_down(self) -> list[str]:
        lay = self.layout
        steps: list[Callable[[], list[str] | None]] = [
            self._delete_pods,
            lambda: self._stop("kubelet"),
            self._remove_sandboxes,
            lambda: self._stop("containerd"),
            lambda: self._stop("kube-scheduler"),
            lambda: self._stop("kube-controller-manager"),
            lambda: self._stop("kube-apiserver"),
            lambda: self._stop("etcd"),
            self._kill_leftovers,  # shims and pod processes, should any be left
            lambda: remove_cgroup_root(lay.cgroup_top),
            lambda: remove_bridge(lay.bridge),
            self._keep_logs,
            lambda: remove_folder(lay.root),
            self._check_sysctls,
        ]
        try:
            return every_step(steps)
        finally:
            for log in self.log_files.values():
                log.close()

    def _keep_logs(self) -> list[str]:
        if self.keep_logs is None or not self.layout.logs.is_dir():
            return []
        self.keep_logs.mkdir(parents=True, exist_ok=True)
        for log in self.layout.logs.iterdir():
            shutil.copyfile(log, self.keep_logs / log.name)
        return []

    def _check_sysctls(self) -> list[str]:
        after = host_sysctls()
        changed = {k: (self.sysctls_before[k], v) for k, v in after.items() if v != self.sysctls_before[k]}
        for name, (before, _) in changed.items():
            (Path("/proc/sys") / name).write_text(before)
        if changed:
            raise BackendError(
                "host sysctls changed while the node ran (restored): "
                + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items())
            )
        return []


# -- host pieces (also used by the sweep) ------------------------------------------------------------------------


#: The v2 controllers kubelet checks on its cgroup root ("has some missing controllers" otherwise).
V2_CONTROLLERS = ("cpu", "cpuset", "hugetlb", "io", "memory", "pids")


def enable_v2_controllers(base: Path) -> list[str]:
    """On a v2 hierarchy, hand V2_CONTROLLERS down from ``base`` (its cgroup.subtree_control), so a child
    made under it has them: a v2 kernel gives a new cgroup only what its parent's subtree_control lists.
    Under systemd the root lists them already (nothing changes); a root without an init that does so (a
    vm backend guest) lists none, and kubelet refused its cgroup root. Returns the ones it enabled."""
    control = base / "cgroup.subtree_control"
    if not control.exists():
        return []
    have = set(control.read_text().split())
    wanted = sorted((set((base / "cgroup.controllers").read_text().split()) & set(V2_CONTROLLERS)) - have)
    for c in wanted:
        try:
            control.write_text(f"+{c}")
        except OSError:
            pass
    return wanted


def make_cgroup_root(root: str, cpus: str | None, leaf: bool = False) -> None:
    """A cgroup of the node, made with any missing parent in every hierarchy (cpuset: the parent's CPUs and
    memory nodes, or ``cpus`` at ``root`` itself). On v2 each level but a ``leaf`` hands the controllers
    down; a leaf holds processes, which v2 keeps out of a cgroup that hands controllers down."""
    parts = root.strip("/").split("/")
    for base in cgroup_hierarchies():
        enable_v2_controllers(base)
        parent = base
        for depth in range(1, len(parts) + 1):
            path = base.joinpath(*parts[:depth])
            last = depth == len(parts)
            path.mkdir(exist_ok=True)
            if (base / "cpuset.cpus").exists() and (path / "cpuset.cpus").exists():  # v1 cpuset: empty when made
                if not (path / "cpuset.cpus").read_text().strip():
                    (path / "cpuset.cpus").write_text((parent / "cpuset.cpus").read_text().strip())
                if not (path / "cpuset.mems").read_text().strip():
                    (path / "cpuset.mems").write_text((parent / "cpuset.mems").read_text().strip())
                if last and cpus:
                    (path / "cpuset.cpus").write_text(cpus)
            if (base / "cgroup.subtree_control").exists():  # v2: hand the controllers down
                if not (last and leaf):
                    enable_v2_controllers(path)
                if last and cpus and (path / "cpuset.cpus").exists():
                    (path / "cpuset.cpus").write_text(cpus)
            parent = path


def cgroup_procs_files(root: str) -> list[Path]:
    """``root``'s cgroup.procs in every hierarchy that has it: writing "0" to each moves the writer there."""
    return [p for p in (base / root.lstrip("/") / "cgroup.procs" for base in cgroup_hierarchies()) if p.exists()]


def host_cpus() -> str:
    """The CPUs the node's cgroup root may have: its parent's (v1 cpuset's top, v2's effective set)."""
    for top in (Path("/sys/fs/cgroup/cpuset/cpuset.cpus"), Path("/sys/fs/cgroup/cpuset.cpus.effective")):
        if top.is_file():
            return top.read_text().strip()
    return f"0-{os.cpu_count() - 1}"


def cgroup_root_cpus(root: str) -> str:
    """The CPUs the node's cgroup root has now (v1: its cpuset.cpus; v2: its effective set)."""
    for path in (
        Path("/sys/fs/cgroup/cpuset") / root.lstrip("/") / "cpuset.cpus",
        Path("/sys/fs/cgroup") / root.lstrip("/") / "cpuset.cpus.effective",
    ):
        if path.is_file():
            return path.read_text().strip()
    raise BackendError(f"the node's cgroup root {root} has no cpuset to read")


def pin_cgroup_root(root: str, cpus: str | None) -> str:
    """Give the node's cgroup root and everything under it the CPUs ``cpus`` (None: every CPU of the
    host again). v1: each cpuset must stay inside its parent's, so the tree first grows to hold both
    sets (top-down), then shrinks to ``cpus`` (bottom-up); new pod cgroups copy their parent's. v2: the
    root alone (its children inherit). Returns the CPUs written."""
    from throttlelab.model.placement import parse_cpuset

    wanted = cpus or host_cpus()
    v1 = Path("/sys/fs/cgroup/cpuset") / root.lstrip("/")
    if v1.is_dir():
        dirs = sorted((p for p in [v1, *v1.rglob("*")] if p.is_dir()), key=lambda p: len(p.parts))
        for d in dirs:  # grow
            current = (d / "cpuset.cpus").read_text().strip()
            union = sorted(set(parse_cpuset(current)) | set(parse_cpuset(wanted)))
            (d / "cpuset.cpus").write_text(",".join(map(str, union)))
        for d in reversed(dirs):  # shrink
            try:
                (d / "cpuset.cpus").write_text(wanted)
            except FileNotFoundError:  # a pod's cgroup removed meanwhile
                continue
        return wanted
    v2 = Path("/sys/fs/cgroup") / root.lstrip("/") / "cpuset.cpus"
    if v2.is_file():
        v2.write_text(cpus or "")
        return wanted
    raise BackendError(f"the node's cgroup root {root} has no cpuset to pin")


def names_folder(cmdline: bytes, folder: Path) -> bool:
    """Whether a command line (/proc/<pid>/cmdline: NUL-separated arguments) names ``folder`` or a path
    in it, as an argument, an argument's value (``--config=<folder>/...``) or inside a quoted script;
    ``<folder>0`` is another node's folder, not a path in this one."""
    pattern = re.compile(rb'(?:^|[=: "])' + re.escape(str(folder).encode()) + rb'(?:$|[/" \n])', re.MULTILINE)
    return any(pattern.search(arg) for arg in cmdline.split(b"\0"))


def kill_node_processes(folder: Path, cgroup_root: str) -> list[str]:
    """SIGKILL every process under the node's cgroup root (pods) and every one whose command line names
    the node's folder (containerd's shims outlive containerd by design), then wait until they are gone."""
    pids = set(cgroup_root_pids(cgroup_root))
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if names_folder((proc / "cmdline").read_bytes(), folder):
                    pids.add(int(proc.name))
            except OSError:
                continue
    pids -= {os.getpid(), os.getppid()}
    names = {}
    for pid in pids:
        try:
            names[pid] = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            pass
    killed = kill_all(sorted(pids))
    deadline = time.monotonic() + 10
    while any(running(p) for p in killed) and time.monotonic() < deadline:
        time.sleep(0.05)
    return (
        [
            f"killed {len(killed)} process(es) left by the node: "
            + ", ".join(f"{names.get(p, '?')} ({p})" for p in killed)
        ]
        if killed
        else []
    )


def cgroup_root_pids(root: str) -> list[int]:
    pids: set[int] = set()
    for base in cgroup_hierarchies():
        top = base / root.lstrip("/")
        if not top.is_dir():
            continue
        for procs in top.rglob("cgroup.procs"):
            try:
                pids.update(int(p) for p in procs.read_text().split())
            except OSError:
                continue
    return sorted(pids)


def remove_cgroup_root(root: str) -> list[str]:
    left = []
    for base in cgroup_hierarchies():
        top = base / root.lstrip("/")
        if not top.is_dir():
            continue
        for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True) + [top]:
            for _attempt in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                left.append(str(d))
    if left:
        raise BackendError(f"cgroups of the node could not be removed (busy): {', '.join(left[:5])}")
    return []


def remove_bridge(bridge: str) -> list[str]:
    if not bridge or not Path("/sys/class/net", bridge).exists():
        return []
    for port in (
        sorted(Path("/sys/class/net", bridge, "brif").glob("*"))
        if Path("/sys/class/net", bridge, "brif").is_dir()
        else []
    ):
        _run(["ip", "link", "del", port.name], f"removing {port.name}", check=False)
    _run(["ip", "link", "del", bridge], f"removing the bridge {bridge}")
    return []


def remove_folder(folder: Path) -> list[str]:
    if not folder.exists():
        return []
    mounted = mounts_under(folder)
    for target in mounted:
        _run(["umount", "-l", target], f"unmounting {target}", check=False)
    shutil.rmtree(folder, ignore_errors=True)
    if folder.exists():
        raise BackendError(f"the node's folder {folder} could not be removed")
    return [f"unmounted {len(mounted)} mount(s) the node left"] if mounted else []


def sweep_stale() -> list[str]:
    """Take down what a node whose supervisor died (SIGKILL) left: its processes, cgroups, bridge, folder."""
    done = []
    if not NODES_DIR.is_dir():
        return done
    for folder in nodes_dir().iterdir():
        name = folder.name  # the supervisor's pid
        if not name.isdigit() or running(int(name)):
            continue
        kill_node_processes(folder, f"/throttlelab-node-{name}")
        root, bridge, gone = f"/throttlelab-node-{name}", bridge_name(int(name)), folder
        every_step(
            [
                lambda root=root: remove_cgroup_root(root),
                lambda bridge=bridge: remove_bridge(bridge),
                lambda gone=gone: remove_folder(gone),
            ]
        )
        done.append(f"removed the node left by supervisor {name}")
    return done


def _wait_for_end(owner: int | None) -> str:
    """Block until the node should go: the runner's pipe closes (no owner), or the owner (the
    orchestrator the node serves) ends, or a stop request (SIGUSR1) arrives. Returns which."""
    import select

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGUSR1, lambda *_: None)
    watched = [wake_r]
    if owner is None:
        watched.append(sys.stdin.fileno())
    else:
        try:
            owner_fd = os.pidfd_open(owner)
        except ProcessLookupError:
            return f"its owner {owner} has ended"
        watched.append(owner_fd)
    ready, _, _ = select.select(watched, [], [])
    if wake_r in ready:
        return "asked to stop"
    return "the runner's pipe closed" if owner is None else f"its owner {owner} has ended"


def _why(exc: Exception) -> str:
    """An error's one line: the lab's own say what to do; anything else is named by its type."""
    return str(exc) if isinstance(exc, ThrottlelabError) else f"{type(exc).__name__}: {exc}"


def supervise(desc: dict[str, Any]) -> int:
    """Make the node, say it is ready, wait until it should go, take it down. Whatever fails while it is
    made, the take-down runs; the exit status says which part failed (START_FAILED, TAKE_DOWN_FAILED)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    try:
        for line in sweep_stale():
            _say(line)
        sup = Supervisor(desc)
    except Exception as exc:  # nothing of this node exists yet: nothing to take down
        print(json.dumps({"failed": _why(exc)}), flush=True)
        return START_FAILED
    owner = desc.get("owner")
    status = 0
    try:
        facts = sup.make()
        with open_new(sup.layout.root / "facts.json") as handle:
            handle.write(json.dumps(facts))
        print(json.dumps({"ready": facts}), flush=True)
        if owner is not None:
            # the starting runner ends long before the node: say the rest into the node's own log
            log = os.open(sup.layout.logs / "supervisor.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            for fd in (1, 2):
                os.dup2(log, fd)
            os.close(log)
        why = _wait_for_end(owner)
        _say(f"{why}: taking the node down")
    except Exception as exc:
        print(json.dumps({"failed": _why(exc)}), flush=True)
        status = START_FAILED
        _say("taking down what was made")
    try:
        for line in sup.take_down():
            _say(line)
    except Exception as exc:
        _say(f"taking down: {_why(exc)}")
        status = TAKE_DOWN_FAILED
    _say("down")
    return status


def find_node(owner: int) -> dict[str, Any] | None:
    """The facts of the running node that serves ``owner`` (an orchestrator's pid), or None."""
    if not NODES_DIR.is_dir():
        return None
    for folder in nodes_dir().iterdir():
        try:
            if int(read_state(folder / "owner")) != owner or not running(int(folder.name)):
                continue
            facts = json.loads(read_state(folder / "facts.json"))
        except (OSError, ValueError):
            continue
        return {**facts, "supervisor": int(folder.name)}
    return None


def stop_nodes(owner: int, timeout_s: float = STOP_TIMEOUT_S, tell: Callable[[str], None] = _say) -> list[int]:
    """Ask every node serving ``owner`` to go, and wait until its supervisor has taken it down."""
    stopped = []
    if not NODES_DIR.is_dir():
        return stopped
    for folder in nodes_dir().iterdir():
        try:
            sup = int(folder.name)
            if int(read_state(folder / "owner")) != owner or not running(sup):
                continue
        except (OSError, ValueError):
            continue
        try:  # a slow node (an emulated guest's) takes as many times longer to go as to start
            limit = timeout_s * max(1.0, float(json.loads(read_state(folder / "facts.json")).get("patience") or 1))
        except (OSError, ValueError):
            limit = timeout_s
        tell(f"taking down the real node (supervisor {sup})")
        os.kill(sup, signal.SIGUSR1)
        deadline = time.monotonic() + limit
        while running(sup) and time.monotonic() < deadline:
            time.sleep(0.1)
        if running(sup):
            raise BackendError(f"the real node's supervisor {sup} did not finish within {limit:.0f} s")
        stopped.append(sup)
    return stopped


# -- the runner's side -----------------------------------------------------------------------------------------


class LocalNode:
    """``with LocalNode(tools, runc, images) as facts:`` a running node for the block's duration.

    ``tools``: binary name -> path (NODE_BINARIES); ``runc``: RuntimeClass -> runc binary;
    ``images``: [{"reference", "archive"}] imported into containerd before kubelet starts;
    ``owner``: an orchestrator's pid: the node then serves it (its later runners find it with
    find_node) and goes when it ends or stop_nodes asks; leaving the block does not stop it.
    ``patience``: each start step may take that many times its usual limit (an emulated guest's CPUs).
    """

    def __init__(
        self,
        tools: dict[str, str],
        runc: dict[str, str],
        images: list[dict[str, str]] | None = None,
        keep_logs: Path | None = None,
        cpus: str | None = None,
        owner: int | None = None,
        patience: float = 1.0,
    ):
        missing = [b for b in NODE_BINARIES if not tools.get(b) or not Path(tools[b]).is_file()]
        missing += [f"runc for {h}" for h in kn.RUNTIME_HANDLERS if not runc.get(h) or not Path(runc[h]).is_file()]
        if missing:
            raise BackendError(
                f"the real node needs {', '.join(missing)}: build them with "
                '`snakemake --cores 2 cluster_tools` (docs/PLATFORM.md, "Cluster tools")'
            )
        self.desc = {
            "tools": tools,
            "runc": runc,
            "images": images or [],
            "owner": owner,
            "keep_logs": str(keep_logs) if keep_logs else None,
            "cpus": cpus,
            "patience": patience,
        }
        self.owner = owner
        self.proc: subprocess.Popen | None = None
        self.facts: dict[str, Any] | None = None

    def __enter__(self) -> dict[str, Any]:
        if os.geteuid() != 0:
            raise BackendError("the real node needs root (kubelet, containerd, cgroups, a bridge)")
        self.proc = spawn_guardian("throttlelab.platform.real_node", json.dumps(self.desc), stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        limit = START_TIMEOUT_S * max(1.0, self.desc["patience"])
        if not _readable_within(self.proc.stdout, limit):
            # a supervisor stuck past every step's own limit: end it, and sweep what it made as a dead node's
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            left = sweep_stale()
            raise BackendError(
                f"the real node did not start within {limit:.0f} s; its supervisor was killed and its leftovers "
                f"removed ({'; '.join(left) or 'none'})"
            )
        line = self.proc.stdout.readline()
        try:
            said = json.loads(line) if line else {"failed": "the node's supervisor ended before it was ready"}
        except ValueError:
            said = {"failed": f"the node's supervisor said {line!r}"}
        if "ready" not in said:
            why = f"the real node did not start: {said.get('failed')}" + (
                f"; its components' logs: {self.desc['keep_logs']}" if self.desc.get("keep_logs") else ""
            )
            try:
                self._close()
            except BackendError as exc:  # the start's reason first: the take-down's failure follows from it
                raise BackendError(f"{why}; then {exc}") from None
            raise BackendError(why)
        self.facts = {**said["ready"], "supervisor": self.proc.pid}
        return self.facts

    def _close(self) -> None:
        if self.proc is None:
            return
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        if self.owner is not None and self.facts is not None:
            self.proc = None  # it serves its owner: it goes when the owner does (or stop_nodes)
            return
        limit = STOP_TIMEOUT_S * max(1.0, self.desc["patience"])  # a take-down never gets less than its usual limit
        try:
            self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise BackendError(f"the node's supervisor did not finish taking it down within {limit:.0f} s") from None
        status = self.proc.returncode
        self.proc = None
        if status == START_FAILED and self.facts is None:
            return  # the start's failure is the news; the take-down after it went well
        if status == TAKE_DOWN_FAILED:
            raise BackendError("taking the real node down failed; see its messages above")
        if status != 0:
            how = f"was killed by {signal.Signals(-status).name}" if status < 0 else f"crashed (exit {status})"
            raise BackendError(f"the real node's supervisor {how}; `snakemake --cores 1 clean` removes what it left")

    def __exit__(self, *exc: object) -> None:
        self._close()


def node_up(manifest_path: Path, keep_logs: Path | None) -> int:
    """Start a node for a person to look at (`throttlelab node-up`): print how to reach it, keep it until
    Ctrl-C (or SIGTERM), then take it down."""
    tools, runc, _versions = tools_from_manifest(manifest_path)
    stop = {"asked": False}

    def ask_to_stop(*_: object) -> None:
        stop["asked"] = True

    with LocalNode(tools, runc, keep_logs=keep_logs) as facts:
        kubectl = Path(tools["kube-apiserver"]).with_name("kubectl")
        print(
            f"the real node is up (supervisor {facts['supervisor']}, folder {facts['root']}):\n"
            f"  export KUBECONFIG={facts['kubeconfig']}\n"
            f"  {kubectl} get nodes,pods -A\n"
            f"its components' logs: {facts['root']}/logs"
            + (f" (copied to {keep_logs} when it goes)" if keep_logs else "")
            + "\nCtrl-C takes it down (so does the end of this command, however it ends).",
            flush=True,
        )
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, ask_to_stop)
        while not stop["asked"]:
            signal.pause()
        _say("taking the node down")
    _say("down")
    return 0


def main(argv: list[str]) -> int:
    """``sweep``: take down what dead nodes left (`throttlelab node-sweep`, `snakemake clean`); ``up``:
    start one until Ctrl-C (`throttlelab node-up`); otherwise ``argv[0]`` is a node's description and this
    process becomes its supervisor."""
    if argv == ["sweep"]:
        for line in sweep_stale():
            _say(line)
        _say("no node's leftovers remain")
        return 0
    if argv[:1] == ["up"]:
        import argparse

        parser = argparse.ArgumentParser(prog="throttlelab node-up", description=node_up.__doc__.splitlines()[0])
        parser.add_argument("--tools", type=Path, default=Path(TOOLS_MANIFEST), help="the cluster tools manifest")
        parser.add_argument("--keep-logs", type=Path, default=None, help="copy the components' logs here at the end")
        args = parser.parse_args(argv[1:])
        try:
            return node_up(args.tools, args.keep_logs)
        except ThrottlelabError as exc:
            print(f"node-up: {exc}", file=sys.stderr)
            return 1
    return supervise(json.loads(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
