"""E6 (what monitoring sees): on a backend with the kubelet's cAdvisor (kind, kubernetes) it scrapes
cAdvisor twice through `Deployment.monitoring_sample`, two DIFFERENT cAdvisor readings, and never
reads the throttled container itself; on local and docker it emulates cAdvisor's housekeeping from
the container's counters. Both give the records the analysis reads alike (rates over the readings'
own time difference), each scrape saying its source.

The cluster here is a fake deployment whose cAdvisor behaves like the kubelet's: it serves a cached
reading, taken every housekeeping interval, with the reading's own timestamp (and no series before
its first reading).
"""

from __future__ import annotations

import math
import os
import time
from datetime import datetime, timezone
from typing import Any

import pandas as pd
import pytest

from conftest import lab_cgroups, workload_pids
from load_records import META, header
from throttlelab.analysis import metrics, tidy
from throttlelab.analysis.metrics.services_metrics import monitoring_metrics
from throttlelab.backends.base import Backend, BackendError, Capabilities, Deployment, Output
from throttlelab.experiments import services_experiments
from throttlelab.experiments.context import Context, ExperimentResult
from throttlelab.experiments.runner import write_atomically
from throttlelab.model import coverage
from throttlelab.model.variants import VariantSpec

#: E6 at a test's scale: a 1.6 s job (8 rounds of 200 ms), scrapes at 0.3 s and 0.7 s.
SPEC = {
    "build": "go124mod",
    "threads": 2,
    "work_ms": 20,
    "interval_ms": 200,
    "rounds": 8,
    "calibration_rounds": 3,
    "request": "100m",
    "limit": "250m",
    "housekeeping_ms": 200,
    "first_scrape_ms": 300,
    "scrape_gap_ms": 400,
}
PERIOD_US = 100_000


def spec(**changes: Any) -> VariantSpec:
    return VariantSpec.from_dict("E6", "limit", {**SPEC, **changes})


def iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"


def counters_at(elapsed_s: float) -> dict[str, float]:
    """The job's cumulative counters `elapsed_s` after it started, in cAdvisor's units."""
    periods = int(elapsed_s / 0.1)
    return {
        "container_cpu_cfs_periods_total": periods,
        "container_cpu_cfs_throttled_periods_total": periods // 2,
        "container_cpu_cfs_throttled_seconds_total": 0.3 * elapsed_s,
        "container_cpu_usage_seconds_total": 0.25 * elapsed_s,
    }


class FakeDeployment(Deployment):
    """Two burst pods on a fake node; `calls` logs everything done to a container."""

    def __init__(self, backend: FakeBackend):
        self.backend = backend
        self.calls: list[tuple[str, str, str | None]] = []
        self.job_start_ns: int | None = None
        self.closed = False

    def __enter__(self) -> FakeDeployment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed = True

    def verify(self) -> list:
        return []

    def _burst(self, pod: str, rounds: int, wall_ms: float, start_ns: int) -> Output:
        src = f"{pod}/burst"
        records = [
            header(
                src,
                "burst",
                {
                    "time": iso(start_ns),
                    "gomaxprocs": 2,
                    "num_cpu": 2,
                    "cgroup": {"quota_us": 25_000 if pod == "e6" else None, "period_us": PERIOD_US},
                    "params": {"threads": 2, "work": 20, "interval": 200, "rounds": rounds},
                },
            )
        ]
        for i in range(rounds):
            records.append(
                {
                    "type": "round",
                    "round": i,
                    "t_s": i * 0.2,
                    "wall_ms": wall_ms,
                    "thread_cpu_ms": 40,
                    "d_nr_periods": 1,
                    "d_nr_throttled": 1,
                    "d_throttled_usec": 30_000,
                    "d_usage_usec": 40_000,
                }
            )
        records.append(
            {
                "type": "summary",
                "rounds": rounds,
                "p50_wall_ms": wall_ms,
                "max_wall_ms": wall_ms,
                "avg_cores": 0.2,
                "nr_periods": rounds,
                "nr_throttled": rounds,
                "throttled_usec": 30_000 * rounds,
                "usage_usec": 40_000 * rounds,
                "elapsed_s": rounds * 0.2,
            }
        )
        return Output(pod, "burst", 0, records, "", rounds * 0.2)

    def run_job(self, pod: str, container: str, timeout_s: float) -> Output:
        self.calls.append(("run_job", pod, container))
        start = time.time_ns()
        if pod == "calib":
            return self._burst(pod, SPEC["calibration_rounds"], 20.0, start)
        self.job_start_ns = start
        time.sleep(self.backend.job_s)
        return self._burst(pod, SPEC["rounds"], 60.0, start)

    def read_stat(self, pod: str, container: str | None = None) -> dict[str, Any]:
        """A read of the container's counters (an exec into it on kind)."""
        self.calls.append(("read_stat", pod, container))
        elapsed = 0.0 if self.job_start_ns is None else (time.time_ns() - self.job_start_ns) / 1e9
        got = services_experiments.cadvisor_counters(counters_at(elapsed), f"{pod}/{container}")
        return {**got, "t_ns": time.monotonic_ns()}

    def monitoring_sample(self, pod: str, container: str) -> dict[str, Any]:
        """cAdvisor: the latest reading of its housekeeping (every `housekeeping_s` from `offset_s`
        after the job started; only the first one when frozen), with the reading's own time."""
        self.calls.append(("monitoring_sample", pod, container))
        b = self.backend
        now = time.time_ns()
        since = None if self.job_start_ns is None else (now - self.job_start_ns) / 1e9
        if since is None or since < b.offset_s:
            raise BackendError(f"cAdvisor has no series for {pod}/{container} yet (it samples every ~10-15 s)")
        k = 0 if b.frozen else math.floor((since - b.offset_s) / b.housekeeping_s)
        elapsed = b.offset_s + k * b.housekeeping_s
        t_ms = (self.job_start_ns + int(elapsed * 1e9)) // 1_000_000
        b.readings_served.add(t_ms)
        return {
            "type": "cadvisor",
            "pod": pod,
            "container": container,
            "t_ms": t_ms,
            "timestamps_ms": [t_ms],
            "scraped_t_ns": time.monotonic_ns(),
            **counters_at(elapsed),
        }

    def start(self, pod: str, container: str) -> Any:
        raise AssertionError("E6 starts no service")

    def stop(self, handle: Any, timeout_s: float = 10.0) -> Output:
        raise AssertionError("E6 stops no service")

    def run_load(self, args: list[str], timeout_s: float) -> Output:
        raise AssertionError("E6 runs no load")

    def wait_for_record(self, handle: Any, record_type: str, timeout_s: float) -> dict[str, Any]:
        raise AssertionError("E6 waits for no record")


