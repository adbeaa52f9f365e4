"""The error types every layer raises, and how a cleanup runs every step whatever the others raise.

Each is a plain ``Exception`` subclass whose message names the field, file or
object at fault and the fix; the command line (``throttlelab.cli``) turns any of
them into one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


class ThrottlelabError(Exception):
    """Base of every error the lab raises on purpose."""


class ConfigError(ThrottlelabError, ValueError):
    """Bad input in the configuration; the message names the field and the fix."""


class CatalogueError(ThrottlelabError, ValueError):
    """An experiment or figure that model/catalogue.py does not know; the message names it and the fix."""


class RecordError(ThrottlelabError, ValueError):
    """A record that does not fit the raw log's contract (model/records.py); the message names the record,
    the key and the fix."""


class QuantityError(ThrottlelabError, ValueError):
    """A CPU quantity that cannot be read (e.g. ``2x``, ``-1``)."""


class SpecError(ConfigError):
    """A variant's parameters do not fit the typed spec; the message names the field."""


class CgroupError(ThrottlelabError, RuntimeError):
    """A cgroup file could not be read or written; the message names the path."""


class BuildError(ThrottlelabError, RuntimeError):
    """The workload could not be built; the message says why."""


class BackendError(ThrottlelabError, RuntimeError):
    """A backend cannot do what was asked; the message says what is missing and how to fix it."""


class DesignMismatch(BackendError):
    """A value read back differs from what the design says should be written."""


class InputError(ThrottlelabError, ValueError):
    """A raw log or table the analysis reads is malformed; the message names the file and line."""


class ReportError(ThrottlelabError, ValueError):
    """The report or its archive cannot be made; the message names the missing input."""


def every_step(steps: Iterable[Callable[[], list[str] | None]]) -> list[str]:
    """Run every cleanup step whatever the others do; returns what they did, or raises one
    BackendError naming every step that failed ("; "-joined)."""
    done: list[str] = []
    problems: list[str] = []
    for step in steps:
        try:
            done += step() or []
        except BackendError as exc:
            problems.append(str(exc))
    if problems:
        raise BackendError("; ".join(problems))
    return done
