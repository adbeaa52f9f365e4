"""Every Pod the kind and kubernetes backends would send passes the "restricted" Pod Security
Standard, and is a valid Kubernetes 1.34 Pod: the manifests of every pod of every variant of
every profile (ci, quick, paper), the load generator's included, built exactly as the backend
builds them (manifests.pod_manifest / load_manifest of the nodes the experiments deploy). So a
namespace labelled pod-security.kubernetes.io/enforce=restricted admits the lab's pods. No
cluster is needed, and none was used.

The rules checked (`restricted_violations`) are those of the Pod Security Standards page of
the Kubernetes documentation (https://kubernetes.io/docs/concepts/security/pod-security-standards/,
policy version v1.34), as the pod-security-admission library enforces them; "restricted"
includes "baseline". Each applies to spec.containers, spec.initContainers and
spec.ephemeralContainers alike ("every container" below):

Baseline
  1. HostProcess: spec.securityContext.windowsOptions.hostProcess and every container's unset or false.
  2. Host namespaces: spec.hostNetwork, spec.hostPID, spec.hostIPC unset or false.
  3. Privileged containers: every container's securityContext.privileged unset or false.
  4. Capabilities: every container's capabilities.add only from AUDIT_WRITE, CHOWN, DAC_OVERRIDE,
     FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT.
  5. HostPath volumes: no spec.volumes[*].hostPath.
  6. Host ports: every container's ports[*].hostPort unset or 0.
  7. AppArmor: appArmorProfile.type (pod, every container) unset, RuntimeDefault or Localhost;
     annotations container.apparmor.security.beta.kubernetes.io/* unset, runtime/default or localhost/*.
  8. SELinux: seLinuxOptions.type (pod, every container) unset, container_t, container_init_t,
     container_kvm_t or container_engine_t; seLinuxOptions.user and .role unset.
  9. /proc mount type: every container's procMount unset or Default.
 10. Seccomp: seccompProfile.type (pod, every container) never Unconfined.
 11. Sysctls: spec.securityContext.sysctls only kernel.shm_rmid_forced, net.ipv4.ip_local_port_range,
     net.ipv4.ip_unprivileged_port_start, net.ipv4.tcp_syncookies, net.ipv4.ping_group_range,
     net.ipv4.ip_local_reserved_ports, net.ipv4.tcp_keepalive_time, net.ipv4.tcp_fin_timeout,
     net.ipv4.tcp_keepalive_intvl, net.ipv4.tcp_keepalive_probes, net.ipv4.tcp_rmem, net.ipv4.tcp_wmem.
Restricted
 12. Volume types: every volume one of configMap, csi, downwardAPI, emptyDir, ephemeral,
     persistentVolumeClaim, projected, secret.
 13. Privilege escalation: every container's allowPrivilegeEscalation set to false.
 14. Running as non-root: runAsNonRoot true on the pod, or on every container; no container false.
 15. Running as non-root user: runAsUser (pod, every container) unset or not 0.
 16. Seccomp: seccompProfile.type RuntimeDefault or Localhost on the pod, or on every container
     (a container may leave it unset when the pod sets it).
 17. Capabilities: every container drops ALL, and adds nothing but NET_BIND_SERVICE.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from profile_pods import PROFILES, deployed_nodes
from throttlelab.backends.kube import manifests as mf

K8S_VERSION = "1.34.0"

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
VOLUME_TYPES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def _containers(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{kind}[{c.get('name')}]", c)
        for kind in ("containers", "initContainers", "ephemeralContainers")
        for c in spec.get(kind) or []
    ]


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """What in a Pod manifest breaks the restricted Pod Security Standard (rules 1-17 above)."""
    spec = pod.get("spec") or {}
    psc = spec.get("securityContext") or {}
    containers = _containers(spec)
    out: list[str] = []

    def sc(c: dict[str, Any]) -> dict[str, Any]:
        return c.get("securityContext") or {}

    # 1 HostProcess
    if (psc.get("windowsOptions") or {}).get("hostProcess"):
        out.append("1 spec.securityContext.windowsOptions.hostProcess")
    out += [
        f"1 {w}.windowsOptions.hostProcess"
        for w, c in containers
        if (sc(c).get("windowsOptions") or {}).get("hostProcess")
    ]
    # 2 host namespaces
    out += [f"2 spec.{k}" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    # 3 privileged
    out += [f"3 {w}.privileged" for w, c in containers if sc(c).get("privileged")]
    # 4 capabilities (baseline) and 17 (restricted)
    for w, c in containers:
        caps = sc(c).get("capabilities") or {}
        added = set(caps.get("add") or [])
        if added - BASELINE_CAPABILITIES:
            out.append(f"4 {w}.capabilities.add {sorted(added - BASELINE_CAPABILITIES)}")
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"17 {w}.capabilities.drop lacks ALL")
        if added - {"NET_BIND_SERVICE"}:
            out.append(f"17 {w}.capabilities.add {sorted(added - {'NET_BIND_SERVICE'})}")
    # 5 hostPath, 12 volume types
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if "hostPath" in kinds:
            out.append(f"5 volume {v.get('name')}: hostPath")
        if kinds - VOLUME_TYPES:
            out.append(f"12 volume {v.get('name')}: {sorted(kinds - VOLUME_TYPES)}")
    # 6 host ports
    out += [
        f"6 {w}.ports.hostPort {p['hostPort']}"
        for w, c in containers
        for p in c.get("ports") or []
        if p.get("hostPort")
    ]
    # 7 AppArmor
    for where, ctx in [("spec.securityContext", psc), *((w, sc(c)) for w, c in containers)]:
        kind = (ctx.get("appArmorProfile") or {}).get("type")
        if kind not in (None, "RuntimeDefault", "Localhost"):
            out.append(f"7 {where}.appArmorProfile.type {kind}")
    for key, value in ((pod.get("metadata") or {}).get("annotations") or {}).items():
        if key.startswith(APPARMOR_ANNOTATION) and value != "runtime/default" and not value.startswith("localhost/"):
            out.append(f"7 annotation {key}={value}")
    # 8 SELinux
    for where, ctx in [("spec.securityContext", psc), *((w, sc(c)) for w, c in containers)]:
        opts = ctx.get("seLinuxOptions") or {}
        if opts.get("type", "") not in SELINUX_TYPES or opts.get("user") or opts.get("role"):
            out.append(f"8 {where}.seLinuxOptions {opts}")
    # 9 procMount
    out += [
        f"9 {w}.procMount {sc(c)['procMount']}" for w, c in containers if sc(c).get("procMount", "Default") != "Default"
    ]
    # 10 and 16 seccomp
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    for where, ctx in [("spec.securityContext", psc), *((w, sc(c)) for w, c in containers)]:
        if (ctx.get("seccompProfile") or {}).get("type") == "Unconfined":
            out.append(f"10 {where}.seccompProfile Unconfined")
    for w, c in containers:
        kind = (sc(c).get("seccompProfile") or {}).get("type")
        if kind is None and pod_seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"16 {w}: no seccompProfile RuntimeDefault or Localhost (nor on the pod)")
        elif kind is not None and kind not in ("RuntimeDefault", "Localhost"):
            out.append(f"16 {w}.seccompProfile {kind}")
    # 11 sysctls
    out += [f"11 sysctl {s.get('name')}" for s in psc.get("sysctls") or [] if s.get("name") not in SAFE_SYSCTLS]
    # 13 privilege escalation
    out += [
        f"13 {w}.allowPrivilegeEscalation is not false"
        for w, c in containers
        if sc(c).get("allowPrivilegeEscalation") is not False
    ]
    # 14 runAsNonRoot
    for w, c in containers:
        mine = sc(c).get("runAsNonRoot")
        if mine is False or (mine is None and psc.get("runAsNonRoot") is not True):
            out.append(f"14 {w}: runAsNonRoot is not true (nor on the pod)")
    # 15 runAsUser
    if psc.get("runAsUser") == 0:
        out.append("15 spec.securityContext.runAsUser 0")
    out += [f"15 {w}.runAsUser 0" for w, c in containers if sc(c).get("runAsUser") == 0]
    return out


def profile_manifests(profile: str) -> list[tuple[str, dict[str, Any]]]:
    """(where, manifest) for every pod the kube backends would send for the profile's variants."""
    ident = mf.RunIdentity(run="r1", host="h", pid=1)
    out = []
    for exp, variant, node, load in deployed_nodes(profile):
        for pod in mf.kube_node(node, 10_000).pods:
            out.append(
                (
                    f"{profile} {exp}/{variant} pod {pod.name}",
                    mf.pod_manifest(pod, node_name="worker", image_of=lambda v: f"cpulab-kind:{v}", ident=ident),
                )
            )
        if load is not None:
            out.append(
                (
                    f"{profile} {exp}/{variant} load generator",
                    mf.load_manifest(
                        ["-target=http://10.244.1.7:8080", "-rps=10"],
                        name="tl-load-r1-0",
                        node_name="control-plane",
                        image="cpulab-kind:go124mod",
                        ident=ident,
                        cpu_request_milli=mf.load_request_milli(load.cpus),
                    ),
                )
            )
    return out


