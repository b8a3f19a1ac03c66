"""One run's headline numbers: the mean of each cell's headline metrics, with its interval.

What a tracker outside dbrig charts per run (``dbrig publish``'s site, the CI JSON
formats): one value per cell and metric, the mean of the repetitions that succeeded,
as ``dbrig history`` takes it, with the 95 % t interval of that mean. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from dbrig.analysis.compare import RunInput, cell_groups, cell_label, merged_labels, ok_values
from dbrig.analysis.stats import summarize
from dbrig.metrics import headline


@dataclass(frozen=True)
class CellValue:
    """A cell's mean of one metric over the repetitions that succeeded (n of them)."""

    cell: str  # the cell's label, e.g. "threads=4" ("(single cell)" without factors)
    factors: tuple[tuple[str, str | None], ...]
    metric: str
    n: int
    mean: float
    ci_low: float | None = None
    ci_high: float | None = None


def headline_metrics(run: RunInput) -> tuple[str, ...]:
    """The headline metrics the run measured (a column with at least one value)."""
    frame = run.results
    return tuple(m.name for m in headline(frame.columns) if frame[m.name].notna().any())


def cell_values(run: RunInput, metrics: Sequence[str] | None = None) -> list[CellValue]:
    """Every cell x metric (headline metrics by default) that has a value, cells in run order."""
    factors = run.factors
    labels = merged_labels(factors, [run])
    chosen = headline_metrics(run) if metrics is None else metrics
    found = []
    for key, frame in cell_groups(run.results, factors).items():
        label = cell_label(factors, key, labels)
        for metric in chosen:
            s = summarize(ok_values(frame, metric))
            if s.n == 0 or s.mean is None or not math.isfinite(s.mean):
                continue
            found.append(
                CellValue(
                    label,
                    tuple(zip(factors, key, strict=True)),
                    metric,
                    s.n,
                    s.mean,
                    _finite(s.ci_low),
                    _finite(s.ci_high),
                )
            )
    return found


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
