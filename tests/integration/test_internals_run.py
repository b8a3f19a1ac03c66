"""Server internals of a real mariadbd under sysbench, through ``dbrig run``: with
performance_schema on, the trial keeps the window's wait events, statement digests,
InnoDB counters and InnoDB status, and the report shows the cell's top waits and
digests; with it off, the plan refuses."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.integration.helpers import (
    TINY_SCENARIO,
    only_run_dir,
    read_json,
    run_main,
    tiny_scenario,
    write_scenario,
)

pytestmark = pytest.mark.integration


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_cell_with_internals_keeps_its_waits_digests_and_counters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Text statements: MariaDB gives prepared statements' executions no digest.
    sysbench = {**TINY_SCENARIO["workload"]["sysbench"], "time": 3, "db_ps_mode": "disable"}
    scenario = tiny_scenario(
        workload={"sysbench": sysbench},
        server={"config": {"performance_schema": "ON"}},
        sampling={"enabled": False, "internals": {"enabled": True, "digests": 5}},
    )
    path = write_scenario(tmp_path / "internals.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    (folder,) = sorted((run / "trials").iterdir())
    trial = read_json(folder / "trial.json")
    assert trial["status"] == "ok", trial
    assert not [w for w in trial["warnings"] if w.startswith("internals:")], trial["warnings"]

    waits = _rows(folder / "waits.csv")
    events = {row["event"] for row in waits}
    assert any(e.startswith("wait/synch/mutex/") for e in events), sorted(events)
    assert "wait/io/socket/sql/client_connection" in events
    assert trial["metrics"]["server_wait_s"] > 0
    assert trial["metrics"]["wait_us_per_txn"] > 0

    digests = _rows(folder / "digests.csv")
    assert 0 < len(digests) <= 5
    assert any("sbtest" in row["text"] for row in digests), digests
    # dbrig's own queries are left out of what it measures.
    assert not any("performance_schema" in row["text"] for row in digests), digests

    counters = {row["name"]: row for row in _rows(folder / "innodb_metrics.csv")}
    assert int(counters["trx_commits_insert_update"]["delta"]) > 0
    assert "TRANSACTIONS" in (folder / "innodb_status.txt").read_text()

    page = (run / "report.html").read_text()
    assert 'id="internals"' in page and "client_connection" in page


def test_internals_without_performance_schema_are_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tiny_scenario(sampling={"internals": {"enabled": True}})
    path = write_scenario(tmp_path / "off.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 2
    assert "sampling.internals.enabled" in result.err
    assert "performance_schema: ON" in result.err
    assert not (tmp_path / "runs").exists()
