"""The report's per-cell aggregation: same numbers as stats.summarize, vectorised; cell states."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dbrig.analysis.stats import summarize
from dbrig.report.data import load_run
from dbrig.report.tables import aggregate, by_cell_frame, cell_overview, metric_columns
from tests.helpers.files import COMPLETE, FAILED

HEADLINE = ("tps", "qps", "latency_avg_ms", "latency_pct_ms", "errors_per_s")


def _frame(rows: list[tuple[str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["cell", "status", "tps"])


@pytest.mark.parametrize("run_dir", [COMPLETE, FAILED])
def test_aggregate_matches_stats_summarize_on_real_runs(run_dir: Path) -> None:
    data = load_run(run_dir)
    cells = list(data.cells["cell"])
    stats = aggregate(data.results, list(HEADLINE), cells)
    ok = data.results[data.results["status"] == "ok"]
    for cell in cells:
        for metric in HEADLINE:
            expected = summarize(ok.loc[ok["cell"] == cell, metric])
            assert stats.n.at[cell, metric] == expected.n
            assert stats.mean.at[cell, metric] == pytest.approx(expected.mean)
            assert stats.stdev.at[cell, metric] == pytest.approx(expected.stdev)
            assert stats.ci_low.at[cell, metric] == pytest.approx(expected.ci_low)
            assert stats.ci_high.at[cell, metric] == pytest.approx(expected.ci_high)
            if expected.cv is None:
                assert math.isnan(stats.cv.at[cell, metric])
            else:
                assert stats.cv.at[cell, metric] == pytest.approx(expected.cv)


def test_aggregate_uses_only_ok_finite_values() -> None:
    frame = _frame(
        [
            ("c0", "ok", 100.0),
            ("c0", "ok", 110.0),
            ("c0", "failed", 5000.0),
            ("c0", "ok", math.inf),
            ("c1", "ok", 50.0),
            ("c1", "ok", np.nan),
        ]
    )
    stats = aggregate(frame, ["tps"], ["c0", "c1", "c2"])
    assert stats.n["tps"].to_dict() == {"c0": 2, "c1": 1, "c2": 0}
    assert stats.mean.at["c0", "tps"] == pytest.approx(105.0)
    assert stats.half.at["c0", "tps"] == pytest.approx(summarize([100, 110]).ci_high - 105.0)
    # one value: a mean but no spread; no value at all: nothing
    assert stats.mean.at["c1", "tps"] == 50.0
    assert math.isnan(stats.stdev.at["c1", "tps"])
    assert math.isnan(stats.half.at["c1", "tps"])
    assert math.isnan(stats.cv.at["c1", "tps"])
    assert math.isnan(stats.mean.at["c2", "tps"])


def test_cv_is_undefined_for_a_zero_mean() -> None:
    stats = aggregate(_frame([("c0", "ok", 0.0), ("c0", "ok", 0.0)]), ["tps"], ["c0"])
    assert stats.mean.at["c0", "tps"] == 0.0
    assert math.isnan(stats.cv.at["c0", "tps"])


def test_metric_columns_leave_out_identity_and_factors() -> None:
    data = load_run(COMPLETE)
    metrics = metric_columns(data.results, data.factors)
    assert {"tps", "latency_pct_ms", "cpu_busy_pct", "time_restore_s"} <= set(metrics)
    assert not {"repetition", "workload.sysbench.threads", "status", "reason"} & set(metrics)


def test_overview_of_a_complete_run() -> None:
    data = load_run(COMPLETE)
    overview = cell_overview(data.results, data.cells)
    assert list(overview["cell"]) == ["c000", "c001", "c002", "c003"]
    assert list(overview["label"]) == [
        "threads=1 cpu=0",
        "threads=1 cpu=1",
        "threads=2 cpu=0",
        "threads=2 cpu=1",
    ]
    assert set(overview["state"]) == {"ok"}
    assert overview[["planned", "trials", "ok", "failed"]].to_numpy().tolist() == [[3, 3, 3, 0]] * 4


def test_overview_names_a_partially_failed_cell_and_its_reason() -> None:
    data = load_run(FAILED)
    overview = cell_overview(data.results, data.cells).set_index("cell")
    assert overview.at["c002", "state"] == "partial"
    assert overview.at["c002", "ok"] == 2
    assert overview.at["c002", "failed_reasons"] == "killed by signal / no summary (rc=-9)"
    assert overview.at["c000", "failed_reasons"] == ""


def test_overview_states_of_an_unfinished_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(COMPLETE, run)
    results = pd.read_csv(run / "results.csv")
    results.loc[results["trial"].isin(["c001-r1", "c001-r2", "c001-r3"]), "status"] = "failed"
    unsaved = ["c002-r3", "c003-r1", "c003-r2", "c003-r3"]
    results = results[~results["trial"].isin(unsaved)]
    results.to_csv(run / "results.csv", index=False)
    for trial in unsaved:  # trial.json is the record: results.csv must agree with trials/
        shutil.rmtree(run / "trials" / trial)
    data = load_run(run)
    states = cell_overview(data.results, data.cells).set_index("cell")["state"].to_dict()
    assert states == {"c000": "ok", "c001": "failed", "c002": "incomplete", "c003": "pending"}


def test_results_by_cell_frame_has_a_row_per_cell_and_stats_per_metric() -> None:
    data = load_run(FAILED)
    overview = cell_overview(data.results, data.cells)
    stats = aggregate(data.results, metric_columns(data.results, data.factors), list(overview.cell))
    frame = by_cell_frame(overview, stats)
    assert list(frame["cell"]) == ["c000", "c001", "c002", "c003"]
    for column in ("workload.sysbench.threads", "ok", "state", "failed_reasons", "tps_mean"):
        assert column in frame
    assert {"tps_ci95_low", "tps_ci95_high", "tps_cv", "steal_pct_mean"} <= set(frame.columns)
    c002 = frame.set_index("cell").loc["c002"]
    ok = data.results[(data.results["cell"] == "c002") & (data.results["status"] == "ok")]
    assert c002["tps_mean"] == pytest.approx(ok["tps"].mean())
    assert c002["state"] == "partial"
