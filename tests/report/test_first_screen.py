"""The report's first screen: the verdict summary, the forest plot of every decisive check, the checks table's
columns, no unformatted placeholder on any profile's page, and the page at 1400 px in headless Chromium."""

from __future__ import annotations

import math
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from throttlelab.figures import forest
from throttlelab.report import page as report

from conftest import PROJECT
from test_report import CI_CONFIG, FIXTURES, chromium_or_skip, open_in_chromium, write_figures

PROFILES = sorted(p.stem for p in (PROJECT / "config" / "profiles").glob("*.yaml"))


def check_row(**changes) -> dict:
    """One checks.csv row as the findings stage writes it, a ratio against 1.12 with no effect at 1."""
    row = {
        "id": "F1",
        "check": "p50_wall_ms limit1 / nolimit",
        "experiment": "E2a",
        "metric": "p50_wall_ms",
        "expected": "p50_wall_ms limit1 / nolimit > 1.12",
        "effect": 2.1775,
        "lo": 1.97461,
        "hi": 2.40127,
        "p": 0.001,
        "p_holm": math.nan,
        "a12": 1.0,
        "reference": "",
        "verdict": "reproduced",
        "reason": "",
        "method": "ratio of geometric means, Welch t on log per-run p50_wall_ms",
        "why": "derived",
        "decisive": True,
        "requirement": "",
        "role": "decisive",
        "end": "",
        "zones": "",
        "threshold_commit": "",
        "threshold_note": "",
        "judged_on": "all runs",
        "verdict_all_runs": "reproduced",
        "runs": 3,
        "runs_baseline": 3,
        "level": 0.95,
        "relation": ">",
        "threshold": 1.125,
        "threshold_hi": math.nan,
        "null": 1.0,
        "scale": "log",
        "tie": False,
        "pooled": math.nan,
    }
    return {**row, **changes}


# --------------------------------------------------------------------------
# the checks table


def test_the_checks_table_shows_the_level_the_runs_and_the_method_with_ends_rounded_outward():
    table = report.checks_table(pd.DataFrame([check_row()]))
    row = dict(zip(table.columns, table.rows[0]))
    assert row["estimate [interval]"] == "2.18 [1.97, 2.41]"
    assert (row["level"], row["runs (R)"]) == ("95%", "R = 3 vs 3")
    assert row["method"].startswith("ratio of geometric means")


def test_a_contradiction_judged_at_the_bonferroni_level_shows_that_level():
    contradicted = check_row(verdict="contradicted", effect=0.8, lo=0.61, hi=0.97, level=1 - 0.05 / 3)
    row = dict(zip(*[(t := report.checks_table(pd.DataFrame([contradicted]))).columns, t.rows[0]]))
    assert row["level"] == "98.3%" and row["estimate [interval]"] == "0.800 [0.610, 0.970]"


def test_a_tie_is_written_as_the_value_in_all_runs_with_its_one_sided_level():
    tie = check_row(scale="logit", relation="<", threshold=0.05, null=math.nan, effect=0.0, lo=0.0, hi=0.5218, tie=True)
    table = report.checks_table(pd.DataFrame([{**tie, "runs": 5, "runs_baseline": math.nan}]))
    row = dict(zip(table.columns, table.rows[0]))
    assert row["estimate [interval]"] == "0 in all 5 runs; the mean in [0, 0.522] at one-sided 97.5%"
    assert row["runs (R)"] == "R = 5"


def test_a_proportion_shows_its_intervals_own_point_and_the_pooled_count_labelled():
    share = check_row(scale="logit", effect=0.33, lo=0.301, hi=0.362, pooled=0.295, runs=5, runs_baseline=math.nan)
    row = dict(zip(*[(t := report.checks_table(pd.DataFrame([share]))).columns, t.rows[0]]))
    assert row["estimate [interval]"] == "0.330 [0.301, 0.362] (mean per-run logit); pooled k/n 0.295"


