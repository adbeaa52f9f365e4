"""E6 - what monitoring sees (SPEC §4): the E2a limit-1 burst job, scraped as a
metrics pipeline scrapes it.

The lab scraped the kubelet's cAdvisor metrics twice, ~20 s apart, and divided
the counters' change by the difference of cAdvisor's OWN sample timestamps
(12.149 s there), because cAdvisor serves cached readings taken by its
housekeeping loop, not readings taken at scrape time. The local backend has no
cAdvisor, so the run emulates exactly that part: a housekeeping thread reads the
container's counters every `housekeeping_ms` (first reading at a seeded random
offset) and keeps the latest one; a "scrape" at `first_scrape_ms` and again
`scrape_gap_ms` later returns that cached reading with its own timestamp. Both
the readings and the scrapes are written as `podstat` records (`t_ms` the
reading's time, `at_ms` the scrape's), with times in ms since the job started.

To know what the throttling really cost, the same burst first runs without a
limit for `calibration_rounds` rounds in a pod of its own (`calib`): the extra
completion time per round is the limited job's median round minus that one.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from throttlelab.backends.base import BackendError, Deployment
from throttlelab.model.variants import VariantSpec
from throttlelab.model.placement import Container, Node, Pod
from throttlelab.model.quantities import parse_cpu
from throttlelab.experiments.context import Context, ExperimentResult, deployed
from throttlelab.experiments.jobs import burst_timeout, container_env
from throttlelab.experiments.services import podstat_record, wall_ns_of


def burst_container(name: str, spec: VariantSpec, rounds: int, limit: Any) -> Container:
    args = (
        "burst",
        f"-threads={spec.threads}",
        f"-work={spec.work_ms}ms",
        f"-interval={spec.interval_ms}ms",
        f"-rounds={rounds}",
    )
    return Container(name, args, variant=(spec.build or "go124mod"),
                     request_milli=None if spec.request is None else parse_cpu(spec.request, "request"),
                     limit_milli=None if limit is None else parse_cpu(limit, "limit"),
                     env=container_env(spec.gomaxprocs or spec.threads))


class Housekeeping:
    """cAdvisor's part, emulated: read the counters every `interval_s`, keep the latest reading."""

    def __init__(self, dep: Deployment, pod: str, container: str, interval_s: float, offset_s: float):
        self.dep, self.pod, self.container = dep, pod, container
        self.interval_s, self.offset_s = interval_s, offset_s
        self.readings: list[tuple[int, dict[str, Any]]] = []  # (wall ns, counters)
        self.lock = threading.Lock()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="housekeeping", daemon=True)

    def _run(self) -> None:
        next_at = time.monotonic() + self.offset_s
        try:
            while not self._stop.wait(max(0.0, next_at - time.monotonic())):
                stat = self.dep.read_stat(self.pod, self.container)
                with self.lock:
                    self.readings.append((time.time_ns(), stat))
                next_at += self.interval_s
        except BaseException as exc:  # raised in the main thread by scrape()/stop()
            self.error = exc

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def scrape(self) -> tuple[int, dict[str, Any]] | None:
        """The latest cached reading (None before the first), as a scrape would get it."""
        if self.error is not None:
            raise self.error
        with self.lock:
            return self.readings[-1] if self.readings else None


def run_e6(spec: VariantSpec, ctx: Context) -> ExperimentResult:
    calib = burst_container("burst", spec, spec.calibration_rounds, None)
    job = burst_container("burst", spec, spec.rounds, spec.limit)
    node = Node("node", (Pod("calib", (calib,)), Pod("e6", (job,))), cpus=spec.node_cpus or ctx.node_cpus)
    result = ExperimentResult()
    if spec.first_scrape_ms < spec.housekeeping_ms:
        raise BackendError(f"E6: first_scrape_ms ({spec.first_scrape_ms}) must be at least housekeeping_ms "
                           f"({spec.housekeeping_ms}), or the first scrape may find no reading yet")
    rng = random.Random(ctx.seed)
    hk_s = spec.housekeeping_ms / 1000
    with deployed(ctx, node, result) as dep:
        result.add_output(dep.run_job("calib", "burst", timeout_s=burst_timeout(
            spec.with_changes(limit=None, rounds=spec.calibration_rounds))))
        keeper = Housekeeping(dep, "e6", "burst", hk_s, offset_s=rng.uniform(0, hk_s))
        job_run = _Background(lambda: dep.run_job("e6", "burst", timeout_s=burst_timeout(spec)))
        started = time.monotonic()
        keeper.start()
        scrapes: list[tuple[int, int, dict[str, Any]]] = []  # (scrape wall ns, reading wall ns, counters)
        try:
            for at_ms in (spec.first_scrape_ms, spec.first_scrape_ms + spec.scrape_gap_ms):
                time.sleep(max(0.0, started + at_ms / 1000 - time.monotonic()))
                got = keeper.scrape()
                if got is not None:
                    scrapes.append((time.time_ns(), *got))
        finally:
            keeper.stop()  # on an interrupt too; leaving the deployment then ends the job
        out = job_run.result()
    if keeper.error is not None:
        raise keeper.error
    origin = job_start_ns(out.records)
    result.add_output(out)
    for seq, (wall, stat) in enumerate(keeper.readings):
        result.records.append(podstat_record("e6", "burst", "housekeeping", seq, (wall - origin) / 1e6, stat))
    for seq, (scrape_wall, reading_wall, stat) in enumerate(scrapes):
        result.records.append(podstat_record("e6", "burst", "scrape", seq, (reading_wall - origin) / 1e6, stat,
                                             at_ms=(scrape_wall - origin) / 1e6))
    result.window_s = (spec.rounds + spec.calibration_rounds) * spec.interval_ms / 1000
    return result


class _Background:
    """Run a blocking call (a job) on a thread; result() waits and returns it or raises its error."""

    def __init__(self, fn):
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name="job", daemon=True)
        self._thread.start()

    def _run(self, fn) -> None:
        try:
            self._value = fn()
        except BaseException as exc:
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def job_start_ns(records: list[dict[str, Any]]) -> int:
    """When the burst job started, on the wall clock (its header's time)."""
    header = next(r for r in records if r.get("type") == "header")
    return wall_ns_of(header["time"])
