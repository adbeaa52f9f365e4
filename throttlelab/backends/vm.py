"""The vm backend: the local backend, run inside a guest booted by :mod:`throttlelab.host.vm`.

The rules do not run this backend job by job on the host: ``throttlelab vm-batch`` boots one
guest per experiment and runs every job of that experiment in it (``experiments/batch.py``),
each through the ordinary runner with ``--backend vm``. Inside the guest this backend is the
local one (the guest's own cgroup v2 tree, its vCPUs as the node) whose raw logs say where they
were measured: the guest's kernel, vCPUs and memory, the cgroup version, and whether the CPU
was emulated (TCG) or virtualized (KVM), so the findings can tell read-outs (judged as usual)
from timings (not testable on an emulated CPU).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from throttlelab.backends.base import BackendError, Capabilities
from throttlelab.backends.local import LocalBackend
from throttlelab.host.vm import GUEST_ENV, TCG


def guest_settings() -> dict[str, Any] | None:
    """The guest's settings as the host handed them in (vcpus, memory, kernel, accel), or None
    outside the lab's guest."""
    text = os.environ.get(GUEST_ENV)
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


class VmBackend(LocalBackend):
    name = "vm"

    def preflight(self) -> None:
        if guest_settings() is None:
            raise BackendError(
                "the vm backend runs inside its guest: `throttlelab vm-batch` boots one and runs the jobs there "
                "(the rules do this with --config backend=vm); it cannot run a job on this host directly"
            )
        super().preflight()

    def capabilities(self) -> Capabilities:
        caps = super().capabilities()
        guest = guest_settings() or {}
        accel = guest.get("accel")
        note = f"a {guest.get('vcpus', '?')}-vCPU QEMU guest, CPU " + (
            "emulated (TCG): read-outs are real, wall-clock timing is not a real node's"
            if accel == TCG
            else "virtualized (KVM)"
        )
        return Capabilities(
            cpus=caps.cpus,
            cgroup_version=caps.cgroup_version,
            can_pin_cpus=caps.can_pin_cpus,
            has_pause_level=caps.has_pause_level,
            runtime=caps.runtime,
            notes=(*caps.notes, note),
            cadvisor=caps.cadvisor,
        )

    def environment(self) -> dict[str, Any]:
        facts = super().environment()
        guest = guest_settings() or {}
        facts["vm"] = {
            "accel": guest.get("accel"),
            "cpu_emulated": guest.get("accel") == TCG,
            "vcpus": guest.get("vcpus"),
            "memory": guest.get("memory"),
            "kernel_image": guest.get("kernel"),
        }
        return facts


def from_config(
    binaries: dict[str, Path], runtime: str, settings: dict[str, Any], progress: Callable[[str], None]
) -> VmBackend:
    """The registry's factory (backends.base.make_backend); the guest's settings come from the host."""
    return VmBackend(binaries, runtime=runtime, progress=progress)
