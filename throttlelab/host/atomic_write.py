"""Files written whole or not at all: the text goes to a temporary file beside the target, which is
then renamed over it, so a reader (a Snakemake rule, a later job) never sees half a file, and an
interrupted write leaves the old file or none. The raw logs, the calibration's pilots and every stamp
of the platform's jobs are written this way."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (its folder made if missing), whole or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomically(path: Path, data: Any, indent: int = 1, sort_keys: bool = True) -> None:
    """One JSON document and a newline, whole or not at all (:func:`write_text_atomically`)."""
    write_text_atomically(path, json.dumps(data, indent=indent, sort_keys=sort_keys) + "\n")
