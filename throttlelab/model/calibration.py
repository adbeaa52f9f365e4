"""The calibration step (pure): what short pilot runs before the measured runs fix (STATS.md §2, §5).

Two quantities depend on the machine and are measured, never assumed, before any measured run:

- **CPU per request** of a service at steady arrivals (X5): a variant that says ``target_use`` (a share
  of its limit) gets its rate from a pilot of the experiment's service,
  ``rps = target_use x limit / CPU per request`` (:func:`resolve`), and its model cost
  (``request_cpu_us``) is the pilot's. Every run of the experiment reads the same pilot, so its arms'
  parameters, and the thresholds derived from them, are fixed before the first measured run.
- **A quiet host's interference floor**: the share of the run's CPUs that other work takes while the lab
  does nothing, sampled by the kernel's ticks; a run is disturbed above ``floor + 3 SD`` of that share
  over windows as long as the run's judged window (:func:`quiet_threshold`).

Pilots are recorded (results/<backend>/calibration/, each raw log's ``meta.calibration`` and the
environment table) and never analysed as measurements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from throttlelab.errors import SpecError
from throttlelab.model.variants import VariantSpec

#: The pilot's use of the limit by the profile's stated cost: between the arms (30% and 90%), so a stated
#: cost that is off by 1.5x either way still leaves the service unthrottled enough to count its CPU.
PILOT_USE = 0.6
#: The rule for a disturbed run, written before any run (STATS.md §2): floor + 3 SD of the quiet share.
QUIET_SD = 3.0
#: A calibration file's schema version.
SCHEMA = 1
#: Backends whose runs the interference meter judges on this host (experiments/runner.py), and so those
#: whose runs a quiet-host calibration serves; on kind and kubernetes the lab runs inside node containers or
#: elsewhere, on vm inside a guest.
METERED_BACKENDS = ("local", "docker")
#: Backends whose pilots run on this host before the measured runs; the vm backend's guest runs its batch
#: alone, so its calibrated arms take the profile's stated cost (and their raw logs say so).
PILOT_BACKENDS = ("local", "docker", "kind", "kubernetes")


def calibrated(spec: VariantSpec) -> bool:
    """Whether a variant's rate comes from the calibration step (it says ``target_use``)."""
    return spec.target_use is not None


def pilot_spec(specs: Sequence[VariantSpec]) -> VariantSpec:
    """The pilot of an experiment whose variants take their rate from the calibration: its first calibrated
    variant's service (``target_use`` dropped: the arms' shares do not change the pilot) at :data:`PILOT_USE`
    of its limit by the profile's stated cost (``request_cpu_us``), steady arrivals, no /ping requests (the
    cost counted is one /work request's)."""
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
    data.update(rps=rate_for(PILOT_USE, limit, float(spec.request_cpu_us)), clump=1, ping_rps=0)
    return VariantSpec.from_dict(spec.experiment, "pilot", data)


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
    return {
        "cpu_per_request_us": round(usage / ok, 1),
        "usage_us": usage,
        "requests": ok,
        "window_s": float(summary["window_s"]),
    }


def resolve(spec: VariantSpec, calibration: Mapping[str, Any] | None) -> tuple[VariantSpec, dict[str, Any] | None]:
    """A calibrated variant's parameters for its runs: its rate from the pilot's CPU per request, and that cost
    as its model's (``request_cpu_us``); the profile's stated cost is kept in the returned record (``stated``).
    Without a calibration (a backend whose pilot does not run here) the stated cost sets the rate, and the record
    says so. A variant that is not calibrated comes back unchanged, with no record."""
    if not calibrated(spec):
        return spec, None
    limit = spec.milli("limit")
    stated = spec.request_cpu_us
    if limit is None or stated is None:
        raise SpecError(
            f"experiments.{spec.experiment}.variants.{spec.name}.target_use needs a limit and request_cpu_us"
        )
    if calibration is None:
        cost, record = float(stated), {"source": "stated", "note": "no pilot ran: the profile's stated cost"}
    else:
        cost = float(calibration["cpu_per_request_us"])
        record = {"source": "pilot", **{k: calibration[k] for k in PILOT_KEYS if k in calibration}}
    rps = rate_for(float(spec.target_use), limit, cost)
    record.update(stated_cpu_per_request_us=stated, target_use=spec.target_use, rps=rps)
    return spec.with_changes(rps=rps, request_cpu_us=cost), record


#: What a variant's raw log keeps of its experiment's pilot (``meta.calibration``).
PILOT_KEYS = ("cpu_per_request_us", "requests", "window_s", "pilot_rps", "seed", "start", "kernel")


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


def quiet_threshold(quiet: Mapping[str, Any], cpus: Sequence[int], window_s: float) -> dict[str, Any]:
    """The disturbance threshold of a run on ``cpus`` judged over ``window_s``: the quiet host's mean share over
    windows of that length (the floor) + :data:`QUIET_SD` SD of it. Windows longer than half the quiet
    sampling take half of it (the SD of the shorter window is the larger: the threshold errs high). Returns
    floor, sd, threshold, the window used and how many windows it averaged."""
    step_s, hz = float(quiet["step_s"]), float(quiet["hz"])
    ticks = [[int(v) for v in row] for row in quiet["ticks"]]
    missing = [c for c in cpus if not ticks or c >= len(ticks[0])]
    if missing:
        raise ValueError(f"the quiet host's calibration sampled no CPU {missing}")
    steps = max(1, min(int(round(window_s / step_s)), len(ticks) // 2))
    shares = window_shares(ticks, list(cpus), steps, hz, step_s)
    floor = sum(shares) / len(shares)
    sd = math.sqrt(sum((s - floor) ** 2 for s in shares) / (len(shares) - 1)) if len(shares) > 1 else 0.0
    return {
        "floor": round(floor, 5),
        "sd": round(sd, 5),
        "threshold": round(floor + QUIET_SD * sd, 5),
        "window_s": round(steps * step_s, 3),
        "windows": len(shares),
        "rule": f"floor + {QUIET_SD:g} SD of a quiet host's share (calibration)",
    }


def threshold_of(
    quiet: Mapping[str, Any] | None, cpus: Sequence[int], window_s: float, ceiling: float
) -> dict[str, Any]:
    """The threshold a run is judged by: :func:`quiet_threshold`, at most ``ceiling`` (config's
    ``disturbance.max_other_share``: a calibration on a host that was not quiet must not let anything pass);
    without a quiet calibration, the ceiling itself (a fixed share, the record says so)."""
    if quiet is None:
        return {"threshold": ceiling, "rule": "fixed: disturbance.max_other_share (no quiet-host calibration)"}
    rule = quiet_threshold(quiet, cpus, window_s)
    if rule["threshold"] > ceiling:
        return {**rule, "threshold": ceiling, "rule": rule["rule"] + f", capped at max_other_share {ceiling:g}"}
    return rule
