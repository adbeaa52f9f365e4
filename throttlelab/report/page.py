"""The HTML report and the published archive.

``render``: one self-contained page (results/report/index.html) from the tidy
tables of docs/TABLES.md, the figures' SVG files (inlined, no external
resource) and the raw logs' ``meta`` records (the environment). The findings
table comes first, then one section per experiment, the environment, and
relative links to the raw logs and tables.

``publish``: the report, the tidy tables, the raw logs and the config used,
with a SHA-256 manifest, in one reproducible .tar.gz under results/.

    python -m throttlelab.report.page --tables results/local/tables --raw-root results/local/raw \\
        --figures results/report/figures --config-json '{"profile": "ci"}' --out results/report/index.html
    python -m throttlelab.report.page publish --results results --report results/report \\
        --tables results/local/tables --raw-root results/local/raw --config-json '{"profile": "ci"}' \\
        --out results/throttlelab-report-local-ci.tar.gz
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import math
import os
import sys
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd
import yaml

from throttlelab.errors import ReportError  # noqa: F401 (re-exported: callers import it from here too)
from throttlelab.model.config import ConfigError, Design, load_design
from throttlelab.figures.plots import FIGURES
from throttlelab.figures.services import lateness_rows, section_notes
from throttlelab.analysis.service_metrics import LATENESS_SUSPECT_MS
from throttlelab.model.quantities import format_cpu, parse_cpu

TEMPLATE_NAME = "template.html.j2"
MANIFEST_NAME = "MANIFEST.sha256"

#: The columns the report reads from each table; anything else may come and go.
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "findings": ("id", "claim", "verdict", "effect", "lo", "hi", "reference", "reason", "method"),
    "estimates": ("experiment", "variant", "metric", "unit", "point", "lo", "hi", "n", "level", "method", "flag"),
    "runs": ("experiment", "variant", "repeat", "start", "end", "spec_json"),
    "headers": ("experiment", "variant", "go_version"),
    "checks": ("id", "check", "experiment", "expected", "effect", "lo", "hi", "p_holm", "verdict", "reason"),
}
REQUIRED_TABLES = ("findings", "estimates", "runs", "headers")
#: Tables the page shows when they exist (E1's read-back has no estimates).
OPTIONAL_TABLES = ("readback", "checks", "metrics")

VERDICT_CLASSES = {
    "reproduced": "reproduced",
    "contradicted": "contradicted",
    "inconclusive": "inconclusive",
    "not testable here": "untestable",
}


# --------------------------------------------------------------------------
# reading


def read_table(tables_dir: Path, name: str, required: bool = True) -> pd.DataFrame | None:
    path = tables_dir / f"{name}.csv"
    if not path.is_file():
        if required:
            raise ReportError(f"{path}: missing (the analysis writes it; see docs/TABLES.md)")
        return None
    frame = pd.read_csv(path)
    missing = [c for c in REQUIRED_COLUMNS.get(name, ()) if c not in frame.columns]
    if missing:
        raise ReportError(f"{path}: no column {', '.join(missing)} (docs/TABLES.md lists the columns)")
    return frame


def read_tables(tables_dir: Path) -> dict[str, pd.DataFrame]:
    tables = {name: read_table(tables_dir, name) for name in REQUIRED_TABLES}
    for name in OPTIONAL_TABLES:
        frame = read_table(tables_dir, name, required=False)
        if frame is not None:
            tables[name] = frame
    return tables


def raw_log_path(raw_root: Path, experiment: str, variant: str, repeat: int) -> Path:
    return raw_root / experiment / variant / f"rep{int(repeat)}.jsonl"


def read_meta(path: Path) -> dict[str, Any]:
    """The raw log's first record, which the runner always writes as `meta`."""
    try:
        with path.open() as handle:
            first = handle.readline()
    except OSError as exc:
        raise ReportError(f"{path}: cannot read the raw log ({exc.strerror})") from None
    try:
        record = json.loads(first)
    except json.JSONDecodeError:
        raise ReportError(f"{path}: the first line is not JSON; a raw log starts with its meta record") from None
    if record.get("type") != "meta":
        raise ReportError(f"{path}: the first record is {record.get('type')!r}, not 'meta'")
    return record


