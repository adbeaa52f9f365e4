"""CI's phases (.ci/phases): the check that every test is in exactly one of them (.ci/check-phases), and
``--no-skip`` (tests/conftest.py), under which a skip that :data:`conftest.EXPECTED_SKIPS` does not name
fails the session, in a plain run and under pytest-xdist's workers alike."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import EXPECTED_SKIPS, PROJECT, TESTS, unexpected_skip


def _check_phases():
    loader = importlib.machinery.SourceFileLoader("check_phases", str(PROJECT / ".ci" / "check-phases"))
    spec = importlib.util.spec_from_loader("check_phases", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_a_partition_has_no_problem_and_each_test_outside_one_is_named():
    partition_problems = _check_phases().partition_problems
    everything = ["t.py::a", "t.py::b", "t.py::c"]
    assert partition_problems(everything, {"P": ["t.py::a", "t.py::c"], "S": ["t.py::b"]}) == []
    problems = partition_problems(everything, {"P": ["t.py::a", "t.py::b"], "S": ["t.py::b", "gone.py::d"], "K": []})
    assert problems == [
        "t.py::b: in 2 phases (P, S)",
        "t.py::c: in no phase",
        "gone.py::d: in S but not in the whole suite",
    ]


def test_the_phases_are_read_as_bash_expands_them():
    check = _check_phases()
    parallel, serial = check.phase_arguments("PARALLEL"), check.phase_arguments("SERIAL")
    kind = check.phase_arguments("KIND_SMOKE")
    assert parallel[0] == serial[0] == "-m" and " or " in parallel[1] and "root" in serial[1]
    assert all(f"--ignore={path}" in parallel and f"--ignore={path}" in serial for path in kind)
    assert all((PROJECT / path).is_file() for path in kind)
    with pytest.raises(SystemExit, match="no arguments for NOWHERE"):
        check.phase_arguments("NOWHERE")


def test_every_expected_skip_names_existing_tests_and_why():
    for start, (reason, why) in EXPECTED_SKIPS.items():
        assert (PROJECT / start.split("::")[0]).is_file(), start
        assert reason and len(why) > 20, start
    assert not unexpected_skip("tests/host/test_cgroup_v2_kernel.py::test_x", "needs a cgroup v2 kernel (here v1)")
    assert unexpected_skip("tests/host/test_cgroup_v2_kernel.py::test_x", "needs root to create cgroups")
    assert unexpected_skip("tests/host/test_cgroupfs.py::test_x", "needs a cgroup v2 kernel (here v1)")


TESTS_OF_A_TOY = {
    "tests/host/test_cgroup_v2_kernel.py": """
        import pytest

        def test_expected():
            pytest.skip("needs a cgroup v2 kernel (this host's is v1)")
    """,
    "tests/toy-suite/test_runs.py": """
        def test_runs():
            pass
    """,
    "tests/toy-suite/test_lacks.py": """
        import pytest

        def test_lacks_a_tool():
            pytest.skip("no frobnicator installed")
    """,
    "tests/toy-suite/test_wrong_reason.py": """
        import pytest

        def test_skipped_for_another_reason():
            pytest.skip("needs a cgroup v2 kernel, but this file is not the one allowed to say so")
    """,
    "tests/toy-suite/test_whole_module.py": """
        import pytest

        pytest.skip("the whole module lacks its tool", allow_module_level=True)
    """,
}


def _toy(tmp_path: Path) -> Path:
    for name, text in TESTS_OF_A_TOY.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def _pytest(where: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest in ``where`` with this project's conftest as its plugin (its options and hooks)."""
    env = {**os.environ, "PYTHONPATH": str(TESTS), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q", "-rs", *args]
    return subprocess.run(command, cwd=where, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_no_skip_fails_on_each_unexpected_skip_and_names_it_with_its_reason(tmp_path, workers):
    proc = _pytest(_toy(tmp_path), "--no-skip", *workers)
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "--no-skip: 3 unexpected skips fail this run" in out, out
    for nodeid, reason in (
        ("tests/toy-suite/test_lacks.py::test_lacks_a_tool", "no frobnicator installed"),
        ("tests/toy-suite/test_wrong_reason.py::test_skipped_for_another_reason", "needs a cgroup v2 kernel, but"),
        ("tests/toy-suite/test_whole_module.py", "the whole module lacks its tool"),
    ):
        assert f"  {nodeid}: {reason}" in out, out
    assert "test_cgroup_v2_kernel.py::test_expected:" not in out, out


def test_an_expected_skip_alone_passes_with_no_skip_and_any_skip_passes_without_it(tmp_path):
    toy = _toy(tmp_path)
    expected = _pytest(toy, "--no-skip", "tests/host", "tests/toy-suite/test_runs.py")
    assert expected.returncode == 0 and "1 passed, 1 skipped" in expected.stdout, expected.stdout
    without = _pytest(toy)
    assert without.returncode == 0 and "unexpected skips" not in without.stdout, without.stdout
