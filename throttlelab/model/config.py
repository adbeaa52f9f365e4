"""Load and validate the experiment design: config.yaml, its overrides and the profile.

Everything is checked before any experiment starts; a problem becomes one
ConfigError that names the field and the fix, and no result is touched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from throttlelab.errors import CatalogueError, ConfigError  # ConfigError re-exported: callers import it from here too
from throttlelab.model import catalogue
from throttlelab.model.quantities import QuantityError, parse_cpu
from throttlelab.model.variants import SpecError, VariantSpec


@dataclass(frozen=True)
class ExperimentDesign:
    name: str
    about: str
    scaling: str
    repeats: int
    variants: dict[str, VariantSpec]
    #: the variants that run another number of repeats than ``repeats`` (the profile's ``variant_repeats``)
    variant_repeats: Mapping[str, int] = field(default_factory=dict)
    #: the repeats of each variant measured before the experiment's first look (the profile's ``first_look``;
    #: docs/STATISTICS.md §6): the look decides whether the rest are measured. None: one look, after every run
    first_look: int | None = None

    def repeats_of(self, variant: str) -> int:
        """The repeats of one variant: its own number where the profile gives one, else the experiment's."""
        return self.variant_repeats.get(variant, self.repeats)

    def runs(self, stage: int | None = None) -> list[tuple[str, int]]:
        """Every (variant, repeat) of this experiment, variant by variant, repeat by repeat; ``stage`` 1: those
        measured before the first look, 2: those after it (none without a look), None: all."""
        every = [(variant, rep) for variant in self.variants for rep in range(self.repeats_of(variant))]
        if stage is None or self.first_look is None:
            return every if stage in (None, 1) else []
        return [(v, r) for v, r in every if (r < self.first_look) == (stage == 1)]

    @property
    def most_repeats(self) -> int:
        """The repeats of the experiment's most repeated variant."""
        return max(self.repeats_of(v) for v in self.variants)

    @property
    def look_fraction(self) -> float:
        """The information fraction of the first look: its repeats over the most repeated variant's (1 without
        a look)."""
        return 1.0 if self.first_look is None else self.first_look / self.most_repeats

    def spec_json(self, variant: str) -> str:
        """The variant's parameters as canonical JSON: a Snakemake param, so editing it reruns it."""
        return json.dumps(self.variants[variant].to_dict(), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Design:
    backend: str
    profile: str
    profile_path: Path
    description: str
    scaling: str
    runtime: str
    seed: int
    node_cpus: str | None
    confidence: float
    experiments: dict[str, ExperimentDesign]
    # host interference: the share of the run's CPUs other processes may take, and retries
    disturbance: dict[str, Any] = field(default_factory=dict)
    # the kind / kubernetes backends' settings, every key present (schema defaults filled in)
    kind: dict[str, Any] = field(default_factory=dict)
    kubernetes: dict[str, Any] = field(default_factory=dict)
    # the vm backend's guest (vcpus, memory, kernel, kvm), every key present
    vm: dict[str, Any] = field(default_factory=dict)
    # where the cluster tools and their Go caches live (cache, go_mod_cache, go_build_cache), every key present
    cluster_tools: dict[str, Any] = field(default_factory=dict)

    def without(self, left_out: Mapping[tuple[str, str], str]) -> Design:
        """The design less the (experiment, variant) pairs in ``left_out``; an experiment left
        with no variant is dropped."""
        experiments = {}
        for name, exp in self.experiments.items():
            kept = {v: s for v, s in exp.variants.items() if (name, v) not in left_out}
            if kept:
                experiments[name] = replace(exp, variants=kept)
        return replace(self, experiments=experiments)

    def jobs(self) -> list[tuple[str, str, int]]:
        """Every (experiment, variant, repeat) of this design."""
        return [(exp.name, variant, rep) for exp in self.experiments.values() for variant, rep in exp.runs()]


#: libyaml's safe loader where PyYAML was built with it (the same documents, ten times faster: the rules
#: load both schemas and a profile on every plan), else PyYAML's own.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """One YAML document, as yaml.safe_load reads it; a document it cannot read raises PyYAML's own
    error (libyaml words its messages differently), so what a user reads is the same."""
    try:
        return yaml.load(text, Loader=SAFE_LOADER)  # a safe loader
    except yaml.YAMLError:
        return yaml.safe_load(text)


def _schema(config_dir: Path, name: str) -> dict[str, Any]:
    path = config_dir / name
    try:
        return load_yaml(path.read_text())
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the schema ({exc.strerror}); config_dir must be the project's config/ "
            "folder (the one holding config.yaml and profiles/)"
        ) from None


def _profile_schema(config_dir: Path) -> dict[str, Any]:
    """config/profile.schema.yaml with the experiments' names filled in from the catalogue: a profile
    may hold exactly the catalogue's experiments, each with the shape of ``definitions.experiment``."""
    schema = _schema(config_dir, "profile.schema.yaml")
    schema["properties"]["experiments"]["properties"] = {
        experiment_id: {"$ref": "#/definitions/experiment"} for experiment_id in catalogue.IDS
    }
    return schema


def _parameters_schema(profile_schema: dict[str, Any], experiment: str) -> dict[str, Any]:
    """The schema a merged variant of ``experiment`` is checked against: ``definitions.<experiment>``."""
    definitions = profile_schema["definitions"]
    if experiment not in definitions:
        raise ConfigError(
            f"config/profile.schema.yaml: no definitions.{experiment}, the parameters of catalogue experiment "
            f"{experiment}: add its schema there (the other experiments' are examples)"
        )
    return {**definitions[experiment], "definitions": definitions}


def _where(prefix: str, error: jsonschema.ValidationError) -> str:
    path = ".".join(str(p) for p in error.absolute_path)
    return f"{prefix}.{path}" if path else prefix


def _check(instance: Any, schema: dict[str, Any], prefix: str, hint: str) -> None:
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"{_where(prefix, e)}: {e.message}" for e in errors[:5]]
        raise ConfigError("\n".join(lines) + f"\n(see {hint})")


