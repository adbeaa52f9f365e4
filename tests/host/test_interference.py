"""The interference meter: /proc/stat parsing, the arithmetic of 'other', and a real run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from throttlelab.host import processes
from throttlelab.host.interference import (
    Interference,
    InterferenceMeter,
    orchestrator_from_env,
    parse_proc_irq,
    parse_proc_stat,
    parse_usage_percpu,
    quiet_ticks,
    wait_for_quiet,
)

STAT = """cpu  100 0 50 1000 5 0 3 2 0 0
cpu0 60 0 30 500 2 0 2 1 0 0
cpu1 40 0 20 500 3 0 1 1 0 0
intr 1 2 3
"""


def test_proc_stat_busy_is_user_nice_system_irq_softirq_steal():
    assert parse_proc_stat(STAT) == {0: 60 + 30 + 2 + 1, 1: 40 + 20 + 1 + 1}


def test_usage_percpu_is_one_value_per_cpu():
    assert parse_usage_percpu("10 20 30\n") == {0: 10, 1: 20, 2: 30}


def test_share_is_of_the_windows_capacity_on_the_runs_cpus():
    seen = Interference(
        cpus=(0, 1), window_s=4.0, busy_s=3.0, lab_s=1.0, runner_s=0.2, outside_s=1.8, lab_scope="per-cpu"
    )
    assert seen.other_share == pytest.approx(1.8 / 8.0) == seen.outside_share
    record = seen.as_record(0.1)
    assert record["disturbed"] is True and record["threshold"] == 0.1
    assert record["orchestrator_s"] is None and "not started" in record["orchestrator_note"]
    assert seen.as_record(0.5)["disturbed"] is False


def _seen(cpus: tuple[int, ...], window_s: float, outside_s: float, **more) -> Interference:
    """A meter's reading where only what lies outside the lab matters (the lab's 1 s and the busy time fixed)."""
    return Interference(
        cpus=cpus,
        window_s=window_s,
        busy_s=outside_s + 1.0,
        lab_s=1.0,
        runner_s=0.0,
        outside_s=outside_s,
        lab_scope="per-cpu",
        **more,
    )


@pytest.mark.parametrize("apart", [True, False])
def test_the_orchestrators_work_above_its_idle_level_is_not_judged_as_other(apart):
    def seen_with(idle_cpu: dict[str, float]) -> Interference:
        return _seen((0, 1), 4.0, 1.8, orchestrator_s=0.4, orchestrator_apart=apart, idle_cpu=idle_cpu)

    seen = seen_with({})
    # per process, not per CPU: where it may also run elsewhere, all of it is taken out (an upper bound)
    assert seen.other_s == pytest.approx(1.4)
    assert seen.orchestrator_cpu == pytest.approx(0.1)  # 0.4 s over a 4 s window: a tenth of one CPU
    record = seen.as_record(0.2)
    # judged on other (1.4 / 8 = 0.175), the plain outside share kept beside it
    assert record["outside_share"] == pytest.approx(0.225) and record["other_share"] == pytest.approx(0.175)
    assert record["disturbed"] is False and seen.as_record(0.17)["disturbed"] is True
    assert record["orchestrator_apart"] is apart and record["orchestrator_cpu"] == pytest.approx(0.1)
    # its idle level (5% of a CPU on the quiet host: 0.2 s of this window) is in the floor, so it stays in other
    assert seen_with({"orchestrator": 0.05}).other_s == pytest.approx(1.6)
    assert seen_with({"orchestrator": 0.2}).other_s == pytest.approx(1.8)  # never more than it used


def test_the_runtimes_work_above_its_idle_level_is_not_judged_as_other():
    def seen_with(runtime_s: float | None, idle: float) -> Interference:
        return _seen((0,), 2.0, 0.4, runtime_s=runtime_s, idle_cpu={"runtime": idle})

    engine = seen_with(0.3, 0.05)  # 0.3 s of the engine, 0.1 s of it its idle level
    assert engine.excess_s("runtime") == pytest.approx(0.2) and engine.other_s == pytest.approx(0.2)
    record = engine.as_record(0.15)
    assert record["runtime_cpu"] == pytest.approx(0.15) and record["runtime_apart"] is False
    assert record["other_share"] == pytest.approx(0.1) and record["disturbed"] is False
    assert record["idle_cpu"] == {"orchestrator": 0.0, "runtime": 0.05, "kernel": 0.0}
    # a backend that names no runtime: nothing is taken out, no runtime keys
    plain = seen_with(None, 0.0)
    assert plain.other_s == pytest.approx(0.4) and "runtime_s" not in plain.as_record(0.15)
    assert plain.as_record(0.15)["disturbed"] is True


def test_one_outside_tick_on_a_quiet_host_does_not_disturb_a_run():
    """A quiet host whose calibration held no outside tick at all: the threshold is the meter's resolution,
    so a 2.5 s window on one CPU with one tick (10 ms) of some other process stays undisturbed."""
    from throttlelab.model import calibration

    quiet = {"step_s": 0.1, "hz": 100, "ticks": [[0, 0]] * 200}
    rule = calibration.threshold_of(quiet, [0], 2.5, ceiling=0.1)
    seen = _seen((0,), 2.5, 0.01)
    assert rule["threshold"] > 0 and seen.as_record(rule["threshold"], rule)["disturbed"] is False
    # nine ticks are what the meter tells from zero there; ten are more
    busier = _seen((0,), 2.5, 0.1)
    assert busier.as_record(rule["threshold"], rule)["disturbed"] is True


def test_processes_are_found_by_their_command_name(tmp_path):
    tasks = ((2, "kthreadd", 0), (11, "dockerd", 1), (12, "containerd-shim", 1), (13, "my (odd) name", 1))
    for pid, comm, parent in (*tasks, (14, "containerd", 11), (21, "kworker/0:1-events", 2)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({comm}) S {parent} {pid} 0 0\n")
    (tmp_path / "15").mkdir()  # ended while the folder was read: no stat
    (tmp_path / "self").mkdir()
    assert processes.named(("dockerd", "containerd-shim", "containerd"), tmp_path) == [11, 12, 14]
    assert processes.named(("my (odd) name",), tmp_path) == [13]
    assert processes.named((), tmp_path) == []
    assert processes.kernel_threads(tmp_path) == [2, 21]


def test_a_runtime_process_is_metered_apart_and_counted_from_its_start():
    """A real process named as a runtime's, started after the meter: its CPU inside the window (a 0.4 s spin)
    is the runtime's, counted from its start; the quiet calibration meters its idle level the same way."""
    name = f"tl-rt-{os.getpid()}"  # the meters find it by name: not another test run's process of the same name
    code = (
        f"import sys, time\nopen('/proc/self/comm', 'w').write({name!r})\nprint('named', flush=True)\n"
        "sys.stdin.readline()\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\n"
        "print('spun', flush=True)\nsys.stdin.readline()"
    )
    cpus = sorted(os.sched_getaffinity(0))
    meter = InterferenceMeter(cpus, runtime_names=(name,))
    meter.start()
    engine = None
    try:
        with meter.busy():
            engine = subprocess.Popen(
                [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            assert engine.stdout.readline().strip() == "named"
            engine.stdin.write("go\n")
            engine.stdin.flush()
            # the window ends once it spun, however long that took beside other work on this host
            assert engine.stdout.readline().strip() == "spun"
        seen = meter.stop()
        idle = quiet_ticks(0.3, runtime_names=(name,))["own"]
    finally:
        if engine is not None:
            engine.kill()
            engine.wait()
    assert 0.35 <= seen.runtime_s <= 0.7, seen  # its start-up counts too: it began inside the interval
    assert seen.other_s == pytest.approx(max(0.0, seen.outside_s - seen.runtime_s))
    assert idle["runtime_processes"] == 1 and idle["runtime_cpu"] < 0.1  # waiting on its input: idle


_SPAWNER = (
    "import subprocess, sys\nopen('/proc/self/comm', 'w').write(sys.argv[1])\nprint('named', flush=True)\n"
    "for line in sys.stdin:\n"
    "    for _ in range(4):\n"
    "        subprocess.run([sys.executable, '-c', "
    "'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.1: pass'])\n"
    "    print('done', flush=True)\n"
)


@pytest.mark.parametrize("shared", [False, True], ids=["own cgroup", "cgroup shared with another process"])
def test_a_runtimes_short_lived_helpers_are_counted_through_its_own_cgroup(real_cgroups, shared):
    """A daemon named as a runtime's, in a cgroup of its own, starts four helpers that each spin 0.1 s and end
    between two snapshots (as runc does per container): read through the cgroup, their time is the runtime's.
    When someone else's process shares the cgroup, it is not the runtime's own: the daemon is read through its
    process clock, which loses the helpers (the record says how it was read)."""
    from throttlelab.host import cgroupfs

    found = cgroupfs.mounts()
    hierarchy = found.get("cpuacct") or found.get("unified")
    folder = hierarchy / f"tl-runtime-test-{os.getpid()}"
    folder.mkdir()
    name = "tl-runtime-tst"
    started: list[subprocess.Popen] = []
    try:

        def in_folder() -> None:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

        daemon = subprocess.Popen(
            [sys.executable, "-c", _SPAWNER, name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=in_folder,
        )
        started.append(daemon)
        assert daemon.stdout.readline().strip() == "named"
        if shared:
            started.append(subprocess.Popen(["sleep", "60"], preexec_fn=in_folder))
        cpus = sorted(os.sched_getaffinity(0))
        meter = InterferenceMeter(cpus, interval_s=60.0, runtime_names=(name,))
        meter.start()
        with meter.busy():
            daemon.stdin.write("go\n")
            daemon.stdin.flush()
            assert daemon.stdout.readline().strip() == "done"
        seen = meter.stop()
    finally:
        for proc in started:
            proc.kill()
            proc.wait()
        for _ in range(50):
            try:
                folder.rmdir()
                break
            except OSError:
                time.sleep(0.05)
    record = seen.as_record(1.0)
    if shared:
        assert record["runtime_by"] == "processes" and seen.runtime_s < 0.2, seen
    else:
        assert record["runtime_by"] == "cgroup" and seen.runtime_s >= 0.4, seen
    assert not folder.exists()


def test_the_orchestrator_tree_leaves_out_the_runners_subtree():
    parents = {1: 0, 10: 1, 11: 10, 12: 10, 13: 12, 14: 13, 20: 1}
    assert processes.tree_without(10, 12, parents) == [10, 11]
    assert processes.tree_without(10, 99, parents) == [10, 11, 12, 13, 14]
    assert processes.tree_without(12, 12, parents) == []  # the runner is never its own orchestrator
    assert processes.tree_without(77, 12, parents) == []  # an orchestrator that has gone


def test_the_orchestrator_comes_from_the_rules_environment():
    assert orchestrator_from_env({}) is None
    assert orchestrator_from_env({"THROTTLELAB_ORCHESTRATOR_PID": str(os.getpid())}) == os.getpid()
    assert orchestrator_from_env({"THROTTLELAB_ORCHESTRATOR_PID": "x1"}) is None
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert orchestrator_from_env({"THROTTLELAB_ORCHESTRATOR_PID": str(dead.pid)}) is None


def test_a_busy_orchestrator_is_metered_apart_with_its_children_and_not_the_runner():
    """A real process tree: an "orchestrator" whose child spins 0.4 s of CPU inside the window. The meter
    gives it to the orchestrator, not to other; this test process (the runner) is left out of the tree."""
    code = (
        "import subprocess, sys, time; "
        "c = subprocess.Popen([sys.executable, '-c', "
        "'import sys,time; sys.stdin.readline(); t=time.process_time()\\nwhile time.process_time()-t<0.4: pass\\n"
        "print(1, flush=True)\\ntime.sleep(30)'], stdin=sys.stdin); c.wait()"
    )
    orchestrator = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 10
        while len(processes.tree_without(orchestrator.pid, os.getpid(), processes.parent_pids())) < 2:
            assert time.monotonic() < deadline, "the orchestrator's child did not start"
            time.sleep(0.05)
        cpus = sorted(os.sched_getaffinity(0))
        meter = InterferenceMeter(cpus, orchestrator_pid=orchestrator.pid)
        meter.start()
        orchestrator.stdin.write("go\n")
        orchestrator.stdin.flush()
        # the window ends once the child spun (it says 1), however long that took beside other work
        assert orchestrator.stdout.readline().strip() == "1"
        seen = meter.stop()
    finally:
        processes.kill_all(processes.tree_without(orchestrator.pid, os.getpid(), processes.parent_pids()))
        orchestrator.wait()
    assert 0.35 <= seen.orchestrator_s <= 0.6, seen
    assert seen.orchestrator_apart  # it may run on the run's CPUs only (they are all of them)
    assert seen.other_s == pytest.approx(max(0.0, seen.outside_s - seen.orchestrator_s))


def _stat_line(cpu: int, user: int, irq: int = 0, softirq: int = 0) -> str:
    return f"cpu{cpu} {user} 0 0 0 0 {irq} {softirq} 0 0 0\n"


def _proc_stat(*user: int) -> str:
    """/proc/stat's text with each CPU's user ticks, in CPU order."""
    return "cpu  0 0 0 0 0 0 0 0 0 0\n" + "".join(_stat_line(cpu, ticks) for cpu, ticks in enumerate(user))


def _fake_host_meter(tmp_path: Path, cpus: list[int], interval_s: float) -> tuple[InterferenceMeter, Path]:
    """A meter (not started) of ``cpus`` for runner 4242 on a fake host: a cpuacct hierarchy at
    tmp_path/cpuacct and two idle CPUs; returned with the host's /proc/stat, for the test to write."""
    mountinfo = tmp_path / "mountinfo"
    acct = tmp_path / "cpuacct"
    acct.mkdir(exist_ok=True)
    mountinfo.write_text(f"33 31 0:30 / {acct} rw,relatime - cgroup cgroup rw,cpuacct\n")
    stat = tmp_path / "stat"
    stat.write_text(_proc_stat(0, 0))
    meter = InterferenceMeter(cpus, runner_pid=4242, interval_s=interval_s, proc_stat=stat, mountinfo=mountinfo)
    return meter, stat


def _fake_cgroup(tmp_path: Path, name: str, usage_percpu: str) -> Path:
    """A cgroup in the fake host's cpuacct hierarchy with its per-CPU usage (ns); returns that usage file."""
    cgroup = tmp_path / "cpuacct" / name
    cgroup.mkdir()
    usage = cgroup / "cpuacct.usage_percpu"
    usage.write_text(usage_percpu)
    return usage


def test_the_labs_own_cgroups_are_not_counted_as_other(tmp_path):
    """On a file tree laid out as the kernel's: the lab's run cgroup used 1 s on CPU 0 in the window,
    CPU 0 was busy 3 s in all: 2 s belong to someone else (less what the runner itself used)."""
    ticks = os.sysconf("SC_CLK_TCK")
    meter, stat = _fake_host_meter(tmp_path, [0], 0.01)
    usage = _fake_cgroup(tmp_path, "throttlelab-4242-0", "0 0\n")
    meter.start()
    usage.write_text(f"{1_000_000_000} {5_000_000_000}\n")  # CPU 1 is not the run's
    stat.write_text(_proc_stat(3 * ticks, 9 * ticks))
    time.sleep(0.05)
    seen = meter.stop()
    assert seen.cpus == (0,) and seen.lab_scope == "per-cpu"
    assert seen.busy_s == pytest.approx(3.0)
    assert seen.lab_s == pytest.approx(1.0)
    assert seen.other_s == pytest.approx(2.0 - seen.runner_s)


def test_another_runners_cgroups_count_as_other(tmp_path):
    ticks = os.sysconf("SC_CLK_TCK")
    meter, stat = _fake_host_meter(tmp_path, [0], 0.01)
    usage = _fake_cgroup(tmp_path, "throttlelab-1111-0", "0\n")  # another runner's
    meter.start()
    usage.write_text(f"{2_000_000_000}\n")
    stat.write_text(_proc_stat(2 * ticks))
    seen = meter.stop()
    assert seen.lab_s == 0 and seen.other_s == pytest.approx(2.0 - seen.runner_s)


@pytest.mark.slow
def test_a_busy_loop_on_the_runs_cpu_is_seen():
    """Real /proc/stat: a busy loop pinned to CPU 0 for ~1.5 s shows up as most of CPU 0."""
    meter = InterferenceMeter([0])
    meter.start()
    hog = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, time\nos.sched_setaffinity(0, {0})\n"
            "end = time.monotonic() + 1.5\nwhile time.monotonic() < end: pass",
        ]
    )
    hog.wait(timeout=30)
    seen = meter.stop()
    assert seen.other_share > 0.5, seen


def test_waiting_for_quiet_returns_once_the_cpus_are_quiet(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu0 100 0 0 0 0 0 0 0 0 0\n")  # nothing changes: perfectly quiet
    quiet, waited = wait_for_quiet([0], 0.1, timeout_s=5, window_s=0.05, proc_stat=stat)
    assert quiet and waited < 1


@pytest.mark.slow
def test_waiting_for_quiet_gives_up_after_its_timeout():
    hog = subprocess.Popen([sys.executable, "-c", "import os\nos.sched_setaffinity(0, {0})\nwhile True: pass"])
    try:
        quiet, waited = wait_for_quiet([0], 0.1, timeout_s=1.0, window_s=0.3)
    finally:
        hog.kill()
        hog.wait()
    assert not quiet and waited >= 1.0


def test_a_cgroup_made_inside_the_window_counts_from_its_creation(tmp_path):
    """The run's cgroups are made after the meter starts: their whole usage is the lab's, even
    when the first sample sees them already busy (a spin on every CPU from the first instant)."""
    ticks = os.sysconf("SC_CLK_TCK")
    meter, stat = _fake_host_meter(tmp_path, [0, 1], 10.0)
    meter.start()
    _fake_cgroup(tmp_path, "throttlelab-4242-0", f"{1_500_000_000} {1_500_000_000}\n")
    stat.write_text(_proc_stat(int(1.5 * ticks), int(1.5 * ticks)))
    seen = meter.stop()  # the only sample of the new cgroup is the last one
    assert seen.lab_s == pytest.approx(3.0)
    assert seen.other_s == pytest.approx(0.0, abs=seen.runner_s + 1e-9)


def test_a_guardian_reaped_inside_the_window_is_the_labs_not_other():
    """The same busy child, reaped as a guardian (processes.wait_guardian): its CPU is the runner's
    (the lab's own work), not interference; reaped as any child, it counts as other."""
    from throttlelab.host.processes import guardians_cpu_s, wait_guardian

    def busy_child() -> subprocess.Popen:
        return subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import os, time\nos.sched_setaffinity(0, {0})\n"
                "end = time.process_time() + 0.6\nwhile time.process_time() < end: pass",
            ]
        )

    before = guardians_cpu_s()
    meter = InterferenceMeter([0])
    meter.start()
    wait_guardian(busy_child(), timeout_s=30)
    seen = meter.stop()
    assert guardians_cpu_s() - before >= 0.55
    assert seen.runner_s >= 0.55, seen
    meter = InterferenceMeter([0])
    meter.start()
    busy_child().wait(timeout=30)
    assert meter.stop().other_s >= 0.5


