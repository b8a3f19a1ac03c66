"""Repetitions that stop when the answer is known: a group-sequential design. Pure.

A run with ``repeat: {min, max, until}`` does rounds of all cells and, after each
round from ``min`` on, looks at what it has. Looking after every round and
stopping at the first p < alpha would raise the false-alarm rate far above
alpha (with 18 looks, to about 20 %). So alpha is spent over the looks by an
alpha-spending function (Lan and DeMets) of the information fraction ``t``, the
look's repetitions per cell over ``max`` (the smallest cell's successful ones):

* O'Brien-Fleming type: ``alpha(t) = 4 - 4 Phi(z_{1-alpha/4} / sqrt(t))``
  (two-sided): almost nothing early, nearly all of alpha left for the last look;
* Pocock type: ``alpha(t) = alpha ln(1 + (e - 1) t)``: spent evenly.

Each look's level is calibrated for the statistic it tests, Welch's t
(:mod:`dbrig.analysis.calibration`): seeded null paths of Welch's t at the look's
sample sizes give the nominal two-sided level ``a`` at which the chance of
stopping first at this look, given the looks before and their levels, is
``alpha(t_k) - alpha(t_{k-1})`` (less a margin for the simulation's own error:
:func:`dbrig.analysis.calibration.spendable`). So the chances add up to ``alpha``
over the looks for the t statistic itself, not for a normal one. A look tests compare's p-value
against ``a``; its ``z`` is the normal quantile of the same level, for reading.
The look at ``max`` spends whatever is left (its ``t`` is 1 even if trials failed).

A design recorded as ``exact`` (before the calibration) keeps its behaviour: each
look's boundary is the exact ``z`` of a normal statistic
(:mod:`dbrig.analysis.boundaries`, recursive numerical integration), tested at its
nominal level ``2 (1 - Phi(z))``, which lets a few tenths of a point more than
alpha through at n = 3..20 (the reason for the calibration).

"Unchanged" is a decision too: compare's own rule (not significant, MDE at the
look's level within the threshold, observed change within it), which cannot raise
a false alarm; it only ends an A/A run early.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
from scipy import special
from scipy import stats as sps

from dbrig.analysis.boundaries import SpentRecursion
from dbrig.analysis.calibration import CALIBRATED_UP_TO, NullPaths, spendable
from dbrig.analysis.stats import mde_pct, verdict_for
from dbrig.metrics import Direction

Spending = Literal["obrien-fleming", "pocock"]
Boundaries = Literal["calibrated", "exact"]
SPENDING_FUNCTIONS: tuple[str, ...] = ("obrien-fleming", "pocock")
DECIDED_VERDICTS = frozenset({"better", "worse", "unchanged", "changed"})

STOP_DECIDED = "decided"
STOP_CI_WIDTH = "ci width reached"
STOP_MAX = "max reached"


def spent(t: float, alpha: float, kind: Spending = "obrien-fleming") -> float:
    """The two-sided alpha spent by information fraction ``t`` (0 < t <= 1)."""
    if not 0 < t <= 1:
        raise ValueError(f"information fraction must be in (0, 1], got {t}")
    if kind == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    z = float(sps.norm.isf(alpha / 4))
    return float(4 * sps.norm.sf(z / math.sqrt(t)))


@dataclass(frozen=True)
class Look:
    """One look: after round ``round``, at information fraction ``fraction``, reject
    when ``|Z| >= z``, a two-sided test at nominal level ``alpha`` (0: nothing to
    spend); ``spent`` is the chance under no change of stopping first here."""

    round: int
    fraction: float
    alpha: float
    z: float = math.inf
    spent: float = 0.0


@dataclass(frozen=True)
class Design:
    """Rounds ``min``..``max``, a look after each, alpha spent by ``spending``."""

    min: int
    max: int
    alpha: float = 0.05
    spending: Spending = "obrien-fleming"
    boundaries: Boundaries = "calibrated"

    def __post_init__(self) -> None:
        if not 2 <= self.min <= self.max:
            raise ValueError(f"need 2 <= min <= max, got min {self.min}, max {self.max}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")

    @cached_property
    def looks(self) -> tuple[Look, ...]:
        """The planned looks: every trial succeeds, so ``t = round / max``."""
        return _planned_looks(self, self.max)

    def looks_up_to(self, round_: int) -> tuple[Look, ...]:
        """The planned looks up to ``round_`` (a long design's later ones are not needed
        to show its first)."""
        return _planned_looks(self, min(round_, self.max))

    def look(self, round_: int) -> Look:
        """The planned look after ``round_``; ValueError outside min..max."""
        if not self.min <= round_ <= self.max:
            raise ValueError(f"round {round_} is not a look (looks at {self.min}..{self.max})")
        return self.looks[round_ - self.min]


class Spender:
    """A design's looks as they happen, each at the information fraction its sample
    sizes give (failed trials make it smaller than planned): the looks made so far
    are carried, so each new one's level is right given them."""

    def __init__(self, design: Design) -> None:
        self.design = design
        self.fractions: list[tuple[int, float]] = []  # the looks made: round, fraction
        self.exact: ExactSpender | None = None
        self.paths = NullPaths() if design.boundaries == "calibrated" else None

    def look(self, round_: int, fraction: float) -> Look:
        """The look after ``round_`` at ``fraction`` (made: the next look builds on it).
        At ``max`` the fraction is 1, so what is left of alpha is spent."""
        self.fractions.append((round_, fraction))
        n = round(min(fraction, 1.0) * self.design.max)
        if self.paths is None or n > CALIBRATED_UP_TO:
            return self._exact().look(round_, fraction)
        if n <= self.paths.n and round_ < self.design.max:
            # No new values since the last look: nothing to spend.
            return Look(round_, max(fraction, self.paths.n / self.design.max), 0.0)
        return self._calibrated(round_, fraction, n, self.paths)

    def _calibrated(self, round_: int, fraction: float, n: int, paths: NullPaths) -> Look:
        design = self.design
        fraction = 1.0 if round_ >= design.max else min(fraction, 1.0)
        total = spent(fraction, design.alpha, design.spending) if fraction > 0 else 0.0
        level, share = paths.look(n, total * spendable(design.alpha) / design.alpha)
        z = float(sps.norm.isf(level / 2)) if level > 0 else math.inf
        return Look(round_, fraction, level, z, share)

    def _exact(self) -> ExactSpender:
        """The exact z recursion, carried over every look made so far (looks beyond
        the calibrated sample sizes use it), spending the same alpha as the paths:
        Welch's t at the z levels still lets about 0.1 point more through there."""
        if self.exact is None:
            design = self.design
            calibrated = design.boundaries == "calibrated"  # "exact" keeps all of alpha
            scale = spendable(design.alpha) / design.alpha if calibrated else 1.0
            self.exact = ExactSpender(design, scale)
            for round_, fraction in self.fractions[:-1]:
                self.exact.look(round_, fraction)
        return self.exact


