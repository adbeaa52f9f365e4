"""A quiet Snakemake scheduler loop: what the Snakefile changes in Snakemake 9 before it schedules.

Snakemake 9's ``JobScheduler`` ends every pass of its loop by arming a ``threading.Timer`` that
wakes the loop again after the job rate limiter's timespan (``--max-jobs-per-timespan``, 100/1s
by default; the command line has no way to switch the limiter off). Each wake-up is another pass,
which arms another timer, so every release of the loop's semaphore -- each job that ends -- starts
one more endless chain of timers. After N jobs the loop runs about N passes a second, each
re-selecting among all ready jobs. In this lab ~150 ready jobs wait for the one
``experiment_slot``: by minute 17 of the quick profile the scheduler had made ~90,000 timer
threads and used ~22% of a CPU, inside the experiments' measuring windows. The timers
are not daemon threads either, so a long timespan would stop the storm but hold Snakemake's exit
for up to that timespan.

The change, applied to the class before the scheduler exists (the Snakefile is read first):

- a re-evaluation after the limiter's timespan is armed only when the limiter has no free slot
  left, i.e. when it actually held a job back; otherwise only a job's end (which wakes the loop by
  itself) can make more jobs runnable, and no timer is needed;
- at most one timer per delay is pending at a time, and it is a daemon thread: Snakemake exits
  as soon as its last job is done.

Every other call (the queue-input wait) keeps its meaning. ``install`` is idempotent and says
whether it changed anything; a Snakemake without this method is left alone (the test of this
module then fails, saying so).
"""

from __future__ import annotations

import threading
from typing import Any

_MARK = "_throttlelab_quiet"


def quiet_reevaluation(scheduler: Any, delay: float) -> None:
    """What ``JobScheduler._schedule_reevalutation`` does once installed (see the module text)."""
    limiter = scheduler.job_rate_limiter
    dag = scheduler.workflow.dag
    if (
        limiter is not None
        and delay == limiter.timespan
        and limiter.get_free_jobs() > 0
        and not dag.has_unfinished_queue_input_jobs()
    ):
        return  # the limiter held nothing back: the next job's end wakes the loop
    pending = scheduler.__dict__.setdefault("_throttlelab_timers", {})
    lock = scheduler.__dict__.setdefault("_throttlelab_timers_lock", threading.Lock())
    with lock:
        timer = pending.get(delay)
        if timer is not None and timer.is_alive():
            return  # one wake-up after this delay is already on its way
        timer = threading.Timer(delay, scheduler._open_jobs.release)
        timer.daemon = True
        pending[delay] = timer
        timer.start()


def install() -> bool:
    """Put :func:`quiet_reevaluation` in place of Snakemake's; True if it was changed now."""
    from snakemake.scheduling import job_scheduler

    cls = job_scheduler.JobScheduler
    current = getattr(cls, "_schedule_reevalutation", None)
    if current is None or getattr(current, _MARK, False):
        return False

    def _schedule_reevalutation(self, delay):
        quiet_reevaluation(self, delay)

    setattr(_schedule_reevalutation, _MARK, True)
    cls._schedule_reevalutation = _schedule_reevalutation
    return True


def installed() -> bool:
    """Whether Snakemake's scheduler in this process runs the quiet loop."""
    from snakemake.scheduling import job_scheduler

    return getattr(getattr(job_scheduler.JobScheduler, "_schedule_reevalutation", None), _MARK, False)
