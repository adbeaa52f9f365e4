"""The calibration step's arithmetic (model/calibration.py): the pilot of a calibrated experiment, the CPU per
request it measures, the rates it sets, and a quiet host's floor + 3 SD per window length."""

from __future__ import annotations

import math
import random

import pytest

from conftest import PROJECT, X5_ARM
from throttlelab.errors import SpecError
from throttlelab.model import calibration
from throttlelab.model.config import ConfigError, load_design
from throttlelab.model.variants import VariantSpec

X5 = {**X5_ARM, "duration_ms": 3000}


def _arm(name: str, use: float | None, **extra) -> VariantSpec:
    data = {**X5, **extra, **({"target_use": use} if use is not None else {})}
    return VariantSpec.from_dict("X5", name, data)


def test_a_rate_uses_its_share_of_the_limit_at_the_cost_per_request():
    # 90% of 200m at 2.6 ms per request: 0.18 CPU / 0.0026 s = 69.2 req/s
    assert calibration.rate_for(0.9, 200, 2600) == 69.2
    assert calibration.rate_for(0.3, 2000, 6000) == 100.0
    with pytest.raises(ValueError):
        calibration.rate_for(0.3, 200, 0)


def test_the_pilots_are_the_first_calibrated_arms_service_at_the_outer_uses():
    arms = [_arm("use30", 0.3), _arm("use90", 0.9)]
    pilots = calibration.pilot_specs(arms)
    assert [p.rps for p in pilots] == [calibration.rate_for(u, 200, 4000) for u in calibration.PILOT_USES]
    assert [p.rps for p in pilots] == [15.0, 45.0]
    assert all(p.target_use is None and p.clump == 1 and p.ping_rps == 4 and p.limit == "200m" for p in pilots)
    # the arms' shares do not change the pilots: editing one arm reruns only that arm
    assert calibration.pilot_specs([_arm("use30", 0.35), _arm("use90", 0.95)]) == pilots


def test_a_later_pilot_is_aimed_by_the_cost_its_predecessor_measured():
    """The stated 4 ms put the 90% pilot at 45 req/s; a first pilot that measured 2.95 ms a request (background
    included) aims it at 0.18 / 0.00295 = 61 req/s, near where the 90% arm runs, and the line is then read
    beside a point it was measured at. The rest of the pilot's service is the plan's."""
    planned = calibration.pilot_specs([_arm("use30", 0.3), _arm("use90", 0.9)])[1]
    aimed, use = calibration.aimed_pilot(planned, {"cpu_per_request_us": 2950.0, "rps": 15.0, "cores": 0.04425})
    assert use == 0.9  # what it was planned for: 45 req/s at the stated 4 ms of a 200m limit
    assert aimed.rps == calibration.rate_for(0.9, 200, 2950.0) == 61.0
    assert aimed.with_changes(rps=planned.rps) == planned
    # the first pilot's use is its own: aimed by the same cost it keeps 30%
    first_planned = calibration.pilot_specs([_arm("use30", 0.3), _arm("use90", 0.9)])[0]
    assert calibration.aimed_pilot(first_planned, {"cpu_per_request_us": 2950.0})[1] == 0.3
    # a cost per request that is no cost is refused, not turned into an infinite rate
    with pytest.raises(ValueError, match="must be positive"):
        calibration.aimed_pilot(planned, {"cpu_per_request_us": 0.0})
    with pytest.raises(SpecError, match="stated cost it was planned at"):
        calibration.aimed_pilot(planned.with_changes(request_cpu_us=None), {"cpu_per_request_us": 2950.0})
    # the line through the first pilot and the aimed one reaches 90% just beyond the aimed pilot, as the
    # background spread over more requests makes the aimed pilot run a little under its use
    first = {"rps": 15.0, "cores": 0.04425}
    line = calibration.fit_line([first, {"rps": 61.0, "cores": 0.16}])
    assert 61.0 < calibration.rate_on_line(0.9, 200, line) < 61.0 * 1.15


