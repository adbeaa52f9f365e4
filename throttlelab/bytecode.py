"""Compile the package's bytecode once per workflow, where the environment forbids Python to write it.

Every job of a run starts Python afresh: a quick run starts ~280 runners, each with a guardian
process (host/reaper.py). Where PYTHONDONTWRITEBYTECODE is set (as on the machines this project
is developed on), no ``__pycache__`` is ever written, so each of those processes compiled the
package's sources again: ~40 ms of CPU per job, part of it inside the measuring window. Python still
READS bytecode under that setting; :func:`compile_package` writes it (``compileall`` writes whatever
the setting says) and leaves files that are current alone, so a second call costs only the stats.
"""

from __future__ import annotations

import compileall
import os
from pathlib import Path


def compile_package(package_dir: Path) -> bool:
    """Write the bytecode of every module under ``package_dir`` that lacks a current one; False when
    some could not be written (a read-only checkout: the jobs then compile as before, nothing fails)."""
    if not os.access(package_dir, os.W_OK):
        return False
    return bool(compileall.compile_dir(package_dir, quiet=2, workers=1))
