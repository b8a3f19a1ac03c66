"""Exact two-sided group-sequential boundaries by recursive numerical integration. Pure.

Looks at information fractions ``0 < t_1 < ... < t_K <= 1`` see the statistics
``Z_k = S_k / sqrt(t_k)``, where the score ``S`` is a Brownian motion in ``t``
under the null hypothesis: ``Z_1`` is standard normal and, given ``Z_{k-1} = u``,

    Z_k ~ N(u sqrt(t_{k-1} / t_k), (t_k - t_{k-1}) / t_k).

A run that has not stopped by look ``k - 1`` has ``|Z_j| < c_j`` at every earlier
look; the sub-density of ``Z_{k-1}`` on that region follows from the one before
by integrating that transition over the previous region (Armitage, McPherson and
Rowe 1969; Jennison and Turnbull 2000, ch. 19). The chance of crossing first at
look ``k`` is the integral of the sub-density times the two tails of the
transition, and ``c_k`` is the root that makes it equal to what the spending
function allows at ``t_k`` less what was spent before: so the crossing chances
add up to ``alpha(t_K)`` exactly (to the integration's accuracy, about 1e-7),
whatever the spacing of the looks.

The integrals use Simpson's rule on an even grid over ``(-c, c)``, cut at
``|z| <= 8.5`` (beyond which the normal density is below 1e-16), with a step
small against the transition's spread so the narrow kernels of closely spaced
looks are still integrated well.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

Z_CUT = 8.5  # the grid's reach: the normal density beyond is below 1e-16
MAX_STEP = 0.05  # the grid step, at most; smaller where the transition is narrow


@dataclass(frozen=True)
class Bound:
    """One look's boundary: reject when ``|Z| >= z`` (a two-sided nominal level ``nominal``),
    which crosses first at this look with chance ``crossing`` under the null."""

    fraction: float
    z: float
    nominal: float
    crossing: float


class Recursion:
    """The sub-density of the look statistic among runs that have not stopped yet,
    carried from look to look. Start with no look made (all the mass at 0, ``t = 0``)."""

    def __init__(self) -> None:
        self.fraction = 0.0
        self.points = np.zeros(1)
        self.masses = np.ones(1)  # density times quadrature weight at each point

    @property
    def remaining(self) -> float:
        """The chance of having crossed no boundary so far."""
        return float(self.masses.sum())

    def crossing(self, fraction: float, z: float) -> float:
        """The chance of crossing ``+/-z`` first at a look at ``fraction``."""
        if fraction <= self.fraction:
            return 0.0
        mean, sd = self._transition(fraction)
        tails = special.ndtr((mean - z) / sd) + special.ndtr((-z - mean) / sd)
        return float(self.masses @ tails)

    def bound_for(self, fraction: float, target: float) -> float:
        """The boundary ``z`` whose first-crossing chance at ``fraction`` is ``target``
        (infinite when there is nothing to spend or no information came in)."""
        if fraction <= self.fraction or target <= 0:
            return math.inf
        if target >= self.remaining:
            return 0.0
        if self.fraction == 0.0:
            return float(sps.norm.isf(target / 2))
        return float(
            optimize.brentq(
                lambda z: self.crossing(fraction, z) - target, 0.0, 40.0, xtol=1e-10, rtol=1e-12
            )
        )

    def advance(self, fraction: float, z: float) -> None:
        """Make the look at ``fraction`` with boundary ``z``: keep the runs inside it."""
        if fraction <= self.fraction:
            return  # no new information: nothing moves
        mean_of, sd = self._transition(fraction)
        reach = min(z, Z_CUT)
        step = min(MAX_STEP, sd / 2)
        intervals = 2 * max(1, math.ceil(reach / step))  # an even count for Simpson's rule
        points = np.linspace(-reach, reach, intervals + 1)
        weights = _simpson_weights(intervals, 2 * reach / intervals)
        kernel = np.exp(-0.5 * ((points[:, None] - mean_of[None, :]) / sd) ** 2)
        kernel *= 1 / (sd * math.sqrt(2 * math.pi))
        self.points = points
        self.masses = weights * (kernel @ self.masses)
        self.fraction = fraction

    def _transition(self, fraction: float) -> tuple[np.ndarray, float]:
        ratio = math.sqrt(self.fraction / fraction)
        return self.points * ratio, math.sqrt((fraction - self.fraction) / fraction)

    def look(self, fraction: float, target: float) -> Bound:
        """The boundary that spends ``target`` at ``fraction``; the look is then made."""
        z = self.bound_for(fraction, target)
        crossing = self.crossing(fraction, z) if math.isfinite(z) else 0.0
        self.advance(fraction, z)
        return Bound(fraction, z, _nominal(z), crossing)


class SpentRecursion:
    """Looks whose boundaries spend ``spent(t)``, the alpha spent by information fraction
    ``t``: each look spends what the function adds since the last, so the boundaries
    are exact given the looks made before. Information never goes back: a look at the
    fraction of the one before brought none and gets no alpha (an infinite boundary)."""

    def __init__(self, spent: Callable[[float], float]) -> None:
        self._spent = spent
        self._recursion = Recursion()
        self._before = 0.0  # alpha spent by the looks so far

    def look(self, fraction: float) -> tuple[Bound, float]:
        """The look's boundary at ``fraction``, and the alpha it was given."""
        fraction = max(fraction, self._recursion.fraction)
        target = 0.0
        if fraction > self._recursion.fraction:
            total = self._spent(fraction)
            target = max(total - self._before, 0.0)
            self._before = max(self._before, total)
        return self._recursion.look(fraction, target), target


