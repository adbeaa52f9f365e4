"""The workload's two builds, and what every image of them holds and is labelled with.

go124mod says ``go 1.24`` and go125mod ``go 1.25``; the same local toolchain
builds both, so any difference between them (DefaultGODEBUG, hence the default
GOMAXPROCS under a CPU limit) comes from that line alone.

Every image of the workload (the docker backend's, kind's, the real node's OCI archives:
platform/workload_images.py, platform/real_node_images.py) holds cpulab and podgate at the
same paths, which the pods' commands name (backends/kube/manifests.py), and carries the same
labels: the lab's mark, its build and the SHA-256 of the binaries it was made from.
"""

from __future__ import annotations

GO_LINES: dict[str, str] = {"go124mod": "1.24", "go125mod": "1.25"}
BUILDS: tuple[str, ...] = tuple(GO_LINES)

CPULAB = "/cpulab"
PODGATE = "/podgate"

LABEL = "throttlelab"  # every object the lab makes carries throttlelab=1
LABEL_VARIANT = "throttlelab.variant"
LABEL_BINARY = "throttlelab.binary-sha256"
LABEL_PODGATE = "throttlelab.podgate-sha256"
