"""Run ONE (experiment, variant, repeat) and write its raw log atomically.

Called by the `run_experiment` rule as `throttlelab run` (cli.py), and once per job of a vm batch
by experiments/batch.py (``runner.main`` in the guest):
    throttlelab run --backend local --experiment E2a --variant limit1 \
        --repeat 0 --spec '{...}' --runtime runc-new --seed 1 \
        --binary go124mod=PATH --binary go125mod=PATH --max-other-share 0.1 --retries 2 \
        --out results/.../rep0.jsonl

The raw log starts with a `meta` record (the variant's config, binary hashes,
kernel, cgroup version, CPU model and count, start and end time); the
workload's own records follow, each tagged with the pod/container that wrote it.
On SIGINT, SIGTERM or SIGHUP the deployment is torn down and nothing is written.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import os
import signal
import sys
import time
from datetime import datetime, timezone
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from throttlelab.backends.base import BackendError, make_backend
from throttlelab.errors import RecordError
from throttlelab.host.atomic_write import write_text_atomically
from throttlelab.host.state_dir import open_state, read_state, state_dir, write_state
from throttlelab.host.cgroupfs import CgroupError
from throttlelab.host.facts import code_version
from throttlelab.experiments import REGISTRY, Context
from throttlelab.host.interference import InterferenceMeter, orchestrator_from_env, wait_for_quiet
from throttlelab.model import calibration, records, seeds
from throttlelab.model import results_layout as layout
from throttlelab.model.digest import sha256_file
from throttlelab.model.placement import parse_cpuset
from throttlelab.model.quantities import QuantityError
from throttlelab.model.variants import SpecError, VariantSpec

# Backends whose workloads run in cgroups of this host, where the meter can tell the lab's CPU time
# from other processes'. On kind the lab's processes live inside node containers, so every kubelet
# and API server tick would count as interference; an existing cluster is not this host at all.
METERED_BACKENDS = calibration.METERED_BACKENDS
# Before a retry the runner waits this long at most for the run's CPUs to be quiet again, so a
# passing disturbance (a build, a cron job) is outlasted instead of measured three times.
QUIET_WAIT_S = 60.0
LOCK_NAME = "experiment.lock"  # in the lab's private state folder (host/state_dir.py)
# When a wait for quiet CPUs times out, the host is busy for longer than a passing job: the time is
# noted here, and for BUSY_MEMO_S after it the jobs that start check the CPUs once (one second)
# after a disturbed attempt instead of waiting, and measure again only if they are quiet then: a
# persistently busy host costs each job one measurement, not three, nor minutes of waiting. The job
# that met the load still waits in full and measures again (a disturbance of a minute or two passes
# within its retries). An attempt that is not disturbed removes the note.
HOST_BUSY_NAME = "host-busy"  # in the lab's private state folder
BUSY_MEMO_S = 300.0


class Interrupted(Exception):
    """A termination signal arrived; unwinding runs every cleanup on the way out."""


def _on_signal(signum: int, _frame: Any) -> None:
    raise Interrupted(signal.Signals(signum).name)


def install_signal_handlers() -> None:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted`, so every cleanup runs on the way out."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextmanager
def experiment_lock(path: Path | None = None) -> Iterator[None]:
    """Hold the machine-wide experiment lock: two measurements never overlap, even across invocations."""
    path = path or state_dir() / LOCK_NAME
    with open_state(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another experiment to finish (lock {path})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_atomically(path: Path, records: list[dict[str, Any]]) -> None:
    """A raw log, one compact JSON record a line, whole or absent (host/atomic_write.py)."""
    write_text_atomically(path, "".join(json.dumps(record, separators=(",", ":")) + "\n" for record in records))


def run_cpus(spec: VariantSpec, node_cpus: str | None) -> list[int]:
    """The CPUs a run measures on: its node's and load generator's cpusets, else every CPU the
    runner may use."""
    named = [c for c in (spec.cpus, spec.node_cpus, spec.load_cpus, node_cpus) if c]
    if named:
        return sorted({cpu for text in named for cpu in parse_cpuset(text)})
    return sorted(os.sched_getaffinity(0))


def measure(
    args: argparse.Namespace, spec: VariantSpec, ctx: Context, attempt: int, quiet: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One attempt at the run: the experiment, its window and what other work took meanwhile, judged over the
    workload's busy intervals against the threshold of a quiet host's calibration (``quiet``; else the
    configured share)."""
    meter = None
    if args.backend in METERED_BACKENDS:
        meter = InterferenceMeter(
            run_cpus(spec, args.node_cpus),
            orchestrator_pid=orchestrator_from_env(),
            runtime_names=calibration.RUNTIME_PROCESSES.get(args.backend, ()),
            kernel=True,
            idle_cpu=calibration.idle_levels(quiet),
        )
        meter.start()
        ctx = dataclasses.replace(ctx, busy=meter.busy)
    started = datetime.now(timezone.utc)
    load_before = os.getloadavg()  # other work on the host disturbs measurements: keep the evidence
    t0 = time.monotonic()
    try:
        result = REGISTRY[args.experiment](spec, ctx)
    finally:
        seen = meter.stop() if meter is not None else None
    wall = time.monotonic() - t0
    if seen is not None:
        rule = calibration.threshold_of(quiet, seen.cpus, seen.window_s, args.max_other_share)
        interference = seen.as_record(rule["threshold"], rule)
    else:
        interference = {"disturbed": False, "note": f"not metered on the {args.backend} backend"}
    if seen is not None and result.window_s <= 0:
        # a read-out (E1, E3, E4): values read back, nothing timed, so other work cannot bias it; and
        # its cgroups live for less than one sample of the meter, so their CPU would count as other's
        interference = {
            **interference,
            "disturbed": False,
            "note": "a read-out without a timed window: metered, not judged",
        }
    return {
        "result": result,
        "wall": wall,
        "started": started,
        "ended": datetime.now(timezone.utc),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "interference": interference,
        "attempt": attempt,
    }


