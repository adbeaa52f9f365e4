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
import platform
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from throttlelab.host import cgroupfs
from throttlelab.model import design
from throttlelab.model.quantities import weight_to_v1_shares
from throttlelab.model.placement import LoadPlacement, Node, format_cpuset, parse_cpuset
from throttlelab.host.reaper import Guardian, kill_and_remove, sweep_stale
from throttlelab.backends.base import Backend, BackendError, Capabilities, Deployment, DesignMismatch, Output, Readback, parse_records

_PR_SET_PDEATHSIG = 1
_counter = itertools.count()
# A minimal, fixed environment: the user's own GOMAXPROCS or GODEBUG must never leak into a run.
_BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/", "LANG": "C"}


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


def host_facts() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
    }


class LocalBackend(Backend):
    name = "local"

    def __init__(
        self,
        binaries: dict[str, Path],
        runtime: str = "runc-new",
        fs: cgroupfs.CgroupFS | None = None,
        progress: Callable[[str], None] = lambda message: None,
    ):
        self.binaries = {k: Path(v) for k, v in binaries.items()}
        self.runtime = runtime
        self.progress = progress
        self._fs = fs

    @property
    def fs(self) -> cgroupfs.CgroupFS:
        if self._fs is None:
            try:
                self._fs = cgroupfs.detect()
            except cgroupfs.CgroupError as exc:
                raise BackendError(str(exc)) from None
        return self._fs

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
        cpus = parse_cpuset(self.fs.host_cpus())
        can_pin = self.fs.version == 2 or "cpuset" in getattr(self.fs, "roots", {})
        return Capabilities(
            cpus=len(cpus),
            cgroup_version=self.fs.version,
            can_pin_cpus=can_pin,
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


class _Running:
    """A workload process started in its container cgroup, with its output spooled to a file."""

    def __init__(self, pod: str, container: str, proc: subprocess.Popen, stdout, stderr):
        self.pod, self.container, self.proc = pod, container, proc
        self.stdout, self.stderr = stdout, stderr
        self.started = time.monotonic()

    def find_record(self, record_type: str) -> dict[str, Any] | None:
        """Scan what the process has written so far (its spool file) for a record type."""
        with open(self.stdout.fileno(), closefd=False) as spool:
            spool.seek(0)
            for line in spool:
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


def _wait_with_progress(run: _Running, timeout_s: float, progress: Callable[[str], None], every_s: float = 10.0) -> None:
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
        self.root = f"throttlelab-{os.getpid()}-{next(_counter)}"
        self.levels = design.design_node(node, node.runtime or backend.runtime, backend.capabilities().cpus)
        self.running: list[_Running] = []
        self.guardian: Guardian | None = None

    # -- lifecycle -------------------------------------------------------------
    def __enter__(self) -> "LocalDeployment":
        sweep_stale(self.fs)
        self.guardian = Guardian(self.fs, self.root)  # first: it must exist before anything it guards
        try:
            self._check_cpus()
            self.fs.create(self.root)
            for level in self.levels:
                self.fs.create(f"{self.root}/{level.path}", cpus=level.cpus)
                self.fs.write_cpu(f"{self.root}/{level.path}", level.quota_us, level.period_us, level.weight)
            self.fs.create(self._load_rel(), cpus=self.load.cpus if self.load else None)
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

    def _check_cpus(self) -> None:
        host = set(parse_cpuset(self.fs.host_cpus()))
        for label, spec in (("node", self.node.cpus), ("load generator", self.load.cpus if self.load else None)):
            if spec and not set(parse_cpuset(spec)) <= host:
                raise BackendError(
                    f"{label} cpuset {spec} is not available: this host offers {format_cpuset(sorted(host))}; "
                    "choose CPUs from that set in the profile"
                )

    def _load_rel(self) -> str:
        return f"{self.root}/loadgen"

    # -- readback ----------------------------------------------------------------
    def verify(self) -> list[Readback]:
        results = []
        for level in self.levels:
            actual = self.fs.read_settings(f"{self.root}/{level.path}")
            designed: dict[str, Any] = {"quota_us": level.quota_us, "period_us": level.period_us, "weight": level.weight}
            if self.fs.version == 1:
                designed["shares"] = weight_to_v1_shares(level.weight)
            if level.cpus:
                designed["cpus"] = level.cpus
            got = {
                "quota_us": actual.quota_us,
                "period_us": actual.period_us,
                "weight": actual.weight,
                "shares": actual.shares,
                "cpus": actual.cpus,
            }
            mismatches = [
                f"{key}: designed {designed[key]!r}, read {got[key]!r}"
                for key in designed
                if not (key == "weight" and self.fs.version == 1)
                and not (key == "cpus" and got["cpus"] is not None and parse_cpuset(got["cpus"]) == parse_cpuset(designed["cpus"]))
                and designed[key] != got[key]
            ]
            results.append(
                Readback(
                    level=level.level,
                    path=level.path,
                    design={**designed, "formula": level.formula, "pod": level.pod, "container": level.container},
                    actual=got,
                    mismatches=mismatches,
                )
            )
        bad = [r for r in results if r.mismatches]
        if bad:
            lines = [f"  {r.path}: " + "; ".join(r.mismatches) for r in bad]
            raise DesignMismatch("cgroup readback differs from the SPEC §2 design:\n" + "\n".join(lines))
        return results

    def ancestors(self) -> list[dict[str, Any]]:
        """The levels above the node (run root, host root): informational, not designed."""
        out = []
        for rel, label in ((self.root, "run-root"), ("", "host-root")):
            try:
                s = self.fs.read_settings(rel)
            except cgroupfs.CgroupError as exc:
                out.append({"type": "ancestor", "level": label, "path": rel or "/", "error": str(exc)})
                continue
            out.append(
                {
                    "type": "ancestor",
                    "level": label,
                    "path": rel or "/",
                    "quota_us": s.quota_us,
                    "period_us": s.period_us,
                    "weight": s.weight,
                    "shares": s.shares,
                    "cpus": s.cpus,
                }
            )
        return out

    # -- processes ---------------------------------------------------------------
    def _spawn(self, pod: str, container: str, rel: str, args: list[str], variant: str, env: dict[str, str]) -> _Running:
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
        while True:
            record = handle.find_record(record_type)
            if record is not None:
                return record
            if handle.proc.poll() is not None:
                raise BackendError(
                    f"{handle.pod}/{handle.container} exited ({handle.proc.returncode}) before writing "
                    f"a {record_type!r} record"
                )
            if time.monotonic() > deadline:
                raise BackendError(f"{handle.pod}/{handle.container}: no {record_type!r} record after {timeout_s:.0f} s")
            time.sleep(0.02)