@pytest.mark.parametrize("profile", PROFILES)
def test_every_pod_of_every_profile_passes_the_restricted_standard(profile):
    manifests = profile_manifests(profile)
    assert len(manifests) > 10 and any(where.endswith("load generator") for where, _ in manifests)
    bad = {where: problems for where, m in manifests if (problems := restricted_violations(m))}
    assert bad == {}


@pytest.mark.parametrize("profile", PROFILES)
def test_every_pod_of_every_profile_is_a_valid_v1_34_pod(profile):
    kubernetes_validate = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is a test dependency: pip install -e '.[test]'"
    )
    for where, manifest in profile_manifests(profile):
        assert kubernetes_validate.validate(manifest, K8S_VERSION, strict=True) == "1.34", where


def _set(path: str, value: Any):
    """A change to a manifest: `value` put at a dotted path ("spec.containers.0.securityContext.x")."""

    def change(m: dict[str, Any]) -> None:
        keys = path.split(".")
        target: Any = m
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target.setdefault(key, {})
        target[keys[-1]] = value

    return change


def _drop(path: str):
    def change(m: dict[str, Any]) -> None:
        keys = path.split(".")
        target: Any = m
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]
        del target[keys[-1]]

    return change


C0 = "spec.containers.0.securityContext"


@pytest.mark.parametrize(
    "change, rules",
    [
        (_set("spec.securityContext.windowsOptions", {"hostProcess": True}), {1}),
        (_set("spec.hostNetwork", True), {2}),
        (_set(f"{C0}.privileged", True), {3}),
        (_set(f"{C0}.capabilities.add", ["SYS_ADMIN"]), {4, 17}),
        (_set(f"{C0}.capabilities.add", ["CHOWN"]), {17}),
        (_set(f"{C0}.capabilities.drop", ["NET_RAW"]), {17}),
        (_set("spec.volumes", [{"name": "h", "hostPath": {"path": "/"}}]), {5, 12}),
        (_set("spec.containers.0.ports", [{"containerPort": 80, "hostPort": 80}]), {6}),
        (_set(f"{C0}.appArmorProfile", {"type": "Unconfined"}), {7}),
        (_set("metadata.annotations", {APPARMOR_ANNOTATION + "generator": "unconfined"}), {7}),
        (_set("spec.securityContext.seLinuxOptions", {"type": "spc_t"}), {8}),
        (_set(f"{C0}.procMount", "Unmasked"), {9}),
        (_set(f"{C0}.seccompProfile", {"type": "Unconfined"}), {10, 16}),
        (_drop("spec.securityContext.seccompProfile"), {16}),
        (_set("spec.securityContext.sysctls", [{"name": "kernel.msgmax", "value": "1"}]), {11}),
        (_set("spec.volumes", [{"name": "n", "nfs": {"server": "s", "path": "/"}}]), {12}),
        (_drop(f"{C0}.allowPrivilegeEscalation"), {13}),
        (_set(f"{C0}.runAsNonRoot", False), {14}),
        (_drop("spec.securityContext.runAsNonRoot"), {14}),
        (_set(f"{C0}.runAsUser", 0), {15}),
    ],
)
def test_the_validator_catches_each_rule(change, rules):
    """Each rule can fail: the lab's manifest, changed to break a rule, breaks exactly the rules named."""
    good = mf.load_manifest(["-rps=1"], name="x", node_name="n", image="i", ident=mf.RunIdentity("r", "h", 1))
    assert restricted_violations(good) == []
    bad = copy.deepcopy(good)
    change(bad)
    problems = restricted_violations(bad)
    assert {int(p.split()[0]) for p in problems} == rules, problems
