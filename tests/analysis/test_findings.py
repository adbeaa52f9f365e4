"""Findings F1-F5: verdict logic, Holm across the findings, "not testable here"
reasons derived from the data, and the analysis CLI end to end on the fixtures."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from conftest import FIXTURE_ROOT
from throttlelab.analysis import commands as analysis, findings, stats, tidy
from throttlelab.analysis.findings import CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE, REPRODUCED
from throttlelab.model.quantities import go_default_gomaxprocs, parse_cpu
from throttlelab.model.variants import VariantSpec

FIXTURES = FIXTURE_ROOT / "raw_logs"


class Lab:
    """Per-run metrics, runs and headers of a made-up lab, built variant by variant."""

    def __init__(self, num_cpu: int = 2):
        self.num_cpu = num_cpu
        self.metric_rows: list[tuple] = []
        self.run_rows: list[dict] = []
        self.header_rows: list[dict] = []

    def add(self, experiment: str, variant: str, spec: dict, values: dict[str, list[float]]) -> "Lab":
        repeats = len(next(iter(values.values())))
        for rep in range(repeats):
            self.run_rows.append({"experiment": experiment, "variant": variant, "repeat": rep,
                                  **VariantSpec.from_dict(experiment, variant, spec).columns()})
            self.header_rows.append({"experiment": experiment, "variant": variant, "repeat": rep,
                                     "num_cpu": self.num_cpu})
            for metric, series in values.items():
                self.metric_rows.append(("local", experiment, variant, rep, metric, series[rep], ""))
        return self

    def evidence(self, experiments=("E1", "E2a", "E3", "S1"), level: float = 0.95) -> findings.Evidence:
        return findings.Evidence(
            metrics=pd.DataFrame.from_records(
                self.metric_rows, columns=["backend", "experiment", "variant", "repeat", "metric", "value", "unit"]),
            runs=pd.DataFrame(self.run_rows),
            headers=pd.DataFrame(self.header_rows),
            profile_experiments=frozenset(experiments),
            level=level,
        )


def e2a(lab: Lab, *, limit1_p50=(130, 128, 133, 131, 129), many_threads: int = 4,
        limit1_throttled=(600, 610, 590, 605, 600), two_thread_throttled=(598, 605, 600, 602, 597),
        two_thread_p50=(131, 129, 130, 132, 128)) -> Lab:
    """E2a as a 2-CPU node would show it (4 x 40 ms bursts), R = 5."""
    base = {"build": "go124mod", "threads": many_threads, "work_ms": 40, "interval_ms": 600, "rounds": 12}
    zeros = [0.0] * 5
    lab.add("E2a", "nolimit", {**base, "limit": None}, {
        "p50_wall_ms": [80, 82, 79, 81, 80], "throttled_ms": zeros, "throttled_over_wall": zeros,
        "periods_per_wall_period": zeros})
    lab.add("E2a", "limit2", {**base, "limit": 2}, {
        "p50_wall_ms": [81, 80, 82, 79, 81], "throttled_ms": zeros, "throttled_over_wall": zeros,
        "periods_per_wall_period": [0.30, 0.31, 0.29, 0.30, 0.32]})
    lab.add("E2a", "limit1", {**base, "limit": 1}, {
        "p50_wall_ms": list(limit1_p50), "throttled_ms": list(limit1_throttled),
        "throttled_over_wall": [0.80, 0.82, 0.78, 0.81, 0.80], "periods_per_wall_period": [0.4] * 5})
    lab.add("E2a", "limit500m", {**base, "limit": "500m"}, {
        "p50_wall_ms": [305, 300, 310, 302, 298], "throttled_ms": [1400, 1420, 1390, 1410, 1400],
        "throttled_over_wall": [1.50, 1.45, 1.55, 1.50, 1.52], "periods_per_wall_period": [0.6] * 5})
    lab.add("E2a", "limit1-2threads", {**base, "limit": 1, "threads": 2, "work_ms": 80}, {
        "p50_wall_ms": list(two_thread_p50),
        "throttled_ms": list(two_thread_throttled),
        "throttled_over_wall": [0.8] * 5, "periods_per_wall_period": [0.4] * 5})
    return lab


E3_VARIANTS = {
    "go124mod-none": {"build": "go124mod", "limit": None},
    "go124mod-500m": {"build": "go124mod", "limit": "500m"},
    "go124mod-2500m": {"build": "go124mod", "limit": "2500m"},
    "go125mod-none": {"build": "go125mod", "limit": None},
    "go125mod-500m": {"build": "go125mod", "limit": "500m"},
    "go125mod-2500m": {"build": "go125mod", "limit": "2500m"},
    "go125mod-2-env6": {"build": "go125mod", "limit": 2, "gomaxprocs": 6},
    "go125mod-2-godebug": {"build": "go125mod", "limit": 2, "godebug": "containermaxprocs=0"},
}


def rule(spec: dict, num_cpu: int) -> int:
    if spec.get("gomaxprocs"):
        return spec["gomaxprocs"]
    if spec.get("godebug"):
        return num_cpu
    limit = None if spec["limit"] is None else parse_cpu(spec["limit"], "limit")
    return go_default_gomaxprocs("1.25" if spec["build"] == "go125mod" else "1.24", limit, num_cpu)


def e3(lab: Lab, off_rule: str | None = None) -> Lab:
    for variant, spec in E3_VARIANTS.items():
        expected = rule(spec, lab.num_cpu)
        got = expected + 1 if variant == off_rule else expected
        lab.add("E3", variant, {**spec, "request": "100m"}, {
            "gomaxprocs": [got, got], "expected_gomaxprocs": [expected, expected], "num_cpu": [lab.num_cpu] * 2})
    return lab


def by_id(frame: pd.DataFrame) -> dict[str, pd.Series]:
    return {row["id"]: row for _, row in frame.iterrows()}


# --------------------------------------------------------------------------


def test_every_finding_is_data_with_thresholds_and_reasons():
    assert [f.id for f in findings.FINDINGS] == [f"F{k}" for k in range(1, 12)]
    for finding in findings.FINDINGS:
        assert finding.claim and finding.reference and finding.checks
        for check in finding.checks:
            assert check.why and check.reference and check.threshold
            assert check.relation in (">", "<", "within")


def test_on_a_two_cpu_node(tmp_path):
    rows, checks = findings.evaluate(e3(e2a(Lab(num_cpu=2))).evidence())
    assert list(rows.columns) == findings.FINDINGS_COLUMNS and list(checks.columns) == findings.CHECKS_COLUMNS
    got = by_id(rows)
    assert [got[i]["verdict"] for i in ("F1", "F2", "F3")] == [REPRODUCED] * 3
    assert got["F1"]["expected"] == ("p50_wall_ms limit1 / nolimit > 1.2; p50_wall_ms limit500m / nolimit > 2; "
                                     "p50_wall_ms limit2 / nolimit within [0.8, 1.25]")
    assert got["F1"]["effect"] == pytest.approx(math.exp(
        sum(map(math.log, [130, 128, 133, 131, 129])) / 5 - sum(map(math.log, [80, 82, 79, 81, 80])) / 5))
    assert got["F2"]["effect"] == pytest.approx(1.504) and math.isnan(got["F2"]["p"])

    # F4: 4 threads and 2 threads both keep the 2 CPUs busy
    assert got["F4"]["verdict"] == NOT_TESTABLE
    assert "min(threads, num_cpu) = 2" in got["F4"]["reason"] and "num_cpu = 2" in got["F4"]["reason"]
    assert "E2b" in got["F4"]["reason"]  # the part no experiment here covers yet
    assert math.isfinite(got["F4"]["effect"])  # measured anyway, shown beside the reason

    # F5: every default is capped at 2 CPUs; the count of matching variants is still reported
    assert got["F5"]["verdict"] == NOT_TESTABLE
    assert "num_cpu = 2" in got["F5"]["reason"] and "8 of 8 variants (16 of 16 runs) matched" in got["F5"]["reason"]
    assert got["F5"]["effect"] == 1.0


def test_on_a_ten_cpu_node_f4_and_f5_become_testable():
    # the lab's shape: 8 threads vs 2 on 10 CPUs, far less throttled time, yet slower
    lab = e2a(Lab(num_cpu=10), many_threads=8, limit1_p50=(84, 85, 83, 86, 84),
              limit1_throttled=(7050, 7000, 7100, 7060, 7040),
              two_thread_throttled=(1300, 1310, 1290, 1305, 1295), two_thread_p50=(132, 131, 134, 133, 130))
    got = by_id(findings.evaluate(e3(lab).evidence())[0])
    assert got["F4"]["verdict"] == REPRODUCED, got["F4"]["reason"]
    assert got["F5"]["verdict"] == REPRODUCED and "8 of 8 variants" in got["F5"]["reason"]


def test_a_variant_off_the_rule_contradicts_f5():
    got = by_id(findings.evaluate(e3(e2a(Lab(num_cpu=10)), off_rule="go125mod-500m").evidence())[0])
    assert got["F5"]["verdict"] == CONTRADICTED
    assert "7 of 8 variants" in got["F5"]["reason"] and "go125mod-500m" in got["F5"]["reason"]


def test_a_clear_effect_on_the_wrong_side_contradicts():
    # limit 1 only 5% slower than no limit, tightly measured: the ratio's CI lies below 1.2
    got = by_id(findings.evaluate(e2a(Lab(), limit1_p50=(84, 84.5, 83.5, 84.2, 83.8)).evidence())[0])
    assert got["F1"]["verdict"] == CONTRADICTED
    assert got["F1"]["reason"].startswith("p50_wall_ms limit1 / nolimit: the interval")
    assert "wholly on the other side of 1.2" in got["F1"]["reason"]
    assert got["F1"]["hi"] < 1.2


def test_a_noisy_effect_is_inconclusive():
    got = by_id(findings.evaluate(e2a(Lab(), limit1_p50=(60, 200, 90, 150, 70)).evidence())[0])
    assert got["F1"]["verdict"] == INCONCLUSIVE
    assert got["F1"]["lo"] < 1.2 < got["F1"]["hi"] and "reaches 1.2" in got["F1"]["reason"]


@pytest.mark.parametrize(
    "lo, hi, relation, threshold, verdict",
    [
        (0.9, 1.1, "within", (0.8, 1.25), REPRODUCED),
        (0.7, 1.1, "within", (0.8, 1.25), INCONCLUSIVE),
        (1.3, 1.6, "within", (0.8, 1.25), CONTRADICTED),
        (0.5, 0.7, "within", (0.8, 1.25), CONTRADICTED),
        (1.3, 1.6, ">", (1.2,), REPRODUCED),
        (1.3, 1.6, "<", (1.2,), CONTRADICTED),
        (math.nan, math.nan, ">", (1.2,), INCONCLUSIVE),
    ],
)
def test_interval_verdict(lo, hi, relation, threshold, verdict):
    assert findings.interval_verdict(lo, hi, relation, threshold) == verdict


def test_holm_runs_across_the_testable_comparisons():
    _, checks = findings.evaluate(e3(e2a(Lab(num_cpu=2))).evidence())
    family = checks[(checks["verdict"] != NOT_TESTABLE) & checks["p"].notna()]
    assert len(family) == 3  # F1's three ratios; F2/F3 are levels, F4/F5 not testable here
    assert family["p_holm"].tolist() == pytest.approx(stats.holm(family["p"].to_numpy()).tolist())
    assert (family["p_holm"] >= family["p"]).all()
    assert checks.loc[checks["verdict"] == NOT_TESTABLE, "p_holm"].isna().all()
    assert all("Holm over 3 comparisons" in m for m in family["method"])


def test_few_runs_say_the_test_cannot_reach_significance():
    lab = Lab()
    three = {"p50_wall_ms": [80, 81, 79], "throttled_ms": [0, 0, 0], "throttled_over_wall": [0, 0, 0],
             "periods_per_wall_period": [0.3, 0.3, 0.31]}
    factors = {"nolimit": 1, "limit2": 1, "limit1": 1.6, "limit500m": 3.8, "limit1-2threads": 1.6}
    for variant, factor in factors.items():
        lab.add("E2a", variant, {"threads": 4 if variant != "limit1-2threads" else 2},
                {**three, "p50_wall_ms": [v * factor for v in three["p50_wall_ms"]]})
    _, checks = findings.evaluate(lab.evidence())
    first = checks.iloc[0]
    assert first["p"] == pytest.approx(0.1) and "cannot reach significance with R = 3" in first["reason"]


def test_absent_experiment_or_variant_is_not_testable():
    got = by_id(findings.evaluate(e2a(Lab()).evidence(experiments=("E2a",)))[0])
    assert got["F5"]["verdict"] == NOT_TESTABLE
    assert got["F5"]["reason"] == "experiment not in this profile: E3"

    lab = Lab()
    lab.add("E2a", "nolimit", {"threads": 4}, {"p50_wall_ms": [80, 81, 82]})
    lab.add("E2a", "limit1", {"threads": 4}, {"p50_wall_ms": [130, 131, 132]})
    got = by_id(findings.evaluate(lab.evidence(experiments=("E2a",)))[0])
    assert got["F1"]["verdict"] == NOT_TESTABLE and "limit500m" in got["F1"]["reason"]


def test_confidence_level_changes_the_intervals():
    wide = by_id(findings.evaluate(e2a(Lab()).evidence(level=0.99))[0])["F1"]
    narrow = by_id(findings.evaluate(e2a(Lab()).evidence(level=0.80))[0])["F1"]
    assert wide["lo"] < narrow["lo"] < narrow["hi"] < wide["hi"]


# --------------------------------------------------------------------------
# the CLI the Snakemake rules call


def _cli(tmp_path: Path, raw: list[Path]) -> int:
    tables = tmp_path / "tables"
    code = analysis.main(["tables", "--raw", *map(str, raw), "--out-dir", str(tables)])
    if code:
        return code
    code = analysis.main(["stats", "--tables-dir", str(tables), "--metrics", str(tables / "metrics.csv"),
                          "--estimates", str(tables / "estimates.csv"), "--confidence", "0.9", "--seed", "1"])
    if code:
        return code
    return analysis.main(["findings", "--tables-dir", str(tables), "--metrics", str(tables / "metrics.csv"),
                          "--experiments", "E1", "E2a", "E3", "S1", "--findings", str(tables / "findings.csv"),
                          "--checks", str(tables / "checks.csv"), "--confidence", "0.9"])


def test_cli_writes_every_table(tmp_path, capsys):
    assert _cli(tmp_path, sorted(FIXTURES.glob("*/*/rep*.jsonl"))) == 0
    written = sorted(p.name for p in (tmp_path / "tables").iterdir())
    assert written == sorted([f"{name}.csv" for name in tidy.TABLE_NAMES] + ["metrics.csv", "estimates.csv",
                                                                           "findings.csv", "checks.csv"])
    table = pd.read_csv(tmp_path / "tables" / "findings.csv")
    assert table["id"].tolist() == [f.id for f in findings.FINDINGS]
    assert set(table["verdict"]) == {NOT_TESTABLE}  # the fixtures hold one run of two E2a variants
    assert (pd.read_csv(tmp_path / "tables" / "estimates.csv")["level"] == 0.9).all()


def test_cli_names_a_broken_log_in_one_line(tmp_path, capsys):
    broken = tmp_path / "raw" / "E2a" / "limit1" / "rep0.jsonl"
    broken.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "E2a/limit1/rep0.jsonl", broken)
    broken.write_text(broken.read_text()[:-40])
    assert _cli(tmp_path, [broken]) == 1
    err = capsys.readouterr().err
    assert str(broken) in err and "line 12" in err and "Traceback" not in err
    assert not (tmp_path / "tables").exists()  # nothing half-written
