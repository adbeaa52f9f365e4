"""A variant's parameters as one typed, immutable object.

A profile (config/profiles/*.yaml, checked against config/profile.schema.yaml)
gives every variant of an experiment a mapping of parameters. At the config
boundary that mapping becomes a :class:`VariantSpec`, and it stays one: the
runner hands it to the experiment, the raw log's ``meta`` record stores
:meth:`VariantSpec.to_dict` (exactly the keys the profile gave, so a raw log
round-trips), and the tidy tables carry :meth:`VariantSpec.columns`, one
``param_<field>`` column per field, instead of a JSON string.

Values are kept as the profile wrote them (a CPU quantity ``"250m"`` or ``1``
stays as written; :func:`throttlelab.model.quantities.parse_cpu` reads it);
a field the profile did not set is ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Union

from throttlelab.errors import SpecError  # noqa: F401 (re-exported: callers import it from here too)
from throttlelab.model.quantities import parse_cpu, span_arrivals

Cpu = Union[str, int, float]  # a CPU quantity as written: "250m", "1.5", 2

COLUMN_PREFIX = "param_"


@dataclass(frozen=True)
class Resources:
    """A container's CPU request and limit (E1's app and sidecar)."""

    request: Cpu | None = None
    limit: Cpu | None = None
    given: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str) -> Resources:
        unknown = set(data) - {"request", "limit"}
        if unknown:
            raise SpecError(
                f"{where}: unknown key(s) {', '.join(sorted(unknown))}; a resources block has request and limit"
            )
        return cls(request=data.get("request"), limit=data.get("limit"), given=tuple(sorted(data)))

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.given}

    @property
    def request_milli(self) -> int | None:
        return None if self.request is None else parse_cpu(self.request, "request")

    @property
    def limit_milli(self) -> int | None:
        return None if self.limit is None else parse_cpu(self.limit, "limit")


# field name -> the Python types its value may have (bool is checked apart: it is an int too)
_NUMBER = (int, float)
_TYPES: dict[str, tuple[type, ...]] = {}


@dataclass(frozen=True)
class VariantSpec:
    """The parameters of one variant of one experiment (the union of every experiment's fields)."""

    experiment: str
    name: str
    build: str | None = None
    runtime: str | None = None
    # CPU resources of the experiment's main container, and E1's two containers
    request: Cpu | None = None
    limit: Cpu | None = None
    app: Resources | None = None
    sidecar: Resources | None = None
    gomaxprocs: int | None = None
    godebug: str | None = None
    # burst jobs (E2a, E6) and spin (S1)
    threads: int | None = None
    work_ms: float | None = None
    interval_ms: float | None = None
    rounds: int | None = None
    calibration_rounds: int | None = None
    # beyond the lab (docs/EXPERIMENTS.md): X2's CFS period, X1's burst budget
    period_ms: float | None = None
    burst_ms: float | None = None
    duration_ms: float | None = None
    report_ms: float | None = None
    # weights (E5, E10)
    phase: str | None = None
    cpus: str | None = None
    settle_ms: float | None = None
    sample_ms: float | None = None
    samples: int | None = None
    # services (E2b, E7, E8, S2)
    work_us: float | None = None
    alloc_bytes: int | None = None
    live_mb: int | None = None
    rps: float | None = None
    clump: int | None = None
    ping_rps: float | None = None
    workers: int | None = None
    warmup_ms: float | None = None
    node_cpus: str | None = None
    load_cpus: str | None = None
    replicas: int | None = None
    neighbor: bool | None = None
    neighbor_request: Cpu | None = None
    neighbor_threads: int | None = None
    mode: str | None = None
    upstream_request: Cpu | None = None
    upstream_limit: Cpu | None = None
    upstream_work_us: float | None = None
    upstream_alloc_bytes: int | None = None
    upstream_live_mb: int | None = None
    upstream_gomaxprocs: int | None = None
    # E2a: each burner thread pinned to its own CPU of those the job may run on (cpulab burst -spread)
    spread: bool | None = None
    # X4 (docs/EXPERIMENTS.md): several pods each running the burst job, together or staggered
    pods: int | None = None
    stagger: bool | None = None
    # X5 (docs/EXPERIMENTS.md): the CPU one request costs, as the profile states it, for the model
    request_cpu_us: float | None = None
    # ... and the share of its limit an arm is designed to use: its rate comes from the calibration step
    # (model/calibration.py: rps = target_use x limit / the pilot's CPU per request)
    target_use: float | None = None
    # monitoring (E6)
    housekeeping_ms: float | None = None
    first_scrape_ms: float | None = None
    scrape_gap_ms: float | None = None
    # the keys the profile gave, so to_dict() round-trips exactly (an explicit null stays one)
    given: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_dict(cls, experiment: str, name: str, data: Mapping[str, Any]) -> VariantSpec:
        """Build the spec from a profile's merged mapping; a key of no field or a value of the
        wrong type raises SpecError naming ``experiments.<E>.variants.<name>.<key>``."""
        where = f"experiments.{experiment}.variants.{name}"
        names = _param_names()
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise SpecError(f"{where}: unknown parameter(s) {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key in ("app", "sidecar") and value is not None:
                if not isinstance(value, Mapping):
                    raise SpecError(f"{where}.{key}: expected a mapping with request and limit, got {value!r}")
                values[key] = Resources.from_dict(value, f"{where}.{key}")
                continue
            _check_type(key, value, f"{where}.{key}")
            values[key] = value
        return cls(experiment=experiment, name=name, given=tuple(sorted(data)), **values)

    def to_dict(self) -> dict[str, Any]:
        """The parameters as the profile gave them (the raw log's ``meta.spec``)."""
        out: dict[str, Any] = {}
        for key in self.given:
            value = getattr(self, key)
            out[key] = value.to_dict() if isinstance(value, Resources) else value
        return out

    def milli(self, key: str) -> int | None:
        """A CPU quantity field in millicores (None when unset)."""
        value = getattr(self, key)
        return None if value is None else parse_cpu(value, f"experiments.{self.experiment}.variants.{self.name}.{key}")

    @property
    def period_us(self) -> int | None:
        """The CFS period this variant asks for, in us (None: the kernel's default)."""
        return None if self.period_ms is None else round(float(self.period_ms) * 1000)

    @property
    def burst_us(self) -> int | None:
        """The burst budget this variant asks for, in us (None: none written)."""
        return None if self.burst_ms is None else round(float(self.burst_ms) * 1000)

    def window_clumps(self, endpoint: str = "work") -> int | None:
        """The arrivals (clumps) an open-loop run schedules in its window on ``endpoint`` (work or ping): a
        fixed count by design (:func:`span_arrivals`); None for a closed loop or an unset rate. The requests
        of one clump are sent together and share their fate, so these are a run's independent draws
        (docs/STATISTICS.md §2); /ping requests and /work arrivals of clump 1 are each their own."""
        rate, clump = (self.rps, self.clump or 1) if endpoint == "work" else (self.ping_rps, 1)
        if self.workers or not rate or self.duration_ms is None:
            return None
        return span_arrivals(float(rate), int(clump), float(self.duration_ms))

    def window_requests(self, endpoint: str = "work") -> int | None:
        """The requests an open-loop run schedules in its window on ``endpoint`` (work or ping): its
        :meth:`window_clumps` times the clump; None for a closed loop or an unset rate."""
        clumps = self.window_clumps(endpoint)
        if clumps is None:
            return None
        return clumps * (int(self.clump or 1) if endpoint == "work" else 1)

    def with_changes(self, **changes: Any) -> VariantSpec:
        """A copy with some fields set (they count as given)."""
        data = {**self.to_dict(), **changes}
        return VariantSpec.from_dict(self.experiment, self.name, data)

    def columns(self) -> dict[str, Any]:
        """One ``param_<field>`` value per field, nested resources flattened (``param_app_request``);
        None where the profile did not set it. Every spec has the same columns: :func:`column_names`."""
        out: dict[str, Any] = {}
        for key in _param_names():
            value = getattr(self, key)
            if key in ("app", "sidecar"):
                out[f"{COLUMN_PREFIX}{key}_request"] = value.request if value else None
                out[f"{COLUMN_PREFIX}{key}_limit"] = value.limit if value else None
            else:
                out[f"{COLUMN_PREFIX}{key}"] = value
        return out

    @classmethod
    def from_columns(cls, experiment: str, name: str, row: Mapping[str, Any]) -> VariantSpec:
        """The spec back from a table row's ``param_*`` columns (empty cells are unset fields).

        CSV turns every number into a float and every quantity into text: integral floats
        come back as int, so ``spec.threads`` is usable as a count again.
        """
        data: dict[str, Any] = {}
        for key in _param_names():
            if key in ("app", "sidecar"):
                part = {sub: _from_cell(row.get(f"{COLUMN_PREFIX}{key}_{sub}"), None) for sub in ("request", "limit")}
                part = {k: v for k, v in part.items() if v is not None}
                if part:
                    data[key] = part
                continue
            value = _from_cell(row.get(f"{COLUMN_PREFIX}{key}"), _TYPES[key])
            if value is not None:
                data[key] = value
        return cls.from_dict(experiment, name, data)


def column_names() -> list[str]:
    """Every ``param_*`` column, in a fixed order."""
    return list(VariantSpec(experiment="", name="").columns())


def _param_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(VariantSpec) if f.name not in ("experiment", "name", "given"))


def _types_of(annotation: str) -> tuple[type, ...]:
    kinds = {
        "str": (str,),
        "int": (int,),
        "float": _NUMBER,
        "bool": (bool,),
        "Cpu": (str, int, float),
        "Resources": (Resources,),
    }
    (base,) = [part.strip() for part in annotation.split("|") if part.strip() != "None"]
    return kinds[base]


def _check_type(key: str, value: Any, where: str) -> None:
    if value is None:
        return
    allowed = _TYPES[key]
    if isinstance(value, bool) and bool not in allowed:
        raise SpecError(f"{where}: expected {_kind_name(allowed)}, got {value!r}")
    if not isinstance(value, allowed):
        raise SpecError(f"{where}: expected {_kind_name(allowed)}, got {value!r}")


def _kind_name(allowed: tuple[type, ...]) -> str:
    if allowed == (bool,):
        return "true or false"
    if allowed == (int,):
        return "a whole number"
    if allowed == _NUMBER:
        return "a number"
    if allowed == (str,):
        return "text"
    return "a CPU quantity (e.g. 250m, 1.5, 2)"


def _from_cell(value: Any, allowed: tuple[type, ...] | None) -> Any:
    """A CSV cell back as the field's type: NaN/empty -> None, integral floats -> int."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, str) and value == "":
        return None
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
    if allowed == (bool,):
        if isinstance(value, str):
            return value.strip().lower() == "true"
        return bool(value)
    if allowed == (str,) and not isinstance(value, str):
        return str(value)
    if isinstance(value, float) and value.is_integer() and allowed in ((int,), _NUMBER, (str, int, float), None):
        return int(value)
    if allowed == (int,) and isinstance(value, str):
        return int(float(value))
    if allowed == _NUMBER and isinstance(value, str):
        number = float(value)
        return int(number) if number.is_integer() else number
    return value


for _f in fields(VariantSpec):
    if _f.name not in ("experiment", "name", "given"):
        _TYPES[_f.name] = _types_of(str(_f.type))


# --------------------------------------------------------------------------
# The variants the analysis refers to by name: the claims, the figures' orders, the lab's figures
# (model/reference.py), the report's notes and contrasts. The names are the profiles' keys
# (config/profiles/*.yaml), which keep them; a profile may add variants of its own, and a test holds
# every name below to a profile that runs it.

# E2a: a burst under each limit
E2A_NOLIMIT = "nolimit"
E2A_LIMIT2 = "limit2"
E2A_LIMIT1 = "limit1"
E2A_LIMIT500M = "limit500m"
E2A_LIMIT1_2THREADS = "limit1-2threads"
# E3: GOMAXPROCS by go.mod line and limit (the rest are "<build>-<limit>")
E3_GO125_NONE = "go125mod-none"
E3_GO125_2500M = "go125mod-2500m"
E3_GO125_2_ENV6 = "go125mod-2-env6"
E3_GO125_2_GODEBUG = "go125mod-2-godebug"
# S1: every P spinning
S1_NOLIMIT = "nolimit"
S1_CPUS1500M = "cpus1500m"
S1_CPUS1500M_GOMAXPROCS8 = "cpus1500m-gomaxprocs8"
# E5 and E10: the phases of the weights (model/weight_pods.py)
WEIGHTS_PODS = "pods"
WEIGHTS_TWO_CONTAINER = "two-container"
# E2b: steady and clumped arrivals
E2B_STEADY_NOLIMIT = "steady-nolimit"
E2B_STEADY_LIMIT = "steady-limit"
E2B_STEADY_LIMIT_GO125 = "steady-limit-go125"
E2B_CLUMPED_NOLIMIT = "clumped-nolimit"
E2B_CLUMPED_LIMIT = "clumped-limit"
E2B_CLUMPED_LIMIT_GO125 = "clumped-limit-go125"
# E7: replicas behind per-connection balancing
E7_ONE_NOLIMIT = "one-nolimit"
E7_ONE_LIMIT = "one-limit"
E7_TWO_HALF = "two-half"
E7_TWO_LIMIT = "two-limit"
E7_ONE_DOUBLE = "one-double"
# E8: an idle or busy neighbor
E8_IDLE_LIM = "idle-lim"
E8_IDLE_LIM2X = "idle-lim2x"
E8_BUSY_LIM = "busy-lim"
E8_BUSY_LIM2X = "busy-lim2x"
E8_BUSY_LIM2X_REQ_HALF = "busy-lim2x-req-half"
E8_BUSY_LIM2X_REQ_FULL = "busy-lim2x-req-full"
# E6: a scraper against the real pause
E6_LIMIT = "limit"
# S2: closed-loop threads and the cascade
S2_THREADS_NODE = "threads-node"
S2_THREADS_ONE = "threads-one"
S2_CASCADE_UNLIMITED = "cascade-unlimited"
S2_CASCADE_LIMITED = "cascade-limited"
# X1: burst budget
X1_NOLIMIT = "nolimit"
X1_BUDGET0 = "budget0"
X1_BUDGET_HALF = "budget-half"
X1_BUDGET_FULL = "budget-full"
# X2: CFS period
X2_PERIOD100 = "period100"
X2_PERIOD20 = "period20"
X2_PERIOD5 = "period5"
# X3: a cpuset of one CPU, then two
X3_CPUS1 = "cpus1"
X3_CPUS2 = "cpus2"
# X4: pods bursting together or staggered
X4_SYNCHRONIZED = "synchronized"
X4_STAGGERED = "staggered"
# X5: steady arrivals at shares of the limit
X5_USE30 = "use30"
X5_USE90 = "use90"
# X6: GOMAXPROCS 2 against 1
X6_CLUMPED_500M_G1 = "clumped-500m-g1"
X6_CLUMPED_500M_G2 = "clumped-500m-g2"
X6_CLOSED_500M_G1 = "closed-500m-g1"
X6_CLOSED_500M_G2 = "closed-500m-g2"

#: every name above, by experiment, in the order the figures show them (tests/model/test_variants.py holds
#: them to the profiles)
NAMED_VARIANTS: dict[str, tuple[str, ...]] = {
    "E2a": (E2A_NOLIMIT, E2A_LIMIT2, E2A_LIMIT1, E2A_LIMIT500M, E2A_LIMIT1_2THREADS),
    "E3": (E3_GO125_NONE, E3_GO125_2500M, E3_GO125_2_ENV6, E3_GO125_2_GODEBUG),
    "S1": (S1_NOLIMIT, S1_CPUS1500M, S1_CPUS1500M_GOMAXPROCS8),
    "E5": (WEIGHTS_PODS, WEIGHTS_TWO_CONTAINER),
    "E10": (WEIGHTS_PODS, WEIGHTS_TWO_CONTAINER),
    "E2b": (
        E2B_STEADY_NOLIMIT,
        E2B_STEADY_LIMIT,
        E2B_STEADY_LIMIT_GO125,
        E2B_CLUMPED_NOLIMIT,
        E2B_CLUMPED_LIMIT,
        E2B_CLUMPED_LIMIT_GO125,
    ),
    "E7": (E7_ONE_NOLIMIT, E7_ONE_LIMIT, E7_TWO_HALF, E7_TWO_LIMIT, E7_ONE_DOUBLE),
    "E8": (E8_IDLE_LIM, E8_IDLE_LIM2X, E8_BUSY_LIM, E8_BUSY_LIM2X, E8_BUSY_LIM2X_REQ_HALF, E8_BUSY_LIM2X_REQ_FULL),
    "E6": (E6_LIMIT,),
    "S2": (S2_THREADS_NODE, S2_THREADS_ONE, S2_CASCADE_UNLIMITED, S2_CASCADE_LIMITED),
    "X1": (X1_NOLIMIT, X1_BUDGET0, X1_BUDGET_HALF, X1_BUDGET_FULL),
    "X2": (X2_PERIOD100, X2_PERIOD20, X2_PERIOD5),
    "X3": (X3_CPUS1, X3_CPUS2),
    "X4": (X4_SYNCHRONIZED, X4_STAGGERED),
    "X5": (X5_USE30, X5_USE90),
    "X6": (X6_CLUMPED_500M_G1, X6_CLUMPED_500M_G2, X6_CLOSED_500M_G1, X6_CLOSED_500M_G2),
}
