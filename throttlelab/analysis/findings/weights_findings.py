"""The weights' claim F8 (docs/LAB.md §5) as data: requests become weights (E4 read-back; E5/E10 shares of one CPU).

Shares of a CPU are compared as log-ratios (docs/STATISTICS.md §3): per run, member i's share over the
share of the phase's largest member, against w_i / w_ref of the weights the model predicts
(:func:`throttlelab.model.weight_pods.expected_shares`, the same function the experiments build their
pods with), with a RELATIVE band. The band is derived from the model: half the log distance
between runc's two conversions inside the two-container pod, so a check tells them apart;
each check's derivation says which other rule (shares proportional to requests, the other
conversion) its band can or cannot tell from the predicted one. Evaluation is
:mod:`throttlelab.analysis.findings.engine`'s.
"""

from __future__ import annotations

import math

import numpy as np

from throttlelab.analysis.findings.engine import Check, Evidence, Finding, Requirement, cite
from throttlelab.model import quantities as q
from throttlelab.model.reference import quote
from throttlelab.model.weight_pods import PHASES, expected_shares, lab_pods
from throttlelab.model.variants import (
    WEIGHTS_TWO_CONTAINER,
)

RUNTIMES = {"E5": "runc-new", "E10": "runc-old"}


def _weights(phase: str, runtime: str) -> dict[str, int]:
    pod_names, level = PHASES[phase]
    return {
        member: weight
        for member, (weight, _) in expected_shares(lab_pods(pod_names, ("spin",), "go124mod"), level, runtime).items()
    }


def _requests(phase: str) -> dict[str, int]:
    """Each member's CPU request (millicores): what shares proportional to requests would follow."""
    pod_names, level = PHASES[phase]
    pods = lab_pods(pod_names, ("spin",), "go124mod")
    if level == "pod":
        return {f"pod-{p.name}": sum(c.request_milli or 0 for c in p.containers) for p in pods}
    (pod,) = pods
    return {c.name: c.request_milli or 0 for c in pod.containers}


def _reference(phase: str) -> str:
    """The phase's largest member, the denominator of its log-ratios."""
    weights = _weights(phase, "runc-new")
    return max(weights, key=weights.get)


def conversion_gap() -> float:
    """|log| distance between runc's two conversions for the two-container pod's small/big ratio."""
    new, old = _weights(WEIGHTS_TWO_CONTAINER, "runc-new"), _weights(WEIGHTS_TWO_CONTAINER, "runc-old")
    return abs(math.log(new["small"] / new["big"]) - math.log(old["small"] / old["big"]))


#: The relative band of a share log-ratio: x/÷ exp(half the gap between the conversions).
SHARE_BAND = math.exp(conversion_gap() / 2)


def _alternatives(phase: str, member: str, runtime: str) -> str:
    """Which other rules the band tells from the predicted one, and which it cannot."""
    ref = _reference(phase)
    weights = _weights(phase, runtime)
    predicted = weights[member] / weights[ref]
    other_runtime = "runc-old" if runtime == "runc-new" else "runc-new"
    other = _weights(phase, other_runtime)
    requests = _requests(phase)
    rules = {
        f"the other conversion ({other_runtime}: {other[member]} : {other[ref]})": other[member] / other[ref],
        f"shares proportional to requests ({requests[member]}m : {requests[ref]}m)": requests[member] / requests[ref],
    }
    texts = []
    for name, ratio in rules.items():
        gap = abs(math.log(ratio / predicted))
        if gap < 1e-9:
            texts.append(f"{name} predicts the same {ratio:.3g} here")
        elif gap > math.log(SHARE_BAND):
            texts.append(f"tells it from {name}: {ratio:.3g}, outside the band")
        else:
            weights_share = weights[member] / sum(weights.values())
            request_share = requests[member] / sum(requests.values())
            texts.append(
                f"CANNOT tell it from {name}: {ratio:.3g}, {100 * gap:.1f}% apart, inside the band "
                f"(shares {weights_share:.4f} vs {request_share:.4f})"
            )
    return "; ".join(texts)


def _share_values(experiment: str, member: str, ref: str):
    def values(evidence: Evidence, variant: str) -> np.ndarray:
        return evidence.values(experiment, variant, f"share_{member}") / evidence.values(
            experiment, variant, f"share_{ref}"
        )

    return values


