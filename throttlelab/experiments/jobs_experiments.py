"""The job experiments: E1 (where limits are written), E2a (bursts under limits),
E3 (GOMAXPROCS by go.mod line) and S1 (GOMAXPROCS and throttling, book chapter), and ours
beyond the lab (docs/EXPERIMENTS.md): X1 (burst budget), X2 (CFS period) and X3 (run queues or
threads), each E2a's burst with one more knob (run by ``run_e2a``), and X4 (overlapping bursts of
several pods, ``run_x4``).
"""

from __future__ import annotations

from typing import Any


from throttlelab.model.variants import VariantSpec
from throttlelab.model.builds import GO_LINES
from throttlelab.model.placement import Container, Node, Pod
from throttlelab.model.quantities import go_default_gomaxprocs
from throttlelab.experiments.context import Context, ExperimentResult, deployed


def container_env(gomaxprocs: int | None, godebug: str | None = None) -> tuple[tuple[str, str], ...]:
    env = []
    if gomaxprocs is not None:
        env.append(("GOMAXPROCS", str(gomaxprocs)))
    if godebug:
        env.append(("GODEBUG", str(godebug)))
    return tuple(env)


def run_e1(spec: VariantSpec, ctx: Context) -> ExperimentResult:
    """Two containers running `info`; the readback walks every level up to the host root."""
    containers = tuple(
        Container(
            name,
            ("info",),
            variant=(spec.build or "go124mod"),
            request_milli=getattr(spec, name).request_milli,
            limit_milli=getattr(spec, name).limit_milli,
        )
        for name in ("app", "sidecar")
    )
    node = Node("node", (Pod("e1", containers),), cpus=ctx.node_cpus)
    result = ExperimentResult()
    if not ctx.capabilities.has_pause_level:
        result.notes.append("no pause container on this backend: the pod level holds only the workload containers")
    with deployed(ctx, node, result) as dep:
        for c in containers:
            result.add_output(dep.run_job("e1", c.name, timeout_s=30))
    return result


def burst_timeout(spec: VariantSpec) -> float:
    # Worst case: each round needs threads*work of CPU at the limit's rate (plus a period), and the interval.
    limit = (spec.milli("limit") or 1000) / 1000
    period_s = (spec.period_us or 100_000) / 1e6
    per_round = spec.threads * spec.work_ms / 1000 / min(limit, 1.0) + period_s + spec.interval_ms / 1000
    return spec.rounds * per_round * 2 + 30


def _burst_container(spec: VariantSpec, *extra: str) -> Container:
    """The `cpulab burst` container of E2a and X1-X4 (``extra``: more of burst's flags)."""
    args = (
        "burst",
        f"-threads={spec.threads}",
        f"-work={spec.work_ms}ms",
        f"-interval={spec.interval_ms}ms",
        f"-rounds={spec.rounds}",
        *(("-spread",) if spec.spread else ()),
        *extra,
    )
    return Container(
        "burst",
        args,
        variant=(spec.build or "go124mod"),
        request_milli=spec.milli("request"),
        limit_milli=spec.milli("limit"),
        env=container_env(spec.gomaxprocs or spec.threads),
        burst_us=spec.burst_us,
    )


def run_e2a(spec: VariantSpec, ctx: Context) -> ExperimentResult:
    """One burst job: T threads each burn W of thread CPU time every interval.

    Also X1-X3 (docs/EXPERIMENTS.md): the variant may set a burst budget (``burst_ms``), the
    node's CFS period (``period_ms``) and the node's CPUs (``cpus``, else the config's)."""
    node = Node(
        "node", (Pod("e2a", (_burst_container(spec),)),), cpus=spec.cpus or ctx.node_cpus, period_us=spec.period_us
    )
    result = ExperimentResult()
    with deployed(ctx, node, result) as dep, ctx.busy():
        out = dep.run_job("e2a", "burst", timeout_s=burst_timeout(spec))
    result.add_output(out)
    result.window_s = _summary_value(out.records, "elapsed_s")
    return result


