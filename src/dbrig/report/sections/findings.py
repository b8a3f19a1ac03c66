"""The Findings section: the answer first, one sentence per experiment (report/findings.py)."""

from __future__ import annotations

from dbrig.report import findings
from dbrig.report.sections import LoadedRun, Part, render


def section(run: LoadedRun) -> Part | None:
    found = findings.section(run.data)
    if not found:
        return None
    page = render("findings.html.j2", findings=found)
    return Part("findings", page, links=(("findings", f"Findings ({len(found)})"),))
