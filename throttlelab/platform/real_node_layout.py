"""The lab's single-node Kubernetes cluster on this host, as data: its layout, every
component's command line and configuration file. Pure: nothing here starts or writes anything
(platform/real_node.py does, from these).

What the node is (docs/BACKENDS.md, "The real node"): etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kubelet as processes of this host, with
containerd of its own (root, state, socket: never the Docker engine's), two runtime
handlers, one per pinned runc (runc-new = v1.4.3, runc-old = v1.3.0, model.runtime's
names) and a RuntimeClass of the same name for each. etcd and the API server listen on
127.0.0.1, kubelet on the node's bridge address (its InternalIP), containerd on a socket in
the node's root-only folder; every listener asks for a certificate of the node's CA
(etcd's clients included) and kubelet asks the API server who may do what (webhook
authentication and authorization, as kubeadm sets it up). Pods live on a bridge the node
makes itself, with no gateway (so no forwarding sysctl) and no masquerading (so no
iptables rule). kubelet drives cgroupfs under a cgroup root of the node's own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from throttlelab.platform.pki import Identity

NODE_NAME = "throttlelab-node"
CONTEXT = "throttlelab-node"
#: The RuntimeClass (and containerd handler) of each runc conversion, and the pinned runc it runs.
RUNTIME_HANDLERS: dict[str, str] = {"runc-new": "runc-1.4.3", "runc-old": "runc-1.3.0"}
#: Host sysctls kubelet sets unless they already hold its values (pkg/kubelet/cm, setupKernelTunables).
#: The node's kubelet runs in a mount namespace of its own where each of these files is a copy:
#: kubelet reads and writes the copies, the host's values never change.
KUBELET_SYSCTLS: dict[str, str] = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}
#: Host sysctls a node could turn on without setting them itself (a bridge with a gateway, a CNI plugin that
#: masquerades, an engine's defaults): watched before and after, and set back, with kubelet's.
FORWARDING_SYSCTLS = ("net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding")
PAUSE_IMAGE = "localhost/throttlelab/pause:catatonit"
SERVICE_CIDR = "10.96.0.0/24"
SERVICE_IP = "10.96.0.1"


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    kubelet: int


@dataclass(frozen=True)
class NodeLayout:
    """Where one node's files live and how it is reached; ``root`` is its folder (removed with it)."""

    root: Path
    ports: Ports
    bridge: str  # the pods' bridge, made by the node (at most 15 characters)
    subnet: str  # the pods' /24, e.g. 10.213.7.0/24; the bridge holds .1
    #: the node's cgroup, e.g. /throttlelab-node-1234: everything of the node lives under it (removed with it)
    cgroup_top: str

    @property
    def cgroup_root(self) -> str:
        """kubelet's cgroupRoot: the pods' tree and the node's own daemons (kubelet, containerd, the shims),
        pinned together to the node's CPUs, as kind's worker container holds both."""
        return f"{self.cgroup_top}/node"

    @property
    def daemons_cgroup(self) -> str:
        """kubelet's, containerd's and the shims' cgroup (kubeletCgroups, runtimeCgroups), beside kubepods."""
        return f"{self.cgroup_root}/daemons"

    @property
    def control_plane_cgroup(self) -> str:
        """etcd's and the control plane's cgroup, apart from the node's: pinned to the load generator's CPUs
        where a variant pins it, as kind's control-plane node is."""
        return f"{self.cgroup_top}/control-plane"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd" / "state"

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd" / "config.toml"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def kubelet_dir(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet-config.yaml"

    @property
    def sysctl_copies(self) -> Path:
        return self.root / "sysctls"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def pod_logs(self) -> Path:
        """kubelet's podLogsDir (the host's /var/log/pods otherwise): containerd writes the containers'
        output there, so it is a path both see alike."""
        return self.root / "pod-logs"

    @property
    def var_log(self) -> Path:
        """What kubelet sees as /var/log: it links every container's log into /var/log/containers (a path
        no setting moves), and the host's must not keep the links of a node that is gone."""
        return self.root / "var-log"

    def kubeconfig(self, who: str) -> Path:
        return self.root / f"{who}.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def bridge_address(self) -> str:
        return self.subnet.rsplit(".", 1)[0] + ".1"


def pod_subnet(index: int) -> str:
    """The index-th candidate /24 for the pods (10.213.0.0/24, 10.213.1.0/24, ...)."""
    if not 0 <= index < 256:
        raise ValueError(f"pod subnet index {index} out of 0..255")
    return f"10.213.{index}.0/24"


