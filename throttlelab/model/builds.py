"""The workload's two builds: the same source, only the go.mod ``go`` line differs.

go124mod says ``go 1.24`` and go125mod ``go 1.25``; the same local toolchain
builds both, so any difference between them (DefaultGODEBUG, hence the default
GOMAXPROCS under a CPU limit) comes from that line alone.
"""

from __future__ import annotations

GO_LINES: dict[str, str] = {"go124mod": "1.24", "go125mod": "1.25"}
BUILDS: tuple[str, ...] = tuple(GO_LINES)
