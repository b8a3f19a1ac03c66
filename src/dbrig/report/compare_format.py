"""How a compare report writes its numbers: means, changes, intervals, p, n (every rendering)."""

from __future__ import annotations

import math

from dbrig.analysis.compare import Row
from dbrig.analysis.stats import Comparison


def format_number(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    size = abs(value)
    if size >= 100:
        return f"{value:.1f}"
    if size >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def format_delta(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:+.1f} %"


def format_ci(stats: Comparison) -> str:
    if stats.p_value is None:
        return "-"
    if stats.ci_low_pct is None or stats.ci_high_pct is None:
        return "unbounded"
    return f"[{stats.ci_low_pct:+.1f}, {stats.ci_high_pct:+.1f}] %"


def format_p(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def format_mde(value: float | None) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):
        return "any"
    return f"{value:.0f} %" if value >= 10 else f"{value:.1f} %"


def format_n(row: Row) -> str:
    return f"{row.stats.n_base}/{row.stats.n_cand}"
