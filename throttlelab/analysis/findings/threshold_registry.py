"""The threshold registry (docs/STATISTICS.md §5): every check's threshold, its value per profile and the revision
of its derivation.

One row per check (finding id, label as written, "{q}" included). The values live beside it, in
tests/analysis/golden/thresholds.csv: every check's threshold as each profile derives it before any data
(finding_catalogue.threshold_table), with the row's ``key`` and the derivation that names the constants and
parameters it comes from; tests/analysis/test_threshold_registry.py fails when a derived value differs from
that file, and the file is rewritten only where the check's registry row changed too, so a constant or a
profile that moves a threshold shows as a new row here and a visible diff there.

``commit`` is the commit whose derivation (or fixed number) the check's threshold comes from; ``date`` is that
commit's committer date (UTC; the test holds it against git); ``after_data`` says whether that revision was
made after this project had measured the check. A check revised after data is judged only on the runs made at
or after its revision's date (a run's meta ``start``), and the findings show its verdict on all runs beside
(finding_catalogue.py, docs/STATISTICS.md §5). tests/analysis/test_findings.py fails on a check without a row.

Where the history before the ruff-format rewrite (ba0eae9) was not traced, the row names the main
commit the threshold stood at before the per-finding verdict rules (531138e) and says "at or before".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Revision:
    commit: str
    after_data: bool
    note: str
    #: the commit's committer date, ISO 8601 with its offset: runs made before it cannot judge a check revised
    #: after data
    date: str = ""

    def __post_init__(self) -> None:
        try:
            datetime.fromisoformat(self.date)
        except ValueError:
            raise ValueError(
                f"threshold registry: revision {self.commit}: date {self.date!r} is not an ISO 8601 time "
                "(its commit's committer date, git show -s --format=%cI)"
            ) from None

    @property
    def when(self) -> datetime:
        return datetime.fromisoformat(self.date)

    @property
    def key(self) -> str:
        """The row as thresholds.csv names it: its commit, and the note that says what it fixed."""
        return f"{self.commit}: {self.note}"


#: main before the per-finding verdict rules: thresholds not revised since stand "at or before" it
BASE = Revision("531138e", False, "at or before main 531138e (derivation unchanged since)", "2026-12-02T11:27:47+00:00")
#: ours (X1-X6): docs/EXPERIMENTS.md wrote every threshold before any run
OURS = Revision("a14257a", False, "docs/EXPERIMENTS.md, written before any X1-X6 run", "2026-12-01T05:15:31+00:00")


def _revision_of(commit: str, date: str, after_data: bool = True):
    """The rows one commit revised, each with its own note."""
    return lambda note: Revision(commit, after_data, note, date)


#: the least favourable ends and F16's one-sided premise, after the quick runs
_LEAST_FAVOURABLE = _revision_of("a5a8721", "2026-12-02T12:29:26+00:00")
#: F17 as non-inferiority, after the quick runs
_NON_INFERIORITY = _revision_of("ceccf75", "2026-12-02T12:33:14+00:00")
#: latency checks compare what their windows' independent clumps support, after the quick runs
_CLUMPS = _revision_of("47aa3ce", "2026-12-05T18:56:02+00:00")
_CLUMPS_NOTE = "the quantile chosen by the window's clumps, not its requests (with fewer than 6, the maximum over them)"
#: F2's premise, the threads on two run queues measured by getcpu, after F2 read contradicted on kind and the real node
_TWO_QUEUES = _revision_of("8b23839", "2026-12-06T04:24:11+00:00")
#: F7's and F17's latency ratios judged block by block on common arrivals, after quick runs had judged them unpaired
_BLOCKS = _revision_of("bca2dd4", "2026-12-06T07:31:44+00:00")
_BLOCKS_NOTE = "paired: the per-block ratio of arms that shared their arrival seed (was Welch on independent runs)"
#: F14's lower band ends, amended before any X3 data
_F14_LOWER_ENDS = Revision(
    "a14257a",
    False,
    "lower band ends amended before any X3 data (docs/EXPERIMENTS.md)",
    date="2026-12-01T05:15:31+00:00",
)

REGISTRY: dict[tuple[str, str], Revision] = {
    ("F1", "p50_wall_ms limit1 / nolimit"): BASE,
    ("F1", "p50_wall_ms limit500m / nolimit"): BASE,
    ("F1", "p50_wall_ms limit2 / nolimit"): BASE,
    ("F2", "two_queue_share limit500m"): _TWO_QUEUES(
        "a premise: the share of rounds whose threads mainly ran on two or more CPUs above 1/2"
    ),
    ("F2", "throttled_ms_per_round / extra wall limit500m"): Revision(
        "6c343fc",
        True,
        "band [1, p] of docs/LAB.md §1 after the quick runs of 2026-11-30; supporting",
        date="2026-12-01T04:36:25+00:00",
    ),
    ("F2", "throttled_ms_per_round / mean_wall_ms limit500m"): BASE,
    ("F3", "periods_per_round limit2"): BASE,
    ("F4", "throttled_ms limit1-2threads / limit1"): _LEAST_FAVOURABLE(
        "the least favourable end (0.878 -> 0.937 on quick; was sqrt of 0.439 = 0.663)"
    ),
    ("F4", "p50_wall_ms limit1-2threads / limit1"): BASE,
    ("F5", "gomaxprocs = rule"): BASE,
    ("F6", "throttled_ratio clumped-limit"): BASE,
    ("F6", "throttled_ratio steady-limit"): BASE,
    ("F6", "work {q} clumped-limit / clumped-nolimit"): _CLUMPS(_CLUMPS_NOTE),
    ("F6", "avg_cores clumped-limit"): BASE,
    ("F7", "work {q} two-half / one-limit"): _BLOCKS(f"{_BLOCKS_NOTE}; {_CLUMPS_NOTE}"),
    ("F7", "work {q} two-limit / one-double"): _BLOCKS(f"{_BLOCKS_NOTE}; {_CLUMPS_NOTE}"),
    ("F8", "read back = design (E4)"): BASE,
    ("F8", "share_pod-p100m / share_pod-two E5 pods"): BASE,
    ("F8", "share_pod-p1 / share_pod-two E5 pods"): BASE,
    ("F8", "share_small / share_big E5 two-container"): BASE,
    ("F8", "share_pod-p100m / share_pod-two E10 pods"): BASE,
    ("F8", "share_pod-p1 / share_pod-two E10 pods"): BASE,
    ("F8", "share_small / share_big E10 two-container"): BASE,
    ("F9", "throttled_ratio busy-lim2x"): BASE,
    ("F9", "work {q} busy-lim2x / idle-lim2x"): _CLUMPS(_CLUMPS_NOTE),
    ("F9", "busy_cores busy-lim2x / busy-lim"): BASE,
    ("F9", "work {q} busy-lim2x-req-full / busy-lim2x"): _CLUMPS(_CLUMPS_NOTE),
    ("F9", "busy_cores busy-lim2x-req-full / busy-lim2x"): BASE,
    ("F10", "throttled / pause in the scrape window, limit"): Revision(
        "e253eb8", True, "against 1 (was sqrt(q)) after the quick run of 2026-12-01", date="2026-12-01T02:24:45+00:00"
    ),
    ("F11", "throughput_rps threads-one / threads-node"): BASE,
    ("F12", "p50_wall_ms budget-full / budget0"): OURS,
    ("F12", "p50_wall_ms budget-full / nolimit"): OURS,
    ("F12", "throttled_round_share budget-full"): Revision(
        "6e1348e",
        True,
        "the share of rounds throttled below half budget0's model share (was throttled periods per round, a count "
        "with no upper end, which identical runs never bound) after the quick runs",
        date="2026-12-06T10:31:20+00:00",
    ),
    ("F12", "bursts_per_round budget-full"): OURS,
    ("F12", "burst_ms_per_round budget-full"): OURS,
    ("F12", "p50_wall_ms budget-half / budget0"): OURS,
    ("F13", "p50_wall_ms period20 / period100"): OURS,
    ("F13", "p50_wall_ms period5 / period100"): OURS,
    ("F13", "throttled_per_round period5 / period100"): OURS,
    ("F13", "pause per throttle period5 / period100"): OURS,
    ("F14", "throttled_ms_per_round / extra wall cpus1"): _F14_LOWER_ENDS,
    ("F14", "throttled_ms_per_round / extra wall cpus2"): _F14_LOWER_ENDS,
    ("F15", "p50_wall_ms synchronized / staggered"): OURS,
    ("F15", "throttled_round_share synchronized"): Revision(
        "1b4ee44",
        True,
        "the share of rounds throttled below one half (was throttled periods per round below 0.5, a count with no "
        "upper end, which identical runs never bound) after the quick runs; supporting",
        date="2026-12-06T10:56:00+00:00",
    ),
    ("F16", "avg_cores use30"): OURS,
    ("F16", "avg_cores use90"): _LEAST_FAVOURABLE(
        "one-sided [0.8, 1.0) of the limit (was 0.9 x/÷ 1.5), and a premise that gates"
    ),
    ("F16", "throttled_ratio use30"): OURS,
    ("F16", "throttled_ratio use90"): OURS,
    ("F16", "work {q} use90 / use30"): OURS,
    ("F17", "work {q} clumped-500m-g2 / clumped-500m-g1"): _BLOCKS(
        f"{_BLOCKS_NOTE}; non-inferiority, at most 10% slower, at {_CLUMPS_NOTE}"
    ),
    ("F17", "throughput_rps closed-500m-g2 / closed-500m-g1"): _NON_INFERIORITY(
        "non-inferiority, at least 1/1.1 (replaces the x/÷ 1.25 band as decisive)"
    ),
    ("F17", "work {q} clumped-500m-g1 / clumped-500m-g2"): _BLOCKS(
        f"{_BLOCKS_NOTE}; supporting magnitude with the load generator on the second CPU, at {_CLUMPS_NOTE}"
    ),
    ("F17", "throughput_rps closed-500m-g2 / closed-500m-g1 (same)"): _NON_INFERIORITY(
        "the x/÷ 1.25 band kept as a supporting check"
    ),
}


def revision(finding: str, label: str) -> Revision | None:
    """The row of a check (its label as written, before "{q}" is resolved)."""
    return REGISTRY.get((finding, label))


def revised_after_data() -> dict[tuple[str, str], Revision]:
    """The checks whose threshold was revised after data: only runs made at or after the revision judge them."""
    return {key: r for key, r in REGISTRY.items() if r.after_data}
