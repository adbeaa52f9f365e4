"""The Docker engine client every user of the engine shares: a missing engine, a stale socket and
a socket this user may not open each end in one message that says what to do. No engine is
needed: the sockets here are made by the tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tarfile

import pytest

from conftest import PROJECT
from throttlelab.host.docker_engine import (
    EnginePermissionDenied,
    EngineUnreachable,
    EngineUser,
    build_context,
    connect,
    engine_error,
)


def test_no_engine_is_one_message_saying_how_to_start_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/missing.sock")
    with pytest.raises(EngineUnreachable, match="docker backend: no Docker engine answers") as info:
        connect()
    assert "no such socket" in str(info.value)
    assert "dockerd" in str(info.value) and "systemctl start docker" in str(info.value)


def test_a_socket_without_an_engine_is_the_same_message(tmp_path, monkeypatch):
    path = tmp_path / "stale.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()  # the file stays; nobody listens: what a crashed dockerd leaves
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    with pytest.raises(EngineUnreachable, match="connection refused"):
        connect()


def test_no_permission_on_the_socket_says_so(tmp_path):
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs root and setpriv (util-linux) to take away root's permission override")
    path = tmp_path / "docker.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    os.chmod(path, 0)
    tmp_path.chmod(0o755)
    try:
        # root without CAP_DAC_OVERRIDE is an ordinary user for the socket's mode bits
        drop = "-dac_override,-dac_read_search"
        proc = subprocess.run(
            [
                "setpriv",
                "--bounding-set",
                drop,
                "--inh-caps",
                drop,
                sys.executable,
                "-c",
                "from throttlelab.host.docker_engine import connect\nconnect()",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=PROJECT,
            env={**os.environ, "PYTHONPATH": str(PROJECT), "DOCKER_HOST": f"unix://{path}"},
        )
    finally:
        server.close()
    assert proc.returncode != 0
    assert "EnginePermissionDenied" in proc.stderr
    assert f"permission denied on the Docker socket {path}" in proc.stderr
    assert "docker group" in proc.stderr or "usermod -aG docker" in proc.stderr


def test_error_classification_without_an_engine():
    import requests

    denied = requests.exceptions.ConnectionError(OSError("aborted"))
    denied.__cause__ = PermissionError(13, "Permission denied")
    assert isinstance(engine_error(denied, "unix:///x.sock"), EnginePermissionDenied)
    missing = requests.exceptions.ConnectionError(FileNotFoundError(2, "No such file or directory"))
    assert "no such socket" in str(engine_error(missing, "unix:///x.sock"))


def test_the_messages_name_whoever_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/missing.sock")
    kind = EngineUser("kind backend", "kind needs root", "kind runs its nodes as Docker containers")
    with pytest.raises(
        EngineUnreachable,
        match=r"^kind backend: no Docker engine answers .*kind runs its nodes as "
        r"Docker containers: start it",
    ):
        connect(timeout_s=5, user=kind)
    import requests

    denied = requests.exceptions.ConnectionError(OSError("aborted"))
    denied.__cause__ = PermissionError(13, "Permission denied")
    assert str(engine_error(denied, "unix:///x.sock", kind)).startswith(
        "kind backend: permission denied on the Docker socket /x.sock: this user may not talk to the engine. "
        "Run as root (kind needs root)"
    )


def test_a_build_context_is_the_dockerfile_and_the_files_named(tmp_path):
    (tmp_path / "a").write_bytes(b"binary")
    with tarfile.open(fileobj=build_context(b"FROM scratch\nCOPY x /x\n", {"x": tmp_path / "a"})) as tar:
        assert sorted(tar.getnames()) == ["Dockerfile", "x"]
        assert tar.extractfile("Dockerfile").read() == b"FROM scratch\nCOPY x /x\n"
        assert tar.extractfile("x").read() == b"binary"


@pytest.mark.parametrize("on_disk", [0o600, 0o644, 0o700, 0o775])
def test_each_file_of_a_build_context_is_a_root_owned_executable_whatever_its_mode_here(tmp_path, on_disk):
    """COPY keeps the context's mode: a binary written under umask 077 (0600) would be an image whose
    entrypoint cannot be executed. The context says 0755, owner root, whatever the file's mode here."""
    binary = tmp_path / "cpulab"
    binary.write_bytes(b"\x7fELF")
    binary.chmod(on_disk)
    with tarfile.open(fileobj=build_context(b"FROM scratch\n", {"cpulab": binary})) as tar:
        info = tar.getmember("cpulab")
        assert (info.mode, info.uid, info.gid) == (0o755, 0, 0)
        assert tar.getmember("Dockerfile").mode == 0o644