def _with_defaults(config: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    out = dict(config)
    for key, prop in schema["properties"].items():
        if key not in out and "default" in prop:
            out[key] = prop["default"]
    return out


def _section(cfg: dict[str, Any], schema: dict[str, Any], key: str) -> dict[str, Any]:
    """A nested settings object with the defaults of the keys it leaves out."""
    return _with_defaults(cfg.get(key) or {}, schema["properties"][key])


def _profile_path(profile: str, profiles_dir: Path) -> Path:
    named = profiles_dir / f"{profile}.yaml"
    if named.is_file():
        return named
    custom = Path(profile)
    if custom.suffix in (".yaml", ".yml") and custom.is_file():
        return custom.resolve()
    known = ", ".join(sorted(p.stem for p in profiles_dir.glob("*.yaml")))
    raise ConfigError(
        f"config.profile: unknown profile {profile!r}; choose one of {known}, "
        "or give the path of a profile file (.yaml) of your own"
    )


def _check_quantities(variant: dict[str, Any], where: str) -> None:
    for key, value in variant.items():
        if isinstance(value, dict):
            _check_quantities(value, f"{where}.{key}")
        elif key in ("request", "limit") and value is not None:
            try:
                parse_cpu(value, f"{where}.{key}")
            except QuantityError as exc:
                raise ConfigError(str(exc)) from None


def load_design(config: dict[str, Any], config_dir: Path) -> Design:
    """Validate Snakemake's config dict and the profile it names; return the frozen design.

    ``config_dir`` is the project's config/ folder (schemas and profiles/); the caller says where
    it is (the Snakefile: ``workflow.basedir``; the CLI: ``--project``)."""
    config_dir = Path(config_dir)
    top_schema = _schema(config_dir, "config.schema.yaml")
    _check(config, top_schema, "config", "config/config.schema.yaml for every key")
    cfg = _with_defaults(config, top_schema)
    path = _profile_path(str(cfg["profile"]), config_dir / "profiles")
    try:
        profile = load_yaml(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"profile {path}: not valid YAML ({exc})") from None
    profile_schema = _profile_schema(config_dir)
    _check(profile, profile_schema, f"profile {path.name}", "config/profile.schema.yaml")
    experiments: dict[str, ExperimentDesign] = {}
    for name, exp in profile["experiments"].items():
        try:
            catalogue.experiment(name)
        except CatalogueError as exc:
            raise ConfigError(f"profile {path.name}: experiments.{name}: {exc}") from None
        parameters = _parameters_schema(profile_schema, name)
        defaults = exp.get("defaults", {})
        variants = {}
        for vname, overrides in exp["variants"].items():
            merged = {**defaults, **(overrides or {})}
            where = f"profile {path.name}: experiments.{name}.variants.{vname}"
            _check(merged, parameters, where, "config/profile.schema.yaml")
            _check_quantities(merged, where)
            try:
                variants[vname] = VariantSpec.from_dict(name, vname, merged)
            except SpecError as exc:
                raise ConfigError(f"profile {path.name}: {exc}") from None
        repeats = cfg["repeats"] or exp.get("repeats") or profile["repeats"]
        own = {} if cfg["repeats"] else dict(exp.get("variant_repeats") or {})
        unknown = sorted(set(own) - set(variants))
        if unknown:
            raise ConfigError(
                f"profile {path.name}: experiments.{name}.variant_repeats: {', '.join(unknown)} "
                f"{'is' if len(unknown) == 1 else 'are'} not a variant of {name}; name some of {', '.join(variants)}"
            )
        first_look = None if cfg["repeats"] else exp.get("first_look")
        most = max(own.get(v, repeats) for v in variants)
        if first_look is not None and first_look >= most:
            raise ConfigError(
                f"profile {path.name}: experiments.{name}.first_look: {first_look} is not below the {most} repeats "
                "of its most repeated variant; give a smaller number, or leave first_look out for one look after "
                "every run"
            )
        experiments[name] = ExperimentDesign(
            name, exp["about"], exp.get("scaling", ""), repeats, variants, own, first_look
        )
    chosen = cfg["experiments"]
    if chosen is not None:
        unknown = [name for name in chosen if name not in experiments]
        if unknown:
            raise ConfigError(
                f"config experiments: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not in profile "
                f"{path.name}, whose experiments are {', '.join(experiments)}; list some of those, or null for all"
            )
        experiments = {name: exp for name, exp in experiments.items() if name in chosen}
    return Design(
        backend=cfg["backend"],
        profile=str(cfg["profile"]),
        profile_path=path,
        description=profile["description"],
        scaling=profile.get("scaling", ""),
        runtime=cfg["runtime"],
        seed=cfg["seed"],
        node_cpus=cfg["node_cpus"],
        confidence=cfg["stats"].get("confidence", 0.95),
        experiments=experiments,
        disturbance=_section(cfg, top_schema, "disturbance"),
        kind=_section(cfg, top_schema, "kind"),
        kubernetes=_section(cfg, top_schema, "kubernetes"),
        # the profile says what guest it needs (lab-node: 10 vCPUs); config.yaml or --config can override
        vm=_with_defaults({**(profile.get("vm") or {}), **(cfg.get("vm") or {})}, top_schema["properties"]["vm"]),
        cluster_tools=_section(cfg, top_schema, "cluster_tools"),
    )
