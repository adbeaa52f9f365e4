"""The figures: one registry, reproducible SVG, the lab's figures from model/reference.py, variant order.

Drawn from the hand-made tables in tests/fixtures/tables (a `ci`-shaped run on 2 CPUs).
"""

from __future__ import annotations

import html
import subprocess
import sys

import pandas as pd
import pytest

from conftest import PROJECT
from throttlelab.analysis import tidy
from throttlelab.figures import draw, registry
from throttlelab.figures.style import by_limit
from throttlelab.figures.svg import figure_to_svg
from throttlelab.model.reference import lab_values
from throttlelab.model.variants import VariantSpec

TABLES = PROJECT / "tests" / "fixtures" / "tables"


def _tables(*names: str) -> dict[str, pd.DataFrame]:
    return {name: draw.read_figure_table(name, TABLES / f"{name}.csv") for name in names}


def test_figures_are_reproducible_svg():
    tables = _tables("metrics", "runs")
    first = figure_to_svg(draw.draw("e3_gomaxprocs", tables), "e3_gomaxprocs")
    again = figure_to_svg(draw.draw("e3_gomaxprocs", tables), "e3_gomaxprocs")
    assert first == again
    assert first.lstrip().startswith("<svg") and 'id="e3_gomaxprocs-' in first


def test_lab_reference_values_follow_the_spec():
    e2a = lab_values("E2a", "p50_wall_ms")
    assert e2a == {"nolimit": 34.3, "limit2": 34.6, "limit1": 84.4, "limit500m": 260.4, "limit1-2threads": 132.3}
    assert lab_values("E3", "gomaxprocs")["go125mod-2500m"] == 3


def test_variants_are_ordered_from_no_limit_down():
    given = {
        "limit1": {"limit": 1},
        "nolimit": {"limit": None},
        "limit500m": {"limit": "500m"},
        "limit2": {"limit": 2},
        "limit1-2threads": {"limit": 1, "threads": 2},
    }
    specs = {name: VariantSpec.from_dict("E2a", name, spec) for name, spec in given.items()}
    assert by_limit(specs) == ["nolimit", "limit2", "limit1", "limit1-2threads", "limit500m"]


def test_every_registered_figure_names_functions_and_tables_that_exist():
    table_outputs = {
        "runs",
        "rounds",
        "headers",
        "readback",
        "summaries",
        "requests",
        "share_samples",
        "share_expectations",
        "podstats",
        "target_stats",
        "environment",
        "metrics",
        "estimates",
        "predictions",
    }
    for entry in registry.FIGURES.values():
        assert callable(registry.resolve(entry.draw)) and callable(registry.resolve(entry.caption)), entry.name
        assert set(entry.tables) <= table_outputs, entry.name
        assert set(entry.reads) == set(entry.tables) | set(registry.CAPTION_TABLES), entry.name
        assert entry.category and entry.title


def test_the_registry_is_light_enough_for_the_rules_to_import():
    # rules/report.smk imports it while Snakemake parses the workflow: no plotting library with it
    code = (
        "import sys; import throttlelab.figures.registry; "
        "print(sorted(m for m in ('matplotlib', 'seaborn', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "experiments, names",
    [
        (["E2a"], ["e2a_completion", "e2a_counters"]),
        (["E3", "S1"], ["e3_gomaxprocs", "s1_throttling"]),
        (["E10"], []),  # E10's shares are drawn beside E5's, in E5's figure
        (["E1", "E4"], []),
    ],
)
def test_a_profile_gets_the_figures_of_its_experiments(experiments, names):
    assert [entry.name for entry in registry.figures_for(experiments)] == names


def test_the_command_draws_one_figure(tmp_path):
    out = tmp_path / "e3.svg"
    code = draw.main(
        [
            "--figure",
            "e3_gomaxprocs",
            "--table",
            f"metrics={TABLES / 'metrics.csv'}",
            "--table",
            f"runs={TABLES / 'runs.csv'}",
            "--out",
            str(out),
        ]
    )
    assert code == 0 and out.read_text().startswith("<svg")
    assert "<title>E3: GOMAXPROCS by limit and module line</title>" in out.read_text()


FIXTURE_FIGURES = ["e2a_completion", "e2a_counters", "e3_gomaxprocs", "s1_throttling"]  # E2a, E3, S1


def _table_args(*names: str) -> list[str]:
    return [arg for name in names for arg in ("--table", f"{name}={TABLES / f'{name}.csv'}")]


