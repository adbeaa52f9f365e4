"""Shared fixtures (real-cgroup guards, the workload binaries), the inner loop's selection and the `--full` switch.

``-m fast`` is the contributors' inner loop (docs/DEVELOPMENT.md): every test that needs none of
what :data:`OUTER_MARKERS` name and lives outside :data:`OUTER_FOLDERS`. A test's markers come from
its module and from the fixtures it uses (:data:`FIXTURE_MARKERS`), so a new test that builds the
workload or starts the loopback API server leaves the inner loop by itself.

Without ``--full`` (the README's test command) the tests of :data:`FULL_MARKERS` and
:data:`FULL_FOLDERS` are deselected, and the run's summary says how many and what ``--full`` adds;
CI (.ci/run) passes ``--full``.

With ``--no-skip`` (CI's phases, .ci/phases) a skip fails the session, naming the test and its reason,
unless :data:`EXPECTED_SKIPS` names it with that reason."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from throttlelab.host import cgroupfs
from throttlelab.model.placement import Container, Node, Pod

PROJECT = Path(__file__).resolve().parent.parent
TESTS = PROJECT / "tests"
FIXTURE_ROOT = TESTS / "fixtures"

#: What a test needs when it uses one of these fixtures (the markers are described in pyproject.toml).
FIXTURE_MARKERS = {
    "binaries": "workload",  # builds both cpulab builds with the Go toolchain and runs them
    "podgate": "workload",  # builds the kind node's gate in front of cpulab (tests/backends/kind) and runs it
    "real_cgroups": "root",  # creates cgroups on this host
    "api": "kube_api",  # the loopback Kubernetes API server (tests/kube_api_server.py)
    "sent_manifests": "kube_api",
    "v2_guest": "vm",  # boots a QEMU guest with a cgroup v2 kernel (tests/v2_guest.py)
}
#: Tests with one of these markers stay out of the inner loop: real workloads, real cgroups, guests,
#: Docker, the loopback API server's waits, Snakemake runs, long runs.
OUTER_MARKERS = ("slow", "root", "docker", "vm", "cgroup_v2_kernel", "workload", "kube_api", "snakemake", "real_node")
#: Folders out of the inner loop whatever their tests' markers: the workflow end to end (Snakemake's plans and
#: runs) and the kind backend on real processes and containers standing in for its nodes (podgate's Go build).
OUTER_FOLDERS = ("pipeline", "backends/kind")
#: What only ``--full`` runs: QEMU guests (`vm`, and `cgroup_v2_kernel`, which CI runs inside a guest), the lab's
#: real node, Docker, and what `full` marks (the `ci` profile end to end, the kind backend's pipeline).
FULL_MARKERS = ("vm", "cgroup_v2_kernel", "real_node", "docker", "full")
#: Folders whose tests only ``--full`` runs, but for those of the inner loop: kind on its stand-ins (Docker
#: containers as nodes, podgate's Go build) and on real clusters.
FULL_FOLDERS = ("backends/kind",)
#: What ``--full`` adds and needs, for the run's summary line.
FULL_ADDS = (
    "QEMU guests (qemu-system-x86, a kernel, busybox-static), the real node (the cluster tools built), "
    "Docker and kind (an engine), the `ci` profile end to end"
)


#: The skips ``--no-skip`` lets pass: a node id's start -> (how its skip reason starts, why the skip is expected).
#: Any other skip under ``--no-skip`` fails the session: a test CI cannot run there is a test CI does not run.
EXPECTED_SKIPS: Mapping[str, tuple[str, str]] = {
    "tests/host/test_cgroup_v2_kernel.py::": (
        "needs a cgroup v2 kernel",
        "on a cgroup v1 host they run inside a v2 guest instead "
        "(tests/platform/test_vm_guest.py::test_cgroup_v2_kernel_tests_pass_in_a_v2_guest)",
    ),
    "tests/pipeline/test_kind_pipeline.py::test_published_node_images_without_a_registry_": (
        "a container registry can be reached from here",
        "the refusal it checks happens only where Docker Hub cannot be reached; a machine that reaches it "
        "(CI's, when it downloads its packages) can pull the published node images",
    ),
}


#: E1's node as the kube and kind backends' tests deploy it: an app and a sidecar in one pod, both limited.
E1_NODE = Node(
    "node",
    (
        Pod(
            "e1",
            (
                Container("app", ("info",), request_milli=500, limit_milli=2000),
                Container("sidecar", ("info",), request_milli=100, limit_milli=500),
            ),
        ),
    ),
)


#: E6's variant `limit` as the findings' and the timing's tests give it: a 2-thread burst every 330 ms
#: under a 250m limit, 20 rounds after 5 of calibration.
E6_LIMIT = {
    "build": "go124mod",
    "threads": 2,
    "work_ms": 20,
    "interval_ms": 330,
    "rounds": 20,
    "calibration_rounds": 5,
    "request": "100m",
    "limit": "250m",
}

#: An X5 arm as the calibration's tests give it (a service limited to 200m, 2 ms of work per request, steady
#: arrivals and pings, the CPU per request the profile states); each test adds its window and placement.
X5_ARM = {
    "request": "500m",
    "limit": "200m",
    "work_us": 2000,
    "alloc_bytes": 0,
    "live_mb": 0,
    "clump": 1,
    "ping_rps": 4,
    "warmup_ms": 200,
    "request_cpu_us": 4000,
}


def runner_arguments(
    backend: str, experiment: str, variant: str, spec: dict, binaries: Mapping[str, Path], out: Path, *options: str
) -> list[str]:
    """The runner's arguments for repeat 0 of one job: the variant's spec as JSON, every workload build,
    ``options`` (the runner's other flags) and the raw log ``out``."""
    return [
        "--backend",
        backend,
        "--experiment",
        experiment,
        "--variant",
        variant,
        "--repeat",
        "0",
        "--spec",
        json.dumps(spec),
        *(word for build, path in binaries.items() for word in ("--binary", f"{build}={path}")),
        *options,
        "--out",
        str(out),
    ]


def assert_workload_copy_current(module: str, writer: str, path: str) -> None:
    """A file the Go workload's tests read (``path``), written by ``throttlelab.model.<module>.<writer>()``:
    the committed copy is what the package writes now."""
    fresh = getattr(importlib.import_module(f"throttlelab.model.{module}"), writer)()
    regenerate = f"from throttlelab.model import {module}; open('{path}', 'w').write({module}.{writer}())"
    assert (PROJECT / path).read_text() == fresh, f'{path} is stale: regenerate it: .venv/bin/python -c "{regenerate}"'


def snakemake_command(workdir: Path, *args: str) -> list[str]:
    """This checkout's workflow in ``workdir`` on one core (``args``: targets, flags, ``--config``)."""
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(PROJECT / "Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "1",
        *args,
    ]


def snakemake(workdir: Path, *args: str, timeout: float = 600, **popen) -> subprocess.CompletedProcess:
    """:func:`snakemake_command` run to its end, its output captured; the tests that drive the pipeline end to
    end share it."""
    return subprocess.run(snakemake_command(workdir, *args), capture_output=True, text=True, timeout=timeout, **popen)


def pytest_addoption(parser):
    parser.addoption(
        "--full",
        action="store_true",
        help=f"also run what CI runs beyond the README's test command: {FULL_ADDS}",
    )
    parser.addoption(
        "--no-skip",
        action="store_true",
        help="fail the session on a skip that tests/conftest.py's EXPECTED_SKIPS does not name (CI's phases)",
    )


def _in(item, folders: tuple[str, ...]) -> bool:
    folder = item.path.parent.relative_to(TESTS).as_posix() if item.path.is_relative_to(TESTS) else ""
    return any(folder == f or folder.startswith(f"{f}/") for f in folders)


def _full_only(item) -> bool:
    if any(item.get_closest_marker(m) for m in FULL_MARKERS):
        return True
    return _in(item, FULL_FOLDERS) and not item.get_closest_marker("fast")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    wrong = []
    for item in items:
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)
        outer = [m for m in OUTER_MARKERS if item.get_closest_marker(m)]
        if item.get_closest_marker("fast"):
            if outer:  # a module marked fast as a whole holds a test that needs more than Python
                wrong.append(f"{item.nodeid}: marked fast but also {', '.join(outer)}")
        elif not _in(item, OUTER_FOLDERS) and not outer:
            item.add_marker("fast")
    if wrong:
        raise pytest.UsageError("the inner loop (-m fast) would run tests it must not:\n" + "\n".join(wrong))


