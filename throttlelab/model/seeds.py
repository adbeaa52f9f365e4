"""Every seeded choice of the lab, derived from the config's one seed (pure, standard library only).

config.yaml's ``seed`` (the *config seed*; every raw log records it as ``meta.config_seed``, runs.csv
as ``config_seed``) is the root of every random choice, each derived here once:

* the measuring order: randomized complete blocks, each experiment's repeat k of every variant one
  block, the blocks in repeat order and the variants of block k shuffled by
  ``random.Random("<seed>/<experiment>/<k>")`` (:func:`measuring_order`; model/plan.py numbers the jobs
  from it, docs/STATISTICS.md §6);
* each job's seed: the first 8 hex digits of ``sha256("<seed>/<experiment>/<variant>/<repeat>")``
  (:func:`job_seed`; the runner hands it to the experiment, ``meta.seed``, runs.csv ``job_seed``);
* each block's arrival seed, common to the variants of one (experiment, repeat): the first 8 hex digits
  of ``sha256("<seed>/<experiment>/<repeat>/arrivals")``, a text no job seed hashes (theirs end in the
  repeat) (:func:`arrival_seed`, ``meta.arrival_seed``, runs.csv ``arrival_seed``), so the arms of a
  block meet the same arrivals and a check may compare them block by block (docs/STATISTICS.md §4);
* from the arrival seed, the load schedules: ``cpulab load -seed`` is the arrival seed itself
  (:func:`load_seed`), and the workload draws its streams from it with ``rand.NewPCG(seed, stream)``,
  one stream each for the /work and /ping arrivals and the connection balancing
  (:data:`WORKLOAD_STREAMS`, held against workload/internal/loadgen by a Go test reading
  ``workload/testdata/seeds.json``);
* from the job's seed, E6's emulated cAdvisor: the first housekeeping reading at a random offset
  (:func:`housekeeping_rng`);
* from the config seed (``throttlelab stats --seed``), the bootstrap streams: one numpy generator per
  (backend, experiment, variant, metric), seeded with :func:`bootstrap_entropy`, so a number does not
  change with whatever else is in the table.

Changing any of these changes the numbers of every run measured or analysed after: they are
derivations to keep, not to tidy.
"""

from __future__ import annotations

import hashlib
import json
import random
import zlib
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

THIS_FILE = "throttlelab/model/seeds.py"
#: Where the workload's streams are committed (read by the Go test of workload/internal/loadgen).
WORKLOAD_SEEDS = "workload/testdata/seeds.json"

#: The PCG streams cpulab load draws from its -seed (rand.NewPCG(seed, stream), workload/internal/loadgen):
#: the /work arrivals, the /ping arrivals, the choice of connection for each request.
WORKLOAD_STREAMS: dict[str, int] = {"work": 1, "ping": 2, "balance": 0xBA1A}

T = TypeVar("T")


def measuring_order(config_seed: int, experiment: str, jobs: Sequence[T]) -> list[T]:
    """An experiment's jobs in their seeded measuring order, as randomized complete blocks: the jobs of
    repeat k (each job's last element) form block k, the blocks run in repeat order, and the variants
    inside a block in an order of their own. Drift over a run then falls on every variant alike, and the
    arms of a block run side by side in time."""
    blocks: dict[int, list[T]] = {}
    for job in jobs:
        blocks.setdefault(job[-1], []).append(job)  # type: ignore[index]
    order: list[T] = []
    for repeat in sorted(blocks):
        block = blocks[repeat]
        random.Random(f"{config_seed}/{experiment}/{repeat}").shuffle(block)
        order += block
    return order


def _digest_seed(text: str) -> int:
    """0 <= seed < 2**32 from the first 8 hex digits of the text's SHA-256, the same on every machine."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def job_seed(config_seed: int, experiment: str, variant: str, repeat: int) -> int:
    """The seed of one job (experiment, variant, repeat)."""
    return _digest_seed(f"{config_seed}/{experiment}/{variant}/{repeat}")


def arrival_seed(config_seed: int, experiment: str, repeat: int) -> int:
    """The arrival seed of one block (experiment, repeat): every variant of the block draws its load from it."""
    return _digest_seed(f"{config_seed}/{experiment}/{repeat}/arrivals")


def load_seed(arrivals: int) -> int:
    """``cpulab load -seed`` of a run: its arrival seed itself (the workload's streams separate what it draws)."""
    return arrivals


def housekeeping_rng(job: int) -> random.Random:
    """E6's emulated cAdvisor: the generator of its first housekeeping reading's offset."""
    return random.Random(job)


def bootstrap_entropy(config_seed: int, key: Iterable[Any]) -> list[int]:
    """The entropy of one bootstrap's generator (``numpy.random.default_rng(entropy)``): the config
    seed and the CRC-32 of the key (backend, experiment, variant, metric) joined with "/"."""
    return [config_seed, zlib.crc32("/".join(map(str, key)).encode())]


def workload_seeds() -> dict[str, Any]:
    """The workload's side, as its Go test reads it."""
    return {
        "about": f"generated from {THIS_FILE} (tests/model/test_seeds.py keeps it current); read by "
        "workload/internal/loadgen's tests: the PCG streams cpulab load draws from its -seed",
        "streams": dict(WORKLOAD_STREAMS),
    }


def workload_seeds_json() -> str:
    """:func:`workload_seeds` as the text of ``workload/testdata/seeds.json``."""
    return json.dumps(workload_seeds(), indent=2) + "\n"
