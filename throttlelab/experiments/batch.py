"""Run a batch of jobs (one experiment's variants and repeats) in ONE guest of the vm backend.

Called by the vm backend's rule (one job per experiment):

    throttlelab vm-batch --experiment E3 --results results/vm --vm '{"vcpus": 10, ...}' \
        --plan '{"common": [runner options], "jobs": [{"variant", "repeat", "spec", "out"}, ...]}'

On the host it takes the machine-wide experiment lock, writes the plan under the results folder
(writable in the guest) and boots the guest (:mod:`throttlelab.platform.vm_guest`), whose command is
``python -m throttlelab.experiments.batch guest PLAN``: the runner (``runner.main``) once per job,
in the plan's order, with ``--backend vm``, each writing its raw log atomically as on the host.
A boot is paid once per experiment, not per job; a changed variant reruns its experiment's batch
only. The first failing job stops the batch (exit status 1); the guest and everything in it are
gone when the command returns, however it ends. A guest that ends before its command started
(no start mark written: QEMU or virtme-ng failed while booting, as one 10-vCPU boot in CI did,
status 255 after 14 s) is booted once more, and the log says so; nothing had run, so nothing
measured is repeated or dropped.

With ``vm: {node: kubernetes}`` the jobs run on the lab's real Kubernetes node in the guest
(backends/vm.VmNodeBackend): the guest's batch process is the node's owner, as Snakemake is on a
host, so the first job starts the node and every later one uses it; it is taken down after the
last job (and goes with the guest whatever happens).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from throttlelab.errors import BackendError
from throttlelab.experiments import runner
from throttlelab.host.processes import package_parent
from throttlelab.platform.vm_guest import VmSettings, run_in_guest

#: What the rules export to a runner: the orchestrator it serves (host/interference.py, backends/node).
ORCHESTRATOR_ENV = "THROTTLELAB_ORCHESTRATOR_PID"
BATCH_DIR = "batches"  # under the results folder: the plans the guest reads
BOOTS = 2  # a guest that never started its command is booted once more


def job_argv(common: list[str], job: dict[str, Any], experiment: str) -> list[str]:
    """The runner's command line of one job of the plan."""
    return [
        "--backend",
        "vm",
        "--experiment",
        experiment,
        "--variant",
        job["variant"],
        "--repeat",
        str(job["repeat"]),
        "--spec",
        job["spec"],
        "--out",
        job["out"],
        *common,
    ]


def run_host(args: argparse.Namespace) -> int:
    plan = json.loads(args.plan)
    settings = VmSettings.from_mapping(json.loads(args.vm))
    results = Path(args.results)
    plan_path = results / BATCH_DIR / f"{args.experiment}.json"
    plan_path.parent.mkdir(parents=True, exist_ok=True)
    plan_path.write_text(json.dumps({"experiment": args.experiment, **plan}, indent=1))
    mark = start_mark(plan_path)
    env = {"PYTHONPATH": package_parent(), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "throttlelab.experiments.batch", "guest", str(plan_path)]
    started = time.monotonic()
    try:
        with runner.experiment_lock():
            for boot in range(1, BOOTS + 1):
                mark.unlink(missing_ok=True)
                code = run_in_guest(
                    settings, command, [results], env=env, log=runner.progress, timeout_s=args.timeout_s
                )
                if code == 0 or mark.exists() or boot == BOOTS:
                    break
                runner.progress(
                    f"{args.experiment}: the guest ended with status {code} before its command "
                    "started (nothing ran); booting it once more"
                )
    finally:
        plan_path.unlink(missing_ok=True)
        mark.unlink(missing_ok=True)
    runner.progress(
        f"{args.experiment}: {len(plan['jobs'])} job(s) in one guest, status {code}, "
        f"{time.monotonic() - started:.1f} s in all"
    )
    missing = [job["out"] for job in plan["jobs"] if not Path(job["out"]).is_file()]
    if code == 0 and missing:
        raise BackendError(f"the guest ended with status 0 but wrote no raw log at {', '.join(missing)}")
    return code


def start_mark(plan_path: Path) -> Path:
    """The file the guest writes first: the host tells a guest that never started from a failed job."""
    return plan_path.with_suffix(".started")


def run_guest(plan_path: Path) -> int:
    start_mark(plan_path).write_text(str(os.getpid()))
    plan = json.loads(plan_path.read_text())
    if not _guest_runs_the_node():
        return _run_jobs(plan)
    from throttlelab.platform.real_node import stop_nodes

    os.environ[ORCHESTRATOR_ENV] = str(os.getpid())  # one node for the batch: its owner is this process
    status = 1
    try:
        status = _run_jobs(plan)
    finally:  # also on Ctrl-C: the node goes with the batch, and a failure to take it down is said, not raised
        try:  # within the node's own patience (its facts)
            stop_nodes(os.getpid(), tell=runner.progress)
        except BackendError as exc:
            runner.progress(f"error: {exc}")
            status = 1
    return status


def _guest_runs_the_node() -> bool:
    from throttlelab.backends.vm import guest_settings

    return bool((guest_settings() or {}).get("kubernetes"))


def _run_jobs(plan: dict[str, Any]) -> int:
    jobs = plan["jobs"]
    for number, job in enumerate(jobs, 1):
        runner.progress(
            f"guest: job {number} of {len(jobs)}: {plan['experiment']}/{job['variant']} repeat {job['repeat']}"
        )
        code = runner.main(job_argv(plan["common"], job, plan["experiment"]))
        if code != 0:
            runner.progress(
                f"guest: {plan['experiment']}/{job['variant']} repeat {job['repeat']} failed "
                f"(status {code}); the batch stops here"
            )
            return code
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="throttlelab vm-batch", description=__doc__.splitlines()[0])
    p.add_argument("--experiment", required=True)
    p.add_argument("--plan", required=True, help="JSON: the runner options every job shares and the jobs")
    p.add_argument("--vm", default="{}", help="config.yaml's vm section as JSON")
    p.add_argument("--results", required=True, help="the backend's results folder, writable in the guest")
    p.add_argument("--timeout-s", type=float, default=None, help="stop the guest after this long")
    return p


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["guest"] and len(args) == 2:
        return run_guest(Path(args[1]))
    options = parser().parse_args(args)
    runner.install_signal_handlers()
    try:
        return run_host(options)
    except runner.Interrupted as exc:
        runner.progress(f"interrupted by {exc}; the guest was stopped")
        return 130


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
