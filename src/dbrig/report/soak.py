"""The report's Soak section: each soak trial's drift, read from its saved columns."""

from __future__ import annotations

import math
from typing import Any

from dbrig.analysis import drift
from dbrig.report.data import RunData

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
    row = {
        "trial": str(trial["trial"]),
        "label": data.labels.get(str(trial["cell"]), ""),
    }
    for prefix, name in DRIFTS:
        row[name] = _drift_text(trial, prefix)
    row["rss_growth"] = _number(trial.get("server_rss_growth_mib"), "{:+.0f} MiB")
    row["rss_slope"] = _slope_text(
        trial.get("server_rss_slope_mib_per_h"),
        trial.get("server_rss_slope_ci_low_mib_per_h"),
        trial.get("server_rss_slope_ci_high_mib_per_h"),
        "MiB/h",
    )
    return row


def _drift_text(trial: dict[str, Any], prefix: str) -> str:
    return _slope_text(
        trial.get(f"{prefix}_drift_pct_per_h"),
        trial.get(f"{prefix}_drift_ci_low_pct_per_h"),
        trial.get(f"{prefix}_drift_ci_high_pct_per_h"),
        "%/h",
    )


def _slope_text(slope: Any, low: Any, high: Any, unit: str) -> str:
    """``-12.0 %/h [-15.0, -9.0] falling``; empty when the trial has no such column."""
    if not all(_finite(v) for v in (slope, low, high)):
        return ""
    direction = drift.direction_of(float(low), float(high))
    return f"{float(slope):+.1f} {unit} [{float(low):+.1f}, {float(high):+.1f}] {direction}"


def _number(value: Any, fmt: str) -> str:
    return fmt.format(float(value)) if _finite(value) else ""


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)
