"""A virtual machine on this host: boot a guest that shares the host's filesystem and run one
command in it (virtme-ng's ``vng`` around QEMU), leaving nothing behind.

The guest sees this host's files read-only, except the directories handed in as writable
(``--rwdir``); its kernel (Debian's ``linux-image-amd64``) mounts cgroup v2, so the local
backend's v2 code meets a real kernel there. KVM is used only when asked for (``accel: kvm``) or, on ``auto``,
when /dev/kvm can be opened and this host is not itself a guest (a nested guest hangs at boot
on the machines this was built on); otherwise QEMU emulates the CPU (TCG): cgroup settings and
read-outs are real, wall-clock timing is not that of a real node.

Cleanup: ``vng`` and the QEMU it starts run in a process group of their own. Leaving
:func:`run_in_guest` (a normal end, an error, Ctrl-C, SIGTERM) kills that group; a guardian
process (``python -m throttlelab.platform.vm_guest guard PGID``, holding a pipe from the caller) kills it
when the caller dies without unwinding (SIGKILL).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import shutil
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from throttlelab.errors import BackendError
from throttlelab.host.interference import orchestrator_named
from throttlelab.host.processes import group_alive, spawn_guardian

#: What the guest's CPU is: QEMU emulating it, or the host's CPU through KVM.
TCG, KVM = "tcg", "kvm"
#: What runs the guest's jobs (config vm.node): the local backend's cgroups, or the lab's real node.
NODE_CGROUPS, NODE_KUBERNETES = "cgroups", "kubernetes"
NODES = (NODE_CGROUPS, NODE_KUBERNETES)
#: The environment variable that tells a process it runs in the lab's guest, with the guest's
#: settings as JSON (vcpus, memory, kernel, accel, kubernetes): the vm backend reads it.
GUEST_ENV = "THROTTLELAB_VM_GUEST"

INSTALL_HINT = (
    "install them with: apt-get install qemu-system-x86 linux-image-amd64 busybox-static "
    "&& .venv/bin/pip install virtme-ng (docs/BACKENDS.md, 'The vm backend')"
)


@dataclass(frozen=True)
class VmSettings:
    """config.yaml's ``vm`` section: the guest's size, its kernel, whether to use KVM, and whether its
    jobs run on the lab's real Kubernetes node in the guest (``kubernetes``) or on its cgroups."""

    vcpus: int = 2
    memory: str = "2G"
    kernel: str | None = None  # None: the newest /boot/vmlinuz-*
    accel: str = "auto"  # auto / kvm / tcg
    node: str = "cgroups"  # cgroups: the local backend's tree; kubernetes: the real node (backends/node)

    @property
    def kubernetes(self) -> bool:
        """Whether the guest's jobs run on the lab's real Kubernetes node."""
        return self.node == NODE_KUBERNETES

    @classmethod
    def from_mapping(cls, section: Mapping[str, object] | None) -> VmSettings:
        section = dict(section or {})
        known = ("vcpus", "memory", "kernel", "accel", "node")
        unknown = sorted(set(section) - set(known))
        if unknown:
            raise BackendError(f"vm settings: unknown key(s) {', '.join(unknown)}; known: {', '.join(known)}")
        settings = cls(**section)  # type: ignore[arg-type]
        if settings.accel not in ("auto", KVM, TCG):
            raise BackendError(f"vm settings: accel must be auto, kvm or tcg, not {settings.accel!r}")
        if not isinstance(settings.vcpus, int) or settings.vcpus < 1:
            raise BackendError(f"vm settings: vcpus must be a whole number >= 1, not {settings.vcpus!r}")
        if settings.node not in NODES:
            raise BackendError(f"vm settings: node must be {' or '.join(NODES)}, not {settings.node!r}")
        return settings


@dataclass(frozen=True)
class VmTools:
    vng: str
    qemu: str
    kernel: Path


def _on_path(name: str, extra: Sequence[str]) -> str | None:
    for folder in extra:
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