def test_a_running_guardian_is_the_labs_from_its_start():
    """A guardian starts beside the run and spends its first tenth of a second on Python's start inside the
    first busy interval: counted from its start (not only once reaped) it is the runner's, and reaping it
    moves its CPU to the reaped total without losing any."""
    from throttlelab.host.processes import guardians_cpu_s, spawn_guardian, wait_guardian

    before = guardians_cpu_s()
    meter = InterferenceMeter([0])
    meter.start()
    # a "guardian" that burns 0.6 s of CPU, then waits for its pipe like any guardian
    proc = spawn_guardian(
        "timeit",
        "-n",
        "1",
        "-r",
        "1",
        "import os, sys, time",
        "end = time.process_time() + 0.6",
        "while time.process_time() < end: pass",
        "sys.stdin.read()",
        reaped_here=True,
    )
    try:
        deadline = time.monotonic() + 30
        while guardians_cpu_s() - before < 0.55:
            assert time.monotonic() < deadline, "the guardian's CPU never showed while it ran"
            time.sleep(0.05)
        seen = meter.stop()
        live = guardians_cpu_s()
    finally:
        proc.stdin.close()
        wait_guardian(proc, timeout_s=30)
    assert seen.runner_s >= 0.55, seen
    assert guardians_cpu_s() >= live - 1e-3


