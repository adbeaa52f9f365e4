"""The planning-side time estimate (model/timing.py) and the repeats planned from the per-run spread
(docs/STATISTICS.md §6; docs/EXPERIMENTS.md "## Time" and "Repeats planned from the spread")."""

from __future__ import annotations

import math
import shutil
import subprocess

import pytest

from conftest import E6_LIMIT, PROJECT
from throttlelab.analysis import stats
from throttlelab.model import calibration, timing
from throttlelab.model.config import load_design
from throttlelab.model.variants import VariantSpec

#: The quick profile as it was measured end to end at 6a897ca (docs/EXPERIMENTS.md "## Time": 14 min 27 s
#: and 14 min 31 s, fresh clone, nothing else running), the run the per-run and pipeline costs come from.
MEASURED_AT = "6a897ca"
MEASURED_S = (14 * 60 + 27, 14 * 60 + 31)


def quick(config_dir=PROJECT / "config", **config):
    return load_design({"profile": "quick", **config}, config_dir)


def test_the_quick_profile_stays_within_its_budget():
    design = quick()
    assert timing.estimate_s(design) <= timing.QUICK_BUDGET_S, (
        f"the quick profile is planned at {timing.estimate_s(design):.0f} s, over its "
        f"{timing.QUICK_BUDGET_S} s: cut what no check compares (docs/EXPERIMENTS.md '## Time')"
    )
    assert timing.estimate_s(design) > timing.measuring_total_s(design) > 0


