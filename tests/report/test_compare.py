"""The comparison of several runs: the matrix and the reasons runs disagree (report/comparison.py), the plot of a
finding across runs (figures/compare_forest.py), published archives checked before use (publish.read_archive),
and the page itself, from folders of this checkout and archives made by publish, in headless Chromium.

The runs are the fixture tables (a `ci` run on 2 CPUs) copied and changed by the tests: another backend and
kernel, other verdicts, another threshold; setup.csv is written by the analysis's own function."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pandas as pd
import pytest

from throttlelab.analysis import report_statistics, tidy
from throttlelab.errors import ReportError
from throttlelab.figures import compare_forest, forest, registry
from throttlelab.model import results_layout as layout
from throttlelab.report import compare_page, comparison, publish
from throttlelab.report import page as report

from conftest import PROJECT
from conftest import snakemake as run_snakemake
from test_report import FIXTURES, chromium_or_skip, drawn_figures, open_in_chromium

DOCKER_VERSIONS = {
    "env.versions.Docker engine": "27.3.1",
    "env.versions.containerd": "1.7.22",
    "env.versions.runc": "1.1.14",
}


# --------------------------------------------------------------------------
# runs made from the fixture tables


def make_run(
    results: Path,
    backend: str,
    profile: str,
    *,
    kernel: str | None = None,
    cpus: int | None = None,
    facts: dict[str, str] | None = None,
    verdicts: dict[str, tuple[str, str]] | None = None,
    checks: dict[tuple[str, str], dict] | None = None,
) -> Path:
    """results/<backend>/tables: the fixture tables with another backend, kernel, CPUs and runtime facts, some
    findings' verdicts (id -> (verdict, reason)) and some checks' columns changed; setup.csv written as the
    analysis writes it."""
    tables = results / backend / "tables"
    shutil.copytree(FIXTURES / "tables", tables)
    environment = tidy.read_table(tables / "environment.csv", "environment")
    environment["backend"] = backend
    if kernel:
        environment["kernel"] = kernel
    if cpus:
        environment["cpu_count"] = cpus
    for column, value in (facts or {}).items():
        environment[column] = value
    environment.to_csv(tables / "environment.csv", index=False)
    findings = pd.read_csv(tables / "findings.csv")
    for finding, (verdict, reason) in (verdicts or {}).items():
        findings.loc[findings["id"] == finding, ["verdict", "reason", "headline"]] = [verdict, reason, reason]
    findings.to_csv(tables / "findings.csv", index=False)
    frame = pd.read_csv(tables / "checks.csv")
    for (finding, check), changes in (checks or {}).items():
        where = (frame["id"] == finding) & (frame["check"] == check)
        assert where.any(), (finding, check)
        for column, value in changes.items():
            frame.loc[where, column] = value
    frame.to_csv(tables / "checks.csv", index=False)
    for (finding, _check), changes in (checks or {}).items():
        if finding in (verdicts or {}) and "effect" in changes:  # the check that now decides: its numbers
            findings.loc[findings["id"] == finding, ["effect", "lo", "hi"]] = [
                changes[k] for k in ("effect", "lo", "hi")
            ]
    findings.to_csv(tables / "findings.csv", index=False)
    runs = tidy.read_table(tables / "runs.csv", "runs")
    report_statistics.setup_table(environment, runs, profile, 0.95).to_csv(tables / "setup.csv", index=False)
    return results / backend


F1_FIRST = ("F1", "p50_wall_ms limit1 / nolimit")


def docker_run(results: Path) -> Path:
    """F1 reproduced where the fixture's is inconclusive (its first check's interval clears 1.12), F2 not testable."""
    return make_run(
        results,
        "docker",
        "ci",
        kernel="6.12.9",
        facts=DOCKER_VERSIONS,
        verdicts={"F1": ("reproduced", "every decisive check holds"), "F2": ("not testable here", "needs cgroup v2")},
        checks={F1_FIRST: {"verdict": "reproduced", "lo": 1.8, "effect": 2.0, "hi": 2.3}},
    )


def kind_run(results: Path) -> Path:
    """F1 contradicted against a threshold derived for a 10-CPU node (1.38 where 2 CPUs give 1.12)."""
    return make_run(
        results,
        "kind",
        "quick",
        cpus=10,
        facts={"env.container_runtime": "containerd://2.3.4", "env.runc": "1.4.3", "env.kubelet": "v1.34.11"},
        verdicts={"F1": ("contradicted", "p50_wall_ms limit1 / nolimit is contradicted")},
        checks={F1_FIRST: {"verdict": "contradicted", "effect": 0.9, "lo": 0.8, "hi": 0.99, "threshold": 1.38}},
    )


def vm_run(results: Path) -> Path:
    """The lab-node profile in a 10-vCPU guest with a cgroup v2 kernel of its own (the real comparison's sixth
    kind of run, with the longest kernel name)."""
    return make_run(
        results,
        "vm",
        "lab-node",
        kernel="6.12.48+deb13-cloud-amd64",
        cpus=10,
        facts={"cgroup_version": "2"},
        verdicts={"F5": ("reproduced", "every decisive check holds")},
    )


def run_tables(folder: Path, label: str) -> comparison.RunTables:
    tables = folder / "tables"
    return comparison.RunTables(
        label=label,
        source=str(folder),
        setup=compare_page.run_setup(tables),
        findings=pd.read_csv(tables / "findings.csv"),
        checks=pd.read_csv(tables / "checks.csv"),
    )


@pytest.fixture
def three(tmp_path) -> list[comparison.RunTables]:
    local = make_run(tmp_path / "a", "local", "ci")
    return [
        run_tables(local, "local · ci"),
        run_tables(docker_run(tmp_path / "b"), "docker · ci"),
        run_tables(kind_run(tmp_path / "c"), "kind · quick"),
    ]


# --------------------------------------------------------------------------
# the matrix and the disagreements (pure functions)


def test_the_matrix_has_a_row_per_finding_a_cell_per_run_and_the_labs_own_result(three):
    rows = comparison.matrix(three)
    assert [r.finding for r in rows] == list(pd.read_csv(FIXTURES / "tables" / "findings.csv")["id"])
    f1 = rows[0]
    assert [c.verdict for c in f1.cells] == ["inconclusive", "reproduced", "contradicted"]
    assert f1.cells[0].estimate == "2.18 [1.97, 2.41]" and f1.cells[0].level == "95%"
    assert f1.lab.startswith("claimed; the lab measured p50 limit 1 / none = 84.4 / 34.3")
    assert f1.held == "held on docker · ci; not on local · ci (inconclusive), kind · quick (contradicted)"
    assert f1.held_count == "held on 1 of 3 runs"
    assert [c.held for c in f1.cells] == [False, True, False]
    assert f1.cells[2].estimate == "0.900 [0.800, 0.990]"  # the check that decides it there
    f12 = next(r for r in rows if r.finding == "F12")
    assert f12.ours and f12.lab.startswith("not a claim of the lab")


def test_one_run_is_called_one_run_in_the_title(three):
    assert compare_page.build_context(three[:1])["title"] == "throttlelab: 1 run compared"
    assert compare_page.build_context(three)["title"] == "throttlelab: 3 runs compared"


def test_a_finding_one_run_lacks_is_not_evaluated_there(three):
    three[1] = comparison.RunTables(
        three[1].label, three[1].source, three[1].setup, three[1].findings[three[1].findings["id"] != "F3"]
    )
    f3 = next(r for r in comparison.matrix(three) if r.finding == "F3")
    assert f3.cells[1] is None and "docker · ci (not evaluated)" in f3.held
    assert f3.held_count == "held on 0 of 3 runs"  # a run without the finding counts, as not held


def test_runs_that_agree_are_no_disagreement_and_each_reason_names_both_runs(three):
    found = {d.finding: d for d in comparison.disagreements(three)}
    assert set(found) == {"F1", "F2"}  # the other findings: the same verdict in every run
    f1 = found["F1"]
    assert f1.verdicts == (
        ("inconclusive", ("local · ci",)),
        ("reproduced", ("docker · ci",)),
        ("contradicted", ("kind · quick",)),
    )
    texts = [r.text for r in f1.reasons]
    assert "different runtime: docker on docker · ci, none (cgroups written by the lab) on local · ci" in texts
    assert "different runtime: containerd on kind · quick, none (cgroups written by the lab) on local · ci" in texts
    assert "different kernel: 6.12.9 on docker · ci, 6.1.0-28-cloud-amd64 on local · ci" in texts
    assert "different CPUs: 10 on kind · quick, 2 on local · ci" in texts
    assert "different profile: quick on kind · quick, ci on local · ci" in texts
    # the same check against the same threshold in docker and local; against 1.38 on the 10-CPU run
    (estimate,) = [r.text for r in f1.reasons if r.kind == "estimate"]
    assert estimate.startswith("p50_wall_ms limit1 / nolimit: reproduced on docker · ci (2")
    assert "inconclusive on local · ci (2.18 [1.97, 2.41] 95% R = 3 vs 3, against > 1.1" in estimate
    assert estimate.endswith("the same threshold: the estimates differ")
    assert [(a.run, a.reference) for a in f1.runs] == [("docker · ci", "local · ci"), ("kind · quick", "local · ci")]
    assert "different CPUs: 10 on kind · quick, 2 on local · ci" not in [r.text for r in f1.runs[0].reasons]
    (threshold,) = [r.text for r in f1.reasons if r.kind == "threshold"]
    assert "contradicted on kind · quick" in threshold and "against > 1.38" in threshold
    assert threshold.endswith("the thresholds differ (each derived for its run's node)")


def test_a_run_where_the_finding_was_not_testable_says_why(three):
    f2 = next(d for d in comparison.disagreements(three) if d.finding == "F2")
    # the fixture's runs predate F2's premise (the threads' CPUs), so it is undecided there
    assert f2.verdicts == (("inconclusive", ("local · ci", "kind · quick")), ("not testable here", ("docker · ci",)))
    assert comparison.Reason("not testable", "not testable on docker · ci: needs cgroup v2") in f2.reasons


def test_a_premise_that_held_in_one_run_and_not_the_other_is_a_reason(tmp_path):
    premise = ("F6", "avg_cores clumped-limit")
    held = make_run(
        tmp_path / "a",
        "local",
        "ci",
        verdicts={"F6": ("reproduced", "every decisive check holds")},
        checks={premise: {"verdict": "reproduced"}},
    )
    failed = make_run(tmp_path / "b", "local", "ci", verdicts={"F6": ("not testable here", "its premise failed")})
    runs = [run_tables(held, "first"), run_tables(failed, "second")]
    f6 = next(d for d in comparison.disagreements(runs) if d.finding == "F6")
    kinds = [r.kind for r in f6.reasons]
    assert "runtime" not in kinds and "kernel" not in kinds  # the same setup: none of its fields is a reason
    assert (
        comparison.Reason(
            "premise", "premise avg_cores clumped-limit: not testable here on second, reproduced on first"
        )
        in f6.reasons
    )


def test_two_runs_of_the_same_backend_and_profile_get_labels_that_tell_them_apart():
    setups = [{"backend": "local", "profile": "ci"}, {"backend": "local", "profile": "ci"}, {"backend": "vm"}]
    labels = compare_page.unique_labels(setups, ["results/local", "local-ci.tar.gz", "results/vm"])
    assert labels == ["local · ci (results/local)", "local · ci (local-ci.tar.gz)", "vm · ?"]
    same = compare_page.unique_labels(setups[:2], ["x", "x"])
    assert same == ["local · ci (x) #1", "local · ci (x) #2"]


def test_tables_older_than_setup_csv_still_name_their_environment(tmp_path):
    shutil.copytree(FIXTURES / "tables", tmp_path / "tables")
    setup = compare_page.run_setup(tmp_path / "tables")
    assert (setup["backend"], setup["kernel"], setup["cpus"]) == ("local", "6.1.0-28-cloud-amd64", "2")
    assert setup["profile"].startswith("not recorded")


# --------------------------------------------------------------------------
# the plot of a finding across runs


def test_a_checks_rows_across_runs_share_one_axis_and_keep_their_own_thresholds(three):
    rows = [(run.label, forest.forest_rows(run.checks)) for run in three]
    checks = compare_forest.checks_across_runs(rows, "F1")
    assert [c.check for c in checks] == [
        "p50_wall_ms limit1 / nolimit",
        "p50_wall_ms limit500m / nolimit",
        "p50_wall_ms limit2 / nolimit",
    ]
    assert [label for label, _ in checks[0].rows] == ["local · ci", "docker · ci", "kind · quick"]
    svg = compare_forest.compare_forest_svg("F1", checks)
    assert svg.count('class="forest-row"') == 9 and svg.count('class="check-heading"') == 3
    ticks = [float(part.split('"')[0]) for part in svg.split('class="threshold" x1="')[1:4]]
    assert ticks[0] == ticks[1] < ticks[2]  # 1.12 twice, then 1.38 further right on the same axis
    points = [float(part.split('"')[0]) for part in svg.split('class="point" cx="')[1:4]]
    assert points[2] < points[1] < points[0]  # 0.9 < 2.0 < 2.18 on that axis
    assert "differs between runs for p50_wall_ms limit1 / nolimit" in compare_forest.compare_forest_caption(checks)
    assert "{" not in svg


# --------------------------------------------------------------------------
# published archives, checked before use


def published(results: Path, out: Path, profile: str = "ci") -> Path:
    """An archive made by publish of ``results`` (a run folder ``local`` with its tables), its page rendered from
    them (the figures stand in: an empty SVG each, the page only inlines them)."""
    shutil.copytree(FIXTURES / "report_raw", results / "local" / "raw")
    report_dir = results / "report" / f"local-{profile}"
    (report_dir / "figures").mkdir(parents=True)
    for name in drawn_figures(results / "local" / "tables"):
        (report_dir / "figures" / registry.FIGURES[name].svg).write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    config = {"profile": profile}
    tables = results / "local" / "tables"
    report.render_report(tables, results / "local" / "raw", report_dir / "figures", config, report_dir / "index.html")
    return publish.publish(results, report_dir, tables, results / "local" / "raw", config, out, PROJECT)


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("archive")
    make_run(root / "results", "local", "ci")
    return published(root / "results", root / "throttlelab-report-local-ci.tar.gz")


def repacked(archive: Path, out: Path, change) -> Path:
    """The archive with ``change(members)`` applied to its members (name inside its folder -> bytes), packed again."""
    read = publish.read_archive(archive)
    members = dict(read.members)
    change(members)
    publish.write_archive(out, read.prefix, members, 0)
    return out


def refusal(path: Path) -> str:
    with pytest.raises(ReportError) as caught:
        publish.read_archive(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    return message.removeprefix(f"{path}: ")


def test_a_published_archive_says_its_format_and_where_its_run_lies(archive):
    read = publish.read_archive(archive)
    assert read.prefix == "throttlelab-report-local-ci"
    assert dict(read.info) == {
        "format": publish.ARCHIVE_FORMAT,
        "backend": "local",
        "profile": "ci",
        "tables": "local/tables",
        "report": "report/local-ci/index.html",
    }
    assert {"local/tables/setup.csv", "local/tables/checks.csv", read.report, publish.FORMAT_NAME} <= set(read.members)


def test_a_changed_byte_inside_is_a_manifest_mismatch(archive, tmp_path):
    def change(members):
        data = bytearray(members["local/tables/findings.csv"])
        data[-3] ^= 1
        members["local/tables/findings.csv"] = bytes(data)

    bad = repacked(archive, tmp_path / "changed.tar.gz", change)
    assert refusal(bad) == "does not match its manifest: local/tables/findings.csv: checksum differs"


def test_a_changed_byte_of_the_file_itself_is_caught_by_its_checksum_or_its_compression(archive, tmp_path):
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    loose = tmp_path / "loose.tar.gz"
    loose.write_bytes(bytes(data))
    assert refusal(loose)  # whichever layer notices first (gzip's CRC, tar's headers, the manifest), one line
    beside = tmp_path / "beside.tar.gz"
    beside.write_bytes(bytes(data))
    Path(f"{beside}.sha256").write_text(Path(f"{archive}.sha256").read_text().replace(archive.name, beside.name))
    assert refusal(beside) == "its checksum differs from beside.tar.gz.sha256: the file changed after publish wrote it"


def test_a_truncated_archive_is_refused_as_truncated(archive, tmp_path):
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size * 2 // 3])
    assert refusal(cut).startswith("truncated")


def test_an_archive_of_another_format_version_is_refused(archive, tmp_path):
    def version_2(members):
        info = json.loads(members[publish.FORMAT_NAME])
        members[publish.FORMAT_NAME] = json.dumps({**info, "format": 2}).encode()
        del members[publish.MANIFEST_NAME]
        members[publish.MANIFEST_NAME] = publish.manifest_text(members).encode()

    newer = repacked(archive, tmp_path / "newer.tar.gz", version_2)
    assert refusal(newer) == f"archive format version 2; this throttlelab reads version {publish.ARCHIVE_FORMAT}"

    def before_versions(members):
        del members[publish.FORMAT_NAME]
        del members[publish.MANIFEST_NAME]
        members[publish.MANIFEST_NAME] = publish.manifest_text(members).encode()

    older = repacked(archive, tmp_path / "older.tar.gz", before_versions)
    assert refusal(older).startswith("archive format version 0 (no ARCHIVE.json")


def test_an_archive_with_a_path_outside_its_folder_is_refused(tmp_path):
    out = tmp_path / "escape.tar.gz"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("x/../../evil.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"!"))
    out.write_bytes(gzip.compress(buffer.getvalue()))
    assert "a path outside its own folder" in refusal(out)


# --------------------------------------------------------------------------
# the page: this checkout's runs and archives, and nothing written when one is broken


@pytest.fixture
def checkout(tmp_path, archive) -> dict:
    """A results folder with four runs, one archive published here and one copied from another clone: six
    columns, as many as the real comparison has."""
    results = tmp_path / "results"
    runs = [make_run(results, "local", "ci"), docker_run(results), kind_run(results), vm_run(results)]
    clone = tmp_path / "other-clone"
    other = make_run(clone / "results", "local", "quick", verdicts={"F3": ("reproduced", "every decisive check holds")})
    assert other.is_dir()
    elsewhere = published(clone / "results", clone / "results" / "throttlelab-report-local-quick.tar.gz", "quick")
    copied = tmp_path / "downloads" / elsewhere.name
    copied.parent.mkdir()
    shutil.copy(elsewhere, copied)
    return {"results": results, "runs": runs, "archives": [archive, copied]}


def test_one_page_shows_every_run_and_archive_with_links_that_resolve(checkout):
    out = checkout["results"] / "compare" / "index.html"
    started = time.perf_counter()
    compare_page.compare(checkout["runs"], checkout["archives"], out, PROJECT, checkout["results"] / "report")
    assert time.perf_counter() - started < 10
    html = out.read_text()
    for label in (
        "local · ci (results/local)",
        "docker · ci",
        "kind · quick",
        "local · ci (throttlelab-report-local-ci.tar.gz)",
    ):
        assert label in html, label
    assert "local · quick" in html  # the archive from the other clone
    assert "<title>throttlelab: 6 runs compared</title>" in html
    assert html.count('class="finding-row"') == 17 and html.count('class="plot compare-forest"') >= 1
    assert 'id="disagreement-F1"' in html and 'id="disagreement-F3"' in html
    for href in ("archives/throttlelab-report-local-ci/report/local-ci/index.html",
                 "archives/throttlelab-report-local-quick/report/local-quick/index.html"):  # fmt: skip
        assert f'href="{href}' in html and (out.parent / href).is_file(), href
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


@pytest.mark.parametrize("broken", ["changed", "truncated", "format"])
def test_a_broken_archive_stops_compare_with_one_line_and_writes_nothing(checkout, broken, tmp_path, archive):
    if broken == "truncated":
        bad = tmp_path / "bad.tar.gz"
        bad.write_bytes(archive.read_bytes()[:-200])
    elif broken == "changed":
        bad = repacked(archive, tmp_path / "bad.tar.gz", lambda m: m.update({"local/tables/checks.csv": b"id\n"}))
    else:
        bad = repacked(
            archive,
            tmp_path / "bad.tar.gz",
            lambda m: m.update({publish.FORMAT_NAME: m[publish.FORMAT_NAME].replace(b'"format": 1', b'"format": 7')}),
        )
    out = checkout["results"] / "compare" / "index.html"
    command = [sys.executable, "-m", "throttlelab", "compare", "--out", str(out), "--project", str(PROJECT)]
    command += [f"--run={r}" for r in checkout["runs"]] + [f"--archive={a}" for a in [*checkout["archives"], bad]]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"throttlelab compare: {bad}: "), done.stderr
    assert {"changed": "checksum differs", "truncated": "truncated", "format": "format version 7"}[broken] in lines[0]
    assert not (checkout["results"] / "compare").exists()  # neither the page nor an unpacked archive


# --------------------------------------------------------------------------
# the page in a real browser


PAGE_WIDTH = """
(() => {
  const wide = [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 0.5)
    .map(e => e.tagName + (e.id ? '#' + e.id : ''));
  const svg = [...document.querySelectorAll('figure.compare-forest svg')].map(e => e.getBoundingClientRect().width);
  const lines = e => { const s = getComputedStyle(e);
    return (e.clientHeight - parseFloat(s.paddingTop) - parseFloat(s.paddingBottom)) / parseFloat(s.lineHeight); };
  const headings = [...document.querySelectorAll('#matrix-table thead th.run')].map(e => ({
    text: e.textContent.trim(), width: e.getBoundingClientRect().width, lines: lines(e)}));
  const first = document.querySelector('#matrix-table tr.finding-row').getBoundingClientRect();
  return {width: innerWidth, height: innerHeight, scrollWidth: document.documentElement.scrollWidth,
          wide: wide.slice(0, 10), rows: document.querySelectorAll('#matrix-table tr.finding-row').length, svg: svg,
          headings: headings, firstRow: {top: first.top, bottom: first.bottom},
          setup: [...document.querySelectorAll('#matrix-table tr.setup th')].map(e => e.textContent.trim())};
})()
"""


@pytest.mark.parametrize("width", [1400, 900])
def test_the_compare_page_renders_in_chromium_and_nothing_overflows_its_width(checkout, width, tmp_path, pytestconfig):
    binary = chromium_or_skip(pytestconfig, "the compare page's browser check")
    out = checkout["results"] / "compare" / "index.html"
    compare_page.compare(checkout["runs"], checkout["archives"], out, PROJECT, checkout["results"] / "report")
    seen, errors, png = open_in_chromium(
        binary, out, tmp_path / "chromium-profile", PAGE_WIDTH, viewport=(width, 900), screenshot=True
    )
    artifact = tmp_path / f"compare-{width}.png"
    artifact.write_bytes(png)
    pytestconfig.pluginmanager.get_plugin("terminalreporter").write_line(f"compare page: {artifact}")

    assert errors == []
    assert seen["rows"] == 17
    assert seen["scrollWidth"] <= seen["width"], seen["wide"]  # nothing overflows the page's width
    assert seen["wide"] == []
    assert seen["svg"] and all(0 < w <= 770 for w in seen["svg"])
    assert artifact.stat().st_size > 10_000
    if width == 1400:  # the six runs and the lab readable at the width the real comparison is read at
        runs = [h for h in seen["headings"] if h["text"] != "finding"]
        assert len(runs) == 7, runs
        assert all(h["width"] >= 140 for h in runs), runs  # no column squeezed to a few characters
        assert all(h["lines"] <= 4.01 for h in seen["headings"]), seen["headings"]  # short headings
        assert seen["setup"] == [words for _, words in comparison.SETUP_FIELDS] + ["from"]  # the setup below them
        assert seen["firstRow"]["bottom"] <= seen["height"], seen["firstRow"]  # headings, setup and a row at once


# --------------------------------------------------------------------------
# the rule: the runs are read as they are


def test_by_default_every_backend_folder_with_findings_is_compared(tmp_path):
    make_run(tmp_path, "local", "ci")
    make_run(tmp_path, "docker", "ci")
    (tmp_path / "report" / "tables").mkdir(parents=True)  # a folder without findings.csv is no run
    assert layout.compare_runs(tmp_path) == [str(tmp_path / "docker"), str(tmp_path / "local")]
    assert layout.compare_runs(tmp_path, ["vm"]) == [str(tmp_path / "vm")]


def test_the_compare_target_plans_only_itself_whatever_the_config_would_measure(tmp_path, archive):
    """The default config (the quick profile on the local backend) would measure every experiment to make
    results/local/tables; compare reads the tables that are there and plans nothing but itself."""
    make_run(tmp_path / "results", "local", "ci")
    docker_run(tmp_path / "results")
    done = run_snakemake(tmp_path, "-n", "compare", "--config", f"compare={{archives: [{archive}]}}", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    planned = [line.split()[1].rstrip(":") for line in done.stdout.splitlines() if line.startswith("rule ")]
    assert planned == ["compare"], done.stdout
    assert f"--archive {archive}" in done.stdout or str(archive) in done.stdout
