"""Tests for dbrig.analysis.stats: hand-checked values, simulated error rates and anchors.

Simulations use a seeded numpy RNG and model runs as normal with a constant CV
(multiplicative noise), mean 1000, CV 8 %: what identical 30 s sysbench runs
show on the shared machine.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dbrig.analysis.stats import (
    Comparison,
    Summary,
    compare_samples,
    detect_steps,
    detection_power,
    explain,
    mde_pct,
    runs_needed,
    summarize,
)
from dbrig.metrics import METRIC_DIRECTIONS, Direction, direction_of

HIGHER = Direction.HIGHER_IS_BETTER
LOWER = Direction.LOWER_IS_BETTER
CV = 0.08


def _runs(rng: np.random.Generator, n: int, mean: float = 1000.0, cv: float = CV) -> np.ndarray:
    return rng.normal(mean, cv * mean, n)


def _verdicts(seed: int, trials: int, n: int, shift: float) -> list[Comparison]:
    """Baseline at 1000, candidate at 1000 * (1 + shift), both CV 8 %, TPS-like."""
    rng = np.random.default_rng(seed)
    return [
        compare_samples(_runs(rng, n), _runs(rng, n, 1000 * (1 + shift)), direction=HIGHER)
        for _ in range(trials)
    ]


def _share(comparisons: list[Comparison], *verdicts: str) -> float:
    return sum(c.verdict in verdicts for c in comparisons) / len(comparisons)


# --------------------------------------------------------------------------- summarize


def test_summarize_hand_checked_values() -> None:
    # mean 2.5; s^2 = (2.25 + 0.25 + 0.25 + 2.25) / 3 = 5/3; t(0.975, 3) = 3.182446;
    # half width = 3.182446 * sqrt(5/3) / 2 = 2.054260.
    s = summarize([4.0, 1.0, 3.0, 2.0])
    assert s.n == 4
    assert s.mean == 2.5
    assert s.median == 2.5
    assert s.stdev == pytest.approx(math.sqrt(5 / 3))
    assert s.cv == pytest.approx(math.sqrt(5 / 3) / 2.5)
    assert s.ci_low == pytest.approx(2.5 - 2.054260, abs=1e-6)
    assert s.ci_high == pytest.approx(2.5 + 2.054260, abs=1e-6)
    assert (s.min, s.max) == (1.0, 4.0)


def test_summarize_empty_and_single() -> None:
    assert summarize([]) == Summary(n=0)
    one = summarize([7.5])
    assert one == Summary(n=1, mean=7.5, median=7.5, min=7.5, max=7.5)
    assert one.stdev is None and one.ci_low is None and one.cv is None


def test_summarize_drops_failed_repetitions() -> None:
    assert summarize([1.0, math.nan, 3.0, math.inf]) == summarize([1.0, 3.0])
    assert summarize([math.nan, math.nan]) == Summary(n=0)


def test_summarize_cv_is_none_for_zero_mean() -> None:
    s = summarize([-1.0, 1.0])
    assert s.mean == 0 and s.cv is None and s.stdev == pytest.approx(math.sqrt(2))


# --------------------------------------------------------------------------- directions


def test_metric_directions() -> None:
    for metric in ("tps", "qps", "events_per_s", "queries_per_s"):
        assert direction_of(metric) is HIGHER
    for metric in ("latency_avg_ms", "avg_s", "errors_per_s", "kb_written_per_txn"):
        assert direction_of(metric) is LOWER
    tpcc_directions = 18  # nopm, tpm, 10 per-type latencies, 4 consistency counts, 2 costs
    acked_writes_directions = 1  # lost_commits
    fault_directions = 7  # issue 11: downtime, recovery, restart, client out/errors, tps, InnoDB
    expected = 22 + tpcc_directions + acked_writes_directions + fault_directions
    assert len(METRIC_DIRECTIONS) == expected


def test_direction_fallback() -> None:
    assert direction_of(" TPS ") is HIGHER
    assert direction_of("latency_p99_ms") is LOWER
    assert direction_of("page_faults_per_txn") is LOWER
    assert direction_of("server_cpu_us_per_query") is LOWER
    assert direction_of("disk_reads_per_query") is LOWER
    assert direction_of("threads") is None


# --------------------------------------------------------------------------- compare: error rates


def test_aa_false_verdict_rate_at_most_5_percent() -> None:
    # Welch at alpha 0.05 is calibrated: its expected A/A rate is 5 % exactly, and at
    # n=8, CV 8 % every significant delta already exceeds 5 %. So "<= 5 %" gets two
    # binomial standard errors of slack (sqrt(0.05 * 0.95 / 2000) = 0.5 %).
    comparisons = _verdicts(seed=1, trials=2000, n=8, shift=0.0)
    assert _share(comparisons, "better", "worse") <= 0.06
    assert _share(comparisons, "worse") <= 0.035  # one tail: 2.5 % expected
    assert _share(comparisons, "insufficient data") == 0


def test_15_percent_tps_drop_is_worse_at_n8() -> None:
    comparisons = _verdicts(seed=2, trials=300, n=8, shift=-0.15)
    assert _share(comparisons, "worse") >= 0.90
    assert _share(comparisons, "better") == 0


def test_5_percent_drop_at_n8_is_mostly_inconclusive() -> None:
    comparisons = _verdicts(seed=3, trials=300, n=8, shift=-0.05)
    assert _share(comparisons, "inconclusive") >= 0.6
    assert _share(comparisons, "better") == 0


def test_5_percent_drop_at_n_needed_reaches_promised_power() -> None:
    n = runs_needed(0.05, CV)
    comparisons = _verdicts(seed=4, trials=300, n=n, shift=-0.05)
    significant = sum(c.p_value is not None and c.p_value < 0.05 for c in comparisons)
    assert 0.70 <= significant / len(comparisons) <= 0.92
    assert _share(comparisons, "better") == 0
    # A true shift exactly at the threshold lands below it half the time, so the
    # "worse" verdict (which also needs |delta| >= 5 %) fires about half the time.
    assert 0.35 <= _share(comparisons, "worse") <= 0.65


# --------------------------------------------------------------------------- compare: behaviour


def test_latency_increase_is_worse_and_tps_increase_is_better() -> None:
    base = [10.0, 10.4, 9.8, 10.1, 9.9]
    slower = [12.0, 12.3, 11.8, 12.1, 11.9]
    assert compare_samples(base, slower, direction=LOWER).verdict == "worse"
    assert compare_samples(base, slower, direction=HIGHER).verdict == "better"
    assert compare_samples(slower, base, direction=LOWER).verdict == "better"


def test_comparison_fields() -> None:
    c = compare_samples([100, 102, 98, 101, 99], [90, 91, 89, 92, 88], direction=HIGHER)
    assert (c.n_base, c.n_cand) == (5, 5)
    assert (c.mean_base, c.mean_cand) == (100.0, 90.0)
    assert c.delta_pct == pytest.approx(-10.0)
    assert c.ci_low_pct < -10.0 < c.ci_high_pct < 0
    assert c.p_value < 1e-4
    assert c.cv == pytest.approx(math.sqrt(2.5) / 100)
    assert c.mde_pct == pytest.approx(mde_pct(5, c.cv))
    assert c.n_needed == runs_needed(0.05, c.cv)
    assert c.verdict == "worse" and c.reason is None


def test_significant_but_small_shift_is_unchanged() -> None:
    base = [1000, 1001, 999, 1000.5, 999.5]
    cand = [1020, 1021, 1019, 1020.5, 1019.5]  # +2 %, very precise
    c = compare_samples(base, cand, direction=HIGHER)
    assert c.p_value < 0.001 and c.verdict == "unchanged"


def test_not_significant_with_enough_power_is_unchanged() -> None:
    rng = np.random.default_rng(5)
    c = compare_samples(_runs(rng, 30, cv=0.01), _runs(rng, 30, cv=0.01), direction=HIGHER)
    assert c.p_value >= 0.05 and c.mde_pct < 5
    assert c.verdict == "unchanged"


def test_ci_excludes_zero_exactly_when_significant() -> None:
    rng = np.random.default_rng(6)
    for _ in range(300):
        n_b, n_c = rng.integers(2, 12, size=2)
        c = compare_samples(_runs(rng, n_b), _runs(rng, n_c, 930), direction=HIGHER)
        if c.ci_low_pct is None:
            continue
        assert c.ci_low_pct <= c.delta_pct <= c.ci_high_pct
        assert (c.p_value < 0.05) == (not c.ci_low_pct <= 0 <= c.ci_high_pct)


@pytest.mark.parametrize(
    ("baseline", "candidate", "reason"),
    [
        ([], [1.0, 2.0], "fewer than 2"),
        ([1.0], [1.0, 2.0], "fewer than 2"),
        ([1.0, math.nan], [1.0, 2.0], "fewer than 2"),
        ([math.nan, math.nan], [math.nan, math.nan], "fewer than 2"),
        ([1.0, 2.0, math.inf], [1.0, 2.0], "infinite"),
        ([5.0, 5.0, 5.0], [4.0, 4.0, 4.0], "constant"),
        ([0.0, 0.0, 0.0], [0.1, 0.3, 0.2], "baseline mean"),
    ],
)
def test_degenerate_inputs_are_insufficient(
    baseline: list[float], candidate: list[float], reason: str
) -> None:
    for direction in (HIGHER, LOWER):
        c = compare_samples(baseline, candidate, direction=direction)
        assert c.verdict == "insufficient data"
        assert c.p_value is None and c.delta_pct is None
        assert reason in (c.reason or "")
        assert explain(c).startswith("insufficient data: ")


def test_identical_constant_sides_are_unchanged_without_a_test() -> None:
    c = compare_samples([0.0, 0.0, 0.0], [0.0, 0.0], direction=LOWER)
    assert c.verdict == "unchanged" and c.p_value is None and c.delta_pct == 0.0


def test_failed_repetitions_are_dropped() -> None:
    base = [100.0, 102.0, math.nan, 98.0]
    cand = [90.0, math.nan, 91.0, 89.0]
    assert compare_samples(base, cand, direction=HIGHER) == compare_samples(
        [100.0, 102.0, 98.0], [90.0, 91.0, 89.0], direction=HIGHER
    )


def test_n3_per_side_can_be_significant() -> None:
    # Welch, unlike an exact Mann-Whitney U (smallest p = 0.1 at n=3), can decide here.
    c = compare_samples([1000, 1010, 990], [800, 805, 795], direction=HIGHER)
    assert c.verdict == "worse"


def test_explain_sentence() -> None:
    c = compare_samples([1000, 1080, 920, 1000, 1000], [980, 1060, 900, 980, 980], direction=HIGHER)
    assert c.cv == pytest.approx(0.0566, abs=1e-4)
    assert explain(c) == (
        "with n=5 per side and CV 5.7 %, shifts under 11 % cannot be resolved; "
        f"{c.n_needed} runs per side would resolve 5 %"
    )
    precise = compare_samples([100, 101, 99], [100.5, 100.5, 99.5], direction=HIGHER)
    assert explain(precise, 0.05).endswith("can be resolved (5 % asked)")


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError):
        compare_samples([1, 2], [1, 2], direction=HIGHER, threshold=0)
    with pytest.raises(ValueError):
        runs_needed(0.0, CV)
    with pytest.raises(ValueError):
        mde_pct(5, -0.1)


# --------------------------------------------------------------------------- power anchors


def test_power_anchors_from_the_issue() -> None:
    # Issue: CV 8 %, 8 runs per side -> 10 % caught ~60 %, 15 % ~97 %; 5 % needs ~58/side.
    # The t-corrected formula gives 0.64, 0.93 and 42 (see the module docstring).
    assert detection_power(0.10, 8, CV) == pytest.approx(0.64, abs=0.01)
    assert detection_power(0.15, 8, CV) == pytest.approx(0.935, abs=0.01)
    assert runs_needed(0.05, CV) == 42
    assert mde_pct(8, CV) == pytest.approx(12.05, abs=0.01)
    assert mde_pct(5, CV) == pytest.approx(16.17, abs=0.01)


def test_mde_and_runs_needed_agree() -> None:
    for effect in (0.03, 0.05, 0.10, 0.20):
        n = runs_needed(effect, CV)
        assert mde_pct(n, CV) <= 100 * effect < mde_pct(n - 1, CV) or n == 2
        assert detection_power(effect, n, CV) >= 0.8


def test_mde_edge_cases() -> None:
    assert mde_pct(1, CV) == math.inf
    assert mde_pct(10, 0.0) == 0.0
    assert runs_needed(0.05, 0.0) == 2
    assert mde_pct(20, CV) < mde_pct(10, CV)


# --------------------------------------------------------------------------- steps


def test_detect_steps_finds_a_clear_step() -> None:
    rng = np.random.default_rng(7)
    history = np.concatenate([_runs(rng, 12, 1000, 0.03), _runs(rng, 10, 850, 0.03)])
    (step,) = detect_steps(history)
    assert step.index == 12
    assert step.before_mean == pytest.approx(history[:12].mean())
    assert step.after_mean == pytest.approx(history[12:].mean())
    assert step.delta_pct == pytest.approx(-15, abs=3)


def test_detect_steps_finds_two_steps_and_skips_nans() -> None:
    rng = np.random.default_rng(8)
    history = np.concatenate(
        [_runs(rng, 8, 1000, 0.02), [math.nan], _runs(rng, 8, 1200, 0.02), _runs(rng, 8, 900, 0.02)]
    )
    assert [s.index for s in detect_steps(history)] == [9, 17]


def test_detect_steps_quiet_on_flat_noise() -> None:
    rng = np.random.default_rng(9)
    found = sum(bool(detect_steps(_runs(rng, n))) for n in (8, 15, 30, 60) for _ in range(25))
    assert found <= 8  # of 100 flat series; the expected rate is 2-5 % (8..60 values)


def test_detect_steps_ignores_steps_below_threshold_and_short_series() -> None:
    rng = np.random.default_rng(10)
    small = np.concatenate([_runs(rng, 15, 1000, 0.005), _runs(rng, 15, 1030, 0.005)])
    assert detect_steps(small, threshold=0.05) == []
    assert [s.index for s in detect_steps(small, threshold=0.02)] == [15]
    assert detect_steps([1.0, 2.0, 3.0, 4.0, 5.0]) == []
    assert detect_steps([5.0, 5.0, 5.0, 4.0, 4.0, 4.0]) == []  # no variation: no test
