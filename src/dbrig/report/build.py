"""Build the run report from a saved run directory.

:func:`write_report` reads only the run directory (run.json, results.csv and
the trial folders) and writes, into it:

- ``report.html``: one self-contained page (charts as data URIs, inline CSS,
  flame graphs as inline SVG with a search box, no network);
- ``plots/*.png``: the same charts as files (``factor_<n>.png``,
  ``timeseries_throughput.png``, ``cell_<cell>.png``, ``scaling_<n>.png`` for a
  concurrency sweep);
- ``results_by_cell.csv``: the per-cell aggregate (columns in
  :mod:`dbrig.report.tables`).

The page is its header and :data:`SECTIONS`, in that order: each section is a
module of :mod:`dbrig.report.sections` that takes the loaded run and returns its
part of the page and its figures. This module only orders them. It renders
complete, interrupted and still-running runs, and failed trials.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import gc
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import dbrig
from dbrig.report import html
from dbrig.report.data import RunData, load_run
from dbrig.report.sections import (
    PLOTS_DIR,
    RESULTS_BY_CELL,
    LoadedRun,
    Part,
    Plot,
    appendix,
    environment,
    factors,
    faults,
    findings,
    internals,
    profiles,
    results,
    scalability,
    soak,
    timeseries,
    tpcc,
    warnings,
)
from dbrig.report.tables import (
    aggregate,
    by_cell_frame,
    cell_overview,
    headline_metrics,
    metric_columns,
)
from dbrig.util.background import can_fork, shared_jobs
from dbrig.util.files import replacing, write_text_atomic

REPORT_HTML = "report.html"
MAX_CELL_FIGURES = timeseries.MAX_CELL_FIGURES

# The page's sections, top to bottom (see "Adding a report section" in docs/architecture.md).
SECTIONS: tuple[ModuleType, ...] = (
    findings,
    warnings,
    environment,
    results,
    factors,
    scalability,
    faults,
    tpcc,
    soak,
    profiles,
    internals,
    timeseries,
    appendix,
)
_OUR_PLOTS = re.compile(r"^(factor_\d+|timeseries_\w+|cell_[\w.-]+|scaling_\d+)\.png$")

__all__ = ["MAX_CELL_FIGURES", "REPORT_HTML", "RESULTS_BY_CELL", "SECTIONS", "write_report"]


def write_report(run_dir: Path, *, max_cell_figures: int = MAX_CELL_FIGURES) -> Path:
    """Write report.html, plots/*.png and results_by_cell.csv into ``run_dir``; return the page."""
    with _fewer_collections():
        return _write_report(Path(run_dir), max_cell_figures)


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """Python's garbage collector every 20,000 allocations instead of 700 while drawing.

    matplotlib makes hundreds of thousands of small objects, and each collection
    walks them: on the 1000-cell benchmark the collector took 1.9 s of the report's
    12 s of CPU with the default thresholds, 0.5 s with these, for about 80 MiB more
    at the peak (figures are cycles: they wait a little longer to be freed).
    """
    before = gc.get_threshold()
    gc.set_threshold(20_000, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _write_report(run_dir: Path, max_cell_figures: int) -> Path:
    data = load_run(run_dir)
    run = _loaded(data, max_cell_figures)
    with replacing(data.path / RESULTS_BY_CELL) as tmp:
        by_cell_frame(run.overview, run.stats).to_csv(tmp, index=False)
    parts = _parts(run)
    _write_plots(data.path / PLOTS_DIR, [p for part in parts for p in part.plots])
    page = data.path / REPORT_HTML
    write_text_atomic(page, html.render({**_header(run), "parts": parts}))
    return page


def _loaded(data: RunData, max_cell_figures: int) -> LoadedRun:
    overview = cell_overview(data.results, data.cells)
    stats = aggregate(
        data.results, metric_columns(data.results, data.factors), list(overview["cell"])
    )
    return LoadedRun(data, overview, stats, headline_metrics(data.results), max_cell_figures)


def _parts(run: LoadedRun) -> list[Part]:
    """Every section's part, in :data:`SECTIONS` order.

    The sections' background jobs (more than half the drawing) start on a second core
    while this one computes the other sections, then takes whichever jobs are left;
    the sections that had jobs are computed last, with what was drawn.
    """
    jobs = {s.__name__: s.jobs(run) for s in SECTIONS if hasattr(s, "jobs")}
    every_job = [job for section_jobs in jobs.values() for job in section_jobs]
    parts: dict[str, Part | None] = {}
    with shared_jobs(every_job, fork=bool(every_job) and can_fork()) as drawing:
        for section in SECTIONS:
            if section.__name__ not in jobs:
                parts[section.__name__] = section.section(run)
        html.template()  # compiled now, not after the join, when nothing else runs
        drawn = iter(drawing.results())
    by_section = {name: [next(drawn) for _ in section_jobs] for name, section_jobs in jobs.items()}
    with_drawn = dataclasses.replace(run, drawn=by_section)
    for section in SECTIONS:
        if section.__name__ in jobs:
            parts[section.__name__] = section.section(with_drawn)
    return [part for s in SECTIONS if (part := parts[s.__name__]) is not None]


def _header(run: LoadedRun) -> dict[str, Any]:
    """The page's title, description and the run's facts line."""
    data, saved = run.data, run.data.saved
    return {
        "name": data.name,
        "description": data.scenario.get("description") or "",
        "run": {
            "dir": data.path.name,
            "status": data.status,
            "created_at": _when(saved.created_at),
            "finished_at": _when(saved.finished_at),
            "trials_saved": len(data.results),
            "trials_planned": data.planned_trials,
            "trials_failed": int((data.results["status"] != "ok").sum()),
            "cells": len(run.overview),
        },
        "generated": f"dbrig {dbrig.__version__}",
    }


def _write_plots(folder: Path, plots: list[Plot]) -> None:
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        if _OUR_PLOTS.match(old.name):
            old.unlink()
    for plot in plots:
        (folder / plot.file).write_bytes(plot.png)


def _when(value: Any) -> str:
    if not value:
        return ""
    try:
        stamp = dt.datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    zone = " UTC" if stamp.utcoffset() == dt.timedelta(0) else ""
    return stamp.strftime("%Y-%m-%d %H:%M:%S") + zone
