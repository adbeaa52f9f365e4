"""Which kind binary `snakemake clean` deletes the lab's clusters with (platform/kind_clusters.deleting_kind):
any release deletes a cluster by name, so clean finds one whatever kind.node_images says now."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from throttlelab.platform.kind_clusters import KindCluster, deleting_kind

pytestmark = pytest.mark.fast


def fake_kind(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho kind v0.33.0\n")
    path.chmod(0o755)
    return path


def cluster(tmp_path: Path, binary: str) -> KindCluster:
    return KindCluster("new", "throttlelab-new", binary, "v0.33.0", tmp_path, None, "published")


def test_the_configured_kind_first(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    configured = fake_kind(tmp_path / "bin" / "kind")
    assert deleting_kind(cluster(tmp_path, str(configured))) == str(configured)


def test_the_kind_that_made_it_when_the_configured_one_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    made_with = fake_kind(tmp_path / "cache" / "elsewhere" / "kind")
    c = cluster(tmp_path, "kind")  # kind.binary's default: not on this PATH
    c.stamp.parent.mkdir(parents=True)
    c.stamp.write_text(json.dumps({"cluster": c.name, "kind_binary": str(made_with)}))
    assert deleting_kind(c) == str(made_with)


def test_a_kind_of_the_tool_cache_when_nothing_else_is_found(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    cached = fake_kind(tmp_path / "cache" / "throttlelab" / "cluster-tools" / "kind-v0.30.0" / "bin" / "kind")
    assert deleting_kind(cluster(tmp_path, "/no/such/kind")) == str(cached)
    (cached).unlink()
    assert deleting_kind(cluster(tmp_path, "/no/such/kind")) is None
