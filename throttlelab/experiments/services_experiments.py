"""The service experiments (docs/LAB.md §4): a `cpulab serve` meets traffic from `cpulab load`.

E2b  one service under open-loop load, steady or clumped arrivals, three settings;
E7   replicas behind per-connection balancing versus one pod with a raised limit;
E8   a busy neighbor pod beside the service, the service's CPU sampled finely;
S2   closed-loop maximum throughput by thread count, and a cascade of two services;
and ours beyond the lab (docs/EXPERIMENTS.md), both E2b's open loop (``run_e2b``):
X5   steady arrivals as average use nears the limit;
X6   Go's minimum of 2 threads: GOMAXPROCS 2 against 1 under clumped arrivals;
E6   what monitoring sees: the E2a limit-1 burst job scraped as a metrics pipeline scrapes it (below).

Every run deploys one node through the backend interface (so any backend runs
them), reads every level back, starts the services, drives them with the load
generator in its own cgroup on its own CPUs (the profile's `load_cpus`), and
stops them. Besides the workload's records, the runner writes `podstat`
records: cgroup counters of pods read while the load runs, each with its time
in ms since the load's measured window began (`t_ms`, from the load header's
start time plus its warmup), so the analysis can take deltas over exactly the
window (docs/RECORDS.md, docs/TABLES.md).
"""

from __future__ import annotations

import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from throttlelab.backends.base import CADVISOR_COUNTERS, BackendError, Deployment, Output
from throttlelab.model import records, seeds
from throttlelab.model.coverage import cadvisor_misfit
from throttlelab.model.variants import VariantSpec
from throttlelab.model.placement import Container, LoadPlacement, Node, Pod, parse_cpuset
from throttlelab.model.quantities import parse_cpu
from throttlelab.experiments.context import Context, ExperimentResult, deployed
from throttlelab.experiments.jobs_experiments import burst_timeout, container_env

#: The seconds the generator may still wait for its last requests (its -timeout).
LOAD_TIMEOUT_S = 10.0
#: A server that has not said where it listens by then is broken.
LISTEN_TIMEOUT_S = 30.0


def server_args(
    spec: VariantSpec, upstream: str | None = None, prefix: str = "", addr: str = "127.0.0.1:0"
) -> tuple[str, ...]:
    """`cpulab serve` flags from a spec: work per request, bytes allocated per request, live heap."""
    args = [
        "serve",
        f"-addr={addr}",
        f"-work={getattr(spec, prefix + 'work_us')}us",
        f"-alloc={getattr(spec, prefix + 'alloc_bytes') or 0}",
        f"-live-mb={getattr(spec, prefix + 'live_mb') or 0}",
    ]
    if upstream:
        args.append(f"-upstream={upstream}")
    return tuple(args)


def server_container(
    spec: VariantSpec,
    name: str = "server",
    *,
    limit_key: str = "limit",
    request_key: str = "request",
    upstream: str | None = None,
    prefix: str = "",
    addr: str = "127.0.0.1:0",
) -> Container:
    gomaxprocs = getattr(spec, prefix + "gomaxprocs")
    env = (("GOMAXPROCS", str(gomaxprocs)),) if gomaxprocs is not None else ()
    return Container(
        name,
        server_args(spec, upstream, prefix, addr),
        variant=(spec.build or "go124mod"),
        request_milli=spec.milli(request_key),
        limit_milli=spec.milli(limit_key),
        env=env,
        role="service",
    )


def load_args(spec: VariantSpec, targets: Sequence[str], seed: int, label: str) -> list[str]:
    """`cpulab load` flags: open loop (rps, clump, ping) or closed loop (workers)."""
    args = [
        "load",
        "-target=" + ",".join(f"http://{t}" for t in targets),
        f"-duration={spec.duration_ms}ms",
        f"-warmup={spec.warmup_ms}ms",
        f"-seed={seeds.load_seed(seed)}",
        f"-timeout={LOAD_TIMEOUT_S:g}s",
        f"-label={label}",
    ]
    if spec.workers:
        args += ["-closed", f"-workers={spec.workers}"]
    else:
        args += [f"-rps={spec.rps}", f"-clump={spec.clump}", f"-ping-rps={(spec.ping_rps or 0)}"]
    return args


