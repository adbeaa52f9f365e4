"""The report stage: the self-contained page (checked in headless Chromium) and the archive.

The page is rendered from hand-made tables in tests/fixtures/tables (a `ci`-shaped
run on 2 CPUs; environment.csv made from the meta lines of tests/fixtures/report_raw,
which stand in for the raw logs the page links and the archive packs); no experiment runs.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tarfile
import tempfile
import time
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from throttlelab.analysis import report_statistics
from throttlelab.analysis.number_format import fmt_interval, fmt_number
from throttlelab.errors import ReportError
from throttlelab.figures import draw, registry
from throttlelab.figures.svg import figure_to_svg
from throttlelab.model.config import load_design
from throttlelab.model.digest import sha256_file
from throttlelab.model.variants import VariantSpec
from throttlelab.report import inputs, publish
from throttlelab.report import cell_format as formatting
from throttlelab.report import page as report

from conftest import PROJECT

FIXTURES = PROJECT / "tests" / "fixtures"
CI_CONFIG = {"profile": "ci"}


# --------------------------------------------------------------------------
# a rendered report in a results/ layout like the pipeline's


def drawn_figures(tables_dir: Path = FIXTURES / "tables") -> list[str]:
    """The figures of the experiments the fixture tables hold (the report shows only those)."""
    ran = set(pd.read_csv(tables_dir / "runs.csv")["experiment"])
    return [entry.name for entry in registry.figures_for(ran)]


def write_figures(tables_dir: Path, figures_dir: Path) -> list[str]:
    tables = {
        name: draw.read_figure_table(name, tables_dir / f"{name}.csv")
        for name in ("rounds", "metrics", "estimates", "runs", "predictions")
    }
    figures_dir.mkdir(parents=True, exist_ok=True)
    for name in drawn_figures(tables_dir):
        entry = registry.FIGURES[name]
        svg = figure_to_svg(draw.draw(name, tables), name, entry.title)
        (figures_dir / entry.svg).write_text(svg)
    return drawn_figures(tables_dir)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report") / "results"
    shutil.copytree(FIXTURES / "tables", root / "local" / "tables")
    shutil.copytree(FIXTURES / "report_raw", root / "local" / "raw")
    write_figures(root / "local" / "tables", root / "report" / "figures")
    report.render_report(
        root / "local" / "tables",
        root / "local" / "raw",
        root / "report" / "figures",
        CI_CONFIG,
        root / "report" / "index.html",
        root / "report" / "findings_table.csv",
        root / "report" / "estimates_table.csv",
    )
    return root


@pytest.fixture(scope="module")
def page(results) -> Path:
    return results / "report" / "index.html"


class PageParser(HTMLParser):
    """Collects what the checks below look at: tags, ids, links, tables and their rows."""

    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.ids: list[str] = []
        self.urls: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.tables: list[str] = []  # id of each table in document order ("" if none)
        self.finding_rows = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        for key in ("src", "href", "xlink:href", "data"):
            if key in attrs:
                self.urls.append((tag, key, attrs[key] or ""))
        if tag == "table":
            self.tables.append(attrs.get("id", ""))
        if tag == "tr" and "finding" in (attrs.get("class") or "").split():
            self.finding_rows += 1


def parse(page: Path) -> PageParser:
    parser = PageParser()
    parser.feed(page.read_text())
    return parser


# --------------------------------------------------------------------------
# the page, read as HTML


def test_the_verdict_summary_comes_first_then_the_findings_table_with_one_row_per_finding(page):
    parsed = parse(page)
    findings = pd.read_csv(FIXTURES / "tables" / "findings.csv")
    assert parsed.tables[:2] == ["verdict-summary", "findings-table"]
    assert parsed.finding_rows == len(findings) == 17  # F1-F11 the lab's, F12-F17 ours
    html = page.read_text()
    assert html.index('id="verdict-summary"') < html.index('id="fig-forest"') < html.index('id="findings-table"')


def test_page_is_self_contained(page):
    parsed = parse(page)
    assert "script" not in parsed.tags and "link" not in parsed.tags and "iframe" not in parsed.tags
    external = [u for u in parsed.urls if u[2].startswith(("http:", "https:", "//", "data:text/html"))]
    assert external == []
    assert "@import" not in page.read_text() and "url(http" not in page.read_text()


def test_every_relative_link_points_at_a_file(page):
    links = [value for tag, key, value in parse(page).urls if tag == "a" and not value.startswith("#")]
    assert any(link.endswith("findings.csv") for link in links)
    assert sum(link.endswith(".jsonl") for link in links) == len(pd.read_csv(FIXTURES / "tables" / "runs.csv"))
    missing = [link for link in links if not (page.parent / urllib.parse.unquote(link)).is_file()]
    assert missing == []


def test_ids_are_unique_across_the_inlined_figures(page):
    ids = parse(page).ids
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert duplicates == []


def test_every_figure_is_inlined_with_its_method_in_the_caption(page):
    html = page.read_text()
    for name in drawn_figures():
        assert f'id="fig-{name}"' in html
    assert "Student t on log per-run p50_wall_ms, R = 3, low n" in html


def test_environment_comes_from_the_environment_table(page):
    html = page.read_text()
    for fact in ("6.1.0-28-cloud-amd64", "Intel(R) Xeon(R) Platinum 8375C", "go1.25.4", "runc-new", "E2a 3"):
        assert fact in html


def test_display_tables_match_the_page(results):
    shown = pd.read_csv(results / "report" / "findings_table.csv")
    assert list(shown["id"]) == [f"F{k}" for k in range(1, 18)]
    assert shown.loc[0, "effect [CI]"] == "2.18 [1.97, 2.41]"  # 1.9746 and 2.4013, rounded outward
    estimates = pd.read_csv(results / "report" / "estimates_table.csv")
    assert len(estimates) == len(pd.read_csv(FIXTURES / "tables" / "estimates.csv"))


# --------------------------------------------------------------------------
# small pure parts


@pytest.mark.parametrize(
    "value, text",
    [
        (7052.5, "7052"),
        (84.37, "84.4"),
        (0.3125, "0.312"),
        (0.04512, "0.0451"),
        (2.0, "2"),
        (0, "0"),
        (float("nan"), "—"),
        (-0.6667, "-0.667"),
        (float("inf"), "∞"),
        (float("-inf"), "−∞"),
    ],
)
def test_numbers_get_three_significant_digits_without_exponents(value, text):
    assert fmt_number(value) == text


def test_an_interval_no_number_of_runs_bounds_prints_its_open_end():
    assert fmt_interval(0, 0, float("inf")) == "0 [0, ∞]"


def test_interval_is_left_out_when_the_table_has_none():
    assert fmt_interval(84.4, 80.12, 88.51) == "84.4 [80.1, 88.5]"
    assert fmt_interval(2.0, float("nan"), float("nan")) == "2"


def test_nested_pod_settings_become_columns():
    spec = {"app": {"request": "500m", "limit": 2}, "sidecar": {"request": "100m", "limit": None}}
    columns = VariantSpec.from_dict("E1", "partial", spec).columns()
    table = report.settings_table(
        pd.DataFrame(
            {"experiment": ["E1"], "variant": ["partial"], "repeat": [0], **{k: [v] for k, v in columns.items()}}
        ),
        "E1",
        ["partial"],
    )
    assert table.columns == ["variant", "app request", "app limit", "sidecar request", "sidecar limit", "runs"]
    assert table.rows == [["partial", "500m", "2", "100m", "none", "1"]]


def test_a_runs_disagreement_is_shown_not_hidden():
    assert formatting.distinct(["6.1.0", "6.1.0"]) == "6.1.0"
    assert formatting.distinct(["6.1.0", "6.5.0"]) == "6.1.0, 6.5.0 (differs between runs)"


def test_a_missing_column_names_the_file_and_the_column(tmp_path):
    tables = tmp_path / "tables"
    shutil.copytree(FIXTURES / "tables", tables)
    pd.read_csv(tables / "findings.csv").drop(columns=["verdict"]).to_csv(tables / "findings.csv", index=False)
    with pytest.raises(ReportError, match=r"findings\.csv: no column verdict"):
        inputs.read_tables(tables)


def test_a_missing_figure_names_the_rule_that_draws_it(tmp_path):
    with pytest.raises(ReportError, match=r"e3_gomaxprocs\.svg: missing; .*the draw_figures rule"):
        report.figure_views("E3", tmp_path / "figures", pd.DataFrame(), pd.DataFrame())


def test_the_page_reads_the_environment_table_not_the_raw_logs(tmp_path):
    # The raw logs' meta lines reach the page through environment.csv (tests/analysis/test_tidy.py
    # names a log without its meta line); without that table there is no page.
    tables = tmp_path / "tables"
    shutil.copytree(FIXTURES / "tables", tables)
    (tables / "environment.csv").unlink()
    with pytest.raises(ReportError, match=r"environment\.csv: missing \(the analysis writes it"):
        inputs.read_tables(tables)


def test_disturbed_runs_are_marked_and_their_attempts_listed(page):
    html = page.read_text()
    assert "<h3>Host interference</h3>" in html
    assert "DISTURBED (kept, marked)" in html  # E2a limit1 rep2, still disturbed after its retries
    assert "rep2.disturbed-1.jsonl" in html and "rep2.disturbed-2.jsonl" in html and "rep0.disturbed-1.jsonl" in html
    assert "1 of 37 runs still disturbed after their retries" in html


def test_interference_of_old_tables_is_said_to_be_missing():
    runs = pd.DataFrame({"experiment": ["E2a"], "variant": ["v"], "repeat": [0]})
    assert report.interference_table(runs, "E2a", ["v"]) is None
    assert report.interference_text(runs).startswith("not recorded")


def test_the_checks_table_shows_requirements_and_derivations(page):
    html = page.read_text()
    assert "<th>unmet requirement</th>" in html and "<th>derivation of the threshold</th>" in html
    assert "a node where the go line can matter" in html  # F5's named requirement on 2 CPUs
    assert "median wall time is" in html  # F1's threshold, derived from the model
    # F2's band, revised after data (6c343fc): the fixture's runs of 2026-11-30 do not judge it; all runs beside
    assert "not testable here (on all runs: inconclusive)" in html and "<th>judged on</th>" in html


def test_a_check_revised_after_data_shows_its_verdict_on_all_runs_beside():
    # the threshold registry's rule (docs/STATISTICS.md §5): judged on the runs made after the revision, both shown
    common = {"experiment": "E2a", "expected": "x < 0.937", "effect": 0.5, "lo": 0.4, "hi": 0.6, "p": 0.01}
    checks = pd.DataFrame(
        [
            {
                **common,
                "id": "F4",
                "check": "throttled_ms limit1-2threads / limit1",
                "verdict": "not testable here",
                "verdict_all_runs": "reproduced",
                "judged_on": "the 0 of 16 runs made at or after its threshold's revision (a5a8721 of 2026-12-02)",
                "reason": "needs runs made after its threshold's revision: none",
            },
            {**common, "id": "F1", "check": "c", "verdict": "reproduced", "verdict_all_runs": "reproduced"},
        ]
    )
    table = report.checks_table(checks)
    col = table.columns.index("verdict")
    assert table.rows[0][col] == "not testable here (on all runs: reproduced)"
    assert table.rows[1][col] == "reproduced"
    judged = table.columns.index("judged on")
    assert table.rows[0][judged].startswith("the 0 of 16 runs") and table.rows[1][judged] == "all runs"
    rows = pd.DataFrame(
        [
            {
                "id": "F4",
                "claim": "c",
                "experiments": "E2a",
                "verdict": "not testable here",
                "verdict_all_runs": "reproduced",
            },
            {"id": "F1", "claim": "c", "experiments": "E2a", "verdict": "reproduced", "verdict_all_runs": "reproduced"},
        ]
    ).assign(effect=1.0, lo=0.9, hi=1.1, reference="", reason="", method="")
    got = report.findings_rows(rows)
    assert (got[0].all_runs, got[1].all_runs) == ("reproduced", "")


def test_the_generator_table_counts_errors_per_run():
    rows = []
    for rep, (late, errors) in enumerate([(0.4, 0.0), (7.5, 3.0)]):
        rows += [
            ("local", "E2b", "clumped-limit", rep, "late_p99_ms", late, "ms", ""),
            ("local", "E2b", "clumped-limit", rep, "work_errors", errors, "count", ""),
        ]
    metrics = pd.DataFrame.from_records(
        rows, columns=["backend", "experiment", "variant", "repeat", "metric", "value", "unit", "note"]
    )
    table = report.generator_table(report_statistics.load_generator_table(metrics), "E2b", ["clumped-limit"])
    assert table.columns[2] == "/work errors per run"
    assert table.rows == [["clumped-limit", "rep0: 0.400, rep1: 7.50 SUSPECT", "rep0: 0, rep1: 3", "1 suspect"]]
    assert "at the client timeout" in table.notes[0]


def test_an_empty_quantile_says_why_in_the_estimates_table():
    estimates = pd.DataFrame(
        [
            {
                "backend": "local",
                "experiment": "E2b",
                "variant": "clumped-limit",
                "metric": "work_p99_ms",
                "unit": "ms",
                "point": float("nan"),
                "lo": float("nan"),
                "hi": float("nan"),
                "n": 5,
                "level": 0.95,
                "scale": "log",
                "method": "not computed in 5 of 5 runs: /work: n too small for p99: 60 requests (needs 368)",
                "flag": "n too small",
            }
        ]
    )
    table = report.estimates_table(estimates, "E2b", ["clumped-limit"])
    (row,) = table.rows
    assert "n too small for p99: 60 requests (needs 368)" in row.method and row.cells == ["—"]


def test_backend_versions_become_rows_of_the_environment(results):
    tables = inputs.read_tables(results / "local" / "tables")
    env = tables["environment"].assign(**{"env.versions.runc": "1.1.12", "env.versions.Docker engine": "27.3.1"})
    design = load_design(dict(CI_CONFIG), PROJECT / "config")
    rows = dict(report.environment_rows(env, tables["runs"], tables["headers"], design, ["E2a"]))
    assert (rows["runc"], rows["Docker engine"], rows["Backend"], rows["CPUs"]) == ("1.1.12", "27.3.1", "local", "2")


def test_the_calibration_the_runs_recorded_is_a_row_of_the_environment(results):
    tables = inputs.read_tables(results / "local" / "tables")
    design = load_design(dict(CI_CONFIG), PROJECT / "config")
    rows = dict(report.environment_rows(tables["environment"], tables["runs"], tables["headers"], design, ["E2a"]))
    assert rows["Calibration"].startswith("none recorded")
    env = tables["environment"].assign(
        **{"env.calibration.quiet_host": "20 s sampled every 0.1 s", "env.calibration.pilot": None}
    )
    env.loc[env.index[0], "env.calibration.pilot"] = "X5: 2.6 ms of CPU per /work request"
    text = dict(report.environment_rows(env, tables["runs"], tables["headers"], design, ["E2a"]))["Calibration"]
    assert text.startswith("pilot: X5: 2.6 ms of CPU per /work request; quiet host: 20 s sampled every 0.1 s")
    assert "never analysed" in text


def test_kinds_node_images_are_rows_of_the_environment(results):
    """kind.node_images and each cluster's node image (the kind backend's environment, flattened into
    environment.csv) are rows; a backend without them (local here) has none."""
    tables = inputs.read_tables(results / "local" / "tables")
    design = load_design(dict(CI_CONFIG), PROJECT / "config")
    plain = dict(report.environment_rows(tables["environment"], tables["runs"], tables["headers"], design, ["E2a"]))
    assert not [label for label in plain if label.startswith("Node image")]
    env = tables["environment"].assign(
        **{
            "env.node_images.setting": "local",
            "env.node_images.new": "built here: throttlelab-node:new-8612cbdcc974 (sha256:0123456789ab), runc 1.4.3",
            "env.node_images.old": "built here: throttlelab-node:old-0e6dfe0ac307 (sha256:ba9876543210), runc 1.3.0",
        }
    )
    rows = report.environment_rows(env, tables["runs"], tables["headers"], design, ["E2a"])
    labels = [label for label, _ in rows]
    at = labels.index("Node images")
    assert labels[at : at + 3] == ["Node images", "Node image (new cluster)", "Node image (old cluster)"]
    assert dict(rows)["Node images"] == "local" and "runc 1.3.0" in dict(rows)["Node image (old cluster)"]


def test_the_seed_on_the_page_is_the_one_the_runs_recorded_not_the_configs(results):
    tables = inputs.read_tables(results / "local" / "tables")
    design = load_design({**CI_CONFIG, "seed": 99}, PROJECT / "config")
    runs = tables["runs"].assign(config_seed=pd.array([20261130] * len(tables["runs"]), dtype="Int64"))
    rows = dict(report.environment_rows(tables["environment"], runs, tables["headers"], design, ["E2a"]))
    assert rows["Seed"].startswith("20261130 (") and "99" not in rows["Seed"]
    runs.loc[runs.index[0], "config_seed"] = pd.NA
    assert report.seed_text(runs).endswith(f"; 1 of {len(runs)} runs do not record it")
    older = tables["runs"].drop(columns=["config_seed"], errors="ignore")
    assert report.seed_text(older) == "not recorded (raw logs that predate it)"


# --------------------------------------------------------------------------
# publish: one archive, a manifest that verifies


def publish_fixture(results: Path, out: Path) -> Path:
    return publish.publish(
        results, results / "report", results / "local" / "tables", results / "local" / "raw", CI_CONFIG, out
    )


def unpack(archive: Path, into: Path) -> Path:
    with tarfile.open(archive) as tar:
        # The "data" filter refuses links and absolute paths; Pythons before 3.11.4 lack it.
        tar.extractall(into, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (root,) = into.iterdir()
    return root


def test_published_archive_verifies_against_its_manifest(results, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764504000")
    archive = publish_fixture(results, tmp_path / "throttlelab-report-local-ci.tar.gz")
    root = unpack(archive, tmp_path / "unpacked")
    assert root.name == "throttlelab-report-local-ci"
    for member in (
        "report/index.html",
        "report/figures/e2a_completion.svg",
        "local/tables/findings.csv",
        "local/raw/E2a/limit1/rep2.jsonl",
        "config/config.yaml",
        "config/profiles/ci.yaml",
    ):
        assert (root / member).is_file(), member
    assert publish.verify_manifest(root) == []
    if shutil.which("sha256sum"):
        check = subprocess.run(
            ["sha256sum", "--check", "--quiet", publish.MANIFEST_NAME], cwd=root, capture_output=True, text=True
        )
        assert check.returncode == 0, check.stdout + check.stderr
    digest, name = Path(f"{archive}.sha256").read_text().split()
    assert (digest, name) == (sha256_file(archive), archive.name)


def test_manifest_catches_a_changed_an_extra_and_a_missing_file(results, tmp_path):
    root = unpack(publish_fixture(results, tmp_path / "a.tar.gz"), tmp_path / "unpacked")
    (root / "local/tables/findings.csv").write_text("id,verdict\nF1,reproduced\n")
    (root / "report/figures/e3_gomaxprocs.svg").unlink()
    (root / "local/tables/extra.csv").write_text("x\n")
    problems = publish.verify_manifest(root)
    assert "local/tables/findings.csv: checksum differs" in problems
    assert "report/figures/e3_gomaxprocs.svg: listed but missing" in problems
    assert "local/tables/extra.csv: present but not in the manifest" in problems


def test_archive_bytes_depend_only_on_its_contents(results, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764504000")
    first = publish_fixture(results, tmp_path / "one" / "r.tar.gz").read_bytes()
    second = publish_fixture(results, tmp_path / "two" / "r.tar.gz").read_bytes()
    assert first == second


def test_archive_holds_what_the_report_links_not_leftovers(results, tmp_path):
    stale_log = results / "local/raw/E3/go124mod-1/rep0.jsonl"  # a variant of another profile
    stale_log.parent.mkdir(parents=True)
    stale_log.write_text("{}\n")
    try:
        root = unpack(publish_fixture(results, tmp_path / "r.tar.gz"), tmp_path / "unpacked")
    finally:
        shutil.rmtree(stale_log.parent)
    assert not (root / "local/raw/E3/go124mod-1").exists()
    packed_logs = sorted(p.relative_to(root / "local/raw").as_posix() for p in (root / "local/raw").rglob("*.jsonl"))
    runs = pd.read_csv(FIXTURES / "tables" / "runs.csv")
    assert packed_logs == sorted(f"{r.experiment}/{r.variant}/rep{r.repeat}.jsonl" for r in runs.itertuples())


def test_publish_names_a_missing_raw_log(results, tmp_path):
    tables = tmp_path / "results/local/tables"
    shutil.copytree(results, tmp_path / "results", dirs_exist_ok=True)
    (tmp_path / "results/local/raw/E2a/limit1/rep1.jsonl").unlink()
    with pytest.raises(ReportError, match=r"missing: .*E2a/limit1/rep1\.jsonl"):
        publish.publish(
            tmp_path / "results",
            tmp_path / "results/report",
            tables,
            tmp_path / "results/local/raw",
            CI_CONFIG,
            tmp_path / "results/r.tar.gz",
        )


def test_config_overrides_travel_with_the_archive(results, tmp_path):
    out = publish.publish(
        results,
        results / "report",
        results / "local" / "tables",
        results / "local" / "raw",
        {"profile": "ci", "stats": {"confidence": 0.9}},
        tmp_path / "r.tar.gz",
    )
    root = unpack(out, tmp_path / "unpacked")
    assert "confidence: 0.9" in (root / "config/config.yaml").read_text()


# --------------------------------------------------------------------------
# the page in a real browser (Debian's chromium over the DevTools protocol, loopback only)


CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
]


def chromium_binary() -> str | None:
    return next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)


class DevTools:
    """The few DevTools-protocol calls the test needs, over a WebSocket to 127.0.0.1; stdlib only."""

    def __init__(self, url: str, timeout: float = 30.0):
        where = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((where.hostname, where.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET {where.path} HTTP/1.1\r\nHost: {where.hostname}:{where.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._recv()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise ConnectionError(f"DevTools refused the WebSocket: {head.decode(errors='replace')}")
        self.last_id = 0
        self.events: list[dict] = []

    def _recv(self) -> bytes:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("DevTools closed the connection")
        return chunk

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self.buffer += self._recv()
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _send(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        if n < 126:
            length = bytes([0x80 | n])
        elif n < 1 << 16:
            length = bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            length = bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)  # clients must mask every frame (RFC 6455 §5.3)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(bytes([0x80 | opcode]) + length + mask + masked)

    def receive(self) -> dict:
        message = b""
        while True:
            first, second = self._read(2)
            opcode, n = first & 0x0F, second & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            if opcode == 0x9:
                self._send(0xA, payload)
                continue
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the WebSocket")
            message += payload
            if first & 0x80:
                return json.loads(message)

    def call(self, method: str, **params) -> dict:
        self.last_id += 1
        self._send(0x1, json.dumps({"id": self.last_id, "method": method, "params": params}).encode())
        while True:
            message = self.receive()
            if message.get("id") == self.last_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, event: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in self.events:
                if message.get("method") == event:
                    return message
            self.events.append(self.receive())
        raise TimeoutError(f"no {event} within {timeout} s")

    def close(self) -> None:
        self.sock.close()


def start_chromium(binary: str, profile_dir: Path, scratch: Path) -> tuple[subprocess.Popen, int]:
    """Chromium on about:blank; returns the process and the DevTools port it chose. Its TMPDIR is
    ``scratch``: chromium puts its singleton socket in a fresh org.chromium.* folder there and,
    stopped by a signal, leaves that folder behind (it did in /tmp). The path must stay short: a
    socket path over 107 bytes makes chromium abort."""
    proc = subprocess.Popen(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile_dir}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    port_file = profile_dir / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if port_file.is_file() and port_file.read_text().strip():
            return proc, int(port_file.read_text().split()[0])
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.1)
    stop_chromium(proc)
    raise TimeoutError("chromium did not open its DevTools port within 30 s")


def stop_chromium(proc: subprocess.Popen) -> None:
    """Stop the browser we started and its helper processes (its own session's process group)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.stderr:
        proc.stderr.close()


PAGE_CHECKS = """
(() => {
  const figures = [...document.querySelectorAll('figure.plot')].map(f => {
    const svg = f.querySelector('svg'), img = f.querySelector('img');
    const box = (svg || img) ? (svg || img).getBoundingClientRect() : {width: 0, height: 0};
    const content = svg ? svg.getBBox() : {width: img ? img.naturalWidth : 0, height: img ? img.naturalHeight : 0};
    return {id: f.id, width: box.width, height: box.height, contentWidth: content.width, contentHeight: content.height};
  });
  const images = [...document.images].map(i => ({src: i.src.slice(0, 60), width: i.naturalWidth, complete: i.complete}));
  const firstTable = document.querySelector('table');
  return {
    figures, images,
    findingRows: document.querySelectorAll('#findings-table tbody tr.finding').length,
    firstTable: firstTable ? firstTable.id : null,
    resources: performance.getEntriesByType('resource').map(e => e.name),
  };
})()
"""


def console_errors(events: list[dict]) -> list[str]:
    errors = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            errors.append("exception: " + params["exceptionDetails"].get("text", ""))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            errors.append(f"log ({params['entry'].get('source')}): {params['entry'].get('text')}")
    return errors


def chromium_or_skip(pytestconfig, what: str) -> str:
    """Chromium's binary, or a skip whose reason names what is left unchecked and how to install it."""
    binary = chromium_binary()
    if binary is None:
        reason = f"chromium is not installed: {what} is skipped (apt-get install chromium; .ci/run does)"
        pytestconfig.pluginmanager.get_plugin("terminalreporter").write_line(f"SKIP: {reason}")
        pytest.skip(reason)
    return binary


def open_in_chromium(
    binary: str,
    page: Path,
    profile_dir: Path,
    expression: str,
    *,
    viewport: tuple[int, int] | None = None,
    screenshot: bool = False,
) -> tuple[object, list[str], bytes | None]:
    """Load ``page`` in headless Chromium (at ``viewport``, width x height, when given), evaluate ``expression``
    once it has loaded; returns its value, the console's errors and, with ``screenshot``, a PNG of the view."""
    scratch = Path(tempfile.mkdtemp(prefix="tl-chromium-"))
    proc, port = start_chromium(binary, profile_dir, scratch)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            target = next(t for t in json.load(answer) if t.get("type") == "page")
        devtools = DevTools(target["webSocketDebuggerUrl"])
        try:
            for domain in ("Page", "Runtime", "Log"):
                devtools.call(f"{domain}.enable")
            if viewport is not None:
                width, height = viewport
                devtools.call(
                    "Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False
                )
            devtools.call("Page.navigate", url=page.resolve().as_uri())
            devtools.wait_for("Page.loadEventFired")
            value = devtools.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"]["value"]
            png = (
                base64.b64decode(devtools.call("Page.captureScreenshot", format="png")["data"]) if screenshot else None
            )
            errors = console_errors(devtools.events)
        finally:
            devtools.close()
    finally:
        stop_chromium(proc)
        shutil.rmtree(scratch, ignore_errors=True)
    return value, errors, png


def test_report_opens_in_headless_chromium(page, tmp_path, pytestconfig):
    binary = chromium_or_skip(pytestconfig, "the browser check of the report")
    before = set(Path(tempfile.gettempdir()).glob("org.chromium.*"))
    checks, errors, _ = open_in_chromium(binary, page, tmp_path / "chromium-profile", PAGE_CHECKS)

    assert errors == []
    assert checks["firstTable"] == "verdict-summary"
    assert checks["findingRows"] == len(pd.read_csv(FIXTURES / "tables" / "findings.csv"))
    assert [f["id"] for f in checks["figures"]] == ["fig-forest"] + [f"fig-{name}" for name in drawn_figures()]
    for figure in checks["figures"]:
        assert min(figure["width"], figure["height"], figure["contentWidth"], figure["contentHeight"]) > 0, figure
    assert all(image["complete"] and image["width"] > 0 for image in checks["images"]), checks["images"]
    assert checks["resources"] == []  # nothing fetched: no CDN, no file next to the page
    assert set(Path(tempfile.gettempdir()).glob("org.chromium.*")) == before  # the browser left nothing in /tmp


def test_experiments_beyond_the_lab_come_last_under_their_heading_and_their_findings_are_marked_ours(tmp_path):
    """docs/EXPERIMENTS.md: X1-X6 after the lab's experiments, under 'Beyond the lab'; F12-F17 in the same
    findings table, marked ours, the hypothesis quoted as written; X3's note says what F14 decides about F2."""
    tables = tmp_path / "tables"
    shutil.copytree(FIXTURES / "tables", tables)
    runs = pd.read_csv(tables / "runs.csv")
    x3 = runs[runs["experiment"] == "E2a"].head(2).copy()
    x3["experiment"], x3["variant"] = "X3", ["cpus1", "cpus2"]
    x3["raw_log"] = ["results/local/raw/E2a/limit1/rep0.jsonl"] * 2
    pd.concat([runs, x3]).to_csv(tables / "runs.csv", index=False)
    rounds = pd.read_csv(tables / "rounds.csv")
    copied = rounds[(rounds["experiment"] == "E2a") & (rounds["variant"] == "limit1")]
    pd.concat(
        [rounds, copied.assign(experiment="X3", variant="cpus1"), copied.assign(experiment="X3", variant="cpus2")]
    ).to_csv(tables / "rounds.csv", index=False)
    write_figures(tables, tmp_path / "figures")
    findings = pd.read_csv(tables / "findings.csv")
    findings = findings[findings["id"] != "F14"]  # F14's row of the fixture (not testable: no X3 there) replaced
    f14 = findings.head(1).copy()
    f14["id"], f14["experiments"], f14["verdict"] = "F14", "X3", "reproduced"
    f14["claim"], f14["reference"] = "Throttled time is summed over run queues, not threads.", "none: ours"
    pd.concat([findings, f14]).to_csv(tables / "findings.csv", index=False)
    out = tmp_path / "report" / "index.html"
    report.render_report(
        tables,
        FIXTURES / "report_raw",
        tmp_path / "figures",
        CI_CONFIG,
        out,
        tmp_path / "report" / "findings_table.csv",
        tmp_path / "report" / "estimates_table.csv",
    )
    html = out.read_text()
    parsed = parse(out)
    assert parsed.finding_rows == 17
    sections = [i for i in parsed.ids if i.startswith("exp-") or i == "beyond"]
    assert sections[-2:] == ["beyond", "exp-X3"], sections
    row = html[html.index('id="finding-F14"') :]
    row = row[: row.index("</tr>")]
    assert 'class="ours">ours' in row and "Hypothesis, as written before the data:" in row
    assert 'class="ours"' not in html[html.index('id="finding-F1"') : html.index('id="finding-F2"')]
    assert "F14 came out reproduced" in html and "not over its threads" in html
    shown = pd.read_csv(tmp_path / "report" / "findings_table.csv").set_index("id")
    assert shown.loc["F14", "claim of"] == "ours" and shown.loc["F1", "claim of"] == "the lab's"
