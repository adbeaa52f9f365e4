"""The analysis stage's command line: one subcommand per Snakemake rule (``throttlelab tables|stats|findings``).

    throttlelab tables --raw RAW... --out-dir results/local/tables
    throttlelab stats --tables-dir results/local/tables \
        --metrics results/local/tables/metrics.csv --estimates results/local/tables/estimates.csv \
        --confidence 0.95 --seed 1
    throttlelab findings --tables-dir results/local/tables --experiments E1 E2a E3 S1 \
        --findings results/local/tables/findings.csv --checks results/local/tables/checks.csv \
        --predictions results/local/tables/predictions.csv --confidence 0.95 [--looks results/local/looks/E7.json]
    throttlelab look --experiment E7 --raw RAW... --fraction 0.556 --confidence 0.95 \
        --out results/local/looks/E7.json

Each subcommand is one call of a function below, named as its rule is (parse_runs,
compute_stats, evaluate_findings, look; tidy.parse_runs is the reading half of the first); the
subcommand is named by what it writes. Errors in the input (a
truncated raw log, a bad confidence level) end with one line on stderr and
exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from throttlelab.analysis import findings, looks, metrics, report_statistics, stats, tidy
from throttlelab.analysis.findings.prediction_table import prediction_table
from throttlelab.model import look_file


def _check_confidence(level: float) -> float:
    if not 0.5 < level < 1.0:
        raise tidy.InputError(f"--confidence must lie strictly between 0.5 and 1, got {level}")
    return level


def _write_csv(frame: pd.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return path


def parse_runs(raw: Sequence[str | Path], out_dir: str | Path) -> dict[str, pd.DataFrame]:
    """The rule parse_runs: every raw log -> the tidy tables of docs/TABLES.md under ``out_dir``."""
    tables = tidy.parse_runs(raw)
    tidy.write_tables(tables, out_dir)
    return tables


def read_tables(tables_dir: str | Path, names: Sequence[str]) -> dict[str, pd.DataFrame]:
    return {name: tidy.read_table(Path(tables_dir) / f"{name}.csv", name) for name in names}


def compute_stats(
    tables_dir: str | Path,
    metrics_path: str | Path,
    estimates_path: str | Path,
    *,
    confidence: float,
    seed: int,
    contrasts_path: str | Path | None = None,
    interference_path: str | Path | None = None,
    load_generator_path: str | Path | None = None,
    setup_path: str | Path | None = None,
    profile: str = "",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rule compute_stats: tidy tables -> metrics.csv (per run) and estimates.csv (across repeats),
    and when asked the statistics the report prints beside them (analysis/report_statistics.py):
    contrasts.csv and load_generator.csv, from metrics.csv as written (the numbers the findings read too),
    interference.csv, and setup.csv (the run as a whole: backend, ``profile``, runtime, kernel, CPUs)."""
    level = _check_confidence(confidence)
    tables = read_tables(
        tables_dir,
        ("runs", "headers", "summaries", "rounds", "requests", "readback", "share_samples", "podstats", "target_stats"),
    )
    per_run = metrics.run_metrics(tables)
    across = metrics.estimates_table(
        per_run, tables["requests"], level=level, seed=seed, timeout_ms=metrics.load_timeout_ms(tables["headers"])
    )
    _write_csv(per_run, metrics_path)
    _write_csv(across, estimates_path)
    if contrasts_path is not None:
        _write_csv(report_statistics.contrasts_table(pd.read_csv(metrics_path), tables["runs"], level), contrasts_path)
    if interference_path is not None:
        _write_csv(report_statistics.interference_table(tables["runs"]), interference_path)
    if load_generator_path is not None:
        _write_csv(report_statistics.load_generator_table(pd.read_csv(metrics_path)), load_generator_path)
    if setup_path is not None:
        environment = tidy.read_table(Path(tables_dir) / "environment.csv", "environment")
        _write_csv(report_statistics.setup_table(environment, tables["runs"], profile, level), setup_path)
    return per_run, across