def run_x4(spec: VariantSpec, ctx: Context) -> ExperimentResult:
    """X4 (docs/EXPERIMENTS.md): E2a's burst job in each of ``pods`` pods, each under its own limit. Every
    pod's rounds start on the same grid (multiples of the interval since the Unix epoch, ``-align``), so
    pods started apart burst together; staggered, pod k is ``k / pods`` of an interval later (``-offset``)."""
    count = int(spec.pods or 2)

    def offset(k: int) -> float:
        return spec.interval_ms * k / count if spec.stagger else 0

    pods = tuple(
        Pod(f"burst-{k}", (_burst_container(spec, "-align", f"-offset={offset(k):g}ms"),)) for k in range(count)
    )
    node = Node("node", pods, cpus=spec.cpus or ctx.node_cpus)
    result = ExperimentResult()
    timeout = burst_timeout(spec) * count
    with deployed(ctx, node, result) as dep:
        with ctx.busy():
            handles = [dep.start(pod.name, "burst") for pod in pods]
            for handle in handles:
                dep.wait_for_record(handle, "summary", timeout_s=timeout)
        outs = [dep.stop(handle) for handle in handles]
    for out in outs:
        result.add_output(out)
    result.window_s = max(_summary_value(out.records, "elapsed_s") for out in outs)
    return result


def run_e3(spec: VariantSpec, ctx: Context) -> ExperimentResult:
    """`info` of one build under one limit; records what Go picked and what Go's rule predicts (docs/LAB.md §2.6)."""
    build = spec.build
    limit = spec.milli("limit")
    container = Container(
        "info",
        ("info",),
        variant=build,
        request_milli=spec.milli("request"),
        limit_milli=limit,
        env=container_env(spec.gomaxprocs, spec.godebug),
    )
    node = Node("node", (Pod("e3", (container,)),), cpus=ctx.node_cpus)
    result = ExperimentResult()
    with deployed(ctx, node, result) as dep:
        result.add_output(dep.run_job("e3", "info", timeout_s=30))
    result.records.append(
        {
            "type": "expectation",
            "gomaxprocs": _expected_gomaxprocs(spec, build, limit, ctx.capabilities.cpus),
            "rule": "GOMAXPROCS env wins; go >= 1.25 line: max(2, ceil(limit)) capped at usable CPUs; "
            "older line or GODEBUG=containermaxprocs=0: usable CPUs",
        }
    )
    return result


def _expected_gomaxprocs(spec: VariantSpec, build: str, limit: int | None, cpus: int) -> int:
    if spec.gomaxprocs is not None:
        return int(spec.gomaxprocs)
    if "containermaxprocs=0" in (spec.godebug or ""):
        return cpus
    return go_default_gomaxprocs(GO_LINES[build], limit, cpus)


def run_s1(spec: VariantSpec, ctx: Context) -> ExperimentResult:
    """The book chapter's program: busy on every P for a while, then the change in throttling."""
    args = ("spin", "-threads=0", f"-report={spec.report_ms}ms", f"-duration={spec.duration_ms}ms")
    container = Container(
        "spin",
        args,
        variant=(spec.build or "go125mod"),
        request_milli=spec.milli("request"),
        limit_milli=spec.milli("limit"),
        env=container_env(spec.gomaxprocs, spec.godebug),
    )
    node = Node("node", (Pod("s1", (container,)),), cpus=ctx.node_cpus)
    result = ExperimentResult()
    with deployed(ctx, node, result) as dep, ctx.busy():
        out = dep.run_job("s1", "spin", timeout_s=spec.duration_ms / 1000 * 3 + 30)
    result.add_output(out)
    result.window_s = _summary_value(out.records, "elapsed_s")
    return result


def _summary_value(records: list[dict[str, Any]], key: str) -> float:
    for record in records:
        if record.get("type") == "summary" and key in record:
            return float(record[key])
    return 0.0