def load_timeout_s(spec: VariantSpec) -> float:
    return (spec.warmup_ms + spec.duration_ms) / 1000 + LOAD_TIMEOUT_S + 30


def node_of(spec: VariantSpec, ctx: Context, pods: tuple[Pod, ...]) -> Node:
    """The experiment's node: the profile's `node_cpus` for this experiment, else the config's."""
    return Node("node", pods, cpus=spec.node_cpus or ctx.node_cpus)


def placement_of(spec: VariantSpec) -> LoadPlacement:
    return LoadPlacement(cpus=spec.load_cpus)


def listen_address(dep: Deployment, handle: Any) -> str:
    return dep.wait_for_record(handle, "listening", timeout_s=LISTEN_TIMEOUT_S)["addr"]


# --------------------------------------------------------------------------
# counters of pods while the load runs


def wall_ns_of(rfc3339: str) -> int:
    """'2026-11-30T13:25:23.299901206Z' -> Unix ns (Python keeps microseconds; ns are cut, not rounded)."""
    text = rfc3339.replace("Z", "+00:00")
    head, sep, rest = text.partition(".")
    if sep:
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits) :]
        text = f"{head}.{digits[:6].ljust(6, '0')}{zone}"
    return int(datetime.fromisoformat(text).timestamp() * 1_000_000) * 1000


def window_start_ns(load: Output) -> int:
    """When the load's measured window began, on the wall clock: header time + warmup."""
    header = next((r for r in load.records if r.get("type") == "header"), None)
    if header is None:
        raise BackendError(f"{load.source}: no header record, so the measured window cannot be placed")
    return wall_ns_of(header["time"]) + int(round(float(header["params"]["warmup"]) * 1e6))


class PodSampler:
    """Reads the counters of some pods every `interval_s` on a background thread.

    The thread pins itself to `cpus` (the load generator's CPUs) so that sampling
    never takes CPU time from the node it measures. Readings keep the wall clock
    (to place them in the load's window) and the backend's monotonic `t_ns`.
    """

    def __init__(
        self, dep: Deployment, targets: Sequence[tuple[str, str | None]], interval_s: float, cpus: str | None = None
    ):
        self.dep, self.targets, self.interval_s = dep, list(targets), interval_s
        self.cpus = set(parse_cpuset(cpus)) if cpus else None
        self.readings: list[tuple[int, str, str | None, dict[str, Any]]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="podstat-sampler", daemon=True)

    def read_once(self) -> None:
        for pod, container in self.targets:
            stat = self.dep.read_stat(pod, container)
            self.readings.append((time.time_ns(), pod, container, stat))

    def _run(self) -> None:
        if self.cpus:
            try:
                os.sched_setaffinity(0, self.cpus)  # pid 0: this thread only
            except OSError:
                pass  # sampling still works, only less isolated
        next_at = time.monotonic()
        try:
            while not self._stop.is_set():
                self.read_once()
                next_at += self.interval_s
                self._stop.wait(max(0.0, next_at - time.monotonic()))
        except BaseException as exc:  # handed to the main thread, which raises it
            self.error = exc

    def __enter__(self) -> "PodSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.error is not None and exc[0] is None:
            raise BackendError(f"reading pod counters while the load ran failed: {self.error}")

    def records(self, origin_ns: int, when: str = "sample") -> list[dict[str, Any]]:
        """`podstat` records; `t_ms` is the reading's time in ms after `origin_ns` (wall clock)."""
        return [
            podstat_record(pod, container, when, seq, (wall - origin_ns) / 1e6, stat)
            for seq, (wall, pod, container, stat) in enumerate(self.readings)
        ]


