"""The host's mount table: cgroup hierarchies and the mounts below a folder, from a mountinfo of the kernel's form."""

from __future__ import annotations

import os
from pathlib import Path

from throttlelab.host import mounts


def _table(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mountinfo"
    path.write_text(text)
    return path


def test_mounts_under_a_folder_are_found_deepest_first_and_a_longer_sibling_is_not_under_it(tmp_path):
    target = os.path.realpath(tmp_path)
    table = _table(
        tmp_path,
        f"36 25 0:32 / {target}/rootfs/proc rw - proc proc rw\n"
        f"37 36 0:33 / {target}/rootfs/proc/sys/fs/binfmt_misc rw - binfmt_misc x rw\n"
        f"38 25 0:34 / {target}/rootfs2 rw - tmpfs t rw\n"
        f"40 25 0:36 / {target}/rootfs/my\\040disk rw - tmpfs t rw\n"
        "39 25 0:35 / /proc rw - proc proc rw\n",
    )
    assert mounts.mounts_under(tmp_path / "rootfs", table) == [
        f"{target}/rootfs/proc/sys/fs/binfmt_misc",
        f"{target}/rootfs/my disk",
        f"{target}/rootfs/proc",
    ]


def test_the_cgroup_hierarchies_are_every_cgroup_and_cgroup2_mount(tmp_path):
    table = _table(
        tmp_path,
        "30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
        "31 30 0:27 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
        "32 30 0:28 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n"
        "33 30 0:29 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
        "a line the kernel never writes\n",
    )
    assert mounts.cgroup_hierarchies(table) == [
        Path("/sys/fs/cgroup/cpu"),
        Path("/sys/fs/cgroup/systemd"),
        Path("/sys/fs/cgroup/unified"),
    ]
