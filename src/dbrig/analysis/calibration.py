"""Each look's nominal level for the statistic a look really tests: Welch's t. Pure.

The exact boundaries of :mod:`dbrig.analysis.boundaries` are for a normal
statistic whose looks form a Brownian motion. A look of a sequential run tests
compare's Welch t at one repetition per round: at n = 3..20 per side its looks are
heavier-tailed and less correlated than the z process, so testing each at the z
boundary's nominal level let through more than alpha (O'Brien-Fleming 3..20:
5.3 % on 20 000 simulated gates).

Under no change, with normal values and the same variance on both sides, Welch's
t (and its p-value) does not depend on the mean or the standard deviation: its
joint law at the looks depends only on the sample sizes. So it can be simulated
once per design: :class:`NullPaths` draws ``PATHS`` seeded null paths (standard
normal values, one per side per repetition) and at each look picks the nominal
level ``a`` whose first crossings (``p < a`` among the paths that have not stopped
yet) bring the share of paths stopped so far to what the spending function allows
at the look's information fraction. The accounting is cumulative, so whatever a
look could not spend passes to the next, and the shares add up to the design's
alpha at the last look exactly on the simulated paths. The seed is fixed:
``--resume`` rebuilds the same levels from the fractions run.json recorded.

On the paths the levels spend exactly what they are asked; for the true rate of
Welch's t they are off by the simulation's error, about ``sqrt(alpha (1 - alpha) /
PATHS)`` = 0.07 points at alpha 5 % (measured over six seeds for Pocock 3..40,
without the margin below: 4.97 to 5.11 %). A rate above alpha is what the gate
must not have, so the paths spend
:func:`spendable` = alpha less two such errors (4.86 % of 5 %): the true rate stays
within alpha unless the one fixed draw is off by more than two errors, at a power
cost of a 0.14-point smaller alpha. (Twice the paths would halve the margin at
twice the time: a dry run of ``max: 100`` would take 2 s.)

The paths follow the sample sizes the run really had, look by look (a look whose
trials failed has a smaller n, and the simulation adds no value to its paths
then), rather than a grid fixed in advance: so the levels are calibrated for the
looks that happen, failed repetitions included, at one simulation step a look.

Two limits, both where the simulation has nothing to add:

* a look whose share to spend is below ``MIN_CROSSINGS`` paths (O'Brien-Fleming's
  first looks spend 1e-8) cannot be resolved by the paths; it tests at the share
  itself and is charged all of it (a Welch p-value's chance of falling below ``a``
  is at most ``a``, so the first-crossing chance is too). Rounding such shares to
  whole paths instead would spend nothing before round 10 of ``max: 40``, and a
  clear change would wait for it;
* beyond ``CALIBRATED_UP_TO`` repetitions per side Welch's t has at least 99
  degrees of freedom and each look's p-value is exact on its own; those looks use
  the exact z boundaries' nominal levels (their recursion carried over all looks,
  spending the same reduced alpha as the paths), at a few milliseconds a look,
  where simulating up to ``max: 1000`` would take seconds. The z levels still let a
  little more through there than the z process does (``max: 250`` with z levels
  throughout: 5.11 % O'Brien-Fleming, 5.16 % Pocock on 100 000 A/A gates); with
  the margin, calibrated to round 100 and z levels after: 4.96 % and 5.01 %, within
  the simulation's 0.07-point error of alpha.

The paths give both sides the smallest cell's n (the look's information fraction);
when a failed trial leaves the sides unequal, the other side's extra values are not
simulated: the look's level is the one for the smaller, equal sample.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

PATHS = 100_000
SEED = 20_251_126  # fixed: a resumed run rebuilds the same levels
MIN_CROSSINGS = 20  # fewer crossings than this and the paths cannot place a level
CALIBRATED_UP_TO = 100  # repetitions per side; beyond, Welch's t is the z statistic


def spendable(alpha: float, paths: int = PATHS) -> float:
    """The alpha the paths spend: two of the simulation's standard errors below ``alpha``,
    so its error does not take the true rate above ``alpha``."""
    return max(alpha - 2 * math.sqrt(alpha * (1 - alpha) / paths), alpha / 2)


class NullPaths:
    """Seeded null paths of Welch's t between two sides of standard normal values,
    carried from look to look: which paths have stopped, and the alpha spent."""

    def __init__(self, paths: int = PATHS, seed: int = SEED) -> None:
        self.paths = paths
        self.rng = np.random.default_rng(seed)
        self.n = 0
        self.sums = np.zeros((2, paths), dtype=np.float32)
        self.squares = np.zeros((2, paths), dtype=np.float32)
        self.open = np.ones(paths, dtype=bool)
        self.spent = 0.0  # the alpha spent by the looks so far

    def look(self, n: int, total: float) -> tuple[float, float]:
        """The nominal two-sided level of a look at ``n`` values per side that brings
        the alpha spent so far to ``total`` (the spending function's at the look), and
        what this look spent. ``n`` never goes down."""
        self._grow(n)
        budget = total - self.spent
        if n < 2 or budget <= 0:
            return 0.0, 0.0
        t, var = self._welch()
        wanted = round(budget * self.paths)
        if wanted < MIN_CROSSINGS:
            # Too few paths to place it: test at the budget itself, a bound on the
            # chance of crossing here (a Welch p is below a with chance at most a).
            level, share = budget, budget
        else:
            level = self._level(t, var, wanted)
        crossed = self._crossing(t, var, level)
        self.open[crossed] = False
        if wanted >= MIN_CROSSINGS:
            share = crossed.size / self.paths
        self.spent += share
        return level, share

    def _grow(self, n: int) -> None:
        # Single precision: n <= CALIBRATED_UP_TO values of about 1 lose nothing that
        # matters at the levels sought, and the paths are half as much to move.
        while self.n < n:
            values = self.rng.standard_normal((2, self.paths), dtype=np.float32)
            self.sums += values
            values *= values
            self.squares += values
            self.n += 1

    def _welch(self) -> tuple[np.ndarray, np.ndarray]:
        """|t| of every path (0 for those stopped) and each side's variance."""
        n = self.n
        var = np.square(self.sums)
        var /= -n
        var += self.squares
        var /= n - 1
        t = np.abs(self.sums[1] - self.sums[0])
        t /= np.sqrt((var[0] + var[1]) * n)
        t[~self.open] = 0.0
        return t, var

    def _candidates(self, t: np.ndarray, level: float) -> np.ndarray:
        """The open paths whose p could be below ``level``: Welch's df is at least n - 1
        and at most 2n - 2, and p grows as df falls, so a path whose |t| is short of
        the t quantile at 2n - 2 df cannot cross (computing every p is slower)."""
        cut = float(special.stdtrit(2 * self.n - 2, 1 - level / 2))
        return np.flatnonzero(t >= cut)

    def _p_values(self, t: np.ndarray, var: np.ndarray, index: np.ndarray) -> np.ndarray:
        """The two-sided Welch p-values of the paths at ``index`` (its df only there)."""
        n, v0, v1 = self.n, var[0, index].astype(float), var[1, index].astype(float)
        df = (n - 1) * (v0 + v1) ** 2 / (v0**2 + v1**2)
        return 2 * special.stdtr(df, -t[index].astype(float))

    def _level(self, t: np.ndarray, var: np.ndarray, wanted: int) -> float:
        """The level that ``wanted`` open paths' p-values are below."""
        if wanted >= int(self.open.sum()):
            return 1.0
        # At least wanted + 1 paths have p below the level the (wanted + 1)-th largest
        # |t| has at the smallest df: the level sought is no higher.
        top = float(np.partition(t, t.size - wanted - 1)[t.size - wanted - 1])
        ceiling = 2 * float(special.stdtr(self.n - 1, -top))
        p = np.sort(self._p_values(t, var, self._candidates(t, ceiling)))
        return math.sqrt(p[wanted - 1] * p[wanted])  # between the two: p < level for wanted

    def _crossing(self, t: np.ndarray, var: np.ndarray, level: float) -> np.ndarray:
        index = self._candidates(t, level)
        return index[self._p_values(t, var, index) < level]