class FakeBackend(Backend):
    name = "fake"

    def __init__(
        self,
        cadvisor: bool,
        housekeeping_s: float = 1.0,
        offset_s: float = 0.1,
        frozen: bool = False,
        job_s: float = 1.6,
    ):
        self.cadvisor, self.housekeeping_s, self.offset_s, self.frozen = cadvisor, housekeeping_s, offset_s, frozen
        self.job_s = job_s
        self.deployments: list[FakeDeployment] = []
        self.readings_served: set[int] = set()

    def preflight(self) -> None:
        pass

    def capabilities(self) -> Capabilities:
        return Capabilities(
            cpus=2,
            cgroup_version=2,
            can_pin_cpus=False,
            has_pause_level=True,
            runtime="runc-new",
            cadvisor=self.cadvisor,
        )

    def environment(self) -> dict[str, Any]:
        return {}

    def deploy(self, node, load=None) -> FakeDeployment:
        assert [p.name for p in node.pods] == ["calib", "e6"]
        self.deployments.append(FakeDeployment(self))
        return self.deployments[-1]


def run(backend: FakeBackend, variant: VariantSpec) -> tuple[ExperimentResult, FakeDeployment]:
    ctx = Context(backend=backend, capabilities=backend.capabilities(), node_cpus=None, seed=5)
    result = services_experiments.run_e6(variant, ctx)
    (dep,) = backend.deployments
    assert dep.closed
    return result, dep


def podstats(result, when: str) -> list[dict[str, Any]]:
    return [r for r in result.records if r["type"] == "podstat" and r["when"] == when]


def analysed(result, variant: VariantSpec, backend: str, tmp_path) -> dict[str, float]:
    """The run's log as the runner writes it, through tidy and the per-run metrics."""
    meta = {
        **META,
        "experiment": "E6",
        "variant": "limit",
        "backend": backend,
        "spec": variant.to_dict(),
        "capabilities": {"cpus": 2, "cgroup_version": 2},
        "window_s": result.window_s,
        "notes": result.notes,
    }
    path = tmp_path / "raw" / "E6" / "limit" / "rep0.jsonl"
    write_atomically(path, [meta, *result.records])
    per_run = metrics.run_metrics(tidy.parse_runs([path]))
    return dict(zip(per_run["metric"], per_run["value"]))


@pytest.fixture
def fast_cadvisor(monkeypatch):
    """cAdvisor at the test's scale: E6 refuses scrapes closer than 0.3 s (instead of 10 s), re-scrapes every
    50 ms for at most 3 s (the fake's cAdvisor itself reads the container every 1 s)."""
    monkeypatch.setattr(coverage, "KUBELET_HOUSEKEEPING_S", 0.3)
    monkeypatch.setattr(services_experiments, "RESCRAPE_EVERY_S", 0.05)
    monkeypatch.setattr(services_experiments, "CADVISOR_LONGEST_S", 3.0)