def read_metas(runs: pd.DataFrame, raw_root: Path) -> list[dict[str, Any]]:
    return [read_meta(raw_log_path(raw_root, r.experiment, r.variant, r.repeat)) for r in runs.itertuples()]


# --------------------------------------------------------------------------
# formatting


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def fmt_number(value: Any) -> str:
    """Three significant digits without scientific notation: 7052, 84.4, 0.312, 0.0451."""
    if is_missing(value):
        return "—"
    x = float(value)
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e6:
        return str(int(x))
    decimals = max(0, 2 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def fmt_interval(point: Any, lo: Any, hi: Any) -> str:
    """'84.4 [80.1, 88.5]'; just the point when there is no interval."""
    if is_missing(lo) or is_missing(hi):
        return fmt_number(point)
    return f"{fmt_number(point)} [{fmt_number(lo)}, {fmt_number(hi)}]"


def text(value: Any) -> str:
    return "" if is_missing(value) else str(value)


def distinct(values: Iterable[Any], *, expect_one: bool = True) -> str:
    """One value, or every value seen; when runs should agree and do not (a kernel changed
    mid-run), say so."""
    seen = list(dict.fromkeys(text(v) for v in values if not is_missing(v) and text(v) != ""))
    if not seen:
        return "—"
    if len(seen) == 1:
        return seen[0]
    return ", ".join(seen) + (" (differs between runs)" if expect_one else "")


# --------------------------------------------------------------------------
# the page's parts, each a pure function of tables


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[str]]
    notes: list[str]


@dataclass(frozen=True)
class Finding:
    id: str
    claim: str
    experiments: list[str]
    verdict: str
    verdict_class: str
    effect: str
    reference: str
    reason: str
    p_holm: str
    a12: str
    method: str


def findings_rows(findings: pd.DataFrame) -> list[Finding]:
    rows = []
    for r in findings.itertuples():
        experiments = [e.strip() for e in text(getattr(r, "experiments", "")).replace(";", ",").split(",") if e.strip()]
        rows.append(Finding(
            id=text(r.id),
            claim=text(r.claim),
            experiments=experiments,
            verdict=text(r.verdict),
            verdict_class=VERDICT_CLASSES.get(text(r.verdict), "unknown"),
            effect=fmt_interval(r.effect, r.lo, r.hi),
            reference=text(r.reference),
            reason=text(r.reason),
            p_holm=fmt_number(getattr(r, "p_holm", math.nan)),
            a12=fmt_number(getattr(r, "a12", math.nan)),
            method=text(r.method),
        ))
    return rows


def checks_table(checks: pd.DataFrame | None) -> Table | None:
    """Every check behind the findings (checks.csv): what was compared, against what, and why that threshold."""
    if checks is None or checks.empty:
        return None
    rows = [
        [text(r.id), text(r.check), text(r.experiment), text(r.expected), fmt_interval(r.effect, r.lo, r.hi),
         fmt_number(r.p_holm), text(r.verdict), text(r.reason), text(getattr(r, "why", ""))]
        for r in checks.itertuples()
    ]
    columns = ["finding", "check", "experiment", "expected", "effect [CI]", "p (Holm)", "verdict", "reason", "why"]
    return Table(columns, rows, [])


def verdict_counts(findings: list[Finding]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.verdict] = counts.get(f.verdict, 0) + 1
    return list(counts.items())


def flatten_spec(spec: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'app': {'limit': 2}} -> {'app limit': 2}: nested pod settings become columns."""
    flat: dict[str, Any] = {}
    for key, value in spec.items():
        name = f"{prefix} {key}".strip()
        if isinstance(value, Mapping):
            flat.update(flatten_spec(value, name))
        else:
            flat[name] = value
    return flat


def setting_text(column: str, value: Any) -> str:
    if value is None:
        return "none" if column.split()[-1] in ("limit", "request") else "—"
    if column.split()[-1] in ("limit", "request"):
        return format_cpu(parse_cpu(value, column))
    return str(value)


def variant_order(runs: pd.DataFrame, experiment: str, design: Design | None) -> list[str]:
    """The design's order of variants, then any variant that ran but the design does not name."""
    ran = list(dict.fromkeys(runs.loc[runs["experiment"] == experiment, "variant"]))
    planned = list(design.experiments[experiment].variants) if design and experiment in design.experiments else []
    return [v for v in planned if v in ran] + [v for v in ran if v not in planned]


