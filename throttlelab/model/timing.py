"""The planning side's estimate of a profile's time (docs/EXPERIMENTS.md "## Time"): pure, from the design.

A run costs the time its experiment measures, planned from the variant's parameters (:func:`measuring_s`:
rounds x interval for a burst job and E6's calibration rounds before it, warmup + window for a load, settling
+ readings for E5/E10, the window of a spin, nothing for a read-out), plus a fixed cost per run
(:data:`PER_RUN_S`: Snakemake starting the job, the runner's start, the cgroups and pods made and taken
down, the interference meter, writing the log), plus the pipeline's fixed cost once (:data:`PIPELINE_S`:
building the workload, parsing, statistics, figures, the report). Both costs were measured on this project's
2-CPU machine (docs/EXPERIMENTS.md "## Time" gives the run they come from); the quick profile must stay within
:data:`QUICK_BUDGET_S`, and tests/model/test_timing.py holds the estimate against the budget and against the
measured run.
"""

from __future__ import annotations

from throttlelab.model import calibration
from throttlelab.model.config import Design
from throttlelab.model.variants import VariantSpec

#: The quick profile's budget: 15 minutes end to end on the 2-CPU machine.
QUICK_BUDGET_S = 15 * 60
#: What a run costs besides its measuring time, and the pipeline once (docs/EXPERIMENTS.md "## Time"). The quick
#: runs at 6a897ca (311 runs, 735 s of planned measuring) took 867 and 871 s end to end: 132 s for both together,
#: which one design cannot split; the runner itself took 0.06-0.13 s per run beyond its window (raw logs' start,
#: end and window_s, 2026-12-02), the rest of a run's cost is Snakemake starting the job and the runner's imports.
PER_RUN_S = 0.3
PIPELINE_S = 40.0


def measuring_s(spec: VariantSpec) -> float:
    """The seconds a run of this variant measures, planned from its parameters."""
    if spec.rounds and spec.interval_ms:
        return (spec.rounds + (spec.calibration_rounds or 0)) * spec.interval_ms / 1000
    if spec.settle_ms is not None and spec.samples:
        return (spec.settle_ms + spec.samples * (spec.sample_ms or 0)) / 1000
    if spec.duration_ms:
        return ((spec.warmup_ms or 0) + spec.duration_ms) / 1000
    return 0.0


def run_s(spec: VariantSpec) -> float:
    """The planned seconds of one run of this variant: its measuring time and the fixed cost of a run."""
    return measuring_s(spec) + PER_RUN_S


def calibration_s(design: Design) -> float:
    """The planned seconds of the calibration step before the measured runs (model/calibration.py): the quiet
    host's sampling where runs are metered (``disturbance.quiet_calibration_s``, and a run's fixed cost; its
    wait for quiet CPUs is not planned: a quiet host needs none), and each calibrated experiment's pilots, each
    a run of its own, where pilots run on this host."""
    total = 0.0
    quiet_s = design.disturbance.get("quiet_calibration_s") or 0
    if design.backend in calibration.METERED_BACKENDS and quiet_s:
        total += quiet_s + PER_RUN_S
    if design.backend in calibration.PILOT_BACKENDS:
        for exp in design.experiments.values():
            specs = list(exp.variants.values())
            if any(calibration.calibrated(spec) for spec in specs):
                total += sum(run_s(pilot) for pilot in calibration.pilot_specs(specs))
    return total


def estimate_s(design: Design) -> float:
    """The planned seconds of the whole design, end to end: the calibration step, every run of every
    experiment, and the pipeline."""
    return PIPELINE_S + calibration_s(design) + sum(run_s(spec) for spec in _every_run(design))


def measuring_total_s(design: Design) -> float:
    """The seconds of measuring alone, summed over every run of the design."""
    return sum(measuring_s(spec) for spec in _every_run(design))


def _every_run(design: Design) -> list[VariantSpec]:
    """The variant of every run of the design, once per repeat."""
    return [design.experiments[e].variants[v] for e, v, _ in design.jobs()]