def podstat_record(
    pod: str, container: str | None, when: str, seq: int, t_ms: float, stat: dict[str, Any], at_ms: float | None = None
) -> dict[str, Any]:
    return {
        "type": "podstat",
        "pod": pod,
        "container": container or "",
        "when": when,
        "seq": seq,
        "t_ms": round(t_ms, 3),
        "at_ms": round(t_ms if at_ms is None else at_ms, 3),
        **{k: stat.get(k) for k in records.COUNTERS},
    }


def _run_load_sampled(
    dep: Deployment,
    spec: VariantSpec,
    ctx: Context,
    targets: Sequence[str],
    pods: Sequence[tuple[str, str | None]],
    label: str,
    result: ExperimentResult,
) -> Output:
    """Drive the targets with the generator while sampling the pods' counters; keep both in the log."""
    interval = (spec.sample_ms or 100) / 1000
    with PodSampler(dep, pods, interval, spec.load_cpus) as sampler, ctx.busy():
        load = dep.run_load(load_args(spec, targets, ctx.arrival_seed, label), timeout_s=load_timeout_s(spec))
    result.records.extend(sampler.records(window_start_ns(load)))
    result.add_output(load)
    result.window_s = spec.duration_ms / 1000
    return load


# --------------------------------------------------------------------------
# E2b: one service, steady or clumped arrivals


def run_e2b(spec: VariantSpec, ctx: Context) -> ExperimentResult:
    """serve under open-loop /work + /ping traffic; the load reads /stats around the window."""
    server = server_container(spec)
    node = node_of(spec, ctx, (Pod("e2b", (server,)),))
    result = ExperimentResult()
    with deployed(ctx, node, result, placement_of(spec)) as dep:
        handle = dep.start("e2b", "server")
        addr = listen_address(dep, handle)
        _run_load_sampled(dep, spec, ctx, [addr], [("e2b", "server")], "E2b", result)
        result.add_output(dep.stop(handle))
    return result


# --------------------------------------------------------------------------
# E7: replicas behind per-connection balancing


def replica_pods(spec: VariantSpec) -> tuple[Pod, ...]:
    return tuple(Pod(f"replica-{k}", (server_container(spec),)) for k in range(int(spec.replicas)))


def run_e7(spec: VariantSpec, ctx: Context) -> ExperimentResult:
    """N replicas, each its own pod with the variant's limit; the generator balances per connection."""
    pods = replica_pods(spec)
    node = node_of(spec, ctx, pods)
    result = ExperimentResult()
    with deployed(ctx, node, result, placement_of(spec)) as dep:
        handles = [dep.start(p.name, "server") for p in pods]
        addrs = [listen_address(dep, h) for h in handles]
        _run_load_sampled(dep, spec, ctx, addrs, [(p.name, None) for p in pods], "E7", result)
        for handle in handles:
            result.add_output(dep.stop(handle))
    return result


# --------------------------------------------------------------------------
# E8: a busy neighbor


def neighbor_container(spec: VariantSpec, node_cpus: int) -> Container:
    threads = spec.neighbor_threads or node_cpus
    return Container(
        "spin",
        ("spin", f"-threads={threads}", "-report=1000ms"),
        variant=(spec.build or "go124mod"),
        request_milli=spec.milli("neighbor_request"),
        limit_milli=None,
    )