def settings_table(runs: pd.DataFrame, experiment: str, order: list[str]) -> Table:
    """Each variant's parameters as they ran (runs.csv spec_json) and its number of runs."""
    mine = runs[runs["experiment"] == experiment]
    specs = {v: flatten_spec(json.loads(mine.loc[mine["variant"] == v, "spec_json"].iloc[0])) for v in order}
    columns = list(dict.fromkeys(key for spec in specs.values() for key in spec))
    rows = [
        [v, *(setting_text(c, specs[v][c]) if c in specs[v] else "—" for c in columns),
         str(int((mine["variant"] == v).sum()))]
        for v in order
    ]
    return Table(["variant", *columns, "runs"], rows, [])


@dataclass(frozen=True)
class EstimateRow:
    metric: str
    unit: str
    method: str
    cells: list[str]


@dataclass(frozen=True)
class EstimatesTable:
    variants: list[str]
    rows: list[EstimateRow]
    level: float


def row_flag(flags: pd.Series) -> str:
    """The flag said once for a whole row: the most common one, provided every cell has a flag
    (a cell without one must not look as if it shared the others')."""
    if flags.eq("").any() or flags.empty:
        return ""
    return str(flags.value_counts().index[0])


def estimates_table(estimates: pd.DataFrame, experiment: str, order: list[str]) -> EstimatesTable:
    """Metrics down, variants across; each metric's method (and its flag, when every cell shares it) under its name."""
    mine = estimates[estimates["experiment"] == experiment].assign(flag=lambda d: d["flag"].fillna(""))
    variants = [v for v in order if v in set(mine["variant"])]
    rows = []
    for metric, group in mine.groupby("metric", sort=False):
        by_variant = {r.variant: r for r in group.itertuples()}
        shared_flag = row_flag(group["flag"])
        cells = []
        for v in variants:
            r = by_variant.get(v)
            if r is None:
                cells.append("—")
                continue
            cell = fmt_interval(r.point, r.lo, r.hi)
            cells.append(cell + (f" ({r.flag})" if r.flag and r.flag != shared_flag else ""))
        method = " / ".join(dict.fromkeys(text(m) for m in group["method"]))
        rows.append(EstimateRow(text(metric), text(group["unit"].iloc[0]),
                                method + (f"; {shared_flag}" if shared_flag else ""), cells))
    levels = mine["level"].dropna()
    return EstimatesTable(variants, rows, float(levels.iloc[0]) if len(levels) else math.nan)


READBACK_COLUMNS = {
    "variant": "variant", "level": "level", "path": "cgroup", "design_quota_us": "design quota µs",
    "actual_quota_us": "read quota µs", "design_period_us": "design period µs", "actual_period_us": "read period µs",
    "design_weight": "design weight", "actual_weight": "read weight", "design_shares": "design shares",
    "actual_shares": "read shares", "actual_cpus": "cpus", "mismatches": "mismatches", "error": "error",
    "formula": "how the design value was computed",
}


READBACK_EXPERIMENTS = frozenset({"E1", "E4"})


def readback_rows(readback: pd.DataFrame | None, experiment: str) -> pd.DataFrame:
    if readback is None:
        return pd.DataFrame()
    return readback[readback["experiment"] == experiment]


def readback_table(readback: pd.DataFrame | None, experiment: str) -> Table | None:
    """What the design wrote at each cgroup level next to what was read back (E1's result)."""
    mine = readback_rows(readback, experiment)
    if mine.empty:
        return None
    if "repeat" in mine.columns:
        mine = mine[mine["repeat"] == mine["repeat"].min()]  # a deterministic readout: the first repeat shows it
    columns = [c for c in READBACK_COLUMNS if c in mine.columns and (c in ("variant", "level") or mine[c].notna().any())]
    rows = [[fmt_cell(getattr(r, c)) for c in columns] for r in mine.itertuples()]
    notes = ["Levels without design values (run-root, host-root) are the ancestors of the run, shown as read."]
    return Table([READBACK_COLUMNS[c] for c in columns], rows, notes)


