"""Requests become weights: E4 (read every level back), E5 and E10 (measure how
busy containers share ONE CPU by those weights), for both runtime conversions.

The pods are the lab's: requests 100m, 1, 2, 1 with limit 1, and a pod of two
containers (100m + 1 CPU). E5 measures two phases, as the lab did: the pods
100m, 1 and the two-container pod together (shares between pods), then the
two-container pod alone (shares between its containers). E10 is E5 under the
other runtime conversion (the lab's old-runc cluster).
"""

from __future__ import annotations

import time

from throttlelab.backends.base import BackendError
from throttlelab.model.variants import VariantSpec
from throttlelab.model.placement import Node
from throttlelab.model.weight_pods import PHASES, deployment_waves, expected_shares, lab_pods, pod_names
from throttlelab.experiments.context import Context, ExperimentResult, deployed


def run_e4(spec: VariantSpec, ctx: Context) -> ExperimentResult:
    """Every pod of the lab, read back at every level for one runtime conversion: all at once where the
    node holds them, else in as few deployments as fit what its allocatable CPU leaves free
    (weight_pods.deployment_waves; each deployment's design counts the pods present)."""
    pods = lab_pods(pod_names("E4", None), ("info",), (spec.build or "go124mod"))
    free = ctx.capabilities.free_cpu_milli
    try:
        waves = deployment_waves(pods, free)
    except ValueError as exc:
        raise BackendError(f"E4: {exc}") from None
    result = ExperimentResult()
    if len(waves) > 1:
        note = (
            f"the lab's pods ask {sum(p.request_milli for p in pods)}m and the node leaves {free}m free: read back in "
            f"{len(waves)} deployments ({'; '.join(', '.join(p.name for p in wave) for wave in waves)})"
        )
        result.notes.append(note)
        ctx.progress(note)
    for wave in waves:
        node = Node("node", wave, cpus=ctx.node_cpus, runtime=spec.runtime)
        with deployed(ctx, node, result) as dep:
            for pod in node.pods:
                for c in pod.containers:
                    result.add_output(dep.run_job(pod.name, c.name, timeout_s=30))
    return result


def _members(node: Node, level: str) -> list[tuple[str, str, str | None]]:
    """(member name, pod, container) of the cgroups whose usage is compared."""
    if level == "pod":
        return [(f"pod-{p.name}", p.name, None) for p in node.pods]
    (pod,) = node.pods
    return [(c.name, pod.name, c.name) for c in pod.containers]


def run_shares(spec: VariantSpec, ctx: Context) -> ExperimentResult:
    """One phase of E5/E10: pin the node to one CPU, keep every container busy, sample usage."""
    names, level = pod_names(spec.experiment, spec.phase), PHASES[spec.phase][1]
    args = ("spin", "-threads=1", f"-report={spec.sample_ms}ms")
    node = Node("node", lab_pods(names, args, (spec.build or "go124mod")), cpus=str(spec.cpus), runtime=spec.runtime)
    if len(_cpu_list(node.cpus)) != 1:
        raise ValueError(f"E5/E10 pin the node to ONE CPU; cpus {node.cpus!r} names more")
    result = ExperimentResult()
    for member, (weight, share) in expected_shares(node.pods, level, spec.runtime).items():
        result.records.append(
            {
                "type": "share_expectation",
                "member": member,
                "level": level,
                "weight": weight,
                "share": share,
                "runtime": spec.runtime,
            }
        )
    members = _members(node, level)
    with deployed(ctx, node, result) as dep:
        with ctx.busy():  # the busy containers, settling and sampling
            handles = [dep.start(p.name, c.name) for p in node.pods for c in p.containers]
            start = time.monotonic()
            ctx.progress(
                f"{spec.phase}: {len(handles)} busy containers on CPU {node.cpus}; settling {spec.settle_ms} ms"
            )
            time.sleep(spec.settle_ms / 1000)
            for k in range(spec.samples + 1):
                if k:
                    time.sleep(spec.sample_ms / 1000)
                t_s = round(time.monotonic() - start, 4)  # one time per reading: the members' samples belong together
                for member, pod, container in members:
                    stat = dep.read_stat(pod, container)
                    result.records.append(
                        {
                            "type": "share_sample",
                            "member": member,
                            "level": level,
                            "t_s": t_s,
                            "usage_usec": stat["usage_usec"],
                        }
                    )
        # settling is part of the lab's protocol, so it counts as the experiment's own time
        result.window_s = (spec.settle_ms + spec.samples * spec.sample_ms) / 1000
        for handle in handles:
            result.add_output(dep.stop(handle))
    return result


def _cpu_list(spec: str | None) -> list[int]:
    from throttlelab.model.placement import parse_cpuset

    return parse_cpuset(spec) if spec else []
