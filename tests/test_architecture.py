"""The layout's rules, checked: the import contracts, no private names across modules, no
repository found through __file__, the command line, and the linters (ruff, snakefmt,
snakemake --lint). docs/ARCHITECTURE.md explains each rule."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import PROJECT

PACKAGE = PROJECT / "throttlelab"
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name} is not installed beside {sys.executable}: pip install -e '.[test]'")
    return str(path)


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_import_contracts_are_kept():
    proc = subprocess.run([_tool("lint-imports")], cwd=PROJECT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "BROKEN" not in proc.stdout and re.search(r"Contracts: \d+ kept, 0 broken", proc.stdout), proc.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        # the analysis reaches into the measuring side
        ("analysis/tidy.py", "import throttlelab.backends.local", "The analysis side reads raw logs"),
        # a backend leans on another backend
        ("backends/docker.py", "import throttlelab.backends.local", "No two backends lean on each other"),
        # the model (bottom layer) imports upwards
        ("model/quantities.py", "import throttlelab.host.cgroupfs", "Measurement: experiments"),
        # a figure runs the findings' model again instead of reading predictions.csv
        (
            "figures/jobs_figures.py",
            "import throttlelab.analysis.findings.predictions",
            "Figures and report read the findings' tables",
        ),
        # one family's figures (or claims) lean on another's: what they share belongs in style.py (predictions.py)
        ("figures/jobs_figures.py", "import throttlelab.figures.services_figures", "Figures: one module per family"),
        (
            "analysis/findings/services_findings.py",
            "import throttlelab.analysis.findings.jobs_findings",
            "Findings: one module per family",
        ),
    ],
)
def test_a_forbidden_import_breaks_a_contract(tmp_path, module, line, contract):
    copy = tmp_path / "project"
    copy.mkdir()
    shutil.copy(PROJECT / "pyproject.toml", copy / "pyproject.toml")
    shutil.copytree(PACKAGE, copy / "throttlelab", ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "throttlelab" / module
    target.write_text(target.read_text() + f"\n{line}  # added by the test\n")
    env = {**os.environ, "PYTHONPATH": str(copy)}
    proc = subprocess.run([_tool("lint-imports"), "--no-cache"], cwd=copy, capture_output=True, text=True, env=env)
    assert proc.returncode != 0, proc.stdout[-3000:]
    broken = re.findall(r"^(.*) BROKEN$", proc.stdout, re.MULTILINE)
    assert any(name.startswith(contract) for name in broken), proc.stdout[-3000:]


def test_no_module_imports_another_modules_private_names():
    offenders = []
    for path in _modules():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("throttlelab"):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private:
                    offenders.append(f"{path.relative_to(PROJECT)}:{node.lineno} {node.module} {private}")
    assert offenders == []


def test_no_module_finds_the_repository_through_its_own_path():
    offenders = [str(p.relative_to(PROJECT)) for p in _modules() if "__file__" in p.read_text()]
    assert offenders == [], "take the project's folders as arguments (--project, --source) instead"


def test_the_command_line_works_as_an_installed_script_and_as_a_module():
    for argv in ([_tool("throttlelab"), "--help"], [sys.executable, "-m", "throttlelab", "--help"]):
        proc = subprocess.run(argv, capture_output=True, text=True, cwd="/", timeout=60)
        assert proc.returncode == 0, proc.stderr
        for subcommand in ("run", "tables", "stats", "findings", "figure", "report", "publish"):
            assert re.search(rf"^\s+{subcommand}\s", proc.stdout, re.MULTILINE), proc.stdout
    proc = subprocess.run([sys.executable, "-m", "throttlelab", "no-such-step"], capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown subcommand" in proc.stderr


def test_ruff_finds_nothing():
    proc = subprocess.run(
        [_tool("ruff"), "check", "throttlelab", "tests", "benchmarks"], cwd=PROJECT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-4000:]


def test_the_workflow_is_formatted_as_snakefmt_writes_it():
    files = ["Snakefile", *sorted(str(p.relative_to(PROJECT)) for p in (PROJECT / "rules").rglob("*.smk"))]
    proc = subprocess.run([_tool("snakefmt"), "--check", *files], cwd=PROJECT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


# snakemake --lint findings that cannot be helped, each explained in docs/ARCHITECTURE.md
ACCEPTED_LINTS = {
    "Specify a conda environment or container for each rule.",
}


def test_snakemake_lint_reports_only_the_explained_findings(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(PROJECT / "Snakefile"), "-d", str(tmp_path), "--lint"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    found = set(re.findall(r"^    \* (.*?):?$", proc.stdout + proc.stderr, re.MULTILINE))
    assert found - ACCEPTED_LINTS == set(), proc.stdout[-4000:] + proc.stderr[-2000:]


def test_the_code_is_formatted_as_ruff_format_writes_it():
    proc = subprocess.run(
        [_tool("ruff"), "format", "--check", "throttlelab", "tests", "benchmarks"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


#: pyproject.toml's name of a dependency -> its conda-forge name where the two differ
CONDA_NAMES = {"kubernetes": "python-kubernetes", "docker": "docker-py"}


def test_the_conda_environment_mirrors_the_packages_dependencies():
    import tomllib

    import yaml

    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((PROJECT / "envs" / "throttlelab.yaml").read_text())
    specs = [d for d in env["dependencies"] if isinstance(d, str)]
    specs += [d for entry in env["dependencies"] if isinstance(entry, dict) for d in entry.get("pip", [])]
    wanted = [
        re.sub(r"^([A-Za-z0-9_.-]+)", lambda m: CONDA_NAMES.get(m.group(1), m.group(1)), d.replace(" ", ""))
        for d in project["dependencies"]
    ]
    missing = [d for d in wanted if d not in specs]
    assert missing == [], f"envs/throttlelab.yaml lacks {missing} of pyproject.toml's dependencies"
    assert f"python{project['requires-python']}" in specs


# -- docs/ARCHITECTURE.md, "How to add an experiment" ----------------------------------------------------

CHECKLIST_LIMIT = 13  # a new experiment on existing machinery touches at most ~13 files


def _checklist() -> list[str]:
    """The files the checklist's numbered steps name (the backticked paths at the start of each step)."""
    text = (PROJECT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## How to add an experiment", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^\d+\. (.*?):", section, re.MULTILINE)
    assert steps, "docs/ARCHITECTURE.md has no numbered steps under 'How to add an experiment'"
    return [path for step in steps for path in re.findall(r"`([^`]+\.(?:py|yaml|md|rst))`", step)]


def test_the_checklist_names_files_that_exist_and_few_of_them():
    from throttlelab.figures.registry import FIGURES
    from throttlelab.model import catalogue

    paths = _checklist()
    assert len(paths) <= CHECKLIST_LIMIT, paths
    missing = []
    for path in paths:
        families = catalogue.FAMILIES if "<family>" in path else ("",)
        figures = list(FIGURES) if "<figure>" in path else [""]
        for family in families:
            for figure in figures:
                concrete = path.replace("<family>", family).replace("<figure>", figure)
                if not (PROJECT / concrete).is_file():
                    missing.append(concrete)
    assert missing == [], f"docs/ARCHITECTURE.md's checklist names files the tree lacks: {missing}"


ADD_X7 = textwrap.dedent(
    """
    from pathlib import Path
    from throttlelab.analysis.metrics.per_run import FAMILY_METRICS
    from throttlelab.experiments import REGISTRY
    from throttlelab.model import catalogue, plan
    p = plan.make_plan({"profile": "ci"}, Path("config"), lambda: 2)
    row = catalogue.experiment("X7")
    print(REGISTRY["X7"].__name__, p.raw_logs("X7")[0], row.family in FAMILY_METRICS, row.ours)
    """
)


def _project_with_x7(tmp_path: Path, *, row: bool, schema: bool) -> subprocess.CompletedProcess:
    """A copy of the package and config/ with the checklist's first steps done for an experiment X7 on
    X1's machinery (its catalogue row, its parameters, its variants in the ci profile), some left out."""
    import yaml

    copy = tmp_path / "project"
    shutil.copytree(PACKAGE, copy / "throttlelab", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(PROJECT / "config", copy / "config")
    if row:
        path = copy / "throttlelab" / "model" / "catalogue.py"
        text = path.read_text()
        last = 'figures=("x6_threads",)),\n'
        assert last in text, "the catalogue's last row moved: update this test's anchor"
        path.write_text(
            text.replace(
                last,
                last + '    Experiment("X7", "a test", ours=True, family="jobs", '
                'runner="run_e2a", command="burst", metrics="burst"),\n',
                1,
            )
        )
    if schema:
        path = copy / "config" / "profile.schema.yaml"
        doc = yaml.safe_load(path.read_text())
        doc["definitions"]["X7"] = doc["definitions"]["X1"]
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path = copy / "config" / "profiles" / "ci.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["experiments"]["X7"] = doc["experiments"]["X1"]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(copy)}
    return subprocess.run(
        [sys.executable, "-c", ADD_X7], cwd=copy, capture_output=True, text=True, env=env, timeout=120
    )


def test_an_experiment_added_along_the_checklist_is_planned_run_and_analysed_by_its_row(tmp_path):
    proc = _project_with_x7(tmp_path, row=True, schema=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["run_e2a", "results/local/raw/X7/budget0/rep0.jsonl", "True", "True"]


@pytest.mark.parametrize(
    ("row", "schema", "message"),
    [
        (False, True, "experiments.X7: experiment 'X7' has no row in throttlelab/model/catalogue.py"),
        (True, False, "no definitions.X7, the parameters of catalogue experiment X7"),
    ],
)
def test_a_step_of_the_checklist_left_out_stops_the_plan_naming_the_experiment(tmp_path, row, schema, message):
    proc = _project_with_x7(tmp_path, row=row, schema=schema)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-3000:]
