"""The calibration step (pure): what short pilot runs before the measured runs fix (docs/STATISTICS.md §2, §5).

Two quantities depend on the machine and are measured, never assumed, before any measured run:

- **CPU per request** of a service at steady arrivals (X5): a variant that says ``target_use`` (a share
  of its limit) gets its rate from pilots of the experiment's service at two rates, the line of its CPU
  against its rate (``background + rate x marginal cost``) solved for ``target_use x limit``
  (:func:`resolve`), and its model cost (``request_cpu_us``) is the average there. Every run of the experiment reads the same pilot, so its arms'
  parameters, and the thresholds derived from them, are fixed before the first measured run.
- **A quiet host's interference floor**: the share of the run's CPUs that other work takes while the lab
  does nothing (the backend's runtime up and idle), sampled by the kernel's ticks; a run is disturbed above
  ``floor + 3 SD`` of that share over windows as long as the run's judged window, and never below the
  smallest share the tick count can tell from zero over that window (:func:`quiet_threshold`,
  :func:`tick_resolution`).

Pilots are recorded (results/<backend>/calibration/, each raw log's ``meta.calibration`` and the
environment table) and never analysed as measurements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from throttlelab.errors import SpecError
from throttlelab.model.variants import VariantSpec

#: The pilots' uses of the limit: the design's outer arms (30% and 90%). Two rates, because a service's CPU is
#: not proportional to its rate: it has a background (the /ping requests, the Go runtime's own work), so its
#: average cost per request falls as the rate rises (here a pilot's steady request cost ~2.9 ms at 30 req/s, a
#: quick run's ~2.6 ms at 45); the line through both points is what the arms use. The first pilot runs at the
#: profile's stated cost; each later one is aimed by the cost its predecessor measured (:func:`aimed_pilot`),
#: so the line is read near the point it was measured at, not extrapolated from a rate the stated cost chose.
PILOT_USES = (0.3, 0.9)
#: The rule for a disturbed run, written before any run (docs/STATISTICS.md §2): floor + 3 SD of the quiet share.
QUIET_SD = 3.0
#: How many disjoint windows of a run's length the quiet sampling must hold for its SD to be one: a longer run
#: window is judged by the SD of windows this many times shorter than the sampling (20 s: 4 s). Sliding
#: windows overlap, so 20 s of sampling holds only two disjoint 10 s windows and their sliding shares hardly
#: vary (2026-12-03: thresholds of 0.4% for E7's 10 s windows against 0.8% for its 2.5 s ones in the same
#: run, 20 disturbed attempts in 48 runs, 13 of them the 10 s arms'); the shorter window's SD is the larger,
#: so the threshold errs high.
QUIET_DISJOINT_WINDOWS = 5
#: A calibration file's schema version.
SCHEMA = 1
#: Backends whose runs the interference meter judges on this host (experiments/runner.py), and so those
#: whose runs a quiet-host calibration serves; on kind and kubernetes the lab runs inside node containers or
#: elsewhere, on vm inside a guest.
METERED_BACKENDS = ("local", "docker")
#: The processes of each metered backend's runtime, by their command name (``/proc/<pid>/comm``, which the
#: kernel cuts to 15 characters): the engine that starts, stops and accounts the lab's containers is part of
#: the runtime under test, as the orchestrator is part of the lab, so the meter counts their CPU apart
#: (host/interference.py). The local backend's runtime is the runner itself, counted with the lab.
RUNTIME_PROCESSES: dict[str, tuple[str, ...]] = {
    "local": (),
    "docker": ("dockerd", "containerd", "containerd-shim", "docker-proxy", "docker-init", "runc"),
}
#: Backends whose pilots run on this host before the measured runs; the vm backend's guest runs its batch
#: alone, so its calibrated arms take the profile's stated cost (and their raw logs say so).
PILOT_BACKENDS = ("local", "docker", "kind", "kubernetes")


def calibrated(spec: VariantSpec) -> bool:
    """Whether a variant's rate comes from the calibration step (it says ``target_use``)."""
    return spec.target_use is not None