def test_a_check_and_a_finding_judged_at_a_look_say_which_look_and_on_which_runs():
    first = check_row(look="1 of 2", level=0.9915)
    row = dict(zip(*[(t := report.checks_table(pd.DataFrame([first, check_row(look="2 of 2")]))).columns, t.rows[0]]))
    assert row["judged on"] == "all runs; look 1 of 2, on the first stage's runs"
    assert dict(zip(t.columns, t.rows[1]))["judged on"] == "all runs; look 2 of 2, on both stages' runs"
    assert dict(zip(*[(t := report.checks_table(pd.DataFrame([check_row()]))).columns, t.rows[0]]))["judged on"] == (
        "all runs"
    )
    finding = pd.DataFrame(
        [{"id": "F7", "claim": "c", "effect": 1.7, "lo": 1.3, "hi": 2.2, "reference": "", "verdict": "reproduced",
          "reason": "", "method": "paired", "level": 0.9915, "headline": "h", "look": "1 of 2"}]
    )  # fmt: skip
    (summary,) = report.summary_rows(finding, report.findings_rows(finding))
    assert summary.level == "99.2%, look 1 of 2"


# --------------------------------------------------------------------------
# the forest plot


def test_the_forest_plot_draws_every_decisive_check_of_the_fixture():
    checks = pd.read_csv(FIXTURES / "tables" / "checks.csv")
    rows = forest.forest_rows(checks)
    assert len(rows) == int((checks["role"] == "decisive").sum())
    svg = forest.forest_svg(rows)
    assert svg.count('class="forest-row"') == len(rows)
    measured = checks[(checks["role"] == "decisive") & checks["lo"].notna()]
    assert svg.count('class="interval"') == len(measured)
    assert "2.18 [1.97, 2.41] 95% R = 3 vs 3" in svg  # F1's first check: level and runs beside its interval
    assert "{" not in svg


def test_a_rows_zones_follow_its_relation_and_its_no_effect():
    (row,) = forest.forest_rows(pd.DataFrame([check_row()]))
    assert [z[0] for z in forest.zones(row)] == ["contradicted", "weaker", "reproduced"]
    assert forest.zones(row)[1][1:] == (1.0, 1.125)
    (band,) = forest.forest_rows(pd.DataFrame([check_row(relation="within", threshold=0.8, threshold_hi=1.25)]))
    assert [z[0] for z in forest.zones(band)] == ["contradicted", "reproduced", "contradicted"]
    (below,) = forest.forest_rows(pd.DataFrame([check_row(relation="<", threshold=0.05, null=math.nan)]))
    assert [z[0] for z in forest.zones(below)] == ["reproduced", "contradicted"]


def test_a_finding_decided_by_runs_that_all_gave_one_value_says_so_on_its_line():
    checks = pd.DataFrame(
        [
            check_row(check="throttled_ratio busy-lim2x", effect=0.0, lo=0.0, hi=0.04399, tie=True, runs=6),
            check_row(check="work p90 busy-lim2x / idle-lim2x"),
            check_row(id="F2", check="throttled_ms_per_round / mean_wall_ms limit500m"),
        ]
    )
    findings = pd.DataFrame(
        [
            {"id": "F1", "claim": "c", "effect": 0.0, "lo": 0.0, "hi": 0.04399, "reference": "", "verdict": "reproduced",
             "reason": "", "method": "[throttled_ratio busy-lim2x] exact bound", "level": 0.95, "headline": "h"},
            {"id": "F2", "claim": "c", "effect": 2.1775, "lo": 1.97461, "hi": 2.40127, "reference": "",
             "verdict": "reproduced", "reason": "", "method": "Student t", "level": 0.95, "headline": "h"},
        ]
    )  # fmt: skip
    tied, single = report.summary_rows(findings, report.findings_rows(findings), checks)
    assert (tied.estimate, tied.level) == ("all 6: 0 [0, 0.0440]", "one-sided 97.5%")  # as the forest plot writes it
    assert (single.estimate, single.level) == ("2.18 [1.97, 2.41]", "95%")  # F2's only check, not a tie
    assert report.deciding_check(next(findings.itertuples()), checks).check == "throttled_ratio busy-lim2x"
    assert report.summary_rows(findings, report.findings_rows(findings))[0].estimate == "0 [0, 0.0440]"  # no checks


