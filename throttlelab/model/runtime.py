"""Which conversion of cgroup v1 shares to a v2 weight a runc release applies (docs/LAB.md §2).

runc converts a container's shares to cpu.weight itself: linearly before 1.3.2,
quadratically in log2(shares) from 1.3.2 on (runc pull request 4785). The names
are the keys of quantities.RUNTIME_CONVERSIONS: "runc-new" and "runc-old". Pure: the
version string comes from whoever asked runc (`runc --version`, `docker version`).
"""

from __future__ import annotations

import re

RUNC_NEW_FROM = (1, 3, 2)  # runc pull request 4785: quadratic shares -> weight from this release on

#: The kind backend's two clusters (config/kind/new.yaml, old.yaml; docs/LAB.md §4): each runs the runc of one
#: conversion, and a variant runs on the cluster of its runtime.
RUNTIME_OF_KIND_ROLE = {"new": "runc-new", "old": "runc-old"}
KIND_ROLE_OF_RUNTIME = {runtime: role for role, runtime in RUNTIME_OF_KIND_ROLE.items()}

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def runc_version_tuple(text: str) -> tuple[int, ...]:
    """(major, minor, patch) of "1.4.3", "v1.3.2" or "1.1.5+ds1"; () when the text does not start with a version."""
    match = _VERSION.match(text or "")
    return tuple(int(x or 0) for x in match.groups()) if match else ()


def runc_conversion(version: str) -> str | None:
    """The conversion this runc release applies at the container level: "runc-new" (>= 1.3.2,
    quadratic) or "runc-old" (linear); None when the version cannot be read, so that each caller
    says what an unknown runc means to it."""
    parsed = runc_version_tuple(version)
    if not parsed:
        return None
    return "runc-new" if parsed >= RUNC_NEW_FROM else "runc-old"
