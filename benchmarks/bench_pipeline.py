"""Pipeline overhead on the local backend: prints figures, asserts nothing.

    python benchmarks/bench_pipeline.py [--profile ci] [--target raw]

1. Runs the whole profile in a fresh working directory and prints
   overhead ratio = wall time of the run / sum of the experiments' own
   measurement windows (goal <= 1.15), with the build time shown apart.
2. Runs Snakemake again with nothing changed and prints its wall time
   (goal < 5 s).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent


def snakemake(workdir: Path, *args: str) -> float:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(PROJECT / "Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "1",
        *args,
    ]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"snakemake failed:\n{proc.stderr[-3000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--target", default="raw")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="throttlelab-bench-") as tmp:
        workdir = Path(tmp)
        build_wall = snakemake(
            workdir,
            "results/build/go124mod/cpulab",
            "results/build/go125mod/cpulab",
            "--config",
            f"profile={args.profile}",
        )
        run_wall = snakemake(workdir, args.target, "--config", f"profile={args.profile}")
        windows, walls, jobs = 0.0, 0.0, 0
        for log in (workdir / "results/local/raw").rglob("rep*.jsonl"):
            if ".disturbed-" in log.name:  # a repeated attempt: its time counts as overhead
                continue
            meta = json.loads(log.open().readline())
            windows += meta["window_s"]
            walls += meta["wall_s"]
            jobs += 1
        noop_wall = snakemake(workdir, args.target, "--config", f"profile={args.profile}")
    print(f"profile {args.profile}, target {args.target}: {jobs} experiment jobs")
    print(f"build of both workload variants: {build_wall:.1f} s")
    print(f"experiments run wall time:       {run_wall:.1f} s")
    print(f"sum of runner wall times:        {walls:.1f} s")
    print(f"sum of measurement windows:      {windows:.1f} s")
    if windows > 0:
        print(f"overhead ratio (run wall / windows):            {run_wall / windows:.2f}  (goal <= 1.15)")
        print(f"overhead ratio incl. build ((build+run)/windows): {(build_wall + run_wall) / windows:.2f}")
    print(f"per-job overhead ((run wall - windows) / jobs):   {(run_wall - windows) / max(jobs, 1):.2f} s")
    print(f"no-op rerun wall time:           {noop_wall:.2f} s  (goal < 5 s)")


if __name__ == "__main__":
    main()
