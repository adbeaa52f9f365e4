"""The look file of an experiment measured in two stages (results/<backend>/looks/<experiment>.json,
docs/STATISTICS.md §6): written by the analysis's first look (throttlelab/analysis/looks.py), read by the rules to
list the second stage's raw logs of the variants it names and by the findings for the level each check is judged
at. Standard library only: the rules read it while Snakemake builds the DAG."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from throttlelab.errors import InputError


def write(look: dict, path: str | Path) -> Path:
    """The look file, written whole or not at all (a temporary file renamed over it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(look, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read(path: str | Path) -> dict:
    """A look file; one that cannot be read or lacks a field the readers need is an InputError naming it."""
    try:
        look = json.loads(Path(path).read_text())
        if not isinstance(look["experiment"], str) or not isinstance(look["go_on"], bool):
            raise TypeError("experiment must be a name and go_on true or false")
        variants = look["variants"]
        if not isinstance(variants, list) or not all(isinstance(v, str) for v in variants):
            raise TypeError("variants must be a list of variant names")
        if look["go_on"] != bool(variants):
            raise ValueError(f"go_on is {str(look['go_on']).lower()} with {len(variants)} variants going on")
        first, second = (float(level) for level in look["levels"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not a look file ({exc}); delete it to look again") from None
    look["levels"] = [first, second]
    return look


def going_on(path: str | Path) -> list[str]:
    """The variants whose second stage the look says is measured (none: the experiment stopped at its first look)."""
    return read(path)["variants"]
