"""Every figure of the report, in one place: the rules, the command line and the page read it here.

A light module on purpose (the standard library only): the Snakemake rules import
it while the workflow is parsed, so it names the drawing functions as dotted
paths (``module:function``) and imports matplotlib nowhere. :func:`resolve`
imports a figure's function when it is drawn.

For each figure:

* ``experiment``: the report section it belongs to, the catalogue row that lists the
  figure (model/catalogue.py, standard library only too); a profile that runs this
  experiment gets the figure (rules/report.smk asks for exactly those), and the
  caption's repeats are this experiment's;
* ``also_shows``: other experiments whose runs it draws when the profile has them;
* ``tables``: the tidy tables it reads, named as the outputs of the rules
  parse_runs, compute_stats and evaluate_findings name them (``--table NAME=PATH``);
  ``reads``: those and the tables of its caption (:data:`CAPTION_TABLES`);
* ``draw`` and ``caption``: the figure's function (the tables as keyword arguments ->
  a matplotlib Figure) and its caption ((estimates, runs) -> text, the method and the numbers
  as the tables state them): ``<name>_figure`` and ``<name>_caption`` in the figures module of
  its experiment's family (``figures/<family>_figures.py``, the catalogue's ``family``, as in
  experiments/, metrics/ and findings/), for the lab's experiments and ours alike. The caption
  function is the caption's one home: our page prints it under the figure, and the
  draw_figures job writes it beside the SVG (``caption_html``) for Snakemake's own report to
  include (report/captions/figure.rst);
* ``category``: its section in Snakemake's report, the experiment's id and catalogue title
  (``topic`` when the figure spans several), marked "(ours)" for an experiment beyond the lab.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from throttlelab.model import catalogue


@dataclass(frozen=True)
class FigureEntry:
    name: str
    title: str
    tables: tuple[str, ...]
    also_shows: tuple[str, ...] = ()
    #: the section of Snakemake's report when the figure's topic spans several experiments;
    #: "" = its experiment's id and catalogue title (see :attr:`category`)
    topic: str = ""

    def __post_init__(self) -> None:
        for experiment_id in self.also_shows:
            catalogue.experiment(experiment_id)  # an unknown one is a CatalogueError naming it

    @property
    def experiment(self) -> str:
        """The experiment whose report section holds the figure: the catalogue row that lists it."""
        return catalogue.figure_experiment(self.name)

    @property
    def category(self) -> str:
        """Its section in Snakemake's report: "E2a burst job", "X1 burst budget (ours)"."""
        row = catalogue.experiment(self.experiment)
        return (self.topic or f"{row.id} {row.title}") + (" (ours)" if row.ours else "")

    @property
    def module(self) -> str:
        """The module that draws it: the figures module of its experiment's family (model/catalogue.py)."""
        return f"throttlelab.figures.{catalogue.experiment(self.experiment).family}_figures"

    @property
    def draw(self) -> str:
        """Its function, tables as keyword arguments -> a matplotlib Figure (``module:function``)."""
        return f"{self.module}:{self.name}_figure"

    @property
    def caption(self) -> str:
        """Its caption, (estimates, runs) -> text (``module:function``)."""
        return f"{self.module}:{self.name}_caption"

    @property
    def reads(self) -> tuple[str, ...]:
        """The tables its drawing and its caption read, each once."""
        return tuple(dict.fromkeys((*self.tables, *CAPTION_TABLES)))

    @property
    def svg(self) -> str:
        """The figure's file name in the report's figures/ folder."""
        return f"{self.name}.svg"

    @property
    def caption_html(self) -> str:
        """Its caption's file beside the SVG, an HTML paragraph that Snakemake's report includes."""
        return f"{self.name}.caption.html"


#: what a caption reads: the estimates' methods and the runs' parameters
CAPTION_TABLES = ("estimates", "runs")
_SERVICE_TABLES = ("metrics", "estimates", "runs")
_BURST_TABLES = ("rounds", "metrics", "estimates", "runs")
# ours beyond the lab draw the model where the lab's figure would be: its numbers are the findings' table
_MODEL_BURST_TABLES = (*_BURST_TABLES, "predictions")
_MODEL_SERVICE_TABLES = (*_SERVICE_TABLES, "predictions")

# A table, one figure per row: ruff format keeps its rows.
# fmt: off
FIGURES: dict[str, FigureEntry] = {
    entry.name: entry
    for entry in (
        FigureEntry("e2a_completion", "Per-round completion time by limit", _BURST_TABLES),
        FigureEntry("e2a_counters", "cgroup counters: throttled share and throttled time per round", _BURST_TABLES),
        FigureEntry("e3_gomaxprocs", "GOMAXPROCS by limit and module line", ("metrics", "runs")),
        FigureEntry("s1_throttling", "Throttling by GOMAXPROCS and limit", ("metrics", "estimates", "runs")),
        FigureEntry("weights_shares", "Shares of one CPU: measured, predicted by the weights, and the lab's",
                    ("metrics", "estimates", "share_expectations"),
                    also_shows=("E10",), topic="E4/E5/E10 requests become weights"),
        FigureEntry("e2b_latency", "/work tail latency and throttled share by arrival shape and setting", _SERVICE_TABLES),
        FigureEntry("e7_replicas", "Replicas behind per-connection balancing against one pod", _SERVICE_TABLES),
        FigureEntry("e8_neighbor", "A busy neighbor: latency, and the CPU the service really got", _SERVICE_TABLES),
        FigureEntry("e6_monitoring", "What a scraper computes against the real pause", _SERVICE_TABLES),
        FigureEntry("s2_throughput", "Closed-loop throughput: thread count and a limited upstream", _SERVICE_TABLES),
        # ours beyond the lab (docs/EXPERIMENTS.md; the catalogue's ours column)
        FigureEntry("x1_budget", "Burst budget: completion and throttled periods by budget", _MODEL_BURST_TABLES),
        FigureEntry("x2_period", "CFS period: completion and throttled periods by period", _MODEL_BURST_TABLES),
        FigureEntry("x3_queues", "What throttled time sums: run queues, not threads", _MODEL_BURST_TABLES),
        FigureEntry("x4_overlap", "Overlapping bursts: pods bursting together against staggered", _MODEL_BURST_TABLES),
        FigureEntry("x5_near_limit", "Steady arrivals near the limit: throttled share and latency", _MODEL_SERVICE_TABLES),
        FigureEntry("x6_threads", "GOMAXPROCS 2 against 1 under a small limit", _SERVICE_TABLES),
    )
}
# fmt: on


def figures_for(experiments: Iterable[str]) -> list[FigureEntry]:
    """The figures a profile (or a set of runs) with these experiments gets, in the registry's order."""
    ran = set(experiments)
    return [entry for entry in FIGURES.values() if entry.experiment in ran]


def resolve(dotted: str) -> Callable[..., Any]:
    """The function a ``module:function`` path names (imports its module, matplotlib with it)."""
    module, _, name = dotted.partition(":")
    return getattr(importlib.import_module(module), name)
