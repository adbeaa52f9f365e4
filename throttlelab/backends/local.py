"""The embedded default backend: this host's own cgroups, no Docker, no Kubernetes.

A node is a cgroup subtree with a cpuset, a pod a child with the pod-level
quota and weight, a container a grandchild running the workload process. The
layout and values are those kubelet and the runtime write (see design.py).
"""

from __future__ import annotations

import ctypes
import json
import itertools
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from throttlelab.host.facts import host_facts
from throttlelab.host.reaper import Guardian, kill_and_remove, run_name, sweep_stale
from throttlelab.model import node_levels as design
from throttlelab.model.placement import LoadPlacement, Node
from throttlelab.backends import cgroup_tree
from throttlelab.backends.base import BackendError, Capabilities, Deployment, Output, Readback, parse_records

_PR_SET_PDEATHSIG = 1
_counter = itertools.count()
# A minimal, fixed environment: the user's own GOMAXPROCS or GODEBUG must never leak into a run.
_BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/", "LANG": "C"}
#: The longest pause between two looks for a record in a process's output (wait_for_record).
RECORD_POLL_MAX_S = 0.1


def _enter_cgroup(proc_files: list[str]):
    """preexec_fn: join the cgroup in every hierarchy, and die with the runner."""

    def enter() -> None:
        for name in proc_files:
            with open(name, "w") as handle:
                handle.write(str(os.getpid()))
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the guardian still cleans up

    return enter


class LocalBackend(cgroup_tree.CgroupTreeBackend):
    name = "local"

    def preflight(self) -> None:
        fs = self.fs
        top = fs.dirs("")[0]
        if not os.access(top, os.W_OK):
            hint = (
                "run as root, or on cgroup v2 start the pipeline in a delegated scope: "
                "systemd-run --user --scope -p Delegate=yes snakemake --cores 1 ..."
                if fs.version == 2
                else "run as root (cgroup v1 has no safe delegation to users)"
            )
            raise BackendError(f"local backend: cannot create cgroups under {top} (no write access); {hint}")
        for variant, path in self.binaries.items():
            if not path.is_file():
                raise BackendError(f"local backend: workload binary {variant} missing at {path}; build it first")

    def capabilities(self) -> Capabilities:
        return Capabilities(
            cpus=cgroup_tree.host_cpu_count(self.fs),
            cgroup_version=self.fs.version,
            can_pin_cpus=cgroup_tree.can_pin_cpus(self.fs),
            has_pause_level=False,
            runtime=self.runtime,
            notes=("no pause container: the local backend starts the workload directly in its container cgroup",),
        )

    def environment(self) -> dict[str, Any]:
        facts = host_facts()
        facts.update(
            backend=self.name,
            cgroup_version=self.fs.version,
            runtime_conversion=self.runtime,
            host_cpuset=self.fs.host_cpus(),
        )
        return facts

    def deploy(self, node: Node, load: LoadPlacement | None = None) -> "LocalDeployment":
        return LocalDeployment(self, node, load)


def spooled(fd: int, chunk: int = 1 << 16) -> str:
    """Everything written to the file ``fd`` so far, read without moving its offset (os.pread)."""
    parts, at = [], 0
    while True:
        data = os.pread(fd, chunk, at)
        if not data:
            break
        parts.append(data)
        at += len(data)
    return b"".join(parts).decode("utf-8", errors="replace")


class _Running:
    """A workload process started in its container cgroup, with its output spooled to a file."""

    def __init__(self, pod: str, container: str, proc: subprocess.Popen, stdout, stderr):
        self.pod, self.container, self.proc = pod, container, proc
        self.stdout, self.stderr = stdout, stderr
        self.started = time.monotonic()

    def find_record(self, record_type: str) -> dict[str, Any] | None:
        """Scan what the process has written so far (its spool file) for a record type. The spool is read
        with pread, which leaves the file's offset alone: the process writes through the same open file,
        at that offset, so a seek here would make its next line overwrite what it wrote before."""
        for line in spooled(self.stdout.fileno()).splitlines():
            if f'"type":"{record_type}"' in line.replace(" ", ""):
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    return None  # a line still being written; the next scan gets it whole
        return None

    def collect(self) -> Output:
        self.stdout.seek(0)
        self.stderr.seek(0)
        text, err = self.stdout.read(), self.stderr.read()
        self.stdout.close()
        self.stderr.close()
        return Output(
            pod=self.pod,
            container=self.container,
            returncode=self.proc.returncode,
            records=parse_records(text, f"{self.pod}/{self.container}"),
            stderr=err,
            wall_s=time.monotonic() - self.started,
        )


