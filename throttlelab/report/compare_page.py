"""The comparison page: several runs' findings on one self-contained page (``throttlelab compare``).

A run is a backend's folder of this checkout (``results/<backend>``, its tables as the analysis left them) or
an archive made by ``throttlelab publish``, here or on another machine. An archive is read whole and checked
before anything of it is used (publish.read_archive: its format version, every member against its
manifest); a broken one stops the comparison with one line naming the file and the problem, and nothing is
written. The page (results/compare/index.html) holds the matrix of findings by runs with the lab's own
result beside them, per finding a forest plot of its decisive checks across the runs
(figures/compare_forest.py), and where the runs disagree and why (report/comparison.py). Each cell links to
its run's own report: this checkout's under results/report/, an archive's unpacked beside the page
(``archives/<name>/``), written only once the page itself can be.

    throttlelab compare --run results/local --run results/docker \\
        --archive elsewhere/throttlelab-report-kind-quick.tar.gz --out results/compare/index.html
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from throttlelab.errors import ReportError
from throttlelab.figures.compare_forest import checks_across_runs, compare_forest_caption, compare_forest_svg
from throttlelab.figures.forest import forest_rows
from throttlelab.model import results_layout as layout
from throttlelab.report.comparison import (
    SETUP_FIELDS,
    RunTables,
    disagreements,
    lab_setup,
    matrix,
    setup_row,
    verdict_class,
)
from throttlelab.report.inputs import read_table
from throttlelab.report.page import relative_href, write_atomically
from throttlelab.report.publish import FORMAT_NAME, Archive, archive_stem, read_archive

TEMPLATE_NAME = "compare.html.j2"
#: Where an archive's files are unpacked, beside the page, so its cell can link its own report.
ARCHIVES_FOLDER = "archives"


@dataclass(frozen=True)
class Source:
    """Where a run came from: a folder of this checkout, or a checked archive (kept in memory until written)."""

    tables: Path
    origin: str
    archive: Archive | None = None


def run_setup(tables_dir: Path) -> dict[str, str]:
    """setup.csv's row (the analysis writes it); tables from before it name what environment.csv holds and say
    the profile was not recorded."""
    setup = read_table(tables_dir, "setup", required=False)
    if setup is not None and len(setup):
        return setup_row(setup.iloc[0].to_dict())
    environment = read_table(tables_dir, "environment")
    values: dict[str, Any] = {}
    for key, column in (
        ("backend", "backend"),
        ("runtime", "runtime_conversion"),
        ("cgroup_version", "cgroup_version"),
        ("kernel", "kernel"),
        ("cpus", "cpu_count"),
    ):
        seen = list(dict.fromkeys(str(v) for v in environment[column].dropna())) if column in environment else []
        values[key] = " / ".join(seen)
    values["profile"] = "not recorded (tables older than setup.csv)"
    return setup_row(values)


def read_run(source: Source, label: str, report_href: str) -> RunTables:
    findings = read_table(source.tables, "findings")
    if findings.empty:
        raise ReportError(f"{source.tables / 'findings.csv'}: no finding to compare")
    return RunTables(
        label=label,
        source=source.origin,
        setup=run_setup(source.tables),
        findings=findings,
        checks=read_table(source.tables, "checks", required=False),
        report_href=report_href,
    )


def unique_labels(setups: Sequence[Mapping[str, str]], origins: Sequence[str]) -> list[str]:
    """'local · ci' per run; two runs of the same backend and profile are told apart by where they came from,
    and if that is the same too, by their place in the list."""
    base = [f"{s.get('backend') or '?'} · {s.get('profile') or '?'}" for s in setups]
    labels = [b if base.count(b) == 1 else f"{b} ({origin})" for b, origin in zip(base, origins)]
    return [label if labels.count(label) == 1 else f"{label} #{i + 1}" for i, label in enumerate(labels)]


def local_report(reports_root: Path, setup: Mapping[str, str], page_dir: Path) -> str:
    """This checkout's report of the run (results/report/<backend>-<profile>/index.html), if it was rendered."""
    folder = Path(layout.report_dir(setup.get("backend", ""), setup.get("profile", ""))).name
    page = reports_root / folder / "index.html"
    return relative_href(page, page_dir) if page.is_file() else ""


def unpack_members(archive: Archive, into: Path) -> Path:
    """Write a checked archive's files under ``into`` (a scratch folder or the page's archives folder)."""
    for name, data in archive.members.items():
        path = into / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return into


@dataclass(frozen=True)
class CompareInputs:
    runs: list[RunTables]
    #: the archives to write beside the page once it is rendered: folder name -> archive
    archives: dict[str, Archive]


