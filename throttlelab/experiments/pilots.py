"""The calibration step: short pilot runs before the measured runs, recorded and never analysed.

Called by the rules' calibrate jobs (rules/experiments.smk) as `throttlelab calibrate`:

    throttlelab calibrate service --backend local --experiment X5 --spec '[{...}, {...}]' --seed 1 \
        --binary go124mod=PATH --binary go125mod=PATH --out results/local/calibration/X5.json
    throttlelab calibrate host --backend local --duration-s 20 --out results/local/calibration/host.json

``service`` runs the experiment's own service once per pilot rate (model/calibration.py's ``pilot_specs``:
30% of its limit by the profile's stated cost, then 90% by the cost the first pilot measured,
``aimed_pilot``), through the backend, and writes the line of its
CPU against its rate: the measured runs of the experiment take their rates from it
(``throttlelab run --calibration``). ``host`` samples every CPU's
busy ticks while nothing of the lab runs: the measured runs' disturbance threshold is that floor
+ 3 SD over their own window (``throttlelab run --host-calibration``). Both hold the machine-wide
experiment lock, so no measured run overlaps them, and both leave nothing behind (the pilot's
deployment is torn down on the way out, also on SIGINT, SIGTERM or SIGHUP). The quiet host is sampled
once other work has used at most ``--max-other-share`` of the CPUs for a second (at most
``--quiet-wait-s`` of waiting; the file says whether it was quiet and how long it waited).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from throttlelab.backends.base import BackendError, make_backend
from throttlelab.experiments import REGISTRY, Context
from throttlelab.experiments.runner import (
    add_job_arguments,
    experiment_lock,
    job_binaries,
    progress,
    run_to_exit_status,
)
from throttlelab.host.atomic_write import write_json_atomically
from throttlelab.host.interference import orchestrator_from_env, quiet_ticks, wait_for_quiet
from throttlelab.model import calibration, seeds
from throttlelab.model.variants import VariantSpec


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def pilot(args: argparse.Namespace) -> dict[str, Any]:
    """The pilots of an experiment's service, one per rate: its CPU against its rate, as a line."""
    binaries = job_binaries(args)
    given = json.loads(args.spec)
    specs = [VariantSpec.from_dict(args.experiment, f"pilot{k}", data) for k, data in enumerate(given)]
    backend = make_backend(args.backend, binaries, args.runtime, json.loads(args.backend_settings), progress)
    backend.preflight()
    seed = seeds.job_seed(args.seed, args.experiment, "calibration", 0)
    start = now()
    points, ran = [], []
    for k, spec in enumerate(specs):
        aim = ""
        if points:  # a later pilot: aimed by the cost the one before it measured, not the stated cost
            try:
                spec, use = calibration.aimed_pilot(spec, points[-1])
            except ValueError as exc:
                raise BackendError(f"{args.experiment} pilot {k}: cannot be aimed: {exc}") from exc
            aim = f" ({use:.0%} of its limit at pilot {k - 1}'s {points[-1]['cpu_per_request_us'] / 1000:.3g} ms)"
        ran.append(spec)
        ctx = Context(backend, backend.capabilities(), args.node_cpus, seed + k, progress)
        progress(f"{args.experiment} pilot {k}: {spec.rps:g} req/s{aim}, steady, {spec.duration_ms:g} ms window")
        result = REGISTRY[args.experiment](spec, ctx)
        try:
            point = calibration.cpu_per_request_us(result.records)
        except ValueError as exc:
            raise BackendError(f"{args.experiment} pilot {k}: {exc}") from exc
        progress(
            f"{args.experiment} pilot {k}: {point['cores']:.4g} cores at {point['rps']:g} req/s "
            f"({point['cpu_per_request_us'] / 1000:.3g} ms of CPU per /work request)"
        )
        points.append({**point, "pilot_rps": spec.rps})
    try:
        line = calibration.fit_line(points)
    except ValueError as exc:
        raise BackendError(f"{args.experiment} pilots: {exc}") from exc
    progress(
        f"{args.experiment} pilots: {line['background_cores']:.4g} cores + {line['marginal_us'] / 1000:.3g} ms per request"
    )
    return {
        **line,
        "points": points,
        "seed": seed,
        "config_seed": args.seed,
        "start": start,
        "kernel": platform.release(),
        "backend": args.backend,
        "planned": given,  # the rule's parameters: every pilot at the stated cost
        "specs": [s.to_dict() for s in ran],  # as they ran: each after the first re-aimed
    }


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    with experiment_lock():
        if args.what == "service":
            data = {"schema": calibration.SCHEMA, "service": pilot(args)}
        else:
            # a passing disturbance (a build, a cron job) is outlasted first, as between a run's attempts
            quiet, waited = wait_for_quiet(sorted(os.sched_getaffinity(0)), args.max_other_share, args.quiet_wait_s)
            start = now()
            progress(
                f"quiet host ({'quiet' if quiet else 'still busy'} after {waited:.0f} s): sampling every CPU's busy "
                f"ticks for {args.duration_s:g} s (nothing of the lab runs; the {args.backend} backend's runtime "
                "up and idle)"
            )
            ticks = quiet_ticks(
                args.duration_s,
                args.step_s,
                runtime_names=calibration.RUNTIME_PROCESSES.get(args.backend, ()),
                orchestrator_pid=orchestrator_from_env(),
                kernel=True,
            )
            data = {
                "schema": calibration.SCHEMA,
                "host": {
                    "duration_s": args.duration_s,
                    "start": start,
                    "kernel": platform.release(),
                    "quiet_before": quiet,
                    "waited_s": round(waited, 1),
                    **ticks,
                },
            }
    write_json_atomically(out, data)
    if "host" in data:
        own = data["host"]["own"]
        levels = [
            f"the {who} {own[f'{who}_cpu']:.2%} of a CPU"
            for who in calibration.OWN_SYSTEM
            if own.get(f"{who}_cpu") is not None
        ]
        progress("idle levels: " + (", ".join(levels) or "no orchestrator or runtime process to meter"))
    progress(f"calibration -> {out}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="throttlelab calibrate", description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("service", "host"))
    p.add_argument("--backend", default="local")
    p.add_argument("--experiment", choices=sorted(REGISTRY))
    p.add_argument("--spec", default="{}", help="the pilots' parameters, a JSON list (model/plan.py: pilot_spec)")
    add_job_arguments(p)
    p.add_argument("--duration-s", type=float, default=20.0, help="host: how long the quiet host is sampled")
    p.add_argument("--step-s", type=float, default=0.1, help="host: one sample every so often")
    p.add_argument("--quiet-wait-s", type=float, default=60.0, help="host: that wait is at most this long")
    p.add_argument("--out", required=True)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.what == "service" and not args.experiment:
        print("throttlelab calibrate service: --experiment is required", file=sys.stderr)
        return 2
    if args.what == "host" and not args.duration_s > 0:
        print("throttlelab calibrate host: --duration-s must be positive", file=sys.stderr)
        return 2
    return run_to_exit_status(run, args, "the pilot's processes and cgroups were removed, nothing written")


if __name__ == "__main__":
    sys.exit(main())
