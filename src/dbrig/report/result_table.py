"""The per-cell result table printed after a run and by ``dbrig show``, and its pivot.

One row per cell: its factors, then each headline metric as the mean over
repetitions with its 95 % confidence interval and coefficient of variation,
then the context columns the run has (stress-ng's achieved share and CPU, CPU
by process role, the client's user and system CPU, mysqlslap's fastest and
slowest iteration) as means only. Only reads saved results.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from dbrig.analysis.stats import summarize
from dbrig.errors import ConfigError
from dbrig.metrics import DEFAULT_PERCENTILE, HEADLINE, detail, format_spec, headline


def cell_table(
    results: pd.DataFrame, factors: Sequence[str], labels: Mapping[str, str]
) -> pd.DataFrame:
    """Aggregate repetitions: one row per cell with mean, CI and CV per headline metric."""
    if results.empty:
        return pd.DataFrame()
    context = detail({c for c in results.columns if results[c].notna().any()})
    rows = []
    for cell, group in results.groupby("cell", sort=True):
        ok = group[group["status"] == "ok"]
        row: dict[str, object] = {"cell": cell, "server": group["server"].iloc[0]}
        for factor in factors:
            if factor in group:
                row[labels.get(factor, factor)] = as_written(group[factor].iloc[0])
        row["n"] = f"{len(ok)}/{len(group)}"
        for metric in HEADLINE:
            column = metric.name
            if column in ok and ok[column].notna().any():
                row[column] = _mean_ci_cv(ok[column].dropna().tolist())
        for metric in context:
            values = pd.to_numeric(ok[metric.name], errors="coerce").dropna()
            row[metric.name] = float(values.mean()) if len(values) else math.nan
        failed = group[group["status"] != "ok"]
        row["failed"] = "; ".join(str(r) for r in failed["reason"].dropna().unique())
        rows.append(row)
    return pd.DataFrame(rows)


def as_written(value: object) -> object:
    """A factor value as the matrix wrote it: 20000 not 20000.0 (a column that other
    blocks leave empty is read as floats), nothing for a cell its block does not set."""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if value.is_integer():
            return str(int(value))
    return value


def _mean_ci_cv(values: list[float]) -> tuple[float, float | None, float | None]:
    s = summarize(values)
    half = None if s.ci_high is None or s.mean is None else s.ci_high - s.mean
    return (s.mean, half, s.cv)


def format_cell(value: object, fmt: str) -> str:
    if isinstance(value, float) and not math.isnan(value):
        return fmt.format(value)
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
        for m in (*headline(percentile=percentile or DEFAULT_PERCENTILE), *detail())
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


def fit_width(
    headings: list[str], rows: list[list[str]], width: int
) -> tuple[list[str], list[list[str]], list[str]]:
    """Drop context columns (from the right) until the table fits ``width`` characters;
    the headline metrics and factors always stay. Returns the dropped headings too."""
    context = {m.terminal_heading for m in detail()}
    keep = list(range(len(headings)))

    def needed() -> int:
        return (
            sum(
                3 + max(len(headings[i]), *(len(r[i]) for r in rows)) if rows else len(headings[i])
                for i in keep
            )
            + 1
        )

    dropped: list[str] = []
    for i in reversed(range(len(headings))):
        if needed() <= width:
            break
        if headings[i] in context:
            keep.remove(i)
            dropped.insert(0, headings[i])
    return [headings[i] for i in keep], [[r[i] for i in keep] for r in rows], dropped


def markdown(headings: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(headings), line(["---"] * len(headings)), *map(line, rows)])


def csv_text(headings: list[str], rows: list[list[str]]) -> str:
    """The same table as CSV (quoted where a cell needs it), without a trailing newline."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(headings)
    writer.writerows(rows)
    return buffer.getvalue().rstrip("\n")


@dataclass(frozen=True)
class Pivot:
    """A pivot ready to print: ``pooled_over`` names the factors whose cells were
    averaged together (only with ``pool``), each with its number of values."""

    headings: list[str]
    rows: list[list[str]]
    pooled_over: dict[str, int]