class ExactSpender:
    """A design's looks at exact z boundaries (:mod:`dbrig.analysis.boundaries`), each at
    the information fraction its sample sizes give: the boundaries of the looks made
    so far are carried, so each new one is exact given them."""

    def __init__(self, design: Design, scale: float = 1.0) -> None:
        self.design = design
        self.scale = scale  # the share of the spending function's alpha to spend
        self.looks = SpentRecursion(lambda t: spent(t, design.alpha, design.spending) * scale)

    def look(self, round_: int, fraction: float) -> Look:
        """The look after ``round_`` at ``fraction`` (made: the next look builds on it).
        At ``max`` the fraction is 1, so what is left of alpha is spent."""
        fraction = 1.0 if round_ >= self.design.max else min(fraction, 1.0)
        bound, target = self.looks.look(fraction)
        return Look(round_, bound.fraction, bound.nominal, bound.z, target)


@functools.lru_cache(maxsize=16)
def _planned_looks(design: Design, last: int) -> tuple[Look, ...]:
    """The looks after rounds ``min``..``last`` when every trial succeeds (computed once
    per design: the dry run and the run's record both show them)."""
    spender = Spender(design)
    return tuple(spender.look(r, r / design.max) for r in range(design.min, last + 1))


def information_fraction(n_per_cell: Sequence[int], rounds: int) -> float:
    """A look's information fraction: the smallest cell's successful repetitions over
    ``rounds`` (the design's ``max``): the comparisons are only as far as their
    least-measured side."""
    return min(n_per_cell, default=0) / rounds if rounds > 0 else 0.0


def all_decided(verdicts: Sequence[str]) -> bool:
    """Every comparison better, worse, unchanged (or changed, with no good direction)."""
    return bool(verdicts) and all(v in DECIDED_VERDICTS for v in verdicts)


def relative_half_width(mean: float | None, low: float | None, high: float | None) -> float | None:
    """The interval's half width over the mean (None where it cannot be said)."""
    if mean is None or low is None or high is None or mean == 0:
        return None
    if not all(math.isfinite(x) for x in (mean, low, high)):
        return None
    return (high - low) / 2 / abs(mean)


