"""The experiment catalogue (model/catalogue.py) against everything that names an experiment: the profile
schema, the profiles, the figure registry, the findings, the runner's table, the raw-log reader's
vocabulary and the metric families. Forgetting an experiment's row fails here, naming the experiment."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from conftest import PROJECT
from throttlelab.analysis import tidy
from throttlelab.analysis.findings import FINDINGS
from throttlelab.analysis.metrics.per_run import FAMILY_METRICS
from throttlelab.errors import CatalogueError
from throttlelab.experiments import REGISTRY, RUNNERS
from throttlelab.figures.registry import FIGURES
from throttlelab.model import catalogue
from throttlelab.model.catalogue import CATALOGUE, Experiment
from throttlelab.model.config import ConfigError, load_design

CONFIG = PROJECT / "config"
PROFILES = sorted((CONFIG / "profiles").glob("*.yaml"))
#: How an experiment id looks (E1, E2a, S2, X6): the schema's definitions named so are experiments' parameters.
EXPERIMENT_ID = re.compile(r"[A-Z][0-9]+[a-z]?")


def catalogue_problems(rows: Sequence[Experiment]) -> list[str]:
    """Every place that names an experiment or a figure the given catalogue rows do not hold, and every
    row that one of those places lacks; one line each, naming the experiment (or figure)."""
    ids = {row.id for row in rows}
    owners = {figure: row.id for row in rows for figure in row.figures}
    problems = []
    schema = yaml.safe_load((CONFIG / "profile.schema.yaml").read_text())
    defined = {name for name in schema["definitions"] if EXPERIMENT_ID.fullmatch(name)}
    problems += [
        f"config/profile.schema.yaml defines the parameters of {e}, which has no catalogue row"
        for e in sorted(defined - ids)
    ]
    problems += [
        f"catalogue experiment {e} has no definitions.{e} in config/profile.schema.yaml" for e in sorted(ids - defined)
    ]
    for path in PROFILES:
        problems += [
            f"config/profiles/{path.name} runs {e}, which has no catalogue row"
            for e in yaml.safe_load(path.read_text())["experiments"]
            if e not in ids
        ]
    for name, entry in FIGURES.items():
        if name not in owners:
            problems.append(f"figure {name} (figures/registry.py) is in no catalogue row's figures")
        problems += [
            f"figure {name} also shows {e}, which has no catalogue row" for e in entry.also_shows if e not in ids
        ]
    problems += [
        f"catalogue experiment {owner} lists the figure {figure}, which figures/registry.py lacks"
        for figure, owner in owners.items()
        if figure not in FIGURES
    ]
    for finding in FINDINGS:
        problems += [
            f"finding {finding.id} rests on {e}, which has no catalogue row"
            for e in dict.fromkeys((*finding.experiments, *finding.not_covered))
            if e not in ids
        ]
    return problems


def test_the_schema_the_profiles_the_figures_and_the_findings_name_exactly_the_catalogued_experiments():
    assert catalogue_problems(CATALOGUE) == []


@pytest.mark.parametrize("forgotten", catalogue.IDS)
def test_an_experiment_without_its_catalogue_row_is_named(forgotten):
    problems = catalogue_problems([row for row in CATALOGUE if row.id != forgotten])
    named = (forgotten, *catalogue.experiment(forgotten).figures)
    assert any(re.search(rf"\b{forgotten}\b", line) for line in problems), problems
    assert all(any(re.search(rf"\b{name}\b", line) for name in named) for line in problems), problems


def test_every_row_names_a_runner_a_command_and_records_the_rest_of_the_package_knows():
    for row in CATALOGUE:
        assert row.runner in RUNNERS, f"{row.id}: runner {row.runner!r} is not in experiments.RUNNERS"
        assert row.command in tidy.SUMMARY_FIELDS, f"{row.id}: {row.command!r} is no cpulab command tidy reads"
        assert set(row.runner_records) <= tidy.RUNNER_TYPES, f"{row.id}: {row.runner_records} not runner records"
    assert list(REGISTRY) == list(catalogue.IDS)
    assert set(FAMILY_METRICS) == set(catalogue.FAMILIES)


def test_every_profile_loads_through_the_catalogue():
    for path in PROFILES:
        design = load_design({"profile": path.stem}, CONFIG)
        assert set(design.experiments) <= set(catalogue.IDS), path.name


def test_a_profile_with_an_experiment_the_catalogue_lacks_is_refused_naming_it_and_the_fix(tmp_path: Path):
    profile = yaml.safe_load((CONFIG / "profiles" / "ci.yaml").read_text())
    profile["experiments"]["X7"] = profile["experiments"]["X1"]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(profile))
    with pytest.raises(ConfigError) as err:
        load_design({"profile": str(path)}, CONFIG)
    message = str(err.value)
    assert message.startswith(
        "profile mine.yaml: experiments.X7: experiment 'X7' has no row in throttlelab/model/catalogue.py"
    ), message
    assert "add its row there" in message


def test_an_unknown_experiment_or_figure_is_a_loud_error():
    with pytest.raises(CatalogueError, match="experiment 'X7' has no row in throttlelab/model/catalogue.py"):
        catalogue.experiment("X7")
    with pytest.raises(CatalogueError, match="figure 'x7_thing' is in no experiment's figures"):
        catalogue.figure_experiment("x7_thing")


def test_a_row_with_a_family_or_metrics_kind_the_package_lacks_is_refused():
    with pytest.raises(CatalogueError, match="experiment X7: family 'beyond'"):
        Experiment("X7", "a test", ours=True, family="beyond", runner="run_e2a", command="burst", metrics="burst")
    with pytest.raises(CatalogueError, match="experiment X7: metrics 'load' is not a kind of the jobs family"):
        Experiment("X7", "a test", ours=True, family="jobs", runner="run_e2a", command="burst", metrics="load")


def test_the_figures_sections_and_the_findings_side_come_from_the_catalogue():
    assert FIGURES["x1_budget"].experiment == "X1" and FIGURES["x1_budget"].category == "X1 burst budget (ours)"
    assert FIGURES["e2a_counters"].category == "E2a burst job"
    assert FIGURES["weights_shares"].category == "E4/E5/E10 requests become weights"
    for finding in FINDINGS:
        assert finding.ours == all(catalogue.is_ours(e) for e in finding.experiments), finding.id
