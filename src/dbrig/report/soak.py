"""The report's Soak section: each soak trial's drift, read from its saved columns.

A trial whose measured window is under 10 minutes (:data:`MIN_SOAK_WINDOW_S`) is not
judged: its slopes are shown without "rising" or "flat" (an hourly slope from seconds
is an extrapolation), and the row says so. Server memory's slope is a number to set
beside the buffer pool (``+16.6 MiB/h (13.0 % of the 128 MiB buffer pool per hour)``),
never a verdict on its own.
"""

from __future__ import annotations

import math
from typing import Any

from dbrig.analysis import drift
from dbrig.report.data import RunData
from dbrig.report.warning_base import MIN_SOAK_WINDOW_S, buffer_pool_bytes

DRIFTS = (("tps", "TPS"), ("latency_pct", "latency"))


def section_rows(data: RunData) -> list[dict[str, str]]:
    """One row per successful soak trial (none when the run is no soak)."""
    if not isinstance(data.scenario.get("soak"), dict):
        return []
    results = data.results
    if "tps_drift_pct_per_h" not in results and "server_rss_growth_mib" not in results:
        return []
    ok = results[results["status"] == "ok"].sort_values(["cell", "repetition"], kind="stable")
    return [_row(data, trial) for trial in ok.to_dict("records")]


def _row(data: RunData, trial: dict[str, Any]) -> dict[str, str]:
    window = trial.get("measured_time_s")
    judged = not _finite(window) or float(window) >= MIN_SOAK_WINDOW_S
    row = {
        "trial": str(trial["trial"]),
        "label": _cell_label(data, str(trial["cell"])),
        "judged": "" if judged else _not_judged(float(window)),
    }
    for prefix, name in DRIFTS:
        row[name] = _drift_text(trial, prefix, judged)
    row["rss_growth"] = _number(trial.get("server_rss_growth_mib"), "{:+.0f} MiB")
    row["rss_slope"] = _slope_text(
        trial.get("server_rss_slope_mib_per_h"),
        trial.get("server_rss_slope_ci_low_mib_per_h"),
        trial.get("server_rss_slope_ci_high_mib_per_h"),
        "MiB/h",
        judged=False,  # a number to set beside the buffer pool, not a verdict
    )
    pool = _buffer_pool_mib(data, str(trial["cell"]))
    slope = trial.get("server_rss_slope_mib_per_h")
    if row["rss_slope"] and pool and _finite(slope):
        share = 100 * float(slope) / pool
        row["rss_slope"] += f" ({share:.1f} % of the {pool:g} MiB buffer pool per hour)"
    return row


def _cell_label(data: RunData, cell: str) -> str:
    """``c000 threads=4``: the cell and its factors (data.labels names factors, not cells)."""
    rows = data.cells[data.cells["cell"] == cell]
    label = str(rows["label"].iloc[0]) if not rows.empty else ""
    return f"{cell} {label}".strip()


def _not_judged(window_s: float) -> str:
    minutes = MIN_SOAK_WINDOW_S / 60
    return f"not judged: window under {minutes:g} minutes ({window_s:.0f} s)"


def _buffer_pool_mib(data: RunData, cell: str) -> float | None:
    rows = data.cells[data.cells["cell"] == cell]
    factors = rows.iloc[0].to_dict() if not rows.empty else {"cell": cell}
    pool = buffer_pool_bytes(data, factors)
    return pool / 2**20 if pool else None


def _drift_text(trial: dict[str, Any], prefix: str, judged: bool) -> str:
    return _slope_text(
        trial.get(f"{prefix}_drift_pct_per_h"),
        trial.get(f"{prefix}_drift_ci_low_pct_per_h"),
        trial.get(f"{prefix}_drift_ci_high_pct_per_h"),
        "%/h",
        judged=judged,
    )


def _slope_text(slope: Any, low: Any, high: Any, unit: str, *, judged: bool) -> str:
    """``-12.0 %/h [-15.0, -9.0] falling`` (without the direction when not ``judged``);
    empty when the trial has no such column."""
    if not all(_finite(v) for v in (slope, low, high)):
        return ""
    text = f"{float(slope):+.1f} {unit} [{float(low):+.1f}, {float(high):+.1f}]"
    return f"{text} {drift.direction_of(float(low), float(high))}" if judged else text


def _number(value: Any, fmt: str) -> str:
    return fmt.format(float(value)) if _finite(value) else ""


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
