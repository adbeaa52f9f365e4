"""The workload's container images in a Docker engine, one per build: what each place to run starts.

* `cpulab:<build>`, the docker backend's: FROM scratch around cpulab. No base image can be
  pulled here (and none is needed: cpulab is a static Go binary), so the image is the binary
  alone. It carries the SHA-256 of the binary it was built from as a label; the backend runs
  the image whose label matches the binary the pipeline built, so a stale tag is never used
  by mistake.
* `cpulab-kind:<build>`, loaded into kind's nodes (platform/kind_clusters.py): `cpulab:<build>`
  plus podgate, the start gate and file reader of the pods.

The real node needs no engine: its images are OCI archives of the same two binaries
(platform/real_node_images.py), at the same paths (model/builds.py) and with the same labels.

Command line (what the Snakemake rule `build_image` calls; `build_podgate` and `build_kind_image`
call `throttlelab kind build-podgate` and `throttlelab kind build-image`)::

    throttlelab build-image --variant go124mod \
        --binary results/build/go124mod/cpulab --out results/build/go124mod/image.json
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

from throttlelab.errors import BackendError
from throttlelab.host import docker_engine
from throttlelab.host.atomic_write import write_json_atomically
from throttlelab.host.docker_engine import kind_engine_client
from throttlelab.host.gobuild import go_build
from throttlelab.model.builds import LABEL, LABEL_BINARY, LABEL_PODGATE, LABEL_VARIANT, PODGATE
from throttlelab.model.digest import sha256_file

REPOSITORY = "cpulab"
KIND_REPOSITORY = "cpulab-kind"

DOCKERFILE = b'FROM scratch\nCOPY cpulab /cpulab\nENTRYPOINT ["/cpulab"]\n'


def tag_of(variant: str) -> str:
    return f"{REPOSITORY}:{variant}"


def build_context(binary: Path) -> io.BytesIO:
    """The build context as a tar stream: the Dockerfile and the binary, nothing else."""
    return docker_engine.build_context(DOCKERFILE, {"cpulab": Path(binary)})


def build_image(client: Any, variant: str, binary: Path) -> dict[str, str]:
    """Build `cpulab:<variant>` from the binary; returns what the stamp file records (with the engine's
    ID: the lab runs more than one engine, and an image lives in one)."""
    binary = Path(binary)
    if not binary.is_file():
        raise BackendError(f"image {tag_of(variant)}: the workload binary {binary} is missing; build it first")
    sha = sha256_file(binary)
    image = docker_engine.build_image(
        client, tag_of(variant), build_context(binary), labels={LABEL: "1", LABEL_VARIANT: variant, LABEL_BINARY: sha}
    )
    try:
        engine = str(client.info().get("ID", ""))
    except docker_engine.docker_errors():
        engine = ""
    return {
        "tag": tag_of(variant),
        "id": image.id,
        "variant": variant,
        "binary": str(binary),
        "binary_sha256": sha,
        "engine": engine,
    }


def find_image(client: Any, variant: str, binary: Path) -> str:
    """The id of the image built from exactly this binary in this engine; a BackendError says how to get it
    (ensure_image builds what is missing)."""
    sha = sha256_file(binary)
    try:
        found = client.images.list(filters={"label": [f"{LABEL_BINARY}={sha}", f"{LABEL_VARIANT}={variant}"]})
    except docker_engine.docker_errors() as exc:
        raise BackendError(f"docker backend: cannot list images: {exc}") from None
    if not found:
        raise BackendError(
            f"docker backend: no image built from {binary} (sha256 {sha[:12]}) in this engine; "
            f"build it with `snakemake --cores 1 --forcerun build_image` (it tags {tag_of(variant)})"
        )
    return found[0].id


def ensure_image(client: Any, variant: str, binary: Path, progress: Any = lambda message: None) -> str:
    """The id of the image built from this binary in this engine, building it here when this engine lacks
    it (the stamp under results/build/ says an image was built, not in which of the lab's engines: after a
    switch of engine, the first run builds what the new one lacks instead of stopping)."""
    try:
        return find_image(client, variant, binary)
    except BackendError as missing:
        if not Path(binary).is_file():
            raise missing from None
    progress(f"this engine has no {tag_of(variant)} built from {binary}: building it here")
    return build_image(client, variant, binary)["id"]


# -- the kind image: cpulab:<variant> plus podgate ---------------------------------------------------------


def kind_tag(variant: str) -> str:
    """The image in kind's clusters: the docker backend's cpulab:<variant> plus /podgate."""
    return f"{KIND_REPOSITORY}:{variant}"


def build_podgate(out: Path, source: Path) -> Path:
    """`go build` of podgate (the start gate and file reader in the pods; `source` is its Go
    module, workload/podgate), static, local toolchain."""
    return go_build(Path(source), out, "podgate")


def kind_dockerfile(base_tag: str) -> bytes:
    return f"FROM {base_tag}\nCOPY podgate {PODGATE}\n".encode()


def build_kind_image(variant: str, base_stamp: Path, podgate: Path) -> dict[str, str]:
    """cpulab-kind:<variant> = the docker backend's cpulab:<variant> image + /podgate (no pull: FROM a local image)."""
    base = json.loads(Path(base_stamp).read_text())
    client = kind_engine_client()
    sha = sha256_file(podgate)
    context = docker_engine.build_context(kind_dockerfile(base["tag"]), {"podgate": Path(podgate)})
    image = docker_engine.build_image(
        client,
        kind_tag(variant),
        context,
        labels={
            LABEL: "1",
            LABEL_VARIANT: variant,
            LABEL_PODGATE: sha,
            "throttlelab.base-image": base.get("id", ""),
        },
    )
    return {
        "tag": kind_tag(variant),
        "id": image.id,
        "variant": variant,
        "base": base.get("id", ""),
        "podgate_sha256": sha,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="throttlelab build-image", description=__doc__.splitlines()[0])
    p.add_argument("--variant", required=True)
    p.add_argument("--binary", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path, help="stamp file: the image id and the binary's hash")
    args = p.parse_args(argv)
    try:
        record = build_image(docker_engine.connect(), args.variant, args.binary)
    except BackendError as exc:
        print(f"build_image: {exc}", file=sys.stderr)
        return 1
    write_json_atomically(args.out, record, sort_keys=False)  # the rule's output: which image, from which binary
    print(f"{record['tag']} = {record['id']} from {record['binary']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