def find_tools(settings: VmSettings) -> VmTools:
    """vng (beside this interpreter or on PATH), QEMU, a static busybox and the guest kernel; one
    error naming everything that is missing and how to install it."""
    here = [str(Path(sys.executable).parent)]
    missing = []
    vng = _on_path("vng", here)
    if vng is None or _on_path("virtme-run", [str(Path(vng).parent)]) is None:
        missing.append("virtme-ng (vng, virtme-run)")
    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None:
        missing.append("QEMU (qemu-system-x86_64, Debian's qemu-system-x86)")
    if not any(Path(p).is_file() for p in ("/bin/busybox", "/usr/bin/busybox")):
        missing.append("a static busybox (Debian's busybox-static), which virtme-ng's guest init needs")
    kernel = Path(settings.kernel) if settings.kernel else newest_kernel()
    if kernel is None or not kernel.is_file():
        missing.append(f"a guest kernel ({settings.kernel or '/boot/vmlinuz-*'}; Debian's linux-image-amd64)")
    elif not os.access(kernel, os.R_OK):
        missing.append(f"read access to the guest kernel {kernel} (run as root)")
    if missing:
        raise BackendError(f"the vm backend needs {'; '.join(missing)}: {INSTALL_HINT}")
    assert vng is not None and qemu is not None and kernel is not None
    return VmTools(vng=vng, qemu=qemu, kernel=kernel)


def newest_kernel(boot: Path = Path("/boot")) -> Path | None:
    """The /boot/vmlinuz-* of the highest version, or None."""
    found = sorted(glob.glob(str(boot / "vmlinuz-*")), key=_version_key)
    return Path(found[-1]) if found else None


def _version_key(path: str) -> list[tuple[int, str]]:
    parts = Path(path).name.removeprefix("vmlinuz-").replace("-", ".").split(".")
    return [(int(p), "") if p.isdigit() else (-1, p) for p in parts]


def host_is_guest(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this host's CPU says it runs under a hypervisor (the 'hypervisor' flag)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    return any(line.startswith("flags") and " hypervisor" in line for line in text.splitlines())


def choose_accel(setting: str, kvm_device: Path = Path("/dev/kvm"), nested: bool | None = None) -> str:
    """TCG or KVM for ``setting`` (auto / kvm / tcg). kvm without a usable /dev/kvm is an error."""
    usable = kvm_device.exists() and os.access(kvm_device, os.R_OK | os.W_OK)
    if setting == TCG:
        return TCG
    if setting == KVM:
        if not usable:
            raise BackendError(
                f"vm.accel is kvm, but {kvm_device} is missing or not writable: load the kvm module, "
                "run as root, or set vm.accel to auto or tcg"
            )
        return KVM
    nested = host_is_guest() if nested is None else nested
    return KVM if usable and not nested else TCG


def vng_command(
    tools: VmTools,
    settings: VmSettings,
    accel: str,
    rwdirs: Sequence[Path],
    command: Sequence[str],
    env: Mapping[str, str],
) -> list[str]:
    """The ``vng`` command line that boots the guest and runs ``command`` with ``env`` in this
    folder; its exit status is the command's."""
    inner = " ".join(
        ["exec", "env", *(shlex.quote(f"{k}={v}") for k, v in env.items()), *(shlex.quote(word) for word in command)]
    )
    args = [
        tools.vng,
        "--run",
        str(tools.kernel),
        "--cpus",
        str(settings.vcpus),
        "--memory",
        settings.memory,
        "--user",
        "root",
    ]
    if accel == TCG:
        args.append("--disable-kvm")
    for folder in rwdirs:
        args += ["--rwdir", str(Path(folder).resolve())]
    return [*args, "--exec", inner]


def run_in_guest(
    settings: VmSettings,
    command: Sequence[str],
    rwdirs: Sequence[Path],
    env: Mapping[str, str] | None = None,
    log: Callable[[str], None] = lambda message: None,
    timeout_s: float | None = None,
    stdout: IO[Any] | int | None = None,
) -> int:
    """Boot a guest, run ``command`` in it (cwd: this process's), and return its exit status.

    The guest's processes, QEMU and vng are gone when this returns or raises, whatever ends it;
    the guardian covers a SIGKILL of this process."""
    tools = find_tools(settings)
    accel = choose_accel(settings.accel)
    for folder in rwdirs:
        Path(folder).mkdir(parents=True, exist_ok=True)
    guest = {
        "vcpus": settings.vcpus,
        "memory": settings.memory,
        "kernel": str(tools.kernel),
        "accel": accel,
        "kubernetes": settings.kubernetes,
    }
    full_env = {**dict(env or {}), GUEST_ENV: json.dumps(guest, sort_keys=True)}
    argv = vng_command(tools, settings, accel, rwdirs, command, full_env)
    path = os.environ.get("PATH", "")
    vng_env = {**os.environ, "PATH": f"{Path(tools.vng).parent}{os.pathsep}{path}"}
    log(
        f"booting a {settings.vcpus}-vCPU guest ({accel.upper()}, kernel {tools.kernel.name}, "
        f"{settings.memory}{', the real Kubernetes node in it' if settings.kubernetes else ''}): "
        f"{shlex.join(command)}"
    )
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        env=vng_env,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.STDOUT if stdout is not None else None,
        start_new_session=True,
    )
    # the guardian also watches the orchestrator (Snakemake) that started this process: a SIGKILL of
    # Snakemake leaves this process running to its end, and the guest with it, unless it is stopped then
    # named even when it is gone already (killed before this guest booted): the guardian then stops it at once
    owner = orchestrator_named()
    guardian = spawn_guardian("throttlelab.platform.vm_guest", "guard", str(proc.pid), *([str(owner)] if owner else []))
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise BackendError(f"the guest did not finish within {timeout_s:.0f} s; it was stopped") from None
    finally:
        stop_group(proc.pid)
        proc.wait()
        _close_guardian(guardian)
    log(f"guest finished with status {code} after {time.monotonic() - started:.1f} s")
    return code