def readback_summary(readback: pd.DataFrame | None, experiment: str) -> str:
    """One sentence on the read-back check of an experiment whose result is not the read-back itself."""
    mine = readback_rows(readback, experiment)
    if mine.empty:
        return ""
    bad = mine[mine["mismatches"].notna() & (mine["mismatches"].astype(str) != "")]
    runs = mine.groupby(["variant", "repeat"]).ngroups if "repeat" in mine.columns else mine["variant"].nunique()
    opening = f"Before measuring, every run read back its cgroup settings: {len(mine)} levels in {runs} runs, "
    if bad.empty:
        return opening + "all as designed."
    listed = "; ".join(f"{r.variant} rep{r.repeat} {r.level}: {r.mismatches}" for r in bad.head(5).itertuples())
    return opening + f"{len(bad)} not as designed ({listed}{'; ...' if len(bad) > 5 else ''})."


def fmt_cell(value: Any) -> str:
    if is_missing(value):
        return ""
    if isinstance(value, float):
        return fmt_number(value)
    return str(value)


@dataclass(frozen=True)
class FigureView:
    name: str
    title: str
    svg: str
    caption: str


def figure_views(experiment: str, figures_dir: Path, estimates: pd.DataFrame, runs: pd.DataFrame) -> list[FigureView]:
    views = []
    for spec in FIGURES.values():
        if spec.experiment != experiment:
            continue
        path = figures_dir / f"{spec.name}.svg"
        if not path.is_file():
            raise ReportError(f"{path}: missing; run `python -m throttlelab.figures.plots --figure {spec.name}` (the plot rules do)")
        views.append(FigureView(spec.name, spec.title, path.read_text(), spec.caption(estimates, runs)))
    return views


@dataclass(frozen=True)
class RawLink:
    label: str
    href: str


def relative_href(target: Path, page_dir: Path) -> str:
    return Path(os.path.relpath(target.resolve(), page_dir.resolve())).as_posix()


def raw_links(runs: pd.DataFrame, experiment: str, order: list[str], raw_root: Path, page_dir: Path) -> list[tuple[str, list[RawLink]]]:
    mine = runs[runs["experiment"] == experiment]
    out = []
    for variant in order:
        reps = sorted(int(r) for r in mine.loc[mine["variant"] == variant, "repeat"])
        out.append((variant, [RawLink(f"rep{r}", relative_href(raw_log_path(raw_root, experiment, variant, r), page_dir))
                              for r in reps]))
    return out


def fmt_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024**2:
        return f"{size / 1024:.1f} KiB"
    return f"{size / 1024**2:.1f} MiB"


def table_links(tables_dir: Path, page_dir: Path) -> list[tuple[str, str, str]]:
    """(name, href, size) of every tidy table, so readers can start from the data."""
    return [(p.name, relative_href(p, page_dir), fmt_size(p.stat().st_size)) for p in sorted(tables_dir.glob("*.csv"))]


def repeats_text(runs: pd.DataFrame, order_of_experiments: list[str]) -> str:
    parts = []
    for experiment in order_of_experiments:
        per_variant = runs[runs["experiment"] == experiment].groupby("variant").size()
        if len(per_variant):
            low, high = int(per_variant.min()), int(per_variant.max())
            parts.append(f"{experiment} {low}" if low == high else f"{experiment} {low}–{high}")
    return ", ".join(parts)


