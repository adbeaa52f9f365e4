"""The kind node images' Debian base is verified against Debian's archive keys (platform/kind_node_image.build_base):
debootstrap is handed the keyring, so a Release file it cannot verify stops the build."""

from __future__ import annotations

import pytest

from throttlelab.errors import BuildError
from throttlelab.platform import kind_node_image as ni
from throttlelab.platform import kind_node_recipe as kn
from throttlelab.platform.tool_build import ToolsSettings

BASE = kn.BaseRecipe("trixie", ("systemd",), (), "/usr/lib/systemd/systemd")


def settings(tmp_path) -> ToolsSettings:
    return ToolsSettings.from_mapping({"cache": str(tmp_path / "cache")})


def test_debootstrap_is_told_the_archive_keyring(tmp_path, monkeypatch):
    keyring = tmp_path / "debian-archive-keyring.gpg"
    keyring.write_bytes(b"keys")
    monkeypatch.setattr(ni, "ARCHIVE_KEYRING", str(keyring))
    monkeypatch.setattr(ni.shutil, "which", lambda name: f"/usr/bin/{name}")
    ran = []

    def stop_at_debootstrap(argv, what, timeout_s=None):
        ran.append(argv)
        raise BuildError(f"{what}: stopped here by the test")

    monkeypatch.setattr(ni, "_run", stop_at_debootstrap)
    with pytest.raises(BuildError, match="stopped here"):
        ni.build_base(BASE, settings(tmp_path))
    assert ran[0][0] == "debootstrap" and f"--keyring={keyring}" in ran[0]


def test_no_keyring_or_no_gpgv_stops_before_any_download(tmp_path, monkeypatch):
    monkeypatch.setattr(ni, "ARCHIVE_KEYRING", str(tmp_path / "missing.gpg"))
    monkeypatch.setattr(ni.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(ni, "_run", lambda *a, **k: pytest.fail("debootstrap ran without a keyring"))
    with pytest.raises(BuildError, match="apt-get install debian-archive-keyring gpgv"):
        ni.build_base(BASE, settings(tmp_path))
