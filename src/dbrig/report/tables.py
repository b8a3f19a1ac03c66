"""Per-cell aggregation of repetitions, vectorised with pandas.

The statistics are those of :func:`dbrig.analysis.stats.summarize`, computed for every
cell and metric at once (a run may have a thousand cells): only successful
repetitions count, NaN and +/-inf are dropped, ``stdev`` has ddof=1, ``cv`` is
``stdev / |mean|`` (a fraction), and the interval for the mean is Student's t.
A spread needs two values: with n < 2 ``stdev``, ``cv`` and the interval are NaN.

``results_by_cell.csv`` (:func:`by_cell_frame`) has one row per planned cell:
``cell``, ``server``, ``label``, one column per factor (full dotted path),
``planned``, ``trials`` (saved), ``ok``, ``failed``, ``state`` (ok, partial,
failed, incomplete, pending), ``failed_reasons``, then for every numeric metric
of results.csv ``<metric>_mean``, ``<metric>_ci95_low``, ``<metric>_ci95_high``
(bounds of the mean) and ``<metric>_cv`` (fraction), in the metric's own unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import stdtrit  # Student's t quantile; lighter to import than scipy.stats

from dbrig.metrics import DEFAULT_PERCENTILE, Metric, detail, headline

IDENTITY_COLUMNS = ("trial", "cell", "repetition", "server", "status", "reason")
CSV_STATS = (("mean", "mean"), ("ci_low", "ci95_low"), ("ci_high", "ci95_high"), ("cv", "cv"))


@dataclass(frozen=True)
class CellStats:
    """Each field is a frame indexed by cell with one column per metric."""

    n: pd.DataFrame
    mean: pd.DataFrame
    stdev: pd.DataFrame
    cv: pd.DataFrame
    half: pd.DataFrame  # half-width of the confidence interval
    ci_low: pd.DataFrame
    ci_high: pd.DataFrame

    def value(self, stat: str, cell: str, metric: str) -> float:
        frame: pd.DataFrame = getattr(self, stat)
        if metric not in frame.columns or cell not in frame.index:
            return float("nan")
        return float(frame.at[cell, metric])


def metric_columns(results: pd.DataFrame, factors: tuple[str, ...] | list[str]) -> list[str]:
    """Numeric columns of results.csv that are measurements (not identity or factors)."""
    skip = set(IDENTITY_COLUMNS) | set(factors)
    return [
        c
        for c in results.columns
        if c not in skip
        and pd.api.types.is_numeric_dtype(results[c])
        and not pd.api.types.is_bool_dtype(results[c])
    ]


def aggregate(
    results: pd.DataFrame, metrics: list[str], cells: list[str], confidence: float = 0.95
) -> CellStats:
    """Mean, spread and t interval per cell and metric over the successful repetitions."""
    ok = results[results["status"] == "ok"] if not results.empty else results
    values = ok[metrics].apply(pd.to_numeric, errors="coerce").astype(float)
    values = values.where(np.isfinite(values))
    grouped = values.groupby(ok["cell"].astype(str))
    index = pd.Index(cells, name="cell")
    n = grouped.count().reindex(index).fillna(0).astype(int)
    mean = grouped.mean().reindex(index)
    stdev = grouped.std(ddof=1).reindex(index).where(n > 1)
    dof = (n - 1).where(n > 1).astype(float)
    t = pd.DataFrame(
        stdtrit(dof.to_numpy(), 0.5 + confidence / 2), index=index, columns=dof.columns
    )
    half = t * stdev / np.sqrt(n.where(n > 0))
    cv = stdev / mean.abs().where(mean != 0)
    return CellStats(
        n=n, mean=mean, stdev=stdev, cv=cv, half=half, ci_low=mean - half, ci_high=mean + half
    )


def cell_overview(results: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """``cells`` plus counts of saved, ok and failed trials, the failure reasons and a state."""
    out = cells.copy()
    if results.empty:
        counts = pd.DataFrame(index=pd.Index([], name="cell"), columns=["trials", "ok", "failed"])
        reasons = pd.Series(dtype=object)
    else:
        flags = pd.DataFrame(
            {
                "cell": results["cell"].astype(str),
                "trials": 1,
                "ok": (results["status"] == "ok").astype(int),
                "failed": (results["status"] != "ok").astype(int),
            }
        )
        counts = flags.groupby("cell").sum()
        failed = results[results["status"] != "ok"]
        reasons = (
            failed.assign(reason=failed["reason"].fillna("failed").astype(str))
            .groupby("cell")["reason"]
            .agg(lambda r: "; ".join(dict.fromkeys(r)))
        )
    for column in ("trials", "ok", "failed"):
        out[column] = out["cell"].map(counts[column]).fillna(0).astype(int)
    by_cell = reasons.to_dict()
    out["failed_reasons"] = [by_cell.get(cell, "") for cell in out["cell"]]
    out["state"] = np.select(
        [
            out["trials"] == 0,
            (out["ok"] == 0) & (out["failed"] > 0),
            out["failed"] > 0,
            out["trials"] < out["planned"],
        ],
        ["pending", "failed", "partial", "incomplete"],
        default="ok",
    )
    return out


def by_cell_frame(overview: pd.DataFrame, stats: CellStats) -> pd.DataFrame:
    """The table written to results_by_cell.csv (columns in the module docstring)."""
    cells = overview["cell"]
    columns = {
        f"{metric}_{suffix}": getattr(stats, stat)[metric].reindex(cells).to_numpy()
        for metric in stats.mean.columns
        for stat, suffix in CSV_STATS
    }
    metrics = pd.DataFrame(columns, index=overview.index)
    return pd.concat([overview, metrics], axis=1)


def headline_metrics(results: pd.DataFrame) -> list[Metric]:
    """The headline metrics this run measured, with the latency percentile it used."""
    measured = {c for c in results.columns if results[c].notna().any()}
    return list(headline(measured, run_percentile(results)))


def detail_metrics(results: pd.DataFrame) -> list[Metric]:
    """The context columns this run has (stress-ng achieved, CPU by role, client CPU, ...)."""
    return list(detail({c for c in results.columns if results[c].notna().any()}))


def run_percentile(results: pd.DataFrame) -> str:
    """The latency percentile a run's tool reported (its ``percentile`` column), else 95."""
    if "percentile" in results:
        values = results["percentile"].dropna()
        if not values.empty:
            value = float(values.iloc[0])
            return f"{value:g}"
    return str(DEFAULT_PERCENTILE)


def is_numeric(values: pd.Series) -> bool:
    """Every value a number (not a bool, not NaN): a factor drawn on a numeric axis."""

    def numeric(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and not pd.isna(v)

    return bool(len(values)) and all(numeric(v) for v in values)
