"""The vm backend: the local backend, run inside a guest booted by :mod:`throttlelab.platform.vm_guest`.

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
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from throttlelab.backends.base import BackendError, Capabilities
from throttlelab.backends.local import LocalBackend
from throttlelab.backends.node.node_backend import NodeBackend
from throttlelab.platform.vm_guest import GUEST_ENV, TCG
from throttlelab.model import results_layout as layout


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


def _require_guest() -> None:
    if guest_settings() is None:
        raise BackendError(
            "the vm backend runs inside its guest: `throttlelab vm-batch` boots one and runs the jobs there "
            "(the rules do this with --config backend=vm); it cannot run a job on this host directly"
        )


def _guest_note() -> str:
    guest = guest_settings() or {}
    return f"a {guest.get('vcpus', '?')}-vCPU QEMU guest, CPU " + (
        "emulated (TCG): read-outs are real, wall-clock timing is not a real node's"
        if guest.get("accel") == TCG
        else "virtualized (KVM)"
    )


def _with_note(caps: Capabilities) -> Capabilities:
    return dataclasses.replace(caps, notes=(*caps.notes, _guest_note()))


def guest_facts() -> dict[str, Any]:
    """The raw log's ``environment.vm``: how the guest ran (the findings read ``accel``)."""
    guest = guest_settings() or {}
    return {
        "accel": guest.get("accel"),
        "cpu_emulated": guest.get("accel") == TCG,
        "vcpus": guest.get("vcpus"),
        "memory": guest.get("memory"),
        "kernel_image": guest.get("kernel"),
        "kubernetes": bool(guest.get("kubernetes")),
    }


class InGuest:
    """What running in the guest adds to the backend it is mixed into (listed before it): the check that
    this is the lab's guest, the guest's note among the capabilities, and its facts in the environment."""

    def preflight(self) -> None:
        _require_guest()
        super().preflight()

    def capabilities(self) -> Capabilities:
        return _with_note(super().capabilities())

    def environment(self) -> dict[str, Any]:
        return {**super().environment(), "vm": guest_facts()}


class VmBackend(InGuest, LocalBackend):
    """``vm`` (the default): the local backend on the guest's own cgroup v2 tree and vCPUs."""

    name = "vm"


# An emulated guest's node starts far slower than one on this host's CPUs: a 2-vCPU TCG guest's was ready
# 104 s after its start (docs/BACKENDS.md), and a 10-vCPU guest's containerd was not serving within 60 s on a busy
# host. The limits only bound a hang, so under TCG each is this many times its usual value.
EMULATED_PATIENCE = 8.0


def node_patience(accel: str | None) -> float:
    """How many times its usual limit each of the real node's start steps may take in a guest."""
    return EMULATED_PATIENCE if accel == TCG else 1.0


class VmNodeBackend(InGuest, NodeBackend):
    """``vm: {node: kubernetes}``: the lab's real node, run in the guest (its cgroup v2, its vCPUs)."""

    name = "vm"


def from_config(
    binaries: dict[str, Path], runtime: str, settings: dict[str, Any], progress: Callable[[str], None]
) -> VmBackend | VmNodeBackend:
    """The registry's factory (backends.base.make_backend); the guest's settings come from the host:
    the real node's backend when they say ``kubernetes``, else the local backend in the guest."""
    guest = guest_settings() or {}
    if guest.get("kubernetes"):
        return VmNodeBackend(
            Path.cwd() / layout.TOOLS_MANIFEST,
            Path.cwd() / layout.NODE_IMAGE_DIR,
            runtime=runtime,
            progress=progress,
            binaries=binaries,
            patience=node_patience(guest.get("accel")),
            node_logs=Path.cwd() / layout.GUEST_NODE_LOGS,  # an emulated node is slow in ways its logs explain
        )
    return VmBackend(binaries, runtime=runtime, progress=progress)
