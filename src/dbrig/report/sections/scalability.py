"""The Scalability section: the USL fit and latency knee of every concurrency sweep."""

from __future__ import annotations

from typing import Any

from dbrig.report import scaling
from dbrig.report.data import RunData
from dbrig.report.sections import LoadedRun, Part, Plot, png, render


def section(run: LoadedRun) -> Part | None:
    """The fits' table and charts (none without a sweep)."""
    found = _scalability(run.data)
    if not found["rows"]:
        return None
    page = render("scalability.html.j2", scalability=found)
    return Part(
        "scalability", page, links=(("scalability", "Scalability"),), plots=tuple(found["plots"])
    )


def _scalability(data: RunData) -> dict[str, Any]:
    """The Scalability section: the fits' table and charts (empty without a sweep)."""
    sweeps = scaling.find_sweeps(data)
    plots = []
    for number, sweep in enumerate(
        [s for s in sweeps if scaling.drawable(s)][: scaling.MAX_SWEEP_CHARTS], start=1
    ):
        fig = scaling.scaling_chart(sweep)
        title = f"Where throughput stops scaling: {sweep.title}"
        plots.append(Plot(f"scaling_{number}.png", title, scaling.chart_caption(sweep), png(fig)))
    return {
        "rows": scaling.section_rows(sweeps),
        "plots": plots,
        "factor": sweeps[0].label if sweeps else "",
        "throughput": sweeps[0].throughput.heading if sweeps else "",
        "charts_left_out": max(0, sum(map(scaling.drawable, sweeps)) - len(plots)),
    }
