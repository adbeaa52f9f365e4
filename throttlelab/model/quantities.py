"""CPU quantities and the conversions of docs/LAB.md §2, as pure integer functions.

Everything here mirrors what kubelet and runc compute, so the numbers we write
to cgroups (and read back) can be checked against the same formulas.
"""

from __future__ import annotations

import math
import re
from throttlelab.errors import QuantityError  # noqa: F401 (re-exported: callers import it from here too)

DEFAULT_PERIOD_US = 100_000
#: The kernel's bounds on a CFS period (kernel/sched/core.c: 1 ms to 1 s).
MIN_PERIOD_US = 1_000
MAX_PERIOD_US = 1_000_000
MIN_SHARES = 2
MAX_SHARES = 262_144
MAX_WEIGHT = 10_000

_QUANTITY = re.compile(r"^(?P<num>\d+(?:\.\d+)?)(?P<milli>m?)$")


def parse_cpu(value: str | int | float, field: str = "cpu") -> int:
    """Parse a Kubernetes CPU quantity into milliCPU ('500m' -> 500, '1.5' -> 1500).

    Raises QuantityError naming the field, so a bad config says where to look.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{field}: expected a CPU quantity such as 500m or 2, got {value!r}")
    if isinstance(value, (int, float)):
        text = repr(value) if isinstance(value, float) else str(value)
    else:
        text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(
            f"{field}: {value!r} is not a CPU quantity; write milliCPU like 500m "
            f"or CPUs like 2 or 1.5 (no sign, no other suffix)"
        )
    number = float(match["num"])
    milli = number if match["milli"] else number * 1000
    if milli != int(milli):
        raise QuantityError(f"{field}: {value!r} is finer than 1m; round it to whole milliCPU")
    if milli <= 0:
        raise QuantityError(f"{field}: {value!r} must be above zero (leave the field out for no limit)")
    return int(milli)


def format_cpu(milli: int | None) -> str:
    """The shortest Kubernetes spelling of a milliCPU value ('none' for no value)."""
    if milli is None:
        return "none"
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def milli_to_shares(milli: int | None) -> int:
    """kubelet's request -> cpu.shares: max(2, milli*1024/1000), integer arithmetic."""
    if not milli:
        return MIN_SHARES
    return min(MAX_SHARES, max(MIN_SHARES, milli * 1024 // 1000))


def milli_to_quota(milli: int | None, period_us: int = DEFAULT_PERIOD_US) -> int | None:
    """kubelet's limit -> CFS quota in µs per period; None means no limit ('max')."""
    if milli is None:
        return None
    return milli * period_us // 1000


#: systemd keeps a unit's CPU quota per second in steps of 10 ms (1% of a CPU): runc's systemd cgroup driver
#: (kubelet's too, libcontainer's) rounds a quota up to the next step, and systemd writes that step back per
#: period (at least 1 ms). Measured on the lab's kind nodes: limit 125m -> 13000 us per 100 ms, not 12500.
SYSTEMD_QUOTA_STEP_US_PER_S = 10_000


def systemd_quota(quota_us: int | None, period_us: int = DEFAULT_PERIOD_US) -> int | None:
    """The CFS quota a systemd cgroup driver leaves for ``quota_us`` per ``period_us``; None: no limit."""
    if quota_us is None:
        return None
    per_s = quota_us * 1_000_000 // period_us  # the quota per second, as the driver computes it
    per_s = -(-per_s // SYSTEMD_QUOTA_STEP_US_PER_S) * SYSTEMD_QUOTA_STEP_US_PER_S  # up to a whole step
    return max(per_s * period_us // 1_000_000, 1000)


def shares_to_weight_linear(shares: int) -> int:
    """kubelet (all levels) and runc < 1.3.2 (container level): linear mapping."""
    return 1 + ((shares - 2) * 9999) // 262_142


def shares_to_weight_quadratic(shares: int) -> int:
    """runc >= 1.3.2 at the container level: quadratic in log2(shares), clamped."""
    if shares <= 0:
        return 1
    exponent = math.log2(shares)
    weight = math.ceil(10 ** ((exponent * exponent + 125 * exponent) / 612.0 - 7.0 / 34.0))
    return max(1, min(MAX_WEIGHT, weight))


RUNTIME_CONVERSIONS = {
    "runc-new": shares_to_weight_quadratic,
    "runc-old": shares_to_weight_linear,
}


def container_weight(shares: int, runtime: str) -> int:
    """Weight that the runtime writes for a container with these shares."""
    try:
        return RUNTIME_CONVERSIONS[runtime](shares)
    except KeyError:
        known = ", ".join(sorted(RUNTIME_CONVERSIONS))
        raise ValueError(f"runtime: unknown conversion {runtime!r}; choose one of {known}") from None


def weight_to_v1_shares(weight: int) -> int:
    """How a v2 weight is written on cgroup v1: the kernel's own scale (100 <-> 1024)."""
    return max(MIN_SHARES, weight * 1024 // 100)


def pod_limit(container_limits: list[int | None]) -> int | None:
    """Pod-level limit: the sum of container limits, only when every container has one."""
    if not container_limits or any(limit is None for limit in container_limits):
        return None
    return sum(container_limits)  # type: ignore[arg-type]


def pod_request(container_requests: list[int | None]) -> int:
    """Pod-level request: the sum of container requests (missing counts as 0)."""
    return sum(request or 0 for request in container_requests)


def go_default_gomaxprocs(go_line: str, limit_milli: int | None, usable_cpus: int) -> int:
    """GOMAXPROCS Go picks with no GOMAXPROCS env, by the module's go line.

    go >= 1.25: max(2, ceil(limit)) capped at the usable CPUs; older lines: usable CPUs.
    """
    major, minor = (int(part) for part in go_line.split(".")[:2])
    if (major, minor) < (1, 25) or limit_milli is None:
        return usable_cpus
    return min(usable_cpus, max(2, math.ceil(limit_milli / 1000)))


def exhaust_time_ms(limit_milli: int, threads: int, period_us: int = DEFAULT_PERIOD_US) -> float:
    """Wall time for T busy threads to spend one period's quota: quota / T."""
    quota = milli_to_quota(limit_milli, period_us)
    assert quota is not None
    return quota / threads / 1000.0


def span_arrivals(rate_per_s: float, clump: int, span_ms: float) -> int:
    """Arrivals the load generator schedules in a span: round(rate x span / clump), half away from zero.

    The generator (workload/internal/pacer) places exactly this many clumps in the
    warm-up and in the window, as a Poisson process conditioned on its count, so
    every run of a design holds the same number of requests.
    """
    if rate_per_s <= 0 or clump < 1 or span_ms < 0:
        raise ValueError(
            f"rate {rate_per_s:g}/s, clump {clump}, span {span_ms:g} ms: rate > 0, clump >= 1, span >= 0 are needed"
        )
    return math.floor(rate_per_s * span_ms / 1000 / clump + 0.5)
