"""stress-ng interference during a cell: measured, reported, and stopped with the cell."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from tests.integration.helpers import (
    one_error_line,
    only_run_dir,
    processes_of,
    read_json,
    run_main,
    tiny_scenario,
    write_scenario,
)

STRESS = {"cpu": 1, "cpu_load": 90, "taskset": [0]}


@pytest.mark.integration
def test_stress_ng_pinned_to_core_0_is_measured_and_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The server on core 1 and the interference on core 0, the server's cores set by the matrix.
    scenario = tiny_scenario(interference={"stress-ng": STRESS}, matrix={"server.cpus": [[1]]})
    path = write_scenario(tmp_path / "stress.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 0, result.err
    assert not [p for p in processes_of(tmp_path) if p.name() == "stress-ng"]

    run = only_run_dir(tmp_path / "runs")
    folder = run / "trials" / "c000-r1"
    trial = read_json(folder / "trial.json")
    assert trial["status"] == "ok", trial["reason"]
    metrics = trial["metrics"]
    assert metrics["stress_cpu_s_requested"] > 0
    assert metrics["stress_cpu_s_achieved"] > 0
    assert metrics["pinned_cores_busy_pct"] > 0
    assert metrics["cpu_busy_pct_core0"] > 0
    stress_argv = trial["commands"]["interference"]
    assert Path(stress_argv[0]).name == "stress-ng"
    assert stress_argv[stress_argv.index("--taskset") + 1] == "0"
    assert (folder / "stress-ng.err").exists()

    results = pd.read_csv(run / "results.csv")
    assert results.loc[0, "stress_cpu_s_achieved"] > 0
    assert "pinned_cores_busy_pct" in results.columns

    server_starts = [
        line.split("start: ", 1)[1]
        for line in (run / "dbrig.log").read_text().splitlines()
        if "start: " in line and "mariadbd" in line
    ]
    assert server_starts[-1].startswith("taskset -c 1 "), server_starts


@pytest.mark.integration
def test_a_taskset_core_that_does_not_exist_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing_core = os.cpu_count() or 1
    scenario = tiny_scenario(interference={"stress-ng": {**STRESS, "taskset": [missing_core]}})
    path = write_scenario(tmp_path / "no-such-core.yaml", scenario)
    out = tmp_path / "runs"
    result = run_main(["run", str(path), "--out", str(out)], capsys)
    assert result.code == 2
    line = one_error_line(result.err)
    assert str(path) in line
    assert "interference.stress-ng.taskset" in line and f"core {missing_core}" in line
    assert not out.exists()
