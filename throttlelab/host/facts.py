"""Facts about this host for a run's metadata: kernel, machine, CPU model and counts."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def host_facts() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
    }


def cgroup_version(root: Path = Path("/sys/fs/cgroup")) -> int:
    """This host's cgroup version, read without any engine: 2 when the unified hierarchy is
    mounted at the root (its cgroup.controllers file exists), else 1."""
    return 2 if (root / "cgroup.controllers").exists() else 1


def code_version(root: Path | None = None) -> dict[str, Any]:
    """The code a run is made with, for its meta record (``code``, docs/STATISTICS.md §5's registry rule): the git
    commit of ``root`` (the runner's working directory unless told: Snakemake starts it in the project)
    and whether tracked files differ from it; both None where ``root`` is no git checkout or git is not
    installed (a vm guest's copy). The run's own start time (meta ``start``) is
    what the findings compare with a threshold's revision; the commit says which code made the run."""
    root = Path.cwd() if root is None else root
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
        if head.returncode != 0:
            return {"commit": None, "dirty": None}
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None}
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return {"commit": head.stdout.strip(), "dirty": dirty}


#: Linux's capabilities by number (include/uapi/linux/capability.h), as runc and Docker name them
CAPABILITIES = (
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
    "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
    "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
    "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
    "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
)  # fmt: skip


def missing_capabilities(status: str | None = None, last_cap: int | None = None) -> list[str]:
    """The capabilities the kernel knows (0..cap_last_cap) that this process's bounding set lacks: a
    privileged container (every capability the kernel knows) cannot be started by it."""
    if status is None:
        status = Path("/proc/self/status").read_text()
    if last_cap is None:
        last_cap = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    bounding = int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapBnd:")), 16)
    return [
        CAPABILITIES[bit] if bit < len(CAPABILITIES) else f"capability {bit}"
        for bit in range(last_cap + 1)
        if not bounding >> bit & 1
    ]