def meta_record(
    args: argparse.Namespace,
    spec: VariantSpec,
    ctx: Context,
    binaries: dict[str, Path],
    environment: dict[str, Any],
    run: dict[str, Any],
    digests: dict[str, str],
    code: dict[str, Any] | None = None,
) -> dict[str, Any]:
    caps = ctx.capabilities
    return {
        "type": "meta",
        "schema": records.SCHEMA_VERSION,
        "experiment": args.experiment,
        "variant": args.variant,
        "repeat": args.repeat,
        "backend": args.backend,
        "spec": spec.to_dict(),
        "runtime": spec.runtime or args.runtime,  # weight experiments choose theirs per variant
        "seed": ctx.seed,
        "arrival_seed": ctx.arrival_seed,
        "config_seed": args.seed,
        "binaries": {v: {"path": str(p), "sha256": digests[v]} for v, p in binaries.items()},
        "environment": environment,
        "capabilities": {
            "cpus": caps.cpus,
            "cgroup_version": caps.cgroup_version,
            "can_pin_cpus": caps.can_pin_cpus,
            "has_pause_level": caps.has_pause_level,
            "notes": list(caps.notes),
        },
        "node_cpus": args.node_cpus,
        "start": run["started"].isoformat(),
        "end": run["ended"].isoformat(),
        "wall_s": round(run["wall"], 3),
        "host_loadavg": {
            "before": [round(x, 2) for x in run["load_before"]],
            "after": [round(x, 2) for x in run["load_after"]],
        },
        "window_s": round(run["result"].window_s, 3),
        "notes": run["result"].notes,
        "interference": run["interference"],
        "attempt": run["attempt"],
        # which code made the run (host/facts.py code_version): its start time is what a revised threshold's
        # date is compared with (the threshold registry, docs/STATISTICS.md §5); the commit says which code
        "code": code if code is not None else {"commit": None, "dirty": None},
        **({"calibration": calibrated} if (calibrated := getattr(args, "calibration_record", None)) else {}),
    }


def checked(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The log's records, each of the runner's own checked against the raw log's contract (model/records.py:
    a key missing, mistyped or not declared there is a RecordError); cpulab's pass as the workload wrote them."""
    for record in log:
        if record.get("type") in records.RUNNER_WRITES:
            records.check_written(record)
    return log


def disturbed_path(out: Path, attempt: int) -> Path:
    """Where a disturbed attempt's log is kept, beside the run's raw log."""
    return out.with_name(f"{out.stem}.disturbed-{attempt}{out.suffix}")


