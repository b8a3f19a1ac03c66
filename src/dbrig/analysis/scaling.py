"""Where throughput stops scaling: the Universal Scalability Law and the latency knee.

Pure functions over numbers: the caller picks the concurrency (sysbench threads,
mysqlslap clients), the throughput and the latency of each repetition.

**The USL** (Gunther): ``X(N) = λN / (1 + σ(N−1) + κN(N−1))``, where λ is the
throughput of one client, σ the contention (the serial fraction: queueing on a
shared resource) and κ the coherency delay (every client waiting on every other:
what makes throughput fall). :func:`fit_usl` fits it to every repetition's
throughput (not the means, so each cell weighs by its repetitions) by bounded
non-linear least squares (``scipy.optimize.least_squares``, λ > 0, σ ≥ 0, κ ≥ 0),
started from the quadratic that ``N / X(N)`` is in N and from a few fixed
guesses, keeping the best. When κ > 0 and σ < 1 the throughput peaks at
``N* = sqrt((1 − σ) / κ)``; with κ = 0 it only approaches ``λ / σ``. A κ under
:data:`KAPPA_SE` standard errors (from the Jacobian at the optimum) counts as 0:
noise alone gives a tiny κ, and with it an N* of millions.

A fit is refused, with a ``reason`` and no parameters, when fewer than
:data:`MIN_LEVELS` distinct concurrencies were measured or when R² (over the
repetitions) is under :data:`MIN_R2`: a flat series (the curve explains nothing
but noise) or repetitions too scattered for any curve to be trusted.

**The latency knee** (:func:`latency_knee`): the smallest concurrency, from the
third one measured, whose mean latency exceeds by more than :data:`KNEE_TOLERANCE`
(20 %) the straight line through the first two (N₁, L₁) and (N₂, L₂), that is
``L(N) > (1 + tolerance) · (L₁ + s · (N − N₁))`` with ``s = max(0, (L₂ − L₁) /
(N₂ − N₁))``. Latency that stays flat (spare cores) or grows along that line is
not a knee; the first point well above it is where latency starts to grow faster
than linearly: clients queue for a saturated resource. None when no point does,
or with fewer than three concurrencies.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

MIN_LEVELS = 4
MIN_R2 = 0.9
KNEE_TOLERANCE = 0.2
KAPPA_SE = 2.0  # κ under two standard errors: its ~95 % interval holds 0, so no peak
FLAT_SPREAD = 0.1  # per-N means within 10 % of each other: throughput did not scale at all


@dataclass(frozen=True)
class UslFit:
    """The fitted law, or why there is none (``reason``; then λ, σ, κ are None).

    ``r2`` is None only when nothing was fitted; the measured peak is always given
    when there are points.
    """

    levels: tuple[float, ...]  # the distinct concurrencies, ascending
    points: int  # repetitions fitted
    measured_peak_n: float | None  # the concurrency with the highest mean throughput
    measured_peak: float | None
    r2: float | None = None
    lam: float | None = None
    sigma: float | None = None
    kappa: float | None = None
    sigma_se: float | None = None  # standard errors from the Jacobian at the optimum
    kappa_se: float | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None

    @property
    def max_n(self) -> float | None:
        return self.levels[-1] if self.levels else None

    @property
    def kappa_is_zero(self) -> bool:
        """κ is 0, or indistinguishable from 0: under :data:`KAPPA_SE` standard errors."""
        if self.kappa is None or self.kappa <= 0:
            return True
        return self.kappa_se is not None and self.kappa < KAPPA_SE * self.kappa_se

    @property
    def n_star(self) -> float | None:
        """The concurrency of peak throughput, when the law has a peak (κ > 0, σ < 1)."""
        if not self.ok or self.kappa is None or self.sigma is None:
            return None
        if self.kappa_is_zero or self.sigma >= 1:
            return None
        return math.sqrt((1 - self.sigma) / self.kappa)

    @property
    def ceiling(self) -> float | None:
        """λ / σ: what throughput approaches without a peak (κ = 0, σ > 0)."""
        if not self.ok or self.lam is None or not self.sigma:
            return None
        return self.lam / self.sigma

    @property
    def no_peak_reason(self) -> str | None:
        """Why the fitted law has no N*, in words; None when it has one (or no fit)."""
        if not self.ok or self.n_star is not None:
            return None
        if self.sigma is not None and self.sigma >= 1:
            return "σ ≥ 1: no concurrency does better than one client"
        ceiling = self.ceiling
        tail = f", levelling off towards λ/σ = {ceiling:,.4g}" if ceiling else ""
        return (
            f"κ is indistinguishable from 0 (under {KAPPA_SE:g} standard errors): "
            f"throughput does not peak{tail}"
        )

    @property
    def predicted_peak(self) -> float | None:
        """X(N*), the throughput the law predicts at its peak."""
        n_star = self.n_star
        return None if n_star is None else self.predict(n_star)

    def predict(self, n: float) -> float:
        assert self.lam is not None and self.sigma is not None and self.kappa is not None
        return float(usl(np.asarray(n, dtype=float), self.lam, self.sigma, self.kappa))


@dataclass(frozen=True)
class LatencyKnee:
    """Where latency starts to grow faster than linearly, or None with the reason."""

    n: float | None
    latency: float | None = None  # the mean latency measured there
    expected: float | None = None  # the straight line's value there
    reason: str | None = None


def usl(n: np.ndarray, lam: float, sigma: float, kappa: float) -> np.ndarray:
    """Throughput at concurrency ``n`` by the Universal Scalability Law."""
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def fit_usl(
    concurrency: Sequence[float],
    throughput: Sequence[float],
    *,
    min_levels: int = MIN_LEVELS,
    min_r2: float = MIN_R2,
) -> UslFit:
    """Fit the USL to one throughput per repetition (pairs with a NaN are dropped)."""
    n, x = _clean(concurrency, throughput)
    levels = tuple(float(v) for v in np.unique(n))
    means = {level: float(x[n == level].mean()) for level in levels}
    peak_n = max(means, key=lambda level: means[level]) if means else None
    base = UslFit(levels, len(n), peak_n, means[peak_n] if peak_n is not None else None)
    if len(levels) < min_levels:
        listed = ", ".join(f"{v:g}" for v in levels) or "none"
        return _refused(
            base,
            f"only {len(levels)} distinct concurrencies with results (N = {listed}); "
            f"the fit needs {min_levels} or more",
        )
    total = float(((x - x.mean()) ** 2).sum())
    if total == 0:
        return _refused(base, "throughput is the same at every concurrency: nothing to fit")
    params, residual, cov = _least_squares(n, x)
    r2 = 1 - residual / total
    if r2 < min_r2:
        return _refused(base, _poor_fit_reason(r2, n, x, means, min_r2), r2)
    lam, sigma, kappa = params
    sigma_se, kappa_se = (math.sqrt(max(cov[i, i], 0.0)) for i in (1, 2))
    return dataclasses.replace(
        base, r2=r2, lam=lam, sigma=sigma, kappa=kappa, sigma_se=sigma_se, kappa_se=kappa_se
    )


def latency_knee(
    concurrency: Sequence[float],
    latency: Sequence[float],
    *,
    tolerance: float = KNEE_TOLERANCE,
) -> LatencyKnee:
    """The knee of the mean latency per concurrency (definition in the module docstring)."""
    n, values = _clean(concurrency, latency)
    levels = np.unique(n)
    if len(levels) < 3:
        return LatencyKnee(None, reason=f"{len(levels)} concurrencies with latency: 3 needed")
    means = np.array([values[n == level].mean() for level in levels])
    slope = max(0.0, (means[1] - means[0]) / (levels[1] - levels[0]))
    for level, measured in zip(levels[2:], means[2:], strict=True):
        expected = means[0] + slope * (level - levels[0])
        if measured > (1 + tolerance) * expected:
            return LatencyKnee(float(level), float(measured), float(expected))
    return LatencyKnee(
        None,
        reason=(
            f"latency stays within {100 * tolerance:.0f} % of the line through "
            f"N = {levels[0]:g} and {levels[1]:g} up to N = {levels[-1]:g}"
        ),
    )


# --------------------------------------------------------------------------- fitting


def _clean(first: Sequence[float], second: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(first, dtype=float)
    b = np.asarray(second, dtype=float)
    keep = np.isfinite(a) & np.isfinite(b) & (a > 0)
    return a[keep], b[keep]


def _least_squares(
    n: np.ndarray, x: np.ndarray
) -> tuple[tuple[float, float, float], float, np.ndarray]:
    """(λ, σ, κ), the residual sum of squares and the parameters' covariance."""
    scale = float(np.abs(x).max()) or 1.0
    y = x / scale  # fit on a unit scale: λ in thousands and κ in millionths otherwise

    def residuals(p: np.ndarray) -> np.ndarray:
        return usl(n, p[0], p[1], p[2]) - y

    contention, coherency = n - 1, n * (n - 1)

    def jacobian(p: np.ndarray) -> np.ndarray:
        # the law's derivatives, not finite differences: 4 evaluations fewer per step
        lam, sigma, kappa = p
        denominator = 1 + sigma * contention + kappa * coherency
        d_lam = n / denominator
        slope = -lam * d_lam / denominator
        return np.column_stack([d_lam, slope * contention, slope * coherency])

    best = None
    for start in _starts(n, y):
        found = least_squares(
            residuals,
            start,
            jac=jacobian,
            bounds=([1e-12, 0.0, 0.0], [np.inf, np.inf, np.inf]),
            method="trf",
        )
        if best is None or found.cost < best.cost:
            best = found
    assert best is not None
    lam, sigma, kappa = (float(v) for v in best.x)
    residual = float((best.fun**2).sum()) * scale**2
    dof = max(len(y) - 3, 1)
    jac = best.jac
    cov = np.linalg.pinv(jac.T @ jac) * float((best.fun**2).sum()) / dof
    cov[0, :] *= scale
    cov[:, 0] *= scale
    return (lam * scale, sigma, kappa), residual, cov