def run_e8(spec: VariantSpec, ctx: Context) -> ExperimentResult:
    """The service beside a neighbor that spins on every CPU of the node (or alone, when idle).

    The service's and the neighbor's pod counters are sampled every `sample_ms`
    (10 ms by default) so the analysis can say how much CPU the service got while
    it had requests waiting, which the lab did not measure.
    """
    server = server_container(spec)
    pods = [Pod("e8", (server,))]
    node_cpus_spec = spec.node_cpus or ctx.node_cpus
    n_cpus = len(parse_cpuset(node_cpus_spec)) if node_cpus_spec else ctx.capabilities.cpus
    if spec.neighbor:
        pods.append(Pod("neighbor", (neighbor_container(spec, n_cpus),)))
    node = node_of(spec, ctx, tuple(pods))
    result = ExperimentResult()
    with deployed(ctx, node, result, placement_of(spec)) as dep:
        spinner = dep.start("neighbor", "spin") if spec.neighbor else None
        handle = dep.start("e8", "server")
        addr = listen_address(dep, handle)
        sampled = [("e8", None)] + ([("neighbor", None)] if spinner else [])
        _run_load_sampled(dep, spec, ctx, [addr], sampled, "E8", result)
        result.add_output(dep.stop(handle))
        if spinner is not None:
            result.add_output(dep.stop(spinner))
    return result


# --------------------------------------------------------------------------
# S2: closed-loop throughput by thread count; the cascade


def run_s2(spec: VariantSpec, ctx: Context) -> ExperimentResult:
    """mode threads: one limited service at maximum closed-loop throughput.
    mode cascade: a downstream service (no limit) whose every /work calls an upstream one."""
    result = ExperimentResult()
    if spec.mode == "threads":
        node = node_of(spec, ctx, (Pod("s2", (server_container(spec),)),))
        with deployed(ctx, node, result, placement_of(spec)) as dep:
            handle = dep.start("s2", "server")
            addr = listen_address(dep, handle)
            _run_load_sampled(dep, spec, ctx, [addr], [("s2", None)], "S2", result)
            result.add_output(dep.stop(handle))
        return result
    # The downstream must know its upstream's address when it starts: the upstream gets a
    # port chosen now (free on loopback a moment ago) instead of port 0.
    up_addr = f"127.0.0.1:{free_port()}"
    upstream = server_container(
        spec, "server", limit_key="upstream_limit", request_key="upstream_request", prefix="upstream_", addr=up_addr
    )
    downstream = server_container(spec, "server", upstream=f"http://{up_addr}")
    node = node_of(spec, ctx, (Pod("upstream", (upstream,)), Pod("downstream", (downstream,))))
    with deployed(ctx, node, result, placement_of(spec)) as dep:
        up = dep.start("upstream", "server")
        # on kind/kubernetes the upstream listens on its pod's address (the downstream's podgate
        # fills that address in when its gate opens), so only the port must be the one asked for
        listening = listen_address(dep, up)
        if listening.rpartition(":")[2] != up_addr.rpartition(":")[2]:
            raise BackendError(f"the upstream listens elsewhere ({listening}) than the port asked ({up_addr})")
        down = dep.start("downstream", "server")
        addr = listen_address(dep, down)
        _run_load_sampled(dep, spec, ctx, [addr], [("downstream", None), ("upstream", None)], "S2", result)
        result.add_output(dep.stop(down))
        result.add_output(dep.stop(up))
    return result


