"""Container images of the workload for the docker backend: FROM scratch around cpulab.

No base image can be pulled here (and none is needed: cpulab is a static Go
binary), so each image is the binary alone. An image carries the SHA-256 of the
binary it was built from as a label; the backend runs the image whose label
matches the binary the pipeline built, so a stale tag is never used by mistake.

Command line (what the Snakemake rule `build_image` calls)::

    python -m throttlelab.backends.images --variant go124mod \
        --binary results/build/go124mod/cpulab --out results/build/go124mod/image.json
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

REPOSITORY = "cpulab"
LABEL = "throttlelab"  # every object the lab makes carries throttlelab=1
LABEL_VARIANT = "throttlelab.variant"
LABEL_BINARY = "throttlelab.binary-sha256"

DOCKERFILE = b'FROM scratch\nCOPY cpulab /cpulab\nENTRYPOINT ["/cpulab"]\n'


def tag_of(variant: str) -> str:
    return f"{REPOSITORY}:{variant}"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_context(binary: Path) -> io.BytesIO:
    """The build context as a tar stream: the Dockerfile and the binary, nothing else."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(DOCKERFILE)
        tar.addfile(info, io.BytesIO(DOCKERFILE))
        tar.add(str(binary), arcname="cpulab")
    buf.seek(0)
    return buf


def build_image(client: Any, variant: str, binary: Path) -> dict[str, str]:
    """Build `cpulab:<variant>` from the binary; returns what the stamp file records."""
    from throttlelab.backends.docker import BackendError, docker_errors

    binary = Path(binary)
    if not binary.is_file():
        raise BackendError(f"image {tag_of(variant)}: the workload binary {binary} is missing; build it first")
    sha = sha256_of(binary)
    try:
        image, _log = client.images.build(
            fileobj=build_context(binary),
            custom_context=True,
            tag=tag_of(variant),
            labels={LABEL: "1", LABEL_VARIANT: variant, LABEL_BINARY: sha},
            rm=True,
            forcerm=True,
            pull=False,
        )
    except docker_errors() as exc:
        raise BackendError(f"image {tag_of(variant)}: docker build failed: {exc}") from None
    return {"tag": tag_of(variant), "id": image.id, "variant": variant, "binary": str(binary), "binary_sha256": sha}


def find_image(client: Any, variant: str, binary: Path) -> str:
    """The id of the image built from exactly this binary; a BackendError says how to get it."""
    from throttlelab.backends.docker import BackendError, docker_errors

    sha = sha256_of(binary)
    try:
        found = client.images.list(filters={"label": [f"{LABEL_BINARY}={sha}", f"{LABEL_VARIANT}={variant}"]})
    except docker_errors() as exc:
        raise BackendError(f"docker backend: cannot list images: {exc}") from None
    if not found:
        raise BackendError(
            f"docker backend: no image built from {binary} (sha256 {sha[:12]}) in this engine; "
            f"build it with `snakemake --cores 1 --forcerun build_image` (it tags {tag_of(variant)})"
        )
    return found[0].id


def write_stamp(path: Path, record: dict[str, str]) -> None:
    """The rule's output: which image was built from which binary, written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle, indent=1)
        handle.write("\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    from throttlelab.backends.docker import BackendError, connect

    p = argparse.ArgumentParser(prog="python -m throttlelab.backends.images", description=__doc__.splitlines()[0])
    p.add_argument("--variant", required=True)
    p.add_argument("--binary", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path, help="stamp file: the image id and the binary's hash")
    args = p.parse_args(argv)
    try:
        record = build_image(connect(), args.variant, args.binary)
    except BackendError as exc:
        print(f"build_image: {exc}", file=sys.stderr)
        return 1
    write_stamp(args.out, record)
    print(f"{record['tag']} = {record['id']} from {record['binary']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