def test_waiting_for_a_guardian_times_out_and_leaves_it_to_the_caller():
    from throttlelab.host.processes import wait_guardian

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_guardian(proc, timeout_s=0.2)
    finally:
        proc.kill()
        proc.wait()


def test_a_cgroup_removed_inside_the_window_is_read_just_before(tmp_path):
    """The meter polls only once a second (its own CPU is the lab's and must stay small): a run cgroup made
    and removed between two polls is read by the removal listener, while its counters still exist."""
    import shutil

    from throttlelab.host import cgroupfs

    ticks = os.sysconf("SC_CLK_TCK")
    meter, stat = _fake_host_meter(tmp_path, [0], 60.0)
    meter.start()
    run = _fake_cgroup(tmp_path, "throttlelab-4242-0", f"{800_000_000}\n").parent
    stat.write_text(_proc_stat(ticks))

    class Removed(cgroupfs.CgroupFS):  # the real remove_tree, over a tree the test removes itself
        def dirs(self, rel):
            shutil.rmtree(run)
            return []

    Removed().remove_tree("throttlelab-4242-0")
    assert not run.exists()
    seen = meter.stop()
    assert seen.lab_s == pytest.approx(0.8)
    assert seen.outside_s == pytest.approx(max(0.0, 0.2 - seen.runner_s))
    assert meter._sample not in cgroupfs._before_remove  # the listener goes with the meter


