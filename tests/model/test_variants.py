"""The variants the analysis names (model/variants.py's constants): each is a variant that a profile runs."""

from __future__ import annotations

import yaml

from conftest import PROJECT
from throttlelab.model import variants


def _profile_variants() -> dict[str, set[str]]:
    ran: dict[str, set[str]] = {}
    for path in sorted((PROJECT / "config" / "profiles").glob("*.yaml")):
        for experiment, block in (yaml.safe_load(path.read_text()).get("experiments") or {}).items():
            ran.setdefault(experiment, set()).update((block or {}).get("variants") or {})
    return ran


def test_every_named_variant_is_one_a_profile_runs():
    ran = _profile_variants()
    missing = [
        f"{experiment}/{name}"
        for experiment, names in variants.NAMED_VARIANTS.items()
        for name in names
        if name not in ran.get(experiment, set())
    ]
    assert missing == [], f"named in model/variants.py, run by no profile: {missing}"


def test_every_name_constant_is_listed_by_its_experiment():
    listed = {name for names in variants.NAMED_VARIANTS.values() for name in names}
    constants = {
        value
        for key, value in vars(variants).items()
        if key.isupper() and isinstance(value, str) and key != "COLUMN_PREFIX"
    }
    assert constants == listed