def pivot(
    results: pd.DataFrame,
    rows: Sequence[str] | str,
    columns: Sequence[str] | str,
    metric: str,
    labels: Mapping[str, str],
    *,
    factors: Sequence[str] = (),
    pool: bool = False,
) -> Pivot:
    """The seeds' shape: factors down, factors across, a metric's mean ±CI in each cell.

    Seed 001's table is ``--rows server --columns load_type --metric avg_s``.
    Factors may be given by full path or short label; several on one side are one
    joint factor (``engine, concurrency``). A factor of ``factors`` that is on
    neither side but varies would be averaged into the cells, and a pooled spread
    is not one cell's spread: refused unless ``pool``.
    """
    rows, columns = _names(rows), _names(columns)
    row_keys = [_factor_column(results, name, labels) for name in rows]
    column_keys = [_factor_column(results, name, labels) for name in columns]
    if metric not in results:
        raise ConfigError(f"--metric {metric}: not a column of this run's results")
    ok = results[results["status"] == "ok"]
    others = [f for f in factors if f not in (*row_keys, *column_keys) and f in ok]
    averaged = _varying_within(ok, [*row_keys, *column_keys], others)
    if averaged and not pool:
        listed = ", ".join(f"{labels.get(f, f)} ({n} values)" for f, n in averaged.items())
        raise ConfigError(
            f"show: the pivot would average over {listed}; fix them with --where "
            "FACTOR=VALUE, add them to --rows or --columns, or pass --pool"
        )
    fmt = "{:" + format_spec(metric) + "}"
    down = _joint(ok, row_keys)
    across_values = _joint(results, column_keys)
    across = list(dict.fromkeys(across_values))
    ok_across = across_values.loc[ok.index]
    body = []
    for value, group in ok.groupby(down, sort=False):
        cells = [str(value)]
        for column in across:
            values = group.loc[ok_across.loc[group.index] == column, metric].dropna().tolist()
            cells.append(format_cell(_mean_ci_cv(values), fmt) if values else "")
        body.append(cells)
    side = ", ".join(labels.get(k, k) for k in row_keys)
    top = ", ".join(labels.get(k, k) for k in column_keys)
    return Pivot([f"{side} \\ {top}", *map(str, across)], body, averaged)


def _names(value: Sequence[str] | str) -> list[str]:
    items = [value] if isinstance(value, str) else list(value)
    return [name.strip() for item in items for name in item.split(",") if name.strip()]


def _joint(frame: pd.DataFrame, keys: Sequence[str]) -> pd.Series:
    """One label per trial for several factors together: "InnoDB, 10"."""
    if len(keys) == 1:
        return frame[keys[0]].astype(str)
    return frame[list(keys)].astype(str).agg(", ".join, axis=1)


def _varying_within(
    frame: pd.DataFrame, keys: Sequence[str], others: Sequence[str]
) -> dict[str, int]:
    """Factors that take several values inside one pivot cell, with the most values seen.

    A factor varied together with a shown one (seed 001's number_of_queries with
    load_type) is constant in each cell and pools nothing.
    """
    keys = list(dict.fromkeys(keys))
    if frame.empty or not others:
        return {}
    text = frame[[*keys, *others]].astype(str)
    counts = text.groupby(list(keys))[list(others)].nunique().max()
    return {f: int(counts[f]) for f in others if counts[f] > 1}


def where(
    results: pd.DataFrame, conditions: Sequence[str], labels: Mapping[str, str]
) -> pd.DataFrame:
    """The trials whose factors match every ``FACTOR=VALUE`` (2, 2.0 and "2" alike)."""
    kept = results
    for condition in conditions:
        name, sep, value = condition.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--where {condition}: expected FACTOR=VALUE, e.g. threads=8")
        column = _factor_column(results, name.strip(), labels)
        wanted = _same_value(value.strip())
        match = kept[column].map(_same_value) == wanted
        if not match.any():
            seen = ", ".join(dict.fromkeys(str(v) for v in results[column]))
            raise ConfigError(
                f"--where {condition}: no trial has {labels.get(column, column)}={value.strip()} "
                f"(values: {seen})"
            )
        kept = kept[match]
    return kept


def _same_value(value: object) -> str:
    text = str(value)
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else repr(number)


def _factor_column(results: pd.DataFrame, name: str, labels: Mapping[str, str]) -> str:
    if name in results:
        return name
    matches = [path for path, label in labels.items() if label == name or path.endswith("." + name)]
    if len(matches) == 1 and matches[0] in results:
        return matches[0]
    choices = ", ".join(labels.get(p, p) for p in labels) or "none"
    raise ConfigError(f"'{name}': not a factor of this run (factors: {choices})")
