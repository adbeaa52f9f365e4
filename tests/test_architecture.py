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
        # one family's figures (or claims) lean on another's: what they share belongs in style.py (predictions.py)
        ("figures/jobs_figures.py", "import throttlelab.figures.services_figures", "Figures: one module per family"),
        ("analysis/findings/services_findings.py", "import throttlelab.analysis.findings.jobs_findings", "Findings: one module per family"),
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
    proc = subprocess.run([_tool("ruff"), "check", "throttlelab", "tests", "benchmarks"], cwd=PROJECT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:]


def test_the_workflow_is_formatted_as_snakefmt_writes_it():
    files = ["Snakefile", *sorted(str(p.relative_to(PROJECT)) for p in (PROJECT / "rules").glob("*.smk"))]
    proc = subprocess.run([_tool("snakefmt"), "--check", *files], cwd=PROJECT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


# snakemake --lint findings that cannot be helped, each explained in docs/ARCHITECTURE.md
ACCEPTED_LINTS = {
    "Specify a conda environment or container for each rule.",
}


def test_snakemake_lint_reports_only_the_explained_findings(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(PROJECT / "Snakefile"), "-d", str(tmp_path),
                           "--lint"], capture_output=True, text=True, timeout=300)
    found = set(re.findall(r"^    \* (.*?):?$", proc.stdout + proc.stderr, re.MULTILINE))
    assert found - ACCEPTED_LINTS == set(), proc.stdout[-4000:] + proc.stderr[-2000:]


#: pyproject.toml's name of a dependency -> its conda-forge name where the two differ
CONDA_NAMES = {"kubernetes": "python-kubernetes", "docker": "docker-py"}


def test_the_conda_environment_mirrors_the_packages_dependencies():
    import tomllib

    import yaml

    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((PROJECT / "envs" / "throttlelab.yaml").read_text())
    specs = [d for d in env["dependencies"] if isinstance(d, str)]
    specs += [d for entry in env["dependencies"] if isinstance(entry, dict) for d in entry.get("pip", [])]
    wanted = [re.sub(r"^([A-Za-z0-9_.-]+)", lambda m: CONDA_NAMES.get(m.group(1), m.group(1)), d.replace(" ", ""))
              for d in project["dependencies"]]
    missing = [d for d in wanted if d not in specs]
    assert missing == [], f"envs/throttlelab.yaml lacks {missing} of pyproject.toml's dependencies"
    assert f"python{project['requires-python']}" in specs