def runtime_conversion_applied(experiment: str) -> Requirement:
    """The backend must write the runtime conversion the variant names (local does, on v1 and v2; vm's
    guest is cgroup v2, where its local node applies the conversion and its real node's runc does).

    Docker on cgroup v1 hands kubelet's shares to the host's runc unchanged (100m -> 102, 1 CPU -> 1024);
    no v2 weight conversion happens, so neither runc-new nor runc-old can be chosen or measured there. The
    same holds for a real runc under kubelet (kind, the real node) on a cgroup v1 host: the runs' cgroup
    version says so (the real node's E5 on v1 read 102 : 1024, the linear shares, under runc 1.4.3).
    """

    def test(evidence: Evidence) -> str | None:
        runs = evidence.runs[evidence.runs["experiment"] == experiment]
        backends = set(runs["backend"]) if "backend" in runs.columns else set()
        if "cgroup_version" in runs.columns:  # a real runc (kind, kubernetes) converts shares on cgroup v2 only
            real_v1 = runs[
                runs["backend"].isin(["kind", "kubernetes"]) & (runs["cgroup_version"].astype(str).str.strip() == "1")
            ]
            if len(real_v1):
                return (
                    f"{', '.join(sorted(set(real_v1['backend'])))} on cgroup v1: a real runc (both of the real "
                    "node's, 1.3.0 and 1.4.3) writes kubelet's shares as they are (100m -> 102, 1 CPU -> 1024); "
                    "its conversions to v2 weights (docs/LAB.md §2) happen only on cgroup v2, so runc-new's and "
                    "runc-old's shares cannot differ here; the measured shares are in the tables"
                )
        if backends <= {"local", "kind", "kubernetes", "vm"}:
            return None
        return (
            f"backend {', '.join(sorted(backends))} does not apply a chosen runtime conversion: on cgroup v1 the "
            "engine's runc writes kubelet's shares as they are (100m -> 102, 1 CPU -> 1024), so the weights of "
            "runc-new (17 : 100) and runc-old (4 : 39) cannot be set there; the measured shares are in the tables"
        )

    return Requirement(f"the runtime conversion applied ({experiment})", test)


def levels_read_back(experiment: str) -> Requirement:
    """Every run must have read back at least one designed level: comparing nothing proves nothing."""

    def test(evidence: Evidence) -> str | None:
        m = evidence.metrics
        levels = m[(m["experiment"] == experiment) & (m["metric"] == "readback_levels")]
        empty = levels[levels["value"].fillna(0) <= 0]
        if levels.empty:
            return f"no {experiment} run reports how many levels it read back"
        if len(empty):
            runs = ", ".join(f"{v} rep{int(r)}" for v, r in zip(empty["variant"], empty["repeat"]))
            return f"0 levels read back in {len(empty)} of {len(levels)} runs ({runs}): nothing was compared"
        return None

    return Requirement("levels read back", test)


def share_checks() -> tuple[Check, ...]:
    """One log-ratio check per member (but the largest), experiment and phase."""
    lab = quote("F8").checks  # one measurement of the lab per (experiment, phase)
    checks = []
    band = SHARE_BAND
    for experiment, runtime in RUNTIMES.items():
        for phase, (_, level) in PHASES.items():
            ref = _reference(phase)
            weights = _weights(phase, runtime)
            for member, weight in weights.items():
                if member == ref:
                    continue
                ratio = weight / weights[ref]
                checks.append(
                    Check(
                        label=f"share_{member} / share_{ref} {experiment} {phase}",
                        kind="level",
                        experiment=experiment,
                        metric=f"share_{member}/share_{ref}",
                        variant=phase,
                        baseline=None,
                        relation="within",
                        threshold=(round(ratio / band, 4), round(ratio * band, 4)),
                        scale="log",
                        values=_share_values(experiment, member, ref),
                        requirements=(runtime_conversion_applied(experiment),),
                        disturbance="insensitive",
                        reference=lab[f"{experiment} {phase}"],
                        why=(
                            f"{runtime}, {level} level ({'kubelet' if level == 'pod' else runtime}'s formula, docs/LAB.md "
                            f"§2): weights {weight} : {weights[ref]}, so share_{member} / share_{ref} = {ratio:.4g} on "
                            f"one contended CPU (CFS gives busy siblings time in proportion to their weights). Compared "
                            f"as a log-ratio per run (Student t on the logs) with a relative band x/÷ {band:.3g}: half "
                            f"the log distance between runc's two conversions inside the two-container pod (17 : 100 "
                            f"against 4 : 39), so that it tells them apart. This band: "
                            f"{_alternatives(phase, member, runtime)}. cgroup v1 rounds "
                            f"shares = weight x 1024 / 100 down to whole numbers: at most "
                            f"{100 * _v1_rounding(weights):.1f}% here, well inside the band."
                        ),
                    )
                )
    return tuple(checks)


def _v1_rounding(weights: dict[str, int]) -> float:
    """The largest relative error cgroup v1's whole-number shares add to a weight ratio."""
    errors = [abs(q.weight_to_v1_shares(w) / (w * 1024 / 100) - 1) for w in weights.values()]
    return 2 * max(errors)


F8 = cite(
    Finding(
        id="F8",
        claim="Pod-level and container-level weights follow kubelet's and runc's formulas, and busy containers "
        "pinned to one CPU share it in the ratio of those weights, for the new and the old runtime conversion.",
        checks=(
            Check(
                label="read back = design (E4)",
                kind="agreement",
                experiment="E4",
                metric="readback_levels_ok",
                variant="*",
                baseline="readback_levels",
                relation="within",
                threshold=(1.0, 1.0),
                scale="linear",
                requirements=(levels_read_back("E4"),),
                why="Weights and quotas are read back, not measured: one level off the docs/LAB.md §2 formulas "
                "contradicts the claim; a run that read back no level compared nothing. Both runtime "
                "conversions are variants of E4.",
            ),
            *share_checks(),
        ),
    )
)

FINDINGS: tuple[Finding, ...] = (F8,)
