"""Exact group-sequential boundaries (analysis/boundaries.py) against published values."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dbrig.analysis import boundaries
from dbrig.analysis.sequential import spent

FIVE = [k / 5 for k in range(1, 6)]


def test_obrien_flemings_test_for_five_looks() -> None:
    # Jennison and Turnbull (2000), table 2.3: C_B(5, 0.05) = 2.040; c_k = C_B sqrt(5 / k).
    found = boundaries.constant_shape_bounds(5, 0.05, lambda t: 1 / math.sqrt(t))
    assert found == pytest.approx([4.562, 3.226, 2.634, 2.281, 2.040], abs=2e-3)


def test_pococks_test_for_five_looks() -> None:
    # Jennison and Turnbull (2000), table 2.1: C_P(5, 0.05) = 2.413.
    found = boundaries.constant_shape_bounds(5, 0.05, lambda t: 1.0)
    assert found == pytest.approx([2.413] * 5, abs=2e-3)


@pytest.mark.parametrize(
    ("kind", "published"),
    [
        # Lan-DeMets spending, two-sided alpha 0.05, five equally spaced looks, as
        # DeMets and Lan (1994) and R's gsDesign (sfLDOF, sfLDPocock) give them.
        ("obrien-fleming", [4.8769, 3.3569, 2.6803, 2.2898, 2.0310]),
        ("pocock", [2.4380, 2.4268, 2.4101, 2.3966, 2.3859]),
    ],
)
def test_spending_boundaries_for_five_looks(kind: str, published: list[float]) -> None:
    found = boundaries.spending_bounds(FIVE, lambda t: spent(t, 0.05, kind))  # type: ignore[arg-type]
    assert [b.z for b in found] == pytest.approx(published, abs=1e-3)
    assert math.fsum(b.crossing for b in found) == pytest.approx(0.05, abs=1e-7)
    totals = [0.0, *(spent(t, 0.05, kind) for t in FIVE)]  # type: ignore[arg-type]
    increments = [b - a for a, b in itertools.pairwise(totals)]
    assert [b.crossing for b in found] == pytest.approx(increments, abs=1e-8)


def test_the_boundaries_hold_for_simulated_brownian_paths() -> None:
    # Unequal spacing, the first look late: 200 000 seeded null paths of the score.
    fractions = [0.15, 0.3, 0.35, 0.6, 0.8, 1.0]
    found = boundaries.spending_bounds(fractions, lambda t: spent(t, 0.05))
    rng = np.random.default_rng(19)
    steps = np.diff([0.0, *fractions])
    score = np.cumsum(rng.normal(size=(200_000, len(steps))) * np.sqrt(steps), axis=1)
    z = score / np.sqrt(fractions)
    crossed = (np.abs(z) >= [b.z for b in found]).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.002)  # 4 standard errors


def test_a_look_without_new_information_spends_nothing() -> None:
    found = boundaries.spending_bounds([0.5, 0.5, 1.0], lambda t: spent(t, 0.05, "pocock"))
    assert math.isinf(found[1].z) and found[1].nominal == 0
    assert math.fsum(b.crossing for b in found) == pytest.approx(0.05, abs=1e-7)


def test_fractions_outside_the_unit_interval_or_going_down_are_refused() -> None:
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        boundaries.spending_bounds([0.0, 1.0], lambda t: t)
    with pytest.raises(ValueError, match="must not go down"):
        boundaries.spending_bounds([0.6, 0.5], lambda t: t)
