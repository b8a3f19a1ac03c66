"""The shipped soak scenario, shortened with --set to seconds: its drift columns are saved."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.integration.helpers import only_run_dir, read_json, run_main

SHORTER = {
    # The RSS slope is fitted on the window's second half and needs 4 samples (drift.py's
    # MIN_POINTS): at 1 s there were exactly 4, and one tick skipped on a busy machine
    # left none. At 0.5 s the second half has 8.
    "workload.sysbench.time": 8,
    "sampling.interval": 0.5,
    "workload.sysbench.tables": 1,
    "workload.sysbench.table_size": 1000,
    "workload.sysbench.threads": 1,
    "warmup": 0,
    "server.config.innodb_buffer_pool_size": "64M",
    "server.config.innodb_log_file_size": "16M",
}


@pytest.mark.integration
def test_the_soak_scenario_shortened_with_set_saves_its_drift_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sets = [arg for key, value in SHORTER.items() for arg in ("--set", f"{key}={value}")]
    result = run_main(
        ["run", "soak", "--out", str(tmp_path / "runs"), "--no-report", *sets], capsys
    )
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    saved = read_json(run / "run.json")
    assert saved["raw_scenario"]["workload"]["sysbench"]["time"] == 8  # what ran is saved
    row = pd.read_csv(run / "results.csv").iloc[0]
    assert row["status"] == "ok"
    for column in (
        "tps_drift_pct_per_h",
        "tps_drift_ci_low_pct_per_h",
        "tps_drift_ci_high_pct_per_h",
        "latency_pct_drift_pct_per_h",
        "server_rss_growth_mib",
        "server_rss_slope_mib_per_h",
    ):
        assert pd.notna(row[column]), column
    assert row["tps_drift_ci_low_pct_per_h"] <= row["tps_drift_pct_per_h"]
    assert row["tps_drift_pct_per_h"] <= row["tps_drift_ci_high_pct_per_h"]