def free_port() -> int:
    """A TCP port free on loopback right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- E6: what monitoring sees ----------------------------------------------------------------------
#
# E6 - what monitoring sees (docs/LAB.md §4): the E2a limit-1 burst job, scraped as a
# metrics pipeline scrapes it.
#
# The lab scraped the kubelet's cAdvisor metrics twice, ~20 s apart, and divided
# the counters' change by the difference of cAdvisor's OWN sample timestamps
# (12.149 s there), because cAdvisor serves cached readings taken by its
# housekeeping loop, not readings taken at scrape time.
#
# Where the backend has a cAdvisor (`Capabilities.cadvisor`: kind, kubernetes),
# E6 does exactly that: it scrapes the kubelet's cAdvisor through the backend
# (`Deployment.monitoring_sample`) at `first_scrape_ms` and again `scrape_gap_ms`
# later; when the second scrape still gets the reading the first one got, it
# scrapes again every `RESCRAPE_EVERY_S` until cAdvisor has a newer one (bounded;
# a clear error otherwise), so the two scrapes always hold two different readings.
# Nothing is run in the throttled container but the job itself.
#
# Local and docker have no cAdvisor, so the run emulates exactly that part: a
# housekeeping thread reads the container's counters every `housekeeping_ms`
# (first reading at a seeded random offset) and keeps the latest one; a "scrape"
# returns that cached reading with its own timestamp.
#
# Both ways, the readings and the scrapes are written as `podstat` records
# (`when` housekeeping / scrape; `t_ms` the reading's time, `at_ms` the scrape's,
# in ms since the job started) with `source` "cadvisor" or "emulated"; the
# analysis treats both alike. With a real cAdvisor the `housekeeping` records are
# the distinct readings the scrapes saw, `cadvisor_ms` cAdvisor's own sample time
# (Unix ms) and a scrape's `rescrapes` how often it was repeated.
#
# To know what the throttling really cost, the same burst first runs without a
# limit for `calibration_rounds` rounds in a pod of its own (`calib`): the extra
# completion time per round is the limited job's median round minus that one.


#: `source` of E6's podstat records: the kubelet's real cAdvisor, or the emulation of its housekeeping.
CADVISOR, EMULATED = "cadvisor", "emulated"
#: The longest a scrape keeps being repeated for a newer reading: 15 s, jittered up to double.
CADVISOR_LONGEST_S = 30.0
#: How often a scrape is repeated while cAdvisor still serves the reading the previous scrape got.
RESCRAPE_EVERY_S = 1.0


def burst_container(name: str, spec: VariantSpec, rounds: int, limit: Any) -> Container:
    args = (
        "burst",
        f"-threads={spec.threads}",
        f"-work={spec.work_ms}ms",
        f"-interval={spec.interval_ms}ms",
        f"-rounds={rounds}",
    )
    return Container(
        name,
        args,
        variant=(spec.build or "go124mod"),
        request_milli=None if spec.request is None else parse_cpu(spec.request, "request"),
        limit_milli=None if limit is None else parse_cpu(limit, "limit"),
        env=container_env(spec.gomaxprocs or spec.threads),
    )


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


def cadvisor_counters(sample: dict[str, Any], where: str) -> dict[str, int]:
    """A cAdvisor scrape's counters as the cgroup names them (seconds -> usec)."""
    missing = [name for name in CADVISOR_COUNTERS if sample.get(name) is None]
    if missing:
        raise BackendError(
            f"cAdvisor gave no {', '.join(missing)} for {where} (the CFS series exist only for a "
            "container with a CPU limit)"
        )
    return {counter: int(round(float(sample[name]) * factor)) for name, (counter, factor) in CADVISOR_COUNTERS.items()}


