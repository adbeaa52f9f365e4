"""The cpulab workload: Go checks, and the real binaries on this machine.

The `binaries` session fixture (conftest.py) builds both go.mod variants
once through throttlelab.host.gobuild.build_variant.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from throttlelab.host.gobuild import go_environment, find_go

from conftest import PROJECT as REPO

pytestmark = pytest.mark.workload  # the Go checks and the real binaries

WORKLOAD = REPO / "workload"
V1_CPU = Path("/sys/fs/cgroup/cpu")
V1_CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def parse_records(stdout: str) -> list[dict]:
    records = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    assert all("type" in r for r in records), "every record needs a type"
    return records


def of_type(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r["type"] == kind]


def run_cpulab(binary: Path, *args: str, timeout: float = 30, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout, **kwargs)


# --- Go checks -------------------------------------------------------------


def test_go_vet_gofmt_and_go_test_pass():
    go, env = find_go(), go_environment()
    vet = subprocess.run([go, "vet", "./..."], cwd=WORKLOAD, env=env, capture_output=True, text=True)
    assert vet.returncode == 0, vet.stderr
    goroot = subprocess.run([go, "env", "GOROOT"], env=env, capture_output=True, text=True, check=True)
    gofmt = Path(goroot.stdout.strip()) / "bin" / "gofmt"
    fmt = subprocess.run([str(gofmt), "-l", "."], cwd=WORKLOAD, capture_output=True, text=True)
    assert fmt.returncode == 0 and fmt.stdout == "", f"not gofmt-clean: {fmt.stdout}{fmt.stderr}"
    # one package at a time (-p 1): the pacer's and the thread clock's tests hold wake-ups and CPU time to
    # fractions of a millisecond, which the other packages' builds and busy tests would blur on a small machine
    tests = subprocess.run(
        [go, "test", "-p", "1", "./..."], cwd=WORKLOAD, env=env, capture_output=True, text=True, timeout=240
    )
    # the failing packages and tests first: pytest may cut a long message, never its start
    failures = [
        line
        for line in (tests.stdout + tests.stderr).splitlines()
        if line.startswith(("--- FAIL", "FAIL", "panic:")) or "_test.go:" in line
    ]
    assert tests.returncode == 0, "\n".join(failures) + "\n\n" + tests.stdout + tests.stderr


# --- info ------------------------------------------------------------------

HEADER_KEYS = {
    "type",
    "program",
    "version",
    "variant",
    "go_version",
    "gomaxprocs",
    "num_cpu",
    "env",
    "default_godebug",
    "cgroup",
    "command",
    "params",
    "pid",
    "time",
}
CGROUP_KEYS = {
    "version",
    "path",
    "quota_us",
    "period_us",
    "burst_us",
    "weight",
    "shares",
    "nr_periods",
    "nr_throttled",
    "throttled_usec",
    "usage_usec",
}


def test_info_of_both_builds(binaries):
    headers = {}
    for variant, binary in binaries.items():
        result = run_cpulab(binary, "info")
        assert result.returncode == 0, result.stderr
        header, summary = parse_records(result.stdout)
        assert HEADER_KEYS <= header.keys()
        assert header["type"] == "header" and header["program"] == "cpulab"
        assert header["variant"] == variant and header["command"] == "info"
        assert header["go_version"].startswith("go") and isinstance(header["pid"], int)
        assert set(header["env"]) == {"GOMAXPROCS", "GODEBUG"}
        assert CGROUP_KEYS <= header["cgroup"].keys() and header["cgroup"]["version"] in (1, 2)
        assert summary == {
            "type": "summary",
            "gomaxprocs": header["gomaxprocs"],
            "num_cpu": header["num_cpu"],
            "cgroup": summary["cgroup"],
        }
        headers[variant] = header
    # The go.mod line alone changes the defaults baked into the binary.
    old, new = headers["go124mod"]["default_godebug"], headers["go125mod"]["default_godebug"]
    assert old != new
    assert "containermaxprocs=0" in old.split(",")
    assert "containermaxprocs=0" not in new.split(",")


# --- burst in a real cgroup v1 quota ---------------------------------------


def _remove_cgroup(path: Path) -> None:
    """Move any remaining task to the parent, then remove the directory."""
    if not path.exists():
        return
    for _ in range(50):
        for pid in (path / "cgroup.procs").read_text().split():
            try:
                (path.parent / "cgroup.procs").write_text(pid)
            except OSError:
                pass  # the task exited meanwhile
        try:
            path.rmdir()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"could not remove cgroup {path}")


@pytest.fixture
def v1_cgroups(request):
    """Make cgroups in the v1 cpu and cpuacct hierarchies; always removed."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create cgroups")
    if not (V1_CPU / "cpu.cfs_quota_us").exists():
        pytest.skip("no cgroup v1 cpu controller at /sys/fs/cgroup/cpu")
    created: list[Path] = []

    def make(name: str, quota_us: int) -> list[Path]:
        dirs = [V1_CPU / name]
        # cpuacct is a separate mount here; with the combined cpu,cpuacct
        # mount both names lead to the same directory.
        if V1_CPUACCT.exists() and V1_CPUACCT.resolve() != V1_CPU.resolve():
            dirs.append(V1_CPUACCT / name)
        for d in dirs:
            d.mkdir()
            created.append(d)
        (dirs[0] / "cpu.cfs_period_us").write_text("100000")
        (dirs[0] / "cpu.cfs_quota_us").write_text(str(quota_us))
        # The highest weight, so other work on this host barely delays the
        # bursts and the wall times compare throttled with unthrottled.
        (dirs[0] / "cpu.shares").write_text("262144")
        return dirs

    def cleanup():
        for d in reversed(created):
            _remove_cgroup(d)

    request.addfinalizer(cleanup)
    return make


