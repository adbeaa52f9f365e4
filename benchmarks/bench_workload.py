"""Fidelity of the cpulab workload: prints figures, asserts nothing.

    python benchmarks/bench_workload.py [--binary PATH] [--rate 1000] [--seconds 10]

1. Burn accuracy: `burst -threads=1` burning W = 5, 20, 80 ms per round
   (goal: within 2%). Shows the thread CPU clock cpulab reports and the
   round's wall time, an independent clock: on an idle CPU the burning
   thread is never descheduled, so W <= thread CPU <= wall. When this host
   lets us make a cgroup v1 (root), it also shows what the kernel charged
   to the whole process's cgroup per round (cpuacct): that adds the Go
   runtime's own work (cgroup reads, thread hand-offs of the locked
   goroutine), which a CPU quota counts as well.
2. Load fidelity: `load` at --rate /work req/s (clump 1) for --seconds
   against an idle local `serve` (work 0, alloc 0, no live heap).
   Achieved rate vs target (goal within 2%; the schedule holds exactly
   round(rate*seconds) arrivals in the window), p99 send lateness (goal < 1 ms), and
   the generator's own CPU per 1000 req/s (rusage of the load process).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from throttlelab.host.gobuild import build_variant, default_output  # noqa: E402
from throttlelab.model.quantities import span_arrivals  # noqa: E402

V1_CPU = Path("/sys/fs/cgroup/cpu")
V1_CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def records(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def make_v1_cgroup(name: str) -> list[Path] | None:
    """An unlimited v1 cpu (+cpuacct) cgroup, or None when we cannot make one."""
    if os.geteuid() != 0 or not (V1_CPU / "cpu.cfs_quota_us").exists():
        return None
    dirs = [V1_CPU / name]
    if V1_CPUACCT.exists() and V1_CPUACCT.resolve() != V1_CPU.resolve():
        dirs.append(V1_CPUACCT / name)
    for d in dirs:
        d.mkdir(exist_ok=True)
    return dirs


def remove_cgroups(dirs: list[Path]) -> None:
    for d in reversed(dirs):
        for _ in range(50):
            try:
                d.rmdir()
                break
            except OSError:
                time.sleep(0.05)


def burn_accuracy(binary: Path) -> None:
    print("== burn accuracy: burst -threads=1, 20 rounds per W")
    cgroup = make_v1_cgroup(f"throttlelab-bench-{os.getpid()}")
    try:

        def join():  # runs in the child before exec
            for d in cgroup or []:
                (d / "cgroup.procs").write_text(str(os.getpid()))

        print(
            f"{'W ms':>6} {'thread clock ms':>16} {'err %':>7} {'wall ms':>9} {'err %':>7}"
            f" {'cgroup usage ms':>16} {'err %':>7}"
        )
        for work_ms in (5, 20, 80):
            cmd = [
                str(binary),
                "burst",
                "-threads=1",
                f"-work={work_ms}ms",
                f"-interval={work_ms + 30}ms",
                "-rounds=20",
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True, preexec_fn=join if cgroup else None)
            rounds = [r for r in records(proc.stdout) if r["type"] == "round"]
            thread = statistics.mean(r["thread_cpu_ms"] for r in rounds)
            wall = statistics.median(r["wall_ms"] for r in rounds)
            usage = "n/a"
            usage_err = "n/a"
            if cgroup:
                charged = statistics.mean(r["d_usage_usec"] / 1000 for r in rounds)
                usage, usage_err = f"{charged:.3f}", f"{100 * (charged / work_ms - 1):+.2f}"
            print(
                f"{work_ms:>6} {thread:>16.3f} {100 * (thread / work_ms - 1):>+7.2f} {wall:>9.3f}"
                f" {100 * (wall / work_ms - 1):>+7.2f} {usage:>16} {usage_err:>7}"
            )
        print("(thread clock: mean over rounds; wall: median round, includes waking the burning thread)")
        if not cgroup:
            print("(no cgroup usage column: needs root and a cgroup v1 cpu controller)")
    finally:
        if cgroup:
            remove_cgroups(cgroup)


def start_idle_serve(binary: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [str(binary), "serve", "-addr=127.0.0.1:0", "-work=0s", "-alloc=0", "-live-mb=0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    for line in proc.stdout:
        rec = json.loads(line)
        if rec["type"] == "listening":
            return proc, rec["addr"]
    proc.kill()
    raise RuntimeError("serve did not start")


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load_fidelity(binary: Path, rate: float, seconds: float) -> None:
    warmup = 2.0
    print(
        f"\n== load fidelity: {rate:g} /work req/s, clump 1, {seconds:g} s window after {warmup:g} s warmup,"
        " idle local serve"
    )
    serve, addr = start_idle_serve(binary)
    try:
        cpu_before = children_cpu_seconds()  # serve is not reaped yet, so not counted
        cmd = [
            str(binary),
            "load",
            f"-target=http://{addr}",
            f"-rps={rate}",
            "-clump=1",
            f"-duration={seconds}s",
            f"-warmup={warmup}s",
            "-seed=1",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        generator_cpu = children_cpu_seconds() - cpu_before
    finally:
        serve.terminate()
        serve.wait(timeout=15)
    recs = records(proc.stdout)
    summary = recs[-1]
    work = summary["work"]
    late = sorted(r["late_ms"] for r in recs if r["type"] == "req")
    window = summary["window_s"]
    planned = span_arrivals(rate, 1, seconds * 1000)
    print(
        f"scheduled in window : {work['sent']} requests = {work['sent'] / window:.1f} req/s "
        f"(the schedule's fixed count: {planned})"
    )
    print(
        f"achieved rate       : {work['achieved_rps']:.1f} req/s ok = {100 * (work['achieved_rps'] / rate - 1):+.2f}% "
        f"vs target; {work['errors']} errors"
    )
    print(
        f"send lateness       : p50 {late[len(late) // 2]:.3f} ms, p99 {summary['late_p99_ms']:.3f} ms, "
        f"max {summary['late_max_ms']:.3f} ms"
    )
    print(f"latency (from sched): p50 {work['p50_ms']:.3f} ms, p99 {work['p99_ms']:.3f} ms")
    per_1000 = generator_cpu / (seconds + warmup) / (rate / 1000)
    print(
        f"generator CPU       : {generator_cpu:.2f} s over {seconds + warmup:g} s = {per_1000:.3f} cores per 1000 req/s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", type=Path, help="cpulab binary (default: build go124mod)")
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    binary = args.binary or build_variant("go124mod", PROJECT / default_output("go124mod"), PROJECT / "workload")
    print(f"binary: {binary}, CPUs: {os.cpu_count()}, kernel: {os.uname().release}")
    # Other work on the host shows up as lateness and wall time: say how busy it was.
    print(f"host load average before: {os.getloadavg()[0]:.2f}")
    burn_accuracy(binary)
    load_fidelity(binary, args.rate, args.seconds)
    print(f"\nhost load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