def _starts(n: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """The quadratic fit of N / X(N) = ((1 − σ) + (σ − κ)N + κN²) / λ, and fixed guesses."""
    smallest = n.min()
    lam_guess = max(float(y[n == smallest].mean() / smallest), 1e-6)
    starts = [
        np.array([lam_guess, 0.1, 0.001]),
        np.array([lam_guess, 0.5, 0.0]),
        np.array([lam_guess, 0.01, 0.01]),
    ]
    positive = y > 0
    if positive.sum() >= 3:
        c2, c1, c0 = np.polyfit(n[positive], n[positive] / y[positive], 2)
        if c0 + c1 + c2 > 0:
            lam = 1 / (c0 + c1 + c2)
            kappa = max(c2 * lam, 0.0)
            sigma = max(c1 * lam + kappa, 0.0)
            starts.insert(0, np.array([lam, sigma, kappa]))
    return starts


def _refused(base: UslFit, reason: str, r2: float | None = None) -> UslFit:
    return dataclasses.replace(base, r2=r2, reason=reason)


def _poor_fit_reason(
    r2: float, n: np.ndarray, x: np.ndarray, means: dict[float, float], min_r2: float
) -> str:
    """Why R² is low: a flat series, repetitions that scatter (even the per-N means
    explain little: pure error), or a shape the law does not have (lack of fit)."""
    head = f"R² {r2:.2f} is under {min_r2:g}"
    values = list(means.values())
    top = max(values)
    spread = (top - min(values)) / top if top > 0 else 0.0
    if spread < FLAT_SPREAD:
        return (
            f"{head}: throughput is flat (the means at every concurrency are within "
            f"{100 * spread:.0f} % of each other), so there is no scaling curve to fit"
        )
    within = sum(float(((x[n == level] - mean) ** 2).sum()) for level, mean in means.items())
    ceiling = 1 - within / float(((x - x.mean()) ** 2).sum())
    if ceiling < min_r2:
        return (
            f"{head}: the repetitions scatter too much (even the mean at each concurrency "
            f"explains only {100 * ceiling:.0f} % of the variation); more repetitions or "
            "longer trials would tell"
        )
    return (
        f"{head} while the mean at each concurrency explains {100 * ceiling:.0f} % of the "
        "variation: throughput does not follow the law's shape (see the chart)"
    )