def stop_group(pgid: int, grace_s: float = 3.0) -> None:
    """SIGTERM the guest's process group (vng, QEMU), then SIGKILL what is left after ``grace_s``."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        end = time.monotonic() + wait_s
        while time.monotonic() < end:
            _reap(pgid)
            if not group_alive(pgid):
                return
            time.sleep(0.05)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _close_guardian(guardian: subprocess.Popen) -> None:
    if guardian.stdin:
        guardian.stdin.close()
    try:
        guardian.wait(15)
    except subprocess.TimeoutExpired:
        guardian.kill()
        guardian.wait()


def guard(pgid: int, owner: int | None = None) -> int:
    """The guardian: wait until the caller's pipe closes or ``owner`` (the orchestrator that started the
    caller) ends, whichever comes first, then stop the guest's process group."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    caller = sys.stdin.buffer.fileno()
    watched = [caller]
    gone = "caller"
    try:
        if owner is not None:
            watched.append(os.pidfd_open(owner))  # readable once the owner has exited
        while True:
            ready, _, _ = select.select(watched, [], [])
            if caller in ready:
                if os.read(caller, 4096):
                    continue  # the caller wrote something: not the end
                break  # EOF: the caller is done or gone
            gone = "orchestrator"
            break
    except ProcessLookupError:
        gone = "orchestrator"  # gone before the watch began
    if group_alive(pgid):
        stop_group(pgid)
        print(f"throttlelab vm guardian: {gone} gone; stopped the guest (process group {pgid})", file=sys.stderr)
    return 0


def run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m throttlelab.platform.vm_guest run",
        description="Boot a guest, run one command in it (in this folder), return its status.",
    )
    p.add_argument("--vcpus", type=int, default=VmSettings.vcpus)
    p.add_argument("--memory", default=VmSettings.memory)
    p.add_argument("--kernel", default=None, help="guest kernel image (default: the newest /boot/vmlinuz-*)")
    p.add_argument("--accel", default=VmSettings.accel, choices=("auto", KVM, TCG))
    p.add_argument(
        "--kubernetes", action="store_true", help="vm.node kubernetes: the guest's jobs run on the real node"
    )
    p.add_argument("--rwdir", action="append", default=[], help="a folder the guest may write (repeatable)")
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE for the command (repeatable)")
    p.add_argument("--timeout-s", type=float, default=None)
    p.add_argument("command", nargs="+", help="the command (after --)")
    return p


def main(argv: list[str]) -> int:
    if argv[:1] == ["guard"] and len(argv) in (2, 3):
        return guard(int(argv[1]), int(argv[2]) if len(argv) == 3 else None)
    if argv[:1] == ["run"]:
        args = run_parser().parse_args(argv[1:])
        settings = VmSettings.from_mapping(
            {
                "vcpus": args.vcpus,
                "memory": args.memory,
                "kernel": args.kernel,
                "accel": args.accel,
                "node": NODE_KUBERNETES if args.kubernetes else NODE_CGROUPS,
            }
        )
        env = dict(item.split("=", 1) for item in args.env)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _raise_exit)
        try:
            return run_in_guest(
                settings,
                args.command,
                [Path(d) for d in args.rwdir],
                env=env,
                log=lambda message: print(f"throttlelab vm: {message}", file=sys.stderr, flush=True),
                timeout_s=args.timeout_s,
            )
        except BackendError as exc:
            print(f"throttlelab vm: {exc}", file=sys.stderr)
            return 1
    print("usage: python -m throttlelab.platform.vm_guest run [options] -- COMMAND... | guard PGID", file=sys.stderr)
    return 2


def _raise_exit(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through run_in_guest's cleanup


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
