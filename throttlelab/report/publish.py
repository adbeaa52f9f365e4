"""The published archive: report, tidy tables, raw logs and the config used, with a SHA-256 manifest.

``throttlelab publish`` packs exactly what the page shows or links into one
reproducible .tar.gz (sorted members, fixed owner and times, SOURCE_DATE_EPOCH);
``throttlelab verify`` checks an unpacked archive against its MANIFEST.sha256
(which ``sha256sum -c`` reads as well).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from throttlelab.errors import ReportError
from throttlelab.figures.registry import figures_for
from throttlelab.model.config import load_design
from throttlelab.model.digest import sha256_file
from throttlelab.report.inputs import config_text, raw_log_path, read_table

MANIFEST_NAME = "MANIFEST.sha256"


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def archive_files(report_dir: Path, tables_dir: Path, raw_root: Path) -> list[Path]:
    """Exactly what the page shows or links: itself, its figures and tables, the tidy tables and
    the raw logs of the runs in runs.csv (not whatever else an earlier profile left on disk)."""
    runs = read_table(tables_dir, "runs")
    experiments = set(runs["experiment"])
    files = [report_dir / "index.html"]
    files += [p for p in (report_dir / "findings_table.csv", report_dir / "estimates_table.csv") if p.is_file()]
    files += [report_dir / "figures" / entry.svg for entry in figures_for(experiments)]
    files += sorted(tables_dir.glob("*.csv"))
    files += [raw_log_path(raw_root, r.experiment, r.variant, r.repeat) for r in runs.itertuples()]
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        raise ReportError(f"cannot publish, missing: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    return files


def archive_members(results: Path, files: Iterable[Path]) -> dict[str, Path]:
    """Archive name -> file; names are relative to results/, so the report's relative links still work."""
    members = {}
    for path in files:
        try:
            name = path.resolve().relative_to(results.resolve()).as_posix()
        except ValueError:
            raise ReportError(f"{path} is not under {results}; the archive keeps paths relative to it") from None
        members[name] = path
    return members


def manifest_text(entries: Mapping[str, bytes]) -> str:
    """`sha256sum` format, so `sha256sum -c MANIFEST.sha256` verifies an unpacked archive."""
    return "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in sorted(entries.items()))


def _tar_info(name: str, size: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, mtime, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def write_archive(out: Path, prefix: str, entries: Mapping[str, bytes], mtime: int) -> None:
    """A .tar.gz whose bytes depend only on the entries: sorted, fixed owner, times and gzip header."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(entries):
            data = entries[name]
            tar.addfile(_tar_info(f"{prefix}/{name}", len(data), mtime), io.BytesIO(data))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    with tmp.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(buffer.getvalue())
    tmp.replace(out)


def archive_stem(out: Path) -> str:
    name = out.name
    for suffix in (".tar.gz", ".tgz"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return out.stem


def publish(
    results: Path,
    report_dir: Path,
    tables_dir: Path,
    raw_root: Path,
    config: Mapping[str, Any],
    out: Path,
    project: Path = Path("."),
) -> Path:
    """Pack report, tables, raw logs and the config used, with MANIFEST.sha256, into `out`.

    Also writes `out`.sha256 (the archive's own checksum, for a release page).
    """
    design = load_design(dict(config), project / "config")
    if not (report_dir / "index.html").is_file():
        raise ReportError(f"{report_dir / 'index.html'}: missing; build the report first (snakemake --cores 1 report)")
    members = archive_members(results, archive_files(report_dir, tables_dir, raw_root))
    entries = {name: path.read_bytes() for name, path in members.items()}
    effective_config, profile_yaml = config_text(config, design)
    entries["config/config.yaml"] = effective_config.encode()
    entries[f"config/profiles/{design.profile_path.name}"] = profile_yaml.encode()
    entries[MANIFEST_NAME] = manifest_text(entries).encode()
    # SOURCE_DATE_EPOCH (reproducible-builds.org) if set, else the newest input's time.
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH") or max(p.stat().st_mtime for p in members.values()))
    write_archive(out, archive_stem(out), entries, mtime)
    Path(f"{out}.sha256").write_text(f"{sha256_file(out)}  {out.name}\n")
    return out


def verify_manifest(root: Path) -> list[str]:
    """Problems of an unpacked archive against its manifest; empty when every checksum matches."""
    manifest = root / MANIFEST_NAME
    if not manifest.is_file():
        return [f"{manifest}: missing"]
    problems, listed = [], set()
    for number, line in enumerate(manifest.read_text().splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            problems.append(f"{manifest}:{number}: not a `sha256sum` line")
            continue
        listed.add(name)
        path = root / name
        if not path.is_file():
            problems.append(f"{name}: listed but missing")
        elif sha256_file(path) != digest:
            problems.append(f"{name}: checksum differs")
    for path in files_under(root):
        name = path.relative_to(root).as_posix()
        if name != MANIFEST_NAME and name not in listed:
            problems.append(f"{name}: present but not in the manifest")
    return problems


# --------------------------------------------------------------------------
# command line (throttlelab.report.page.main dispatches publish and verify here)


def config_arg(value: str) -> dict[str, Any]:
    try:
        config = json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--config-json is not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise argparse.ArgumentTypeError("--config-json must be a JSON object (Snakemake's config)")
    return config


def publish_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="throttlelab publish", description="Pack the report, tables, raw logs and config with a SHA-256 manifest."
    )
    p.add_argument("--results", required=True, type=Path, help="the results directory every path lies under")
    p.add_argument("--report", required=True, type=Path, help="the report directory (index.html, figures/)")
    p.add_argument("--tables", required=True, type=Path)
    p.add_argument("--raw-root", required=True, type=Path)
    p.add_argument("--config-json", type=config_arg, default={})
    p.add_argument("--project", type=Path, default=Path("."), help="the checkout holding config/ (default: .)")
    p.add_argument(
        "--out", required=True, type=Path, help="the archive, e.g. results/throttlelab-report-local-ci.tar.gz"
    )
    return p


def verify_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="throttlelab verify", description="Check an unpacked archive against its MANIFEST.sha256."
    )
    p.add_argument("root", type=Path)
    return p


def publish_main(argv: list[str]) -> int:
    a = publish_parser().parse_args(argv)
    out = publish(a.results, a.report, a.tables, a.raw_root, a.config_json, a.out, a.project)
    print(f"throttlelab publish: wrote {out} and {out}.sha256")
    return 0


def verify_main(argv: list[str]) -> int:
    problems = verify_manifest(verify_parser().parse_args(argv).root)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0