def environment_rows(metas: list[dict[str, Any]], runs: pd.DataFrame, headers: pd.DataFrame,
                     design: Design, experiments: list[str]) -> list[tuple[str, str]]:
    """The machine and software the runs saw, straight from the raw logs' meta records."""
    env = [m.get("environment", {}) for m in metas]
    caps = [m.get("capabilities", {}) for m in metas]
    cpus = distinct(e.get("cpu_count") for e in env)
    usable = distinct(e.get("usable_cpus") for e in env)
    # Software versions a backend reports (docker: Docker engine, containerd, runc), one row each.
    versions = list(dict.fromkeys(name for e in env for name in (e.get("versions") or {})))
    return [
        ("Backend", distinct(m.get("backend") for m in metas)),
        *((name, distinct((e.get("versions") or {}).get(name) for e in env)) for name in versions),
        ("Runtime conversion", distinct(e.get("runtime_conversion", m.get("runtime")) for e, m in zip(env, metas))
         + " (how CPU shares become cgroup v2 weights, SPEC §2)"),
        ("Kernel", distinct(e.get("kernel") for e in env)),
        ("cgroup version", distinct(e.get("cgroup_version", c.get("cgroup_version")) for e, c in zip(env, caps))),
        ("CPU model", distinct(e.get("cpu_model") for e in env)),
        ("CPUs", cpus if usable in (cpus, "—") else f"{cpus} ({usable} usable by the lab)"),
        ("Go version", distinct(headers["go_version"])),
        ("Module lines", distinct(headers["variant_build"], expect_one=False) if "variant_build" in headers else "—"),
        ("Profile", f"{design.profile}: {design.description.strip()}"),
        ("Repeats", repeats_text(runs, experiments)),
        ("Confidence level", f"{design.confidence:.0%}"),
        ("Measured", f"{min(runs['start'])} to {max(runs['end'])} (UTC), {len(runs)} runs"),
        ("Seed", str(design.seed)),
    ]


def generator_table(metrics: pd.DataFrame | None, experiment: str, order: list[str]) -> Table | None:
    """The load generator's health: every run's send lateness p99, a run above the bar flagged suspect."""
    if metrics is None:
        return None
    rows = lateness_rows(metrics, experiment)
    if not rows:
        return None
    by_variant: dict[str, list[tuple[int, float, float, bool]]] = {}
    for variant, repeat, late, errors, suspect in rows:
        by_variant.setdefault(variant, []).append((repeat, late, errors, suspect))
    body = []
    for variant in [v for v in order if v in by_variant] + [v for v in by_variant if v not in order]:
        runs = sorted(by_variant[variant])
        cells = [f"rep{r}: {fmt_number(late)}" + (" SUSPECT" if bad else "") for r, late, _, bad in runs]
        errors = sum(e for _, _, e, _ in runs if math.isfinite(e))
        flagged = sum(bad for *_, bad in runs)
        body.append([variant, ", ".join(cells), fmt_number(errors), f"{flagged} suspect" if flagged else "ok"])
    total = sum(bad for *_, bad in rows)
    note = (f"Send lateness is the actual minus the scheduled send time of each request; a run whose p99 exceeds "
            f"{LATENESS_SUSPECT_MS:g} ms is flagged SUSPECT: its latencies may include the generator's own delay. "
            f"{total} of {len(rows)} runs flagged.")
    return Table(["variant", "send lateness p99 per run (ms)", "/work errors (all runs)", "status"], body, [note])


@dataclass(frozen=True)
class ExperimentSection:
    name: str
    about: str
    scaling: str
    settings: Table
    figures: list[FigureView]
    estimates: EstimatesTable | None
    readback: Table | None
    readback_note: str
    raw: list[tuple[str, list[RawLink]]]
    #: runs with load records: every run's send lateness p99, suspect ones marked (generator_table)
    generator: Table | None = None
    #: paragraphs computed from the tables (plots_services.section_notes)
    notes: tuple[str, ...] = ()


