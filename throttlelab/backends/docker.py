"""The docker backend: the placement model as Docker containers, through the Docker SDK.

The way most readers meet CPU limits is `docker run --cpus`; this backend runs
the same experiments that way, with the same raw log format as the local one.

- node: the run's cgroup subtree `throttlelab-<pid>-<n>/<node>` with the node's
  cpuset, written by the lab exactly as on the local backend (design.py values,
  cgroupfs.py writes);
- pod: a cgroup parent (`--cgroup-parent`) holding the pod-level quota and weight,
  also written by the lab, so a pod with several containers has the pod-level
  quota it has on Kubernetes;
- container: one Docker container per container of the model, image
  `cpulab:<build>` (FROM scratch, platform/workload_images.py), `--cpu-quota/--cpu-period` from
  its limit, `--cpu-shares` from its request (kubelet's shares), `--cpuset-cpus`
  of the node, its env (GOMAXPROCS, GODEBUG), and host networking, so every
  request stays on 127.0.0.1.

The engine must run on this host with the cgroupfs cgroup driver (the lab writes
the parent cgroups itself), and the runner must be root.

Cleanup, in layers, as on the local backend: every container carries the labels
`throttlelab=1`, `throttlelab.backend=docker`, `throttlelab.run=<run>` and the
runner's pid; leaving a deployment removes the run's containers by label and
then its cgroups (with termination signals held off meanwhile); a guardian
process (`python -m throttlelab.backends.docker_guardian ...`) does the same when
the runner dies, even by SIGKILL; and every deployment starts by sweeping lab
containers and run cgroups whose runner no longer exists.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import docker
import requests

from throttlelab.host import cgroupfs
from throttlelab.host.docker_engine import connect, docker_errors, engine_error, engine_host
from throttlelab.host.facts import host_facts
from throttlelab.host.processes import pid_alive, spawn_guardian
from throttlelab.host.reaper import Guardian, kill_and_remove, run_name, sweep_stale
from throttlelab.model import node_levels as design
from throttlelab.model import quantities as q
from throttlelab.model import records
from throttlelab.model.placement import Container, LoadPlacement, Node, Pod
from throttlelab.model.runtime import runc_conversion
from throttlelab.backends import cgroup_tree
from throttlelab.platform import workload_images as images
from throttlelab.backends.base import (
    BackendError,
    Capabilities,
    Deployment,
    DesignMismatch,
    Output,
    Readback,
    parse_records,
    refuse_knobs,
)

LABEL = images.LABEL
LABEL_BACKEND = "throttlelab.backend"
LABEL_RUN = "throttlelab.run"
LABEL_RUNNER = "throttlelab.runner-pid"
LABEL_POD = "throttlelab.pod"
LABEL_CONTAINER = "throttlelab.container"
LABEL_ROLE = "throttlelab.role"  # workload | probe | load

# serve bound to loopback with no live heap: an idle process that keeps its container's cgroup in place
PROBE_ARGS = ("serve", "-addr=127.0.0.1:0", "-live-mb=0")

# Run cgroups are named as the local backend's, `throttlelab-<pid>-<n>` (so the same stale
# sweep applies), with n from 1000 on: the two backends never collide in one process.
_counter = itertools.count(1000)
_ZERO_STAT = dict.fromkeys(records.COUNTERS, 0)
_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def _cgroup_of(pid: int) -> str | None:
    """A process's cgroup (relative to the hierarchy root) for the cpu controller, from the host's view."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    unified = None
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path.lstrip("/")
        if controllers == "":
            unified = path.lstrip("/")
    return unified


# -- containers by label ----------------------------------------------------------


def lab_containers(client: docker.DockerClient, run: str | None = None) -> list[Any]:
    """Every container this backend made (of one run, if given), running or not."""
    labels = [f"{LABEL}=1", f"{LABEL_BACKEND}=docker"] + ([f"{LABEL_RUN}={run}"] if run else [])
    return client.containers.list(all=True, filters={"label": labels})


def _remove(container: Any) -> None:
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: removal already in progress
            raise


