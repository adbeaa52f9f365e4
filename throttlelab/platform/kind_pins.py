"""CPU pinning of kind's node containers (`docker update --cpuset-cpus`), always restored.

A deployment pins the worker (the node's cpuset) and the control-plane (the load
generator's) for E5, E8 and E10, and sets each back to what it had: on exit,
on failure, on interrupt (finally), by the guardian when the runner is
SIGKILLed (restore_described, run by throttlelab.backends.kind.kind_guardian), and by
the sweep at the next start: before a node is pinned, a state file names the
runner's pid and the cpuset to restore.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from throttlelab.errors import BackendError
from throttlelab.host.state_dir import state_dir, write_state
from throttlelab.host.processes import left_by_dead_runners, pid_alive
from throttlelab.model.placement import format_cpuset, parse_cpuset
from throttlelab.host.docker_engine import kind_engine_client
from throttlelab.platform.kind_nodes import node_container, node_exec

PIN_STATE_NAME = "kind-pins"  # a folder of the lab's private state (host/state_dir.py)


def pin_state_dir() -> Path:
    """Where pinned nodes are recorded until restored (made and checked: the lab's own)."""
    return state_dir(PIN_STATE_NAME)


@dataclass(frozen=True)
class Pin:
    """One node container pinned to `cpus`; `restore_to` is what it had (or every CPU it could use)."""

    container: str
    cpus: str
    restore_to: str


def state_file(container: str) -> Path:
    """Where a pinned node's runner pid and original cpuset are kept until it is restored."""
    return pin_state_dir() / f"{container}.json"


def current_cpuset(container: Any) -> str:
    container.reload()
    return container.attrs.get("HostConfig", {}).get("CpusetCpus") or ""


def usable_cpus(client: Any, container: Any) -> str:
    """Every CPU the node container may use before pinning: its cgroup's effective cpuset, read
    inside it; a container without `cat` falls back to every CPU of the engine."""
    for path in ("/sys/fs/cgroup/cpuset.cpus.effective", "/sys/fs/cgroup/cpuset/cpuset.effective_cpus"):
        try:
            text = node_exec(container, ["cat", path], f"read {path}").strip()
        except BackendError:
            continue
        if text:
            return text
    ncpu = int(client.info().get("NCPU", 0))
    if ncpu < 1:
        raise BackendError(f"kind backend: cannot tell which CPUs node {container.name} may use")
    return format_cpuset(list(range(ncpu)))


def set_cpuset(container: Any, cpus: str) -> None:
    import docker.errors

    try:
        container.update(cpuset_cpus=cpus)
    except docker.errors.APIError as exc:
        raise BackendError(f"kind backend: docker update --cpuset-cpus {cpus} {container.name} failed: {exc}") from None
    got = current_cpuset(container)
    if parse_cpuset(got) != parse_cpuset(cpus):
        raise BackendError(f"kind backend: node {container.name} has cpuset {got!r} after setting {cpus!r}")


def plan_pins(client: Any, wanted: dict[str, str]) -> list[Pin]:
    """Read what each node container has now, before anything changes."""
    pins = []
    for name, cpus in wanted.items():
        container = node_container(client, name)
        usable = usable_cpus(client, container)
        if not set(parse_cpuset(cpus)) <= set(parse_cpuset(usable)):
            raise BackendError(
                f"kind backend: cpuset {cpus} for node {name} is not available: it can use {usable}; "
                "choose CPUs from that set in the profile"
            )
        # Docker cannot set an empty cpuset back ("" means "leave as is"), so "no pinning" is restored as every CPU.
        pins.append(Pin(name, cpus, current_cpuset(container) or usable))
    return pins


def apply_pins(client: Any, pins: list[Pin], pid: int) -> None:
    for pin in pins:
        # the state file first: a runner killed right after `docker update` still gets its node restored
        write_state(state_file(pin.container), json.dumps({"pid": pid, "restore_to": pin.restore_to, "cpus": pin.cpus}))
        set_cpuset(node_container(client, pin.container), pin.cpus)


def restore_pins(client: Any, pins: list[dict[str, str]] | list[Pin]) -> list[str]:
    """Set every pinned node back; returns what was restored. Idempotent."""
    import docker.errors

    done = []
    problems = []
    for pin in pins:
        name, restore_to = (
            (pin.container, pin.restore_to) if isinstance(pin, Pin) else (pin["container"], pin["restore_to"])
        )
        container = node_container(client, name, missing_ok=True)
        if container is None:
            state_file(name).unlink(missing_ok=True)  # the cluster is gone: nothing to restore
            continue
        try:
            if parse_cpuset(current_cpuset(container) or restore_to) != parse_cpuset(restore_to):
                set_cpuset(container, restore_to)
                done.append(f"{name} -> {restore_to}")
            state_file(name).unlink(missing_ok=True)
        except (BackendError, docker.errors.APIError) as exc:
            problems.append(f"{name}: {exc}")
    if problems:
        raise BackendError("kind backend: could not restore node cpusets: " + "; ".join(problems))
    return done


def sweep_pins(client: Any, alive: Callable[[int], bool] = pid_alive) -> list[str]:
    """Restore nodes a dead runner left pinned (its state file names its pid)."""
    stale = left_by_dead_runners(pin_state_dir(), alive)
    return restore_pins(client, [{"container": name, "restore_to": state["restore_to"]} for name, state in stale])


def restore_described(desc: dict[str, Any]) -> list[str]:
    """The guardian's part: set back the nodes its description lists under "pins"
    ([{"container": NODE_CONTAINER, "restore_to": CPUSET}, ...]); returns what it did."""
    if not desc.get("pins"):
        return []
    restored = restore_pins(kind_engine_client(), desc["pins"])
    return ["restored " + ", ".join(restored)] if restored else []