def spending_bounds(
    fractions: Sequence[float], spent: Callable[[float], float]
) -> tuple[Bound, ...]:
    """Each look's boundary when ``spent(t)`` is the alpha spent by fraction ``t``
    (``fractions`` must not go down)."""
    looks = SpentRecursion(spent)
    return tuple(looks.look(fraction)[0] for fraction in _checked(fractions))


def crossing_chances(fractions: Sequence[float], bounds: Sequence[float]) -> tuple[float, ...]:
    """The null chance of crossing first at each look, for given boundaries."""
    recursion, found = Recursion(), []
    for fraction, z in zip(_checked(fractions), bounds, strict=True):
        found.append(recursion.crossing(fraction, z))
        recursion.advance(fraction, z)
    return tuple(found)


def constant_shape_bounds(
    looks: int, alpha: float, shape: Callable[[float], float]
) -> tuple[float, ...]:
    """Classical boundaries ``C shape(t_k)`` for ``looks`` equally spaced looks, ``C`` chosen
    so the total crossing chance is ``alpha``: ``shape = 1`` is Pocock's test,
    ``shape = 1 / sqrt(t)`` O'Brien and Fleming's."""
    fractions = [k / looks for k in range(1, looks + 1)]

    def excess(scale: float) -> float:
        bounds = [scale * shape(t) for t in fractions]
        return math.fsum(crossing_chances(fractions, bounds)) - alpha

    scale = optimize.brentq(excess, 0.5, 10.0, xtol=1e-10)
    return tuple(scale * shape(t) for t in fractions)


def _checked(fractions: Sequence[float]) -> Sequence[float]:
    if any(not 0 < t <= 1 for t in fractions):
        raise ValueError(f"information fractions must be in (0, 1], got {list(fractions)}")
    if any(b < a for a, b in itertools.pairwise(fractions)):
        raise ValueError(f"information fractions must not go down, got {list(fractions)}")
    return fractions


def _simpson_weights(intervals: int, step: float) -> np.ndarray:
    weights = np.ones(intervals + 1)
    weights[1:-1:2] = 4.0
    weights[2:-1:2] = 2.0
    return weights * step / 3


def _nominal(z: float) -> float:
    return 0.0 if math.isinf(z) else float(2 * sps.norm.sf(z))
