"""The Universal Scalability Law fit and the latency knee (dbrig.analysis.scaling)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dbrig.analysis.scaling import fit_usl, latency_knee, usl

LEVELS = np.array([1, 2, 4, 8, 16, 32, 64, 128])


def sweep(sigma: float, kappa: float, noise: float, seed: int, lam: float = 1000.0):
    """Three repetitions per concurrency, with multiplicative Gaussian noise."""
    rng = np.random.default_rng(seed)
    n = np.repeat(LEVELS, 3)
    return n, usl(n, lam, sigma, kappa) * (1 + rng.normal(0, noise, n.size))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_fit_recovers_sigma_and_kappa_within_five_percent(seed: int) -> None:
    n, x = sweep(0.05, 0.001, noise=0.01, seed=seed)
    fit = fit_usl(n, x)
    assert fit.ok, fit.reason
    assert fit.sigma == pytest.approx(0.05, rel=0.05)
    assert fit.kappa == pytest.approx(0.001, rel=0.05)
    assert fit.lam == pytest.approx(1000, rel=0.05)
    assert fit.r2 > 0.99
    assert fit.n_star == pytest.approx(math.sqrt(0.95 / 0.001), rel=0.05)
    assert fit.predicted_peak == pytest.approx(fit.predict(fit.n_star))
    assert fit.points == 24
    assert fit.levels == tuple(float(v) for v in LEVELS)
    assert fit.measured_peak_n == 32.0


def test_kappa_zero_gives_no_peak_but_a_ceiling() -> None:
    n, x = sweep(0.05, 0.0, noise=0.01, seed=4)
    fit = fit_usl(n, x)
    assert fit.ok
    assert fit.kappa_is_zero
    assert fit.n_star is None and fit.predicted_peak is None
    assert fit.ceiling == pytest.approx(1000 / 0.05, rel=0.05)
    assert "κ is indistinguishable from 0" in fit.no_peak_reason


def test_exact_data_with_kappa_zero() -> None:
    fit = fit_usl(LEVELS, usl(LEVELS, 200.0, 0.1, 0.0))
    assert fit.ok and fit.kappa == pytest.approx(0, abs=1e-9) and fit.n_star is None


def test_a_flat_series_is_refused_with_its_reason() -> None:
    rng = np.random.default_rng(5)
    n = np.repeat(LEVELS, 3)
    fit = fit_usl(n, 500 * (1 + rng.normal(0, 0.02, n.size)))
    assert not fit.ok
    assert fit.lam is None and fit.sigma is None and fit.kappa is None and fit.n_star is None
    assert fit.r2 < 0.9
    assert "throughput is flat" in fit.reason
    assert fit.measured_peak is not None


def test_an_exactly_constant_series_is_refused() -> None:
    fit = fit_usl(LEVELS, [300.0] * len(LEVELS))
    assert not fit.ok and "same at every concurrency" in fit.reason


def test_a_noisy_series_is_refused_with_its_reason() -> None:
    n, x = sweep(0.05, 0.001, noise=0.4, seed=1)
    fit = fit_usl(n, x)
    assert not fit.ok
    assert fit.r2 < 0.9
    assert "scatter too much" in fit.reason


def test_too_few_concurrencies_are_refused() -> None:
    fit = fit_usl([1, 1, 2, 2, 4, 4], [10, 11, 19, 20, 30, 31])
    assert not fit.ok
    assert fit.reason == (
        "only 3 distinct concurrencies with results (N = 1, 2, 4); the fit needs 4 or more"
    )
    assert fit.measured_peak_n == 4.0 and fit.measured_peak == 30.5


def test_missing_values_are_dropped() -> None:
    n, x = sweep(0.05, 0.001, noise=0.01, seed=2)
    x[0] = math.nan
    fit = fit_usl(n, x)
    assert fit.ok and fit.points == 23


def test_the_latency_knee_is_the_first_point_above_the_first_line() -> None:
    # flat on two cores, then queueing: 1.2 x the line (2.2 at N=4) is 2.64
    knee = latency_knee([1, 2, 4, 8, 16], [2.0, 2.1, 2.5, 4.4, 8.8])
    assert knee.n == 8.0
    assert knee.latency == pytest.approx(4.4)
    assert knee.expected == pytest.approx(2.7)


def test_linear_latency_has_no_knee() -> None:
    n = [1, 2, 4, 8, 16, 32]
    knee = latency_knee(n, [1.0 + 0.5 * v for v in n])
    assert knee.n is None
    assert "within 20 % of the line through N = 1 and 2 up to N = 32" in knee.reason


def test_the_knee_uses_the_mean_of_the_repetitions() -> None:
    knee = latency_knee([1, 1, 2, 2, 4, 4, 8, 8], [1, 3, 2, 2, 2, 2.2, 3, 4])
    assert knee.n == 8.0  # means 2, 2, 2.1, 3.5


def test_a_falling_start_does_not_make_a_negative_line() -> None:
    knee = latency_knee([1, 2, 4, 8], [3.0, 2.0, 3.2, 3.4])
    assert knee.n is None  # the line is flat at 3.0 (slope clamped at 0); 3.4 < 3.6


def test_too_few_concurrencies_for_a_knee() -> None:
    knee = latency_knee([1, 2], [1.0, 1.0])
    assert knee.n is None and "3 needed" in knee.reason


def test_a_shape_the_law_does_not_have_is_refused_as_lack_of_fit() -> None:
    n = np.repeat(LEVELS, 3)
    step = np.where(n <= 8, 100.0, 1000.0) * (1 + np.random.default_rng(3).normal(0, 0.01, n.size))
    fit = fit_usl(n, step)
    assert not fit.ok
    assert "does not follow the law's shape" in fit.reason
