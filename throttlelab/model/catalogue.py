"""The experiments, one row each: the one place that says what an experiment is (pure, standard library only).

Every list of experiments derives from this table:

* the runner's table (``experiments.REGISTRY``): each row names its experiment function (``runner``);
* the profile schema's experiment names (model/config.py fills them in from here);
* what a raw log of the experiment cannot do without (analysis/tidy.py): a process of ``command``
  and the runner's ``runner_records``;
* its per-run metrics (analysis/metrics/per_run.py): the ``family`` module and, in it, the
  ``metrics`` kind;
* the figures of its report section (figures/registry.py: ``FigureEntry.experiment``);
* whether it, and every finding that rests on it alone, is the lab's or ours beyond the lab
  (docs/EXPERIMENTS.md): ``Finding.ours``, the report's "Beyond the lab";
* whether the report shows its whole cgroup read-back (``shows_readback``).

An experiment that is not here is a loud error (:class:`CatalogueError` naming it and this
file), never a silent ``None`` or an empty result. The rules read this module while the
workflow is parsed, so it imports the standard library only (and the raw log's contract,
model/records.py, which names the commands and the runner records a row may require).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from throttlelab.errors import CatalogueError
from throttlelab.model import records

#: How experiments/, metrics/, figures/ and findings/ sort their code: one module per family.
FAMILIES = ("jobs", "weights", "services")

#: The per-run metrics each family computes, by kind (analysis/metrics/<family>_metrics.py):
#: jobs: ``burst`` (one burst process: E2a's metrics), ``pods_burst`` (a burst process in each of several
#: pods, E2a's metrics averaged over them), ``spin`` (S1's spin), ``gomaxprocs`` (E3's info);
#: weights: ``readback`` (levels read back equal to the design), ``shares`` (shares of one contended CPU);
#: services: ``load`` (a service under a load generator), ``monitoring`` (E6's scrapes against the pause).
METRIC_KINDS: dict[str, tuple[str, ...]] = {
    "jobs": ("burst", "pods_burst", "spin", "gomaxprocs"),
    "weights": ("readback", "shares"),
    "services": ("load", "load_replicas", "load_neighbor", "load_cascade", "monitoring"),
}

THIS_FILE = "throttlelab/model/catalogue.py"


@dataclass(frozen=True)
class Experiment:
    """One experiment: what it is called, how it runs, what its raw log must hold, how it is analysed."""

    #: the lab's own id (E1-E10, S1, S2: docs/LAB.md §4) or ours beyond it (X1..., docs/EXPERIMENTS.md)
    id: str
    #: a few words on what it measures; with the id, the section of Snakemake's report its figures go to
    title: str
    _: KW_ONLY
    #: True for an experiment of the project beyond the lab: the report marks it and its findings so
    ours: bool
    #: FAMILIES: where its metrics, figures and findings live
    family: str
    #: the function of throttlelab/experiments that runs one variant (experiments.REGISTRY)
    runner: str
    #: the cpulab subcommand (docs/WORKLOAD.md) a run is incomplete without a process of
    command: str
    #: METRIC_KINDS[family], or None for an experiment that is its read-back (no per-run metric)
    metrics: str | None
    #: the runner's own records (docs/RECORDS.md) a run is incomplete without
    runner_records: tuple[str, ...] = ()
    #: the figures of its report section (figures/registry.py holds how each is drawn)
    figures: tuple[str, ...] = ()
    #: the report shows its whole read-back table (not only whether the read-back matched)
    shows_readback: bool = False

    def __post_init__(self) -> None:
        where = f"{THIS_FILE}: experiment {self.id}"
        if self.family not in FAMILIES:
            raise CatalogueError(f"{where}: family {self.family!r} is not one of {', '.join(FAMILIES)}")
        if self.command not in records.COMMANDS:
            raise CatalogueError(
                f"{where}: command {self.command!r} is no cpulab command of the raw log's contract "
                f"({records.THIS_FILE}: {', '.join(records.COMMANDS)})"
            )
        unknown = [kind for kind in self.runner_records if kind not in records.RUNNER_TYPES]
        if unknown:
            raise CatalogueError(
                f"{where}: runner_records {', '.join(unknown)} are no runner records of the raw log's "
                f"contract ({records.THIS_FILE}: {', '.join(sorted(records.RUNNER_TYPES))})"
            )
        if self.metrics is not None and self.metrics not in METRIC_KINDS[self.family]:
            raise CatalogueError(
                f"{where}: metrics {self.metrics!r} is not a kind of the {self.family} family "
                f"({', '.join(METRIC_KINDS[self.family])}), nor None"
            )


_SHARES = ("share_expectation", "share_sample")

# A table, one row per experiment: ruff format keeps its rows.
# fmt: off
CATALOGUE: tuple[Experiment, ...] = (
    # ---- the lab's (docs/LAB.md §4)
    Experiment("E1", "where the limit is written", ours=False, family="jobs", runner="run_e1", command="info",
               metrics=None, shows_readback=True),
    Experiment("E2a", "burst job", ours=False, family="jobs", runner="run_e2a", command="burst", metrics="burst",
               figures=("e2a_completion", "e2a_counters")),
    Experiment("E3", "GOMAXPROCS", ours=False, family="jobs", runner="run_e3", command="info", metrics="gomaxprocs",
               runner_records=("expectation",), figures=("e3_gomaxprocs",)),
    Experiment("S1", "GOMAXPROCS and throttling", ours=False, family="jobs", runner="run_s1", command="spin",
               metrics="spin", figures=("s1_throttling",)),
    Experiment("E4", "requests become weights: every level read back", ours=False, family="weights", runner="run_e4",
               command="info", metrics="readback", shows_readback=True),
    Experiment("E5", "requests become weights: shares of one CPU", ours=False, family="weights", runner="run_shares",
               command="spin", metrics="shares", runner_records=_SHARES, figures=("weights_shares",)),
    Experiment("E10", "old runtime: E5's shares under runc < 1.3.2", ours=False, family="weights", runner="run_shares",
               command="spin", metrics="shares", runner_records=_SHARES),
    Experiment("E2b", "service under load", ours=False, family="services", runner="run_e2b", command="load",
               metrics="load", figures=("e2b_latency",)),
    Experiment("E7", "replicas or a raised limit", ours=False, family="services", runner="run_e7", command="load",
               metrics="load_replicas", figures=("e7_replicas",)),
    Experiment("E8", "busy neighbor", ours=False, family="services", runner="run_e8", command="load", metrics="load_neighbor",
               runner_records=("podstat",), figures=("e8_neighbor",)),
    Experiment("E6", "what monitoring sees", ours=False, family="services", runner="run_e6", command="burst",
               metrics="monitoring", runner_records=("podstat",), figures=("e6_monitoring",)),
    Experiment("S2", "threads and the cascade", ours=False, family="services", runner="run_s2", command="load",
               metrics="load_cascade", runner_records=("podstat",), figures=("s2_throughput",)),
    # ---- ours beyond the lab (docs/EXPERIMENTS.md): E2a's job with one more knob each, ...
    Experiment("X1", "burst budget", ours=True, family="jobs", runner="run_e2a", command="burst", metrics="burst",
               figures=("x1_budget",)),
    Experiment("X2", "CFS period", ours=True, family="jobs", runner="run_e2a", command="burst", metrics="burst",
               figures=("x2_period",)),
    Experiment("X3", "run queues or threads", ours=True, family="jobs", runner="run_e2a", command="burst",
               metrics="burst", figures=("x3_queues",)),
    # ... several pods bursting together or staggered, ...
    Experiment("X4", "overlapping bursts", ours=True, family="jobs", runner="run_x4", command="burst",
               metrics="pods_burst", figures=("x4_overlap",)),
    # ... E2b's service: steady arrivals near the limit, Go's minimum of 2 threads against 1
    Experiment("X5", "near the limit", ours=True, family="services", runner="run_e2b", command="load", metrics="load",
               figures=("x5_near_limit",)),
    Experiment("X6", "Go's minimum of 2 threads", ours=True, family="services", runner="run_e2b", command="load",
               metrics="load", figures=("x6_threads",)),
)
# fmt: on


def _by_id(rows: tuple[Experiment, ...]) -> dict[str, Experiment]:
    by_id: dict[str, Experiment] = {}
    for row in rows:
        if row.id in by_id:
            raise CatalogueError(f"{THIS_FILE}: experiment {row.id} has two rows")
        by_id[row.id] = row
    return by_id


def _figure_owners(rows: tuple[Experiment, ...]) -> dict[str, str]:
    owners: dict[str, str] = {}
    for row in rows:
        for figure in row.figures:
            if figure in owners:
                raise CatalogueError(
                    f"{THIS_FILE}: figure {figure} is listed by both {owners[figure]} and {row.id}; "
                    "a figure belongs to one experiment's section"
                )
            owners[figure] = row.id
    return owners


_BY_ID = _by_id(CATALOGUE)
_FIGURE_OWNERS = _figure_owners(CATALOGUE)

#: Every experiment's id, in the catalogue's order (the lab's, then ours).
IDS: tuple[str, ...] = tuple(_BY_ID)


def experiment(experiment_id: str) -> Experiment:
    """The catalogue row of ``experiment_id``; :class:`CatalogueError` naming it when there is none."""
    try:
        return _BY_ID[experiment_id]
    except KeyError:
        raise CatalogueError(
            f"experiment {experiment_id!r} has no row in {THIS_FILE} (the catalogue has {', '.join(IDS)}): "
            "add its row there, or name one of those"
        ) from None


def is_ours(experiment_id: str) -> bool:
    """True for an experiment beyond the lab (docs/EXPERIMENTS.md), False for the lab's own."""
    return experiment(experiment_id).ours


def figure_experiment(figure: str) -> str:
    """The experiment whose report section holds ``figure``; :class:`CatalogueError` when no row lists it."""
    try:
        return _FIGURE_OWNERS[figure]
    except KeyError:
        raise CatalogueError(
            f"figure {figure!r} is in no experiment's figures in {THIS_FILE}: add it to the figures of the "
            "experiment whose section shows it"
        ) from None
