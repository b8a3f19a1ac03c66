"""The Warnings section: where the run's numbers may lie, one line per kind."""

from __future__ import annotations

from dbrig.report.sections import LoadedRun, Part, render
from dbrig.report.warnings import compute_warnings


def section(run: LoadedRun) -> Part:
    found = compute_warnings(run.data, run.overview, run.stats)
    page = render("warnings.html.j2", warnings=found)
    return Part("warnings", page, links=(("warnings", f"Warnings ({len(found)})"),))
