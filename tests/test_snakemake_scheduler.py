"""The quiet scheduler loop (throttlelab/snakemake_scheduler.py), on a real Snakemake run.

A toy workflow shaped like the lab's (many jobs waiting for one slot, as the experiments wait for
`experiment_slot`) counts every timer thread Snakemake makes and how many are alive at the end.
Stock Snakemake 9 makes timer chains that grow with the jobs done; with the change installed it
makes none while the rate limiter has free slots, and none is left to hold the exit."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import PROJECT

JOBS = 30

TOY = textwrap.dedent(
    """
    import json, sys, threading
    sys.path.insert(0, {project!r})
    if {install}:
        from throttlelab import snakemake_scheduler
        snakemake_scheduler.install()

    made = [0]
    _Timer = threading.Timer

    class CountingTimer(_Timer):
        def __init__(self, *args, **kwargs):
            made[0] += 1
            super().__init__(*args, **kwargs)

    threading.Timer = CountingTimer

    rule all:
        input: expand("out/{{i}}.txt", i=range({jobs}))

    rule one:
        output: "out/{{i}}.txt"
        resources: slot=1
        shell: "sleep 0.1; touch {{output}}"

    onsuccess:
        alive = [t for t in threading.enumerate() if isinstance(t, _Timer) and t.is_alive()]
        with open("timers.json", "w") as f:
            json.dump({{"made": made[0], "alive": len(alive),
                       "non_daemon": sum(not t.daemon for t in alive)}}, f)
    """
)


def run_toy(tmp_path, install: bool) -> dict:
    (tmp_path / "Snakefile").write_text(TOY.format(project=str(PROJECT), install=install, jobs=JOBS))
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--resources", "slot=1", "--quiet", "all"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((tmp_path / "timers.json").read_text())


@pytest.mark.snakemake
def test_the_installed_loop_arms_no_timer_chain(tmp_path):
    timers = run_toy(tmp_path, install=True)
    # the limiter (100/1s) never fills with 30 jobs of 0.1 s one at a time: nothing to wake up for
    assert timers["made"] <= 2, timers
    assert timers["non_daemon"] == 0, timers


@pytest.mark.snakemake
def test_stock_snakemake_makes_a_timer_chain_per_finished_job(tmp_path):
    """What the change is for: if this fails, Snakemake fixed its loop and the change can go."""
    timers = run_toy(tmp_path, install=False)
    assert timers["alive"] >= JOBS // 2, timers
    assert timers["made"] >= JOBS, timers


def test_install_finds_the_method_it_replaces():
    from snakemake.scheduling.job_scheduler import JobScheduler

    from throttlelab import snakemake_scheduler

    assert hasattr(JobScheduler, "_schedule_reevalutation"), "Snakemake renamed the method: see snakemake_scheduler"
    snakemake_scheduler.install()
    assert snakemake_scheduler.installed()
    assert not snakemake_scheduler.install(), "a second install changes nothing"


class _Limiter:
    def __init__(self, free: int):
        self.timespan, self.free = 1, free

    def get_free_jobs(self) -> int:
        return self.free


class _Dag:
    def has_unfinished_queue_input_jobs(self) -> bool:
        return False


class _Semaphore:
    def __init__(self):
        self.released = 0

    def release(self):
        self.released += 1


class _Scheduler:
    def __init__(self, free: int):
        self.job_rate_limiter = _Limiter(free)
        self.workflow = type("W", (), {"dag": _Dag()})()
        self._open_jobs = _Semaphore()


@pytest.mark.parametrize("free", [0, 5])
def test_a_full_limiter_still_wakes_the_loop_once(free):
    from throttlelab.snakemake_scheduler import quiet_reevaluation

    scheduler = _Scheduler(free)
    for _ in range(5):
        quiet_reevaluation(scheduler, 0.05)  # another delay than the limiter's: always armed, once
    quiet_reevaluation(scheduler, 1)
    timers = scheduler._throttlelab_timers
    assert set(timers) == ({0.05, 1} if free == 0 else {0.05})
    timers[0.05].join(2)
    assert scheduler._open_jobs.released == 1
    for timer in timers.values():
        assert timer.daemon
        timer.cancel()
