"""Operating characteristics of the verdict rule itself (shared/STATS.md §8, issue 24 item 8).

Coverage under the interval's own model can hardly fail; these simulations ask what the RULE does on
data that break it: tied runs, two-humped runs, contaminated runs, a premise that fails, and a true
effect exactly at the threshold. Each asserts how often a verdict is wrong — "reproduced" where the
claim is false, "contradicted" where it is true — against the level the rule states, through the
engine's own evaluation (fixed seeds; a few seconds in all).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from throttlelab.analysis.findings import engine
from throttlelab.analysis.findings.engine import (
    CONTRADICTED,
    NOT_TESTABLE,
    REPRODUCED,
    WEAKER,
    Check,
    Evidence,
    Finding,
)

TRIALS = 300
#: The rule's stated one-sided error, 2.5% per side at 95%, and the Monte Carlo slack of 300 trials
#: (3 binomial standard errors at 2.5%: 0.027).
ONE_SIDED = 0.025
SLACK = 3 * np.sqrt(ONE_SIDED * (1 - ONE_SIDED) / TRIALS)
EXP = "E2a"


def evidence(values: dict[tuple[str, str], np.ndarray]) -> Evidence:
    """Evidence of E2a with the given per-run values by (variant, metric)."""
    metrics, runs = [], {}
    for (variant, metric), xs in values.items():
        for rep, x in enumerate(xs):
            metrics.append({"experiment": EXP, "variant": variant, "repeat": rep, "metric": metric, "value": float(x)})
            runs[(variant, rep)] = {"experiment": EXP, "variant": variant, "repeat": rep}
    return Evidence(
        metrics=pd.DataFrame(metrics),
        runs=pd.DataFrame(list(runs.values())),
        headers=pd.DataFrame(columns=["experiment", "variant", "num_cpu"]),
        profile_experiments=frozenset({EXP}),
    )


def slower(threshold: float = 1.75) -> Check:
    """A directional latency claim: a / b > threshold (the model's), with the three zones."""
    return Check(
        label="p50 a / b",
        kind="ratio",
        experiment=EXP,
        metric="p50_wall_ms",
        variant="a",
        baseline="b",
        relation=">",
        scale="log",
        threshold=(threshold,),
        why="simulation",
        reference="none",
    )


def rates(verdicts: list[str]) -> dict[str, float]:
    got = pd.Series(verdicts).value_counts(normalize=True)
    return {v: float(got.get(v, 0.0)) for v in (REPRODUCED, WEAKER, CONTRADICTED, NOT_TESTABLE)}


def ratio_verdicts(draw, runs: int = 5, check: Check | None = None, seed: int = 0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    check = check or slower()
    out = []
    for _ in range(TRIALS):
        a, b = draw(rng, runs)
        out.append(
            engine.evaluate_check("F0", check, evidence({("a", check.metric): a, ("b", check.metric): b})).verdict
        )
    return rates(out)


def lognormal(ratio: float, sigma: float = 0.15):
    def draw(rng, runs):
        return 20.0 * ratio * np.exp(sigma * rng.standard_normal(runs)), 20.0 * np.exp(
            sigma * rng.standard_normal(runs)
        )

    return draw


def test_a_true_effect_exactly_at_the_threshold():
    # the claim "a / b > 1.75" is false at exactly 1.75: "reproduced" at most 2.5%; the direction is true,
    # so "contradicted" (the interval below 1) essentially never
    got = ratio_verdicts(lognormal(1.75))
    assert got[REPRODUCED] <= ONE_SIDED + SLACK, got
    assert got[CONTRADICTED] <= ONE_SIDED / 10, got


def test_no_effect_is_weaker_never_reproduced_and_rarely_contradicted():
    # true ratio 1: the claimed direction is false only at its boundary, so "contradicted" stays within 2.5%;
    # "reproduced" never; the middle zone is not counted as reproduced
    got = ratio_verdicts(lognormal(1.0))
    assert got[REPRODUCED] == 0.0, got
    assert got[CONTRADICTED] <= ONE_SIDED + SLACK, got
    # a true effect half-way on the log scale: weaker than modelled, and never contradicted
    got = ratio_verdicts(lognormal(np.sqrt(1.75)), seed=1)
    assert got[WEAKER] > 0.3 and got[CONTRADICTED] == 0.0 and got[REPRODUCED] <= ONE_SIDED + SLACK, got


@pytest.mark.parametrize("truth", [1.0, 1.75])
def test_two_humped_runs(truth):
    # each run lands in one of two humps (a run's phase decides; x1.6 apart), independently per arm
    def draw(rng, runs):
        hump = lambda: np.where(rng.random(runs) < 0.5, 1.0, 1.6) * np.exp(0.03 * rng.standard_normal(runs))  # noqa: E731
        return 20.0 * truth * hump(), 20.0 * hump()

    got = ratio_verdicts(draw, seed=2)
    if truth == 1.0:
        assert got[REPRODUCED] == 0.0 and got[CONTRADICTED] <= ONE_SIDED + SLACK, got
    else:
        assert got[REPRODUCED] <= ONE_SIDED + SLACK and got[CONTRADICTED] == 0.0, got


def test_contaminated_runs():
    # one run in five of the faster arm disturbed (x3, a neighbour took the CPU): at a true ratio of 1.75 the
    # claim holds; the contamination may cost power but must not make it "contradicted", and at the threshold
    # it must not make a false "reproduced" beyond the level
    def draw(rng, runs):
        a, b = lognormal(1.75)(rng, runs)
        b[0] *= 3.0
        return a, b

    got = ratio_verdicts(draw, seed=3)
    assert got[CONTRADICTED] <= ONE_SIDED + SLACK and got[REPRODUCED] <= ONE_SIDED + SLACK, got


def test_tied_runs_of_an_exact_counter():
    # each run counts v = 2 periods per round, or 3 with probability 0.6: the true median run is 3, outside
    # the claimed band [1.5, 2.5]; the tie rule's [v, v] at R = 6 wrongly reproduces it at most 0.4^6
    check = Check(
        label="periods",
        kind="level",
        experiment=EXP,
        metric="periods_per_round",
        variant="a",
        baseline=None,
        relation="within",
        scale="linear",
        threshold=(1.5, 2.5),
        why="simulation",
        reference="none",
    )
    rng = np.random.default_rng(4)
    out = []
    for _ in range(TRIALS):
        x = np.where(rng.random(6) < 0.6, 3.0, 2.0)
        out.append(engine.evaluate_check("F0", check, evidence({("a", "periods_per_round"): x})).verdict)
    got = rates(out)
    assert got[REPRODUCED] <= ONE_SIDED + SLACK, got
    # every run at 2: decided, and right
    assert engine.evaluate_check("F0", check, evidence({("a", "periods_per_round"): np.full(6, 2.0)})).verdict == (
        REPRODUCED
    )


def test_a_failed_premise_never_contradicts():
    # the arm was meant to run at 90% of its limit and ran at 59%: at the load reached, the model predicts a
    # value below the 90% design's threshold, which the decisive check then "contradicts" on its own; the
    # finding must never read contradicted, and the premise's failure is what it says
    premise = Check(
        label="use",
        kind="level",
        experiment=EXP,
        metric="avg_cores",
        variant="a",
        baseline=None,
        relation="within",
        scale="linear",
        threshold=(0.16, 0.2),
        why="simulation",
        reference="none",
        decisive=False,
        premise=True,
    )
    claim = Check(
        label="share",
        kind="level",
        experiment=EXP,
        metric="mean_wall_ms",
        variant="a",
        baseline=None,
        relation=">",
        scale="log",
        threshold=(0.15,),
        why="simulation",
        reference="none",
    )
    finding = Finding(id="F0", claim="simulation", checks=(premise, claim))
    rng = np.random.default_rng(5)
    alone, verdicts = [], []
    for _ in range(TRIALS):
        ev = evidence(
            {
                ("a", "avg_cores"): 0.118 * np.exp(0.03 * rng.standard_normal(5)),
                ("a", "mean_wall_ms"): 0.09 * np.exp(0.1 * rng.standard_normal(5)),
            }
        )
        results = engine.evaluate_checks([finding], ev)
        alone.append(engine.evaluate_check("F0", claim, ev).verdict)
        verdicts.append(engine.finding_verdict(results)[0])
    assert rates(alone)[CONTRADICTED] > 0.9  # what the old rule published
    got = rates(verdicts)
    assert got[CONTRADICTED] == 0.0 and got[NOT_TESTABLE] > 0.9, got


def test_contradicted_is_controlled_per_finding():
    # three decisive checks, every claim exactly at its direction's boundary (true ratio 1): without the
    # Bonferroni level a union of three would read "contradicted" up to 3 x 2.5%; with it, within 2.5%
    checks = tuple(
        Check(
            label=f"p50 a{i} / b",
            kind="ratio",
            experiment=EXP,
            metric="p50_wall_ms",
            variant=f"a{i}",
            baseline="b",
            relation=">",
            scale="log",
            threshold=(1.75,),
            why="simulation",
            reference="none",
        )
        for i in range(3)
    )
    finding = Finding(id="F0", claim="simulation", checks=checks)
    rng = np.random.default_rng(6)
    verdicts = []
    for _ in range(TRIALS):
        values = {(f"a{i}", "p50_wall_ms"): 20.0 * np.exp(0.15 * rng.standard_normal(5)) for i in range(3)}
        values[("b", "p50_wall_ms")] = 20.0 * np.exp(0.15 * rng.standard_normal(5))
        verdicts.append(engine.finding_verdict(engine.evaluate_checks([finding], evidence(values)))[0])
    assert rates(verdicts)[CONTRADICTED] <= ONE_SIDED + SLACK