def test_the_command_draws_several_figures_into_a_folder_as_one_each_would(tmp_path):
    """The draw_figures rule's call: every named figure in one process, each as the single-figure form draws it."""
    out = tmp_path / "report" / "figures"
    args = [arg for name in FIXTURE_FIGURES for arg in ("--figure", name)]
    assert draw.main([*args, *_table_args("rounds", "metrics", "estimates", "runs"), "--out-dir", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        file for name in FIXTURE_FIGURES for file in (f"{name}.svg", f"{name}.caption.html")
    )
    assert [p.name for p in out.parent.iterdir()] == ["figures"]  # no staging folder left beside it
    estimates, runs = pd.read_csv(TABLES / "estimates.csv"), tidy.read_table(TABLES / "runs.csv", "runs")
    for name in FIXTURE_FIGURES:
        alone = tmp_path / f"{name}.svg"
        assert draw.main(["--figure", name, *_table_args(*registry.FIGURES[name].tables), "--out", str(alone)]) == 0
        assert (out / f"{name}.svg").read_text() == alone.read_text(), name
        # the caption our page prints under the figure, as the paragraph Snakemake's report includes
        text = draw.caption(name, estimates, runs)
        assert (out / f"{name}.caption.html").read_text() == f"<p>{html.escape(text, quote=False)}</p>\n", name


def test_a_caption_is_one_escaped_paragraph():
    assert draw.caption_html("(a) p < 0.05 & R = 3") == "<p>(a) p &lt; 0.05 &amp; R = 3</p>\n"


def test_an_unknown_figure_is_a_one_line_error_naming_the_option(tmp_path, capsys):
    out = tmp_path / "figures"
    with pytest.raises(SystemExit) as exit:
        draw.main(
            [
                "--figure",
                "e3_gomaxprocs",
                "--figure",
                "e9_nothing",
                *_table_args("metrics", "runs"),
                "--out-dir",
                str(out),
            ]
        )
    assert exit.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("throttlelab figure: error: argument --figure: invalid choice: 'e9_nothing'"), error
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_missing_table_is_one_line_naming_the_table_option_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "figures"
    figures = ["--figure", "e3_gomaxprocs", "--figure", "e2a_completion"]
    assert draw.main([*figures, *_table_args("metrics", "runs"), "--out-dir", str(out)]) == 1
    # into a folder a figure's caption reads its tables too: E3's draws from metrics and runs, its caption estimates
    assert capsys.readouterr().err == (
        "throttlelab figure: e3_gomaxprocs needs --table estimates=PATH (tables given: metrics, runs)\n"
    )
    gone = ["--table", f"estimates={tmp_path / 'nothing.csv'}"]
    assert draw.main([*figures, *_table_args("rounds", "metrics", "runs"), *gone, "--out-dir", str(out)]) == 1
    assert (
        capsys.readouterr().err == f"throttlelab figure: no such file: --table estimates={tmp_path / 'nothing.csv'}\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_command_writes_several_figures_with_out_dir_only(tmp_path, capsys):
    figures = ["--figure", "e3_gomaxprocs", "--figure", "s1_throttling"]
    with pytest.raises(SystemExit) as exit:
        draw.main([*figures, *_table_args("metrics", "estimates", "runs"), "--out", str(tmp_path / "x.svg")])
    assert exit.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith("--out writes one figure, 2 were given: write them with --out-dir DIR")
    )


def test_service_figures_show_what_the_windows_independent_clumps_support():
    """The figure's statistic is the findings': chosen by clumps per window, not by requests per run."""
    from throttlelab.figures.services_figures import e2b_latency_caption, latency_metric

    def specs(**window) -> dict[str, VariantSpec]:
        return {v: VariantSpec.from_dict("E2b", v, {"limit": "1", **window}) for v in ("a", "b")}

    # 2,000 clumps of 1 per run support a p99 (368)
    assert latency_metric(specs(rps=200, clump=1, duration_ms=10000)) == ("work_p99_ms", "p99")
    # 200 clumps of 10: 2,000 requests, but a p90 only
    assert latency_metric(specs(rps=200, clump=10, duration_ms=10000)) == ("work_p90_ms", "p90")
    # 5 clumps of 10: the 50 requests would support a p90 if they were independent; the window shows its maximum
    assert latency_metric(specs(rps=20, clump=10, duration_ms=2500)) == ("work_max_ms", "max over 5 clumps")
    # the variant with the fewest clumps decides for both
    mixed = {
        **specs(rps=200, clump=1, duration_ms=10000),
        "c": VariantSpec.from_dict("E2b", "c", {"rps": 20, "clump": 10, "duration_ms": 10000}),
    }
    assert latency_metric(mixed) == ("work_p75_ms", "p75")  # c: 20 clumps
    # a closed loop fixes no count of clumps: alone it is shown at p50, beside open loops it does not choose
    closed = {"w": VariantSpec.from_dict("E2b", "w", {"workers": 4})}
    assert latency_metric(closed) == ("work_p50_ms", "p50")
    assert latency_metric({**closed, **specs(rps=20, clump=10, duration_ms=2500)}) == (
        "work_max_ms",
        "max over 5 clumps",
    )
    runs = pd.DataFrame(
        [
            {"experiment": "E2b", "variant": v, "repeat": 0, **spec.columns()}
            for v, spec in specs(rps=20, clump=10, duration_ms=2500).items()
        ]
    )
    estimates = pd.DataFrame(
        columns=[
            "experiment",
            "variant",
            "metric",
            "point",
            "lo",
            "hi",
            "n",
            "level",
            "method",
            "flag",
            "unit",
            "scale",
        ]
    )
    caption = e2b_latency_caption(estimates, runs)
    assert "one run's max over 5 clumps" in caption and "too few independent clumps for a per-run p99" in caption


def _metric_row(experiment: str, variant: str, rep: int, metric: str, value: float) -> dict:
    """metrics.csv's row of one run's metric: each repeat 1 % above the one before."""
    return {
        "backend": "local",
        "experiment": experiment,
        "variant": variant,
        "repeat": rep,
        "metric": metric,
        "value": value * (1 + 0.01 * rep),
    }


def _estimate_row(experiment: str, variant: str, metric: str, value: float, interval: tuple[float, float]) -> dict:
    """estimates.csv's row of a metric over 3 runs: the value, its interval as factors of it."""
    return {
        "backend": "local",
        "experiment": experiment,
        "variant": variant,
        "metric": metric,
        "unit": "",
        "point": value,
        "lo": value * interval[0],
        "hi": value * interval[1],
        "n": 3,
        "level": 0.95,
        "scale": "log",
        "method": "Student t",
        "flag": "low n",
    }


def _beyond_tables(experiment: str, arms: dict[str, dict]) -> dict[str, pd.DataFrame]:
    """Tidy tables of X1-X3 made from the model (3 runs x 4 rounds per arm), as parse_runs and compute_stats write them."""
    import numpy as np

    from throttlelab.analysis.findings import predictions

    base = {
        "build": "go124mod",
        "threads": 2,
        "work_ms": 20,
        "interval_ms": 433,
        "rounds": 4,
        "request": "100m",
        "limit": "250m",
    }
    runs, rounds, metrics, estimates = [], [], [], []
    for variant, params in arms.items():
        spec = VariantSpec.from_dict(experiment, variant, {**base, **params})
        arm = predictions.burst_arm(spec, predictions.cpuset_size(spec.cpus) or 2, spec.period_ms or 100.0)
        wall, throttled = arm.median_wall_ms() + 5, float(np.mean(arm.burst().throttled_periods))
        for rep in range(3):
            runs.append(
                {"backend": "local", "experiment": experiment, "variant": variant, "repeat": rep, **spec.columns()}
            )
            for k in range(4):
                rounds.append(
                    {
                        "backend": "local",
                        "experiment": experiment,
                        "variant": variant,
                        "repeat": rep,
                        "round": k,
                        "wall_ms": wall * (1 + 0.02 * k),
                        "d_throttled_usec": arm.throttled_ms() * 1000,
                    }
                )
            for metric, value in (("p50_wall_ms", wall), ("throttled_per_round", throttled)):
                metrics.append(_metric_row(experiment, variant, rep, metric, value))
        for metric, value in (("p50_wall_ms", wall), ("throttled_per_round", throttled)):
            estimates.append(_estimate_row(experiment, variant, metric, value, (0.95, 1.05)))
    tables = {
        "runs": pd.DataFrame(runs),
        "rounds": pd.DataFrame(rounds),
        "metrics": pd.DataFrame(metrics),
        "estimates": pd.DataFrame(estimates),
    }
    return {**tables, "predictions": _predictions(tables["runs"], tables["metrics"])}


def _predictions(runs: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """predictions.csv as the findings stage writes it, on a node of the variant's cpuset (else 2 CPUs)."""
    from throttlelab.analysis import tidy
    from throttlelab.analysis.findings import predictions
    from throttlelab.analysis.findings.engine import Evidence
    from throttlelab.analysis.findings.prediction_table import prediction_table

    headers = []
    for row in runs.drop_duplicates(["experiment", "variant"]).to_dict("records"):
        spec = tidy.run_spec(row)
        cpus = predictions.cpuset_size(spec.cpus) or predictions.cpuset_size(spec.node_cpus) or 2
        headers.append(
            {
                "experiment": spec.experiment,
                "variant": spec.name,
                "num_cpu": cpus,
                "cg_period_us": (spec.period_ms or 100.0) * 1000,
            }
        )
    evidence = Evidence(
        metrics=metrics,
        runs=runs,
        headers=pd.DataFrame(headers),
        profile_experiments=frozenset(runs["experiment"]),
    )
    return prediction_table(evidence)


@pytest.mark.parametrize(
    "name, experiment, arms",
    [
        (
            "x1_budget",
            "X1",
            {"nolimit": {"limit": None, "burst_ms": 0}, "budget0": {"burst_ms": 0}, "budget-full": {"burst_ms": 25}},
        ),
        ("x2_period", "X2", {"period100": {"period_ms": 100}, "period20": {"period_ms": 20}}),
        (
            "x3_queues",
            "X3",
            {"cpus1": {"threads": 8, "work_ms": 5, "cpus": "0"}, "cpus2": {"threads": 8, "work_ms": 5, "cpus": "0-1"}},
        ),
        (
            "x4_overlap",
            "X4",
            {
                "synchronized": {"limit": "500m", "pods": 2, "stagger": False},
                "staggered": {"limit": "500m", "pods": 2, "stagger": True},
            },
        ),
    ],
)
def test_the_figures_beyond_the_lab_draw_from_their_tables(name, experiment, arms):
    tables = _beyond_tables(experiment, arms)
    svg = figure_to_svg(draw.draw(name, tables), name)
    assert svg.lstrip().startswith("<svg")
    caption = registry.resolve(registry.FIGURES[name].caption)(tables["estimates"], tables["runs"])
    assert caption.startswith("Ours (docs/EXPERIMENTS.md)")
    assert [e.name for e in registry.figures_for([experiment])] == [name]


def _service_tables(experiment: str, arms: dict[str, dict], values: dict[str, float]) -> dict[str, pd.DataFrame]:
    """Tidy tables of X5/X6 (3 runs per arm): the metrics their figures read, one value per arm."""
    base = {
        "build": "go124mod",
        "request": "500m",
        "limit": "200m",
        "work_us": 2000,
        "rps": 20,
        "clump": 1,
        "warmup_ms": 400,
        "duration_ms": 3000,
        "node_cpus": "0",
        "load_cpus": "1",
    }
    runs, metrics, estimates = [], [], []
    for variant, params in arms.items():
        spec = VariantSpec.from_dict(experiment, variant, {**base, **params})
        for rep in range(3):
            runs.append(
                {"backend": "local", "experiment": experiment, "variant": variant, "repeat": rep, **spec.columns()}
            )
            for metric, value in {**values, "work_requests": 60}.items():
                metrics.append(_metric_row(experiment, variant, rep, metric, value))
        for metric, value in values.items():
            estimates.append(_estimate_row(experiment, variant, metric, value, (0.9, 1.1)))
    tables = {"runs": pd.DataFrame(runs), "metrics": pd.DataFrame(metrics), "estimates": pd.DataFrame(estimates)}
    return {**tables, "predictions": _predictions(tables["runs"], tables["metrics"])}


@pytest.mark.parametrize(
    "name, experiment, arms, shown",
    [
        (
            # 45 and 135 steady arrivals (clump 1) in 3 s: the fewer support a p90 (36)
            "x5_near_limit",
            "X5",
            {"use30": {"rps": 15, "request_cpu_us": 4000}, "use90": {"rps": 45, "request_cpu_us": 4000}},
            "p90",
        ),
        (
            # 60 requests in 6 clumps of 10: a p50, whatever the requests would allow
            "x6_threads",
            "X6",
            {
                "clumped-500m-g2": {"limit": "500m", "clump": 10},
                "clumped-500m-g1": {"limit": "500m", "clump": 10, "gomaxprocs": 1},
                "closed-500m-g2": {"limit": "500m", "workers": 16},
            },
            "p50",
        ),
    ],
)
def test_the_service_figures_beyond_the_lab_draw_from_their_tables(name, experiment, arms, shown):
    values = {"throttled_ratio": 0.1, f"work_{shown}_ms": 20.0, "throughput_rps": 80.0}
    tables = _service_tables(experiment, arms, values)
    svg = figure_to_svg(draw.draw(name, tables), name)
    assert svg.lstrip().startswith("<svg") and f"/work {shown}" in svg
    caption = registry.resolve(registry.FIGURES[name].caption)(tables["estimates"], tables["runs"])
    assert caption.startswith("Ours (docs/EXPERIMENTS.md)")