def test_the_line_of_cpu_against_rate_and_the_rate_it_gives():
    # 0.01 cores of background and 2.5 ms per request: 0.0475 cores at 15 req/s, 0.1225 at 45
    line = calibration.fit_line([{"rps": 15, "cores": 0.0475}, {"rps": 45, "cores": 0.1225}])
    assert line == {"background_cores": 0.01, "marginal_us": 2500.0}
    # 90% of 200m = 0.18 cores: (0.18 - 0.01) / 0.0025 = 68 req/s
    assert calibration.rate_on_line(0.9, 200, line) == 68.0
    with pytest.raises(ValueError, match="did not rise"):
        calibration.fit_line([{"rps": 15, "cores": 0.05}, {"rps": 45, "cores": 0.04}])
    with pytest.raises(ValueError, match="two pilots"):
        calibration.fit_line([{"rps": 15, "cores": 0.05}])
    with pytest.raises(ValueError, match="background alone"):
        calibration.rate_on_line(0.3, 200, {"background_cores": 0.07, "marginal_us": 2500.0})


def test_a_pilot_needs_a_calibrated_arm_a_limit_and_a_stated_cost():
    with pytest.raises(SpecError, match="target_use"):
        calibration.pilot_specs([_arm("fixed", None, rps=15)])
    with pytest.raises(SpecError, match="limit"):
        calibration.pilot_specs([_arm("use30", 0.3, limit=None)])
    with pytest.raises(SpecError, match="request_cpu_us"):
        calibration.pilot_specs([_arm("use30", 0.3, request_cpu_us=None)])


def _load_records(before_us: int, after_us: int, ok: int) -> list[dict]:
    def stats(when: str, usage: int) -> dict:
        return {"type": "stats", "when": when, "target": 0, "stats": {"cgroup": {"usage_usec": usage}}}

    server_summary = {"type": "summary", "requests": ok + 3, "num_gc": 1}  # the service's own, not the load's
    return [
        server_summary,
        stats("before", before_us),
        {"type": "req", "ep": "work"},
        stats("after", after_us),
        {"type": "summary", "window_s": 3.0, "work": {"ok": ok}, "ping": {"ok": 0}},
    ]


def test_the_cost_per_request_is_the_services_cpu_over_the_window_per_work_request():
    cost = calibration.cpu_per_request_us(_load_records(1_000_000, 1_234_000, 90))
    assert cost == {
        "cpu_per_request_us": 2600.0,
        "usage_us": 234_000.0,
        "requests": 90,
        "window_s": 3.0,
        "rps": 30.0,
        "cores": 0.078,
    }


def test_a_pilot_without_readings_or_requests_is_refused():
    with pytest.raises(ValueError, match="no /stats"):
        calibration.cpu_per_request_us(_load_records(0, 10, 5)[2:4])
    with pytest.raises(ValueError, match="no /work request"):
        calibration.cpu_per_request_us(_load_records(0, 10, 0))
    broken = _load_records(0, 10, 5)
    broken[3] = {**broken[3], "stats": None, "err": "connection refused"}
    with pytest.raises(ValueError, match="connection refused"):
        calibration.cpu_per_request_us(broken)


def test_a_calibrated_arm_takes_its_rate_and_model_cost_from_the_pilots_line():
    line = {"background_cores": 0.01, "marginal_us": 2500.0, "points": [{"rps": 15}, {"rps": 45}], "seed": 7}
    spec, record = calibration.resolve(_arm("use90", 0.9), line)
    # 68 req/s; the model's cost the average there, background included: 0.18 cores / 68 = 2647.1 us
    assert spec.rps == 68.0 and spec.request_cpu_us == 2647.1 and spec.target_use == 0.9
    assert {"rps", "request_cpu_us", "target_use"} <= set(spec.to_dict())  # the raw log's meta.spec holds them
    assert record == {
        "source": "pilot",
        "background_cores": 0.01,
        "marginal_us": 2500.0,
        "points": [{"rps": 15}, {"rps": 45}],
        "seed": 7,
        "stated_cpu_per_request_us": 4000,
        "target_use": 0.9,
        "rps": 68.0,
        "cpu_per_request_us": 2647.1,
    }
    with pytest.raises(SpecError, match="use30: the pilots set no rate"):
        calibration.resolve(_arm("use30", 0.3), {"background_cores": 0.07, "marginal_us": 2500.0})


def test_without_a_pilot_the_stated_cost_sets_the_rate_and_the_record_says_so():
    spec, record = calibration.resolve(_arm("use90", 0.9), None)
    assert spec.rps == 45.0 and spec.request_cpu_us == 4000 and record["source"] == "stated"
    fixed = _arm("fixed", None, rps=15)
    assert calibration.resolve(fixed, {"cpu_per_request_us": 1.0}) == (fixed, None)


