"""The docker backend's guardian starts beside every docker run, so it must stay light: after a runner that
said it undid everything, it removes the run's cgroups without loading the Docker SDK; after one that died
(nothing said), it goes to the engine for the run's containers."""

from __future__ import annotations

import json
import subprocess
import sys

from throttlelab.host.processes import RUNNER_CLEANED

#: runs the guardian's main in this interpreter, then says whether the SDK was loaded and the exit status
GUARDIAN = """
import sys
from throttlelab.backends import docker_guardian
status = docker_guardian.main(sys.argv[1:])
print("docker" in sys.modules, status)
"""


def _guardian(tmp_path, said: bytes) -> tuple[list[str], str]:
    (tmp_path / "run").mkdir()
    desc = json.dumps({"version": 2, "root": str(tmp_path)})
    out = subprocess.run(
        [sys.executable, "-c", GUARDIAN, desc, "run"],
        input=said,
        capture_output=True,
        timeout=60,
        env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "PATH": "/usr/bin:/bin"},
    )
    assert not (tmp_path / "run").exists(), "the guardian must remove the run's cgroup tree either way"
    return out.stdout.decode().split(), out.stderr.decode()


def test_after_a_clean_runner_the_guardian_never_loads_the_docker_sdk(tmp_path):
    loaded, stderr = _guardian(tmp_path, RUNNER_CLEANED)
    assert loaded == ["False", "0"], stderr


def test_after_a_runner_that_said_nothing_the_guardian_asks_the_engine(tmp_path):
    loaded, stderr = _guardian(tmp_path, b"")
    # no engine answers at that socket: it says so and exits 1, having loaded the SDK to ask
    assert loaded == ["True", "1"], stderr
    assert "cannot remove the containers of run" in stderr