def experiment_sections(tables: Mapping[str, pd.DataFrame], design: Design, figures_dir: Path,
                        raw_root: Path, page_dir: Path) -> list[ExperimentSection]:
    runs, estimates = tables["runs"], tables["estimates"]
    ran = list(dict.fromkeys(runs["experiment"]))
    names = [e for e in design.experiments if e in ran] + [e for e in ran if e not in design.experiments]
    sections = []
    for name in names:
        order = variant_order(runs, name, design)
        exp = design.experiments.get(name)
        has_estimates = (estimates["experiment"] == name).any()
        # E1 IS its read-back and E4's result is every level's weight: both show the whole table;
        # the other experiments only report on their read-back check.
        shows_readback = not has_estimates or name in READBACK_EXPERIMENTS
        sections.append(ExperimentSection(
            name=name,
            about=exp.about if exp else "",
            scaling=exp.scaling.strip() if exp else "",
            settings=settings_table(runs, name, order),
            figures=figure_views(name, figures_dir, estimates, runs),
            estimates=estimates_table(estimates, name, order) if has_estimates else None,
            # An experiment without estimates (E1) IS its read-back; the others only report on it.
            readback=readback_table(tables.get("readback"), name) if shows_readback else None,
            readback_note="" if shows_readback else readback_summary(tables.get("readback"), name),
            raw=raw_links(runs, name, order, raw_root, page_dir),
            generator=generator_table(tables.get("metrics"), name, order),
            notes=tuple(section_notes(name, tables)),
        ))
    return sections


def findings_display(findings: list[Finding]) -> pd.DataFrame:
    """The findings table as the page shows it, for a spreadsheet or Snakemake's report."""
    return pd.DataFrame(
        [(f.id, f.claim, f.verdict, f.effect, f.reference, f.reason, f.p_holm, f.a12, f.method) for f in findings],
        columns=["id", "claim", "verdict", "effect [CI]", "lab reference", "reason", "p (Holm)", "A12", "method"],
    )


def estimates_display(estimates: pd.DataFrame) -> pd.DataFrame:
    """Every estimate in one long table, formatted as on the page."""
    rows = estimates.assign(flag=estimates["flag"].fillna(""))
    return pd.DataFrame({
        "experiment": rows["experiment"],
        "metric": rows["metric"],
        "unit": rows["unit"],
        "variant": rows["variant"],
        "estimate [CI]": [fmt_interval(r.point, r.lo, r.hi) for r in rows.itertuples()],
        "runs": rows["n"],
        "flag": rows["flag"],
        "method": rows["method"],
    })


# --------------------------------------------------------------------------
# the page


def config_text(config: Mapping[str, Any], design: Design) -> tuple[str, str]:
    """The effective config (with command-line overrides) and the profile file, as YAML text."""
    return yaml.safe_dump(dict(config), sort_keys=False), design.profile_path.read_text()


def render_page(context: Mapping[str, Any], template_dir: Path) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a misspelt name in the template fails the build, not the reader
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template(TEMPLATE_NAME).render(**context)


def build_context(tables_dir: Path, raw_root: Path, figures_dir: Path, config: Mapping[str, Any],
                  design: Design, page_dir: Path) -> dict[str, Any]:
    tables = read_tables(tables_dir)
    runs = tables["runs"]
    if runs.empty:
        raise ReportError(f"{tables_dir / 'runs.csv'}: no runs to report")
    sections = experiment_sections(tables, design, figures_dir, raw_root, page_dir)
    findings = findings_rows(tables["findings"])
    effective_config, profile_yaml = config_text(config, design)
    backend = distinct(runs["backend"]) if "backend" in runs else design.backend
    return {
        "title": f"throttlelab: {Path(design.profile).stem} profile on the {backend} backend",
        "backend": backend,
        "design": design,
        "findings": findings,
        "verdict_counts": verdict_counts(findings),
        "checks": checks_table(tables.get("checks")),
        "sections": sections,
        "environment": environment_rows(read_metas(runs, raw_root), runs, tables["headers"], design,
                                        [s.name for s in sections]),
        "tables": table_links(tables_dir, page_dir),
        "effective_config": effective_config,
        "profile_yaml": profile_yaml,
        "profile_file": design.profile_path.name,
    }


