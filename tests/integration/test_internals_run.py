"""Server internals of a real mariadbd under sysbench, through ``dbrig run``: with
performance_schema on, the trial keeps the window's wait events, statement digests,
InnoDB counters and InnoDB status, and the report shows the cell's top waits and
digests; with it off, the plan refuses."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pymysql
import pytest

from dbrig.sampling import internals
from dbrig.sampling.schedule import SampleTiming
from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from tests.integration.helpers import (
    TINY_CONFIG,
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
        # the status sampler too: its SHOW GLOBAL STATUS must not be among the digests
        sampling={"enabled": True, "internals": {"enabled": True, "digests": 50}},
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
    assert 0 < len(digests) <= 50
    assert any("sbtest" in row["text"] for row in digests), digests
    # dbrig's own queries (its samplers' too) are left out of what it measures.
    texts = [row["text"].upper() for row in digests]
    assert not any("PERFORMANCE_SCHEMA" in t or "SHOW GLOBAL STATUS" in t for t in texts), texts

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


def test_an_account_without_grants_gets_one_line_per_part_and_no_empty_file(
    tmp_path: Path,
) -> None:
    """A real server with performance_schema on, read by an account with no grant (as
    an external server's may be): each part it cannot read is a line, no file is empty."""
    sandbox = Sandbox("grants", find_server(), tmp_path / "server")
    sandbox.initialize()
    sandbox.start({**TINY_CONFIG, "performance_schema": "ON"})
    try:
        with sandbox.connect() as root, root.cursor() as cur:
            cur.execute("CREATE USER 'bench'@'localhost'")

        def connect() -> pymysql.Connection:
            return pymysql.connect(unix_socket=str(sandbox.socket_path), user="bench")

        timing = SampleTiming(interval=1.0, clock=time.monotonic, t0=time.monotonic(), warmup_s=0)
        sampler = internals.InternalsSampler(tmp_path, timing, connect, digests=5)
        sampler.start()
        sampler.stop()
    finally:
        sandbox.close()
    lines = (tmp_path / internals.OUT).read_text().splitlines()
    assert lines and all(line.startswith("internals: could not ") for line in lines), lines
    assert any("performance_schema's wait events: (1142)" in line for line in lines), lines
    assert any("SUPER" in line for line in lines), lines
    for name in (internals.WAITS, internals.DIGESTS):
        assert not (tmp_path / name).exists()
    outcome = internals.finish(tmp_path)
    assert outcome.metrics == {} and outcome.warnings == tuple(lines)


def test_a_server_killed_in_the_window_gives_a_warning_not_wrong_deltas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sysbench = {**TINY_SCENARIO["workload"]["sysbench"], "time": 4}
    scenario = tiny_scenario(
        workload={"sysbench": sysbench},
        server={"config": {**TINY_CONFIG, "performance_schema": "ON"}},
        sampling={"enabled": False, "internals": {"enabled": True}},
        faults={"kill_server": {"signal": "KILL", "at": 1}},
    )
    path = write_scenario(tmp_path / "killed.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 0, result.err
    (folder,) = sorted((only_run_dir(tmp_path / "runs") / "trials").iterdir())
    trial = read_json(folder / "trial.json")
    lines = [w for w in trial["warnings"] if w.startswith("internals:")]
    assert lines == [
        "internals: the server restarted during the window: its counters started again, no deltas"
    ], trial["warnings"]
    assert not (folder / "waits.csv").exists()
    assert "server_wait_s" not in trial["metrics"]
