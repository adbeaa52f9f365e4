"""The report's rules (rules/report.smk) against the profile file: the page shows the profile's text, so
editing the file reruns the page and the archive. Snakemake plans only (--summary, then dry runs) on a
results tree of empty files, one experiment (E3, which has a figure) of a copy of the ci profile: nothing is built or measured."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from conftest import PROJECT


def snakemake(work: Path, profile: Path, *options: str) -> str:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(PROJECT / "Snakefile"),
            "-d",
            str(work),
            "--cores",
            "1",
            *options,
            "report",
            "publish",
            "--config",
            f"profile={profile}",
            "experiments=[E3]",
        ],
        capture_output=True,
        text=True,
        timeout=120,
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
    assert "render_report" in proc.stdout and "plot_figure" not in proc.stdout