def test_the_profiles_arms_near_the_limit_are_calibrated():
    for profile in ("ci", "quick", "paper"):
        design = load_design({"profile": profile}, PROJECT / "config")
        assert all(spec.target_use and spec.rps is None for spec in design.experiments["X5"].variants.values())


def _both_profile() -> dict:
    """The quick profile with an X5 arm that gives a rate and a target use."""
    import yaml

    profile = yaml.safe_load((PROJECT / "config" / "profiles" / "quick.yaml").read_text())
    profile["experiments"]["X5"]["variants"]["use30"]["rps"] = 15
    return profile


def _quiet(rows: list[list[int]], step_s: float = 0.1, hz: int = 100) -> dict:
    return {"step_s": step_s, "hz": hz, "ticks": rows}


def test_a_steady_quiet_host_has_its_floor_and_no_spread():
    # one tick in every 0.1 s step on CPU 0 (10 ticks of 10 per step at 100 Hz): a 10% floor, SD 0
    got = calibration.quiet_threshold(_quiet([[1, 0]] * 50), [0], 1.0)
    assert got["floor"] == pytest.approx(0.1) and got["sd"] == 0 and got["threshold"] == pytest.approx(0.1)
    assert got["window_s"] == 1.0 and got["windows"] == 41
    # over both CPUs the same ticks are half the share
    assert calibration.quiet_threshold(_quiet([[1, 0]] * 40), [0, 1], 1.0)["floor"] == pytest.approx(0.05)


def test_the_threshold_is_the_floor_plus_three_sd_of_the_share_over_the_runs_window():
    # at 1000 Hz a 0.1 s window holds 100 ticks: the meter tells 9% from zero, below floor + 3 SD here
    rows = [[20, 0] if k % 2 else [0, 0] for k in range(40)]  # 20 ticks every other step
    short = calibration.quiet_threshold(_quiet(rows, hz=1000), [0], 0.1)  # one step: 0 or 0.2
    shares = [0.2 if k % 2 else 0.0 for k in range(40)]
    mean = sum(shares) / 40
    sd = math.sqrt(sum((s - mean) ** 2 for s in shares) / 39)
    assert short["floor"] == pytest.approx(mean) and short["sd"] == pytest.approx(sd, abs=1e-5)
    assert short["threshold"] == pytest.approx(mean + calibration.QUIET_SD * sd, abs=1e-4)
    # over windows of two steps every window holds one busy step: the same floor, no spread
    assert calibration.quiet_threshold(_quiet(rows, hz=1000), [0], 0.2)["sd"] == 0


def test_a_quiet_host_of_all_zero_ticks_gives_the_meters_resolution_not_zero():
    # floor and SD are 0: the threshold is what 3^2 = 9 ticks are of the window's capacity
    zero = _quiet([[0, 0]] * 200)
    one_cpu = calibration.threshold_of(zero, [0], 2.5, ceiling=0.1)
    assert one_cpu["floor"] == 0 and one_cpu["sd"] == 0
    assert one_cpu["threshold"] == pytest.approx(9 / (100 * 2.5)) and "resolution" in one_cpu["rule"]
    # two CPUs and a longer window hold more ticks: the meter tells a smaller share
    both = calibration.threshold_of(zero, [0, 1], 10.0, ceiling=0.1)
    assert both["threshold"] == pytest.approx(9 / (100 * 10 * 2))
    # the resolution is of the run's own window, not of the shorter window the floor was taken over
    assert both["window_s"] == pytest.approx(4.0)


def test_the_resolution_is_the_count_three_poisson_sds_above_zero():
    for window_s, cpus, hz in ((2.5, 1, 100), (0.5, 2, 250), (10, 2, 100)):
        ticks = calibration.tick_resolution(window_s, cpus, hz) * hz * window_s * cpus
        assert ticks == pytest.approx(calibration.QUIET_SD * math.sqrt(ticks))
    assert calibration.tick_resolution(0.0, 1, 100) == 1.0
    assert calibration.tick_resolution(0.05, 1, 100) == 1.0  # 5 ticks cannot show 9


