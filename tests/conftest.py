"""Shared fixtures: real-cgroup guards and the workload binaries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from throttlelab import cgroupfs

PROJECT = Path(__file__).resolve().parent.parent


def lab_cgroups() -> list[str]:
    """Every cgroup directory of the lab on this host, in any hierarchy."""
    found = []
    for top in Path("/sys/fs/cgroup").iterdir():
        if top.is_dir():
            found += [str(p) for p in top.glob("throttlelab-*")]
            found += [str(p) for p in top.glob("*/throttlelab-*")]
    return sorted(found)


def workload_pids() -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if (proc / "comm").read_text().strip() == "cpulab":
                    stat = (proc / "stat").read_text()
                    if stat.rsplit(")", 1)[1].split()[0] != "Z":
                        pids.append(int(proc.name))
            except OSError:
                continue
    return pids


@pytest.fixture
def real_cgroups():
    """The host's cgroup flavour, when we may create cgroups (root); skips with the reason otherwise."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create cgroups")
    try:
        fs = cgroupfs.detect()
    except cgroupfs.CgroupError as exc:
        pytest.skip(str(exc))
    yield fs


@pytest.fixture(scope="session")
def binaries(tmp_path_factory) -> dict[str, Path]:
    """Both workload builds, built once per test session."""
    from throttlelab.workload_build import VARIANTS, build_variant

    out = tmp_path_factory.mktemp("cpulab")
    return {variant: build_variant(variant, out / variant / "cpulab") for variant in VARIANTS}
