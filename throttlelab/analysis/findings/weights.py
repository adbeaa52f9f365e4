"""The weights' claim F8 (SPEC §5) as data: requests become weights (E4 read-back; E5/E10 shares of one CPU).

The shares each check expects come from the same model as the experiments'
pods (:mod:`throttlelab.model.weights`); evaluation is
:mod:`throttlelab.analysis.findings.engine`'s.
"""

from __future__ import annotations

from throttlelab.analysis.findings.engine import Check, Evidence, Finding, Requirement, cite
from throttlelab.model.reference import quote
from throttlelab.model.weights import PHASES, expected_shares, lab_pods

#: Allowed distance between a measured share and the share the weights predict.
SHARE_TOLERANCE = 0.02
_SHARE_WHY = (
    "On one CPU, CFS gives busy siblings time in proportion to their weights, so the share should equal "
    "w / sum(w) of the siblings. The band is +/- 0.02 (2 points of the CPU): wider than cgroup v1's integer "
    "rounding of shares = w x 1024 / 100 (at most 0.002) and than scheduler granularity over a reading, "
    "narrower than the gap between the two runtime conversions inside the two-container pod (0.145 vs 0.093), "
    "so the check tells the conversions apart."
)


def share_checks() -> tuple[Check, ...]:
    """One level check per member, experiment and phase: its share within SHARE_TOLERANCE of w / sum(w)."""
    lab = quote("F8").checks  # one measurement of the lab per (experiment, phase)
    checks = []
    for experiment, runtime in (("E5", "runc-new"), ("E10", "runc-old")):
        for phase, (pod_names, level) in PHASES.items():
            pods = lab_pods(pod_names, ("spin",), "go124mod")
            for member, (weight, share) in expected_shares(pods, level, runtime).items():
                checks.append(Check(
                    label=f"share_{member} {experiment} {phase}", kind="level", experiment=experiment,
                    metric=f"share_{member}", variant=phase, baseline=None, relation="within",
                    threshold=(round(share - SHARE_TOLERANCE, 4), round(share + SHARE_TOLERANCE, 4)),
                    scale="linear", reference=lab[f"{experiment} {phase}"],
                    why=f"{runtime}, {level} level: weight {weight} -> expected share {share:.3f}. {_SHARE_WHY}",
                ))
    return tuple(checks)


def runtime_conversion_applied(experiment: str) -> Requirement:
    """The backend must write the runtime conversion the variant names (local does, on v1 and v2).

    Docker on cgroup v1 hands kubelet's shares to the host's runc unchanged (100m -> 102, 1 CPU -> 1024);
    no v2 weight conversion happens, so neither runc-new nor runc-old can be chosen or measured there.
    """

    def requirement(evidence: Evidence) -> str | None:
        runs = evidence.runs[evidence.runs["experiment"] == experiment]
        backends = set(runs["backend"]) if "backend" in runs.columns else set()
        if backends <= {"local", "kind", "kubernetes"}:
            return None
        return (
            f"backend {', '.join(sorted(backends))} does not apply a chosen runtime conversion: on cgroup v1 the "
            "engine's runc writes kubelet's shares as they are (100m -> 102, 1 CPU -> 1024), so the weights of "
            "runc-new (17 : 100) and runc-old (4 : 39) cannot be set there; the measured shares are in the tables"
        )

    return requirement


F8 = cite(Finding(
    id="F8",
    claim="Pod-level and container-level weights follow kubelet's and runc's formulas, and busy containers "
          "pinned to one CPU share it in the ratio of those weights, for the new and the old runtime conversion.",
    checks=(
        Check(
            label="read back = design (E4)", kind="agreement", experiment="E4", metric="readback_levels_ok",
            variant="*", baseline="readback_levels", relation="within", threshold=(1.0, 1.0), scale="linear",
            why="Weights and quotas are read back, not measured: one level off the SPEC §2 formulas "
                "contradicts the claim. Both runtime conversions are variants of E4.",
        ),
        *share_checks(),
    ),
    requirements=(runtime_conversion_applied("E5"),),
))

FINDINGS: tuple[Finding, ...] = (F8,)
