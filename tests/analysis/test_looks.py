"""Two looks at an experiment (analysis/looks.py, docs/STATISTICS.md §6): the levels they spend, the decision
the first look writes (the variants that go on), and the level and look each check is then judged at."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from test_findings import Lab, full_lab, x6

from throttlelab.analysis import findings, looks, stats
from throttlelab.errors import InputError
from throttlelab.model import look_file


@pytest.mark.parametrize("fraction", [0.5, 5 / 9, 0.75])
def test_two_looks_spend_the_one_sided_error_of_one_together(fraction):
    """Simulated under no effect: statistics of a running sum of independent increments, as the looks see a mean
    of more runs. Crossing either look's boundary must happen at the one-sided 2.5% of a single look (within the
    exact binomial band of 200,000 trials), the first look spending less than the second."""
    first, second = stats.look_levels(fraction, 0.95)
    a1, a2 = (1 - first) / 2, (1 - second) / 2
    assert 0 < a1 < a2 < 0.025
    rng = np.random.default_rng(20261206)
    trials = 200_000
    z1 = rng.standard_normal(trials)
    z2 = np.sqrt(fraction) * z1 + np.sqrt(1 - fraction) * rng.standard_normal(trials)
    crossed = int(np.sum((z1 > stats.sps.norm.isf(a1)) | (z2 > stats.sps.norm.isf(a2))))
    lo, hi = stats.sps.binom.ppf([0.0005, 0.9995], trials, 0.025)
    assert lo <= crossed <= hi
    # the same boundaries at a level one look would spend (both at 2.5%) must fail that band: the test can fail
    naive = int(np.sum((z1 > stats.sps.norm.isf(0.025)) | (z2 > stats.sps.norm.isf(0.025))))
    assert naive > hi


def test_the_first_look_at_half_the_runs_spends_the_documented_levels():
    first, second = stats.look_levels(0.5, 0.95)
    assert ((1 - first) / 2, (1 - second) / 2) == pytest.approx((0.00279, 0.02389), abs=0.00001)
    with pytest.raises(ValueError, match="fraction"):
        stats.look_levels(1.0, 0.95)


def _checks(rows: list[tuple[str, str, str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame.from_records(rows, columns=["id", "check", "experiment", "role", "verdict"])


def test_an_experiment_goes_on_while_a_decisive_check_or_premise_of_it_is_open():
    checks = _checks(
        [
            ("F7", "work p75 two-half / one-limit", "E7", "decisive", findings.INCONCLUSIVE),
            ("F7", "work quantile two-limit / one-double", "E7", "decisive", findings.NOT_TESTABLE),
            ("F9", "busy_cores busy-lim2x / busy-lim", "E8", "supporting", findings.INCONCLUSIVE),
            ("F2", "two_queue_share limit500m", "E2a", "premise", findings.INCONCLUSIVE),
        ]
    )
    assert looks.open_checks(checks, "E7") == ["F7 work p75 two-half / one-limit"]
    assert looks.open_checks(checks, "E8") == []  # a supporting check decides nothing
    assert looks.open_checks(checks, "E2a") == ["F2 two_queue_share limit500m"]
    decided = checks.assign(verdict=[findings.REPRODUCED, findings.NOT_TESTABLE, "", findings.CONTRADICTED])
    assert looks.open_checks(decided, "E7") == [] and looks.open_checks(decided, "E2a") == []


def _look(tmp_path, experiment: str, variants: list[str], fraction: float = 5 / 9):
    levels = list(stats.look_levels(fraction, 0.95))
    path = tmp_path / f"{experiment}.json"
    look = {"experiment": experiment, "go_on": bool(variants), "variants": variants, "levels": levels, "open": []}
    look_file.write(look, path)
    return path, levels


def test_each_experiment_is_judged_with_both_its_levels_and_the_variants_that_went_on(tmp_path):
    stopped, levels_x6 = _look(tmp_path, "X6", [])
    went_on, levels_e7 = _look(tmp_path, "E7", ["one-limit", "two-half"])
    judged = looks.judged_looks([stopped, went_on])
    assert judged == {
        "X6": findings.Look(tuple(levels_x6)),
        "E7": findings.Look(tuple(levels_e7), frozenset({"one-limit", "two-half"})),
    }
    assert look_file.going_on(stopped) == [] and look_file.going_on(went_on) == ["one-limit", "two-half"]


def test_a_look_file_that_is_not_one_is_named_with_the_fix(tmp_path):
    bad = tmp_path / "E7.json"
    bad.write_text(json.dumps({"experiment": "E7", "go_on": "yes", "variants": [], "levels": [0.99, 0.95]}))
    with pytest.raises(InputError, match="E7.json: not a look file .*delete it to look again"):
        look_file.going_on(bad)
    bad.write_text(json.dumps({"experiment": "E7", "go_on": True, "variants": [], "levels": [0.99, 0.95]}))
    with pytest.raises(InputError, match="go_on is true with 0 variants going on"):
        look_file.read(bad)
    bad.write_text(json.dumps({"experiment": "E7", "go_on": False, "levels": [0.99, 0.95]}))
    with pytest.raises(InputError, match="not a look file .*'variants'"):
        look_file.read(bad)
    bad.write_text("{")
    with pytest.raises(InputError, match="not a look file"):
        looks.judged_looks([bad])


def test_the_checks_of_an_experiment_stopped_at_its_first_look_are_judged_at_its_level():
    lab = x6(Lab())
    once = lab.evidence()
    first, _ = stats.look_levels(5 / 9, 0.95)
    looked = replace(once, looks={"X6": findings.Look(stats.look_levels(5 / 9, 0.95))})
    _, at_once = findings.evaluate(once)
    rows, checks = findings.evaluate(looked)
    mine = checks[checks["experiment"] == "X6"]
    judged = mine[mine["level"].notna()]
    assert not judged.empty
    # the level each check is judged at, Bonferroni included, is the look's, not the confidence level
    assert set(judged["level"]) <= {first, 1 - (1 - first) / 2}
    assert set(mine["look"]) == {"1 of 2"}
    assert set(checks.loc[checks["experiment"] != "X6", "look"]) == {""}
    assert rows.set_index("id").loc["F17", "look"] == "1 of 2"
    # a stricter level widens every interval it draws
    before = at_once[at_once["experiment"] == "X6"].set_index("check")
    after = mine.set_index("check")
    shared = [c for c in after.index if np.isfinite(after.loc[c, "lo"]) and np.isfinite(before.loc[c, "lo"])]
    assert shared and all(
        after.loc[c, "hi"] - after.loc[c, "lo"] > before.loc[c, "hi"] - before.loc[c, "lo"] for c in shared
    )


def test_the_look_command_writes_the_first_looks_decision_from_raw_logs(tmp_path, capsys):
    from test_tidy import FIXTURES

    from throttlelab.analysis import commands

    raw = [str(p) for p in sorted((FIXTURES / "E2a").glob("*/rep0.jsonl"))]
    out = tmp_path / "looks/E2a.json"
    args = ["look", "--experiment", "E2a", "--raw", *raw, "--fraction", "0.5", "--confidence", "0.95"]
    assert commands.main([*args, "--out", str(out)]) == 0
    look = look_file.read(out)
    # one run per arm decides nothing at the first look's level: the experiment goes on, naming what is open
    assert look["go_on"] is True and "F1 p50_wall_ms limit1 / nolimit" in look["open"]
    assert (
        {"limit1", "nolimit"}
        <= set(look["variants"])
        <= {"nolimit", "limit2", "limit1", "limit500m", "limit1-2threads"}
    )
    assert look["levels"] == pytest.approx(list(stats.look_levels(0.5, 0.95)))
    assert (
        f"E2a, look 1 of 2 at one-sided 0.0028 on 2 runs: {', '.join(look['variants'])} go on"
        in capsys.readouterr().err
    )
    other = [*raw, str(next((FIXTURES / "E1").glob("*/rep0.jsonl")))]
    args = ["look", "--experiment", "E2a", "--raw", *other, "--fraction", "0.5", "--confidence", "0.95"]
    assert commands.main([*args, "--out", str(tmp_path / "other.json")]) == 1
    assert "raw logs of E1 given" in capsys.readouterr().err
    assert not (tmp_path / "other.json").exists()


def test_the_second_stage_measures_the_variants_an_open_check_compares_and_each_check_is_judged_at_its_look():
    """X6 with GOMAXPROCS 1 barely slower: the clumped arms' latency check stays open at the first look, the
    closed-loop arms' throughput checks are decided. Only the clumped arms go on; the closed-loop checks keep
    the first look's level and runs, the clumped ones take the second look's."""
    levels = stats.look_levels(5 / 9, 0.95)
    evidence = x6(Lab(), slower=1.05).evidence()
    _, at_first = findings.evaluate(replace(evidence, level=levels[0]))
    mine = at_first[at_first["experiment"] == "X6"]
    assert set(mine.loc[mine["check"].str.startswith("throughput"), "verdict"]) == {findings.REPRODUCED}
    assert looks.open_checks(at_first, "X6")
    going_on = looks.going_on(at_first, "X6", evidence.variants("X6"))
    assert going_on == ["clumped-500m-g1", "clumped-500m-g2"]
    _, checks = findings.evaluate(replace(evidence, looks={"X6": findings.Look(levels, frozenset(going_on))}))
    judged = checks[(checks["experiment"] == "X6") & checks["level"].notna()].set_index("check")
    closed = judged.index.str.startswith("throughput")
    assert set(judged.loc[closed, "look"]) == {"1 of 2"} and set(judged.loc[~closed, "look"]) == {"2 of 2"}
    assert set(judged.loc[closed, "level"]) <= {levels[0], 1 - (1 - levels[0]) / 2}
    assert set(judged.loc[~closed, "level"]) <= {levels[1], 1 - (1 - levels[1]) / 2}
    # a decided check stays decided, the same way, on the same runs at its own look
    first = mine.set_index("check")
    assert (judged.loc[closed, "verdict"] == first.loc[judged.index[closed], "verdict"]).all()


def test_an_open_check_that_names_no_variant_sends_every_variant_on():
    evidence = full_lab().evidence()
    _, checks = findings.evaluate(evidence)
    catalogue = [check for finding in findings.FINDINGS for check in finding.checks]
    agreement = next(i for i, check in enumerate(catalogue) if check.kind == "agreement")
    experiment = catalogue[agreement].experiment
    decided = checks.assign(role="decisive", verdict=findings.REPRODUCED)
    assert looks.going_on(decided, experiment, evidence.variants(experiment)) == []
    decided.loc[agreement, "verdict"] = findings.INCONCLUSIVE
    assert looks.going_on(decided, experiment, evidence.variants(experiment)) == sorted(evidence.variants(experiment))
    with pytest.raises(ValueError, match="check rows for the catalogue's"):
        looks.going_on(decided.iloc[1:], experiment, evidence.variants(experiment))
