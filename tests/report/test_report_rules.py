"""The report's rules (rules/report.smk) against the profile file: the page shows the profile's text, so
editing the file reruns the page and the archive. Snakemake plans only (--summary, then dry runs) on a
results tree of empty files, one experiment (E3, which has a figure) of a copy of the ci profile: nothing is built or measured."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import PROJECT
from conftest import snakemake as run_snakemake
from throttlelab.analysis import tidy
from throttlelab.figures import draw
from throttlelab.figures.registry import FIGURES


def snakemake(work: Path, profile: Path, *options: str) -> str:
    proc = run_snakemake(
        work, *options, "report", "publish", "--config", f"profile={profile}", "experiments=[E3]", timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def test_editing_the_profiles_text_reruns_the_page_and_the_archive_only(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    profile = tmp_path / "mine.yaml"
    profile.write_text((PROJECT / "config" / "profiles" / "ci.yaml").read_text())
    summary = snakemake(work, profile, "--summary").splitlines()
    header = next(k for k, line in enumerate(summary) if line.startswith("output_file\t"))
    outputs = [line.split("\t")[0] for line in summary[header + 1 :] if "\t" in line]
    assert any(path.endswith("index.html") for path in outputs), summary
    # every output present and of one age, the profile older: nothing to do
    then = time.time()
    for path in outputs:
        target = work / path
        if path.endswith("/figures"):  # draw_figures' folder: Snakemake dates a folder by its timestamp file
            target.mkdir(parents=True)
            target = target / ".snakemake_timestamp"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
        os.utime(target, (then, then))
    os.utime(profile, (then - 60, then - 60))
    assert "Nothing to be done" in snakemake(work, profile, "-n")
    # a profile's text edited (its description: shown on the page), nothing else
    profile.write_text(
        profile.read_text().replace("description: >\n  A smoke run", "description: >\n  An edited run", 1)
    )
    os.utime(profile, (then + 60, then + 60))
    planned = snakemake(work, profile, "-n")
    jobs = set(re.findall(r"^([a-z_]+)\s+\d+$", planned, re.M))  # the job stats table
    assert {"render_report", "pack_report"} <= jobs, planned
    assert jobs <= {"render_report", "pack_report", "report", "publish", "total"}, planned


def test_a_run_whose_experiments_have_no_figure_plans_its_report(tmp_path):
    """E1 and E4 are read-outs without a figure: the page still renders from the tables alone (the
    figures folder is a param of its own, not derived from the first figure)."""
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(PROJECT / "Snakefile"), "-d", str(tmp_path)]
        + ["--cores", "1", "-n", "report", "--config", "profile=ci", "experiments=[E1,E4]"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "render_report" in proc.stdout and "draw_figures" not in proc.stdout


def _run(work: Path, *options: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(PROJECT / "Snakefile"), "-d", str(work), "--cores", "1"]
        + [*options, "--config", "profile=ci", "experiments=[E2a,E3,S1]"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _report_value(html: str, key: str) -> dict:
    """A JSON object of Snakemake's report page, the one that follows ``key``."""
    start = html.index(key) + len(key)
    return json.JSONDecoder().raw_decode(html[start:].lstrip())[0]


@pytest.mark.snakemake
def test_one_job_draws_every_figure_and_snakemakes_report_shows_each_with_its_own_caption(tmp_path):
    """draw_figures on the fixture tables (the only rule allowed to run; everything upstream empty files of
    one age), then `snakemake --report`: every file of the folder is an entry of its own, under its
    experiment's category, with its own caption."""
    work = tmp_path / "work"
    summary = _run(work, "--summary", "draw_figures").splitlines()
    header = next(k for k, line in enumerate(summary) if line.startswith("output_file\t"))
    then = time.time() - 60
    for path in (line.split("\t")[0] for line in summary[header + 1 :] if "\t" in line):
        target, table = work / path, PROJECT / "tests" / "fixtures" / "tables" / Path(path).name
        if path.endswith("/figures"):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if "/tables/" in path and table.is_file():
            shutil.copy(table, target)
        else:
            target.touch()
        os.utime(target, (then, then))
    planned = _run(work, "-n", "-p", "draw_figures")
    assert set(re.findall(r"^([a-z_]+)\s+\d+$", planned, re.M)) == {"draw_figures", "total"}, planned
    names = ["e2a_completion", "e2a_counters", "e3_gomaxprocs", "s1_throttling"]
    assert " ".join(f"--figure {name}" for name in names) in planned, planned
    _run(work, "draw_figures", "--allowed-rules", "draw_figures")
    folder = work / "results" / "report" / "local-ci" / "figures"
    assert sorted(p.name for p in folder.glob("*.svg")) == [f"{name}.svg" for name in names]
    assert [p.name for p in folder.parent.iterdir()] == ["figures"]  # no staging folder beside it
    _run(work, "draw_figures", "--report", str(tmp_path / "report.html"))
    html = (tmp_path / "report.html").read_text()
    tables = PROJECT / "tests" / "fixtures" / "tables"
    estimates, runs = pd.read_csv(tables / "estimates.csv"), tidy.read_table(tables / "runs.csv", "runs")
    categories = _report_value(html, "var categories =")
    for name in names:
        entry = _report_value(html, f'"results/report/local-ci/figures/{name}.svg":')
        # the caption our page prints under the figure, from the same tables
        written = (folder / FIGURES[name].caption_html).read_text()
        text = draw.caption(name, estimates, runs)
        assert written == draw.caption_html(text) and entry["caption"].startswith(written.strip()), (
            name,
            entry["caption"][:200],
        )
        assert entry["job_properties"]["wildcards"] == f"figure={name}"
        files = [f for subcategory in categories[FIGURES[name].category].values() for f in subcategory]
        assert f"results/report/local-ci/figures/{name}.svg" in files, categories
