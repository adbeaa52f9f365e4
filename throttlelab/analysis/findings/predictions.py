"""What the model of docs/LAB.md §1 predicts for a variant's parameters: the numbers every threshold is derived from.

Pure functions of a :class:`~throttlelab.model.variants.VariantSpec` and the node (CPUs, CFS
period), never of a measurement (docs/STATISTICS.md §5: thresholds are fixed before the data).

The CFS bandwidth model (docs/LAB.md §1): a limit L gives the group a quota of L x period of CPU time
per period, shared by all its threads; a group idle before a burst starts it with the whole
quota; once the quota is spent every thread waits for the next period. A burst of C ms of CPU
on p = min(threads, CPUs) run queues starting at phase phi of the period (:func:`fluid_burst`)
runs at p ms of CPU per ms until it is done, the quota is spent (then waits out the period)
or the period ends (then carries on with a fresh quota). Each throttled wait is counted once per
run queue on which the group was throttled (the kernel's throttled time is per cfs_rq): at least
one, at most p, as the scheduler placed the threads (:attr:`BurstArm.counted_queues`); the
model's throttled time (:meth:`BurstArm.throttled_ms`) is the upper end. Bursts start at
every phase alike: a profile's round interval is never a multiple of the period (docs/LAB.md §6).

The service model (E2b, E7, E8): a clump of c requests of s ms of CPU each is served as one
burst of c x s ms; the k-th request is done when k x s ms of CPU are (:func:`clump_latencies`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from throttlelab.model import quantities as q
from throttlelab.model.variants import VariantSpec

#: CPU per ms of /work: docs/LAB.md §4's E2b ran 100 req/s of 5 ms work at about 0.6 CPU (0.5 CPU of work),
#: so a request costs 1.2x its work (HTTP, allocation, GC). The profiles state the same (paper: "~6 ms").
CPU_PER_WORK = 0.6 / (100 * 5 / 1000)
#: A latency or completion time on this machine carries a fixed overhead the model leaves out (thread
#: wake-up, scheduling, HTTP): the lab's 8 x 20 ms burst took 34.3 ms unthrottled, 0.7x its 20 ms. The
#: latency thresholds allow an overhead of up to twice the faster arm's model time, added to both arms.
OVERHEAD_ALLOWANCE = 2.0
#: The band of an equivalence ("within") check, the same wherever the model predicts "no change" (completion
#: times, rates of CPU, throughput): x/÷ 1.25 around the model's value, symmetric on the log scale.
SAME_BAND = 1.25
#: Phases of the CFS period at which a burst may start, evenly spread.
PHASES = 400


def cpuset_size(cpus: str | None) -> int | None:
    """How many CPUs a cpuset list names ("0-7" -> 8, "0" -> 1, "0,2-3" -> 3); None when unset."""
    if cpus is None or str(cpus).strip() == "":
        return None
    count = 0
    for part in str(cpus).split(","):
        low, _, high = part.strip().partition("-")
        count += int(high) - int(low) + 1 if high else 1
    return count


def phases(period_ms: float, n: int = PHASES) -> np.ndarray:
    """Evenly spread start phases in [0, period)."""
    return (np.arange(n) + 0.5) * period_ms / n


@dataclass(frozen=True)
class Burst:
    """One burst at each phase: wall time, the wait spent throttled, periods touched, and the
    periods in which it used more than the quota (``bursts``, the kernel's nr_bursts) with the CPU
    so borrowed from a burst budget (``excess_ms``, burst_time)."""

    wall_ms: np.ndarray
    pause_ms: np.ndarray
    touched: np.ndarray
    throttled_periods: np.ndarray
    bursts: np.ndarray | None = None
    excess_ms: np.ndarray | None = None

    @property
    def throttled_round_share(self) -> float:
        """The share of the phases at which the burst is throttled at all: the model's throttled_round_share."""
        return float(np.mean(self.throttled_periods > 0))


def fluid_burst(
    cpu_ms: float, rate: float, quota_ms: float | None, period_ms: float, start: np.ndarray, budget_ms: float = 0.0
) -> Burst:
    """The CFS model of one burst of ``cpu_ms`` on ``rate`` CPUs under ``quota_ms`` per period, per start phase.

    With a burst budget B (X1) the group, idle long enough before, starts with Q + B, and at every
    period boundary the pool becomes min(left + Q, Q + B) (the kernel's refill); B = 0 is plain CFS.
    """
    if cpu_ms < 0 or rate <= 0 or period_ms <= 0 or budget_ms < 0:
        raise ValueError(
            f"a burst needs cpu >= 0, rate > 0, a period > 0 and a budget >= 0, got {cpu_ms}, "
            f"{rate}, {period_ms}, {budget_ms}"
        )
    start = np.asarray(start, dtype=float)
    remaining = np.full(start.shape, float(cpu_ms))
    wall = np.zeros(start.shape)
    pause = np.zeros(start.shape)
    touched = np.zeros(start.shape, dtype=int)
    throttled = np.zeros(start.shape, dtype=int)
    bursts = np.zeros(start.shape, dtype=int)
    excess = np.zeros(start.shape)
    phase = start.copy()
    active = remaining > 0
    touched[active] = 1
    quota = math.inf if quota_ms is None else float(quota_ms)
    cap = quota + (float(budget_ms) if quota_ms is not None else 0.0)
    pool = np.full(start.shape, cap)
    for _ in range(100_000):
        if not active.any():
            break
        left = period_ms - phase
        usable = rate * left
        finish = active & (remaining <= np.minimum(pool, usable) + 1e-9)
        stop = active & ~finish & (pool < usable)  # the pool runs out: wait for the next period
        cross = active & ~finish & ~stop  # the period ends first: a refill, no wait
        used = np.where(finish, remaining, np.where(stop, pool, np.where(cross, usable, 0.0)))
        wall[finish] += remaining[finish] / rate
        wall[stop] += left[stop]
        pause[stop] += left[stop] - pool[stop] / rate
        throttled[stop] += 1
        wall[cross] += left[cross]
        over = active & (used > quota + 1e-9)
        bursts[over] += 1
        excess[over] += used[over] - quota
        remaining = remaining - used
        pool = np.minimum(pool - used + quota, cap)
        active = active & ~finish
        touched[active] += 1
        phase = np.zeros(start.shape)
    else:  # pragma: no cover - a quota of 0 would never finish
        raise ValueError("the burst never finishes under this quota")
    return Burst(wall, pause, touched, throttled, bursts, excess)


def quota_ms(limit_milli: int | None, period_ms: float) -> float | None:
    return None if limit_milli is None else limit_milli / 1000 * period_ms


@dataclass(frozen=True)
class BurstArm:
    """An E2a/E6 arm as the model sees it."""

    threads: int
    work_ms: float
    cpus: int
    limit_milli: int | None
    period_ms: float
    budget_ms: float = 0.0

    @property
    def queues(self) -> int:
        """Run queues the burst keeps busy: min(threads, CPUs)."""
        return min(self.threads, self.cpus)

    @property
    def counted_queues(self) -> tuple[int, int]:
        """How many run queues count each throttled wait (docs/LAB.md §1): at least 1, at most ``queues``;
        where in between depends on the scheduler's placement, which the model does not fix."""
        return 1, self.queues

    @property
    def cpu_ms(self) -> float:
        return self.threads * self.work_ms

    @property
    def free_wall_ms(self) -> float:
        """Wall time without a limit: the burst's CPU over its run queues."""
        return self.cpu_ms / self.queues

    @property
    def quota_ms(self) -> float | None:
        return quota_ms(self.limit_milli, self.period_ms)

    def burst(self) -> Burst:
        return fluid_burst(
            self.cpu_ms, self.queues, self.quota_ms, self.period_ms, phases(self.period_ms), self.budget_ms
        )

    def median_wall_ms(self) -> float:
        return float(np.median(self.burst().wall_ms))

    def throttled_ms(self) -> float:
        """Mean throttled time per round at the upper end of :attr:`counted_queues`: every wait
        counted once per busy run queue."""
        return float(np.mean(self.burst().pause_ms)) * self.queues

    def describe(self) -> str:
        limit = "no limit" if self.limit_milli is None else f"limit {q.format_cpu(self.limit_milli)}"
        quota = "" if self.quota_ms is None else f" (quota {self.quota_ms:g} ms per {self.period_ms:g} ms)"
        if self.budget_ms and self.quota_ms is not None:
            quota += f", burst budget {self.budget_ms:g} ms"
        return (
            f"{self.threads} x {self.work_ms:g} ms = {self.cpu_ms:g} ms of CPU on min({self.threads}, "
            f"{self.cpus} CPUs) = {self.queues} run queues, {limit}{quota}"
        )


def burst_arm(spec: VariantSpec, cpus: int, period_ms: float) -> BurstArm:
    if spec.threads is None or spec.work_ms is None:
        raise ValueError(f"{spec.experiment} {spec.name} is not a burst (threads and work_ms unset)")
    return BurstArm(
        int(spec.threads),
        float(spec.work_ms),
        int(cpus),
        spec.milli("limit"),
        float(period_ms),
        float(spec.burst_ms or 0.0),
    )


def latency_threshold(ratio: float) -> float:
    """The threshold for a predicted latency ratio, once a fixed overhead of up to
    :data:`OVERHEAD_ALLOWANCE` x the faster arm's time is added to both arms.

    Slower arm a = r x b: (a + 2b) / (b + 2b) = (r + 2) / 3; faster arm (r < 1), overhead 2a:
    3r / (1 + 2r). Both lie between the model's ratio and 1, a third of the way on the slow side.
    """
    h = OVERHEAD_ALLOWANCE
    if ratio >= 1:
        return (ratio + h) / (1 + h)
    return (1 + h) * ratio / (1 + h * ratio)


def rate_threshold(ratio: float) -> float:
    """The threshold for a predicted ratio of rates or counts (no fixed overhead): the geometric
    midpoint between the model's ratio and 1 (half the predicted effect on the log scale)."""
    return math.sqrt(ratio)


# --------------------------------------------------------------------------
# services


@dataclass(frozen=True)
class ServiceArm:
    """An E2b/E7/E8 arm: its clumps, the CPU it can get, its quota."""

    clump: int
    cpu_per_request_ms: float
    rate: float  # CPUs the service's clump can run on (its share of a busy node included)
    limit_milli: int | None
    period_ms: float
    rps: float

    @property
    def quota_ms(self) -> float | None:
        return quota_ms(self.limit_milli, self.period_ms)

    @property
    def clump_cpu_ms(self) -> float:
        return self.clump * self.cpu_per_request_ms

    def latencies(self) -> np.ndarray:
        return clump_latencies(self.clump, self.cpu_per_request_ms, self.rate, self.quota_ms, self.period_ms)

    def quantile(self, p: float) -> float:
        return float(np.quantile(self.latencies(), p, method="linear"))

    def clump_max(self, clumps: int) -> float:
        """The slowest request of ``clumps`` clumps arriving at independent phases, the median over runs: a
        clump's slowest request is its last, and the maximum of n independent draws lies below the
        0.5^(1/n) quantile of one draw in half of the runs."""
        if clumps < 1:
            raise ValueError(f"the maximum over clumps needs at least one clump, got {clumps}")
        last = fluid_burst(self.clump_cpu_ms, self.rate, self.quota_ms, self.period_ms, phases(self.period_ms))
        return float(np.quantile(last.wall_ms, 0.5 ** (1 / clumps), method="linear"))

    def window_latency(self, q: float | None, clumps: int) -> float:
        """The model's value of what a window compares: its q-quantile over a clump's requests and phases, or
        (``q`` None) the maximum over its ``clumps`` clumps (:meth:`clump_max`)."""
        return self.clump_max(clumps) if q is None else self.quantile(q)

    def throttles(self) -> bool:
        """Does a clump exceed what the quota lets it use in one period?"""
        return (
            self.quota_ms is not None
            and self.clump_cpu_ms > self.quota_ms
            and self.rate * self.period_ms > self.quota_ms
        )

    def clumps_per_period(self) -> float:
        return self.rps / self.clump * self.period_ms / 1000


def clump_latencies(clump: int, cpu_ms: float, rate: float, quota: float | None, period_ms: float) -> np.ndarray:
    """Latencies of every request of a clump (k-th done after k x cpu_ms of CPU), at every start phase."""
    start = phases(period_ms)
    return np.concatenate([fluid_burst(k * cpu_ms, rate, quota, period_ms, start).wall_ms for k in range(1, clump + 1)])


def pod_weight(request_milli: int | None) -> int:
    """kubelet's pod-level weight of a pod's summed requests (docs/LAB.md §2, linear)."""
    return q.shares_to_weight_linear(q.milli_to_shares(request_milli))


def node_share(spec: VariantSpec) -> float:
    """The service's share of a node a busy neighbor keeps saturated: its pod weight over both pods'."""
    if not spec.neighbor:
        return 1.0
    own, other = pod_weight(spec.milli("request")), pod_weight(spec.milli("neighbor_request"))
    return own / (own + other)


def service_arm(spec: VariantSpec, period_ms: float = q.DEFAULT_PERIOD_US / 1000) -> ServiceArm:
    """The service model of one E2b/E7/E8 variant from its parameters."""
    if spec.work_us is None or spec.rps is None:
        raise ValueError(f"{spec.experiment} {spec.name} is not a service variant (work_us and rps unset)")
    cpus = cpuset_size(spec.node_cpus) or 1
    limit = spec.milli("limit")
    build_line = "1.25" if spec.build == "go125mod" else "1.24"
    procs = spec.gomaxprocs or q.go_default_gomaxprocs(build_line, limit, cpus)
    rate = min(procs, cpus) * node_share(spec)
    return ServiceArm(
        clump=int(spec.clump or 1),
        cpu_per_request_ms=spec.work_us / 1000 * CPU_PER_WORK,
        rate=rate,
        limit_milli=limit,
        period_ms=period_ms,
        rps=float(spec.rps),
    )


# --------------------------------------------------------------------------
# steady arrivals near the limit (X5, docs/EXPERIMENTS.md)


def poisson_tail(k: int, mean: float) -> float:
    """P(N >= k) for N ~ Poisson(mean)."""
    if k <= 0:
        return 1.0
    term = math.exp(-mean)
    below = term
    for i in range(1, k):
        term *= mean / i
        below += term
    return max(0.0, 1.0 - below)


@dataclass(frozen=True)
class SteadyArm:
    """X5: steady (clump 1) Poisson arrivals, each request ``request_cpu_ms`` of CPU, under a quota."""

    rps: float
    request_cpu_ms: float
    limit_milli: int
    period_ms: float

    @property
    def quota_ms(self) -> float:
        return self.limit_milli / 1000 * self.period_ms

    @property
    def use(self) -> float:
        """Average use as a share of the limit: rps x CPU per request / limit."""
        return self.rps * self.request_cpu_ms / 1000 / (self.limit_milli / 1000)

    @property
    def fits(self) -> int:
        """Requests one period's quota holds."""
        return int(math.floor(self.quota_ms / self.request_cpu_ms + 1e-9))

    def throttled_share(self) -> float:
        """Share of ACTIVE periods whose arrivals need more than the quota: P(N > fits) / P(N >= 1),
        N ~ Poisson(rps x period) (a period without arrivals is not counted by the kernel)."""
        mean = self.rps * self.period_ms / 1000
        return poisson_tail(self.fits + 1, mean) / (1 - math.exp(-mean))

    def describe(self) -> str:
        return (
            f"{self.rps:g} req/s x {self.request_cpu_ms:g} ms of CPU = {self.use:.0%} of limit "
            f"{q.format_cpu(self.limit_milli)} (quota {self.quota_ms:g} ms per {self.period_ms:g} ms: "
            f"{self.fits} requests)"
        )


def steady_arm(spec: VariantSpec, period_ms: float = q.DEFAULT_PERIOD_US / 1000) -> SteadyArm:
    limit = spec.milli("limit")
    if spec.rps is None or limit is None:
        raise ValueError(f"{spec.experiment} {spec.name} needs an open-loop rate and a limit")
    cpu_ms = (
        spec.request_cpu_us / 1000 if spec.request_cpu_us is not None else (spec.work_us or 0) / 1000 * CPU_PER_WORK
    )
    return SteadyArm(float(spec.rps), cpu_ms, limit, period_ms)


# --------------------------------------------------------------------------
# overlapping bursts of several pods (X4, docs/EXPERIMENTS.md)


def overlap_rate(a: BurstArm, pods: int, synchronized: bool) -> float:
    """CPUs one pod's burst runs on: alone (staggered) min(threads, CPUs); together, the node's CPUs shared
    evenly by the pods' busy threads (each pod's run queues get CPUs / pods when there are more threads than CPUs)."""
    if synchronized and pods * a.threads > a.cpus:
        return min(a.threads, a.cpus / pods)
    return a.queues


def overlap_burst(a: BurstArm, pods: int, synchronized: bool) -> Burst:
    """One pod's burst under its own quota when the pods burst together or apart."""
    return fluid_burst(
        a.cpu_ms, overlap_rate(a, pods, synchronized), a.quota_ms, a.period_ms, phases(a.period_ms), a.budget_ms
    )
