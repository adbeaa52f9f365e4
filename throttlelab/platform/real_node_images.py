"""The real node's workload images: cpulab and podgate in one layer, an OCI archive per build.

The kind image (cpulab-kind:<build>) is the docker backend's image plus podgate, built
by a Docker engine (platform/workload_images.py); the real node needs no engine: the same
two static binaries, at the same paths, are written as an OCI archive here
(platform/oci_archive.py) and imported into the node's containerd when it starts. The
image carries the binaries' SHA-256 as labels, named as the engine's images name them.

Command line (what the Snakemake rule `build_node_image` calls)::

    throttlelab node build-image --build go124mod --cpulab results/build/go124mod/cpulab \\
        --podgate results/build/podgate/podgate --out results/node/images/go124mod.tar
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from throttlelab.errors import BackendError
from throttlelab.platform import oci_archive
from throttlelab.model import results_layout as layout
from throttlelab.model.builds import CPULAB, LABEL, LABEL_BINARY, LABEL_PODGATE, LABEL_VARIANT, PODGATE
from throttlelab.model.digest import sha256_file


def image_reference(build: str) -> str:
    """The name kubelet asks the node's containerd for (nothing of the kind is on any registry)."""
    return f"localhost/throttlelab/cpulab:{build}"


def archive_path(folder: Path, build: str) -> Path:
    return Path(folder) / layout.NODE_IMAGE_ARCHIVE_NAME.format(build=build)


def build_image(build: str, cpulab: Path, podgate: Path, out: Path) -> str:
    """Write the archive; returns its manifest digest."""
    for what, path in (("cpulab", cpulab), ("podgate", podgate)):
        if not Path(path).is_file():
            raise BackendError(f"node image {build}: the {what} binary {path} is missing; build it first")
    labels = {
        LABEL: "1",
        LABEL_VARIANT: build,
        LABEL_BINARY: sha256_file(cpulab),
        LABEL_PODGATE: sha256_file(podgate),
    }
    files = [oci_archive.ImageFile(Path(cpulab), CPULAB), oci_archive.ImageFile(Path(podgate), PODGATE)]
    return oci_archive.write_archive(Path(out), image_reference(build), files, [CPULAB], labels)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="throttlelab node", description="the real node's workload images")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build-image", help="write one build's OCI archive")
    build.add_argument("--build", required=True)
    build.add_argument("--cpulab", type=Path, required=True)
    build.add_argument("--podgate", type=Path, required=True)
    build.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        digest = build_image(args.build, args.cpulab, args.podgate, args.out)
    except BackendError as exc:
        print(f"throttlelab node: {exc}", file=sys.stderr)
        return 1
    print(f"{image_reference(args.build)} {digest} -> {args.out}")
    return 0
