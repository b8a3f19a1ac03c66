"""The Results section: the per-cell table, every repetition, the failed trials."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from dbrig.metrics import Metric
from dbrig.report.data import RunData, plain_value
from dbrig.report.sections import LoadedRun, Part, render
from dbrig.report.tables import CellStats, detail_metrics, is_numeric
from dbrig.report.warning_base import throughput_metric
from dbrig.util.units import to_float


def section(run: LoadedRun) -> Part:
    """One row per cell, every repetition folded away, the failed trials."""
    data, overview = run.data, run.overview
    metrics = [*run.headline, *detail_metrics(data.results)]
    failed = _failed_trials(data, overview)
    page = render(
        "results.html.j2",
        table=_result_table(data, overview, run.stats, metrics),
        repetitions=_repetition_rows(data, overview, run.headline),
        failed_trials=failed,
    )
    links = [("results", "Results")]
    if failed:
        links.append(("failed", f"Failed trials ({len(failed)})"))
    return Part("results", page, links=tuple(links))


def _result_table(
    data: RunData, overview: pd.DataFrame, stats: CellStats, headline: list[Metric]
) -> dict[str, Any]:
    throughput = throughput_metric(stats)
    cells = list(overview["cell"])
    columns = [_metric_column(stats, cells, m) for m in headline]
    cvs = (
        stats.cv[throughput[0]].reindex(cells).to_numpy() if throughput else [math.nan] * len(cells)
    )
    rows = []
    for i, cell in enumerate(overview.to_dict("records")):
        cv = float(cvs[i])
        rows.append(
            {
                "cell": cell["cell"],
                "factors": [plain_value(cell[f]) for f in data.factors],
                "runs": f"{cell['ok']}/{cell['planned'] or cell['trials']}",
                "state": cell["state"],
                "values": [column[i] for column in columns],
                "cv": "" if math.isnan(cv) else f"{100 * cv:.1f} %",
                "cv_high": not math.isnan(cv) and cv > 0.05,
                "note": _cell_note(cell),
            }
        )
    return {
        "factor_headings": [data.labels[f] for f in data.factors],
        "numeric_factors": [is_numeric(overview[f]) for f in data.factors],
        "metrics": headline,
        "cv_heading": f"{throughput[1]} CV" if throughput else "",
        "rows": rows,
        "has_notes": any(r["note"] for r in rows),
    }


def _metric_column(stats: CellStats, cells: list[str], metric: Metric) -> list[dict[str, str]]:
    """One metric's table cells: mean, ± half-width, and a tooltip with n, interval and CV."""

    def values(stat: str) -> list[float]:
        frame: pd.DataFrame = getattr(stats, stat)
        if metric.column not in frame.columns:
            return [math.nan] * len(cells)
        return frame[metric.column].reindex(cells).astype(float).tolist()

    out = []
    for mean, half, n, cv, low, high in zip(
        values("mean"),
        values("half"),
        values("n"),
        values("cv"),
        values("ci_low"),
        values("ci_high"),
        strict=True,
    ):
        if math.isnan(mean):
            out.append({"mean": "", "half": "", "title": ""})
            continue
        title = f"n={n:.0f}"
        if not math.isnan(half):
            title += f", 95 % CI {metric.format(low)} .. {metric.format(high)}"
        if not math.isnan(cv):
            title += f", CV {100 * cv:.1f} %"
        out.append(
            {
                "mean": metric.format(mean),
                "half": "" if math.isnan(half) else "± " + metric.format(half),
                "title": title,
            }
        )
    return out


def _cell_note(cell: dict[str, Any]) -> str:
    state = cell["state"]
    if state == "pending":
        return "not run yet"
    if state == "failed":
        return f"every repetition failed: {cell['failed_reasons']}"
    if state == "partial":
        return f"{cell['failed']} failed: {cell['failed_reasons']}"
    if state == "incomplete":
        return f"{cell['trials']} of {cell['planned']} repetitions saved"
    return ""


def _repetition_rows(
    data: RunData, overview: pd.DataFrame, headline: list[Metric]
) -> list[dict[str, Any]]:
    if data.results.empty:
        return []
    factors: dict[str, list[Any]] = {}
    if data.factors:  # each cell's values once: .loc per trial took most of the table's time
        by_cell = overview.set_index("cell")[list(data.factors)]
        factors = {
            str(cell): [plain_value(v) for v in values]
            for cell, values in zip(by_cell.index, by_cell.itertuples(index=False), strict=True)
        }
    ordered = data.results.sort_values(["cell", "repetition"], kind="stable")
    columns = [m.column for m in headline]
    rows = []
    for rec in ordered[["trial", "cell", "repetition", "status", "reason", *columns]].itertuples(
        index=False
    ):
        values = rec[5:]
        cell = str(rec.cell)
        rows.append(
            {
                "trial": rec.trial,
                "cell": cell,
                "factors": factors.get(cell, []),
                "repetition": int(rec.repetition),
                "ok": rec.status == "ok",
                "status": rec.status,
                "reason": rec.reason or "",
                "values": [m.format(to_float(v)) for m, v in zip(headline, values, strict=True)],
            }
        )
    return rows


def _failed_trials(data: RunData, overview: pd.DataFrame) -> list[dict[str, str]]:
    failed = data.results[data.results["status"] != "ok"]
    labels = dict(zip(overview["cell"], overview["label"], strict=True))
    return [
        {
            "trial": str(r.trial),
            "cell": str(r.cell),
            "label": f"{r.cell} {labels.get(str(r.cell), '')}",
            "status": str(r.status),
            "reason": str(r.reason or "no reason recorded"),
        }
        for r in failed.itertuples()
    ]
