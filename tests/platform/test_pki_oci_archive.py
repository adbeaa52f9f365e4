"""The real node's certificates (platform/pki.py) and the OCI archives its containerd imports (platform/oci_archive.py)."""

import json
import tarfile

import pytest

from cryptography import x509

from throttlelab.platform import oci_archive
from throttlelab.platform import pki


def test_certificates_chain_to_the_node_ca(tmp_path):
    paths = pki.make_pki(
        tmp_path,
        [
            pki.Identity(
                "api",
                "kube-apiserver",
                server=True,
                client=False,
                dns_names=("localhost",),
                ip_addresses=("127.0.0.1",),
            ),
            pki.Identity("node", "system:node:n", ("system:nodes",)),
        ],
    )
    ca = x509.load_pem_x509_certificate(paths["ca"].read_bytes())
    api = x509.load_pem_x509_certificate(paths["api"].read_bytes())
    node = x509.load_pem_x509_certificate(paths["node"].read_bytes())
    for cert in (api, node):
        cert.verify_directly_issued_by(ca)
    san = api.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(a) for a in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    subject = {a.oid._name: a.value for a in node.subject}
    assert subject == {"organizationName": "system:nodes", "commonName": "system:node:n"}
    assert (paths["node.key"].stat().st_mode & 0o777) == 0o600 and paths["sa.pub"].is_file()
    # nothing can sign another identity for the node later: the CA's key never reached the disk
    assert not any("PRIVATE KEY" in p.read_text() and p.name.startswith("ca") for p in tmp_path.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ca")) == ["ca.crt"]


def test_certificates_are_written_as_new_files_only(tmp_path):
    """A link planted where a key is to go is neither followed nor replaced: the write stops."""
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    folder = tmp_path / "pki"
    folder.mkdir()
    (folder / "node.key").symlink_to(victim)
    with pytest.raises(FileExistsError):
        pki.make_pki(folder, [pki.Identity("node", "system:node:n", ("system:nodes",))])
    assert victim.read_text() == "keep me\n"


def test_full_reference_is_what_kubelet_asks_containerd_for():
    assert oci_archive.full_reference("cpulab-kind:go124mod") == "docker.io/library/cpulab-kind:go124mod"
    assert oci_archive.full_reference("me/cpulab") == "docker.io/me/cpulab:latest"
    assert oci_archive.full_reference("localhost/throttlelab/pause:x") == "localhost/throttlelab/pause:x"
    assert oci_archive.full_reference("registry.example:5000/a/b:1") == "registry.example:5000/a/b:1"


def test_archive_is_reproducible_and_well_formed(tmp_path):
    binary = tmp_path / "tool"
    binary.write_bytes(b"\x7fELF not really")
    files = [oci_archive.ImageFile(binary, "/bin/tool")]
    a = oci_archive.write_archive(tmp_path / "a.tar", "x:1", files, ["/bin/tool"], {"k": "v"})
    b = oci_archive.write_archive(tmp_path / "b.tar", "x:1", files, ["/bin/tool"], {"k": "v"})
    assert a == b and (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    with tarfile.open(tmp_path / "a.tar") as tar:
        index = json.load(tar.extractfile("index.json"))
        desc = index["manifests"][0]
        assert desc["digest"] == a and desc["annotations"]["io.containerd.image.name"] == "docker.io/library/x:1"
        manifest = json.load(tar.extractfile("blobs/sha256/" + a.split(":")[1]))
        config = json.load(tar.extractfile("blobs/sha256/" + manifest["config"]["digest"].split(":")[1]))
        assert config["config"]["Entrypoint"] == ["/bin/tool"] and config["config"]["Labels"] == {"k": "v"}
        layer = tar.extractfile("blobs/sha256/" + manifest["layers"][0]["digest"].split(":")[1]).read()
        assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    (tmp_path / "layer.tar").write_bytes(layer)
    with tarfile.open(tmp_path / "layer.tar") as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"bin", "bin/tool"} and members["bin/tool"].mode == 0o755
        assert members["bin/tool"].mtime == 0 and tar.extractfile("bin/tool").read() == binary.read_bytes()
