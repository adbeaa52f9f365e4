"""The real node's configuration as data (platform/real_node_layout.py): what each component is told."""

import json
from pathlib import Path, PurePosixPath

import pytest

from throttlelab.platform import real_node_layout as kn


def layout() -> kn.NodeLayout:
    return kn.NodeLayout(
        root=Path("/var/tmp/n/1"),
        ports=kn.Ports(2379, 2380, 6443, 10250),
        bridge="tlnode1",
        subnet="10.213.4.0/24",
        cgroup_top="/throttlelab-node-1",
    )


def test_every_component_listens_on_loopback_or_the_nodes_bridge():
    lay = layout()
    etcd = " ".join(kn.etcd_argv("etcd", lay))
    assert "0.0.0.0" not in etcd and "https://127.0.0.1:2379" in etcd and "https://127.0.0.1:2380" in etcd
    api = kn.apiserver_argv("kube-apiserver", lay)
    assert "--bind-address=127.0.0.1" in api and "--secure-port=6443" in api
    # the Service's endpoints name the node's own bridge address, never one of the host's
    assert "--advertise-address=10.213.4.1" in api and "--endpoint-reconciler-type=none" in api
    kubelet = json.loads(kn.kubelet_config_text(lay))
    assert kubelet["address"] == "10.213.4.1" and kubelet["port"] == 10250  # the node's own bridge
    assert kubelet["readOnlyPort"] == 0 and kubelet["healthzPort"] == 0
    # kubelet refuses a loopback node IP, the API server's node proxy a loopback kubelet: the node's
    # InternalIP is its own bridge's address
    assert "--node-ip=10.213.4.1" in kn.kubelet_argv("kubelet", lay)
    # cAdvisor labels a container's series by pod and container only if it reaches this node's containerd
    assert f"--containerd={lay.containerd_socket}" in kn.kubelet_argv("kubelet", lay)
    # the containers' logs and kubelet's links to them stay in the node's folder, never the host's /var/log
    assert kubelet["podLogsDir"] == str(lay.pod_logs) and lay.root in lay.pod_logs.parents
    assert (lay.var_log, PurePosixPath("/var/log")) in kn.kubelet_mounts(lay)
    assert "--kubelet-preferred-address-types=InternalIP" in api
    assert "--secure-port=0" in kn.controller_manager_argv("kcm", lay)
    assert "--secure-port=0" in kn.scheduler_argv("ks", lay)
    assert 'stream_server_address = "127.0.0.1"' in kn.containerd_config_text(
        lay, {"runc-new": "a", "runc-old": "b"}, "/usr/lib/cni"
    )


def test_kubelet_changes_no_host_setting():
    cfg = json.loads(kn.kubelet_config_text(layout()))
    assert cfg["makeIPTablesUtilChains"] is False  # no KUBE-* chains in the host's iptables
    assert cfg["cgroupDriver"] == "cgroupfs" and cfg["cgroupRoot"] == "/throttlelab-node-1/node"
    assert cfg["imageGCHighThresholdPercent"] == 100  # imported images cannot be pulled again
    mounts = kn.sysctl_mounts(layout())
    assert {str(host) for _, host in mounts} == {f"/proc/sys/{n}" for n in kn.KUBELET_SYSCTLS}
    assert all(str(copy).startswith("/var/tmp/n/1/sysctls/") for copy, _ in mounts)
    argv = kn.private_mounts_argv("unshare", ["kubelet", "--v=0"], mounts)
    assert argv[:4] == ["unshare", "--mount", "--propagation", "private"]
    assert argv[-2:] == ["kubelet", "--v=0"]
    assert argv[6].count("mount --bind") == len(kn.KUBELET_SYSCTLS) and argv[6].endswith('exec "$@"\n')


def test_pods_bridge_has_no_gateway_and_no_masquerade():
    cni = json.loads(kn.cni_config_text(layout()))
    bridge = cni["plugins"][0]
    assert bridge["bridge"] == "tlnode1" and bridge["isGateway"] is False and bridge["ipMasq"] is False
    rng = bridge["ipam"]["ranges"][0][0]
    assert rng["subnet"] == "10.213.4.0/24" and rng["rangeStart"] == "10.213.4.10"
    assert bridge["ipam"]["dataDir"] == "/var/tmp/n/1/cni/ipam"  # not the host's /var/lib/cni


