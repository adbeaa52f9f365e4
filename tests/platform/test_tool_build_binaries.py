"""The cluster tools as built in the cache (`snakemake --cores 2 cluster_tools`): every binary runs
and prints the version cluster/ pins. A project not built for the current pins is skipped with the
command that builds it, unless THROTTLELAB_BUILD_CLUSTER_TOOLS=1 lets this test build it (long:
see docs/PLATFORM.md, "Cluster tools"). The cache is the default one, or THROTTLELAB_CLUSTER_TOOLS_SETTINGS
(config.yaml's cluster_tools section as JSON)."""

from __future__ import annotations

import json
import os

import pytest

from conftest import PROJECT
from throttlelab.platform import tool_build as build
from throttlelab.platform import tool_catalogue as catalogue

pytestmark = pytest.mark.slow

SETTINGS = build.ToolsSettings.from_mapping(json.loads(os.environ.get("THROTTLELAB_CLUSTER_TOOLS_SETTINGS", "{}")))


@pytest.mark.parametrize("name", catalogue.PROJECT_NAMES)
def test_each_built_tool_prints_its_pinned_version(name):
    rows = [row for row in build.cached(PROJECT / "cluster", SETTINGS) if row["project"] == name]
    cold = [f"{row['binary'].name} ({row['problem']})" for row in rows if row["problem"]]
    if cold:
        if os.environ.get("THROTTLELAB_BUILD_CLUSTER_TOOLS") != "1":
            pytest.skip(
                f"{name} is not built in {SETTINGS.cache}: {', '.join(cold)}; build it with "
                f"`snakemake --cores 2 {'cluster_tools' if name in catalogue.NODE_PROJECT_NAMES else 'kind_tools'}` "
                "(or set THROTTLELAB_BUILD_CLUSTER_TOOLS=1)"
            )
        build.build_project(name, PROJECT / "cluster", SETTINGS, jobs=2)
        rows = [row for row in build.cached(PROJECT / "cluster", SETTINGS) if row["project"] == name]
    for row in rows:
        assert row["problem"] is None, row
        lines = build.checked_version(row["path"], row["binary"], row["version"])  # raises naming what is wrong
        assert catalogue.printed_version(row["binary"], "\n".join(lines)) == catalogue.expected_version(
            row["binary"], row["version"]
        )
