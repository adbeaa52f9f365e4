"""Run inside a vm guest (cgroup v2) by test_real_node_vm.py: start the real node, run one pod per
RuntimeClass (runc-new = runc 1.4.3, runc-old = runc 1.3.0) with containers requesting 100m and 500m,
read each container's and pod's cpu.weight from the guest's cgroupfs, take the node down, and write
what was read to OUT/weights.json (the host's test judges it against docs/LAB.md §2).

    python tests/backends/node/guest_weights.py OUT
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from throttlelab.backends import vm as vm_backend
from throttlelab.platform import real_node as nc
from throttlelab.platform.tool_build import ToolsSettings, cached
from throttlelab.platform import real_node_layout as kn

REQUESTS = {"small": "100m", "big": "500m"}


def pause_pod(name: str, runtime_class: str, resources: dict[str, dict]) -> dict:
    """A pod of the node's pause image under `runtime_class`, one container per entry of `resources`
    (container name -> its resources); the real node's tests make theirs with it too."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "runtimeClassName": runtime_class,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "enableServiceLinks": False,
            "containers": [
                {"name": container, "image": kn.PAUSE_IMAGE, "imagePullPolicy": "Never", "resources": limits}
                for container, limits in resources.items()
            ],
        },
    }


def node_kubectl(facts: dict, tools: dict, *args: str, stdin: str | None = None, timeout_s: float = 120) -> str:
    """`kubectl` of the node's cluster tools against the running node (its kubeconfig): its stdout, or a
    RuntimeError with its stderr. The real node's tests call it too."""
    kubectl_bin = str(Path(tools["kube-apiserver"]).with_name("kubectl"))
    done = subprocess.run(
        [kubectl_bin, "--kubeconfig", facts["kubeconfig"], *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr}")
    return done.stdout


def pod(name: str, runtime_class: str) -> dict:
    return pause_pod(name, runtime_class, {c: {"requests": {"cpu": request}} for c, request in REQUESTS.items()})


def main(out: Path) -> int:
    started = time.monotonic()
    rows = cached(Path("cluster"), ToolsSettings.from_mapping(None))
    tools, runc = nc.split_tools([(r["project"], r["binary"].name, str(r["path"])) for r in rows])
    versions = {
        handler: subprocess.run([path, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        for handler, path in runc.items()
    }
    result: dict = {"runc": versions, "pods": {}}
    # an emulated guest's node is slow to start and to go: the vm backend's patience, not the host's limits
    patience = vm_backend.node_patience((vm_backend.guest_settings() or {}).get("accel"))
    with nc.LocalNode(tools, runc, keep_logs=out / "logs", patience=patience) as facts:
        result["node_start_s"] = facts["start_s"]
        result["cgroup_version"] = facts["cgroup_version"]

        def kubectl(*args: str, stdin: str | None = None) -> str:
            return node_kubectl(facts, tools, *args, stdin=stdin, timeout_s=600)

        for handler in kn.RUNTIME_HANDLERS:
            kubectl("apply", "-f", "-", stdin=json.dumps(pod(f"w-{handler}", handler)))
        kubectl("wait", "--for=condition=Ready", *(f"pod/w-{h}" for h in kn.RUNTIME_HANDLERS), "--timeout=600s")
        root = Path("/sys/fs/cgroup") / facts["cgroup_root"].lstrip("/")
        for item in json.loads(kubectl("get", "pods", "-o", "json"))["items"]:
            uid = item["metadata"]["uid"]
            pod_dir = root / "kubepods" / "burstable" / f"pod{uid}"
            containers = {}
            for status in item["status"]["containerStatuses"]:
                cid = status["containerID"].split("://", 1)[1]
                containers[status["name"]] = {
                    "request": REQUESTS[status["name"]],
                    "weight": int((pod_dir / cid / "cpu.weight").read_text()),
                }
            result["pods"][item["spec"]["runtimeClassName"]] = {
                "pod_weight": int((pod_dir / "cpu.weight").read_text()),
                "containers": containers,
            }
    result["took_s"] = round(time.monotonic() - started, 1)
    (out / "weights.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
