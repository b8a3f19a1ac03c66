"""The headline metrics of the report: column, name, unit and number format.

The columns are those of :data:`dbrig.report.summary.HEADLINE` (the terminal table),
with units added for headings and chart axes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd


@dataclass(frozen=True)
class Metric:
    column: str  # column in results.csv
    name: str  # short heading, e.g. "TPS"
    unit: str  # e.g. "txn/s"; "" when the name says it all
    fmt: str  # format of one value

    @property
    def heading(self) -> str:
        return f"{self.name} ({self.unit})" if self.unit else self.name

    def format(self, value: float | None) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return ""
        return self.fmt.format(value)


HEADLINE = (
    Metric("tps", "TPS", "txn/s", "{:,.1f}"),
    Metric("qps", "QPS", "queries/s", "{:,.0f}"),
    Metric("latency_avg_ms", "avg latency", "ms", "{:,.2f}"),
    Metric("latency_pct_ms", "p95 latency", "ms", "{:,.2f}"),
    Metric("errors_per_s", "error rate", "errors/s", "{:,.2f}"),
    Metric("events_per_s", "event rate", "events/s", "{:,.1f}"),
    Metric("avg_s", "avg run time", "s", "{:,.3f}"),
    Metric("queries_per_s", "query rate", "queries/s", "{:,.0f}"),
)


def headline_metrics(results: pd.DataFrame) -> list[Metric]:
    """The headline metrics this run measured, with the latency percentile it used."""
    chosen = []
    for metric in HEADLINE:
        if metric.column in results and results[metric.column].notna().any():
            chosen.append(metric)
    pct = _percentile(results)
    return [
        replace(m, name=f"p{pct} latency") if m.column == "latency_pct_ms" else m for m in chosen
    ]


def _percentile(results: pd.DataFrame) -> str:
    if "percentile" in results:
        values = results["percentile"].dropna()
        if not values.empty:
            value = float(values.iloc[0])
            return f"{value:g}"
    return "95"
