"""The Faults section: one row per trial with a fault (docs/reliability.md).

What was injected, the downtime, the time from the restart to the first query,
InnoDB's crash recovery (seconds, redo scanned, pages, transactions rolled back),
how long throughput took to come back and the rate over the fault window; the
timeline of each trial folded below. The same events are drawn on the time series.
"""

from __future__ import annotations

from typing import Any

from dbrig.analysis.findings import fault_kind
from dbrig.report import faults
from dbrig.report.sections import LoadedRun, Part, render


def section(run: LoadedRun) -> Part | None:
    rows = _rows(run)
    if not rows:
        return None
    page = render("faults.html.j2", columns=faults.COLUMNS, rows=rows)
    return Part("faults", page, links=(("faults", "Faults"),))


def _rows(run: LoadedRun) -> list[dict[str, Any]]:
    data = run.data
    if data.results.empty:
        return []
    labels = dict(zip(run.overview["cell"], run.overview["label"], strict=True))
    ordered = data.results.sort_values(["cell", "repetition"], kind="stable")
    rows = []
    for trial, cell, status in ordered[["trial", "cell", "status"]].itertuples(index=False):
        record = faults.read(data.trial_dir(str(trial)))
        if record is None:
            continue
        rows.append(
            {
                "trial": str(trial),
                "label": labels.get(str(cell), ""),
                "ok": status == "ok",
                "fault": fault_kind(record),
                "values": faults.values(record),
                "timeline": faults.timeline_text(record),
            }
        )
    return rows
