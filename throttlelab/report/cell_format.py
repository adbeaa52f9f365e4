"""How the page prints cells, settings and sizes (numbers: :mod:`throttlelab.analysis.number_format`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from throttlelab.analysis.number_format import fmt_number, is_missing
from throttlelab.model.quantities import format_cpu, parse_cpu
from throttlelab.model.variants import Resources, VariantSpec


def text(value: Any) -> str:
    return "" if is_missing(value) else str(value)


def distinct(values: Iterable[Any], *, expect_one: bool = True) -> str:
    """One value, or every value seen; when runs should agree and do not (a kernel changed
    mid-run), say so."""
    seen = list(dict.fromkeys(text(v) for v in values if not is_missing(v) and text(v) != ""))
    if not seen:
        return "—"
    if len(seen) == 1:
        return seen[0]
    return ", ".join(seen) + (" (differs between runs)" if expect_one else "")


def fmt_cell(value: Any) -> str:
    if is_missing(value):
        return ""
    if isinstance(value, float):
        return fmt_number(value)
    return str(value)


def fmt_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024**2:
        return f"{size / 1024:.1f} KiB"
    return f"{size / 1024**2:.1f} MiB"


def spec_settings(spec: VariantSpec) -> dict[str, Any]:
    """The parameters a variant sets, in the spec's order; a resources block becomes two settings
    ('app request', 'app limit'), both shown once the block is given."""
    settings: dict[str, Any] = {}
    for f in fields(spec):
        if f.name in ("experiment", "name", "given"):
            continue
        value = getattr(spec, f.name)
        if isinstance(value, Resources):
            settings[f"{f.name} request"] = value.request
            settings[f"{f.name} limit"] = value.limit
        elif value is not None:
            settings[f.name] = value
    return settings


def setting_text(column: str, value: Any) -> str:
    """A setting as the table shows it: a container's limit or request in millicores or CPUs, unset as 'none'."""
    quantity = column.split()[-1] in ("limit", "request")
    if value is None:
        return "none" if quantity else "—"
    if quantity:
        return format_cpu(parse_cpu(value, column))
    return str(value)