def pilot_specs(specs: Sequence[VariantSpec]) -> list[VariantSpec]:
    """The pilots of an experiment whose variants take their rate from the calibration: its first calibrated
    variant's service as its runs have it (``target_use`` dropped: the arms' shares do not change the pilots;
    its /ping requests kept: the average use the premises check includes them), steady arrivals, at each of
    :data:`PILOT_USES` of its limit by the profile's stated cost (``request_cpu_us``). These are the pilots as
    planned, which the rule's parameters hold; when they run, each after the first is re-aimed by its
    predecessor's measured cost (:func:`aimed_pilot`)."""
    spec = next((s for s in specs if calibrated(s)), None)
    if spec is None:
        raise SpecError("no variant says target_use: nothing to calibrate")
    where = f"experiments.{spec.experiment}.variants.{spec.name}"
    limit = spec.milli("limit")
    if limit is None:
        raise SpecError(f"{where}.target_use needs a limit (a share of it)")
    if spec.request_cpu_us is None:
        raise SpecError(f"{where}.request_cpu_us: the pilot's rate needs the profile's stated CPU per request")
    data = {k: v for k, v in spec.to_dict().items() if k != "target_use"}
    return [
        VariantSpec.from_dict(
            spec.experiment, f"pilot{k}", {**data, "rps": rate_for(use, limit, float(spec.request_cpu_us)), "clump": 1}
        )
        for k, use in enumerate(PILOT_USES)
    ]


def aimed_pilot(pilot: VariantSpec, previous: Mapping[str, float]) -> tuple[VariantSpec, float]:
    """A later pilot re-aimed at the use of its limit it was planned for (its planned rate at the profile's
    stated cost, ``request_cpu_us``) by the average CPU per request the previous pilot measured
    (``cpu_per_request_us``, its background included); returns the pilot and that use.

    The stated cost is a guess made on another machine: a pilot at 90% by it can run far from 90%, and the
    line through the pilots then reaches the 90% arm's use only by extrapolation. The previous pilot's average
    errs on the safe side: the background it includes is spread over more requests at the higher rate, so the
    re-aimed pilot runs a little under its use and the arm's rate lies just beyond it on the line."""
    limit = pilot.milli("limit")
    if limit is None or pilot.request_cpu_us is None or pilot.rps is None:
        raise SpecError(
            f"experiments.{pilot.experiment}: a pilot needs a limit, a rate and the stated cost it was planned at"
        )
    use = round(float(pilot.rps) * float(pilot.request_cpu_us) / 1e6 / (limit / 1000), 3)
    return pilot.with_changes(rps=rate_for(use, limit, float(previous["cpu_per_request_us"]))), use


