"""The TPC-C section: the TPC-C-like workload's figures per cell (docs/tpcc.md).

Per transaction type: its count over the cell's successful repetitions, its share
of all transactions, the mean of each repetition's percentile and average latency,
its retries and New-Order's rollbacks; the cell's TPM, NOPM and retries; each consistency
condition's result over every repetition (failed ones included: a violation fails
the trial); and the caveat that this is TPC-C-like, not audited.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from dbrig.analysis.findings import CAVEAT
from dbrig.metrics import DEFAULT_PERCENTILE
from dbrig.report.sections import LoadedRun, Part, render
from dbrig.tools.tpcc import CONSISTENCY_CHECKS, TYPES

# Only New-Order rolls back (1 % of them by the specification's invalid item).
ROLLBACK_COLUMNS = {"new_order": "new_order_rollbacks"}


def section(run: LoadedRun) -> Part | None:
    results = run.data.results
    if "nopm" not in results or not results["nopm"].notna().any():
        return None
    labels = dict(zip(run.overview["cell"], run.overview["label"], strict=True))
    cells = [
        _cell(str(cell), labels.get(str(cell), ""), rows)
        for cell, rows in results.groupby("cell", sort=True)
        if rows["nopm"].notna().any()
    ]
    percentile = run.data.workload_params.get("percentile") or DEFAULT_PERCENTILE
    page = render("transactions.html.j2", cells=cells, caveat=CAVEAT, percentile=f"{percentile:g}")
    return Part("transactions", page, links=(("transactions", "TPC-C-like"),))


def _cell(cell: str, label: str, rows: pd.DataFrame) -> dict[str, Any]:
    ok = rows[rows["status"] == "ok"]
    counts = {t: _sum(ok, f"{t}_count") for t in TYPES}
    total = sum(c for c in counts.values() if not math.isnan(c))
    types = [
        {
            "name": name.replace("_", " "),
            "count": _whole(counts[name]),
            "share": f"{100 * counts[name] / total:.1f}" if total and counts[name] >= 0 else "",
            "pct": _ms(_mean(ok, f"latency_{name}_pct_ms")),
            "avg": _ms(_mean(ok, f"latency_{name}_avg_ms")),
            "rollbacks": _whole(_sum(ok, ROLLBACK_COLUMNS[name]))
            if name in ROLLBACK_COLUMNS
            else "",
            "retries": _whole(_sum(ok, f"{name}_retries")),
        }
        for name in TYPES
    ]
    return {
        "cell": cell,
        "label": label,
        "n": len(ok),
        "types": types,
        "tpm": _whole(_mean(ok, "tpm")),
        "nopm": _whole(_mean(ok, "nopm")),
        "retries": _whole(_sum(ok, "tpcc_retries")),
        "consistency": _consistency(rows),
    }


def _consistency(rows: pd.DataFrame) -> list[dict[str, str]]:
    """Each condition: held in N of N checked trials, or where it failed."""
    out = []
    for column, (condition, _) in CONSISTENCY_CHECKS.items():
        checked = rows[column].dropna() if column in rows else pd.Series(dtype=float)
        if checked.empty:
            out.append({"condition": condition, "result": "not checked", "ok": ""})
            continue
        bad = rows.loc[checked.index[checked > 0], "trial"].astype(str).tolist()
        held = len(checked) - len(bad)
        text = f"held in {held} of {len(checked)} trials"
        if bad:
            text += f"; violated in {', '.join(bad)}"
        out.append({"condition": condition, "result": text, "ok": "no" if bad else "yes"})
    return out


def _sum(rows: pd.DataFrame, column: str) -> float:
    """The column's sum over ``rows``; NaN when it has no value (or no such column)."""
    if column not in rows or not rows[column].notna().any():
        return math.nan
    return float(pd.to_numeric(rows[column], errors="coerce").sum())


def _mean(rows: pd.DataFrame, column: str) -> float:
    if column not in rows or not rows[column].notna().any():
        return math.nan
    return float(pd.to_numeric(rows[column], errors="coerce").mean())


def _whole(value: float) -> str:
    return "" if math.isnan(value) else f"{value:,.0f}"


def _ms(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.2f}"
