"""The report's sections: one module each, with one entry point.

``section(run: LoadedRun) -> Part | None`` takes the loaded run and returns its part
of the page (HTML, the links it adds to the page's contents) and its figures, or
``None`` when the run has nothing for it (no sweep, no fault, no soak).
:data:`dbrig.report.build.SECTIONS` lists them in page order; build.py only orders
them, writes the figures and puts the parts into the page.

A section whose figures take long to draw (the time series) also has
``jobs(run) -> list[Job]``: build.py starts them on a second core before any section
runs, and that section finds what they drew in ``run.drawn[<its module's name>]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from markupsafe import Markup

from dbrig.metrics import Metric
from dbrig.report import charts, html
from dbrig.report.data import RunData
from dbrig.report.tables import CellStats

PLOTS_DIR = "plots"
RESULTS_BY_CELL = "results_by_cell.csv"
FILES = {"csv": RESULTS_BY_CELL, "plots": PLOTS_DIR}


@dataclass(frozen=True)
class Plot:
    file: str  # name under plots/
    title: str
    caption: str
    png: bytes
    spread: str = ""  # factor charts: points, interval or mixed (charts.spread_kind)


Job = Callable[[], Plot | None]


@dataclass(frozen=True)
class LoadedRun:
    """What every section is given: the saved run and the per-cell figures all share."""

    data: RunData
    overview: pd.DataFrame  # one row per cell (tables.cell_overview)
    stats: CellStats  # per-cell mean, interval, CV of every metric
    headline: list[Metric]
    max_cell_figures: int
    drawn: Mapping[str, list[Plot | None]] = field(default_factory=dict)  # its jobs drew


@dataclass(frozen=True)
class Part:
    """A section's part of the page."""

    id: str  # its anchor, ``<section id=...>``
    html: Markup
    links: tuple[tuple[str, str], ...] = ()  # (anchor, text) in the page's contents
    plots: tuple[Plot, ...] = ()


def render(template: str, **context: Any) -> Markup:
    """A section's template (``templates/sections/<name>.html.j2``) with its context."""
    return Markup(html.fragment(f"sections/{template}", {"files": FILES, **context}))


def png(fig: Any) -> bytes:
    return charts.png_bytes(fig)