def fit_line(points: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The service's CPU as a line of its rate through the pilots' points (``rps``: /work requests answered per
    second, ``cores``: its CPU over the window): ``background_cores`` (at no /work request) and ``marginal_us``
    (each further request). Least squares over the points; a single point, or a line that does not rise, is
    refused (ValueError): no rate could be solved from it."""
    if len(points) < 2:
        raise ValueError("a line needs two pilots")
    xs = [float(p["rps"]) for p in points]
    ys = [float(p["cores"]) for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        raise ValueError("the pilots ran at one rate")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    if slope <= 0:
        raise ValueError(f"the service's CPU did not rise with its rate ({ys} cores at {xs} req/s)")
    return {"background_cores": round(my - slope * mx, 5), "marginal_us": round(slope * 1e6, 1)}


def rate_on_line(use: float, limit_milli: int, line: Mapping[str, float]) -> float:
    """The rate at which the line's service uses ``use`` of its limit on average (0.1 req/s steps)."""
    rps = (use * limit_milli / 1000 - float(line["background_cores"])) / (float(line["marginal_us"]) / 1e6)
    if rps <= 0:
        raise ValueError(
            f"the service's background alone ({line['background_cores']:.3g} cores) uses {use:.0%} of its limit"
        )
    return round(rps, 1)


def rate_for(use: float, limit_milli: int, cpu_per_request_us: float) -> float:
    """Requests per second that use ``use`` of a ``limit_milli`` limit at ``cpu_per_request_us`` each
    (0.1 req/s steps: the generator takes any rate)."""
    if cpu_per_request_us <= 0:
        raise ValueError(f"CPU per request must be positive, got {cpu_per_request_us}")
    return round(use * limit_milli / 1000 / (cpu_per_request_us / 1e6), 1)


def cpu_per_request_us(load_records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """A pilot's CPU per /work request from the load generator's records: the service's cgroup usage over the
    measured window (its /stats before and after, summed over targets) over the /work requests answered in it.
    Returns ``cpu_per_request_us``, ``usage_us``, ``requests`` and ``window_s``."""
    before = {r["target"]: r for r in load_records if r.get("type") == "stats" and r.get("when") == "before"}
    after = {r["target"]: r for r in load_records if r.get("type") == "stats" and r.get("when") == "after"}
    summary = next((r for r in load_records if r.get("type") == "summary" and "work" in r), None)
    if not before or set(before) != set(after) or summary is None:
        raise ValueError("the pilot's load wrote no /stats before and after its window, or no summary")
    usage = 0.0
    for target, b in before.items():
        a = after[target]
        if b.get("stats") is None or a.get("stats") is None:
            raise ValueError(f"the pilot could not read /stats of target {target}: {b.get('err') or a.get('err')}")
        usage += float(a["stats"]["cgroup"]["usage_usec"]) - float(b["stats"]["cgroup"]["usage_usec"])
    ok = int(summary["work"]["ok"])
    if ok <= 0:
        raise ValueError("the pilot's service answered no /work request in its window")
    window = float(summary["window_s"])
    return {
        "cpu_per_request_us": round(usage / ok, 1),
        "usage_us": usage,
        "requests": ok,
        "window_s": window,
        "rps": round(ok / window, 3),
        "cores": round(usage / 1e6 / window, 5),
    }


def resolve(spec: VariantSpec, calibration: Mapping[str, Any] | None) -> tuple[VariantSpec, dict[str, Any] | None]:
    """A calibrated variant's parameters for its runs: its rate where the pilots' line of CPU against rate
    reaches ``target_use`` of its limit, and its model's cost per request (``request_cpu_us``) the average
    there (target_use x limit / rate, background included: the quota's demand per request); the profile's
    stated cost is kept in the returned record (``stated``). Without a calibration (a backend whose pilots do
    not run here) the stated cost sets the rate, and the record says so. A variant that is not calibrated
    comes back unchanged, with no record."""
    if not calibrated(spec):
        return spec, None
    limit = spec.milli("limit")
    stated = spec.request_cpu_us
    if limit is None or stated is None:
        raise SpecError(
            f"experiments.{spec.experiment}.variants.{spec.name}.target_use needs a limit and request_cpu_us"
        )
    use = float(spec.target_use)
    if calibration is None:
        rps = rate_for(use, limit, float(stated))
        record: dict[str, Any] = {"source": "stated", "note": "no pilot ran: the profile's stated cost"}
    else:
        try:
            rps = rate_on_line(use, limit, calibration)
        except (KeyError, ValueError) as exc:
            raise SpecError(
                f"experiments.{spec.experiment}.variants.{spec.name}: the pilots set no rate: {exc}"
            ) from exc
        record = {"source": "pilot", **{k: calibration[k] for k in PILOT_KEYS if k in calibration}}
    cost = round(use * limit / 1000 / rps * 1e6, 1)
    record.update(stated_cpu_per_request_us=stated, target_use=use, rps=rps, cpu_per_request_us=cost)
    return spec.with_changes(rps=rps, request_cpu_us=cost), record


#: What a variant's raw log keeps of its experiment's pilots (``meta.calibration``).
PILOT_KEYS = ("background_cores", "marginal_us", "points", "seed", "start", "kernel")


# --------------------------------------------------------------------------
# a quiet host's floor


def window_shares(ticks: Sequence[Sequence[int]], cpus: Sequence[int], steps: int, hz: float, step_s: float):
    """Shares of ``cpus``' capacity that other work used over every run of ``steps`` consecutive samples
    (sliding by one sample). ``ticks[i][cpu]``: busy clock ticks of each CPU in sample interval ``i``."""
    per_step = [sum(row[c] for c in cpus) for row in ticks]
    capacity = steps * step_s * hz * len(cpus)
    out = []
    window = sum(per_step[:steps])
    for i in range(steps, len(per_step) + 1):
        out.append(window / capacity)
        if i < len(per_step):
            window += per_step[i] - per_step[i - steps]
    return out


def tick_resolution(window_s: float, cpus: int, hz: float) -> float:
    """The smallest share of ``cpus`` CPUs over ``window_s`` that the meter's tick count can tell from zero.

    The meter reads busy time in clock ticks (``hz`` a second per CPU), so a window holds
    ``hz x window_s x cpus`` of them. Other work of a steady share ``s`` shows as a count of about
    ``lambda = s x hz x window_s x cpus`` ticks, with the counting noise of a Poisson count, ``sqrt(lambda)``.
    That count lies :data:`QUIET_SD` of its own SDs above zero once ``lambda >= QUIET_SD x sqrt(lambda)``, that
    is ``lambda >= QUIET_SD ** 2`` ticks; a smaller share is not told from no share at all by the same rule
    that judges the floor (floor + QUIET_SD SD). A window of no capacity resolves nothing (1.0)."""
    ticks = hz * window_s * cpus
    return 1.0 if ticks <= 0 else min(1.0, QUIET_SD**2 / ticks)


def quiet_threshold(quiet: Mapping[str, Any], cpus: Sequence[int], window_s: float) -> dict[str, Any]:
    """The disturbance threshold of a run on ``cpus`` judged over ``window_s``: the quiet host's mean share over
    windows of that length (the floor) + :data:`QUIET_SD` SD of it, and never below :func:`tick_resolution` of
    the run's own window (a quiet host whose ticks were all zero would otherwise give a threshold of 0, and one
    tick of any process would make a run disturbed). A window longer than the quiet sampling holds
    :data:`QUIET_DISJOINT_WINDOWS` times takes that length for the floor and SD instead (the SD of the shorter
    window is the larger: the threshold errs high). Returns floor, sd, resolution, threshold, the window used
    and how many windows it averaged."""
    step_s, hz = float(quiet["step_s"]), float(quiet["hz"])
    ticks = [[int(v) for v in row] for row in quiet["ticks"]]
    missing = [c for c in cpus if not ticks or c >= len(ticks[0])]
    if missing:
        raise ValueError(f"the quiet host's calibration sampled no CPU {missing}")
    steps = max(1, min(int(round(window_s / step_s)), len(ticks) // QUIET_DISJOINT_WINDOWS))
    shares = window_shares(ticks, list(cpus), steps, hz, step_s)
    floor = sum(shares) / len(shares)
    sd = math.sqrt(sum((s - floor) ** 2 for s in shares) / (len(shares) - 1)) if len(shares) > 1 else 0.0
    calibrated = floor + QUIET_SD * sd
    resolution = tick_resolution(window_s, len(cpus), hz)
    return {
        "floor": round(floor, 5),
        "sd": round(sd, 5),
        "calibrated": round(calibrated, 5),
        "resolution": round(resolution, 5),
        "threshold": round(max(calibrated, resolution), 5),
        "window_s": round(steps * step_s, 3),
        "windows": len(shares),
        "rule": _rule_text(calibrated >= resolution, window_s, len(cpus), hz),
    }


def _rule_text(calibrated: bool, window_s: float, cpus: int, hz: float, ceiling: float | None = None) -> str:
    if calibrated:
        text = f"floor + {QUIET_SD:g} SD of a quiet host's share (calibration)"
    else:
        text = f"the meter's resolution: {QUIET_SD:g}^2 ticks of {hz:g} Hz over {window_s:.3g} s x {cpus} CPU(s)"
    return text if ceiling is None else f"{text}, capped at max_other_share {ceiling:g}"


def threshold_of(
    quiet: Mapping[str, Any] | None, cpus: Sequence[int], window_s: float, ceiling: float
) -> dict[str, Any]:
    """The threshold a run is judged by: :func:`quiet_threshold`, its calibrated part at most ``ceiling``
    (config's ``disturbance.max_other_share``: a calibration on a host that was not quiet must not let anything
    pass); without a quiet calibration, the ceiling itself (a fixed share, the record says so). The meter's
    resolution over the window is not capped: a window too short to tell the ceiling from zero is judged at
    what it can tell."""
    if quiet is None:
        return {"threshold": ceiling, "rule": "fixed: disturbance.max_other_share (no quiet-host calibration)"}
    rule = quiet_threshold(quiet, cpus, window_s)
    if rule["calibrated"] <= ceiling:
        return rule
    hz = float(quiet["hz"])
    if rule["resolution"] >= ceiling:
        return {**rule, "threshold": rule["resolution"], "rule": _rule_text(False, window_s, len(cpus), hz)}
    return {**rule, "threshold": ceiling, "rule": _rule_text(True, window_s, len(cpus), hz, ceiling)}


#: The parts of the lab's own system, whose work above their idle level is not interference: the
#: orchestrator, the backend's runtime and the kernel's threads (host/interference.py).
OWN_SYSTEM = ("orchestrator", "runtime", "kernel")


def idle_levels(quiet: Mapping[str, Any] | None) -> dict[str, float]:
    """The CPUs (0.01: 1% of one CPU) that the lab's own system took while the quiet host was sampled: the
    orchestrator waiting on the calibration job, the backend's runtime up and idle, the kernel's threads
    (``own`` of a calibration file; zero where it was not sampled). Their idle noise is in the floor, so a run
    takes out of its window only what they used above these levels."""
    own = (quiet or {}).get("own") or {}
    return {who: float(own.get(f"{who}_cpu") or 0.0) for who in OWN_SYSTEM}
