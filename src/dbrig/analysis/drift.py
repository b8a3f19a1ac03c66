"""Drift of a per-interval series over a long (soak) window: a slope with an honest interval.

A soak asks whether throughput, latency or memory move over an hour, not what
their mean is. The answer is the least-squares slope of the series against
time, and whether its 95 % interval excludes zero.

Why batch means, not plain OLS or Newey-West
--------------------------------------------
Consecutive sysbench intervals are not independent: a checkpoint, a purge
burst or a steal episode spans many seconds, so residuals are autocorrelated
and the plain OLS interval (n-2 degrees of freedom for 3600 "independent"
points) is far too narrow: a flat noisy hour comes out "rising" or "falling"
most of the time. Newey-West with its textbook bandwidth (about 9 lags for
3600 points) corrects correlation only up to those 9 seconds and still
over-rejects for minute-long episodes (Kiefer and Vogelsang 2005). The batch
means method of simulation output analysis (Schmeiser 1982) handles both: the
series is cut into ``batches`` (default 20, in Schmeiser's 10-30 range)
consecutive blocks, each reduced to its mean time and mean value, and the
slope is fitted to those block means with a t interval on ``batches - 2``
degrees of freedom. Blocks of three minutes are nearly independent even when
seconds are not, and the few degrees of freedom make the interval honestly
wide. With fewer points than batches, every point is its own block (plain OLS).

Everything here is pure: no I/O, no clock. NaN points (an interval with no
value) are dropped before batching.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats as scipy_stats

Direction = Literal["flat", "rising", "falling"]

DEFAULT_BATCHES = 20
MIN_POINTS = 4  # a slope on two degrees of freedom at least


def direction_of(ci_low: float, ci_high: float) -> Direction:
    """``flat`` when the interval contains zero, else the side of zero it lies on."""
    if ci_low > 0:
        return "rising"
    if ci_high < 0:
        return "falling"
    return "flat"


@dataclass(frozen=True)
class Trend:
    """A fitted straight line ``y = intercept + slope * t`` over a window.

    ``slope``, ``ci_low`` and ``ci_high`` are in y's unit per t's unit;
    ``batches`` is how many block means the fit used (its n).
    """

    slope: float
    ci_low: float
    ci_high: float
    intercept: float
    batches: int
    n: int

    @property
    def direction(self) -> Direction:
        return direction_of(self.ci_low, self.ci_high)

    def at(self, t: float) -> float:
        return self.intercept + self.slope * t


def fit_trend(
    t: ArrayLike,
    y: ArrayLike,
    *,
    batches: int = DEFAULT_BATCHES,
    confidence: float = 0.95,
) -> Trend | None:
    """The slope of ``y`` against ``t`` with a batch-means interval; None with < 4 points."""
    t_arr, y_arr = _paired(t, y)
    if len(t_arr) < MIN_POINTS:
        return None
    order = np.argsort(t_arr, kind="stable")
    t_means, y_means = _batch_means(t_arr[order], y_arr[order], max(batches, MIN_POINTS))
    slope, intercept, half = _ols(t_means, y_means, confidence)
    return Trend(slope, slope - half, slope + half, intercept, len(t_means), len(t_arr))


@dataclass(frozen=True)
class Drift:
    """A trend expressed as percent of the window's mean per hour (for rates and latencies)."""

    pct_per_h: float
    ci_low_pct_per_h: float
    ci_high_pct_per_h: float
    direction: Direction

    @classmethod
    def from_bounds(cls, pct_per_h: float, ci_low: float, ci_high: float) -> Drift:
        """A drift read back from saved columns."""
        return cls(pct_per_h, ci_low, ci_high, direction_of(ci_low, ci_high))


def relative_drift(t_s: ArrayLike, y: ArrayLike, *, batches: int = DEFAULT_BATCHES) -> Drift | None:
    """Drift of ``y`` (any unit) over ``t_s`` (seconds) in percent of its mean per hour.

    None when fewer than 4 points or the mean is zero (no scale to be relative to).
    """
    t_arr, y_arr = _paired(t_s, y)
    trend = fit_trend(t_arr / 3600.0, y_arr, batches=batches)
    if trend is None:
        return None
    mean = float(np.mean(y_arr))
    if mean == 0:
        return None
    scale = 100.0 / abs(mean)
    return Drift(trend.slope * scale, trend.ci_low * scale, trend.ci_high * scale, trend.direction)