def test_a_window_too_short_for_the_ceiling_is_judged_at_its_resolution():
    # 0.3 s on one CPU: 30 ticks, so 30% is the least the meter tells from zero, above the 10% ceiling
    got = calibration.threshold_of(_quiet([[0]] * 50), [0], 0.3, ceiling=0.1)
    assert got["threshold"] == pytest.approx(0.3) and "resolution" in got["rule"]
    busy = calibration.threshold_of(_quiet([[10]] * 50), [0], 0.3, ceiling=0.1)  # a fully busy "quiet" host
    assert busy["threshold"] == pytest.approx(0.3) and "resolution" in busy["rule"]


def test_idle_levels_come_from_the_calibration_and_default_to_zero():
    assert calibration.idle_levels(None) == {"orchestrator": 0.0, "runtime": 0.0, "kernel": 0.0}
    quiet = {**_quiet([[0]] * 20), "own": {"orchestrator_cpu": 0.001, "runtime_cpu": 0.02, "kernel_cpu": 0.003}}
    assert calibration.idle_levels(quiet) == {"orchestrator": 0.001, "runtime": 0.02, "kernel": 0.003}
    assert calibration.idle_levels({"own": {"orchestrator_cpu": None, "runtime_cpu": None}})["runtime"] == 0.0


def test_a_window_longer_than_a_fifth_of_the_sampling_takes_a_fifth_of_it():
    got = calibration.quiet_threshold(_quiet([[1]] * 20), [0], 60.0)
    assert got["window_s"] == pytest.approx(0.4) and got["windows"] == 17
    assert calibration.QUIET_DISJOINT_WINDOWS == 5


def test_a_long_window_is_not_judged_by_the_sd_of_two_overlapping_halves():
    # 20 s of sampling with other work in random 0.1 s steps: 10 s windows slide over nearly the same steps
    # (two disjoint ones), so their spread is far below what a 10 s window varies by; a 10 s run is judged
    # by the 4 s windows' SD, the larger
    draw = random.Random(3)
    rows = [[10] if draw.random() < 0.05 else [0] for _ in range(200)]
    ten = calibration.quiet_threshold(_quiet(rows), [0], 10.0)
    four = calibration.quiet_threshold(_quiet(rows), [0], 4.0)
    same = ("floor", "sd", "calibrated", "window_s", "windows")
    assert {k: ten[k] for k in same} == {k: four[k] for k in same} and ten["window_s"] == pytest.approx(4.0)
    steps = 100  # what the 10 s window's own sliding windows would have given
    shares = calibration.window_shares(rows, [0], steps, 100, 0.1)
    mean = sum(shares) / len(shares)
    own_sd = math.sqrt(sum((x - mean) ** 2 for x in shares) / (len(shares) - 1))
    assert ten["sd"] > own_sd


def test_a_cpu_the_calibration_did_not_sample_is_refused():
    with pytest.raises(ValueError, match="no CPU"):
        calibration.quiet_threshold(_quiet([[1]] * 20), [0, 3], 1.0)


def test_the_threshold_is_capped_at_max_other_share_and_fixed_without_a_calibration():
    busy = calibration.threshold_of(_quiet([[5]] * 20), [0], 1.0, ceiling=0.1)  # a 50% "quiet" floor
    assert busy["threshold"] == 0.1 and "capped" in busy["rule"] and busy["floor"] == pytest.approx(0.5)
    quiet = calibration.threshold_of(_quiet([[0]] * 19 + [[10]], hz=1000), [0], 1.0, ceiling=0.1)
    assert quiet["threshold"] < 0.1 and "floor + 3 SD" in quiet["rule"]
    assert calibration.threshold_of(None, [0], 1.0, ceiling=0.1) == {
        "threshold": 0.1,
        "rule": "fixed: disturbance.max_other_share (no quiet-host calibration)",
    }


def test_a_bad_calibration_setting_names_its_field(tmp_path):
    with pytest.raises(ConfigError, match="quiet_calibration_s"):
        load_design({"profile": "ci", "disturbance": {"quiet_calibration_s": -1}}, PROJECT / "config")
    import yaml

    profile = _both_profile()

    path = tmp_path / "both.yaml"
    path.write_text(yaml.safe_dump(profile))
    with pytest.raises(ConfigError, match="X5"):
        load_design({"profile": str(path)}, PROJECT / "config")