# -- certificates --------------------------------------------------------------------------------------------

APISERVER_DNS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
APISERVER_IPS = ("127.0.0.1", SERVICE_IP)

#: Every certificate the node's CA signs (the stems name the files in the node's pki folder).
CERTIFICATES: tuple[Identity, ...] = (
    Identity(
        "apiserver", "kube-apiserver", server=True, client=False, dns_names=APISERVER_DNS, ip_addresses=APISERVER_IPS
    ),
    Identity("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)),
    Identity("admin", "throttlelab-admin", ("system:masters",)),
    Identity("controller-manager", "system:kube-controller-manager"),
    Identity("scheduler", "system:kube-scheduler"),
    Identity("kubelet", f"system:node:{NODE_NAME}", ("system:nodes",)),
    # etcd serves its clients and its (single) peer with one certificate, so it is a client too
    Identity(
        "etcd", "throttlelab-etcd", server=True, client=True, dns_names=("localhost",), ip_addresses=("127.0.0.1",)
    ),
    Identity("apiserver-etcd-client", "kube-apiserver-etcd-client"),
    # what the supervisor uses to ask etcd whether it is healthy
    Identity("etcd-healthcheck-client", "throttlelab-etcd-healthcheck-client"),
)


def kubeconfig_text(layout: NodeLayout, who: str) -> str:
    """A kubeconfig for the client certificate ``who`` (a stem of CERTIFICATES)."""
    pki = layout.pki
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "throttlelab-node",
                "cluster": {"server": layout.server, "certificate-authority": str(pki / "ca.crt")},
            }
        ],
        "users": [
            {
                "name": who,
                "user": {"client-certificate": str(pki / f"{who}.crt"), "client-key": str(pki / f"{who}.key")},
            }
        ],
        "contexts": [{"name": CONTEXT, "context": {"cluster": "throttlelab-node", "user": who}}],
        "current-context": CONTEXT,
    }
    return json.dumps(doc, indent=1) + "\n"


# -- command lines ---------------------------------------------------------------------------------------------


def etcd_argv(etcd: str, layout: NodeLayout) -> list[str]:
    """etcd on loopback over TLS, for clients and its peer alike, answering only certificates of the node's CA."""
    pki = layout.pki
    client = f"https://127.0.0.1:{layout.ports.etcd_client}"
    peer = f"https://127.0.0.1:{layout.ports.etcd_peer}"
    return [
        etcd,
        "--name",
        "throttlelab-node",
        "--data-dir",
        str(layout.etcd_data),
        "--listen-client-urls",
        client,
        "--advertise-client-urls",
        client,
        "--listen-peer-urls",
        peer,
        "--initial-advertise-peer-urls",
        peer,
        "--initial-cluster",
        f"throttlelab-node={peer}",
        "--cert-file",
        str(pki / "etcd.crt"),
        "--key-file",
        str(pki / "etcd.key"),
        "--trusted-ca-file",
        str(pki / "ca.crt"),
        "--client-cert-auth",
        "--peer-cert-file",
        str(pki / "etcd.crt"),
        "--peer-key-file",
        str(pki / "etcd.key"),
        "--peer-trusted-ca-file",
        str(pki / "ca.crt"),
        "--peer-client-cert-auth",
        "--listen-metrics-urls",
        "",
        "--log-level",
        "warn",
    ]


def apiserver_argv(binary: str, layout: NodeLayout) -> list[str]:
    pki = layout.pki
    return [
        binary,
        f"--etcd-servers=https://127.0.0.1:{layout.ports.etcd_client}",
        f"--etcd-cafile={pki / 'ca.crt'}",
        f"--etcd-certfile={pki / 'apiserver-etcd-client.crt'}",
        f"--etcd-keyfile={pki / 'apiserver-etcd-client.key'}",
        "--bind-address=127.0.0.1",
        f"--secure-port={layout.ports.apiserver}",
        # the address the `kubernetes` Service's endpoints name: the node's own bridge, never the host's
        f"--advertise-address={layout.bridge_address}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        # kubelet refuses a loopback node IP, and the API server's node proxy (E6's cAdvisor scrape)
        # refuses every address that is not global unicast: the node's address is its bridge's
        "--kubelet-preferred-address-types=InternalIP",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=false",  # no pod of the lab needs it
        "--profiling=false",
        f"--cert-dir={layout.root / 'apiserver-certs'}",
        "--endpoint-reconciler-type=none",
        "--v=0",
    ]