class CadvisorScrapes:
    """The kubelet's cAdvisor, scraped as a metrics pipeline scrapes it: each scrape returns cAdvisor's
    latest cached reading with cAdvisor's own sample time; every distinct reading seen is kept."""

    def __init__(self, dep: Deployment, pod: str, container: str, job_done: Callable[[], bool]):
        self.dep, self.pod, self.container, self.job_done = dep, pod, container, job_done
        self.where = f"{pod}/{container}"
        self.readings: list[tuple[int, dict[str, Any]]] = []  # (reading wall ns, counters), oldest first

    def _once(self) -> tuple[int, int, dict[str, Any]]:
        sample = self.dep.monitoring_sample(self.pod, self.container)
        scraped = time.time_ns()
        stamps = set(sample.get("timestamps_ms") or [sample["t_ms"]])
        if len(stamps) > 1:
            raise BackendError(
                f"cAdvisor's series of {self.where} carry different sample times {sorted(stamps)}: not one reading"
            )
        reading = int(sample["t_ms"]) * 1_000_000
        stat = cadvisor_counters(sample, self.where)
        if not self.readings or reading > self.readings[-1][0]:
            self.readings.append((reading, stat))
        return scraped, reading, stat

    def scrape(self, after_ns: int | None = None) -> tuple[int, int, dict[str, Any], int]:
        """(scrape wall ns, reading wall ns, counters, repeats): a scrape now, repeated every
        RESCRAPE_EVERY_S while it gets no reading (cAdvisor has no series yet) or, with `after_ns`,
        none newer than that; up to CADVISOR_LONGEST_S and never after the job ended."""
        deadline = time.monotonic() + CADVISOR_LONGEST_S
        wanted = (
            "a reading"
            if after_ns is None
            else f"a reading newer than the previous scrape's (sample time {after_ns // 1_000_000} Unix ms)"
        )
        repeats = 0
        while True:
            try:
                scraped, reading, stat = self._once()
            except BackendError as exc:
                problem = str(exc)
            else:
                if after_ns is None or reading > after_ns:
                    return scraped, reading, stat, repeats
                if reading < after_ns:
                    raise BackendError(
                        f"E6: cAdvisor's reading of {self.where} went back in time "
                        f"({reading // 1_000_000} < {after_ns // 1_000_000} Unix ms): the kubelet or "
                        "the container restarted between the scrapes"
                    )
                problem = "cAdvisor still served the reading the previous scrape got"
            if self.job_done():
                raise BackendError(
                    f"E6: the job {self.where} ended before the kubelet's cAdvisor gave {wanted} "
                    f"({repeats + 1} scrapes; last: {problem}); the job must outlast the second "
                    "scrape by one of cAdvisor's housekeeping intervals (10-15 s)"
                )
            if time.monotonic() >= deadline:
                raise BackendError(
                    f"E6: the kubelet's cAdvisor did not give {wanted} of {self.where} within "
                    f"{CADVISOR_LONGEST_S:g} s, scraped every {RESCRAPE_EVERY_S:g} s "
                    f"({repeats + 1} scrapes; last: {problem})"
                )
            repeats += 1
            time.sleep(RESCRAPE_EVERY_S)


#: (scrape wall ns, reading wall ns, counters, extra keys of its record)
Scrape = tuple[int, int, dict[str, Any], dict[str, Any]]
#: (reading wall ns, counters, extra keys of its record)
Reading = tuple[int, dict[str, Any], dict[str, Any]]


def run_e6(spec: VariantSpec, ctx: Context) -> ExperimentResult:
    calib = burst_container("burst", spec, spec.calibration_rounds, None)
    job = burst_container("burst", spec, spec.rounds, spec.limit)
    node = Node("node", (Pod("calib", (calib,)), Pod("e6", (job,))), cpus=spec.node_cpus or ctx.node_cpus)
    result = ExperimentResult()
    real = ctx.capabilities.cadvisor
    if real:
        misfit = cadvisor_misfit(spec)
        if misfit:
            raise BackendError(f"E6 {spec.name} cannot be measured against the kubelet's cAdvisor: {misfit}")
    elif spec.first_scrape_ms < spec.housekeeping_ms:
        raise BackendError(
            f"E6: first_scrape_ms ({spec.first_scrape_ms}) must be at least housekeeping_ms "
            f"({spec.housekeeping_ms}), or the first scrape may find no reading yet"
        )
    rng = seeds.housekeeping_rng(ctx.seed)
    with deployed(ctx, node, result) as dep, ctx.busy():
        result.add_output(
            dep.run_job(
                "calib", "burst", timeout_s=burst_timeout(spec.with_changes(limit=None, rounds=spec.calibration_rounds))
            )
        )
        job_run = _Background(lambda: dep.run_job("e6", "burst", timeout_s=burst_timeout(spec)))
        if real:
            out, readings, scrapes = _scrape_cadvisor(dep, spec, job_run)
        else:
            out, readings, scrapes = _scrape_emulated(dep, spec, rng, job_run)
    origin = job_start_ns(out.records)
    result.add_output(out)
    source = CADVISOR if real else EMULATED
    for seq, (wall, stat, extra) in enumerate(readings):
        result.records.append(
            {
                **podstat_record("e6", "burst", "housekeeping", seq, (wall - origin) / 1e6, stat),
                "source": source,
                **extra,
            }
        )
    for seq, (scrape_wall, reading_wall, stat, extra) in enumerate(scrapes):
        result.records.append(
            {
                **podstat_record(
                    "e6",
                    "burst",
                    "scrape",
                    seq,
                    (reading_wall - origin) / 1e6,
                    stat,
                    at_ms=(scrape_wall - origin) / 1e6,
                ),
                "source": source,
                **extra,
            }
        )
    result.notes.append(
        "E6 scraped the kubelet's cAdvisor (/metrics/cadvisor through the API server's node proxy): rates over "
        "the difference of cAdvisor's own sample times"
        if real
        else f"E6 emulated cAdvisor (this backend has none): the container's counters read every "
        f"{spec.housekeeping_ms:g} ms, each scrape returning the latest reading with its own time"
    )
    result.window_s = (spec.rounds + spec.calibration_rounds) * spec.interval_ms / 1000
    return result


