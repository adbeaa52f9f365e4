"""The smallest real-cluster smoke test of the kind and kubernetes backends (docs/KIND_SMOKE.md).

`snakemake --cores 1 smoke --config backend=kind` runs `throttlelab smoke`, which goes through
the backend interface as the experiments do and checks, one step after the other:

1. readback: two pods, one Burstable (a container with a CPU request and limit) and one
   BestEffort (a server with neither), deployed behind their gates and read back at every level
   the backend can read: node, both QoS levels, both pods, their pause containers, both
   containers (`verify()` raises on any difference from the design; kind reads every level, an
   existing cluster only the containers' and the report lists the others as unreadable);
2. burst and cAdvisor: the limited container spins with two threads against its 250m limit;
   its counters are read before and after, and the kubelet's cAdvisor is scraped twice through
   the API server's node proxy (E6's `CadvisorScrapes`: two different readings, with cAdvisor's
   own sample times); the container was throttled, and cAdvisor's periods grew between its readings;
3. load by pod IP: the server's address is its pod's IP, not a loopback one, and one short load
   run from the load generator's pod against it ends with requests answered;
4. pin and restore (where the backend can pin node CPUs): a node pinned to CPU 0 while a
   deployment lives, its cpuset as before once it is gone; where it cannot, the reason;
5. nothing left: no pod of the lab, no pinned or paused node (`Backend.leftovers()`).

A step that fails stops the ones after it (the last one runs always); the report (JSON) says
what each step saw and why one failed, and the command exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from throttlelab.backends.base import Backend, BackendError, Deployment, make_backend
from throttlelab.experiments.services_experiments import CadvisorScrapes
from throttlelab.model.coverage import CLUSTER_BACKENDS
from throttlelab.model.placement import Container, LoadPlacement, Node, Pod

#: The limited container: two busy threads against 250m (request 100m: a Burstable pod).
BURST = Container("burst", ("spin", "-threads=2"), request_milli=100, limit_milli=250, role="service")
#: The server: no request, no limit (a BestEffort pod); it listens on a port of its own choosing.
SERVER = Container("server", ("serve", "-addr=127.0.0.1:0", "-work=100us", "-alloc=0", "-live-mb=0"), role="service")
NODE = Node("node", (Pod("burst", (BURST,)), Pod("server", (SERVER,))))
#: One short open-loop run of the load generator against the server.
LOAD_ARGS = ("load", "-duration=2s", "-warmup=0s", "-rps=20", "-seed=1", "-timeout=2s", "-label=smoke")
#: The pinned deployment of step 4: one small pod on a node pinned to CPU 0.
PINNED = Node("pinned", (Pod("app", (Container("app", ("info",), request_milli=100, limit_milli=500),)),), cpus="0")
LISTEN_TIMEOUT_S = 30.0
LOAD_TIMEOUT_S = 90.0


class SmokeFailed(BackendError):
    """A step of the smoke test did not see what a working backend shows."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise SmokeFailed(message)


def step_readback(dep: Deployment, backend: Backend) -> dict[str, Any]:
    readbacks = dep.verify()
    paths = {r.path: r.level for r in readbacks}
    unreadable = sorted(r.path for r in readbacks if "unreadable" in r.actual)
    readable = {r.level for r in readbacks if "unreadable" not in r.actual}
    qos = sorted(p for p, level in paths.items() if level == "qos")
    pauses = sorted(p for p, level in paths.items() if level == "pause")
    _check(
        len([p for p, level in paths.items() if level == "container"]) == 2 and "container" in readable,
        f"readback: expected both containers read back, got {paths}",
    )
    if backend.name == "kind":  # every level is in the node container
        _check(not unreadable, f"readback: kind left levels unreadable: {unreadable}")
        _check(
            len(qos) == 2
            and any(p.endswith("/burstable") for p in qos)
            and any(p.endswith("/besteffort") for p in qos),
            f"readback: expected the burstable and besteffort QoS levels, got {qos}",
        )
        _check(len(pauses) == 2, f"readback: expected both pods' pause containers, got {pauses}")
        _check({"node", "qos", "pod", "pause", "container"} <= readable, f"readback: levels read: {sorted(readable)}")
    return {"levels": paths, "unreadable": unreadable, "qos": qos, "pauses": pauses}


