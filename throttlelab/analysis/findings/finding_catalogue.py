"""Every claim, in the order of its number, from the family modules (model/catalogue.py's ``family``):
jobs F1-F5 and F12-F15, services F6, F7, F9-F11, F16 and F17, weights F8. F1-F11 are the lab's, F12-F17
ours beyond the lab (docs/EXPERIMENTS.md), as the catalogue's ``ours`` column of their experiments says."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from throttlelab.analysis import stats
from throttlelab.analysis.findings import engine, jobs_findings, services_findings, threshold_registry, weights_findings
from throttlelab.analysis.findings.engine import Evidence, Finding
from throttlelab.model.config import Design
from throttlelab.model.placement import parse_cpuset

FINDINGS: tuple[Finding, ...] = tuple(
    sorted(
        (*jobs_findings.FINDINGS, *weights_findings.FINDINGS, *services_findings.FINDINGS), key=lambda f: int(f.id[1:])
    )
)


#: docs/FINDINGS.md's per-check table: its header (tests/analysis/test_findings.py holds the doc against it)
CHECK_TABLE_HEADER = (
    "| finding | check | role | threshold | end of the model | zones | fixed by |\n|---|---|---|---|---|---|---|"
)


def check_table(checks: pd.DataFrame, findings: Sequence[Finding] = FINDINGS) -> str:
    """docs/FINDINGS.md's per-check table from the checks.csv that :func:`evaluate` made of ``findings`` (the
    synthetic lab's, in the doc): per check its threshold, the end of the model it took, its zones and the
    commit that fixed it; a revision made after data says from when runs judge the check."""
    written = [(f.id, c.label) for f in findings for c in f.checks]
    if len(written) != len(checks):
        raise ValueError(f"{len(checks)} rows of checks.csv for the {len(written)} checks of the findings given")
    lines = [CHECK_TABLE_HEADER]
    for (finding, label), r in zip(written, checks.itertuples()):
        fixed = threshold_registry.revision(finding, label)
        by = "" if fixed is None else fixed.commit
        if fixed is not None and fixed.after_data:
            by += f" (after data: judges the runs made from {fixed.date} on)"
        cells = (r.id, r.check, r.role, r.expected, r.end or "no free parameter", r.zones, by)
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def revision_since() -> dict[tuple[str, str], engine.Since]:
    """The checks revised after data (the registry's ``after_data`` rows), each judged only on the runs made at
    or after its revision's date."""
    return {
        key: engine.Since(r.when, f"{r.commit} of {r.date}")
        for key, r in threshold_registry.revised_after_data().items()
    }


def evaluate(evidence: Evidence, findings: Sequence[Finding] = FINDINGS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(findings.csv, checks.csv) for the given evidence: every claim of the catalogue unless told otherwise;
    checks.csv with the commit that fixed each threshold (:mod:`.threshold_registry`).

    The registry's rule (docs/STATISTICS.md §5): a check revised after data is judged only on the runs made at or after
    its revision (the verdicts, and so the findings' verdicts), and both tables show the verdict on all runs
    beside (``verdict_all_runs``); checks.csv's ``judged_on`` says which runs judged each check."""
    rows, checks = engine.evaluate(evidence, findings, revision_since())
    all_rows, all_checks = engine.evaluate(evidence, findings)
    labels = [c.label for f in findings for c in f.checks]
    ids = [f.id for f in findings for _ in f.checks]
    fixed = [threshold_registry.revision(i, label) for i, label in zip(ids, labels)]
    checks = checks.assign(
        threshold_commit=[r.commit if r else "" for r in fixed],
        threshold_note=[(r.note + ("; revised after data" if r.after_data else "")) if r else "" for r in fixed],
        verdict_all_runs=all_checks["verdict"].to_numpy(),
    )
    return rows.assign(verdict_all_runs=all_rows["verdict"].to_numpy()), checks


#: The node each profile's thresholds are derived for (runtime.NumCPU() of a variant that names no CPUs): the
#: 2-CPU development machine of ci and quick, the lab's 10-CPU node of paper and lab-node.
PROFILE_NODE_CPUS: Mapping[str, int] = {"ci": 2, "quick": 2, "paper": 10, "lab-node": 10}
#: The kernel's default CFS period, for a variant that sets none.
DEFAULT_PERIOD_US = 100_000
#: thresholds.csv's columns (tests/analysis/golden/thresholds.csv)
THRESHOLD_COLUMNS = ["profile", "finding", "check", "role", "threshold", "levels", "registry", "derivation"]


def design_evidence(design: Design, num_cpu: int) -> Evidence:
    """The evidence a threshold needs and no measurement: every variant of the design with its parameters (one
    run each, no metric), the CPUs its processes would see (its ``cpus`` or ``node_cpus``, else ``num_cpu``)
    and its CFS period."""
    runs, headers = [], []
    for experiment in design.experiments.values():
        for name, spec in experiment.variants.items():
            key = {"experiment": experiment.name, "variant": name, "repeat": 0}
            runs.append({**key, **spec.columns()})
            cpus = spec.cpus or spec.node_cpus
            headers.append(
                {
                    **key,
                    "num_cpu": len(parse_cpuset(cpus)) if cpus else num_cpu,
                    "cg_period_us": spec.period_us or DEFAULT_PERIOD_US,
                }
            )
    return Evidence(
        metrics=pd.DataFrame(columns=["experiment", "variant", "repeat", "metric", "value"]),
        runs=pd.DataFrame(runs),
        headers=pd.DataFrame(headers),
        profile_experiments=frozenset(design.experiments),
    )


def judged_levels(design: Design, experiment: str) -> str:
    """The two-sided levels an experiment's checks are judged at, fixed by the profile before any data
    (thresholds.csv's ``levels``): its confidence level, or for an experiment measured in two stages each look's
    (docs/STATISTICS.md §6). A "contradicted" is judged again at the Bonferroni level derived from these."""
    exp = design.experiments[experiment]
    if exp.first_look is None:
        return f"{design.confidence:g}"
    first, second = stats.look_levels(exp.look_fraction, design.confidence)
    return (
        f"look 1 of 2 after {exp.first_look} of {exp.most_repeats} repeats: {first:.4f} (one-sided "
        f"{stats.one_sided_level(first):.4f}); look 2 of 2: {second:.4f} ({stats.one_sided_level(second):.4f})"
    )


def threshold_table(design: Design, num_cpu: int, findings: Sequence[Finding] = FINDINGS) -> pd.DataFrame:
    """Every check's threshold as the design derives it, before any data (thresholds.csv): its value, the
    levels it is judged at, the registry row it belongs to, and the derivation that names the constants and
    parameters it comes from. A check whose variants the profile leaves out, or whose model predicts nothing
    here, says why instead."""
    evidence = design_evidence(design, num_cpu)
    levels = {name: judged_levels(design, name) for name in design.experiments}
    rows = []
    for finding in findings:
        for check in finding.checks:
            fixed = threshold_registry.revision(finding.id, check.label)
            if check.kind == "agreement":
                value, why = f"{check.metric} = {check.baseline}", check.why
            else:
                r = engine.evaluate_check(finding.id, check, evidence)
                needs = [p for p in r.reason.split("; ") if p.startswith("needs ") and "runs" not in p]
                value = r.expected if r.threshold else "not derived: " + ("; ".join(needs) or r.reason)
                why = r.why
            rows.append(
                (
                    design.profile,
                    finding.id,
                    check.label,
                    check.role,
                    value,
                    levels.get(check.experiment, ""),
                    fixed.key if fixed else "",
                    " ".join(why.split()),
                )
            )
    return pd.DataFrame.from_records(rows, columns=THRESHOLD_COLUMNS)