def narrow_enough(widths: Sequence[float | None], limit: float) -> bool:
    """Every cell's relative half width known and at most ``limit``."""
    return bool(widths) and all(w is not None and w <= limit for w in widths)


def stop_reason(decided: bool, round_: int, design: Design, rule: str) -> str | None:
    """Why the run stops after this look, or None to go on."""
    if decided:
        return STOP_CI_WIDTH if rule == "ci_width" else STOP_DECIDED
    if round_ >= design.max:
        return STOP_MAX
    return None


# --------------------------------------------------------------------------- simulation


@dataclass(frozen=True)
class SimulatedGates:
    """What ``gates`` simulated sequential gates of one comparison said.

    ``flagged``: the share that ended better or worse (a false alarm when ``shift`` is 0;
    the power when it is not, counting only the right direction); ``mean_rounds``: the
    repetitions per side they ran, on average; ``unchanged``: the share that ended so.
    """

    cv: float
    shift: float
    gates: int
    flagged: float
    unchanged: float
    mean_rounds: float


def simulate(
    design: Design,
    *,
    cv: float,
    shift: float,
    gates: int,
    seed: int,
    threshold: float = 0.05,
) -> SimulatedGates:
    """``gates`` seeded gates of baseline N(1, cv) against candidate N(1 + shift, cv), a
    higher-is-better metric, run through the design's looks with compare's verdict rule
    (Welch's t, the MDE, the threshold: :func:`dbrig.analysis.stats.verdict_for`)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(1.0, cv, size=(gates, design.max))
    cand = rng.normal(1.0 + shift, cv, size=(gates, design.max))
    final = np.full(gates, "inconclusive", dtype=object)
    rounds = np.full(gates, design.max)
    open_ = np.ones(gates, dtype=bool)
    for look in design.looks:
        if look.alpha <= 0:
            continue  # nothing to spend at this look
        n = look.round
        b, c = base[:, :n], cand[:, :n]
        mean_b, mean_c = b.mean(axis=1), c.mean(axis=1)
        var_b, var_c = b.var(axis=1, ddof=1), c.var(axis=1, ddof=1)
        sq_se = (var_b + var_c) / n
        df = sq_se**2 / ((var_b / n) ** 2 / (n - 1) + (var_c / n) ** 2 / (n - 1))
        p = 2 * special.stdtr(df, -np.abs(mean_c - mean_b) / np.sqrt(sq_se))
        pooled_cv = np.sqrt((var_b + var_c) / 2) / mean_b
        factor = mde_pct(n, 1.0, look.alpha)  # the MDE is linear in the CV
        delta = 100 * (mean_c / mean_b - 1)
        for i in np.flatnonzero(open_):
            verdict = verdict_for(
                delta[i],
                p[i],
                factor * pooled_cv[i],
                threshold,
                look.alpha,
                Direction.HIGHER_IS_BETTER,
            )
            if verdict in DECIDED_VERDICTS:
                final[i], rounds[i], open_[i] = verdict, n, False
    wanted = {"better", "worse"} if shift == 0 else {"better" if shift > 0 else "worse"}
    return SimulatedGates(
        cv=cv,
        shift=shift,
        gates=gates,
        flagged=float(np.isin(final, list(wanted)).mean()),
        unchanged=float((final == "unchanged").mean()),
        mean_rounds=float(rounds.mean()),
    )


def welch_false_alarms(design: Design, *, gates: int, seed: int) -> float:
    """The share of ``gates`` seeded A/A gates (standard normal values, one a side per
    round) whose Welch p-value falls below a look's level at some look: the design's
    own false-alarm rate, without compare's threshold or MDE (which only turn alarms
    into "unchanged")."""
    rng = np.random.default_rng(seed)
    sums, squares = np.zeros((2, gates)), np.zeros((2, gates))
    flagged = np.zeros(gates, dtype=bool)
    levels = {look.round: look.alpha for look in design.looks}
    for n in range(1, design.max + 1):
        values = rng.standard_normal((2, gates))
        sums += values
        squares += values**2
        if levels.get(n, 0.0) <= 0:
            continue
        var = (squares - sums**2 / n) / (n - 1)
        sq_se = (var[0] + var[1]) / n
        df = (n - 1) * sq_se**2 * n * n / (var[0] ** 2 + var[1] ** 2)
        t = np.abs(sums[1] - sums[0]) / n / np.sqrt(sq_se)
        flagged |= 2 * special.stdtr(df, -t) < levels[n]
    return float(flagged.mean())
