"""The Appendix: the scenario as given and every server variable."""

from __future__ import annotations

from pathlib import Path

from dbrig.report.sections import LoadedRun, Part, render
from dbrig.report.sections.environment import servers


def section(run: LoadedRun) -> Part:
    page = render(
        "appendix.html.j2",
        scenario_yaml=_read_text(run.data.path / "scenario.yaml"),
        servers=servers(run.data),
    )
    return Part("appendix", page, links=(("appendix", "Appendix"),))


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
