"""The Server internals section: per cell, the wait events with the most time per
transaction and the statements with the most time, its trials merged
(analysis/internals.py), for runs with ``sampling.internals`` (docs/profiling.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dbrig.analysis.internals import TrialInternals, top_digests, top_waits
from dbrig.report.data import RunData
from dbrig.report.internals_files import (
    DIGEST_COLUMNS,
    DIGESTS,
    INTERNALS_OUT,
    WAIT_COLUMNS,
    WAITS,
    BadFile,
    Rows,
    internals_warnings,
    read_rows,
)
from dbrig.report.sections import LoadedRun, Part, render


def _rows(path: Path, columns: Mapping[str, Any], problems: list[str]) -> Rows | None:
    """The file's rows; None (and a note) for a trial without it, or with a bad one:
    that trial is left out of the table, not counted as having waited 0."""
    try:
        rows = read_rows(path, columns)
    except BadFile as exc:
        problems.append(f"{path.parent.name}: {exc}")
        return None
    if rows is None:
        problems.append(f"{path.parent.name}: no {path.name}, left out of its table")
    return rows


def _transactions(data: RunData, trial: str) -> float | None:
    if "transactions" not in data.results:
        return None
    found = data.results.loc[data.results["trial"] == trial, "transactions"]
    value = float(found.iloc[0]) if len(found) else math.nan
    return None if math.isnan(value) else value


def _notes(folders: list[Path]) -> list[str]:
    """Each trial's internals warnings (internals.out), each text once, with its trials."""
    by_text: dict[str, list[str]] = {}
    for folder in folders:
        for text in internals_warnings(folder):
            by_text.setdefault(text, []).append(folder.name)
    return [f"{', '.join(trials)}: {text}" for text, trials in by_text.items()]


def cell_internals(data: RunData, cell: str, label: str) -> dict[str, Any] | None:
    folders = [data.trial_dir(t) for t in data.trials_by_cell.get(cell, [])]
    sampled = [f for f in folders if (f / INTERNALS_OUT).exists()]
    if not sampled:
        return None
    problems: list[str] = []
    trials = [
        TrialInternals(
            _rows(f / WAITS, WAIT_COLUMNS, problems),
            _rows(f / DIGESTS, DIGEST_COLUMNS, problems),
            _transactions(data, f.name),
        )
        for f in sampled
    ]
    return {
        "cell": cell,
        "label": label,
        "trials": len(sampled),
        "waits": top_waits(trials),
        "digests": top_digests(trials),
        "notes": _notes(sampled) + problems,
    }


def section(run: LoadedRun) -> Part | None:
    data = run.data
    labels = dict(zip(data.cells["cell"].astype(str), data.cells["label"], strict=True))
    cells = [c for cell, label in labels.items() if (c := cell_internals(data, cell, str(label)))]
    if not cells:
        return None
    page = render("internals.html.j2", cells=cells)
    return Part("internals", page, links=(("internals", "Server internals"),))