def evaluate_findings(
    tables_dir: str | Path,
    metrics_path: str | Path,
    findings_path: str | Path,
    checks_path: str | Path,
    *,
    experiments: Sequence[str],
    confidence: float,
    left_out: Mapping[str, str] | None = None,
    predictions_path: str | Path | None = None,
    look_paths: Sequence[str | Path] = (),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rule evaluate_findings: per-run metrics + the profile's experiments -> findings.csv and checks.csv,
    and predictions.csv (the model's numbers the figures draw) when ``predictions_path`` is given.
    ``left_out``: "experiment/variant" -> why the backend left it out of the plan. ``look_paths``: the look files
    of the experiments measured in two stages, each judged at the look it stopped at (analysis/looks.py)."""
    level = _check_confidence(confidence)
    tables = read_tables(tables_dir, ("runs", "headers"))
    evidence = findings.Evidence(
        metrics=pd.read_csv(metrics_path),
        runs=tables["runs"],
        headers=tables["headers"],
        profile_experiments=frozenset(experiments),
        level=level,
        left_out=dict(left_out or {}),
        looks=looks.judged_looks(look_paths),
    )
    rows, checks = findings.evaluate(evidence)
    _write_csv(rows, findings_path)
    _write_csv(checks, checks_path)
    if predictions_path is not None:
        _write_csv(prediction_table(evidence), predictions_path)
    return rows, checks


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="throttlelab", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("tables", help="parse raw logs into tidy CSV tables")
    t.add_argument("--raw", nargs="+", required=True, help="raw logs (results/<backend>/raw/...jsonl)")
    t.add_argument("--out-dir", required=True, help="folder for runs.csv, rounds.csv, ...")

    s = sub.add_parser("stats", help="per-run metrics and estimates across repeats")
    s.add_argument("--tables-dir", required=True)
    s.add_argument("--metrics", required=True, help="metrics.csv to write")
    s.add_argument("--estimates", required=True, help="estimates.csv to write")
    s.add_argument("--confidence", type=float, required=True)
    s.add_argument("--seed", type=int, required=True, help="seed of the cluster bootstrap (pooled p99.9)")
    s.add_argument("--contrasts", help="contrasts.csv to write (the report's comparisons of two variants)")
    s.add_argument("--interference", help="interference.csv to write (the spread of host interference)")
    s.add_argument(
        "--load-generator", help="load_generator.csv to write (each load-driven run's send lateness, suspect or not)"
    )
    s.add_argument("--setup", help="setup.csv to write (the run as a whole: backend, profile, runtime, kernel, CPUs)")
    s.add_argument("--profile", default="", help="the profile's name, as setup.csv records it")

    f = sub.add_parser("findings", help="evaluate every finding: the lab's F1-F11 and ours F12-F17")
    f.add_argument("--tables-dir", required=True)
    f.add_argument("--metrics", required=True, help="metrics.csv to read")
    f.add_argument("--experiments", nargs="*", default=[], help="the experiments of the profile")
    f.add_argument("--findings", required=True, help="findings.csv to write")
    f.add_argument("--checks", required=True, help="checks.csv to write")
    f.add_argument("--predictions", help="predictions.csv to write (the model's predictions the figures draw)")
    f.add_argument("--confidence", type=float, required=True)
    f.add_argument(
        "--left-out",
        type=json.loads,
        default={},
        help='JSON {"experiment/variant": reason} of the variants this backend left out of the plan',
    )
    f.add_argument("--looks", nargs="*", default=[], help="look files of the experiments measured in two stages")

    k = sub.add_parser("look", help="the first look at an experiment's first stage: are its later repeats needed")
    k.add_argument("--experiment", required=True)
    k.add_argument("--raw", nargs="+", required=True, help="the raw logs of the experiment's first stage")
    k.add_argument("--fraction", type=float, required=True, help="the first stage's share of the repeats")
    k.add_argument("--confidence", type=float, required=True, help="the level both looks spend together")
    k.add_argument("--left-out", type=json.loads, default={}, help="as for findings")
    k.add_argument("--out", required=True, help="the look file to write")
    return p


def look(
    raw: Sequence[str | Path],
    experiment: str,
    out: str | Path,
    *,
    fraction: float,
    confidence: float,
    left_out: Mapping[str, str] | None = None,
) -> dict:
    """The rule look: an experiment's first-stage raw logs -> its look file (the variants that go on, or stop, and why)."""
    if not 0 < fraction < 1:
        raise tidy.InputError(f"--fraction must lie strictly between 0 and 1, got {fraction}")
    result = looks.first_look(
        raw, experiment, fraction=fraction, confidence=_check_confidence(confidence), left_out=left_out
    )
    look_file.write(result, out)
    return result


def run(args: argparse.Namespace) -> str:
    """Run one subcommand; returns a one-line account of what was written."""
    if args.command == "tables":
        tables = parse_runs(args.raw, args.out_dir)
        sizes = ", ".join(f"{name} {len(frame)}" for name, frame in tables.items())
        return f"parsed {len(args.raw)} raw logs -> {args.out_dir} ({sizes} rows)"
    if args.command == "stats":
        per_run, across = compute_stats(
            args.tables_dir,
            args.metrics,
            args.estimates,
            confidence=args.confidence,
            seed=args.seed,
            contrasts_path=args.contrasts,
            interference_path=args.interference,
            load_generator_path=args.load_generator,
            setup_path=args.setup,
            profile=args.profile,
        )
        return f"{len(per_run)} per-run metrics, {len(across)} estimates at {args.confidence:g}"
    if args.command == "look":
        result = look(
            args.raw,
            args.experiment,
            args.out,
            fraction=args.fraction,
            confidence=args.confidence,
            left_out=args.left_out,
        )
        first = stats.one_sided_level(result["levels"][0])
        outcome = (
            f"{', '.join(result['variants'])} go on, open: {'; '.join(result['open'])}"
            if result["go_on"]
            else "every check decided, stops"
        )
        return f"{args.experiment}, look 1 of 2 at one-sided {first:.4f} on {result['runs']} runs: {outcome}"
    rows, checks = evaluate_findings(
        args.tables_dir,
        args.metrics,
        args.findings,
        args.checks,
        experiments=args.experiments,
        confidence=args.confidence,
        left_out=args.left_out,
        predictions_path=args.predictions,
        look_paths=args.looks,
    )
    verdicts = ", ".join(f"{r.id} {r.verdict}" for r in rows.itertuples())
    return f"{len(rows)} findings ({len(checks)} checks): {verdicts}"


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    started = time.perf_counter()
    try:
        account = run(args)
    except (tidy.InputError, OSError) as exc:
        print(f"throttlelab {args.command}: error: {exc}", file=sys.stderr)
        return 1
    print(f"{account} in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