def run_in_cgroup(binary: Path, dirs: list[Path], *args: str) -> list[dict]:
    def join_cgroups():  # runs in the child before exec
        for d in dirs:
            (d / "cgroup.procs").write_text(str(os.getpid()))

    result = run_cpulab(binary, *args, preexec_fn=join_cgroups)
    assert result.returncode == 0, result.stderr
    return parse_records(result.stdout)


def test_burst_is_throttled_by_a_v1_quota(binaries, v1_cgroups):
    binary = binaries["go124mod"]
    name = f"throttlelab-test-{os.getpid()}"
    # 4 threads x 20 ms = 80 ms of CPU per round against 50 ms per 100 ms.
    # A 230 ms interval keeps the average below the quota and moves each
    # round's start by 30 ms against the period grid, so rounds meet the
    # quota at different points of a period.
    burst = ("burst", "-threads=4", "-work=20ms", "-interval=230ms", "-rounds=8")
    limited = run_in_cgroup(binary, v1_cgroups(f"{name}-limited", 50000), *burst)
    free = run_in_cgroup(binary, v1_cgroups(f"{name}-free", -1), *burst)

    header = limited[0]
    assert header["cgroup"]["version"] == 1 and header["cgroup"]["path"] == f"/{name}-limited"
    assert header["cgroup"]["quota_us"] == 50000 and header["cgroup"]["period_us"] == 100000
    assert header["params"] == {
        "threads": 4,
        "work": 20.0,
        "interval": 230.0,
        "rounds": 8,
        "align": False,
        "offset": 0,
        "spread": False,
    }
    rounds = of_type(limited, "round")
    assert len(rounds) == 8
    # Work is thread CPU time, not wall time: at least the 20 ms asked, and well under the round's wall time
    # (4 threads on at most 2 CPUs, throttled). The thread clock may run a little over where the hypervisor
    # takes the vCPU mid-burn (steal time counts as the thread's), so one round may overshoot, not most.
    cpu = sorted(r["thread_cpu_ms"] for r in rounds)
    assert cpu[0] >= 19.9 and cpu[len(cpu) // 2] <= 21, cpu
    assert all(r["thread_cpu_ms"] < 0.8 * r["wall_ms"] for r in rounds), [
        (r["thread_cpu_ms"], r["wall_ms"]) for r in rounds
    ]
    assert all(r["d_usage_usec"] >= 4 * 19_900 for r in rounds)

    throttled, unthrottled = of_type(limited, "summary")[0], of_type(free, "summary")[0]
    assert throttled["nr_throttled"] > 0 and throttled["throttled_usec"] > 0
    assert unthrottled["nr_throttled"] == 0
    assert throttled["p50_wall_ms"] > 1.2 * unthrottled["p50_wall_ms"], (throttled, unthrottled)


# --- serve + load on loopback ----------------------------------------------


@pytest.fixture
def serve(binaries, request):
    """A `cpulab serve` on 127.0.0.1 with a free port; always terminated."""
    proc = subprocess.Popen(
        [str(binaries["go124mod"]), "serve", "-addr=127.0.0.1:0", "-live-mb=16"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def stop():
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()

    request.addfinalizer(stop)
    records = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        records.append(json.loads(line))
        if records[-1]["type"] == "listening":
            return proc, records[-1]["addr"]
    pytest.fail(f"serve did not start: {records} {proc.stderr.read() if proc.poll() is not None else ''}")


def test_serve_and_load_on_loopback(binaries, serve):
    proc, addr = serve
    result = run_cpulab(
        binaries["go124mod"],
        "load",
        f"-target=http://{addr}",
        "-rps=100",
        "-clump=5",
        "-ping-rps=20",
        "-duration=3s",
        "-warmup=500ms",
        "-timeout=5s",
        "-label=pytest",
    )
    assert result.returncode == 0, result.stderr
    records = parse_records(result.stdout)
    assert records[0]["type"] == "header" and records[0]["params"]["target"] == [f"http://{addr}"]
    reqs = of_type(records, "req")
    summary = records[-1]
    assert summary["type"] == "summary" and summary["window_s"] == pytest.approx(3, abs=0.05)
    work, ping = summary["work"], summary["ping"]
    assert work["errors"] == 0 and ping["errors"] == 0
    assert work["sent"] > 150 and ping["sent"] > 20
    assert len(reqs) == work["sent"] + ping["sent"]
    assert all(r["ok"] and r["status"] == 200 and r["lat_ms"] > 0 and r["late_ms"] >= 0 for r in reqs)
    assert all(0 <= r["sched_ms"] < 3000 for r in reqs), "warmup requests must not be recorded"
    assert 0 < work["p50_ms"] <= work["p99_ms"] <= work["max_ms"]
    stats = of_type(records, "stats")
    assert [s["when"] for s in stats] == ["before", "after"]
    assert stats[1]["stats"]["requests"] > stats[0]["stats"]["requests"]

    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=15)
    assert proc.returncode == 0
    serve_summary = parse_records(out)[-1]
    assert serve_summary["type"] == "summary" and serve_summary["requests"] >= len(reqs)


# --- bad input ---------------------------------------------------------------


@pytest.mark.parametrize(
    "args, mentions",
    [
        ((), "usage"),
        (("frobnicate",), "unknown subcommand"),
        (("burst", "-nope"), "-nope"),
        (("burst", "-threads=0"), "-threads"),
        (("burst", "-work=-20ms"), "-work"),
        (("spin", "-report=0s"), "-report"),
        (("serve", "-alloc=-1"), "-alloc"),
        (("load", "-target=http://127.0.0.1:9", "-rps=-1"), "-rps"),
        (("load", "-target=http://127.0.0.1:9", "-duration=0s"), "-duration"),
    ],
)
def test_bad_input_exits_2(binaries, args, mentions):
    result = run_cpulab(binaries["go124mod"], *args)
    assert result.returncode == 2
    assert mentions in result.stderr
    assert result.stdout == ""
