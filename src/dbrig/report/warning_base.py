"""What every check of :mod:`dbrig.report.warnings` shares: the thresholds, the warning, the run
it looks at and how a check names the cells it applies to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from dbrig.metrics import metric as registry_entry
from dbrig.metrics import (
    throughput_metrics,
)
from dbrig.report.data import RunData
from dbrig.report.tables import CellStats
from dbrig.util.units import parse_size

MIN_WINDOW_S = 60.0
MAX_CV = 0.05
MIN_REPETITIONS = 3
MIN_STRESS_RATIO = 0.8
MAX_STEAL_PCT = 5.0
# A quiet host runs 0-2 % of other work during a trial (measured: docs/sampling.md).
MAX_OTHER_CPU_PCT = 10.0
MIN_SAMPLER_WINDOW_S = 10.0
MAX_SAMPLER_PCT = 1.0
MAX_CELL_WARNINGS = 6
# A soak warning needs a window this long: over a few minutes a per-hour slope extrapolates
# start-up (the buffer pool filling, the first checkpoint), not a trend.
MIN_SOAK_WINDOW_S = 600.0


# The warnings about how the host disturbed a measurement, which ``compare`` repeats
# beside its verdicts: a regression in a run that competed for the CPU may be the host's.
MEASUREMENT_CODES = ("steal", "other_load", "swap", "weak_interference", "sampler_overhead")


@dataclass(frozen=True)
class RunWarning:
    """One reason to distrust part of a run: a stable ``code``, a sentence, the cell or None."""

    code: str
    message: str
    cell: str | None = None


@dataclass(frozen=True)
class Hit:
    cell: str
    label: str
    text: str
    severity: float  # larger is worse, for picking the worst cells


@dataclass(frozen=True)
class CheckedRun:
    data: RunData
    overview: pd.DataFrame
    stats: CellStats
    labels: dict[str, str]

    @property
    def n_cells(self) -> int:
        return len(self.overview)

    def label(self, cell: str) -> str:
        return self.labels.get(cell, "")

    def means(self, metric: str) -> pd.Series:
        """Per-cell means of a metric over successful repetitions (cells without one left out)."""
        if metric not in self.stats.mean.columns:
            return pd.Series(dtype=float)
        return self.stats.mean[metric].dropna()


def first_few(items: list[str], shown: int = 6, separator: str = ", ") -> str:
    more = f"{separator}+{len(items) - shown} more" if len(items) > shown else ""
    return separator.join(items[:shown]) + more


def seconds_text(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.2g} s"


# --------------------------------------------------------------------------- helpers


def throughput_metric(stats: CellStats) -> tuple[str, str] | None:
    """The throughput column this run has (TPS for sysbench), with its display name."""
    for metric in throughput_metrics():
        column = metric.name
        if column in stats.mean.columns and stats.mean[column].notna().any():
            return column, metric.terminal_heading
    return None


def buffer_pool_bytes(data: RunData, cell: dict[str, Any]) -> int | None:
    """The cell's innodb_buffer_pool_size in bytes: its factor if varied, else the server's."""
    server = str(cell.get("server") or "default")
    for key in (
        "server.config.innodb_buffer_pool_size",
        f"servers.{server}.config.innodb_buffer_pool_size",
    ):
        if key in cell:
            return parse_size(cell[key])
    variables = (data.saved.servers.get(server) or {}).get("variables") or {}
    return parse_size(variables.get("innodb_buffer_pool_size"))


def _hit_place(hit: Hit) -> str:
    return hit.cell if hit.label in ("", "(single cell)") else f"{hit.cell} ({hit.label})"


def see(column: str) -> str:
    """Where every cell's value of ``column`` can be read: a result table column if it
    is one (headline or context metric), else results.csv."""
    entry = registry_entry(column)
    if entry is not None and (entry.headline or entry.detail):
        return f"every cell in the result table's {entry.terminal_heading!r} column"
    return f"every trial in column {column} of results.csv"


def cell_warnings(
    code: str,
    hits: list[Hit],
    n_cells: int,
    summary: str,
    prefix: str = "",
    suffix: str = "",
    where: str = "every cell in the result table",
) -> list[RunWarning]:
    """One line per check: the cell itself when one cell tripped it, else how many cells
    and each of them, worst first (the first :data:`MAX_CELL_WARNINGS`, then where the
    rest can be read)."""
    if not hits:
        return []
    if len(hits) == 1:
        h = hits[0]
        return [RunWarning(code, f"{_hit_place(h)}: {prefix}{h.text}{suffix}", h.cell)]
    worst = sorted(hits, key=lambda h: h.severity, reverse=True)
    shown = "; ".join(f"{_hit_place(h)}: {h.text}" for h in worst[:MAX_CELL_WARNINGS])
    more = len(hits) - MAX_CELL_WARNINGS
    rest = f"; +{more} more: {where}" if more > 0 else ""
    message = f"{summary} in {len(hits)} of {n_cells} cells{suffix}: {shown}{rest}"
    return [RunWarning(code, message)]


def uniform_or_cell_warnings(
    code: str, hits: list[Hit], n_cells: int, suffix: str, summary: str, where: str
) -> list[RunWarning]:
    """One run-wide warning when every cell trips the check with the same number."""
    if hits and len(hits) == n_cells and len({h.text for h in hits}) == 1:
        return [RunWarning(code, f"{hits[0].text} in every cell{suffix}")]
    return cell_warnings(code, hits, n_cells, summary, "", suffix, where)
