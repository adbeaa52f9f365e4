"""docs/LAB.md §2 conversions, checked against the examples of docs/LAB.md §2."""

import pytest

from throttlelab.model import quantities as q


@pytest.mark.parametrize(
    "text, milli",
    [("500m", 500), ("2", 2000), ("1.5", 1500), ("100m", 100), (2, 2000), (0.5, 500), ("2500m", 2500)],
)
def test_parse_cpu(text, milli):
    assert q.parse_cpu(text) == milli


@pytest.mark.parametrize("bad", ["2x", "-1", "", "m", "1.0005", "0", "0m", "1e3", True])
def test_parse_cpu_rejects_with_field_name(bad):
    with pytest.raises(q.QuantityError, match="limit"):
        q.parse_cpu(bad, "limit")


@pytest.mark.parametrize("milli, shares", [(100, 102), (500, 512), (1000, 1024), (None, 2), (1, 2), (600, 614)])
def test_shares(milli, shares):
    assert q.milli_to_shares(milli) == shares


@pytest.mark.parametrize("milli, quota", [(500, 50_000), (2000, 200_000), (250, 25_000), (1500, 150_000), (None, None)])
def test_quota(milli, quota):
    assert q.milli_to_quota(milli) == quota


def test_quota_custom_period():
    assert q.milli_to_quota(500, period_us=20_000) == 10_000


@pytest.mark.parametrize(
    "milli, period_us, quota",
    [
        (125, 100_000, 13_000),  # read on the lab's kind nodes (systemd driver): 125m leaves 13000, not 12500
        (500, 100_000, 50_000),  # a whole 10 ms per second: unchanged
        (250, 100_000, 25_000),
        (2000, 100_000, 200_000),
        (1, 100_000, 1_000),  # 100 us a period -> 1 ms a second -> one 10 ms step -> 1 ms a period
        (125, 20_000, 2_600),  # 6250 us a second -> 130 ms a second, per 20 ms period
        (None, 100_000, None),
    ],
)
def test_a_systemd_driver_rounds_a_quota_up_to_whole_10_ms_per_second(milli, period_us, quota):
    assert q.systemd_quota(q.milli_to_quota(milli, period_us), period_us) == quota


@pytest.mark.parametrize(
    "milli, weight",
    # docs/LAB.md §2.4: 100m -> 4, a 600m pod -> 24, 1 CPU -> 39, a 1.1 CPU pod -> 43, kubepods 10 CPUs -> 391
    [(100, 4), (600, 24), (1000, 39), (1100, 43), (10_000, 391)],
)
def test_linear_weight(milli, weight):
    assert q.shares_to_weight_linear(q.milli_to_shares(milli)) == weight


@pytest.mark.parametrize("shares, weight", [(2, 1), (102, 17), (512, 59), (1024, 100), (262_144, 10_000)])
def test_quadratic_weight(shares, weight):
    assert q.shares_to_weight_quadratic(shares) == weight


def test_runtime_conversions_differ_only_at_container_level():
    assert q.container_weight(1024, "runc-new") == 100
    assert q.container_weight(1024, "runc-old") == 39
    assert q.container_weight(102, "runc-old") == 4
    with pytest.raises(ValueError, match="runtime"):
        q.container_weight(1024, "crun")


def test_v1_shares_from_weight_keeps_ratios():
    assert q.weight_to_v1_shares(100) == 1024
    assert q.weight_to_v1_shares(17) == 174
    assert q.weight_to_v1_shares(1) == 10


def test_pod_limit_only_when_every_container_has_one():
    assert q.pod_limit([2000, 500]) == 2500  # E1 all-limits: 250000 100000
    assert q.pod_limit([2000, None]) is None  # E1 partial: max
    assert q.pod_request([500, 100]) == 600


@pytest.mark.parametrize(
    "line, limit, cpus, expected",
    # docs/LAB.md §4, E3 (10 CPUs): go124mod always 10; go125mod none->10, 500m..2->2, 2500m->3
    [
        ("1.24", 500, 10, 10),
        ("1.24", None, 10, 10),
        ("1.25", None, 10, 10),
        ("1.25", 500, 10, 2),
        ("1.25", 1000, 10, 2),
        ("1.25", 1500, 10, 2),
        ("1.25", 2000, 10, 2),
        ("1.25", 2500, 10, 3),
        ("1.25", 2500, 2, 2),  # capped at the usable CPUs
    ],
)
def test_go_default_gomaxprocs(line, limit, cpus, expected):
    assert q.go_default_gomaxprocs(line, limit, cpus) == expected


def test_exhaust_time():
    # docs/LAB.md §2.7: 250m limit, 16 threads: 25 ms / 16 = 1.5625 ms
    assert q.exhaust_time_ms(250, 16) == pytest.approx(1.5625)


def test_format_cpu_round_trips():
    for milli in (100, 500, 1000, 1500, 2000):
        assert q.parse_cpu(q.format_cpu(milli)) == milli


@pytest.mark.parametrize(
    ("rate", "clump", "span_ms", "arrivals"),
    [
        (20, 10, 3000, 6),  # quick E2b clumped: 60 requests
        (20, 1, 1500, 30),  # ci steady
        (100, 50, 60000, 120),  # the lab's clumps of 50
        (20, 10, 250, 1),  # 0.5 clumps: half up, as the generator's math.Floor(x + 0.5)
        (20, 10, 200, 0),
        (4, 1, 400, 2),  # /ping in the warm-up
    ],
)
def test_span_arrivals_is_the_generators_count(rate, clump, span_ms, arrivals):
    assert q.span_arrivals(rate, clump, span_ms) == arrivals


@pytest.mark.parametrize(("rate", "clump", "span_ms"), [(0, 1, 100), (10, 0, 100), (10, 1, -1)])
def test_span_arrivals_rejects_what_the_generator_rejects(rate, clump, span_ms):
    with pytest.raises(ValueError, match="rate"):
        q.span_arrivals(rate, clump, span_ms)


def test_window_requests_per_profile_design():
    from throttlelab.model.variants import VariantSpec

    quick = VariantSpec.from_dict("E2b", "clumped-limit", {"rps": 20, "clump": 10, "ping_rps": 4, "duration_ms": 3000})
    assert quick.window_requests() == 60 and quick.window_requests("ping") == 12
    assert quick.window_clumps() == 6 and quick.window_clumps("ping") == 12  # /ping: every request its own
    closed = VariantSpec.from_dict("S2", "threads-one", {"workers": 8, "duration_ms": 3000})
    assert closed.window_requests() is None and closed.window_clumps() is None
