"""Snakemake's params check without pandas (throttlelab/snakemake_params.py): the same serialized
params, and a no-op plan of a workflow with a param that imports no pandas once it is installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import PROJECT

TOY = textwrap.dedent(
    """
    import atexit, sys
    sys.path.insert(0, {project!r})
    # Snakemake runs no onsuccess handler when it has nothing to do: say it at exit
    atexit.register(lambda: open("pandas.txt", "w").write(str("pandas" in sys.modules)))
    if {install}:
        from throttlelab import snakemake_params
        snakemake_params.install()

    rule all:
        input: "out.txt"

    rule one:
        output: "out.txt"
        params: word="a", number=3, function=lambda wildcards: "from a function"
        shell: "touch {{output}}"
    """
)


def plan_twice(tmp_path, install: bool) -> str:
    """Run the toy, then plan it again (nothing to do: the params check reads the metadata); whether
    the second run imported pandas."""
    (tmp_path / "Snakefile").write_text(TOY.format(project=str(PROJECT), install=install))
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "all"]
    for _ in range(2):
        proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nothing to be done" in proc.stderr, proc.stderr[-3000:]
    return (tmp_path / "pandas.txt").read_text()


@pytest.mark.snakemake
def test_a_no_op_plan_imports_no_pandas_once_installed(tmp_path):
    assert plan_twice(tmp_path, install=True) == "False"


@pytest.mark.snakemake
def test_stock_snakemake_imports_pandas_to_check_params(tmp_path):
    """What the change is for: if this fails, Snakemake stopped importing pandas and the change can go."""
    assert plan_twice(tmp_path, install=False) == "True"


def test_install_finds_what_it_replaces_and_serializes_params_as_snakemake_does(monkeypatch):
    import pandas  # noqa: F401 (Snakemake's own serializer imports it)
    from snakemake.persistence import PersistenceBase as Persistence

    from throttlelab import snakemake_params

    assert isinstance(Persistence.__dict__["_serialize_param"], property), "see throttlelab/snakemake_params.py"
    stub = type("Stub", (Persistence,), {name: lambda *args: None for name in Persistence.__abstractmethods__})
    persistence = stub.__new__(stub)  # no metadata folder: only the serializers are used
    values = ["results/local/tables", 0.95, 20261130, "--backend-settings '{}'", None, ["a", 1]]
    stock = [Persistence._serialize_param_pandas(persistence, v) for v in values]
    snakemake_params.install()
    assert snakemake_params.installed()
    assert not snakemake_params.install(), "a second install changes nothing"
    assert persistence._serialize_param == persistence._serialize_param_pandas  # pandas imported: Snakemake's
    monkeypatch.delitem(sys.modules, "pandas")
    assert persistence._serialize_param == persistence._serialize_param_builtin
    assert [persistence._serialize_param(v) for v in values] == stock
