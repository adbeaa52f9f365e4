"""Which processes the sweep of a dead node's leftovers takes as that node's (platform/real_node.py)."""

from pathlib import Path

from throttlelab.platform.real_node import bridge_name, names_folder

DEAD = Path("/run/throttlelab/nodes/12")


def argv(*args: str) -> bytes:
    return b"\0".join(a.encode() for a in args) + b"\0"


def test_the_dead_nodes_own_processes_are_found():
    assert names_folder(argv("containerd", "--config", "/run/throttlelab/nodes/12/containerd/config.toml"), DEAD)
    assert names_folder(argv("kubelet", "--config=/run/throttlelab/nodes/12/kubelet-config.yaml"), DEAD)
    assert names_folder(argv("etcd", "--data-dir", "/run/throttlelab/nodes/12"), DEAD)
    script = 'mount --bind "/run/throttlelab/nodes/12/sysctls/kernel.panic" "/proc/sys/kernel/panic" || exit 97\n'
    assert names_folder(argv("sh", "-c", script, "throttlelab-node", "kubelet"), DEAD)


def test_a_live_node_whose_folder_starts_alike_is_not_taken_for_it():
    assert not names_folder(argv("containerd", "--config", "/run/throttlelab/nodes/1234/containerd/config.toml"), DEAD)
    assert not names_folder(argv("kubelet", "--config=/run/throttlelab/nodes/123/kubelet-config.yaml"), DEAD)
    assert not names_folder(argv("vim", "/home/u/run/throttlelab/nodes/12/notes"), DEAD)


def test_bridge_names_fit_linux_and_never_collide():
    pid_max = 4194304  # 2^22, the kernel's largest
    names = {bridge_name(pid) for pid in (1, 99999, 100001, 199999, pid_max)}
    assert len(names) == 5 and all(len(n) <= 15 for n in names)