def run(args: argparse.Namespace) -> int:
    binaries = job_binaries(args)
    spec = VariantSpec.from_dict(args.experiment, args.variant, json.loads(args.spec))
    # the calibration step (model/calibration.py): a calibrated arm's rate from its experiment's pilot, and a
    # quiet host's floor for the disturbance threshold; both made before the measured runs, both recorded
    pilot = read_calibration(args.calibration, "service") if args.calibration else None
    spec, service_record = calibration.resolve(spec, pilot)
    quiet = read_calibration(args.host_calibration, "host") if args.host_calibration else None
    args.calibration_record = calibration_record(service_record, quiet, args)
    backend = make_backend(args.backend, binaries, args.runtime, json.loads(args.backend_settings), progress)
    backend.preflight()
    caps = backend.capabilities()
    job_seed = seeds.job_seed(args.seed, args.experiment, args.variant, args.repeat)
    ctx = Context(
        backend=backend,
        capabilities=caps,
        node_cpus=args.node_cpus,
        seed=job_seed,
        progress=progress,
        arrivals=seeds.arrival_seed(args.seed, args.experiment, args.repeat),
    )
    digests = {v: sha256_file(p) for v, p in binaries.items()}
    code = code_version()
    environment: dict[str, Any] = {}  # asked once, after the first attempt (kind reports the clusters it used)
    out = Path(args.out)
    progress(f"{args.experiment}/{args.variant} repeat {args.repeat} on {args.backend}: start")
    earlier: list[dict[str, Any]] = []
    with experiment_lock():
        # a wait for quiet CPUs timed out in an earlier job: this one checks them once between attempts
        busy_since = host_busy_since()
        for attempt in range(args.retries + 1):
            attempt_run = measure_or_keep_evidence(args, spec, ctx, attempt, quiet, out)
            environment = environment or {**backend.environment(), **calibration_environment(args)}
            seen = attempt_run["interference"]
            if not seen["disturbed"] or attempt == args.retries:
                break
            wait_s = 1.0 if busy_since is not None else args.quiet_wait_s
            how = (
                f"the host has been busy since {time.strftime('%H:%M:%S', time.localtime(busy_since))} (a "
                "wait for quiet CPUs timed out): checking them once"
                if busy_since is not None
                else f"waiting for the CPUs to be quiet (at most {wait_s:.0f} s)"
            )
            progress(
                f"disturbed: other processes used {seen['other_share']:.1%} of CPUs {seen['cpus']} over "
                f"{seen['judged']} (all outside the lab {seen['outside_share']:.1%}; {own_text(seen)}; threshold "
                f"{seen['threshold']:.1%}); {how} before measuring again"
            )
            got_quiet, waited = wait_for_quiet(seen["cpus"], seen["threshold"], wait_s)
            if not got_quiet:
                note_host_busy(busy_since)  # later jobs check once instead of waiting again
            if not got_quiet and busy_since is not None:
                # the host is still as busy as it has been for a while: measuring again would be
                # disturbed too, so this attempt is the run's, kept and marked
                progress(f"still busy after {waited:.0f} s: this attempt is kept as the run, marked disturbed")
                break
            # a disturbed attempt is kept beside the log and listed in it, never dropped silently
            kept = disturbed_path(out, attempt + 1)
            write_atomically(
                kept,
                checked(
                    [
                        meta_record(args, spec, ctx, binaries, environment, attempt_run, digests, code),
                        *attempt_run["result"].records,
                    ]
                ),
            )
            earlier.append({**seen, "log": kept.name, "waited_s": round(waited, 1)})
            progress(
                f"{'quiet' if got_quiet else 'still busy'} after {waited:.0f} s; kept the disturbed attempt as "
                f"{kept.name}; measuring again"
            )
        if measured_quiet(attempt_run["interference"], attempt_run["result"].window_s):
            host_busy_path().unlink(missing_ok=True)
    meta = meta_record(args, spec, ctx, binaries, environment, attempt_run, digests, code)
    meta["disturbed_attempts"] = earlier
    write_atomically(out, checked([meta, *attempt_run["result"].records]))
    state = " (still disturbed: kept and marked)" if attempt_run["interference"]["disturbed"] else ""
    progress(
        f"{args.experiment}/{args.variant} repeat {args.repeat}: done in {attempt_run['wall']:.1f} s{state} -> {out}"
    )
    return 0