def step_burst_and_cadvisor(dep: Deployment) -> dict[str, Any]:
    handle = dep.start("burst", "burst")
    try:
        before = dep.read_stat("burst", "burst")
        scraper = CadvisorScrapes(dep, "burst", "burst", job_done=lambda: False)
        _, first_ns, first, _ = scraper.scrape()
        _, second_ns, second, rescrapes = scraper.scrape(first_ns)
        after = dep.read_stat("burst", "burst")
    finally:
        dep.stop(handle)
    throttled = after["nr_throttled"] - before["nr_throttled"]
    _check(
        throttled > 0,
        f"burst: two threads against a 250m limit were never throttled (nr_throttled {before} -> {after})",
    )
    periods = second["nr_periods"] - first["nr_periods"]
    _check(periods > 0, f"cAdvisor: its two readings show no CFS period between them ({first} -> {second})")
    return {
        "nr_throttled_before": before["nr_throttled"],
        "nr_throttled_after": after["nr_throttled"],
        "cadvisor": [{"sample_ms": first_ns // 1_000_000, **first}, {"sample_ms": second_ns // 1_000_000, **second}],
        "cadvisor_gap_s": (second_ns - first_ns) / 1e9,
        "rescrapes": rescrapes,
    }


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1", "[::1]", "", "0.0.0.0", "[::]") or host.startswith("127.")


def step_load_by_pod_ip(dep: Deployment) -> dict[str, Any]:
    handle = dep.start("server", "server")
    try:
        addr = dep.wait_for_record(handle, "listening", timeout_s=LISTEN_TIMEOUT_S)["addr"]
        host = addr.rpartition(":")[0]
        _check(not _loopback(host), f"load: the server's address {addr} is not its pod's IP")
        out = dep.run_load([*LOAD_ARGS, f"-target=http://{addr}"], timeout_s=LOAD_TIMEOUT_S)
    finally:
        dep.stop(handle)
    summary = next((r for r in out.records if r.get("type") == "summary"), None)
    _check(out.returncode == 0 and summary is not None, f"load: exit {out.returncode}, summary {summary}")
    ok = ((summary or {}).get("work") or {}).get("ok") or 0
    _check(ok > 0, f"load: no request to {addr} was answered ({summary})")
    return {"target": addr, "answered": ok, "summary": summary}


def step_pin_and_restore(backend: Backend) -> dict[str, Any]:
    # the backend's own refusal (kubernetes: it changes no node; kind on a cgroup v1 host: EBUSY)
    why_not = backend.untestable(PINNED, None) if hasattr(backend, "untestable") else None
    cpusets: Callable[[], dict[str, str]] | None = getattr(backend, "node_cpusets", None)
    if why_not or cpusets is None:
        return {"skipped": why_not or f"the {backend.name} backend cannot show its nodes' cpusets"}
    before = cpusets()
    with backend.deploy(PINNED) as dep:
        dep.verify()  # the node level's cpuset among them
        during = cpusets()
    after = cpusets()
    pinned = {name: cpus for name, cpus in during.items() if before.get(name) != cpus}
    _check(list(pinned.values()) == ["0"], f"pin: expected one node pinned to CPU 0, saw {pinned} (before {before})")
    _check(after == before, f"pin: the cpusets were not restored: {after}, before {before}")
    return {"pinned": pinned, "restored": after}


def run_smoke(backend: Backend, progress: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Every step in order; a failed one ends the run but for the check for leftovers."""
    report: dict[str, Any] = {"backend": backend.name, "steps": [], "ok": False}

    def step(name: str, fn: Callable[[], dict[str, Any]]) -> bool:
        progress(f"smoke: {name}")
        started = time.monotonic()
        try:
            seen = fn()
        except BackendError as exc:
            report["steps"].append({"step": name, "ok": False, "error": str(exc)})
            progress(f"smoke: {name} FAILED: {exc}")
            return False
        report["steps"].append({"step": name, "ok": True, "seconds": round(time.monotonic() - started, 1), **seen})
        return True

    backend.preflight()
    with backend.deploy(NODE, LoadPlacement()) as dep:
        ok = (
            step("readback", lambda: step_readback(dep, backend))
            and step("burst and cAdvisor", lambda: step_burst_and_cadvisor(dep))
            and step("load by pod IP", lambda: step_load_by_pod_ip(dep))
        )
    ok = ok and step("pin and restore", lambda: step_pin_and_restore(backend))

    def nothing_left() -> dict[str, Any]:
        left = backend.leftovers()
        _check(not left, "left on the cluster: " + "; ".join(left))
        return {"left": left}

    ok = step("nothing left", nothing_left) and ok
    report["ok"] = ok
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="throttlelab smoke", description=__doc__.splitlines()[0])
    p.add_argument("--backend", required=True)
    p.add_argument("--backend-settings", default="{}", help="config.yaml's section of the backend, as JSON")
    p.add_argument("--runtime", default="runc-new")
    p.add_argument("--out", required=True, type=Path, help="the report (JSON)")
    args = p.parse_args(argv)
    if args.backend not in CLUSTER_BACKENDS:
        print(
            f"throttlelab smoke: the smoke test runs on a Kubernetes cluster; backend {args.backend!r} has none "
            f"(use --config backend=kind or backend=kubernetes)",
            file=sys.stderr,
        )
        return 2

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    backend = make_backend(args.backend, {}, args.runtime, json.loads(args.backend_settings), progress)
    report = run_smoke(backend, progress)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    if not report["ok"]:  # Snakemake removes a failed job's output: the log keeps the report
        print(json.dumps(report, indent=1), file=sys.stderr)
    print(f"smoke on {args.backend}: {'passed' if report['ok'] else 'FAILED'} -> {args.out}", file=sys.stderr)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
