"""Experiments of docs/LAB.md §4: each turns one variant's parameters into records.

An experiment function takes the variant's spec (validated by the profile
schema) and a Context, deploys a node through the backend interface, and
returns the records for the raw log plus its measurement window in seconds.
Which function runs which experiment is the catalogue's ``runner`` column
(model/catalogue.py); :data:`REGISTRY` maps every experiment of the catalogue
to its function.
"""

from __future__ import annotations

from collections.abc import Callable

from throttlelab.errors import CatalogueError
from throttlelab.experiments.context import Context, ExperimentResult
from throttlelab.experiments.jobs_experiments import run_e1, run_e2a, run_e3, run_s1, run_x4
from throttlelab.experiments.weights_experiments import run_e4, run_shares

from throttlelab.experiments.services_experiments import run_e2b, run_e6, run_e7, run_e8, run_s2
from throttlelab.model.catalogue import CATALOGUE, THIS_FILE
from throttlelab.model.variants import VariantSpec

Runner = Callable[[VariantSpec, Context], ExperimentResult]

#: The experiment functions by name, as the catalogue's ``runner`` column names them.
RUNNERS: dict[str, Runner] = {
    f.__name__: f
    for f in (run_e1, run_e2a, run_e3, run_s1, run_x4, run_e4, run_shares, run_e6, run_e2b, run_e7, run_e8, run_s2)
}


def _runner(experiment: str, name: str) -> Runner:
    try:
        return RUNNERS[name]
    except KeyError:
        raise CatalogueError(
            f"{THIS_FILE}: experiment {experiment} names the runner {name!r}, which throttlelab/experiments does not "
            f"define ({', '.join(RUNNERS)}): name one of those, or add the function to RUNNERS"
        ) from None


#: experiment id -> the function that runs one of its variants, for every experiment of the catalogue.
REGISTRY: dict[str, Runner] = {row.id: _runner(row.id, row.runner) for row in CATALOGUE}

__all__ = ["REGISTRY", "RUNNERS", "Context", "ExperimentResult"]