# --------------------------------------------------------------------------
# a backend with the kubelet's cAdvisor


def test_e6_scrapes_the_real_cadvisor_twice_with_different_readings_and_never_reads_the_container(
    fast_cadvisor, tmp_path
):
    backend = FakeBackend(cadvisor=True, housekeeping_s=1.0, offset_s=0.1)
    result, dep = run(backend, spec())
    # nothing but the job itself ran in a container: no counters read by exec, only cAdvisor scraped
    assert [c for c in dep.calls if c[0] != "monitoring_sample"] == [
        ("run_job", "calib", "burst"),
        ("run_job", "e6", "burst"),
    ]
    samples = [c for c in dep.calls if c[0] == "monitoring_sample"]
    assert set(samples) == {("monitoring_sample", "e6", "burst")}
    # the scrape at 0.7 s still got cAdvisor's reading of 0.1 s: scraped again until the one of 1.1 s
    assert len(samples) >= 3
    first, second = podstats(result, "scrape")
    assert first["source"] == second["source"] == "cadvisor"
    assert first["cadvisor_ms"] < second["cadvisor_ms"]
    assert second["rescrapes"] >= 1
    assert first["t_ms"] == pytest.approx(100, abs=2) and second["t_ms"] == pytest.approx(1100, abs=2)
    assert second["at_ms"] >= second["t_ms"] and first["at_ms"] >= first["t_ms"]
    assert second["at_ms"] - first["at_ms"] < (second["t_ms"] - first["t_ms"])  # scrapes 0.7-1.1 s apart, readings 1 s
    # cAdvisor's seconds as the cgroup's usec, its periods as they are
    assert second["throttled_usec"] == round(counters_at(1.1)["container_cpu_cfs_throttled_seconds_total"] * 1e6)
    assert second["usage_usec"] == round(0.25 * 1.1 * 1e6) and second["nr_periods"] == 11
    # every reading the scrapes saw, once, in order, with cAdvisor's own time
    readings = podstats(result, "housekeeping")
    assert [r["cadvisor_ms"] for r in readings] == sorted(backend.readings_served)
    assert {r["source"] for r in readings} == {"cadvisor"}
    assert any("kubelet's cAdvisor" in note for note in result.notes)

    got = analysed(result, spec(), "kind", tmp_path)
    # rates over the difference of cAdvisor's own timestamps, not the time between the scrapes
    gap = (second["cadvisor_ms"] - first["cadvisor_ms"]) / 1000
    assert got["sample_gap_s"] == pytest.approx(gap, abs=0.002) and got["sample_gap_s"] == pytest.approx(1.0, abs=0.003)
    assert got["throttled_s_per_s"] == pytest.approx(0.3, rel=0.01)
    assert got["scrape_gap_s"] == pytest.approx((second["at_ms"] - first["at_ms"]) / 1000)
    assert got["throttled_s_per_s_naive"] == pytest.approx(
        got["throttled_s_per_s"] * gap / got["scrape_gap_s"], rel=0.01
    )
    assert math.isfinite(got["overstatement"]) and got["overstatement"] > 0


@pytest.mark.parametrize(
    ("longest_s", "message"),
    [
        (0.3, r"did not give a reading newer than the previous scrape's .* within 0.3 s"),
        (5.0, r"the job e6/burst ended before the kubelet's cAdvisor gave a reading newer"),
    ],
)
def test_a_cadvisor_that_serves_one_reading_only_fails_clearly(fast_cadvisor, monkeypatch, longest_s, message):
    monkeypatch.setattr(services_experiments, "CADVISOR_LONGEST_S", longest_s)
    backend = FakeBackend(cadvisor=True, frozen=True)  # the job lasts 1.6 s: between the two limits
    with pytest.raises(BackendError, match=message):
        run(backend, spec())
    (dep,) = backend.deployments
    assert dep.closed and not [c for c in dep.calls if c[0] == "read_stat"]


def test_e6_too_short_for_kubelets_cadvisor_is_refused_before_anything_is_deployed():
    """The quick profile's E6 (scrapes 4 s apart) against cAdvisor's 10-15 s housekeeping."""
    quick = spec(
        interval_ms=330, rounds=20, calibration_rounds=5, housekeeping_ms=1000, first_scrape_ms=1000, scrape_gap_ms=4000
    )
    backend = FakeBackend(cadvisor=True)
    ctx = Context(backend=backend, capabilities=backend.capabilities(), node_cpus=None, seed=5)
    with pytest.raises(BackendError, match=r"scrapes are 4 s apart .* every 10-15 s"):
        services_experiments.run_e6(quick, ctx)
    assert backend.deployments == []


