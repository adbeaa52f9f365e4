"""The real node's cgroup root on a v2 hierarchy (platform/real_node.py), on a fake cgroupfs."""

from __future__ import annotations

from pathlib import Path

from throttlelab.platform import real_node as nc


class Control:
    """A cgroup.subtree_control file as the kernel has it: each "+c" write adds c."""

    def __init__(self, folder: Path, available: str, enabled: str = ""):
        (folder / "cgroup.controllers").write_text(available)
        self.path = folder / "cgroup.subtree_control"
        self.path.write_text(enabled)


def test_a_v2_root_without_an_init_hands_its_controllers_down_before_the_node_makes_its_root(tmp_path, monkeypatch):
    """In a vm guest no systemd enables the root's controllers: kubelet then refused the node's cgroup root
    ('has some missing controllers: cpu, cpuset, hugetlb, memory, pids'); the node enables them first."""
    Control(tmp_path, "cpuset cpu io memory hugetlb pids rdma misc")
    writes: list[str] = []
    real_write = Path.write_text

    def write(self, data, *args, **kwargs):
        if self.name == "cgroup.subtree_control":
            writes.append(f"{self.parent.name}:{data}")
            data = " ".join(sorted(set(self.read_text().split()) | {data.lstrip("+")})) if self.exists() else data
        return real_write(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write)
    assert nc.enable_v2_controllers(tmp_path) == ["cpu", "cpuset", "hugetlb", "io", "memory", "pids"]
    assert set((tmp_path / "cgroup.subtree_control").read_text().split()) == set(nc.V2_CONTROLLERS)
    assert nc.enable_v2_controllers(tmp_path) == []  # already there (as under systemd): nothing written
    assert len(writes) == len(nc.V2_CONTROLLERS)


def test_a_hierarchy_without_v2_controllers_is_left_as_it_is(tmp_path):
    """A v1 host's unified hierarchy (every controller bound to v1) and a v1 controller's folder."""
    Control(tmp_path, "")
    assert nc.enable_v2_controllers(tmp_path) == []
    assert nc.enable_v2_controllers(tmp_path / "none") == []
