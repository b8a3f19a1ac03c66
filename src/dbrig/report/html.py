"""The report page: one self-contained HTML file rendered with jinja2.

Charts are embedded as base64 ``data:`` URIs and the style sheet is inline, so
the file can be mailed or attached to a ticket and opens offline. Repetitions and
long lists fold away in ``<details>``; the page's one script is the flame graphs'
search box (``flamegraph.py``), and the page reads well without it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, Template

TEMPLATE = "report.html.j2"


@cache
def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("dbrig.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["data_uri"] = png_data_uri
    return env


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render(context: Mapping[str, Any]) -> str:
    """The page: its header and the sections' parts, in order (:mod:`dbrig.report.build`)."""
    return template().render(**context)


def fragment(name: str, context: Mapping[str, Any]) -> str:
    """One section's template rendered on its own (:mod:`dbrig.report.sections`)."""
    return _environment().get_template(name).render(**context)


def template() -> Template:
    """The page template, compiled on the first call in a process (about 70 ms)."""
    return _environment().get_template(TEMPLATE)
