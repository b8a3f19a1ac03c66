"""Many comparisons, one gate: borrow noise estimates across cells, then control the error rate.

A CI gate over 10 cells x 5 metrics makes 50 decisions. Each alone at alpha 0.05
is well calibrated, but the chance that at least one of 50 is a false "worse"
is far above 5 % (an A/A run here: 11.7 % for only 8 comparisons). Two steps
fix that without giving up the power to see a real regression at n = 5:

1. **Moderated t** (Smyth 2004, the empirical Bayes t of limma): with 5 runs a
   side, one cell's variance has 8 degrees of freedom, so its t test needs
   |t| > 5.0 to reach p = 0.001. Cells of one run share a machine and a tool,
   so their coefficients of variation are alike: each cell's squared CV is
   shrunk toward the common value estimated from all cells of that metric,
   with a prior weight ``d0`` estimated from how much the cells' CVs actually
   differ. When they differ a lot, ``d0`` is small and each cell keeps its own
   variance (the plain pooled t); when they agree, the test gains up to the
   degrees of freedom of all cells together. The statistic is the pooled t on
   the relative difference of means (a cell's t is scale-free; the relative
   scale is where constant-CV cells share one variance).
2. **Weighted Holm-Bonferroni** over every decision of the comparison: the
   family-wise error rate, the probability that *any* verdict is a false
   better or worse, stays below alpha whatever the other cells did. Holm, not
   Benjamini-Hochberg: BH controls the expected share of false discoveries
   among discoveries, which equals the family-wise rate only when nothing at
   all changed; a pull request that really improves one cell would raise BH's
   bar-lowering for every other cell, and the gate would cry wolf exactly when
   something got better. A gate's question is "may this fail the job", so the
   family-wise rate is the one to hold. Half of alpha goes to the primary
   metric (the first compared, TPS by default) across cells and half to all
   others: the headline question keeps most of its power (a 20 % drop at
   n = 5, CV 8 % is found in about 8 of 10 gates of 10 cells x 5 metrics; see
   ``tests/unit/test_multiplicity.py``), and a regression only in p95 latency
   or CPU per transaction can still fail the gate.

Everything here is pure and works on :class:`~dbrig.analysis.stats.Comparison`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from dbrig.analysis.stats import Comparison

PRIMARY_SHARE = 0.5  # of alpha, for the primary metric's comparisons together
MIN_CELLS_TO_MODERATE = 3  # fewer comparisons of a metric cannot estimate a prior
CORRECTIONS = ("holm", "none")


@dataclass(frozen=True)
class Prior:
    """What the cells of one metric say about its noise: ``d0`` prior degrees of
    freedom (``inf`` when the cells' CVs differ no more than sampling explains),
    ``cv0`` the common CV (fraction), ``total_df`` all cells' degrees of freedom."""

    d0: float
    cv0: float
    total_df: float

    def describe(self) -> str:
        weight = "all cells pooled" if math.isinf(self.d0) else f"prior df {self.d0:.1f}"
        return f"moderated t ({weight}, common CV {100 * self.cv0:.1f} %)"


def _df(c: Comparison) -> int:
    return c.n_base + c.n_cand - 2


def _testable(c: Comparison) -> bool:
    return (
        c.p_value is not None
        and c.cv is not None
        and c.cv > 0
        and math.isfinite(c.cv)
        and c.delta_pct is not None
        and _df(c) > 0
    )


def estimate_prior(comparisons: Sequence[Comparison]) -> Prior | None:
    """Smyth's moment estimate of the prior on squared CVs; None with too few cells."""
    usable = [c for c in comparisons if _testable(c)]
    if len(usable) < MIN_CELLS_TO_MODERATE:
        return None
    d = np.array([_df(c) for c in usable], dtype=float)
    s2 = np.array([c.cv**2 for c in usable])  # type: ignore[operator]
    e = np.log(s2) - special.digamma(d / 2) + np.log(d / 2)
    spread = float(np.var(e, ddof=1) - np.mean(special.polygamma(1, d / 2)))
    if spread <= 0:
        return Prior(math.inf, float(math.sqrt(math.exp(e.mean()))), float(d.sum()))
    d0 = 2 * _trigamma_inverse(spread)
    cv0_sq = math.exp(e.mean() + special.digamma(d0 / 2) - math.log(d0 / 2))
    return Prior(d0, math.sqrt(cv0_sq), float(d.sum()))


def _trigamma_inverse(value: float) -> float:
    """x with trigamma(x) = value; trigamma falls from +inf to 0 on (0, inf)."""
    return float(optimize.brentq(lambda x: special.polygamma(1, x) - value, 1e-8, 1e8))


def moderated_p(c: Comparison, prior: Prior) -> float:
    """Two-sided p of the moderated t for one comparison (see the module docstring)."""
    d = _df(c)
    cv_sq = c.cv**2  # type: ignore[operator]
    if math.isinf(prior.d0):
        posterior, df = prior.cv0**2, prior.total_df
    else:
        posterior = (prior.d0 * prior.cv0**2 + d * cv_sq) / (prior.d0 + d)
        df = min(prior.d0 + d, prior.total_df)
    se = math.sqrt(posterior * (1 / c.n_base + 1 / c.n_cand))
    t = (c.delta_pct / 100) / se  # type: ignore[operator]
    return float(2 * special.stdtr(df, -abs(t)))


def weighted_holm(p_values: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values with weights (Holm 1979): reject where <= alpha.

    Hypotheses are taken in order of ``p / w``; the k-th is tested at
    ``alpha * w_k / (sum of the weights not yet rejected)``. Equal weights give
    plain Holm-Bonferroni. Weights need not sum to 1.
    """
    if len(p_values) != len(weights):
        raise ValueError("one weight per p-value")
    if not p_values:
        return []
    w = np.asarray(weights, dtype=float)
    if (w <= 0).any():
        raise ValueError("weights must be positive")
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p / w, kind="stable")
    remaining = w.sum()
    adjusted = np.empty_like(p)
    running = 0.0
    for index in order:
        running = max(running, min(1.0, p[index] * remaining / w[index]))
        adjusted[index] = running
        remaining -= w[index]
    return [float(x) for x in adjusted]


def primary_weights(metrics: Sequence[str], primary: str | None) -> list[float]:
    """Weights giving ``PRIMARY_SHARE`` of alpha to ``primary``'s comparisons together."""
    is_primary = [m == primary for m in metrics]
    count = sum(is_primary)
    if count in (0, len(metrics)):
        return [1.0] * len(metrics)
    others = len(metrics) - count
    return [PRIMARY_SHARE / count if flag else (1 - PRIMARY_SHARE) / others for flag in is_primary]


@dataclass(frozen=True)
class FamilyDecision:
    """One comparison's place in the family: the test's p and its Holm-adjusted p."""

    p_value: float
    p_adjusted: float


def decide_family(
    comparisons: Sequence[Comparison],
    metrics: Sequence[str],
    *,
    primary: str | None,
    correction: str = "holm",
) -> tuple[list[FamilyDecision | None], dict[str, str]]:
    """Adjusted p-values for the tested comparisons (None for the others), and the
    test used per metric ("moderated t (...)" or "Welch t").

    ``metrics[i]`` names the metric of ``comparisons[i]``; moderation pools the
    comparisons of one metric. With ``correction="none"`` the adjusted p is the
    test's own p.
    """
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}")
    priors = {
        metric: estimate_prior(
            [c for c, m in zip(comparisons, metrics, strict=True) if m == metric]
        )
        for metric in dict.fromkeys(metrics)
    }
    tests = {m: (prior.describe() if prior else "Welch t") for m, prior in priors.items()}
    p_values: list[float | None] = []
    for c, metric in zip(comparisons, metrics, strict=True):
        prior = priors[metric]
        if not _testable(c):
            p_values.append(c.p_value)
        else:
            p_values.append(moderated_p(c, prior) if prior else c.p_value)
    tested = [i for i, p in enumerate(p_values) if p is not None]
    raw = [float(p_values[i]) for i in tested]  # type: ignore[arg-type]
    if correction == "holm":
        weights = primary_weights([metrics[i] for i in tested], primary)
        adjusted = weighted_holm(raw, weights)
    else:
        adjusted = raw
    decisions: list[FamilyDecision | None] = [None] * len(comparisons)
    for i, p, q in zip(tested, raw, adjusted, strict=True):
        decisions[i] = FamilyDecision(p, q)
    return decisions, tests