def test_one_runtime_handler_per_runc_and_its_own_state():
    text = kn.containerd_config_text(
        layout(), {"runc-new": "/c/runc-1.4.3/runc", "runc-old": "/c/runc-1.3.0/runc"}, "/usr/lib/cni"
    )
    assert 'root = "/var/tmp/n/1/containerd/root"' in text and 'state = "/var/tmp/n/1/containerd/state"' in text
    assert 'address = "/var/tmp/n/1/containerd/containerd.sock"' in text
    for handler, binary in (("runc-new", "/c/runc-1.4.3/runc"), ("runc-old", "/c/runc-1.3.0/runc")):
        assert f'containerd.runtimes."{handler}"]' in text
        assert f'BinaryName = "{binary}"' in text
        assert f'Root = "/var/tmp/n/1/containerd/state/runc/{handler}"' in text
    assert set(kn.RUNTIME_HANDLERS) == {"runc-new", "runc-old"}
    assert kn.RUNTIME_HANDLERS["runc-new"] == "runc-1.4.3" and kn.RUNTIME_HANDLERS["runc-old"] == "runc-1.3.0"
    assert kn.runtime_class("runc-old")["handler"] == "runc-old"


def test_kubeconfig_names_the_node_ca_and_the_identity():
    doc = json.loads(kn.kubeconfig_text(layout(), "kubelet"))
    assert doc["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert doc["users"][0]["user"]["client-certificate"] == "/var/tmp/n/1/pki/kubelet.crt"
    names = {c.stem: (c.common_name, c.organizations) for c in kn.CERTIFICATES}
    assert names["kubelet"] == (f"system:node:{kn.NODE_NAME}", ("system:nodes",))


def test_every_listener_asks_for_a_certificate_of_the_node_ca():
    lay = layout()
    ca = str(lay.pki / "ca.crt")
    etcd = kn.etcd_argv("etcd", lay)
    assert "http://" not in " ".join(etcd)  # no plain listener, clients nor peer
    for flag in ("--client-cert-auth", "--peer-client-cert-auth"):
        assert flag in etcd
    assert etcd[etcd.index("--trusted-ca-file") + 1] == ca and etcd[etcd.index("--peer-trusted-ca-file") + 1] == ca
    api = kn.apiserver_argv("kube-apiserver", lay)
    assert "--etcd-servers=https://127.0.0.1:2379" in api and f"--etcd-cafile={ca}" in api
    assert f"--etcd-certfile={lay.pki / 'apiserver-etcd-client.crt'}" in api
    assert "--allow-privileged=false" in api and f"--client-ca-file={ca}" in api
    kubelet = json.loads(kn.kubelet_config_text(lay))
    assert kubelet["authentication"] == {
        "anonymous": {"enabled": False},
        "webhook": {"enabled": True},
        "x509": {"clientCAFile": ca},
    }
    assert kubelet["authorization"] == {"mode": "Webhook"}
    stems = {c.stem for c in kn.CERTIFICATES}
    assert {"etcd", "apiserver-etcd-client", "etcd-healthcheck-client"} <= stems
    etcd_cert = next(c for c in kn.CERTIFICATES if c.stem == "etcd")
    assert etcd_cert.server and etcd_cert.client and etcd_cert.ip_addresses == ("127.0.0.1",)


def test_pod_subnets():
    assert kn.pod_subnet(0) == "10.213.0.0/24" and kn.pod_subnet(255) == "10.213.255.0/24"
    with pytest.raises(ValueError):
        kn.pod_subnet(256)


def test_the_nodes_daemons_sit_with_its_pods_and_the_control_plane_apart():
    # kind's worker container holds kubelet, containerd, the shims and the pods under one cpuset; its
    # control-plane node is another: the real node's cgroups mirror that, all under the node's own cgroup
    lay = layout()
    cfg = json.loads(kn.kubelet_config_text(lay))
    assert cfg["kubeletCgroups"] == cfg["runtimeCgroups"] == "/throttlelab-node-1/node/daemons"
    assert lay.daemons_cgroup.startswith(cfg["cgroupRoot"] + "/")  # pinned with the pods' tree
    assert lay.control_plane_cgroup == "/throttlelab-node-1/control-plane"
    assert not lay.control_plane_cgroup.startswith(cfg["cgroupRoot"] + "/")  # pinned on its own
