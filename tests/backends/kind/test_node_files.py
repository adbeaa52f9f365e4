"""A kind node's files, read from this host through /proc/<pid>/root, against
real processes in mount namespaces of their own: what such a process sees at a path is not what
this host sees there, and it is what is read; a restarted process is located once more; a file
missing in a running process is not taken for a restart; a read starts no process."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from throttlelab.backends.base import BackendError
from throttlelab.platform.kind_nodes import NodeFiles

pytestmark = pytest.mark.root  # real processes in mount namespaces of their own (unshare)

#: In a mount namespace of its own: a tmpfs over $1 (this host keeps seeing the empty folder), a
#: file in it, then idle. `unshare` without --fork execs, so the process keeps unshare's pid.
IN_NAMESPACE = (
    'mount -t tmpfs throttlelab-test "$1" && printf "%s" "$2" > "$1/cpu.stat" && echo ready && exec sleep 600'
)


@pytest.fixture
def node_process(tmp_path):
    """Starts a process with `content` in <tmp>/cgroup/cpu.stat, visible in its own mount namespace only."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to make a mount namespace")
    folder = tmp_path / "cgroup"
    folder.mkdir()
    started: list[subprocess.Popen] = []

    def start(content: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", IN_NAMESPACE, "sh", str(folder), content],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        if proc.stdout.readline().strip() != "ready":
            proc.kill()
            pytest.skip(f"cannot make a mount namespace here: {proc.communicate()[1].strip()}")
        return proc

    yield start, str(folder / "cpu.stat")
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_file_is_read_in_the_node_processs_own_mount_namespace(node_process):
    start, path = node_process
    proc = start("usage_usec 42\nnr_periods 7\n")
    assert not Path(path).exists()  # this host does not see the node's mount
    files = NodeFiles("ns-node", lambda: proc.pid)
    try:
        assert files.read(path) == "usage_usec 42\nnr_periods 7\n"
        assert files.exists(path) and files.exists(str(Path(path).parent)) and not files.exists(path + ".nope")
        assert files.read_optional(path + ".nope") is None
        assert files.pid == proc.pid and files.located == 1
    finally:
        files.close()


def test_a_restarted_node_is_located_once_more_and_a_missing_file_is_not_a_restart(node_process):
    start, path = node_process
    current = [start("before")]
    files = NodeFiles("ns-node", lambda: current[0].pid)
    try:
        assert files.read(path) == "before" and files.located == 1
        os.unlink(f"/proc/{current[0].pid}/root{path}")  # the file goes, in the running node
        with pytest.raises(FileNotFoundError):
            files.read(path)
        assert files.located == 1  # the node runs: not looked up again
        current[0].kill()
        current[0].wait()
        current[0] = start("after")  # the node restarted: another process (and pid) with its own mount
        assert files.read(path) == "after"
        assert files.located == 2 and files.pid == current[0].pid
    finally:
        files.close()


def test_a_node_that_is_gone_says_so(node_process):
    start, path = node_process
    proc = start("x")
    running = [True]

    def locate() -> int:
        if not running[0]:
            raise BackendError("kind backend: node container ns-node is not running (status exited)")
        return proc.pid

    files = NodeFiles("ns-node", locate)
    try:
        assert files.read(path) == "x"
        proc.kill()
        proc.wait()
        running[0] = False
        with pytest.raises(BackendError, match="ns-node is not running"):
            files.read(path)
    finally:
        files.close()


def test_a_read_starts_no_process(node_process, monkeypatch, capsys):
    start, path = node_process
    proc = start("usage_usec 1\nnr_periods 2\nnr_throttled 0\nthrottled_usec 0\n")
    files = NodeFiles("ns-node", lambda: proc.pid)
    files.read(path)
    started = []
    original = subprocess.Popen.__init__

    def counted(self, *args, **kwargs):
        started.append(args)
        original(self, *args, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", counted)
    rounds = 5000
    t0 = time.perf_counter()
    for _ in range(rounds):
        files.read(path)
    elapsed = time.perf_counter() - t0
    monkeypatch.undo()
    files.close()
    assert started == [] and files.located == 1
    with capsys.disabled():
        print(f"\n[NodeFiles.read through /proc/<pid>/root] {elapsed / rounds * 1e6:.1f} us per read ({rounds} reads)")