# --------------------------------------------------------------------------
# local and docker: cAdvisor emulated


def test_without_cadvisor_e6_emulates_its_housekeeping_and_never_scrapes(tmp_path):
    backend = FakeBackend(cadvisor=False)
    result, dep = run(backend, spec(housekeeping_ms=200, first_scrape_ms=300, scrape_gap_ms=600))
    assert not [c for c in dep.calls if c[0] == "monitoring_sample"]
    reads = [c for c in dep.calls if c[0] == "read_stat"]
    assert reads and set(reads) == {("read_stat", "e6", "burst")}
    first, second = podstats(result, "scrape")
    assert first["source"] == second["source"] == "emulated" and "cadvisor_ms" not in first
    assert first["t_ms"] < second["t_ms"] and len(podstats(result, "housekeeping")) == len(reads)
    assert any("emulated cAdvisor" in note for note in result.notes)
    got = analysed(result, spec(housekeeping_ms=200, first_scrape_ms=300, scrape_gap_ms=600), "local", tmp_path)
    assert got["sample_gap_s"] == pytest.approx((second["t_ms"] - first["t_ms"]) / 1000)


def test_the_scrapes_source_is_a_setting_of_the_run():
    """scrapes_cadvisor: 2 when both scrapes read the kubelet's cAdvisor, 0 when emulated (or from a log
    written before scrapes said their source), absent where the table carries no source."""
    rounds = pd.DataFrame(
        {
            "src": ["e6/burst"] * 3 + ["calib/burst"] * 3,
            "round": [0, 1, 2] * 2,
            "t_s": [0.0, 0.2, 0.4] * 2,
            "wall_ms": [60.0] * 3 + [20.0] * 3,
        }
    )
    summaries = pd.DataFrame({"src": ["e6/burst"], "elapsed_s": [0.6], "rounds": [3]})
    headers = pd.DataFrame({"src": ["e6/burst"], "cg_period_us": [PERIOD_US]})

    def scrapes(source: str | None) -> pd.DataFrame:
        frame = pd.DataFrame(
            {
                "pod": ["e6", "e6"],
                "container": ["burst", "burst"],
                "when": ["scrape", "scrape"],
                "seq": [0, 1],
                "t_ms": [100.0, 1100.0],
                "at_ms": [300.0, 1150.0],
                "nr_periods": [1, 11],
                "nr_throttled": [0, 5],
                "throttled_usec": [30_000, 330_000],
                "usage_usec": [25_000, 275_000],
            }
        )
        return frame if source is None else frame.assign(source=source)

    def got(source: str | None) -> dict[str, float]:
        return monitoring_metrics(
            {"rounds": rounds, "summaries": summaries, "headers": headers, "podstats": scrapes(source)}
        )

    assert got("cadvisor")["scrapes_cadvisor"] == 2
    assert got("emulated")["scrapes_cadvisor"] == got("")["scrapes_cadvisor"] == 0
    assert "scrapes_cadvisor" not in got(None)
    assert got("cadvisor")["sample_gap_s"] == got("emulated")["sample_gap_s"] == 1.0  # treated alike
    assert metrics.CATALOGUE["scrapes_cadvisor"].summary == "setting"


@pytest.mark.root
def test_e6_on_the_local_backend_emulates_cadvisor_and_its_log_parses(real_cgroups, binaries, tmp_path):
    from throttlelab.backends.local import LocalBackend
    from throttlelab.experiments.runner import experiment_lock

    backend = LocalBackend(binaries)
    backend.preflight()
    caps = backend.capabilities()
    assert not caps.cadvisor
    variant = spec(interval_ms=330, housekeeping_ms=500, first_scrape_ms=600, scrape_gap_ms=1500)
    ctx = Context(backend=backend, capabilities=caps, node_cpus=None, seed=11)
    with experiment_lock():
        result = services_experiments.run_e6(variant, ctx)
    mine = f"throttlelab-{os.getpid()}-"
    assert [c for c in lab_cgroups() if mine in c] == []
    started = {r["pid"] for r in result.records if r["type"] == "header"}
    assert len(started) == 2 and not started & set(workload_pids())
    first, second = podstats(result, "scrape")
    assert first["source"] == second["source"] == "emulated" and first["t_ms"] < second["t_ms"]
    got = analysed(result, variant, "local", tmp_path)
    assert got["sample_gap_s"] == pytest.approx((second["t_ms"] - first["t_ms"]) / 1000)
    assert got["p50_wall_ms"] > 0 and math.isfinite(got["throttled_s_per_s"])