def _wait_with_progress(
    run: _Running, timeout_s: float, progress: Callable[[str], None], every_s: float = 10.0
) -> None:
    """Wait for a process, saying every few seconds that it is still going (long jobs show life)."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(run.proc.args, timeout_s)
        try:
            run.proc.wait(min(left, every_s))
            return
        except subprocess.TimeoutExpired:
            progress(f"{run.pod}/{run.container} running for {time.monotonic() - run.started:.0f} s")


class LocalDeployment(Deployment):
    def __init__(self, backend: LocalBackend, node: Node, load: LoadPlacement | None):
        self.backend, self.node, self.load = backend, node, load
        self.fs = backend.fs
        self.root = run_name(next(_counter))
        self.levels = design.design_node(node, node.runtime or backend.runtime, backend.capabilities().cpus)
        self.running: list[_Running] = []
        self.guardian: Guardian | None = None

    # -- lifecycle -------------------------------------------------------------
    def __enter__(self) -> "LocalDeployment":
        sweep_stale(self.fs)
        self.guardian = Guardian(self.fs, self.root)  # first: it must exist before anything it guards
        try:
            cgroup_tree.check_cpus(self.fs, self.node, self.load)
            cgroup_tree.create_tree(self.fs, self.root, self.levels, self.load)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for run in self.running:
            if run.proc.poll() is None:
                run.proc.kill()
            run.proc.wait()
        try:
            kill_and_remove(self.fs, self.root)
        finally:
            if self.guardian is not None:
                self.guardian.close()
                self.guardian = None

    def _load_rel(self) -> str:
        return cgroup_tree.load_rel(self.root)

    # -- readback ----------------------------------------------------------------
    def verify(self) -> list[Readback]:
        return cgroup_tree.raise_on_mismatch(
            [cgroup_tree.read_back(self.fs, self.root, level) for level in self.levels]
        )

    def ancestors(self) -> list[dict[str, Any]]:
        """The levels above the node (run root, host root): informational, not designed."""
        return cgroup_tree.ancestors(self.fs, self.root)

    # -- processes ---------------------------------------------------------------
    def _spawn(
        self, pod: str, container: str, rel: str, args: list[str], variant: str, env: dict[str, str]
    ) -> _Running:
        binary = self.backend.binaries.get(variant)
        if binary is None:
            raise BackendError(f"{pod}/{container}: no workload binary for build {variant!r}")
        stdout = tempfile.TemporaryFile(mode="w+")
        stderr = tempfile.TemporaryFile(mode="w+")
        proc = subprocess.Popen(
            [str(binary), *args],
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env={**_BASE_ENV, **env},
            preexec_fn=_enter_cgroup(self.fs.proc_files(rel)),
        )
        run = _Running(pod, container, proc, stdout, stderr)
        self.running.append(run)
        return run

    def start(self, pod: str, container: str) -> _Running:
        p = self.node.pod(pod)
        c = p.container(container)
        rel = f"{self.root}/{design.container_path(self.node, p, c.name)}"
        return self._spawn(pod, container, rel, list(c.args), c.variant, c.env_dict)

    def _finish(self, run: _Running, timeout_s: float) -> Output:
        try:
            _wait_with_progress(run, timeout_s, self.backend.progress)
        except subprocess.TimeoutExpired:
            run.proc.kill()
            run.proc.wait()
            out = run.collect()
            raise BackendError(
                f"{out.source}: still running after {timeout_s:.0f} s; killed. Last stderr: {out.stderr[-300:]!r}"
            ) from None
        out = run.collect()
        if out.returncode != 0:
            raise BackendError(
                f"{out.source}: exited with {out.returncode}"
                + (" (killed by a signal)" if out.returncode < 0 else "")
                + f"; stderr: {out.stderr.strip()[-400:]!r}"
            )
        return out

    def run_job(self, pod: str, container: str, timeout_s: float) -> Output:
        return self._finish(self.start(pod, container), timeout_s)

    def stop(self, handle: _Running, timeout_s: float = 10.0) -> Output:
        if handle.proc.poll() is None:
            handle.proc.send_signal(signal.SIGTERM)
        return self._finish(handle, timeout_s)

    def run_load(self, args: list[str], timeout_s: float, variant: str = "go124mod") -> Output:
        run = self._spawn("load", "generator", self._load_rel(), args, variant, {})
        return self._finish(run, timeout_s)

    def read_stat(self, pod: str, container: str | None = None) -> dict[str, Any]:
        p = self.node.pod(pod)
        rel = design.container_path(self.node, p, container) if container else design.pod_path(self.node, p)
        return {**self.fs.read_stat(f"{self.root}/{rel}"), "t_ns": time.monotonic_ns()}

    def wait_for_record(self, handle: _Running, record_type: str, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        pause = 0.005  # doubled up to RECORD_POLL_MAX_S: a record that comes at once is seen at once, a long
        # wait (X4's bursts) costs ten looks a second, not fifty (the runner's CPU falls in the window)
        while True:
            # exited? first, then the scan: a process that writes its record and exits between a scan
            # and a poll must not read as one that exited without it
            exited = handle.proc.poll() is not None
            record = handle.find_record(record_type)
            if record is not None:
                return record
            if exited:
                raise BackendError(
                    f"{handle.pod}/{handle.container} exited ({handle.proc.returncode}) before writing "
                    f"a {record_type!r} record"
                )
            if time.monotonic() > deadline:
                raise BackendError(
                    f"{handle.pod}/{handle.container}: no {record_type!r} record after {timeout_s:.0f} s"
                )
            time.sleep(pause)
            pause = min(2 * pause, RECORD_POLL_MAX_S)


def from_config(
    binaries: dict[str, Path], runtime: str, settings: dict[str, Any], progress: Callable[[str], None]
) -> LocalBackend:
    """The registry's factory (backends.base.make_backend); the local backend has no settings."""
    return LocalBackend(binaries, runtime=runtime, progress=progress)