def controller_manager_argv(binary: str, layout: NodeLayout) -> list[str]:
    pki = layout.pki
    kc = layout.kubeconfig("controller-manager")
    return [
        binary,
        f"--kubeconfig={kc}",
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        "--use-service-account-credentials=true",
        "--leader-elect=false",
        "--secure-port=0",
        "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route",
        "--profiling=false",
        "--v=0",
    ]


def scheduler_argv(binary: str, layout: NodeLayout) -> list[str]:
    kc = layout.kubeconfig("scheduler")
    return [
        binary,
        f"--kubeconfig={kc}",
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
        "--leader-elect=false",
        "--secure-port=0",
        "--profiling=false",
        "--v=0",
    ]


def containerd_argv(binary: str, layout: NodeLayout) -> list[str]:
    return [binary, "--config", str(layout.containerd_config), "--log-level", "warn"]


def kubelet_argv(binary: str, layout: NodeLayout) -> list[str]:
    return [
        binary,
        f"--config={layout.kubelet_config}",
        f"--kubeconfig={layout.kubeconfig('kubelet')}",
        f"--root-dir={layout.kubelet_dir}",
        f"--cert-dir={layout.kubelet_dir / 'pki'}",
        f"--hostname-override={NODE_NAME}",
        f"--node-ip={layout.bridge_address}",
        # kubelet's cAdvisor finds containers' names through containerd's API at the socket of this flag
        # (a cAdvisor flag kubelet still takes); at its default it never reaches this node's containerd,
        # and /metrics/cadvisor then has the containers' cgroups without pod or container labels
        f"--containerd={layout.containerd_socket}",
        "--v=0",
    ]


def sysctl_mounts(layout: NodeLayout) -> list[tuple[Path, PurePosixPath]]:
    """(copy, host file) pairs: each KUBELET_SYSCTLS file is covered by a copy in kubelet's namespace."""
    return [
        (layout.sysctl_copies / name.replace("/", "."), PurePosixPath("/proc/sys") / name) for name in KUBELET_SYSCTLS
    ]


def kubelet_mounts(layout: NodeLayout) -> list[tuple[Path, PurePosixPath]]:
    """Everything bind-mounted in kubelet's namespace: the sysctl copies, and the node's own /var/log
    (kubelet's links in /var/log/containers stay in the node's folder)."""
    return [*sysctl_mounts(layout), (layout.var_log, PurePosixPath("/var/log"))]


def _bind_script(binds: list[tuple[Path, PurePosixPath]]) -> str:
    return "".join(f'mount --bind "{src}" "{dst}" || exit 97\n' for src, dst in binds) + 'exec "$@"\n'


def private_mounts_argv(unshare: str, argv: list[str], binds: list[tuple[Path, PurePosixPath]] = ()) -> list[str]:
    """``argv`` in a mount namespace of its own (util-linux unshare; propagation private), with each
    (source, target) bind-mounted there first: mounts made inside vanish with the last process."""
    return [unshare, "--mount", "--propagation", "private", "sh", "-c", _bind_script(binds), "throttlelab-node", *argv]


def joined_mounts_argv(
    nsenter: str, pid: int, argv: list[str], binds: list[tuple[Path, PurePosixPath]] = ()
) -> list[str]:
    """``argv`` in the mount namespace of process ``pid`` (util-linux nsenter), with each (source, target)
    bind-mounted there first. kubelet joins containerd's namespace this way: the volumes kubelet mounts
    (Secrets, projected tokens, memory-backed emptyDir) are then where containerd's runc finds them."""
    return [nsenter, f"--target={pid}", "--mount", "sh", "-c", _bind_script(binds), "throttlelab-node", *argv]


# -- configuration files --------------------------------------------------------------------------------------


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is a JSON string for the characters used here


