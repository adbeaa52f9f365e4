"""The vm host module: the guest's command line, the tool check, and the guest itself.

The tests marked ``vm`` boot real QEMU guests (virtme-ng); they skip, with the reason, where the
tools are missing. One of them runs the ``cgroup_v2_kernel`` tests inside a 2-vCPU guest, so the
v2 code meets a real v2 kernel in CI although this host's cgroups are v1.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PROJECT
from throttlelab.errors import BackendError
from throttlelab.platform import vm_guest


def _tools_or_skip() -> vm_guest.VmTools:
    try:
        return vm_guest.find_tools(vm_guest.VmSettings())
    except BackendError as exc:
        pytest.skip(str(exc))


# -- without a guest ----------------------------------------------------------------------------


def test_command_line_asks_for_the_guest_and_quotes_the_command(tmp_path):
    tools = vm_guest.VmTools(
        vng="/x/vng", qemu="/usr/bin/qemu-system-x86_64", kernel=Path("/boot/vmlinuz-6.1.0-1-amd64")
    )
    argv = vm_guest.vng_command(
        tools,
        vm_guest.VmSettings(vcpus=10, memory="4G"),
        vm_guest.TCG,
        [tmp_path],
        ["python", "-c", "print('a b')"],
        {"K": "v w"},
    )
    assert argv[:2] == ["/x/vng", "--run"] and "--disable-kvm" in argv
    assert argv[argv.index("--cpus") + 1] == "10" and argv[argv.index("--memory") + 1] == "4G"
    assert argv[argv.index("--rwdir") + 1] == str(tmp_path.resolve())
    assert argv[-1] == "exec env 'K=v w' python -c 'print('\"'\"'a b'\"'\"')'"
    kvm_argv = vm_guest.vng_command(tools, vm_guest.VmSettings(), vm_guest.KVM, [], ["true"], {})
    assert "--disable-kvm" not in kvm_argv


def test_accel_choice(tmp_path):
    device = tmp_path / "kvm"
    assert vm_guest.choose_accel("tcg", device) == vm_guest.TCG
    assert vm_guest.choose_accel("auto", device, nested=False) == vm_guest.TCG  # no /dev/kvm
    with pytest.raises(BackendError, match="vm.accel is kvm, but .* missing"):
        vm_guest.choose_accel("kvm", device)
    device.write_text("")
    assert vm_guest.choose_accel("auto", device, nested=False) == vm_guest.KVM
    assert vm_guest.choose_accel("auto", device, nested=True) == vm_guest.TCG  # a nested guest hangs at boot
    assert vm_guest.choose_accel("kvm", device) == vm_guest.KVM


def test_settings_are_checked():
    with pytest.raises(BackendError, match="unknown key"):
        vm_guest.VmSettings.from_mapping({"cpus": 2})
    with pytest.raises(BackendError, match="accel must be"):
        vm_guest.VmSettings.from_mapping({"accel": "on"})
    assert vm_guest.VmSettings.from_mapping({"vcpus": 10}).vcpus == 10
    assert vm_guest.VmSettings.from_mapping({"node": "kubernetes"}).kubernetes is True
    assert vm_guest.VmSettings().kubernetes is False and vm_guest.VmSettings().node == "cgroups"
    with pytest.raises(BackendError, match="node must be cgroups or kubernetes"):
        vm_guest.VmSettings.from_mapping({"node": "kind"})


def test_the_guest_runs_the_real_node_when_its_settings_say_kubernetes(monkeypatch):
    """vm: {node: kubernetes} reaches the guest in its settings; the vm backend there is the real node's,
    named vm, whose raw logs say how the guest ran (the findings read accel: emulated CPU on TCG)."""
    from throttlelab.backends import vm as vm_backend

    monkeypatch.setenv(vm_guest.GUEST_ENV, '{"vcpus": 10, "accel": "tcg", "kubernetes": true}')
    node = vm_backend.from_config({}, "runc-old", {}, lambda m: None)
    assert isinstance(node, vm_backend.VmNodeBackend) and node.name == "vm" and node.runtime == "runc-old"
    assert vm_backend.guest_facts()["kubernetes"] is True and vm_backend.guest_facts()["cpu_emulated"] is True
    # the node's own logs (kubelet, containerd, ...) are kept in the one folder the guest may write
    assert node.node_logs == Path.cwd() / "results" / "vm" / "node-logs"
    monkeypatch.setenv(vm_guest.GUEST_ENV, '{"vcpus": 2, "accel": "tcg"}')
    assert type(vm_backend.from_config({}, "runc-new", {}, lambda m: None)) is vm_backend.VmBackend


def test_newest_kernel_by_version(tmp_path):
    for name in ("vmlinuz-6.1.0-9-amd64", "vmlinuz-6.1.0-57-amd64", "vmlinuz-5.10.0-30-amd64"):
        (tmp_path / name).write_text("")
    assert vm_guest.newest_kernel(tmp_path).name == "vmlinuz-6.1.0-57-amd64"
    assert vm_guest.newest_kernel(tmp_path / "none") is None


def test_missing_tools_are_named_with_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(BackendError) as caught:
        vm_guest.find_tools(vm_guest.VmSettings(kernel=str(tmp_path / "vmlinuz-none")))
    message = str(caught.value)
    for part in (
        "virtme-ng",
        "QEMU",
        "vmlinuz-none",
        "apt-get install qemu-system-x86 linux-image-amd64",
        "pip install virtme-ng",
    ):
        assert part in message


def test_the_cli_says_what_is_missing_without_a_traceback(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "PYTHONPATH": str(PROJECT)}
    proc = subprocess.run(
        [sys.executable, "-m", "throttlelab.platform.vm_guest", "run", "--kernel", str(tmp_path / "k"), "--", "true"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "the vm backend needs" in proc.stderr and "Traceback" not in proc.stderr


# -- with a guest -------------------------------------------------------------------------------


def _descendants(pid: int) -> dict[int, str]:
    """pid -> command name of every process below ``pid``."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(proc.name))
        names[int(proc.name)] = name
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = names[child]
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _sleeping_guest(env: dict[str, str]) -> subprocess.Popen:
    """A caller of `throttlelab.platform.vm_guest run` whose 1-vCPU guest sleeps for 10 minutes."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "throttlelab.platform.vm_guest",
            "run",
            "--vcpus",
            "1",
            "--memory",
            "512M",
            "--",
            "sleep",
            "600",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_qemu(caller: subprocess.Popen, timeout_s: float = 60) -> None:
    """Until QEMU runs below ``caller`` (at most ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(n.startswith("qemu-system") for n in _descendants(caller.pid).values()):
            return
        time.sleep(0.2)
    raise AssertionError(f"no QEMU started within {timeout_s:.0f} s")


@pytest.mark.vm
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_the_guest_never_outlives_its_caller(tmp_path, how):
    """The caller killed (SIGKILL: the guardian) or interrupted (Ctrl-C, SIGTERM: its own cleanup)
    while the guest runs: no vng, virtme-run or QEMU process of it is left."""
    _tools_or_skip()
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    caller = _sleeping_guest(env)
    _wait_for_qemu(caller)
    guest = _descendants(caller.pid)
    caller.send_signal(how)
    caller.wait(30)
    end = time.monotonic() + 20
    while any(_alive(p) for p in guest) and time.monotonic() < end:
        time.sleep(0.1)
    left = {p: n for p, n in guest.items() if _alive(p)}
    assert not left, f"left behind after {signal.Signals(how).name}: {left}"


@pytest.mark.vm
def test_the_guest_never_outlives_its_orchestrator(tmp_path):
    """Snakemake killed with SIGKILL leaves its job (the vm batch) running, and the guest with it, until
    the job ends (seen with a 10-vCPU guest: QEMU still up 20 s after). The guardian also watches the
    orchestrator the rules name (THROTTLELAB_ORCHESTRATOR_PID): once it is gone, so is the guest."""
    _tools_or_skip()
    orchestrator = subprocess.Popen(["sleep", "600"])
    env = {**os.environ, "PYTHONPATH": str(PROJECT), "THROTTLELAB_ORCHESTRATOR_PID": str(orchestrator.pid)}
    caller = _sleeping_guest(env)
    try:
        _wait_for_qemu(caller)
        guest = _descendants(caller.pid)
        orchestrator.kill()
        orchestrator.wait()
        end = time.monotonic() + 20
        while any(_alive(p) for p in guest) and time.monotonic() < end:
            time.sleep(0.1)
        left = {p: n for p, n in guest.items() if _alive(p)}
        assert not left, f"left behind after the orchestrator's SIGKILL: {left}"
        caller.wait(30)  # its guest gone, the caller ends too
    finally:
        orchestrator.kill()
        if caller.poll() is None:
            caller.kill()
        caller.wait()


@pytest.mark.vm
def test_a_guest_whose_orchestrator_is_already_gone_is_stopped_at_once(tmp_path):
    """Snakemake killed between starting a vm batch and the guest's boot (seen: the batch then ran its
    guest to the end with no orchestrator): the guardian finds the orchestrator gone and stops the guest."""
    _tools_or_skip()
    gone = subprocess.Popen(["true"])
    gone.wait()
    env = {**os.environ, "PYTHONPATH": str(PROJECT), "THROTTLELAB_ORCHESTRATOR_PID": str(gone.pid)}
    caller = _sleeping_guest(env)
    try:
        _, err = caller.communicate(timeout=60)
        assert "orchestrator gone; stopped the guest" in err, err[-2000:]
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()
    assert not [p for p, n in _descendants(caller.pid).items() if n.startswith("qemu-system")]


@pytest.mark.vm
@pytest.mark.slow
def test_cgroup_v2_kernel_tests_pass_in_a_v2_guest(v2_guest):
    """The ``cgroup_v2_kernel`` tests (and the version-independent cleanup tests) in the session's
    2-vCPU guest with cgroup v2 (tests/v2_guest.py), before the real node starts there; their results
    are the guest's pytest's."""
    step = v2_guest.cgroup_v2_tests
    print(step.log[-3000:])
    assert step.code is not None, f"the guest never ran the v2 tests: {v2_guest.log[-3000:]}"
    assert step.code == 0, step.log[-3000:]
    summary = re.search(r"(\d+) passed", step.log)
    lines = step.log.strip().splitlines()
    assert summary and int(summary.group(1)) >= 8 and "skipped" not in lines[-1], step.log[-1500:]