def test_a_long_checks_label_is_cut_in_its_name_never_in_its_threshold():
    long = check_row(
        check="share_pod-p100m / share_pod-two E5 pods", relation="within", threshold=0.8, threshold_hi=1.25
    )
    (row,) = forest.forest_rows(pd.DataFrame([long]))
    whole = "F1 share_pod-p100m / share_pod-two E5 pods within [0.800, 1.25]"
    assert forest.row_label(row) == whole and len(whole) > forest.LABEL_CHARS
    shown = forest.fitted_label(row)
    assert len(shown) == forest.LABEL_CHARS and shown.startswith("F1 share_pod-p100m /")
    assert shown.endswith("… within [0.800, 1.25]")
    svg = forest.forest_svg([row])
    assert f">{shown}</text>" in svg and f"<title>{whole}: reproduced" in svg  # whole in the tooltip
    (short,) = forest.forest_rows(pd.DataFrame([check_row()]))
    assert forest.fitted_label(short) == forest.row_label(short) == "F1 p50_wall_ms limit1 / nolimit > 1.12"


def test_the_point_and_the_interval_lie_where_their_values_are():
    (row,) = forest.forest_rows(pd.DataFrame([check_row()]))
    svg = forest.forest_svg([row])
    point = float(svg.split('class="point" cx="')[1].split('"')[0])
    x1, x2 = (float(svg.split('class="interval" ')[1].split(f'{a}="')[1].split('"')[0]) for a in ("x1", "x2"))
    threshold = float(svg.split('class="threshold" x1="')[1].split('"')[0])
    assert x1 < point < x2 and threshold < x1  # the whole interval right of 1.12: reproduced


# --------------------------------------------------------------------------
# every profile's page


class VisibleText(HTMLParser):
    """The page's text as a reader sees it, less what it quotes verbatim: every text node but the style
    sheet's and the config files' (<pre>, YAML whose flow mappings hold braces of their own)."""

    def __init__(self):
        super().__init__()
        self.inside: list[str] = []
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.inside.append(tag)

    def handle_endtag(self, tag):
        while self.inside and self.inside.pop() != tag:
            pass

    def handle_data(self, data):
        if "style" not in self.inside and "pre" not in self.inside:
            self.parts.append(data)