def remove_containers(client: docker.DockerClient, run: str | None = None, *, stale_only: bool = False) -> list[str]:
    """Remove lab containers by label; with stale_only, only those whose runner is gone."""
    removed = []
    for container in lab_containers(client, run):
        pid = container.labels.get(LABEL_RUNNER, "")
        if stale_only and pid.isdigit() and pid_alive(int(pid)):
            continue
        _remove(container)
        removed.append(container.name)
    return removed


class DockerGuardian(Guardian):
    """The reaper's guardian for a docker run: removes the run's containers, then its cgroups."""

    def __init__(self, full: cgroupfs.CgroupFS, rel: str):
        self.proc = spawn_guardian(
            "throttlelab.backends.docker_guardian", json.dumps(full.describe()), rel, reaped_here=True
        )


# -- the backend ------------------------------------------------------------------


class DockerBackend(cgroup_tree.CgroupTreeBackend):
    name = "docker"

    def __init__(
        self,
        binaries: dict[str, Path],
        runtime: str = "runc-new",
        fs: cgroupfs.CgroupFS | None = None,
        client: docker.DockerClient | None = None,
        progress: Callable[[str], None] = lambda message: None,
    ):
        super().__init__(binaries, runtime, fs, progress)
        self._client = client
        self._version: dict[str, Any] | None = None
        self._info: dict[str, Any] | None = None
        self.image_ids: dict[str, str] = {}

    # -- engine facts ---------------------------------------------------------------
    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = connect()
        return self._client

    def fresh_client(self) -> docker.DockerClient:
        """A new connection pool (after an interrupt, the old one may hold a half-read response)."""
        return docker.from_env(version=self.client.api.api_version, timeout=60)  # a known version: no extra call

    @property
    def info(self) -> dict[str, Any]:
        if self._info is None:
            self._info = self._call(self.client.info)
        return self._info

    @property
    def versions(self) -> dict[str, str]:
        """Docker engine, containerd and runc versions, as the engine reports them."""
        if self._version is None:
            self._version = self._call(self.client.version)
        found = {c.get("Name"): c.get("Version") for c in self._version.get("Components", [])}
        return {
            "Docker engine": found.get("Engine") or self._version.get("Version", "unknown"),
            "containerd": found.get("containerd", "unknown"),
            "runc": found.get("runc", "unknown"),
        }

    @property
    def conversion(self) -> str:
        """The container-level shares -> weight conversion this engine's runc applies (cgroup v2)."""
        # a runc version that cannot be read: the runtime the design was asked for
        return runc_conversion(self.versions["runc"]) or self.runtime

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except docker.errors.APIError as exc:
            raise BackendError(f"docker backend: the engine refused: {exc.explanation or exc}") from None
        except docker_errors() as exc:
            raise engine_error(exc, engine_host()) from None

    # -- the interface ----------------------------------------------------------------
    def preflight(self) -> None:
        info = self.info  # raises EngineUnreachable / EnginePermissionDenied with what to do
        here = socket.gethostname()
        if info.get("Name") not in (here, platform.node()):
            raise BackendError(
                f"docker backend: the engine runs on {info.get('Name')!r}, not on this host ({here!r}); the "
                "backend writes each pod's parent cgroup itself, so it needs an engine on this machine "
                "(e.g. Docker Desktop's VM cannot be used; a Linux host's own dockerd can)"
            )
        if any("rootless" in opt for opt in info.get("SecurityOptions") or []):
            raise BackendError(
                "docker backend: a rootless engine cannot use cgroup parents written by root; use the system dockerd"
            )
        if info.get("CgroupDriver") != "cgroupfs":
            raise BackendError(
                f"docker backend: the engine uses the {info.get('CgroupDriver')!r} cgroup driver; the backend "
                "places containers under cgroup parents it writes itself, which needs the cgroupfs driver: "
                "start dockerd with `--exec-opt native.cgroupdriver=cgroupfs`"
            )
        engine_v = str(info.get("CgroupVersion", ""))
        if engine_v and engine_v != str(self.fs.version):
            raise BackendError(f"docker backend: the engine sees cgroup v{engine_v}, this process v{self.fs.version}")
        top = self.fs.dirs("")[0]
        if not os.access(top, os.W_OK):
            raise BackendError(
                f"docker backend: cannot create the pod cgroups under {top} (no write access); run as root"
            )
        for variant, path in self.binaries.items():
            if not path.is_file():
                raise BackendError(f"docker backend: workload binary {variant} missing at {path}; build it first")
            self.image_ids[variant] = images.ensure_image(self.client, variant, path, self.progress)

    def capabilities(self) -> Capabilities:
        fs = self.fs
        notes = [
            "no pause container: each container of the model is one Docker container; the pod level is "
            "a cgroup parent (--cgroup-parent) whose quota and weight the lab writes"
        ]
        if fs.version == 1:
            notes.append(
                "cgroup v1: Docker writes each container's --cpu-shares (kubelet's shares) as is; "
                "the levels above are written by the lab as on the local backend"
            )
        elif self.conversion != self.runtime:
            notes.append(
                f"runtime={self.runtime} was asked, but this engine's runc "
                f"{self.versions['runc']} converts shares as {self.conversion}; the readback expects "
                "what runc does"
            )
        return Capabilities(
            cpus=cgroup_tree.host_cpu_count(fs),
            cgroup_version=fs.version,
            can_pin_cpus=cgroup_tree.can_pin_cpus(fs),
            has_pause_level=False,
            runtime=self.conversion,
            notes=tuple(notes),
        )

    def environment(self) -> dict[str, Any]:
        facts = host_facts()
        versions = self.versions
        info = self.info
        conversion = (
            f"none: on cgroup v1, runc {versions['runc']} writes each container's --cpu-shares "
            "(kubelet's shares) as given"
            if self.fs.version == 1
            else f"{self.conversion}: what runc {versions['runc']} does at the container level"
        )
        facts.update(
            backend=self.name,
            cgroup_version=self.fs.version,
            runtime_conversion=conversion,
            host_cpuset=self.fs.host_cpus(),
            versions=versions,
            docker_engine_version=versions["Docker engine"],
            containerd_version=versions["containerd"],
            runc_version=versions["runc"],
            docker_api_version=self.client.api.api_version,
            docker_cgroup_driver=info.get("CgroupDriver"),
            docker_storage_driver=info.get("Driver"),
            images={variant: image_id for variant, image_id in self.image_ids.items()},
        )
        return facts

    def deploy(self, node: Node, load: LoadPlacement | None = None) -> "DockerDeployment":
        refuse_knobs(self.name, node)
        return DockerDeployment(self, node, load)


