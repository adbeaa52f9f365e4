"""The docker backend's guardian: outlives its runner, then removes the run's containers and cgroups.

Every docker run starts one (`DockerGuardian`, backends/docker.py) as
`python -m throttlelab.backends.docker_guardian DESC RUN`, where DESC describes
every cgroup hierarchy (cgroupfs.all_hierarchies) and RUN is the run's cgroup
tree. It starts beside every measurement, so it stays light: the Docker SDK is
imported only when the runner did not say that it undid everything itself
(processes.RUNNER_CLEANED), that is when it died or its own clean-up failed. The
run's cgroups are removed in either case (nothing to do after a clean runner).
"""

from __future__ import annotations

import json
import sys

from throttlelab.host import cgroupfs
from throttlelab.host.processes import RUNNER_CLEANED, outlive_runner
from throttlelab.host.reaper import kill_and_remove


def remove_run_containers(rel: str) -> tuple[list[str], int]:
    """The names of the run's containers removed through the engine, and an exit status (1: it could not)."""
    # the SDK only where a runner left containers
    from throttlelab.backends.docker import BackendError, remove_containers
    from throttlelab.host.docker_engine import connect, docker_errors

    try:
        client = connect(timeout_s=30)
        removed = remove_containers(client, rel)
        client.close()
    except (BackendError, *docker_errors()) as exc:
        print(f"throttlelab docker guardian: cannot remove the containers of {rel}: {exc}", file=sys.stderr)
        return [], 1
    return removed, 0


def guard(desc: dict, rel: str) -> int:
    """Wait until the runner's pipe closes, then remove what it left of the run."""
    said = outlive_runner()
    removed, status = ([], 0) if said == RUNNER_CLEANED else remove_run_containers(rel)
    try:
        killed = kill_and_remove(cgroupfs.all_hierarchies_from_description(desc), rel)
    except cgroupfs.CgroupError as exc:
        print(f"throttlelab docker guardian: {exc}", file=sys.stderr)
        return 1
    if removed or killed:
        print(
            f"throttlelab docker guardian: runner gone; removed {len(removed)} container(s) and {rel}", file=sys.stderr
        )
    return status


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(
            "usage: python -m throttlelab.backends.docker_guardian DESC RUN (started by the backend)", file=sys.stderr
        )
        return 2
    return guard(json.loads(argv[0]), argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
