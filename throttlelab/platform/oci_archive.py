"""OCI image archives made here, without a Docker engine: static binaries in one layer.

No image can be pulled on these machines, and the real node's containerd has no
builder, so the images it runs (the pause image and the lab's cpulab images)
are written as an OCI image layout in a tar file, which `ctr images import`
takes. The archive is reproducible: the same files give the same bytes, so the
same image digest (every mtime 0, owner root, entries sorted).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"


@dataclass(frozen=True)
class ImageFile:
    """A file of the image: where it lies on this host and its path in the image."""

    source: Path
    path: str  # absolute path in the image, e.g. /cpulab
    mode: int = 0o755


def full_reference(name: str) -> str:
    """The name containerd stores for a Docker-style reference ("cpulab-kind:go124mod" ->
    "docker.io/library/cpulab-kind:go124mod"), as kubelet asks containerd for it."""
    repo, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "latest")
    first = repo.split("/", 1)[0]
    if "/" not in repo:
        repo = f"docker.io/library/{repo}"
    elif "." not in first and ":" not in first and first != "localhost":
        repo = f"docker.io/{repo}"
    return f"{repo}:{tag}"


def _tar_info(name: str, size: int, mode: int, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.type = size, mode, kind
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "root", "root"
    return info


def layer_bytes(files: list[ImageFile]) -> bytes:
    """One uncompressed layer holding the files (their parent folders made too)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        folders: set[str] = set()
        for f in sorted(files, key=lambda f: f.path):
            parts = f.path.strip("/").split("/")
            for i in range(1, len(parts)):
                folder = "/".join(parts[:i])
                if folder not in folders:
                    folders.add(folder)
                    tar.addfile(_tar_info(folder, 0, 0o755, tarfile.DIRTYPE))
            data = Path(f.source).read_bytes()
            tar.addfile(_tar_info("/".join(parts), len(data), f.mode), io.BytesIO(data))
    return out.getvalue()


def _blob(data: bytes) -> tuple[str, dict]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    return digest, {"digest": digest, "size": len(data)}


def _canonical(obj: dict) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def write_archive(
    out: Path, reference: str, files: list[ImageFile], entrypoint: list[str], labels: dict[str, str] | None = None
) -> str:
    """Write the OCI archive of one image named ``reference``; returns the manifest digest."""
    layer = layer_bytes(files)
    layer_digest, layer_desc = _blob(layer)
    config = _canonical(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Entrypoint": entrypoint,
                "Labels": dict(labels or {}),
                "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            },
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        }
    )
    _, config_desc = _blob(config)
    manifest = _canonical(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": CONFIG_TYPE, **config_desc},
            "layers": [{"mediaType": LAYER_TYPE, **layer_desc}],
        }
    )
    manifest_digest, manifest_desc = _blob(manifest)
    name = full_reference(reference)
    index = _canonical(
        {
            "schemaVersion": 2,
            "mediaType": INDEX_TYPE,
            "manifests": [
                {
                    "mediaType": MANIFEST_TYPE,
                    **manifest_desc,
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                    },
                }
            ],
        }
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        entries = {"oci-layout": _canonical({"imageLayoutVersion": "1.0.0"}), "index.json": index}
        for blob in (layer, config, manifest):
            entries["blobs/sha256/" + hashlib.sha256(blob).hexdigest()] = blob
        for folder in ("blobs", "blobs/sha256"):
            tar.addfile(_tar_info(folder, 0, 0o755, tarfile.DIRTYPE))
        for entry, data in entries.items():
            tar.addfile(_tar_info(entry, len(data), 0o644), io.BytesIO(data))
    tmp.replace(out)
    return manifest_digest
