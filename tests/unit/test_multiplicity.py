"""The gate's error control over many comparisons (analysis/multiplicity.py, compare.gate_rows)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dbrig.analysis.compare import Row, RunInput, _Settings, compare_runs, gate_rows
from dbrig.analysis.multiplicity import (
    decide_family,
    estimate_prior,
    moderated_p,
    primary_weights,
    weighted_holm,
)
from dbrig.analysis.stats import compare_samples
from dbrig.metrics import Direction, direction_of

# ---------------------------------------------------------------- weighted Holm


def test_equal_weights_are_plain_holm() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: sorted 0.005*4, 0.01*3, 0.03*2, 0.04*1, made monotone
    assert weighted_holm(p, [1, 1, 1, 1]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_weights_move_alpha_to_the_heavy_hypothesis() -> None:
    p = [0.03, 0.5]
    assert weighted_holm(p, [1, 1])[0] == pytest.approx(0.06)  # not rejected at 0.05
    assert weighted_holm(p, [0.9, 0.1])[0] == pytest.approx(0.03 / 0.9)  # rejected


def test_step_down_gives_the_rest_of_alpha_to_the_remaining() -> None:
    # once the heavy one is rejected, the light one is tested at all of alpha
    assert weighted_holm([0.01, 0.04], [0.9, 0.1]) == pytest.approx([0.01 / 0.9, 0.04])


def test_adjusted_p_never_below_raw_and_capped_at_one() -> None:
    rng = np.random.default_rng(3)
    p = list(rng.uniform(0, 1, 40))
    adjusted = weighted_holm(p, list(rng.uniform(0.1, 1, 40)))
    assert all(a >= r for a, r in zip(adjusted, p, strict=True))
    assert max(adjusted) <= 1.0


def test_bad_weights_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        weighted_holm([0.1], [0.0])
    with pytest.raises(ValueError, match="one weight"):
        weighted_holm([0.1, 0.2], [1.0])


def test_primary_gets_half_of_alpha() -> None:
    weights = primary_weights(["tps", "qps", "tps", "latency"], "tps")
    assert weights[0] + weights[2] == pytest.approx(0.5)
    assert primary_weights(["tps", "tps"], "tps") == [1.0, 1.0]
    assert primary_weights(["qps"], "tps") == [1.0]


# ---------------------------------------------------------------- moderated t


def _comparison(rng: np.random.Generator, cv: float, shift: float = 1.0, n: int = 5):
    base = rng.normal(1000, 1000 * cv, n)
    cand = rng.normal(1000 * shift, 1000 * shift * cv, n)
    return compare_samples(base, cand, direction=Direction.HIGHER_IS_BETTER)


def test_prior_recovers_the_common_cv() -> None:
    rng = np.random.default_rng(11)
    prior = estimate_prior([_comparison(rng, 0.08) for _ in range(200)])
    assert prior is not None
    assert prior.cv0 == pytest.approx(0.08, rel=0.1)
    assert prior.d0 > 20  # the cells agree: strong pooling


def test_cells_with_different_noise_keep_their_own_variance() -> None:
    rng = np.random.default_rng(12)
    mixed = [_comparison(rng, cv) for cv in [0.02, 0.2] * 50]
    prior = estimate_prior(mixed)
    assert prior is not None and prior.d0 < 5


def test_too_few_cells_fall_back_to_welch() -> None:
    rng = np.random.default_rng(13)
    pair = [_comparison(rng, 0.08), _comparison(rng, 0.08)]
    assert estimate_prior(pair) is None
    decisions, tests = decide_family(pair, ["tps", "tps"], primary="tps")
    assert tests == {"tps": "Welch t"}
    assert [d.p_value for d in decisions] == [c.p_value for c in pair]


def test_moderated_p_is_the_pooled_t_without_a_prior_weight() -> None:
    rng = np.random.default_rng(14)
    c = _comparison(rng, 0.08, shift=1.1)
    from dbrig.analysis.multiplicity import Prior

    # d0 -> 0: the cell's own pooled-variance t on the relative difference
    p = moderated_p(c, Prior(d0=1e-9, cv0=0.5, total_df=8))
    t = (c.delta_pct / 100) / (c.cv * math.sqrt(2 / 5))
    from scipy import stats as sps

    assert p == pytest.approx(2 * sps.t.sf(abs(t), 8), rel=1e-4)


# ---------------------------------------------------------------- the gate, simulated
#
# Five metrics per cell as a sysbench run has them: tps; qps (a fixed multiple in the
# OLTP mix); average latency (threads / tps in a closed loop); p95 latency (follows
# the average, with its own noise); server CPU per transaction (its own noise).

CELLS, REPS, CV = 10, 5, 0.08
METRICS = ("tps", "qps", "latency_avg_ms", "latency_pct_ms", "server_cpu_us_per_txn")


def _side(rng: np.random.Generator, shift_first_cell: float = 1.0) -> np.ndarray:
    tps = 1000 * (1 + rng.normal(0, CV, (CELLS, REPS)))
    tps[0] *= shift_first_cell
    latency = 8000 / tps
    return np.stack(
        [
            tps,
            20 * tps,
            latency,
            1.5 * latency * (1 + rng.normal(0, 0.05, (CELLS, REPS))),
            50 * (1 + rng.normal(0, CV, (CELLS, REPS))),
        ],
        axis=-1,
    )


def _gate(rng: np.random.Generator, shift: float = 1.0) -> list[Row]:
    base, cand = _side(rng), _side(rng, shift)
    rows = []
    for cell in range(CELLS):
        for j, metric in enumerate(METRICS):
            stats = compare_samples(
                base[cell, :, j], cand[cell, :, j], direction=direction_of(metric)
            )
            rows.append(
                Row("cand", (("c", str(cell)),), f"c={cell}", "b", "c", metric,
                    direction_of(metric).value, stats.verdict, stats, REPS, REPS, "")
            )  # fmt: skip
    decided, _ = gate_rows(rows, _Settings(0.05, 0.05, False, "holm", "tps"))
    return decided


def _raised(rows: list[Row]) -> bool:
    return any(r.verdict in ("better", "worse") for r in rows)


def test_a_gate_over_50_unchanged_comparisons_stays_quiet() -> None:
    rng = np.random.default_rng(2026)
    gates = [_gate(rng) for _ in range(1500)]
    false_alarms = sum(_raised(rows) for rows in gates)
    assert false_alarms / len(gates) <= 0.05
    # what each comparison alone (Welch at 0.05, the old rule) would have raised, on the
    # first 300 of the same gates
    alone = sum(any(r.stats.verdict in ("better", "worse") for r in rows) for rows in gates[:300])
    assert alone / 300 > 0.1


def test_a_20_percent_drop_in_one_cells_tps_is_still_caught() -> None:
    rng = np.random.default_rng(7)
    gates = 400
    caught = 0
    for _ in range(gates):
        rows = _gate(rng, shift=0.8)
        caught += any(r.verdict == "worse" and r.metric == "tps" and r.label == "c=0" for r in rows)
    assert caught / gates >= 0.8


# ---------------------------------------------------------------- wired into compare


def _run(label: str, rng: np.random.Generator, shift: float = 1.0) -> RunInput:
    values = _side(rng, shift)
    rows = [
        {"trial": f"{c}-{r}", "cell": f"c{c}", "repetition": r, "status": "ok",
         "workload.sysbench.threads": c + 1,
         **{m: float(values[c, r, j]) for j, m in enumerate(METRICS)}}
        for c in range(CELLS) for r in range(REPS)
    ]  # fmt: skip
    return RunInput(label, {"factors": ["workload.sysbench.threads"]}, pd.DataFrame(rows))


def test_compare_reports_the_family_and_keeps_both_p_values() -> None:
    rng = np.random.default_rng(5)
    report = compare_runs(_run("a", rng), _run("b", rng, 0.7), metrics=list(METRICS))
    assert report.correction == "holm"
    assert report.comparisons == 50
    assert report.primary == "tps"
    assert dict(report.tests)["tps"].startswith("moderated t")
    tps_first = next(r for r in report.rows if r.metric == "tps" and r.label == "threads=1")
    assert tps_first.verdict == "worse"
    assert tps_first.p_adjusted >= tps_first.p_value
    assert tps_first.stats.p_value is not None  # Welch's, kept for the JSON


def test_correction_none_decides_each_comparison_alone() -> None:
    rng = np.random.default_rng(5)
    base, cand = _run("a", rng), _run("b", rng)
    report = compare_runs(base, cand, metrics=list(METRICS), correction="none")
    assert all(r.p_adjusted == r.p_value for r in report.rows if r.p_value is not None)


def test_an_unknown_primary_is_a_one_line_error() -> None:
    from dbrig.errors import ConfigError

    rng = np.random.default_rng(5)
    with pytest.raises(ConfigError, match="--primary nope"):
        compare_runs(_run("a", rng), _run("b", rng), metrics=["tps"], primary="nope")
