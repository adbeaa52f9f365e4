"""The Docker engine on this host, through the Docker SDK: one client, clear errors, image builds.

Every user of the engine (the docker backend, its image builds, kind's node
containers and images) connects here, so a missing engine, a stale socket and a
socket this user may not open each end in one message that says what to do,
whoever asked. The messages name the caller (an EngineUser); without one they
name the docker backend, the first user of the engine.
"""

from __future__ import annotations

import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import requests

from throttlelab.errors import BackendError

DEFAULT_HOST = "unix:///var/run/docker.sock"
START_HINT = (
    "start it: `sudo systemctl start docker`, or without systemd `sudo dockerd > /var/log/dockerd.log 2>&1 &` "
    "(Debian/Ubuntu: `apt-get install docker.io` first), or set DOCKER_HOST to an engine that runs"
)


@dataclass(frozen=True)
class EngineUser:
    """Who talks to the engine, as the error messages name it: `name`, why it needs root
    (`why_root`), and what it uses the engine for (`uses`, said when there is none)."""

    name: str
    why_root: str
    uses: str = ""


DOCKER_BACKEND = EngineUser("docker backend", "the docker backend writes pod cgroups and needs root anyway")
#: kind's nodes and the lab's kind node images live in the engine too
KIND_ENGINE_USER = EngineUser(
    "kind backend", "kind drives its node containers through the engine", "kind runs its nodes as Docker containers"
)


class EngineUnreachable(BackendError):
    """No Docker engine answers."""


class EnginePermissionDenied(BackendError):
    """An engine is there, but this user may not open its socket."""


def docker_errors() -> tuple[type[BaseException], ...]:
    """What the SDK raises: its own errors, and requests' transport errors from the socket."""
    return (docker.errors.DockerException, requests.exceptions.RequestException)


def engine_host() -> str:
    """Where the engine is expected: DOCKER_HOST, or the default socket."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_HOST


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception, its causes and contexts, and exceptions carried in args (urllib3 nests them there)."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        cur = todo.pop()
        if cur is None or any(cur is s for s in seen):
            continue
        seen.append(cur)
        todo += [cur.__cause__, cur.__context__]
        todo += [a for a in getattr(cur, "args", ()) if isinstance(a, BaseException)]
        todo += [getattr(cur, "reason", None)] if isinstance(getattr(cur, "reason", None), BaseException) else []
    return seen


def engine_error(exc: BaseException, host: str, user: EngineUser = DOCKER_BACKEND) -> BackendError:
    """Turn the SDK's connection failure into one message that says what to do."""
    chain = _causes(exc)
    if any(isinstance(e, PermissionError) for e in chain):
        where = host.removeprefix("unix://")
        return EnginePermissionDenied(
            f"{user.name}: permission denied on the Docker socket {where}: this user may not talk to the "
            f"engine. Run as root ({user.why_root}), or add the user "
            "to the socket's group (`sudo usermod -aG docker $USER`, then log in again)"
        )
    if any(isinstance(e, FileNotFoundError) for e in chain):
        why = "no such socket"
    elif any(isinstance(e, ConnectionRefusedError) for e in chain):
        why = "connection refused: nothing listens there"
    else:
        why = str(chain[-1])[:200]
    uses = f"{user.uses}: " if user.uses else ""
    return EngineUnreachable(f"{user.name}: no Docker engine answers at {host} ({why}); {uses}{START_HINT}")


def connect(timeout_s: int = 60, user: EngineUser = DOCKER_BACKEND) -> docker.DockerClient:
    """A client for the engine named by DOCKER_HOST (or the default socket), or one clear error."""
    try:
        client = docker.from_env(timeout=timeout_s)
        client.ping()
    except docker_errors() as exc:
        raise engine_error(exc, engine_host(), user) from None
    return client


def kind_engine_client() -> docker.DockerClient:
    """The engine kind's nodes run in, once it has answered a ping; else an error saying how to start it."""
    return connect(timeout_s=30, user=KIND_ENGINE_USER)


# -- image builds: no base image is ever pulled ---------------------------------------------


#: The mode of every file a build context carries: they are the programs the image runs (cpulab,
#: podgate), and COPY keeps the mode in the context, whatever the umask gave the file on this host.
EXECUTABLE_MODE = 0o755


def build_context(dockerfile: bytes, files: dict[str, Path]) -> io.BytesIO:
    """A build context as a tar stream: the Dockerfile and these files (name in the context -> path),
    nothing else; each file as a root-owned executable (EXECUTABLE_MODE)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size, info.mode = len(dockerfile), 0o644
        tar.addfile(info, io.BytesIO(dockerfile))
        for name, path in files.items():
            info = tar.gettarinfo(str(path), arcname=name)
            if not info.isfile():
                raise BackendError(f"build context: {path} is not a regular file")
            info.mode, info.uid, info.gid, info.uname, info.gname = EXECUTABLE_MODE, 0, 0, "root", "root"
            with open(path, "rb") as handle:
                tar.addfile(info, handle)
    buf.seek(0)
    return buf


def build_image(client: docker.DockerClient, tag: str, context: io.BytesIO, labels: dict[str, str]) -> Any:
    """`docker build` of a context made by build_context, tagged and labelled; never pulls.
    Returns the SDK's image; a failed build is a BackendError naming the tag."""
    try:
        image, _log = client.images.build(
            fileobj=context,
            custom_context=True,
            tag=tag,
            labels=labels,
            rm=True,
            forcerm=True,
            pull=False,
        )
    except docker_errors() as exc:
        raise BackendError(f"image {tag}: docker build failed: {exc}") from None
    return image
