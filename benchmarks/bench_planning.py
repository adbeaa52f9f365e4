"""Planning cost: the wall time of a no-op `snakemake --cores 1 report` after a run of a profile.

    python benchmarks/bench_planning.py [--profile quick] [--backend local] [--repeats 5] [--cprofile OUT]

1. Makes the results of a complete run in a temporary working directory without measuring
   anything: every output of `report` created empty (`snakemake --summary` lists them), then
   `snakemake --touch --forceall report`, which records each job's metadata as a real run would
   (params, code, input set: the rerun triggers a no-op run checks).
2. Times `snakemake --cores 1 report` there REPEATS times (each must say "Nothing to be done") and
   a one-rule workflow with nothing to do, Snakemake's own floor on this machine; prints the median
   and the minimum of both and the difference (what planning this workflow adds). The goal is a
   median of at most 2 s.
3. With --cprofile OUT, one more no-op run under cProfile, its statistics written to OUT
   (`python -m pstats OUT`).

Prints figures; asserts nothing. Exits 1 if a no-op run would do something.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
GOAL_S = 2.0


def snakemake_cmd(snakefile: Path, workdir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(snakefile), "-d", str(workdir), "--cores", "1", *args]


def run(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return time.monotonic() - start, proc


def fake_results(workdir: Path, config: list[str]) -> int:
    """The outputs of a complete run of `report`, empty, with the metadata a real run leaves."""
    _, proc = run(snakemake_cmd(PROJECT / "Snakefile", workdir, "--summary", "report", "--config", *config))
    if proc.returncode != 0:
        sys.exit(f"snakemake --summary failed:\n{proc.stderr[-3000:]}")
    outputs = [line.split("\t")[0] for line in proc.stdout.splitlines()[1:] if line.strip()]
    now = time.time()
    for name in outputs:
        path = workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        os.utime(path, (now, now))
    _, proc = run(snakemake_cmd(PROJECT / "Snakefile", workdir, "--touch", "--forceall", "report", "--config", *config))
    if proc.returncode != 0:
        sys.exit(f"snakemake --touch failed:\n{proc.stderr[-3000:]}")
    return len(outputs)


def time_noop(cmd: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        wall, proc = run(cmd)
        if proc.returncode != 0 or "Nothing to be done" not in proc.stderr + proc.stdout:
            print(f"not a no-op run ({' '.join(cmd)}):\n{proc.stderr[-3000:]}", file=sys.stderr)
            sys.exit(1)
        times.append(wall)
    return times


def floor_workflow(folder: Path) -> Path:
    """A one-rule workflow whose one output exists: what Snakemake costs by itself."""
    snakefile = folder / "Snakefile"
    snakefile.write_text('rule all:\n    output:\n        "done",\n    shell:\n        "touch {output}"\n')
    (folder / "done").touch()
    return snakefile


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", default="quick")
    p.add_argument("--backend", default="local")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--cprofile", type=Path, help="write one no-op run's cProfile statistics here")
    args = p.parse_args(argv)
    config = [f"profile={args.profile}", f"backend={args.backend}"]
    with tempfile.TemporaryDirectory(prefix="bench-planning-") as tmp:
        workdir, floor = Path(tmp) / "work", Path(tmp) / "floor"
        workdir.mkdir()
        floor.mkdir()
        start = time.monotonic()
        files = fake_results(workdir, config)
        print(f"results of a {args.backend}/{args.profile} run faked: {files} files ({time.monotonic() - start:.0f} s)")
        noop = time_noop(snakemake_cmd(PROJECT / "Snakefile", workdir, "report", "--config", *config), args.repeats)
        base = time_noop(snakemake_cmd(floor_workflow(floor), floor), args.repeats)
        if args.cprofile:
            cmd = snakemake_cmd(PROJECT / "Snakefile", workdir, "report", "--config", *config)
            run([sys.executable, "-m", "cProfile", "-o", str(args.cprofile), *cmd[1:]])
    med, floor_med = statistics.median(noop), statistics.median(base)
    print(
        f"no-op `snakemake --cores 1 report`: median {med:.2f} s, min {min(noop):.2f} s over {args.repeats} runs "
        f"(goal <= {GOAL_S:.1f} s: {'met' if med <= GOAL_S else 'NOT met'})"
    )
    print(f"one-rule workflow (Snakemake alone): median {floor_med:.2f} s, min {min(base):.2f} s")
    print(f"planning this workflow adds: median {med - floor_med:.2f} s, min {min(noop) - min(base):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
