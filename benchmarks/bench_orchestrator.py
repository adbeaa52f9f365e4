"""How quiet the orchestrator keeps the measuring windows: prints figures, asserts nothing.

    python benchmarks/bench_orchestrator.py [--commit HEAD] [--profile quick] [--target report]
                                            [--keep DIR] [--json FILE]

Clones the project at ``--commit`` into a fresh folder, runs ``snakemake --cores 1 TARGET
--config profile=PROFILE`` there with this interpreter's Snakemake (nothing else should run on
the machine meanwhile), and samples the Snakemake process every 0.25 s: its CPU clock (all of
its threads, the ended ones too) and how many threads it has. Then prints

- the wall time, Snakemake's CPU seconds and the most threads it had at once;
- how long Snakemake took to exit after its last job wrote its output;
- the attempts judged disturbed (every kept disturbed attempt and every run still disturbed),
  from the raw logs;
- the orchestrator's share of one CPU per measuring window, median and p95, twice: as the
  runner's meter recorded it (``interference.orchestrator_s`` in each raw log; absent in logs
  written before the meter knew the orchestrator) and as this script's own samples of Snakemake
  saw it over each attempt's start..end (the whole attempt, 0.25 s resolution).

The clone is removed at the end unless ``--keep`` names where to leave it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from throttlelab.host.processes import cpu_clock_s

PROJECT = Path(__file__).resolve().parent.parent
SAMPLE_S = 0.25


def threads(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Sampler:
    """Samples one process until it ends: (wall clock, CPU seconds) pairs and the most threads."""

    def __init__(self, pid: int):
        self.pid = pid
        self.samples: list[tuple[float, float]] = []
        self.max_threads = 0
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            cpu = cpu_clock_s(self.pid)
            if cpu is None:
                return
            self.samples.append((time.time(), cpu))
            self.max_threads = max(self.max_threads, threads(self.pid))
            time.sleep(SAMPLE_S)

    def cpu_between(self, start: float, end: float) -> tuple[float, float] | None:
        """(CPU seconds, wall seconds) of the process between two wall-clock times (samples inside)."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return None
        return inside[-1][1] - inside[0][1], inside[-1][0] - inside[0][0]

    def join(self) -> None:
        self._thread.join()


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank quantile (not the type-7 one of the analysis): a benchmark summary, not a statistic."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(values: list[float]) -> str:
    if not values:
        return "none recorded"
    return (
        f"median {statistics.median(values):.2%}, p95 {percentile(values, 0.95):.2%}, "
        f"max {max(values):.2%} of a CPU over {len(values)} windows"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default="HEAD", help="the commit of this repository to clone and run")
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--target", default="report")
    parser.add_argument("--keep", default=None, help="leave the clone here instead of removing it")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="throttlelab-bench-orch-"))
    clone = Path(args.keep) if args.keep else tmp / "clone"
    try:
        subprocess.run(["git", "clone", "-q", str(PROJECT), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", args.commit], check=True)
        commit = subprocess.run(
            ["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
        ).stdout.strip()
        cmd = [sys.executable, "-m", "snakemake", "--cores", "1", args.target, "--config", f"profile={args.profile}"]
        print(f"commit {commit}: {' '.join(cmd[1:])} in {clone}", flush=True)
        log = (tmp / "snakemake.log").open("w")
        started = time.time()
        proc = subprocess.Popen(cmd, cwd=clone, stdout=log, stderr=subprocess.STDOUT)
        sampler = Sampler(proc.pid)
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait()
            raise
        ended = time.time()
        sampler.join()
        log.close()
        if rc != 0:
            print((tmp / "snakemake.log").read_text()[-4000:])
            sys.exit(f"snakemake exited {rc}")
        figures = measure(clone, sampler, started, ended, commit, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for key, value in figures.items():
        print(f"{key:<44} {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")


def measure(clone: Path, sampler: Sampler, started: float, ended: float, commit: str, args) -> dict:
    raw_logs = sorted((clone / "results").glob("*/raw/**/*.jsonl"))
    judged, kept, runs, metered, sampled = 0, 0, 0, [], []
    for path in raw_logs:
        meta = json.loads(path.open().readline())
        seen = meta.get("interference", {})
        if ".disturbed-" in path.name:
            kept += 1
        else:
            runs += 1
            judged += len(meta.get("disturbed_attempts", [])) + bool(seen.get("disturbed"))
        if meta.get("window_s", 0) <= 0:
            continue  # a read-out: nothing timed
        if seen.get("orchestrator_s") is not None and seen.get("window_s"):
            metered.append(seen["orchestrator_s"] / seen["window_s"])
        between = sampler.cpu_between(
            datetime.fromisoformat(meta["start"]).timestamp(), datetime.fromisoformat(meta["end"]).timestamp()
        )
        if between is not None and between[1] > 0:
            sampled.append(between[0] / between[1])
    outputs = [p for p in (clone / "results").rglob("*") if p.is_file()]
    last_output = max((p.stat().st_mtime for p in outputs), default=ended)
    total_cpu = sampler.samples[-1][1] if sampler.samples else float("nan")
    return {
        "commit": commit,
        "profile / target": f"{args.profile} / {args.target}",
        "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(started)),
        "cpus": os.cpu_count(),
        "wall time": f"{ended - started:.0f} s ({(ended - started) / 60:.1f} min)",
        "snakemake CPU": f"{total_cpu:.1f} s ({total_cpu / (ended - started):.1%} of a CPU on average)",
        "snakemake most threads at once": sampler.max_threads,
        "exit after the last output": f"{ended - last_output:.1f} s",
        "runs": runs,
        "attempts judged disturbed": judged,
        "disturbed attempts kept as logs": kept,
        "orchestrator per window (runner's meter)": summary(metered),
        "snakemake per attempt (benchmark's samples)": summary(sampled),
    }


if __name__ == "__main__":
    main()
