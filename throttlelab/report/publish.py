"""The published archive: report, tidy tables, raw logs and the config used, with a SHA-256 manifest.

``throttlelab publish`` packs exactly what the page shows or links into one
reproducible .tar.gz (sorted members, fixed owner and times, SOURCE_DATE_EPOCH);
``throttlelab verify`` checks an unpacked archive against its MANIFEST.sha256
(which ``sha256sum -c`` reads as well). ARCHIVE.json, listed in the manifest like every other
member, says which format the archive is (:data:`ARCHIVE_FORMAT`) and where its run's tables and
report lie inside it; :func:`read_archive` takes an archive only after checking that, and every
member's checksum (``throttlelab compare`` reads published runs through it).
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
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from pathlib import Path
from typing import Any

from throttlelab.errors import ReportError
from throttlelab.figures.registry import figures_for
from throttlelab.model.config import load_design
from throttlelab.model.digest import sha256_file
from throttlelab.report.inputs import config_text, raw_log_path, read_table

MANIFEST_NAME = "MANIFEST.sha256"
#: What an archive is: its format version, backend and profile, where its tables and page are inside it.
FORMAT_NAME = "ARCHIVE.json"
#: The archive's layout as this code writes and reads it; a reader refuses any other version (archives made
#: before the version was written have no ARCHIVE.json and count as version 0).
ARCHIVE_FORMAT = 1


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
    return {member_name(results, path): path for path in files}


def member_name(results: Path, path: Path) -> str:
    """A file's name in the archive: its path relative to results/."""
    try:
        return path.resolve().relative_to(results.resolve()).as_posix()
    except ValueError:
        raise ReportError(f"{path} is not under {results}; the archive keeps paths relative to it") from None


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
    entries[FORMAT_NAME] = format_text(
        backend=design.backend,
        profile=Path(design.profile).stem,
        tables=member_name(results, tables_dir / "runs.csv").rsplit("/", 1)[0],
        report=member_name(results, report_dir / "index.html"),
    ).encode()
    entries[MANIFEST_NAME] = manifest_text(entries).encode()
    # SOURCE_DATE_EPOCH (reproducible-builds.org) if set, else the newest input's time.
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH") or max(p.stat().st_mtime for p in members.values()))
    write_archive(out, archive_stem(out), entries, mtime)
    Path(f"{out}.sha256").write_text(f"{sha256_file(out)}  {out.name}\n")
    return out


def format_text(backend: str, profile: str, tables: str, report: str) -> str:
    """ARCHIVE.json: the format version, the run it holds, and its tables' folder and page inside the archive."""
    info = {"format": ARCHIVE_FORMAT, "backend": backend, "profile": profile, "tables": tables, "report": report}
    return json.dumps(info, indent=2, sort_keys=True) + "\n"


def manifest_problems(manifest: str, label: str, digests: Mapping[str, str]) -> list[str]:
    """Problems of a set of files (name -> SHA-256) against a manifest's text; empty when they match."""
    problems, listed = [], set()
    for number, line in enumerate(manifest.splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            problems.append(f"{label}:{number}: not a `sha256sum` line")
            continue
        listed.add(name)
        if name not in digests:
            problems.append(f"{name}: listed but missing")
        elif digests[name] != digest:
            problems.append(f"{name}: checksum differs")
    for name in digests:
        if name != MANIFEST_NAME and name not in listed:
            problems.append(f"{name}: present but not in the manifest")
    return problems


def verify_manifest(root: Path) -> list[str]:
    """Problems of an unpacked archive against its manifest; empty when every checksum matches."""
    manifest = root / MANIFEST_NAME
    if not manifest.is_file():
        return [f"{manifest}: missing"]
    digests = {path.relative_to(root).as_posix(): sha256_file(path) for path in files_under(root)}
    return manifest_problems(manifest.read_text(), str(manifest), digests)


@dataclass(frozen=True)
class Archive:
    """A published archive read into memory and checked: its members by their name inside the archive's folder."""

    path: Path
    prefix: str
    members: Mapping[str, bytes]
    info: Mapping[str, Any]

    @property
    def tables(self) -> str:
        return str(self.info["tables"])

    @property
    def report(self) -> str:
        return str(self.info["report"])


def _refuse(path: Path, problem: str) -> ReportError:
    return ReportError(f"{path}: {problem}")


def _members(path: Path) -> dict[str, bytes]:
    """Every regular file of the .tar.gz, by its name; a broken or cut-off file is one ReportError line."""
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for info in tar:
                name = PurePosixPath(info.name)
                if info.isdir():
                    continue
                if not info.isfile():
                    raise _refuse(
                        path, f"holds {info.name}, which is not a plain file (an archive of publish holds only files)"
                    )
                if name.is_absolute() or ".." in name.parts:
                    raise _refuse(path, f"holds {info.name}, a path outside its own folder")
                data = tar.extractfile(info)
                members[name.as_posix()] = data.read() if data is not None else b""
    except EOFError:
        raise _refuse(path, "truncated: the compressed data ends before the archive does") from None
    except (tarfile.ReadError, gzip.BadGzipFile, zlib.error) as exc:
        detail = str(exc) or type(exc).__name__
        if "unexpected end" in detail or "truncated" in detail:
            raise _refuse(path, f"truncated: {detail}") from None
        raise _refuse(path, f"not a readable .tar.gz ({detail})") from None
    except OSError as exc:
        raise _refuse(path, f"cannot be read ({exc.strerror or exc})") from None
    return members


def read_archive(path: Path) -> Archive:
    """An archive made by :func:`publish`, once it is known whole: its own checksum (the .sha256 beside it, when
    there is one), readable to its end, of this code's format version, and every member as its manifest says.
    Anything else raises one ReportError line naming the archive and the problem."""
    if not path.is_file():
        raise _refuse(path, "no such archive")
    beside = Path(f"{path}.sha256")
    if beside.is_file():
        recorded = beside.read_text().split()
        if recorded and recorded[0] != sha256_file(path):
            raise _refuse(path, f"its checksum differs from {beside.name}: the file changed after publish wrote it")
    members = _members(path)
    prefixes = {name.split("/", 1)[0] for name in members}
    if len(prefixes) != 1 or not all("/" in name for name in members):
        raise _refuse(path, "not an archive of publish: its files do not lie in one folder")
    prefix = prefixes.pop()
    inside = {name.split("/", 1)[1]: data for name, data in members.items()}
    if FORMAT_NAME not in inside:
        raise _refuse(
            path,
            f"archive format version 0 (no {FORMAT_NAME}: made before archives carried one); this throttlelab reads version {ARCHIVE_FORMAT}",
        )
    try:
        info = json.loads(inside[FORMAT_NAME])
        version = info["format"]
    except (ValueError, KeyError, TypeError):
        raise _refuse(path, f"{FORMAT_NAME} is not the JSON publish writes") from None
    if version != ARCHIVE_FORMAT:
        raise _refuse(path, f"archive format version {version}; this throttlelab reads version {ARCHIVE_FORMAT}")
    if MANIFEST_NAME not in inside:
        raise _refuse(path, f"no {MANIFEST_NAME}")
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in inside.items()}
    problems = manifest_problems(inside[MANIFEST_NAME].decode(errors="replace"), MANIFEST_NAME, digests)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise _refuse(path, f"does not match its manifest: {problems[0]}{more}")
    for key in ("tables", "report"):
        if not isinstance(info.get(key), str):
            raise _refuse(path, f"{FORMAT_NAME} does not say where its {key} are")
    return Archive(path, prefix, inside, info)


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
