"""The CPU profiles section: a searchable flame graph and the top functions per cell
(report/flamegraph.py), for runs that profiled the server (docs/profiling.md)."""

from __future__ import annotations

from dbrig.report import flamegraph
from dbrig.report.sections import LoadedRun, Part, render


def section(run: LoadedRun) -> Part | None:
    profiles = flamegraph.profiles_section(run.data)
    if not profiles["cells"]:
        return None
    page = render("profiles.html.j2", profiles=profiles)
    return Part("profiles", page, links=(("profiles", "CPU profiles"),))