class FullSwitch:
    """Deselects the tests only ``--full`` runs, after ``-m`` and ``-k`` have chosen theirs (so the count is what
    the switch alone left out), and says so in one line at the end of the run."""

    def __init__(self) -> None:
        self.left_out = 0

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        kept, left = [], []
        for item in items:
            (left if _full_only(item) else kept).append(item)
        if left:
            items[:] = kept
            config.hook.pytest_deselected(items=left)
            self.left_out = len(left)

    def pytest_terminal_summary(self, terminalreporter):
        if self.left_out:
            terminalreporter.write_line(
                f"{self.left_out} tests left out, they run with --full: {FULL_ADDS}", yellow=True, bold=True
            )


def skip_reason(report) -> str:
    """What a skipped test or module said (pytest keeps it as (file, line, "Skipped: <reason>"))."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, (tuple, list)) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def unexpected_skip(nodeid: str, reason: str, expected: Mapping[str, tuple[str, str]] = EXPECTED_SKIPS) -> bool:
    """Whether ``--no-skip`` fails on this skip: no entry of ``expected`` names the test with this reason."""
    return not any(nodeid.startswith(start) and reason.startswith(why) for start, (why, _) in expected.items())


class NoSkip:
    """``--no-skip``: collects the skips no entry of :data:`EXPECTED_SKIPS` allows, lists them at the end
    and fails the session (under pytest-xdist the workers' reports reach the controller's hooks, so it
    runs in the controller only)."""

    def __init__(self) -> None:
        self.unexpected: list[tuple[str, str]] = []

    def _seen(self, report) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            reason = skip_reason(report)
            if unexpected_skip(report.nodeid, reason):
                self.unexpected.append((report.nodeid, reason))

    def pytest_runtest_logreport(self, report):
        self._seen(report)

    def pytest_collectreport(self, report):
        self._seen(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        if self.unexpected and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter):
        if self.unexpected:
            n = len(self.unexpected)
            terminalreporter.write_line(
                f"--no-skip: {n} unexpected skip{'' if n == 1 else 's'} fail{'s' if n == 1 else ''} this run "
                "(install what each names, or add a skip CI expects to tests/conftest.py's EXPECTED_SKIPS "
                "with its reason):",
                red=True,
                bold=True,
            )
            for nodeid, reason in self.unexpected:
                terminalreporter.write_line(f"  {nodeid}: {reason}", red=True)


def pytest_configure(config):
    if not config.getoption("full"):
        config.pluginmanager.register(FullSwitch(), "throttlelab-full-switch")
    if config.getoption("no_skip") and not hasattr(config, "workerinput"):  # not in a pytest-xdist worker
        config.pluginmanager.register(NoSkip(), "throttlelab-no-skip")


def lab_cgroups() -> list[str]:
    """Every cgroup directory of the lab on this host, in any hierarchy."""
    found = []
    for top in Path("/sys/fs/cgroup").iterdir():
        if top.is_dir():
            found += [str(p) for p in top.glob("throttlelab-*")]
            found += [str(p) for p in top.glob("*/throttlelab-*")]
    return sorted(found)


def _owner(name: str) -> int | None:
    """The pid in a lab cgroup's name: a runner's (throttlelab-<pid>-<n>) or a real node's (throttlelab-node-<pid>)."""
    parts = Path(name).name.split("-")
    if len(parts) == 3 and parts[1] == "node" and parts[2].isdigit():
        return int(parts[2])
    return int(parts[1]) if len(parts) >= 3 and parts[1].isdigit() else None


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _cwd(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def left_behind(workdir: Path | None = None) -> list[str]:
    """Lab cgroups that count against a run: those whose runner is gone (nobody will remove
    them), and those of runners working in `workdir`. Live runs of OTHER invocations on the
    same machine (a developer's second pipeline) are not ours to judge."""
    mine = str(Path(workdir).resolve()) if workdir else None
    out = []
    for path in lab_cgroups():
        owner = _owner(path)
        if owner is None or not _alive(owner) or (mine and _cwd(owner) == mine):
            out.append(path)
    return out


def workload_pids_of(workdir: Path | None = None) -> list[int]:
    """cpulab processes that count against a run: outside any live run of another invocation."""
    mine = str(Path(workdir).resolve()) if workdir else None
    out = []
    for pid in workload_pids():
        try:
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        owners = {
            _owner(part) for line in cgroup.splitlines() for part in line.split("/") if part.startswith("throttlelab-")
        }
        owners.discard(None)
        if not owners or any(not _alive(o) or (mine and _cwd(o) == mine) for o in owners):
            out.append(pid)
    return out


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
    from throttlelab.host.gobuild import build_variant
    from throttlelab.model.builds import BUILDS

    out = tmp_path_factory.mktemp("cpulab")
    return {variant: build_variant(variant, out / variant / "cpulab", PROJECT / "workload") for variant in BUILDS}


def after_every_revision() -> str:
    """A run start (ISO 8601) one second after the threshold registry's latest revision: made-up runs that
    every check judges (a check revised after data judges only the runs made after it, docs/STATISTICS.md §5)."""
    from datetime import timedelta

    from throttlelab.analysis.findings import threshold_registry

    return (max(r.when for r in threshold_registry.REGISTRY.values()) + timedelta(seconds=1)).isoformat()


def e2b_clumped_arms(**window):
    """E2b's two clumped arms (go125mod against go124mod), 3 runs each: runs.csv rows whose ``window`` (rps,
    clump, duration_ms) sets how many clumps a run holds, and per-run metrics of both statistics their
    contrast may compare (work_p90_ms 10-12, work_max_ms 20-22) -> (runs, metrics)."""
    import pandas as pd

    from throttlelab.model.variants import E2B_CLUMPED_LIMIT, E2B_CLUMPED_LIMIT_GO125, VariantSpec

    runs, metrics = [], []
    for variant, build in ((E2B_CLUMPED_LIMIT_GO125, "go125mod"), (E2B_CLUMPED_LIMIT, "go124mod")):
        spec = VariantSpec.from_dict("E2b", variant, {"build": build, "limit": "1", **window})
        for r in range(3):
            runs.append({"experiment": "E2b", "variant": variant, "repeat": r, **spec.columns()})
            metrics += [("E2b", variant, r, "work_p90_ms", 10.0 + r), ("E2b", variant, r, "work_max_ms", 20.0 + r)]
    columns = ["experiment", "variant", "repeat", "metric", "value"]
    return pd.DataFrame(runs), pd.DataFrame.from_records(metrics, columns=columns)


def cluster_tool_rows() -> list[dict]:
    """The cluster tools as the cache holds them for the pins in cluster/ (tool_build.cached: it hashes
    every binary, so a caller reads them once)."""
    from throttlelab.platform.tool_build import ToolsSettings, cached

    return cached(PROJECT / "cluster", ToolsSettings.from_mapping(None))


def real_node_missing(rows: list[dict]) -> str | None:
    """Why the lab's real node cannot start on this host, or in a guest booted from it (a skip's reason,
    naming what to install), or None; ``rows``: :func:`cluster_tool_rows`."""
    from throttlelab.platform import real_node as nc

    if os.geteuid() != 0:
        return "the real node needs root"
    problems = [f"{r['binary'].name}: {r['problem']}" for r in rows if r["problem"] and nc.node_needs(r)]
    if problems:
        return "the cluster tools are not built (snakemake --cores 2 cluster_tools): " + "; ".join(problems[:3])
    for tool, package in (("catatonit", "catatonit"), ("unshare", "util-linux")):
        if not any(Path(d, tool).is_file() for d in ("/usr/bin", "/usr/sbin", "/bin")):
            return f"{tool} is not installed (apt-get install {package})"
    if not any(Path(d, "bridge").is_file() for d in nc.CNI_BIN_DIRS):
        return "the CNI plugins are not installed (apt-get install containernetworking-plugins)"
    return None


@pytest.fixture(scope="session")
def v2_guest(binaries, tmp_path_factory):
    """One cgroup v2 guest per session for the tests that need a v2 kernel (tests/v2_guest.py): the
    ``cgroup_v2_kernel`` tests, then the real node's container weights; skips without QEMU's tools."""
    import v2_guest as guest
    from throttlelab.errors import BackendError
    from throttlelab.platform import vm_guest

    try:
        vm_guest.find_tools(vm_guest.VmSettings())
    except BackendError as exc:
        pytest.skip(str(exc))
    folder = binaries[next(iter(binaries))].parent.parent  # <folder>/<build>/cpulab
    return guest.boot(tmp_path_factory.mktemp("v2-guest"), folder)
