"""The seeds (model/seeds.py): every derivation pinned to the numbers it gave before it moved here (a
changed derivation changes every run's numbers), and the workload's copy of its streams current."""

from __future__ import annotations

import numpy as np

from conftest import assert_workload_copy_current
from throttlelab.analysis.metrics import estimates
from throttlelab.experiments.context import Context
from throttlelab.experiments.services_experiments import load_args
from throttlelab.model import seeds
from throttlelab.model.variants import VariantSpec


def test_the_workloads_copy_of_the_streams_is_current():
    assert_workload_copy_current("seeds", "workload_seeds_json", seeds.WORKLOAD_SEEDS)


def test_a_jobs_seed_is_the_one_its_raw_log_recorded():
    # results/local/raw/E1/all-limits/rep0.jsonl of a quick run: "seed":3673300877,"config_seed":20261130
    assert seeds.job_seed(20261130, "E1", "all-limits", 0) == 3673300877
    assert seeds.job_seed(20261130, "E1", "all-limits", 1) != seeds.job_seed(20261130, "E1", "all-limits", 0)
    assert 0 <= seeds.job_seed(1, "X6", "v", 99) < 2**32


def test_the_measuring_order_is_randomized_complete_blocks_the_same_way_every_time():
    jobs = [("limit1", r) for r in range(3)] + [("nolimit", r) for r in range(3)]
    order = seeds.measuring_order(20261130, "E2a", jobs)
    assert order == [("nolimit", 0), ("limit1", 0), ("limit1", 1), ("nolimit", 1), ("limit1", 2), ("nolimit", 2)]
    # block k holds repeat k of every variant, the blocks in repeat order
    assert [r for _, r in order] == [0, 0, 1, 1, 2, 2]
    assert jobs == [("limit1", r) for r in range(3)] + [("nolimit", r) for r in range(3)]  # not shuffled in place
    # each experiment its own order inside the blocks, and over many blocks both orders occur
    many = [(v, r) for v in ("a", "b") for r in range(20)]
    firsts = {seeds.measuring_order(7, "X1", many)[2 * r][0] for r in range(20)}
    assert firsts == {"a", "b"}
    assert seeds.measuring_order(20261130, "X1", many) != seeds.measuring_order(20261130, "X2", many)


def test_the_variants_of_a_block_share_its_arrival_seed_and_blocks_do_not():
    assert seeds.arrival_seed(20261130, "E7", 0) == 3458643565
    assert seeds.arrival_seed(20261130, "E7", 1) != seeds.arrival_seed(20261130, "E7", 0)
    assert seeds.arrival_seed(20261130, "X6", 0) != seeds.arrival_seed(20261130, "E7", 0)
    # not any variant's own job seed, whatever the variant is called
    assert seeds.arrival_seed(20261130, "E7", 0) not in {
        seeds.job_seed(20261130, "E7", v, 0) for v in ("one-limit", "two-half", "arrivals")
    }


def test_the_load_generator_gets_the_blocks_arrival_seed():
    spec = VariantSpec.from_dict("E2b", "v", {"rps": 20, "clump": 10, "duration_ms": 1000, "warmup_ms": 100})
    assert "-seed=3673300877" in load_args(spec, ["127.0.0.1:1"], 3673300877, "v")
    assert seeds.load_seed(3673300877) == 3673300877
    # the runner hands the block's seed; a context without a block (a pilot) draws from its own seed
    block = Context(backend=None, capabilities=None, node_cpus=None, seed=5, arrivals=3458643565)
    assert block.arrival_seed == 3458643565
    assert Context(backend=None, capabilities=None, node_cpus=None, seed=5).arrival_seed == 5


def test_e6s_housekeeping_offset_and_the_bootstrap_streams_are_pinned():
    assert seeds.housekeeping_rng(5).uniform(0, 1) == 0.6229016948897019
    key = ("local", "E2b", "clump50", "work_p99_9_ms")
    assert seeds.bootstrap_entropy(20261130, key) == [20261130, 4037693978]
    draws = estimates._group_seed(20261130, key).integers(0, 1000, size=3)
    assert (draws == np.random.default_rng([20261130, 4037693978]).integers(0, 1000, size=3)).all()
