"""A workload that writes its record and exits between two looks of wait_for_record is not one that
exited without it (X4 on docker failed so: "burst-1/burst exited (0) before writing a 'summary'
record", its summary in the logs). Stand-ins make the record appear exactly when the exit is seen,
so the order of the two looks decides, every time."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from throttlelab.backends.base import BackendError
from throttlelab.backends.docker import DockerDeployment
from throttlelab.backends.kube.pod_workloads import PodWorkloads
from throttlelab.backends.kube.run_pods import PodLimits
from throttlelab.backends.local import LocalDeployment

SUMMARY = {"type": "summary", "elapsed_s": 2.3}


class Workload:
    """Writes its summary and exits the moment anyone first looks at whether it has exited."""

    def __init__(self, writes: bool = True):
        self.done = False
        self.writes = writes

    def look(self) -> bool:
        self.done = True
        return True

    def output(self) -> str:
        return json.dumps(SUMMARY) + "\n" if self.done and self.writes else '{"type":"header"}\n'


def local_handle(w: Workload):
    def find_record(record_type):
        line = w.output().splitlines()[-1]
        return json.loads(line) if json.loads(line)["type"] == record_type else None

    return SimpleNamespace(
        pod="burst-1",
        container="burst",
        find_record=find_record,
        proc=SimpleNamespace(poll=lambda: 0 if w.look() else None, returncode=0),
    )


def docker_parts(w: Workload):
    ctr = SimpleNamespace(
        status="running", attrs={"State": {"ExitCode": 0}}, logs=lambda stdout, stderr: w.output().encode()
    )

    def reload():
        if w.look():
            ctr.status = "exited"

    ctr.reload = reload
    deployment = SimpleNamespace(backend=SimpleNamespace(_call=lambda f, *a, **k: f(*a, **k)))
    return deployment, SimpleNamespace(ctr=ctr, source="burst-1/burst")


def kube_parts(w: Workload):
    kc = SimpleNamespace(
        logs=lambda ns, pod, container: w.output(),
        read_pod=lambda ns, pod: {
            "status": {
                "containerStatuses": [{"name": "burst", "state": {"terminated": {"exitCode": 0}} if w.look() else {}}]
            }
        },
    )
    deployment = PodWorkloads(SimpleNamespace(kc=kc, ns="lab", limits=PodLimits(poll_s=0.01)), lifecycle=None)
    return deployment, SimpleNamespace(pod="burst-1", container="burst", pod_name="burst-1")


def wait(kind: str, w: Workload):
    if kind == "local":
        return LocalDeployment.wait_for_record(None, local_handle(w), "summary", timeout_s=2)
    if kind == "docker":
        deployment, handle = docker_parts(w)
        return DockerDeployment.wait_for_record(deployment, handle, "summary", timeout_s=2)
    workloads, handle = kube_parts(w)
    return workloads.wait_for_record(handle, "summary", timeout_s=2)


@pytest.mark.parametrize("kind", ["local", "docker", "kubernetes"])
def test_a_record_written_just_before_the_exit_is_found(kind):
    assert wait(kind, Workload()) == SUMMARY


@pytest.mark.parametrize("kind", ["local", "docker", "kubernetes"])
def test_an_exit_without_the_record_still_fails_with_the_reason(kind):
    with pytest.raises(BackendError, match=r"burst-1/burst exited \(0\) before writing a 'summary' record"):
        wait(kind, Workload(writes=False))
