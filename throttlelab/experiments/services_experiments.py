"""The service experiments (SPEC §4): a `cpulab serve` meets traffic from `cpulab load`.

E2b  one service under open-loop load, steady or clumped arrivals, three settings;
E7   replicas behind per-connection balancing versus one pod with a raised limit;
E8   a busy neighbor pod beside the service, the service's CPU sampled finely;
S2   closed-loop maximum throughput by thread count, and a cascade of two services;
and ours beyond the lab (docs/EXPERIMENTS.md), both E2b's open loop (``run_e2b``):
X5   steady arrivals as average use nears the limit;
X6   Go's minimum of 2 threads: GOMAXPROCS 2 against 1 under clumped arrivals.
(E6, what monitoring sees, is monitoring.py.)

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
import socket
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from throttlelab.backends.base import BackendError, Deployment, Output
from throttlelab.model import records, seeds
from throttlelab.model.variants import VariantSpec
from throttlelab.model.placement import Container, LoadPlacement, Node, Pod, parse_cpuset
from throttlelab.experiments.context import Context, ExperimentResult, deployed

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
        load = dep.run_load(load_args(spec, targets, ctx.seed, label), timeout_s=load_timeout_s(spec))
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