def test_interrupt_and_softirq_work_on_the_runs_cpus_is_the_labs_not_other(tmp_path):
    """The lab's loopback traffic is softirq work no cgroup is charged with: 0.5 s of irq and softirq on
    CPU 0 counts with the lab (irq_s), so only the 1 s of user time nobody of the lab used is outside."""
    ticks = os.sysconf("SC_CLK_TCK")
    assert parse_proc_irq(STAT) == {0: 0 + 2, 1: 0 + 1}  # irq + softirq
    meter, stat = _fake_host_meter(tmp_path, [0], 10.0)
    meter.start()
    stat.write_text("cpu  0 0 0 0 0 0 0 0 0 0\n" + _stat_line(0, ticks, ticks // 4, ticks // 4) + _stat_line(1, 0))
    seen = meter.stop()
    assert seen.busy_s == pytest.approx(1.5) and seen.irq_s == pytest.approx(0.5)
    assert seen.outside_s == pytest.approx(max(0.0, 1.0 - seen.runner_s))
    record = seen.as_record(0.1)
    assert record["irq_s"] == pytest.approx(0.5) and record["judged"] == "attempt" and record["intervals"] == 0


def test_only_the_workloads_busy_intervals_are_judged(tmp_path):
    """Another process's 2 s on CPU 0 while the run deploys (before its busy interval) is metered over the
    attempt, not judged; the 0.3 s inside the busy interval is what the run is judged by."""
    ticks = os.sysconf("SC_CLK_TCK")
    meter, stat = _fake_host_meter(tmp_path, [0], 10.0)
    meter.start()
    stat.write_text(_proc_stat(2 * ticks))  # deploying
    with meter.busy():
        time.sleep(0.2)
        stat.write_text(_proc_stat(2 * ticks + int(0.3 * ticks)))
        with meter.busy():  # a nested mark adds nothing
            pass
    stat.write_text(_proc_stat(5 * ticks))  # tearing down
    seen = meter.stop()
    assert seen.judged == "busy intervals" and seen.intervals == 1
    assert seen.busy_s == pytest.approx(0.3) and 0.2 <= seen.window_s < 1.0
    assert seen.outside_s == pytest.approx(max(0.0, 0.3 - seen.runner_s))
    record = seen.as_record(0.5, {"threshold": 0.5, "rule": "fixed"})
    assert record["attempt_window_s"] >= record["window_s"] and record["threshold_rule"]["rule"] == "fixed"
    assert record["attempt_outside_share"] > 1.0  # 5 s of other work on one CPU over a sub-second attempt


def test_a_quiet_host_is_sampled_per_cpu_and_step(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(_proc_stat(10, 3))
    got = quiet_ticks(0.2, step_s=0.05, proc_stat=stat)
    assert got["step_s"] == 0.05 and got["hz"] == os.sysconf("SC_CLK_TCK")
    assert got["ticks"] == [[0, 0]] * 4  # nothing changed between samples: perfectly quiet


def test_kernel_threads_are_kthreadds_children():
    tasks = processes.scan()
    kernel = processes.kernel_threads(tasks=tasks)
    assert processes.KTHREADD in kernel and os.getpid() not in kernel
    comms = {pid: comm for pid, comm, _ in tasks}
    assert any(comms[pid].startswith(("kworker", "ksoftirqd", "rcu")) for pid in kernel)
    assert processes.named(("kthreadd",), tasks=tasks) == [processes.KTHREADD]


def test_the_kernels_threads_are_metered_apart_when_asked():
    """Real kernel threads over half a second: with ``kernel`` the meter reads their CPU clocks and keeps their
    time apart (its own share, taken out of other); without it they are not metered and other keeps it."""
    cpus = sorted(os.sched_getaffinity(0))
    with_kernel, without = InterferenceMeter(cpus, kernel=True), InterferenceMeter(cpus)
    with_kernel.start()
    without.start()
    time.sleep(0.5)
    a, b = with_kernel.stop(), without.stop()
    assert a.kernel_s is not None and a.kernel_s >= 0 and b.kernel_s is None
    record = a.as_record(0.5)
    assert record["kernel_cpu"] == pytest.approx(a.kernel_s / a.window_s, abs=1e-4) and "kernel_s" not in b.as_record(
        0.5
    )
    assert a.other_s == pytest.approx(max(0.0, a.outside_s - a.excess_s("orchestrator") - a.kernel_s))