def measure_or_keep_evidence(
    args: argparse.Namespace, spec: Any, ctx: Context, attempt: int, quiet: dict[str, Any] | None, out: Path
) -> dict[str, Any]:
    """One attempt; when the backend fails it, what the backend can tell about why (the pods' events, the
    real node's logs) is kept beside the job's log, and the error names that folder."""
    try:
        return measure(args, spec, ctx, attempt, quiet)
    except BackendError as exc:
        folder = Path(layout.failure_evidence(out))
        kept = ctx.backend.keep_failure_evidence(folder)
        if not kept:
            raise
        said = f"{exc} (kept for a look: {', '.join(kept)})"
        try:
            wrapped = type(exc)(said)  # the same kind of error (a DesignMismatch stays one)
        except TypeError:
            wrapped = BackendError(said)
        raise wrapped from exc


def read_calibration(path: str, kind: str) -> dict[str, Any]:
    """A calibration file of the rules' calibrate jobs (experiments/pilots.py), its ``kind`` part."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise RecordError(f"calibration {path}: cannot be read ({exc}); run its calibrate job again") from exc
    if not isinstance(data, dict) or not isinstance(data.get(kind), dict):
        raise RecordError(f"calibration {path}: no {kind!r} section; run its calibrate job again")
    return data[kind]


def calibration_record(
    service: dict[str, Any] | None, quiet: dict[str, Any] | None, args: argparse.Namespace
) -> dict[str, Any]:
    """``meta.calibration``: what the run's parameters and threshold were fixed by, before it measured."""
    out: dict[str, Any] = {}
    if service is not None:
        out["service"] = {"file": args.calibration, **service}
    if quiet is not None:
        out["host"] = {"file": args.host_calibration, **{k: quiet[k] for k in QUIET_KEYS if k in quiet}}
    return out


#: What a raw log keeps of the quiet host's calibration (its tick rows are in the calibration file).
QUIET_KEYS = ("duration_s", "step_s", "hz", "start", "own_s", "own", "quiet_before", "waited_s")


def calibration_environment(args: argparse.Namespace) -> dict[str, Any]:
    """The calibration as the environment table shows it (environment.csv's env.calibration.* columns)."""
    record = getattr(args, "calibration_record", None) or {}
    out: dict[str, Any] = {}
    service, host = record.get("service"), record.get("host")
    if service:
        if service.get("source") == "pilot":
            points = ", ".join(
                f"{p.get('cores', float('nan')):.4g} cores at {p.get('rps', float('nan')):g} req/s"
                for p in service.get("points", [])
            )
            out["pilot"] = (
                f"{args.experiment}: {service['background_cores']:.4g} cores + {service['marginal_us'] / 1000:.3g} ms "
                f"of CPU per /work request (pilots: {points}; seed {service.get('seed', '?')}); the stated "
                f"{service['stated_cpu_per_request_us'] / 1000:.3g} ms"
            )
        else:
            out["pilot"] = (
                f"{args.experiment}: none ran; the stated {service['stated_cpu_per_request_us'] / 1000:.3g} ms"
            )
    if host:
        out["quiet_host"] = (
            f"{host.get('duration_s', '?')} s sampled every {host.get('step_s', '?')} s at {host.get('start', '?')}; "
            f"threshold floor + {calibration.QUIET_SD:g} SD per window, at least the meter's resolution"
            + "".join(
                f"; {who} idle {level:.2%} of a CPU"
                for who, level in calibration.idle_levels(host).items()
                if (host.get("own") or {}).get(f"{who}_cpu") is not None
            )
        )
    return {"calibration": out} if out else {}


def host_busy_path() -> Path:
    """Where the memo of a host that stayed busy is kept."""
    return state_dir() / HOST_BUSY_NAME


def host_busy_since() -> float | None:
    """When a wait for quiet CPUs last timed out on this host, if within BUSY_MEMO_S; else None."""
    try:
        since = float(read_state(host_busy_path()).strip())
    except (OSError, ValueError):
        return None
    return since if 0 <= time.time() - since <= BUSY_MEMO_S else None


