"""This host's mount table (``/proc/self/mountinfo``): the cgroup hierarchies, and what is mounted below a folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
_ESCAPED = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    """The kernel writes a space, tab, newline or backslash in a path as an octal escape (``\\040``)."""
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 8)), field)


def mount_points(mountinfo: Path = MOUNTINFO) -> list[tuple[str, str]]:
    """(mount point, file system type) of every mount, in the table's order."""
    found = []
    for line in mountinfo.read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and tail:
            found.append((_unescape(fields[4]), tail[0]))
    return found


def cgroup_hierarchies(mountinfo: Path = MOUNTINFO) -> list[Path]:
    """Every cgroup hierarchy mounted here: the v1 controllers' and named ones, and the unified one (a hybrid
    layout's too: runc creates a container's cgroup in every hierarchy, so removing it must walk them all)."""
    return [Path(point) for point, fstype in mount_points(mountinfo) if fstype in ("cgroup", "cgroup2")]


def mounts_under(path: Path, mountinfo: Path = MOUNTINFO) -> list[str]:
    """The mount points at or below ``path`` (a folder, not a prefix: ``/a/b`` is not under ``/a/bc``),
    deepest first, so that each can be undone before the one it sits on."""
    root = os.path.realpath(path)
    found = [point for point, _ in mount_points(mountinfo) if point == root or point.startswith(root + "/")]
    return sorted(found, key=len, reverse=True)
