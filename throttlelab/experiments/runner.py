"""Run ONE (experiment, variant, repeat) and write its raw log atomically.

Called by the `run_experiment` rule:
    python -m throttlelab.experiments.runner --backend local --experiment E2a --variant limit1 \
        --repeat 0 --spec '{...}' --runtime runc-new --seed 1 \
        --binary go124mod=PATH --binary go125mod=PATH --out results/.../rep0.jsonl

The raw log starts with a `meta` record (the variant's config, binary hashes,
kernel, cgroup version, CPU model and count, start and end time); the
workload's own records follow, each tagged with the pod/container that wrote it.
On SIGINT, SIGTERM or SIGHUP the deployment is torn down and nothing is written.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import signal
import sys
import tempfile
import time
from datetime import datetime, timezone
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from throttlelab.backends.base import BackendError
from throttlelab.host.cgroupfs import CgroupError
from throttlelab.experiments import REGISTRY, Context
from throttlelab.model.quantities import QuantityError
from throttlelab.model.variants import SpecError, VariantSpec

RAW_SCHEMA_VERSION = 1
LOCK_PATH = Path(tempfile.gettempdir()) / "throttlelab-experiment.lock"


class Interrupted(Exception):
    """A termination signal arrived; unwinding runs every cleanup on the way out."""


def _on_signal(signum: int, _frame: Any) -> None:
    raise Interrupted(signal.Signals(signum).name)


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def experiment_lock(path: Path = LOCK_PATH) -> Iterator[None]:
    """Hold the machine-wide experiment lock: two measurements never overlap, even across invocations."""
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another experiment to finish (lock {path})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def make_backend(name: str, binaries: dict[str, Path], runtime: str, settings: dict[str, Any] | None = None):
    if name in ("kind", "kubernetes"):
        from throttlelab.backends.kind.backend import make_kube_backend

        return make_kube_backend(name, settings or {}, runtime, progress)
    if name == "local":
        from throttlelab.backends.local import LocalBackend

        return LocalBackend(binaries, runtime=runtime, progress=progress)
    if name == "docker":
        from throttlelab.backends.docker import DockerBackend

        return DockerBackend(binaries, runtime=runtime, progress=progress)
    raise BackendError(f"backend {name!r} is not implemented yet; use backend=local or backend=docker")


def write_atomically(path: Path, records: list[dict[str, Any]]) -> None:
    """Write to a temporary file beside the target, then rename: a log is whole or absent."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            for record in records:
                handle.write(json.dumps(record, separators=(",", ":")) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run(args: argparse.Namespace) -> int:
    binaries = {}
    for item in args.binary:
        variant, _, path = item.partition("=")
        binaries[variant] = Path(path)
    spec = VariantSpec.from_dict(args.experiment, args.variant, json.loads(args.spec))
    backend = make_backend(args.backend, binaries, args.runtime, json.loads(args.backend_settings))
    backend.preflight()
    caps = backend.capabilities()
    job_seed = int(hashlib.sha256(f"{args.seed}/{args.experiment}/{args.variant}/{args.repeat}".encode()).hexdigest()[:8], 16)
    ctx = Context(backend=backend, capabilities=caps, node_cpus=args.node_cpus, seed=job_seed, progress=progress)
    started = datetime.now(timezone.utc)
    load_before = os.getloadavg()  # other work on the host disturbs measurements: keep the evidence
    progress(f"{args.experiment}/{args.variant} repeat {args.repeat} on {args.backend}: start")
    with experiment_lock():
        t0 = time.monotonic()
        result = REGISTRY[args.experiment](spec, ctx)
        wall = time.monotonic() - t0
    meta = {
        "type": "meta",
        "schema": RAW_SCHEMA_VERSION,
        "experiment": args.experiment,
        "variant": args.variant,
        "repeat": args.repeat,
        "backend": args.backend,
        "spec": spec.to_dict(),
        "runtime": (spec.runtime or args.runtime),  # weight experiments choose theirs per variant
        "seed": job_seed,
        "config_seed": args.seed,
        "binaries": {v: {"path": str(p), "sha256": sha256(p)} for v, p in binaries.items()},
        "environment": backend.environment(),
        "capabilities": {
            "cpus": caps.cpus,
            "cgroup_version": caps.cgroup_version,
            "can_pin_cpus": caps.can_pin_cpus,
            "has_pause_level": caps.has_pause_level,
            "notes": list(caps.notes),
        },
        "node_cpus": args.node_cpus,
        "start": started.isoformat(),
        "end": datetime.now(timezone.utc).isoformat(),
        "wall_s": round(wall, 3),
        "host_loadavg": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]},
        "window_s": round(result.window_s, 3),
        "notes": result.notes,
    }
    write_atomically(Path(args.out), [meta, *result.records])
    progress(f"{args.experiment}/{args.variant} repeat {args.repeat}: done in {wall:.1f} s -> {args.out}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m throttlelab.experiments.runner", description=__doc__.splitlines()[0])
    p.add_argument("--backend", required=True)
    p.add_argument("--experiment", required=True, choices=sorted(REGISTRY))
    p.add_argument("--variant", required=True)
    p.add_argument("--repeat", type=int, required=True)
    p.add_argument("--spec", required=True, help="the variant's parameters as JSON")
    p.add_argument("--runtime", default="runc-new")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--node-cpus", default=None)
    p.add_argument("--backend-settings", default="{}", help="the backend's section of config.yaml as JSON (kind, kubernetes)")
    p.add_argument("--binary", action="append", default=[], help="VARIANT=PATH of a workload build")
    p.add_argument("--out", required=True)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    try:
        return run(args)
    except Interrupted as exc:
        progress(f"interrupted by {exc}; the run's processes and cgroups were removed, no log written")
        return 130
    except (BackendError, CgroupError, QuantityError, SpecError) as exc:
        progress(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
