"""The package's bytecode is written once per workflow even where Python may not write it
(throttlelab/bytecode.py), and a process under PYTHONDONTWRITEBYTECODE then loads it instead of
compiling the sources."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from throttlelab import bytecode


def make_package(root: Path) -> Path:
    pkg = root / "toypkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "mod.py").write_text("VALUE = 3\n")
    return pkg


def loaded_from(root: Path) -> str:
    """Where a fresh interpreter that may not write bytecode got toypkg.sub.mod's code from."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(root)}
    env.pop("PYTHONPYCACHEPREFIX", None)
    out = subprocess.run(
        [sys.executable, "-v", "-c", "import toypkg.sub.mod"], env=env, capture_output=True, text=True, check=True
    )
    (line,) = [
        line
        for line in out.stderr.splitlines()
        if "code object from" in line and "toypkg/sub/" in line and "/mod." in line
    ]
    return line


def test_compiles_what_the_environment_would_not_write(tmp_path):
    pkg = make_package(tmp_path)
    assert "mod.py" in loaded_from(tmp_path)  # compiled from source: nothing was written
    assert not list(pkg.rglob("*.pyc"))
    assert bytecode.compile_package(pkg)
    assert {p.parent.parent.name for p in pkg.rglob("*.pyc")} == {"toypkg", "sub"}
    assert loaded_from(tmp_path).rstrip("'").endswith(".pyc")


def test_a_current_file_is_left_alone_and_a_changed_one_is_rewritten(tmp_path):
    pkg = make_package(tmp_path)
    bytecode.compile_package(pkg)
    (pyc,) = (pkg / "sub" / "__pycache__").glob("mod.*.pyc")
    first = pyc.stat().st_mtime_ns
    bytecode.compile_package(pkg)
    assert pyc.stat().st_mtime_ns == first
    (pkg / "sub" / "mod.py").write_text("VALUE = 4\n")
    later = first + 10 * 10**9  # a pyc records its source's mtime in whole seconds
    os.utime(pkg / "sub" / "mod.py", ns=(later, later))
    bytecode.compile_package(pkg)
    assert pyc.stat().st_mtime_ns != first


def test_a_read_only_package_is_no_error(tmp_path):
    pkg = make_package(tmp_path)
    pkg.chmod(0o555)
    try:
        if os.access(pkg, os.W_OK):  # root writes anyway: the call must still succeed
            assert bytecode.compile_package(pkg)
        else:
            assert bytecode.compile_package(pkg) is False
    finally:
        pkg.chmod(0o755)