@dataclass
class _Run:
    """One container started by the deployment."""

    pod: str
    container: str
    ctr: Any
    role: str
    started: float = field(default_factory=time.monotonic)
    cgroup_rel: str | None = None
    removed: bool = False
    last_stat: dict[str, Any] | None = None

    @property
    def source(self) -> str:
        return f"{self.pod}/{self.container}"


def _is_read_timeout(exc: BaseException) -> bool:
    return isinstance(exc, requests.exceptions.ConnectionError) and "timed out" in str(exc).lower()


class DockerDeployment(Deployment):
    def __init__(self, backend: DockerBackend, node: Node, load: LoadPlacement | None):
        self.backend, self.node, self.load = backend, node, load
        self.fs = backend.fs
        self.full = cgroupfs.all_hierarchies(self.fs)
        self.client = backend.client
        self.root = self._free_name()
        caps = backend.capabilities()
        self.levels = design.design_node(node, backend.conversion, caps.cpus)
        self.running: list[_Run] = []
        self.current: dict[tuple[str, str], _Run] = {}
        self.guardian: Guardian | None = None
        self._names = itertools.count()
        #: container levels not read back yet: read from the container itself when it starts
        #: (verify_before_start), else from a probe container once the experiment is done
        self.unread: set[tuple[str, str]] = set()
        self.read_at_start: list[Readback] = []

    def _free_name(self) -> str:
        while True:
            name = run_name(next(_counter))
            if not any(d.exists() for d in cgroupfs.all_hierarchies(self.fs).dirs(name)):
                return name

    # -- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> "DockerDeployment":
        self.backend._call(remove_containers, self.client, stale_only=True)
        sweep_stale(self.full)
        self.guardian = DockerGuardian(self.full, self.root)  # first: it must exist before anything it guards
        try:
            cgroup_tree.check_cpus(self.fs, self.node, self.load)
            # Docker makes the container cgroups; they are read back as the containers start
            cgroup_tree.create_tree(self.fs, self.root, self.levels, self.load, containers=False)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)  # a second Ctrl-C waits for cleanup
        cleaned = False  # told to the guardian, which then never connects to the engine
        try:
            containers_removed = False
            try:
                client = self.backend.fresh_client()
                remove_containers(client, self.root)
                client.close()
                containers_removed = True
            except docker_errors() as err:
                print(
                    f"docker backend: could not remove the run's containers ({err}); the guardian retries",
                    file=sys.stderr,
                )
            kill_and_remove(self.full, self.root)  # raises when the tree stays
            cleaned = containers_removed
        finally:
            if self.guardian is not None:
                self.guardian.close(cleaned=cleaned)
                self.guardian = None
            signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def ancestors(self) -> list[dict[str, Any]]:
        """The levels above the node (run root, host root): informational, not designed."""
        return cgroup_tree.ancestors(self.fs, self.root)

    def _load_rel(self) -> str:
        return cgroup_tree.load_rel(self.root)

    # -- containers ------------------------------------------------------------------
    def _labels(self, pod: str, container: str, role: str) -> dict[str, str]:
        return {
            LABEL: "1",
            LABEL_BACKEND: "docker",
            LABEL_RUN: self.root,
            LABEL_RUNNER: str(os.getpid()),
            LABEL_POD: pod,
            LABEL_CONTAINER: container,
            LABEL_ROLE: role,
        }

    def container_settings(self, pod: Pod, c: Container) -> dict[str, Any]:
        """The docker run settings of one container of the model (what `docker run` flags say)."""
        level = self._level(pod.name, c.name)
        settings: dict[str, Any] = {
            "cgroup_parent": "/" + f"{self.root}/{design.pod_path(self.node, pod)}",
            "cpu_shares": q.milli_to_shares(c.request_milli),  # kubelet's shares; runc converts them (v2)
            "environment": c.env_dict,
        }
        if level.quota_us is not None:
            settings.update(cpu_quota=level.quota_us, cpu_period=level.period_us)
        if self.node.cpus:
            settings["cpuset_cpus"] = self.node.cpus
        return settings

    def _launch(
        self, pod: str, container: str, role: str, image: str, command: list[str], settings: dict[str, Any]
    ) -> _Run:
        name = f"{self.root}-{pod}-{container}-{next(self._names)}"
        ctr = self.backend._call(
            self.client.containers.create,
            image,
            command,
            name=name,
            detach=True,
            network_mode="host",  # loopback only: never the bridge
            labels=self._labels(pod, container, role),
            **settings,
        )
        run = _Run(pod, container, ctr, role)
        self.running.append(run)
        self.backend._call(ctr.start)
        run.started = time.monotonic()
        return run

    def _image(self, variant: str, source: str) -> str:
        try:
            return self.backend.image_ids[variant]
        except KeyError:
            raise BackendError(f"{source}: no image for build {variant!r} (did preflight run?)") from None

    def start(self, pod: str, container: str) -> _Run:
        p = self.node.pod(pod)
        c = p.container(container)
        run = self._launch(
            pod,
            container,
            "workload",
            self._image(c.variant, f"{pod}/{container}"),
            list(c.args),
            self.container_settings(p, c),
        )
        self.current[(pod, container)] = run
        if (pod, container) in self.unread:
            self._read_back_started(run, p, c)
        return run

    def _read_back_started(self, run: _Run, pod: Pod, c: Container) -> None:
        """Read a just-started container's cgroup on the host and compare it with the design; a mismatch
        stops the container and raises. One that has exited already (its cgroup gone with it) stays
        unread: a probe container reads it back after the experiment."""
        try:
            rel = self.backend._call(self._container_rel, run)
            got = cgroup_tree.read_level(self.fs, rel)
        except (BackendError, cgroupfs.CgroupError, OSError):
            return
        got["read_from"] = f"/{rel} (the container itself, just started, read on the host)"
        readback = self._container_readback(pod, c, got)
        self.unread.discard((pod.name, c.name))
        if readback.mismatches:
            self._discard(run)
        self.read_at_start.append(cgroup_tree.raise_on_mismatch([readback], " (docker backend)")[0])

    def _wait(self, run: _Run, timeout_s: float, every_s: float = 10.0) -> int | None:
        """Exit status, or None after timeout_s; says every few seconds that it is still going."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                return int(run.ctr.wait(timeout=max(1, min(left, every_s)))["StatusCode"])
            except requests.exceptions.ConnectionError as exc:
                if not _is_read_timeout(exc):
                    raise engine_error(exc, engine_host()) from None
                self.backend.progress(f"{run.source} running for {time.monotonic() - run.started:.0f} s")

    def _collect(self, run: _Run, returncode: int | None) -> Output:
        stdout = self.backend._call(run.ctr.logs, stdout=True, stderr=False).decode(errors="replace")
        stderr = self.backend._call(run.ctr.logs, stdout=False, stderr=True).decode(errors="replace")
        wall = time.monotonic() - run.started
        self._discard(run)
        return Output(
            pod=run.pod,
            container=run.container,
            returncode=returncode,
            records=parse_records(stdout, run.source),
            stderr=stderr,
            wall_s=wall,
        )

    def _discard(self, run: _Run) -> None:
        if not run.removed:
            self.backend._call(_remove, run.ctr)
            run.removed = True

    def _finish(self, run: _Run, timeout_s: float) -> Output:
        code = self._wait(run, timeout_s)
        if code is None:
            self.backend._call(run.ctr.kill)
            out = self._collect(run, self._wait(run, 10))
            raise BackendError(
                f"{out.source}: still running after {timeout_s:.0f} s; killed. Last stderr: {out.stderr[-300:]!r}"
            )
        out = self._collect(run, code)
        if code != 0:
            why = ""
            if code > 128:
                try:
                    why = f" (killed by a signal: {signal.Signals(code - 128).name})"
                except ValueError:
                    why = " (killed by a signal)"
            raise BackendError(f"{out.source}: exited with {code}{why}; stderr: {out.stderr.strip()[-400:]!r}")
        if run.role == "workload":
            self._check_own_cgroup(out)
        return out

    def run_job(self, pod: str, container: str, timeout_s: float) -> Output:
        return self._finish(self.start(pod, container), timeout_s)

    def stop(self, handle: _Run, timeout_s: float = 10.0) -> Output:
        try:
            handle.ctr.kill(signal="SIGTERM")
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: it has exited already
                raise BackendError(f"{handle.source}: cannot signal it: {exc.explanation or exc}") from None
        except docker_errors() as exc:
            raise engine_error(exc, engine_host()) from None
        return self._finish(handle, timeout_s)

    def run_load(self, args: list[str], timeout_s: float, variant: str = "go124mod") -> Output:
        settings: dict[str, Any] = {"cgroup_parent": "/" + self._load_rel(), "environment": {}}
        if self.load and self.load.cpus:
            settings["cpuset_cpus"] = self.load.cpus
        run = self._launch("load", "generator", "load", self._image(variant, "load/generator"), list(args), settings)
        return self._finish(run, timeout_s)

    def _container_rel(self, run: _Run) -> str:
        if run.cgroup_rel is None:
            run.ctr.reload()
            pid = run.ctr.attrs.get("State", {}).get("Pid") or 0
            rel = _cgroup_of(pid) if pid else None
            # an exited process that is not reaped yet shows the root cgroup ("/") on cgroup v1: a path
            # outside the run's own tree is not the container's
            if rel is None or not rel.startswith(f"{self.root}/"):
                raise BackendError(f"{run.source}: not running, so it has no cgroup to read")
            run.cgroup_rel = rel
        return run.cgroup_rel

    def read_stat(self, pod: str, container: str | None = None) -> dict[str, Any]:
        """As on the local backend, where a container's cgroup lives as long as the deployment:
        before the container starts, zero counters (its cgroup would hold nothing yet); while it
        runs, its cgroup's; after it ended, the last reading taken while it ran (Docker removes a
        container's cgroup when its process exits)."""
        p = self.node.pod(pod)
        if container is None:
            return {**self.fs.read_stat(f"{self.root}/{design.pod_path(self.node, p)}"), "t_ns": time.monotonic_ns()}
        p.container(container)  # a KeyError for a container the model does not have
        run = self.current.get((pod, container))
        if run is None:
            return {**_ZERO_STAT, "t_ns": time.monotonic_ns()}
        if not run.removed:
            try:
                run.last_stat = self.fs.read_stat(self._container_rel(run))
            except (BackendError, cgroupfs.CgroupError, *docker_errors()):
                pass  # it ended between the check and the read
        return {**(run.last_stat or _ZERO_STAT), "t_ns": time.monotonic_ns()}

    def wait_for_record(self, handle: _Run, record_type: str, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        needle = f'"type":"{record_type}"'
        while True:
            # the state first, then the logs: a container that writes its record and exits between a
            # scan of its logs and a look at its state must not read as one that exited without it
            self.backend._call(handle.ctr.reload)
            exited = handle.ctr.status in ("exited", "dead")
            text = self.backend._call(handle.ctr.logs, stdout=True, stderr=False).decode(errors="replace")
            for line in text.splitlines():
                if needle in line.replace(" ", ""):
                    try:
                        return json.loads(line)
                    except json.JSONDecodeError:
                        break  # a line still being written; the next scan gets it whole
            if exited:
                code = handle.ctr.attrs.get("State", {}).get("ExitCode")
                raise BackendError(f"{handle.source} exited ({code}) before writing a {record_type!r} record")
            if time.monotonic() > deadline:
                raise BackendError(f"{handle.source}: no {record_type!r} record after {timeout_s:.0f} s")
            time.sleep(0.05)

    # -- readback --------------------------------------------------------------------
    def _level(self, pod: str, container: str):
        for level in self.levels:
            if level.level == "container" and level.pod == pod and level.container == container:
                return level
        raise KeyError(f"no container level for {pod}/{container}")

    def expected_container(self, pod: str, container: str) -> dict[str, Any]:
        """What Docker and runc write for this container: its quota and period, and on cgroup v1
        kubelet's shares as given, on v2 the weight runc converts them to."""
        level = self._level(pod, container)
        c = self.node.pod(pod).container(container)
        shares = q.milli_to_shares(c.request_milli)
        expected: dict[str, Any] = {"quota_us": level.quota_us, "period_us": level.period_us}
        if self.fs.version == 1:
            expected.update(weight=None, shares=shares)
            how = f"docker --cpu-shares {shares} (kubelet's shares), kept as is on cgroup v1"
        else:
            expected.update(weight=level.weight, shares=None)
            how = f"docker --cpu-shares {shares} (kubelet's shares) -> {self.backend.conversion} weight by runc"
        if self.node.cpus:
            expected["cpus"] = self.node.cpus
        limit = q.format_cpu(c.limit_milli)
        expected["formula"] = f"container: request {q.format_cpu(c.request_milli)} -> {how}; limit {limit}" + (
            f" -> --cpu-quota {level.quota_us} --cpu-period {level.period_us}" if level.quota_us else ""
        )
        return expected

    def _probe(self, pod: Pod, c: Container) -> tuple[dict[str, Any], str]:
        """Start a container with exactly this container's settings, read its cgroup on the host, remove it."""
        run = self._launch(
            pod.name,
            c.name,
            "probe",
            self._image(c.variant, f"{pod.name}/{c.name}"),
            list(PROBE_ARGS),
            self.container_settings(pod, c),
        )
        try:
            self.wait_for_record(run, "listening", timeout_s=30)
            rel = self.backend._call(self._container_rel, run)
            return cgroup_tree.read_level(self.fs, rel), rel
        finally:
            self._discard(run)

    def _container_readback(self, pod: Pod, c: Container, got: dict[str, Any]) -> Readback:
        """One container's level: its design beside what was read from its cgroup."""
        level = self._level(pod.name, c.name)
        designed = self.expected_container(pod.name, c.name)
        meta = {"formula": designed.pop("formula"), "pod": pod.name, "container": c.name}
        return Readback(
            level=level.level,
            path=level.path,
            design={**designed, **meta},
            actual=got,
            mismatches=cgroup_tree.compare(designed, got, self.fs.version),
        )

    def _probed(self, pod: Pod, c: Container) -> Readback:
        got, rel = self._probe(pod, c)
        got["read_from"] = f"/{rel} (a probe container with the same settings, read on the host)"
        return self._container_readback(pod, c, got)

    def verify(self) -> list[Readback]:
        """Every level: the lab's own read back, each container's from a probe container with its settings."""
        results = []
        for level in self.levels:
            if level.level != "container":
                results.append(cgroup_tree.read_back(self.fs, self.root, level))  # written by the lab
                continue
            p = self.node.pod(level.pod)
            results.append(self._probed(p, p.container(level.container)))
        return cgroup_tree.raise_on_mismatch(results, " (docker backend)")

    def verify_before_start(self) -> list[Readback]:
        """The lab's levels now; each container's from the container itself as it starts
        (:meth:`readbacks_after`), which spares a probe container per container and job."""
        results = [cgroup_tree.read_back(self.fs, self.root, lv) for lv in self.levels if lv.level != "container"]
        self.unread = {(lv.pod, lv.container) for lv in self.levels if lv.level == "container"}
        self.read_at_start = []
        return cgroup_tree.raise_on_mismatch(results, " (docker backend)")

    def readbacks_after(self) -> list[Readback]:
        """The containers read as they started, and a probe's reading of each that never started (or had
        exited before it could be read), in the design's order."""
        read = {(r.design["pod"], r.design["container"]): r for r in self.read_at_start}
        for pod, container in sorted(self.unread):
            p = self.node.pod(pod)
            read[(pod, container)] = self._probed(p, p.container(container))
        self.unread = set()
        ordered = [read[(lv.pod, lv.container)] for lv in self.levels if (lv.pod, lv.container) in read]
        return cgroup_tree.raise_on_mismatch(ordered, " (docker backend)")

    def _check_own_cgroup(self, out: Output) -> None:
        """The workload's header reads its own container's cgroup: it must agree with the design too."""
        header = next((r for r in out.records if r.get("type") == "header"), None)
        if header is None or not isinstance(header.get("cgroup"), dict):
            return
        designed = self.expected_container(out.pod, out.container)
        designed.pop("formula")
        designed.pop("cpus", None)  # the header has no cpuset; the readback checked it
        mismatches = cgroup_tree.compare(designed, header["cgroup"], self.fs.version)
        if mismatches:
            raise DesignMismatch(
                f"{out.source}: its own cgroup, as the workload read it, differs from the design: "
                + "; ".join(mismatches)
            )


# -- command line: the guardian, and a manual sweep ---------------------------------


def sweep() -> int:
    """Remove every lab container and run cgroup whose runner no longer exists."""
    try:
        removed = remove_containers(connect(), stale_only=True)
        cgroups = sweep_stale(cgroupfs.all_hierarchies(cgroupfs.detect()))
    except (BackendError, cgroupfs.CgroupError) as exc:
        print(f"sweep: {exc}", file=sys.stderr)
        return 1
    print(f"removed {len(removed)} container(s) and {len(cgroups)} run cgroup tree(s)")
    return 0


def main(argv: list[str]) -> int:
    if argv == ["sweep"]:
        return sweep()
    print(
        "usage: python -m throttlelab.backends.docker sweep",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def from_config(
    binaries: dict[str, Path], runtime: str, settings: dict[str, Any], progress: Callable[[str], None]
) -> DockerBackend:
    """The registry's factory (backends.base.make_backend); the docker backend has no settings."""
    return DockerBackend(binaries, runtime=runtime, progress=progress)
