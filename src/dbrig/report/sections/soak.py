"""The Soak section: each soak trial's drift (report/soak.py)."""

from __future__ import annotations

from dbrig.metrics import DEFAULT_PERCENTILE
from dbrig.report import soak
from dbrig.report.sections import LoadedRun, Part, render


def section(run: LoadedRun) -> Part | None:
    rows = soak.section_rows(run.data)
    if not rows:
        return None
    percentile = run.data.workload_params.get("percentile") or DEFAULT_PERCENTILE
    page = render("soak.html.j2", soak=rows, soak_percentile=percentile)
    return Part("soak", page, links=(("soak", "Soak"),))
