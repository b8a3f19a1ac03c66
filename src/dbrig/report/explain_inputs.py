"""What compare's explanation reads from the saved runs: each successful trial's
profile.folded, waits.csv and digests.csv, for every matched pair of cells of a
compare report (the numbers: ``analysis/explain.py``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from dbrig.analysis.compare import CompareReport
from dbrig.analysis.explain import (
    DIGESTS,
    PROFILE,
    WAITS,
    CellExplanation,
    Rules,
    TrialEvidence,
    explain_cells,
)
from dbrig.analysis.internals import TrialInternals
from dbrig.report import internals_files as files

DIGESTS_KEPT = "sampling.internals.digests"  # the scenario's cap on digests.csv's rows
DEFAULT_DIGESTS_KEPT = 20  # scenario/model.py Internals.digests


@dataclass(frozen=True)
class SavedSide:
    """A run directory and its results frame (one run gives both sides with --by);
    ``digests_kept``: its scenario's sampling.internals.digests."""

    path: Path
    results: pd.DataFrame
    digests_kept: int = DEFAULT_DIGESTS_KEPT


def digests_kept(meta: Any) -> int:
    """sampling.internals.digests of a run's run.json (its default if not there)."""
    try:
        return int(meta["scenario"]["sampling"]["internals"]["digests"])
    except (KeyError, TypeError, ValueError):
        return DEFAULT_DIGESTS_KEPT


def _part(problems: dict[str, str], part: str, read: Callable[[], Any]) -> Any:
    """What ``read`` gives, or None with the file's problem noted under ``part``."""
    try:
        return read()
    except files.BadFile as exc:
        problems[part] = str(exc)
        return None


def trial_evidence(
    folder: Path, transactions: float | None, digests_cap: int = DEFAULT_DIGESTS_KEPT
) -> TrialEvidence:
    """One trial's profile and internals, as saved (None for what it does not have, or
    cannot be read: its ``problems`` say what was wrong)."""
    problems: dict[str, str] = {}
    folded = _part(problems, PROFILE, lambda: files.read_folded(folder / files.FOLDED))
    stacks = None
    if folded is not None:
        stacks, skipped = folded
        if skipped:
            lines = "1 line" if skipped == 1 else f"{skipped} lines"
            problems[PROFILE] = f"{files.FOLDED}: {lines} not 'stack count', left out"
    internals = None
    if (folder / files.INTERNALS_OUT).exists() or (folder / files.WAITS).exists():
        waits = _part(
            problems, WAITS, lambda: files.read_rows(folder / files.WAITS, files.WAIT_COLUMNS)
        )
        digests = _part(
            problems,
            DIGESTS,
            lambda: files.read_rows(folder / files.DIGESTS, files.DIGEST_COLUMNS),
        )
        # The cap counts the prepared statements' row too (sampling/internals.py, _digests
        # then digest_deltas): a list of that many rows may have left statements out.
        full = digests is not None and len(digests) >= digests_cap
        internals = TrialInternals(waits, digests, transactions, full)
    return TrialEvidence(folder.name, stacks, internals, files.internals_warnings(folder), problems)


def cell_evidence(side: SavedSide, cell_ids: str) -> list[TrialEvidence]:
    """The successful trials of the cells ``cell_ids`` (compare's ``c000`` or
    ``c000+c004``), in the order of the results."""
    frame = side.results
    cells = set(cell_ids.split("+"))
    chosen = frame[frame["cell"].astype(str).isin(cells)]
    if "status" in chosen:
        chosen = chosen[chosen["status"] == "ok"]
    found = []
    for record in chosen.to_dict("records"):
        folder = side.path / "trials" / str(record["trial"])
        cap = _whole(record.get(DIGESTS_KEPT)) or side.digests_kept  # a factor, if varied
        found.append(trial_evidence(folder, _transactions(record.get("transactions")), cap))
    return found


def _whole(value: object) -> int | None:
    number = _transactions(value)
    return int(number) if number is not None else None


def _transactions(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def explain_report(
    report: CompareReport, base: SavedSide, cand: SavedSide, rules: Rules
) -> tuple[CellExplanation, ...]:
    """An explanation per matched pair of cells that has profiles or internals on both
    sides, in the order of the report's rows."""
    pairs: dict[tuple[str, str, str, str], None] = {}
    for row in report.rows:
        pairs[(row.candidate, row.label, row.base_cell, row.cand_cell)] = None
    found = []
    for candidate, label, base_cell, cand_cell in pairs:
        explanation = explain_cells(
            cell_evidence(base, base_cell),
            cell_evidence(cand, cand_cell),
            rules,
            candidate=candidate,
            label=label,
            base_cell=base_cell,
            cand_cell=cand_cell,
        )
        if explanation is not None:
            found.append(explanation)
    return tuple(found)