def test_the_estimate_reproduces_the_measured_quick_run(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("no git: the measured design's profile is read from its commit")
    old = subprocess.run(
        ["git", "-C", str(PROJECT), "show", f"{MEASURED_AT}:config/profiles/quick.yaml"],
        capture_output=True,
        text=True,
        check=False,
    )
    if old.returncode != 0:
        pytest.skip(f"{MEASURED_AT} is not in this checkout's history")
    config = tmp_path / "config"
    shutil.copytree(PROJECT / "config", config)
    (config / "profiles" / "quick.yaml").write_text(old.stdout)
    # that design had no calibration step: no quiet-host sampling, no pilots (its X5 stated its rates)
    planned = timing.estimate_s(quick(config, disturbance={"quiet_calibration_s": 0}))
    assert timing.calibration_s(quick(config, disturbance={"quiet_calibration_s": 0})) == 0
    assert min(MEASURED_S) * 0.97 <= planned <= max(MEASURED_S) * 1.03, planned


def test_the_calibration_step_is_planned_with_the_runs():
    """The quiet host's sampling (disturbance.quiet_calibration_s) and X5's two pilots come before the runs:
    they are part of the profile's time, on the backends that run them on this host."""
    design = quick()
    pilots = sum(timing.run_s(p) for p in calibration.pilot_specs(list(design.experiments["X5"].variants.values())))
    assert pilots > 0
    quiet_s = design.disturbance["quiet_calibration_s"]
    assert timing.calibration_s(design) == pytest.approx(quiet_s + timing.PER_RUN_S + pilots)
    without_sampling = quick(disturbance={"quiet_calibration_s": 0})
    assert timing.calibration_s(without_sampling) == pytest.approx(pilots)
    assert timing.estimate_s(design) - timing.estimate_s(without_sampling) == pytest.approx(quiet_s + timing.PER_RUN_S)
    # the vm guest runs its batch alone: neither pilots nor a host sampling before it
    assert timing.calibration_s(quick(backend="vm")) == 0


def test_a_runs_measuring_time_comes_from_its_parameters():
    burst = VariantSpec.from_dict("E6", "limit", E6_LIMIT)
    assert timing.measuring_s(burst) == pytest.approx(25 * 0.33)
    load = quick().experiments["E7"].variants["one-limit"]
    assert timing.measuring_s(load) == pytest.approx(10.2)  # 0.2 s warmup + 10 s window
    shares = quick().experiments["E5"].variants["pods"]
    assert timing.measuring_s(shares) == pytest.approx(1.5)  # 0.5 s settling + 2 x 0.5 s readings
    readout = quick().experiments["E1"].variants["partial"]
    assert timing.measuring_s(readout) == 0.0


# --------------------------------------------------------------------------
# repeats planned from the per-run spread (power >= 80%, docs/STATISTICS.md §6)

#: (experiment, the variants whose repeats it plans) -> (per-run SD on the check's log scale, the effect the check
#: must see on it, two arms?), as docs/EXPERIMENTS.md "Repeats planned from the spread" derives them
PLANS = {
    # F10: overstatement against 1 (one arm); per-run SD of the log 0.08-0.22 in twelve quick runs of 8, pooled 0.151,
    # around 1.22 (mean log 0.200; planned first at 0.18 around 1.28); 7 give 80%, the profile's 8 give 89%
    ("E6", ("limit",)): (0.151, 0.200, False),
    # F7's first check, two-half / one-limit over 10 s windows (20 clumps, p75), block by block: per-block SD of the
    # log ratio 0.31-0.61 in five quick runs of 10 blocks and one of 8, pooled 0.44, around a ratio of 1.74 (mean
    # log 0.554); 8 are the fewest for 80% (they give 86%), the profile's 9 give 91%
    ("E7", ("one-limit", "two-half")): (0.44, 0.554, False),
    # F2's decisive check, throttled / wall above 1, one arm: per-run SD of the log ratio 0.06-0.19 in seven runs of
    # 8 (five quick runs and two probes, 6 counted rounds each), pooled 0.141, around a ratio of 1.17 (mean log
    # 0.154; the threshold is the claim and the model's end is 2); 9 give 80%, the profile's 10 give 87%
    ("E2a", ("limit500m",)): (0.141, 0.154, False),
    # F17's decisive check, clumped g2 / g1 below 1.1, block by block: per-block SD of the log ratio 0.12-0.79 in eight
    # quick runs (three of 5 blocks, five of 8), pooled 0.356, around a ratio of 0.713 (mean log -0.339); the effect to
    # see is the distance to the margin, log 1.1 + 0.339 = 0.434; 8 give 84%, the profile's 9 give 89% (at the first
    # three runs' 0.744: 76% and 82%)
    ("X6", ("clumped-500m-g1", "clumped-500m-g2")): (0.356, 0.434, False),
    # F4's wall ratio, limit1-2threads / limit1 above 0.909, two arms: per-run SD of the log p50 0.11 and 0.13 in eight
    # quick runs (of 8 and 10), around a ratio of 1.18 (mean log 0.166, 0.261 above the margin's log 1/1.1);
    # 5 give 86%, the profile's 6 give 93%
    ("E2a", ("limit1", "limit1-2threads")): (0.118, 0.261, True),
    # F14's band for X3's cpus1, throttled over extra wall time above 0.33 (one arm): per-run SD of the log 0.08-0.68 in
    # eleven quick runs of 5, pooled 0.308, around 0.569 (mean log -0.564, 0.545 above log 0.33); 5 give 84%, the
    # profile's 6 give 93%
    ("X3", ("cpus1",)): (0.308, 0.545, False),
}


def test_the_power_of_the_t_test_known_answers():
    # the noncentral t: E6's first plan (sd 0.18 around 1.28) at 5 repeats 64%, 8 repeats 91%; one arm, sd 1, effect 1,
    # R 10
    assert stats.t_power(5, 0.18, math.log(1.28), two_sample=False) == pytest.approx(0.637, abs=0.005)
    assert stats.t_power(8, 0.18, math.log(1.28), two_sample=False) == pytest.approx(0.912, abs=0.005)
    assert stats.t_power(10, 1.0, 1.0, two_sample=False) == pytest.approx(0.8031, abs=0.005)
    assert stats.repeats_for_power(0.32, 0.32, two_sample=True) == 17
    assert stats.repeats_for_power(0.18, math.log(1.28), two_sample=False) == 7
    with pytest.raises(ValueError, match="sd 0"):
        stats.t_power(5, 0.0, 1.0, two_sample=True)
    with pytest.raises(ValueError, match="more than 50 runs"):
        stats.repeats_for_power(0.32, 0.01, two_sample=True, most=50)


@pytest.mark.parametrize(("experiment", "variants"), sorted(PLANS))
def test_the_quick_profile_has_the_repeats_its_power_plan_needs(experiment, variants):
    sd, effect, two = PLANS[(experiment, variants)]
    need = stats.repeats_for_power(sd, effect, two_sample=two)
    exp = quick().experiments[experiment]
    assert all(exp.repeats_of(v) >= need for v in variants), {v: exp.repeats_of(v) for v in variants}
    assert need >= 5  # every plan is at least the floor of docs/STATISTICS.md §6


def test_a_variant_runs_the_repeats_the_profile_gives_it():
    exp = quick().experiments["E2a"]
    assert exp.repeats_of("limit500m") == exp.repeats == 10 and exp.repeats_of("nolimit") == 5
    assert sum(1 for e, v, _ in quick().jobs() if (e, v) == ("E2a", "nolimit")) == 5
    # --config repeats=N is every variant's number
    assert {quick(repeats=3).experiments["E2a"].repeats_of(v) for v in exp.variants} == {3}
