"""A real run with the client pinned to one core and the server to another."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.integration.helpers import (
    only_run_dir,
    read_json,
    run_main,
    tiny_scenario,
    write_scenario,
)


@pytest.mark.integration
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores to pin apart")
def test_the_client_runs_on_its_own_core(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_scenario()
    data["server"] = {**(data.get("server") or {}), "cpus": [0]}
    data["workload"]["sysbench"]["cpus"] = [1]
    scenario = write_scenario(tmp_path / "pinned.yaml", data)
    result = run_main(["run", str(scenario), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    (trial,) = sorted((run / "trials").iterdir())
    saved = read_json(trial / "trial.json")
    assert saved["status"] == "ok"
    assert saved["commands"]["workload"][:3] == ["taskset", "-c", "1"]
    page = (run / "report.html").read_text()
    assert "pinned to cores 1 (taskset)" in page
    assert "client_placement" not in page  # pinned apart: no warning