def _scrape_emulated(
    dep: Deployment, spec: VariantSpec, rng: random.Random, job_run: "_Background"
) -> tuple[Output, list[Reading], list[Scrape]]:
    """Local, docker: the housekeeping thread reads the container's counters; scrapes take its latest."""
    hk_s = spec.housekeeping_ms / 1000
    keeper = Housekeeping(dep, "e6", "burst", hk_s, offset_s=rng.uniform(0, hk_s))
    times = _scrape_times(spec)
    keeper.start()
    scrapes: list[Scrape] = []
    try:
        for _ in times:
            got = keeper.scrape()
            if got is not None:
                scrapes.append((time.time_ns(), *got, {}))
    finally:
        keeper.stop()  # on an interrupt too; leaving the deployment then ends the job
    out = job_run.result()
    if keeper.error is not None:
        raise keeper.error
    return out, [(wall, stat, {}) for wall, stat in keeper.readings], scrapes


def _scrape_cadvisor(
    dep: Deployment, spec: VariantSpec, job_run: "_Background"
) -> tuple[Output, list[Reading], list[Scrape]]:
    """kind, kubernetes: two scrapes of the kubelet's cAdvisor, holding two different readings."""
    scraper = CadvisorScrapes(dep, "e6", "burst", job_run.done)
    scrapes: list[Scrape] = []
    try:
        for _ in _scrape_times(spec):
            scraped, reading, stat, repeats = scraper.scrape(scrapes[-1][1] if scrapes else None)
            scrapes.append((scraped, reading, stat, {"cadvisor_ms": reading // 1_000_000, "rescrapes": repeats}))
    except BackendError:
        if job_run.done():
            job_run.result()  # the job's own failure, when it failed, says more
        raise
    out = job_run.result()
    return out, [(wall, stat, {"cadvisor_ms": wall // 1_000_000}) for wall, stat in scraper.readings], scrapes


def _scrape_times(spec: VariantSpec) -> Iterator[None]:
    """Yields at the two scrape times, first_scrape_ms and scrape_gap_ms later, counted from the call."""
    started = time.monotonic()

    def wait_for_each() -> Iterator[None]:
        for at_ms in (spec.first_scrape_ms, spec.first_scrape_ms + spec.scrape_gap_ms):
            time.sleep(max(0.0, started + at_ms / 1000 - time.monotonic()))
            yield

    return wait_for_each()


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

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def job_start_ns(records: list[dict[str, Any]]) -> int:
    """When the burst job started, on the wall clock (its header's time)."""
    header = next(r for r in records if r.get("type") == "header")
    return wall_ns_of(header["time"])