def containerd_config_text(layout: NodeLayout, runc: dict[str, str], cni_bin_dir: str) -> str:
    """containerd 2.x (config version 3): its own root, state, socket; the CRI plugin with one
    runtime handler per RUNTIME_HANDLERS entry (``runc`` maps handler -> runc binary)."""
    lines = [
        "version = 3",
        f"root = {_toml_str(str(layout.containerd_root))}",
        f"state = {_toml_str(str(layout.containerd_state))}",
        # NRI listens on a socket of the host's /var/run by default: not this node's to take
        'disabled_plugins = ["io.containerd.nri.v1.nri"]',
        "",
        "[grpc]",
        f"  address = {_toml_str(str(layout.containerd_socket))}",
        "[ttrpc]",
        f"  address = {_toml_str(str(layout.containerd_socket) + '.ttrpc')}",
        "[debug]",
        '  address = ""',
        "[metrics]",
        '  address = ""',
        "",
        "[plugins.'io.containerd.internal.v1.opt']",
        f"  path = {_toml_str(str(layout.root / 'containerd' / 'opt'))}",
        "[plugins.'io.containerd.grpc.v1.cri']",
        "  disable_tcp_service = true",
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"',
        "[plugins.'io.containerd.cri.v1.images']",
        '  snapshotter = "overlayfs"',
        "[plugins.'io.containerd.cri.v1.images'.pinned_images]",
        f"  sandbox = {_toml_str(PAUSE_IMAGE)}",
        "[plugins.'io.containerd.cri.v1.runtime']",
        # the pods' network namespaces are mounted in the node's state, not the host's /run/netns
        "  netns_mounts_under_state_dir = true",
        # no OOM score below containerd's own: lowering one needs CAP_SYS_RESOURCE, which the lab's
        # machines do not give root (the sandboxes' -998 failed in runc init); CPU is not affected
        "  restrict_oom_score_adj = true",
        "  cdi_spec_dirs = []",
        "[plugins.'io.containerd.cri.v1.runtime'.cni]",
        f"  bin_dirs = [{_toml_str(cni_bin_dir)}]",
        f"  conf_dir = {_toml_str(str(layout.cni_conf_dir))}",
        "  max_conf_num = 1",
        "[plugins.'io.containerd.cri.v1.runtime'.containerd]",
        '  default_runtime_name = "runc-new"',
    ]
    for handler in RUNTIME_HANDLERS:
        table = f"plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.{_toml_str(handler)}"
        lines += [
            f"[{table}]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{table}.options]",
            f"  BinaryName = {_toml_str(runc[handler])}",
            f"  Root = {_toml_str(str(layout.containerd_state / 'runc' / handler))}",
            "  SystemdCgroup = false",
        ]
    return "\n".join(lines) + "\n"


def cni_config_text(layout: NodeLayout) -> str:
    """The pods' network: the node's bridge (already made, holding .1), host-local addresses from .10,
    no gateway and no masquerading: nothing outside the bridge is reachable, no host setting changes."""
    prefix = layout.subnet.rsplit(".", 1)[0]
    return (
        json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "throttlelab-node",
                "plugins": [
                    {
                        "type": "bridge",
                        "bridge": layout.bridge,
                        "isGateway": False,
                        "ipMasq": False,
                        "hairpinMode": False,
                        "ipam": {
                            "type": "host-local",
                            "dataDir": str(layout.cni_ipam_dir),
                            "ranges": [
                                [{"subnet": layout.subnet, "rangeStart": f"{prefix}.10", "rangeEnd": f"{prefix}.250"}]
                            ],
                        },
                    },
                    {"type": "loopback"},
                ],
            },
            indent=1,
        )
        + "\n"
    )


def kubelet_config_text(layout: NodeLayout) -> str:
    """KubeletConfiguration (v1beta1) as JSON (YAML's superset): cgroupfs under the node's own cgroup
    root, no iptables chains, no image garbage collection (the images were
    imported, none can be pulled again), eviction only on real exhaustion. kubelet listens on the node's
    bridge address, its InternalIP (a loopback one is refused, by kubelet and by the API server's node
    proxy alike)."""
    doc = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": layout.bridge_address,
        "port": layout.ports.kubelet,
        "readOnlyPort": 0,
        "healthzPort": 0,
        # a client needs a certificate of the node's CA or a token the API server accepts, and the API
        # server decides what it may do (a SubjectAccessReview): kubeadm's settings
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(layout.pki / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "podLogsDir": str(layout.pod_logs),
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": layout.cgroup_root,
        # where kubelet and containerd run (the supervisor starts them there): kubelet keeps itself in it
        # and reports both as the node's system containers
        "kubeletCgroups": layout.daemons_cgroup,
        "runtimeCgroups": layout.daemons_cgroup,
        "cgroupsPerQOS": True,
        "enforceNodeAllocatable": ["pods"],
        "failSwapOn": False,
        "makeIPTablesUtilChains": False,
        "protectKernelDefaults": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "resolvConf": "",
        "staticPodPath": "",
        "serializeImagePulls": False,
        "registerNode": True,
        "maxPods": 32,
        "podPidsLimit": -1,
        "localStorageCapacityIsolation": False,
        "failCgroupV1": False,
    }
    return json.dumps(doc, indent=1) + "\n"


def runtime_class(handler: str) -> dict:
    """The RuntimeClass object for a RUNTIME_HANDLERS key."""
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": handler, "labels": {"throttlelab": "1"}},
        "handler": handler,
    }