def write_atomically(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(content)
    tmp.replace(path)  # never leave half a file behind


def render_report(tables_dir: Path, raw_root: Path, figures_dir: Path, config: Mapping[str, Any], out: Path,
                  findings_table: Path | None = None, estimates_table_path: Path | None = None,
                  project: Path = Path(".")) -> Path:
    """Write the self-contained report page (and, if asked, its two tables as CSV); returns the page.

    ``project`` is the checkout holding config/ and report/ (the template)."""
    design = load_design(dict(config), project / "config")
    context = build_context(tables_dir, raw_root, figures_dir, config, design, out.parent)
    write_atomically(out, render_page(context, project / "report"))
    if findings_table is not None:
        write_atomically(findings_table, findings_display(context["findings"]).to_csv(index=False))
    if estimates_table_path is not None:
        estimates = read_table(tables_dir, "estimates")
        write_atomically(estimates_table_path, estimates_display(estimates).to_csv(index=False))
    return out


# --------------------------------------------------------------------------
# publish: one archive with a checksum manifest


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def archive_files(report_dir: Path, tables_dir: Path, raw_root: Path) -> list[Path]:
    """Exactly what the page shows or links: itself, its figures and tables, the tidy tables and
    the raw logs of the runs in runs.csv (not whatever else an earlier profile left on disk)."""
    runs = read_table(tables_dir, "runs")
    experiments = set(runs["experiment"])
    files = [report_dir / "index.html"]
    files += [p for p in (report_dir / "findings_table.csv", report_dir / "estimates_table.csv") if p.is_file()]
    files += [report_dir / "figures" / f"{s.name}.svg" for s in FIGURES.values() if s.experiment in experiments]
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


def publish(results: Path, report_dir: Path, tables_dir: Path, raw_root: Path, config: Mapping[str, Any],
            out: Path, project: Path = Path(".")) -> Path:
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
# command line


def config_arg(value: str) -> dict[str, Any]:
    try:
        config = json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--config-json is not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise argparse.ArgumentTypeError("--config-json must be a JSON object (Snakemake's config)")
    return config


def render_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m throttlelab.report.page", description="Render the HTML report.")
    p.add_argument("--tables", required=True, type=Path, help="directory of the tidy tables (docs/TABLES.md)")
    p.add_argument("--raw-root", required=True, type=Path, help="results/<backend>/raw")
    p.add_argument("--figures", required=True, type=Path, help="directory of the figures' SVG files")
    p.add_argument("--config-json", type=config_arg, default={}, help="Snakemake's config as JSON (default: config.yaml defaults)")
    p.add_argument("--out", required=True, type=Path, help="the page to write, e.g. results/report/index.html")
    p.add_argument("--findings-table", type=Path, help="also write the findings table as shown, as CSV")
    p.add_argument("--project", type=Path, default=Path("."), help="the checkout holding config/ and report/ (default: .)")
    p.add_argument("--estimates-table", type=Path, help="also write every estimate as shown, as CSV")
    return p


def publish_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m throttlelab.report.page publish",
                                description="Pack the report, tables, raw logs and config with a SHA-256 manifest.")
    p.add_argument("--results", required=True, type=Path, help="the results directory every path lies under")
    p.add_argument("--report", required=True, type=Path, help="the report directory (index.html, figures/)")
    p.add_argument("--tables", required=True, type=Path)
    p.add_argument("--raw-root", required=True, type=Path)
    p.add_argument("--config-json", type=config_arg, default={})
    p.add_argument("--project", type=Path, default=Path("."), help="the checkout holding config/ (default: .)")
    p.add_argument("--out", required=True, type=Path, help="the archive, e.g. results/throttlelab-report-local-ci.tar.gz")
    return p


def verify_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m throttlelab.report.page verify",
                                description="Check an unpacked archive against its MANIFEST.sha256.")
    p.add_argument("root", type=Path)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and argv[0] in ("render", "publish", "verify") else "render"
    rest = argv[1:] if argv and argv[0] == command else argv
    try:
        if command == "publish":
            a = publish_parser().parse_args(rest)
            out = publish(a.results, a.report, a.tables, a.raw_root, a.config_json, a.out, a.project)
            print(f"throttlelab.report.page: wrote {out} and {out}.sha256")
        elif command == "verify":
            problems = verify_manifest(verify_parser().parse_args(rest).root)
            for problem in problems:
                print(problem, file=sys.stderr)
            return 1 if problems else 0
        else:
            a = render_parser().parse_args(rest)
            out = render_report(a.tables, a.raw_root, a.figures, a.config_json, a.out,
                                a.findings_table, a.estimates_table, a.project)
            print(f"throttlelab.report.page: wrote {out}")
    except (ReportError, ConfigError) as exc:
        print(f"throttlelab.report.page: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