def is_real_trend(drift: Drift, threshold_pct_per_h: float) -> bool:
    """A trend worth a warning: the interval excludes zero *and* the drift is large.

    Significance alone is not enough: an hour of 1 s intervals resolves drifts
    far below anything that matters; the practical threshold says what matters.
    """
    return drift.direction != "flat" and abs(drift.pct_per_h) >= threshold_pct_per_h


def _batch_means(t: np.ndarray, y: np.ndarray, batches: int) -> tuple[np.ndarray, np.ndarray]:
    count = min(batches, len(t))
    t_parts = np.array_split(t, count)
    y_parts = np.array_split(y, count)
    return np.array([p.mean() for p in t_parts]), np.array([p.mean() for p in y_parts])


def _ols(t: np.ndarray, y: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """Slope, intercept and the slope's t half-width."""
    n = len(t)
    t_centered = t - t.mean()
    sxx = float(np.dot(t_centered, t_centered))
    if sxx == 0:
        return 0.0, float(y.mean()), math.inf
    slope = float(np.dot(t_centered, y - y.mean())) / sxx
    intercept = float(y.mean() - slope * t.mean())
    residuals = y - (intercept + slope * t)
    sigma2 = float(np.dot(residuals, residuals)) / (n - 2)
    quantile = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 2))
    return slope, intercept, quantile * math.sqrt(sigma2 / sxx)


def _paired(t: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    t_arr = np.asarray(t, dtype=float).ravel()
    y_arr = np.asarray(y, dtype=float).ravel()
    if t_arr.shape != y_arr.shape:
        raise ValueError(f"t and y differ in length: {len(t_arr)} != {len(y_arr)}")
    keep = np.isfinite(t_arr) & np.isfinite(y_arr)
    return t_arr[keep], y_arr[keep]


# --------------------------------------------------------------------------- a soak's columns

# (series column of intervals.csv, prefix of its drift columns)
DRIFTING_SERIES = (("tps", "tps"), ("latency_pct_ms", "latency_pct"))
RSS_EDGE = 0.1  # growth compares the mean of the first and of the last tenth of the window


def soak_metrics(
    intervals: pd.DataFrame | None, server_rss: pd.DataFrame | None
) -> dict[str, float]:
    """A soak's drift columns from its measured rows (``t_s`` in seconds).

    ``intervals``: the tool's series (``tps``, ``latency_pct_ms``) gives
    ``<prefix>_drift_pct_per_h`` with ``_ci_low``/``_ci_high`` bounds.
    ``server_rss``: the server's ``rss_mb`` gives ``server_rss_growth_mib`` (the
    mean of the last tenth of the window minus that of the first) and
    ``server_rss_slope_mib_per_h`` with its bounds, fitted on the second half of
    the window only: the buffer pool fills at the start, a leak keeps growing.
    """
    out: dict[str, float] = {}
    if intervals is not None:
        for column, prefix in DRIFTING_SERIES:
            if column in intervals.columns:
                drift = relative_drift(intervals["t_s"], intervals[column])
                if drift is not None:
                    out[f"{prefix}_drift_pct_per_h"] = drift.pct_per_h
                    out[f"{prefix}_drift_ci_low_pct_per_h"] = drift.ci_low_pct_per_h
                    out[f"{prefix}_drift_ci_high_pct_per_h"] = drift.ci_high_pct_per_h
    if server_rss is not None and len(server_rss):
        out.update(_rss_columns(server_rss["t_s"], server_rss["rss_mb"]))
    return out


def _rss_columns(t_s: ArrayLike, rss_mib: ArrayLike) -> dict[str, float]:
    t, rss = _paired(t_s, rss_mib)
    if len(t) < MIN_POINTS:
        return {}
    order = np.argsort(t, kind="stable")
    t, rss = t[order], rss[order]
    edge = max(1, round(len(t) * RSS_EDGE))
    out = {"server_rss_growth_mib": float(rss[-edge:].mean() - rss[:edge].mean())}
    later = t >= t[0] + (t[-1] - t[0]) / 2
    trend = fit_trend(t[later] / 3600.0, rss[later])
    if trend is not None:
        out["server_rss_slope_mib_per_h"] = trend.slope
        out["server_rss_slope_ci_low_mib_per_h"] = trend.ci_low
        out["server_rss_slope_ci_high_mib_per_h"] = trend.ci_high
    return out