def measured_quiet(interference: dict[str, Any], window_s: float) -> bool:
    """Whether the meter saw the run's CPUs quiet over a timed window. A read-out (no window) is over in
    tens of milliseconds, a few of the kernel's clock ticks, too short for its share to say whether the host
    is busy or quiet; a job on a backend that is not metered says nothing about this host."""
    if window_s <= 0:
        return False
    share = interference.get("other_share", interference.get("outside_share"))
    threshold = interference.get("threshold")
    return share is not None and threshold is not None and share <= threshold


def own_text(seen: dict[str, Any]) -> str:
    """The lab's own system's part of a disturbance (the orchestrator, the runtime, the kernel's threads), for the
    progress line."""
    parts = [
        "no orchestrator metered"
        if seen.get("orchestrator_s") is None
        else f"the orchestrator {seen['orchestrator_cpu']:.1%} of a CPU"
    ]
    for who in ("runtime", "kernel"):
        if seen.get(f"{who}_s") is not None:
            parts.append(f"the {who} {seen[f'{who}_cpu']:.1%} of a CPU")
    return ", ".join(parts)


def note_host_busy(since: float | None) -> None:
    """Remember that the host stayed busy through a wait (keeping the first time it was noted)."""
    write_state(host_busy_path(), f"{since if since is not None else time.time():.3f}\n")


def add_job_arguments(p: argparse.ArgumentParser) -> None:
    """The options a measuring job shares with the calibration's pilots: the runtime conversion, the
    profile's seed, the node's CPUs, the backend's settings, the workload builds and the share of the CPUs
    other work may take."""
    p.add_argument("--runtime", default="runc-new")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--node-cpus", default=None)
    p.add_argument(
        "--backend-settings", default="{}", help="the backend's section of config.yaml as JSON (kind, kubernetes)"
    )
    p.add_argument("--binary", action="append", default=[], help="BUILD=PATH of a workload build")
    p.add_argument(
        "--max-other-share",
        type=float,
        default=0.1,
        help="share of the run's CPUs other processes may use before the run counts as disturbed; the host "
        "pilot first waits until other work uses at most this share of the CPUs (one second's reading)",
    )


def job_binaries(args: argparse.Namespace) -> dict[str, Path]:
    """The workload builds the --binary options name, build -> path."""
    return {build: Path(path) for build, _, path in (item.partition("=") for item in args.binary)}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m throttlelab.experiments.runner", description=__doc__.splitlines()[0])
    p.add_argument("--backend", required=True)
    p.add_argument("--experiment", required=True, choices=sorted(REGISTRY))
    p.add_argument("--variant", required=True)
    p.add_argument("--repeat", type=int, required=True)
    p.add_argument("--spec", required=True, help="the variant's parameters as JSON")
    add_job_arguments(p)
    p.add_argument("--retries", type=int, default=2, help="how often a disturbed run is measured again")
    p.add_argument(
        "--calibration",
        default=None,
        help="the experiment's pilot (rules: results/<backend>/calibration/<experiment>.json): a variant that "
        "says target_use takes its rate from it",
    )
    p.add_argument(
        "--host-calibration",
        default=None,
        help="a quiet host's floor (rules: results/<backend>/calibration/host.json): the disturbance threshold "
        "is its floor + 3 SD over the run's judged window, at most --max-other-share; without it, that share",
    )
    p.add_argument(
        "--quiet-wait-s",
        type=float,
        default=QUIET_WAIT_S,
        help="before a retry, wait at most this long for the run's CPUs to be quiet",
    )
    p.add_argument("--out", required=True)
    return p


def run_to_exit_status(run: Callable[[argparse.Namespace], int], args: argparse.Namespace, what: str) -> int:
    """A runner's command: ``run(args)`` with the signal handlers installed; an interruption (130) says that
    ``what`` was removed and nothing written, a lab error (1) is one line."""
    install_signal_handlers()
    try:
        return run(args)
    except Interrupted as exc:
        progress(f"interrupted by {exc}; {what}")
        return 130
    except (BackendError, CgroupError, QuantityError, RecordError, SpecError) as exc:
        progress(f"error: {exc}")
        return 1


def main(argv: list[str] | None = None) -> int:
    return run_to_exit_status(
        run, parser().parse_args(argv), "the run's processes and cgroups were removed, no log written"
    )


if __name__ == "__main__":
    sys.exit(main())