def load_runs(
    run_dirs: Sequence[Path], archives: Sequence[Path], out: Path, reports_root: Path, scratch: Path
) -> CompareInputs:
    """Read every run: this checkout's folders, then the archives (each checked first; unpacked into ``scratch``
    to read its tables). Raises ReportError, one line naming the file, on the first that cannot be used."""
    page_dir = out.parent
    sources: list[Source] = []
    for folder in run_dirs:
        tables = folder / Path(layout.TABLES).name
        if not (tables / "findings.csv").is_file():
            raise ReportError(
                f"{folder}: no tables/findings.csv (run its analysis first: snakemake --cores 1 analysis)"
            )
        sources.append(Source(tables, f"{folder.parent.name}/{folder.name}"))
    names: dict[str, Archive] = {}
    for path in archives:
        archive = read_archive(path)
        name = archive_stem(path)
        while name in names:
            name += "-2"
        names[name] = archive
        root = unpack_members(archive, scratch / name)
        if not (root / archive.tables / "findings.csv").is_file():
            raise ReportError(f"{path}: holds no {archive.tables}/findings.csv, though its {FORMAT_NAME} names it")
        sources.append(Source(root / archive.tables, path.name, archive))
    if not sources:
        raise ReportError("nothing to compare: no run folder with tables and no archive was given")
    setups = [run_setup(s.tables) for s in sources]
    labels = unique_labels(setups, [s.origin for s in sources])
    archive_folders = {id(a): name for name, a in names.items()}
    runs = []
    for source, setup, label in zip(sources, setups, labels):
        if source.archive is not None:
            folder = archive_folders[id(source.archive)]
            href = f"{ARCHIVES_FOLDER}/{folder}/{source.archive.report}"
        else:
            href = local_report(reports_root, setup, page_dir)
        runs.append(read_run(source, label, href))
    return CompareInputs(runs, names)


@dataclass(frozen=True)
class FindingPlot:
    finding: str
    svg: str
    caption: str


def finding_plots(runs: Sequence[RunTables], findings: Sequence[str]) -> list[FindingPlot]:
    """Per finding, its decisive checks across the runs (none for a finding no run has a decisive check of)."""
    rows = [(run.label, forest_rows(run.checks) if run.checks is not None else []) for run in runs]
    plots = []
    for finding in findings:
        checks = checks_across_runs(rows, finding)
        if checks:
            plots.append(FindingPlot(finding, compare_forest_svg(finding, checks), compare_forest_caption(checks)))
    return plots


def build_context(runs: Sequence[RunTables]) -> dict[str, Any]:
    rows = matrix(runs)
    return {
        "title": f"throttlelab: {len(runs)} run{'' if len(runs) == 1 else 's'} compared",
        "runs": list(runs),
        "fields": SETUP_FIELDS,
        "lab": lab_setup(),
        "matrix": rows,
        "plots": {p.finding: p for p in finding_plots(runs, [r.finding for r in rows])},
        "disagreements": disagreements(runs),
        "verdict_class": verdict_class,
    }


def render_page(context: Mapping[str, Any], template_dir: Path) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template(TEMPLATE_NAME).render(**context)


def write_archive_folder(archive: Archive, folder: Path) -> None:
    """Unpack a checked archive beside the page, replacing what an earlier comparison left there."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    staging.chmod(0o755)  # mkdtemp's folder is its owner's only; the unpacked report is for every reader
    try:
        unpack_members(archive, staging)
        if folder.exists():
            shutil.rmtree(folder)
        staging.replace(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def compare(
    run_dirs: Sequence[Path],
    archives: Sequence[Path],
    out: Path,
    project: Path = Path("."),
    reports_root: Path | None = None,
) -> Path:
    """Render the comparison page to ``out``. Every input is read and checked, and the page rendered, before
    anything is written: a run or archive that cannot be used leaves the results as they were."""
    reports_root = Path(layout.REPORT_ROOT) if reports_root is None else reports_root
    with tempfile.TemporaryDirectory(prefix="throttlelab-compare-") as scratch:
        inputs = load_runs(run_dirs, archives, out, reports_root, Path(scratch))
        page = render_page(build_context(inputs.runs), project / "report")
    for name, archive in inputs.archives.items():
        write_archive_folder(archive, out.parent / ARCHIVES_FOLDER / name)
    write_atomically(out, page)
    return out


# --------------------------------------------------------------------------
# command line


def compare_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="throttlelab compare", description="Render one page comparing the findings of several runs."
    )
    p.add_argument(
        "--run", action="append", default=[], type=Path, help="a run folder of this checkout (results/<backend>)"
    )
    p.add_argument("--archive", action="append", default=[], type=Path, help="an archive made by `throttlelab publish`")
    p.add_argument("--out", required=True, type=Path, help="the page to write, e.g. results/compare/index.html")
    p.add_argument("--reports", type=Path, default=None, help="this checkout's reports (default: results/report)")
    p.add_argument(
        "--project", type=Path, default=Path("."), help="the checkout holding report/ (the template; default: .)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    a = compare_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        out = compare(a.run, a.archive, a.out, a.project, a.reports)
    except ReportError as exc:
        print(f"throttlelab compare: {exc}", file=sys.stderr)
        return 1
    print(f"throttlelab compare: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
