"""The seeds (model/seeds.py): every derivation pinned to the numbers it gave before it moved here (a
changed derivation changes every run's numbers), and the workload's copy of its streams current."""

from __future__ import annotations

import numpy as np

from conftest import assert_workload_copy_current
from throttlelab.analysis.metrics import estimates
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


def test_the_measuring_order_interleaves_the_variants_repeats_the_same_way_every_time():
    jobs = [("limit1", r) for r in range(3)] + [("nolimit", r) for r in range(3)]
    order = seeds.measuring_order(20261130, "E2a", jobs)
    assert order == [("limit1", 0), ("nolimit", 0), ("limit1", 1), ("nolimit", 2), ("limit1", 2), ("nolimit", 1)]
    assert jobs == [("limit1", r) for r in range(3)] + [("nolimit", r) for r in range(3)]  # not shuffled in place
    assert seeds.measuring_order(20261130, "X1", jobs) != order  # each experiment its own order


def test_the_load_generator_gets_the_jobs_seed():
    spec = VariantSpec.from_dict("E2b", "v", {"rps": 20, "clump": 10, "duration_ms": 1000, "warmup_ms": 100})
    assert "-seed=3673300877" in load_args(spec, ["127.0.0.1:1"], 3673300877, "v")
    assert seeds.load_seed(3673300877) == 3673300877


def test_e6s_housekeeping_offset_and_the_bootstrap_streams_are_pinned():
    assert seeds.housekeeping_rng(5).uniform(0, 1) == 0.6229016948897019
    key = ("local", "E2b", "clump50", "work_p99_9_ms")
    assert seeds.bootstrap_entropy(20261130, key) == [20261130, 4037693978]
    draws = estimates._group_seed(20261130, key).integers(0, 1000, size=3)
    assert (draws == np.random.default_rng([20261130, 4037693978]).integers(0, 1000, size=3)).all()