@pytest.fixture(scope="module")
def figures(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("figures")
    write_figures(FIXTURES / "tables", out)
    return out


@pytest.mark.parametrize("profile", PROFILES)
def test_no_placeholder_is_left_on_any_profiles_page(profile, figures, tmp_path):
    out = tmp_path / "report" / "index.html"
    report.render_report(FIXTURES / "tables", FIXTURES / "report_raw", figures, {"profile": profile}, out)
    parser = VisibleText()
    parser.feed(out.read_text())
    text = " ".join(parser.parts)
    left = sorted({text[max(0, i - 40) : i + 40] for i in range(len(text)) if text[i] == "{"})
    assert left == [], left
    assert "work quantile two-limit / one-double" in text  # the check whose quantile was not chosen, named


# --------------------------------------------------------------------------
# the first screen in a real browser


FIRST_SCREEN = """
(() => {
  const box = e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  const wide = [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 0.5
    && !e.closest('.scroll')).map(e => e.tagName + (e.id ? '#' + e.id : '') + (e.className && e.className.baseVal === undefined ? '.' + e.className : ''));
  return {
    width: innerWidth, height: innerHeight,
    scrollWidth: document.documentElement.scrollWidth,
    forest: box(document.querySelector('#fig-forest svg')),
    figure: box(document.querySelector('#fig-forest')),
    summary: box(document.querySelector('#verdict-summary')),
    summaryBox: box(document.querySelector('#verdict-summary').closest('.scroll')),
    findings: [...document.querySelectorAll('#verdict-summary tr.summary-row')].map(r => ({
      id: r.dataset.finding || r.querySelector('td').textContent.trim().split(/\\s+/)[0],
      row: box(r),
      estimate: box(r.querySelector('td.estimate .figure') || r.querySelector('td.estimate')),
      cut: [...r.querySelectorAll('.verdict, td.estimate .figure')].some(e => e.scrollWidth > e.clientWidth + 0.5),
      lines: Math.round(r.getBoundingClientRect().height / parseFloat(getComputedStyle(r).lineHeight)),
    })),
    notHeld: [...document.querySelectorAll('#not-held li')].map(li => li.textContent.trim()),
    rows: document.querySelectorAll('#fig-forest .forest-row').length,
    wide: wide.slice(0, 10),
  };
})()
"""


def widest_verdicts(findings_csv: Path) -> None:
    """The fixture's findings with the longest verdict and a Bonferroni level among them, so the summary's
    widest rows are on the screen: F2 contradicted at 98.3%, F3 weaker than modelled, and F12 (ours) decided
    by a check whose 6 runs all gave 0."""
    checks = pd.read_csv(findings_csv.parent / "checks.csv")
    tie = (checks["id"] == "F12") & (checks["check"] == "throttled_round_share budget-full")
    checks.loc[tie, ["effect", "lo", "hi", "tie", "runs", "level"]] = [0.0, 0.0, 0.043989, True, 6, 0.95]
    checks.to_csv(findings_csv.parent / "checks.csv", index=False)
    findings = pd.read_csv(findings_csv)
    findings.loc[findings["id"] == "F12", ["verdict", "method", "effect", "lo", "hi", "level"]] = [
        "inconclusive",
        "[throttled_round_share budget-full] tie rule for the mean: 0 in all 6 runs",
        0.0,
        0.0,
        0.043989,
        0.95,
    ]
    findings.loc[findings["id"] == "F2", ["verdict", "level", "effect", "lo", "hi"]] = [
        "contradicted",
        1 - 0.05 / 3,
        0.804,
        0.6512,
        0.9688,
    ]
    findings.loc[findings["id"] == "F3", ["verdict", "lo", "hi"]] = [
        "direction reproduced, weaker than modelled",
        1.0213,
        1.3307,
    ]
    findings.to_csv(findings_csv, index=False)


def test_every_findings_verdict_and_the_forest_plot_are_on_the_first_screen_at_1400_px(tmp_path, pytestconfig):
    binary = chromium_or_skip(pytestconfig, "the first screen's browser check")
    tables = tmp_path / "results" / "local" / "tables"
    shutil.copytree(FIXTURES / "tables", tables)
    widest_verdicts(tables / "findings.csv")
    write_figures(tables, tmp_path / "results" / "report" / "figures")
    page = tmp_path / "results" / "report" / "index.html"
    report.render_report(tables, FIXTURES / "report_raw", page.parent / "figures", CI_CONFIG, page)
    screen, errors, png = open_in_chromium(
        binary, page, tmp_path / "chromium-profile", FIRST_SCREEN, viewport=(1400, 900), screenshot=True
    )
    artifact = tmp_path / "first-screen-1400.png"
    artifact.write_bytes(png)
    pytestconfig.pluginmanager.get_plugin("terminalreporter").write_line(f"first screen: {artifact}")

    assert errors == []
    assert (screen["width"], screen["height"]) == (1400, 900)
    assert screen["rows"] == int((pd.read_csv(tables / "checks.csv")["role"] == "decisive").sum())
    plot = screen["forest"]
    assert 0 <= plot["top"] and plot["bottom"] <= screen["height"], plot  # the whole plot in the first viewport
    assert 0 <= plot["left"] and plot["right"] <= screen["width"], plot
    assert screen["figure"]["bottom"] <= screen["height"], screen["figure"]  # its caption too
    assert screen["summary"]["top"] < screen["height"] / 3  # the summary starts near the top, beside it
    # every finding's row, its verdict and its estimate with the interval, inside the first viewport and not cut
    findings = pd.read_csv(tables / "findings.csv")["id"].tolist()
    assert len(findings) == 17 and [f["id"] for f in screen["findings"]] == findings
    shown = screen["summaryBox"]
    for f in screen["findings"]:
        for part in (f["row"], f["estimate"]):
            assert 0 <= part["top"] and part["bottom"] <= screen["height"], f  # above the fold
            assert shown["left"] <= part["left"] and part["right"] <= min(shown["right"], screen["width"]), f
        assert not f["cut"], f
        assert f["lines"] <= 1, f  # one short line per finding
    # the headline of each finding that did not hold, in full under the table (its tooltip, and the findings
    # table, hold every finding's)
    table = pd.read_csv(tables / "findings.csv")
    not_held = table[table["verdict"] != "reproduced"]
    assert screen["notHeld"] == [f"{r.id} ({r.verdict}): {r.headline}" for r in not_held.itertuples()]
    assert screen["scrollWidth"] <= screen["width"], screen["wide"]  # nothing overflows the page's width
    assert screen["wide"] == []
    assert artifact.stat().st_size > 10_000
