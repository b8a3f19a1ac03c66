"""The inputs of a run's findings and the small helpers over its results frame.

:mod:`dbrig.analysis.findings` (one sentence per experiment) and
:mod:`dbrig.analysis.effects` (a varied factor's effect, repetitions that disagree)
read the same :class:`RunFacts`; pure, like the rest of ``analysis/``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from dbrig.analysis.scaling import LatencyKnee, UslFit
from dbrig.metrics import DEFAULT_PERCENTILE, HEADLINE, Metric, metric, throughput_metrics

DISAGREE_CV = 0.10  # repetitions of a cell that disagree by more than this CV


@dataclass(frozen=True)
class Finding:
    """One answer: its ``topic`` (see the module docstring) and its sentence."""

    topic: str
    text: str


@dataclass(frozen=True)
class SweepFacts:
    """A concurrency sweep as the caller found it: its title, its fit and its knee."""

    title: str  # "threads sweep" or "threads sweep, cpu=1"
    label: str  # the concurrency factor's short name
    throughput: Metric
    fit: UslFit
    knee: LatencyKnee
    latency_heading: str = "latency (ms)"


@dataclass(frozen=True)
class RunFacts:
    """Everything the findings read: all of it saved with the run."""

    results: pd.DataFrame  # results.csv: one row per trial
    factors: Sequence[str]  # the matrix's factor paths
    labels: Mapping[str, str]  # factor path -> short label
    cell_labels: Mapping[str, str] = field(default_factory=dict)  # cell -> "threads=2"
    faults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # trial -> faults.json
    sweeps: Sequence[SweepFacts] = ()
    soak: Mapping[str, Any] | None = None  # the scenario's soak block, None when no soak
    concurrency_factor: str | None = None  # judged by the sweep, not as an effect


def measured_headline(rows: pd.DataFrame) -> list[Metric]:
    """The cell's headline metrics, throughput first, without the error rate."""
    names = [m.name for m in throughput_metrics()] + [m.name for m in HEADLINE]
    out: list[Metric] = []
    for name in dict.fromkeys(names):
        entry = metric(name)
        if entry is None or not entry.headline or name == "errors_per_s":
            continue
        if name in rows and pd.to_numeric(rows[name], errors="coerce").notna().any():
            out.append(entry.at_percentile(percentile(rows)))
    return out


def percentile(rows: pd.DataFrame) -> object:
    """The latency percentile the trials measured (95 unless they say otherwise)."""
    if "percentile" in rows:
        values = pd.to_numeric(rows["percentile"], errors="coerce").dropna()
        if not values.empty and values.iloc[0] > 0:
            return short_number(values.iloc[0])
    return DEFAULT_PERCENTILE


def by_cell(ok: pd.DataFrame, column: str | None) -> Iterable[tuple[str, pd.DataFrame]]:
    if "cell" not in ok:
        return []
    rows = ok if column is None else ok[ok[column].notna()]
    return ((str(cell), group) for cell, group in rows.groupby("cell", sort=True))


def where(cell: str, facts: RunFacts) -> str:
    """`` threads=2`` for a run of several cells, nothing for a run of one."""
    if len(facts.cell_labels) == 1 or facts.cell_labels.get(cell) == "(single cell)":
        return ""
    return " " + cell_name(cell, facts)


def prefixed(cell: str, facts: RunFacts, text: str) -> str:
    """``threads=2: text``; the text alone in a run of one cell."""
    if len(facts.cell_labels) == 1 or facts.cell_labels.get(cell) == "(single cell)":
        return text
    return f"{cell_name(cell, facts)}: {text}"


def cell_name(cell: str, facts: RunFacts, repetition: Any = None) -> str:
    label = facts.cell_labels.get(cell, "")
    name = label if label and label != "(single cell)" else cell
    return name + (f" r{int(repetition)}" if as_float(repetition) is not None else "")


def texts(values: pd.Series) -> pd.Series:
    """Factor values as they were written: 4 not 4.0, None for a cell the factor is absent from."""
    return values.map(as_written)


def texts_frame(frame: pd.DataFrame, columns: Sequence[str]) -> list[pd.Series]:
    return [texts(frame[c]).fillna("") for c in columns]


def as_written(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def as_float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def short_number(value: Any) -> str:
    number = as_float(value)
    return str(value) if number is None else f"{number:g}"
