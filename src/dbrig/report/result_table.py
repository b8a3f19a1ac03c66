"""The per-cell result table printed after a run and by ``dbrig show``, and its pivot.

One row per cell: its factors, then each headline metric as the mean over
repetitions with its 95 % confidence interval and coefficient of variation.
Only reads saved results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from dbrig.analysis.stats import summarize
from dbrig.errors import ConfigError
from dbrig.metrics import DEFAULT_PERCENTILE, HEADLINE, format_spec, headline


def cell_table(
    results: pd.DataFrame, factors: Sequence[str], labels: Mapping[str, str]
) -> pd.DataFrame:
    """Aggregate repetitions: one row per cell with mean, CI and CV per headline metric."""
    if results.empty:
        return pd.DataFrame()
    rows = []
    for cell, group in results.groupby("cell", sort=True):
        ok = group[group["status"] == "ok"]
        row: dict[str, object] = {"cell": cell, "server": group["server"].iloc[0]}
        for factor in factors:
            if factor in group:
                row[labels.get(factor, factor)] = group[factor].iloc[0]
        row["n"] = f"{len(ok)}/{len(group)}"
        for metric in HEADLINE:
            column = metric.name
            if column in ok and ok[column].notna().any():
                row[column] = _mean_ci_cv(ok[column].dropna().tolist())
        failed = group[group["status"] != "ok"]
        row["failed"] = "; ".join(str(r) for r in failed["reason"].dropna().unique())
        rows.append(row)
    return pd.DataFrame(rows)


def _mean_ci_cv(values: list[float]) -> tuple[float, float | None, float | None]:
    s = summarize(values)
    half = None if s.ci_high is None or s.mean is None else s.ci_high - s.mean
    return (s.mean, half, s.cv)


def format_cell(value: object, fmt: str) -> str:
    if not isinstance(value, tuple):
        return (
            "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
        )
    mean, half, cv = value
    text = fmt.format(mean)
    if half is not None and not math.isnan(half):
        text += " ±" + fmt.format(half)
    if cv is not None and not math.isnan(cv):
        text += f" ({cv * 100:.1f}%)"
    return text


def render(table: pd.DataFrame, percentile: object = None) -> tuple[list[str], list[list[str]]]:
    """Headings and rows of strings, ready for a terminal table."""
    if table.empty:
        return [], []
    formats = {
        m.name: (m.terminal_heading, m.terminal_format)
        for m in headline(percentile=percentile or DEFAULT_PERCENTILE)
    }
    headings, columns = [], []
    for column in table.columns:
        if column == "failed" and not table[column].astype(bool).any():
            continue
        if column == "server" and table[column].nunique() == 1:
            continue
        headings.append(formats.get(column, (column,))[0])
        columns.append(column)
    rows = []
    for _, record in table.iterrows():
        rows.append([format_cell(record[c], formats.get(c, ("", "{}"))[1]) for c in columns])
    return headings, rows


def markdown(headings: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(headings), line(["---"] * len(headings)), *map(line, rows)])


def pivot(
    results: pd.DataFrame, rows: str, columns: str, metric: str, labels: Mapping[str, str]
) -> tuple[list[str], list[list[str]]]:
    """The seeds' shape: one factor down, one across, a metric's mean ±CI in each cell.

    Seed 001's table is ``--rows server --columns load_type --metric avg_s``.
    Factors may be given by full path or short label.
    """
    row_key, column_key = (_factor_column(results, name, labels) for name in (rows, columns))
    if metric not in results:
        raise ConfigError(f"--metric {metric}: not a column of this run's results")
    ok = results[results["status"] == "ok"]
    fmt = "{:" + format_spec(metric) + "}"
    across = list(dict.fromkeys(results[column_key]))
    body = []
    for down, group in ok.groupby(row_key, sort=False):
        cells = [str(down)]
        for value in across:
            values = group.loc[group[column_key] == value, metric].dropna().tolist()
            cells.append(format_cell(_mean_ci_cv(values), fmt) if values else "")
        body.append(cells)
    heading = f"{labels.get(row_key, row_key)} \\ {labels.get(column_key, column_key)}"
    return [heading, *map(str, across)], body


def _factor_column(results: pd.DataFrame, name: str, labels: Mapping[str, str]) -> str:
    if name in results:
        return name
    matches = [path for path, label in labels.items() if label == name or path.endswith("." + name)]
    if len(matches) == 1 and matches[0] in results:
        return matches[0]
    choices = ", ".join(labels.get(p, p) for p in labels) or "none"
    raise ConfigError(f"'{name}': not a factor of this run (factors: {choices})")
