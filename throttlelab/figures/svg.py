"""A matplotlib Figure as SVG text for inlining in the report page."""

from __future__ import annotations

import io
import re

import matplotlib as mpl
from matplotlib.figure import Figure

_XML_PROLOG = re.compile(r"^\s*<\?xml[^>]*\?>\s*(<!DOCTYPE[^>]*>\s*)?", re.S)
_ID_USES = (
    (re.compile(r'\bid="([^"]+)"'), 'id="{p}-{0}"'),
    (re.compile(r"url\(#([^)]+)\)"), "url(#{p}-{0})"),
    (re.compile(r'href="#([^"]+)"'), 'href="#{p}-{0}"'),
)


def namespace_ids(svg: str, prefix: str) -> str:
    """Prefix every id and reference to it, so several SVGs can share one HTML page."""
    for pattern, template in _ID_USES:
        svg = pattern.sub(lambda m, template=template: template.format(m.group(1), p=prefix), svg)
    return svg


def figure_to_svg(fig: Figure, name: str, title: str = "") -> str:
    """The figure as an inline <svg> element: text kept as text, ids unique to `name`, no date stamp."""
    buffer = io.StringIO()
    # A fixed hash salt makes the clip-path ids, and so the file, the same on every run.
    with mpl.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    svg = namespace_ids(_XML_PROLOG.sub("", buffer.getvalue()), name)
    if title:
        head_end = svg.index(">", svg.index("<svg")) + 1
        svg = f"{svg[:head_end]}<title>{_escape(title)}</title>{svg[head_end:]}"
    return svg


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
