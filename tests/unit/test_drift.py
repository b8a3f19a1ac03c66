"""analysis/drift.py on synthetic series: a known slope, a flat autocorrelated series."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dbrig.analysis import drift


def ar1_noise(n: int, phi: float, sd: float, rng: np.random.Generator) -> np.ndarray:
    """Autocorrelated noise like a sysbench interval series (a burst spans many seconds)."""
    noise = np.empty(n)
    noise[0] = rng.normal(0, sd)
    innovations = rng.normal(0, sd * np.sqrt(1 - phi**2), n)
    for i in range(1, n):
        noise[i] = phi * noise[i - 1] + innovations[i]
    return noise


def test_a_known_slope_is_found_within_its_interval() -> None:
    rng = np.random.default_rng(1)
    t = np.arange(3600.0)
    y = 1000 - 0.05 * t + ar1_noise(3600, 0.9, 20, rng)  # -180 TPS/h on 1000: -18 %/h
    trend = drift.fit_trend(t, y)
    assert trend is not None
    assert trend.ci_low < -0.05 < trend.ci_high
    assert trend.direction == "falling"
    result = drift.relative_drift(t, y)
    assert result is not None and result.direction == "falling"
    assert result.pct_per_h == pytest.approx(-180 / y.mean() * 100, rel=0.1)
    assert drift.is_real_trend(result, threshold_pct_per_h=5.0)


def test_a_rising_series_is_rising() -> None:
    t = np.arange(600.0)
    y = 5 + 0.01 * t + ar1_noise(600, 0.5, 0.2, np.random.default_rng(2))
    trend = drift.fit_trend(t, y)
    assert trend is not None and trend.direction == "rising"


def test_flat_autocorrelated_noise_is_flat_nearly_always() -> None:
    """The interval must account for autocorrelation: plain OLS on 3600 points calls most
    of these series rising or falling; batch means keep false calls near the nominal 5 %."""
    rng = np.random.default_rng(3)
    t = np.arange(3600.0)
    calls = [
        drift.fit_trend(t, 1000 + ar1_noise(3600, 0.95, 50, rng)).direction for _ in range(200)
    ]
    false_calls = sum(call != "flat" for call in calls)
    assert false_calls <= 20  # 10 %: nominal 5 % plus sampling error of 200 draws


def test_a_flat_series_is_flat_and_not_a_real_trend() -> None:
    rng = np.random.default_rng(4)
    t = np.arange(3600.0)
    result = drift.relative_drift(t, 500 + ar1_noise(3600, 0.8, 40, rng))
    assert result is not None and result.direction == "flat"
    assert not drift.is_real_trend(result, threshold_pct_per_h=5.0)


def test_a_significant_but_small_drift_is_no_real_trend() -> None:
    t = np.arange(3600.0)
    y = 1000 + 0.005 * t + np.random.default_rng(5).normal(0, 1, 3600)  # +1.8 %/h, clear
    result = drift.relative_drift(t, y)
    assert result is not None and result.direction == "rising"
    assert not drift.is_real_trend(result, threshold_pct_per_h=5.0)


def test_too_few_points_give_no_trend_and_nans_are_dropped() -> None:
    assert drift.fit_trend([0, 1, 2], [1, 2, 3]) is None
    trend = drift.fit_trend([0, 1, 2, 3, 4, np.nan], [0, 2, 4, 6, 8, 1])
    assert trend is not None and trend.slope == pytest.approx(2.0) and trend.n == 5
    assert drift.relative_drift([0, 1, 2, 3], [0, 0, 0, 0]) is None


def test_soak_metrics_columns() -> None:
    t = np.arange(0.0, 1200.0)
    intervals = pd.DataFrame({"t_s": t, "tps": 100 - 0.01 * t, "latency_pct_ms": 2 + 0 * t})
    rss = pd.DataFrame({"t_s": t, "rss_mb": 100 + np.minimum(t, 300) * 0.1})  # fills, then flat
    out = drift.soak_metrics(intervals, rss)
    assert out["tps_drift_pct_per_h"] < 0
    assert out["tps_drift_ci_low_pct_per_h"] <= out["tps_drift_ci_high_pct_per_h"]
    assert out["latency_pct_drift_pct_per_h"] == pytest.approx(0.0, abs=1e-9)
    assert out["server_rss_growth_mib"] == pytest.approx(130 - 105.95)
    assert out["server_rss_slope_mib_per_h"] == pytest.approx(0.0, abs=1e-6)
    assert drift.soak_metrics(None, None) == {}
