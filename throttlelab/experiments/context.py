"""What every experiment gets handed, and what it hands back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable

from throttlelab.backends.base import Backend, Capabilities, Deployment, Output
from throttlelab.model.placement import LoadPlacement, Node


@dataclass
class Context:
    backend: Backend
    capabilities: Capabilities
    node_cpus: str | None
    seed: int
    progress: Callable[[str], None] = lambda message: None
    #: marks one of the workload's busy intervals (``with ctx.busy(): ...``): the runner's interference meter
    #: judges only those (host/interference.py); outside a metered run it marks nothing
    busy: Callable[[], AbstractContextManager[None]] = nullcontext
    #: the seed the load generator draws its arrivals from: the block's, common to the variants of one
    #: (experiment, repeat) (model/seeds.py); None where no block exists (a pilot, a test): the job's own seed
    arrivals: int | None = None

    @property
    def arrival_seed(self) -> int:
        return self.seed if self.arrivals is None else self.arrivals


@dataclass
class ExperimentResult:
    records: list[dict[str, Any]] = field(default_factory=list)
    window_s: float = 0.0  # time spent measuring, for the pipeline's overhead figure
    notes: list[str] = field(default_factory=list)

    def add_output(self, out: Output) -> None:
        """Workload records, each tagged with the pod/container that wrote it."""
        for record in out.records:
            self.records.append({**record, "src": out.source})
        self.records.append(
            {
                "type": "process",
                "src": out.source,
                "returncode": out.returncode,
                "wall_s": round(out.wall_s, 4),
                "stderr_tail": out.stderr[-2000:],
            }
        )


@contextmanager
def deployed(
    ctx: Context, node: Node, result: ExperimentResult, load: LoadPlacement | None = None
) -> Iterator[Deployment]:
    """Deploy, read every level back (a mismatch raises), and keep the readback in the log: the levels read
    before the experiment first, then any a backend read from the containers as they started."""
    with ctx.backend.deploy(node, load) as dep:
        for readback in dep.verify_before_start():
            result.records.append(readback.as_record())
        result.records.extend(dep.ancestors())
        yield dep
        result.records.extend(readback.as_record() for readback in dep.readbacks_after())
