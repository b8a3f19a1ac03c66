"""Faults under load: the sandbox killed (-9 and -TERM) mid-trial, restarted on the same
datadir, its recovery measured; a recovery that fails fails only its trial. Nothing is
left running (the conftest checks every process of the test)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from dbrig.server.workspace import is_mounted
from tests.integration.helpers import (
    assert_data_removed,
    assert_no_partial_trials,
    only_run_dir,
    read_json,
    run_main,
    tiny_scenario,
    write_scenario,
)

pytestmark = pytest.mark.integration

WRITE_ONLY = {
    "test": "oltp_write_only",
    "tables": 1,
    "table_size": 1000,
    "threads": 2,
    "time": 7,
    "report_interval": 1,
}
SIGNAL = "faults.kill_server.signal"
BROKEN = {"path": "sbtest/sbtest1.ibd", "at": 1}


def test_kill_and_term_restart_the_server_and_measure_its_recovery(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tiny_scenario(
        workload={"sysbench": WRITE_ONLY},
        faults={"kill_server": {"signal": "KILL", "at": 3, "timeout": 30}},
        matrix=[
            {SIGNAL: ["KILL", "TERM"]},
            # The table's file deleted under load: the restart cannot find it.
            {SIGNAL: ["KILL"], "faults.delete_file": [BROKEN]},
        ],
        order="sequential",
    )
    path = write_scenario(tmp_path / "crash.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs"), "--no-report"], capsys)
    assert result.code == 1, result.err
    assert "1 of 3 trials failed" in result.err
    run = only_run_dir(tmp_path / "runs")

    for trial, signal in (("c000-r1", "KILL"), ("c001-r1", "TERM")):
        folder = run / "trials" / trial
        saved = read_json(folder / "trial.json")
        assert saved["status"] == "ok", saved["reason"]
        metrics = saved["metrics"]
        assert 3 <= metrics["fault_at_s"] < 4
        assert 0 < metrics["restart_to_query_s"] < metrics["downtime_s"]
        assert metrics["client_out_s"] > 0
        assert metrics["tps"] > 0 and metrics["fault_window_tps"] > 0
        assert set(saved["commands"]) == {"workload", "workload_resumed"}
        timeline = read_json(folder / "faults.json")["timeline"]
        events = [e["event"] for e in timeline]
        for step in ("signal sent", "server gone", "restart", "first query", "client restarted"):
            assert step in events, (signal, events)
        assert timeline[0]["signal"] == signal
        intervals = pd.read_csv(folder / "intervals.csv")
        assert intervals["t_s"].is_monotonic_increasing
        # On a busy machine the few seconds left may not get back to 90 %: then none did.
        fault_at = metrics["fault_at_s"]
        if "throughput_recovered_s" in metrics:
            assert metrics["throughput_recovered_s"] > metrics["downtime_s"]
        else:
            t = intervals["t_s"]
            before = intervals["tps"][(t > 0) & (t <= fault_at)].mean()
            assert (intervals["tps"][t - 1 >= fault_at] < 0.9 * before).all()
        # A kill -9 leaves redo to apply; a clean shutdown leaves none.
        recovery = read_json(folder / "faults.json")["innodb_recovery"]
        assert recovery["crash_recovery"] is (signal == "KILL")
        if signal == "KILL":
            assert metrics["innodb_redo_mb"] > 0 and "innodb_recovery_s" in metrics
        else:
            assert "innodb_recovery_s" not in metrics

    broken = read_json(run / "trials" / "c002-r1" / "trial.json")
    assert broken["status"] == "failed"
    assert broken["reason"].startswith("kill_server: no recovery after SIGKILL: ")
    assert "sbtest1.ibd" in broken["reason"]
    events = [e["event"] for e in read_json(run / "trials" / "c002-r1" / "faults.json")["timeline"]]
    assert events == ["file deleted", "signal sent", "server gone", "restart", "restart failed"]
    assert "throughput_recovered_s" not in broken["metrics"]

    assert_no_partial_trials(run)
    assert_data_removed(run)


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("mkfs.xfs"),
    reason="needs root and mkfs.xfs (Debian package xfsprogs)",
)
def test_a_full_disk_stops_the_inserts_until_it_is_freed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inserts = {**WRITE_ONLY, "test": "oltp_insert", "time": 8}
    scenario = tiny_scenario(
        workload={"sysbench": inserts},
        faults={"disk_full": {"at": 2, "for": 3, "size": "512M"}},
    )
    path = write_scenario(tmp_path / "full.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs"), "--no-report"], capsys)
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    folder = run / "trials" / "c000-r1"
    metrics = read_json(folder / "trial.json")["metrics"]
    assert metrics["disk_fill_mb"] > 100 and 3 <= metrics["disk_full_s"] < 5
    timeline = read_json(folder / "faults.json")
    events = [e["event"] for e in timeline["timeline"]]
    assert events[0] == "disk filled" and "disk freed" in events
    if "throughput recovered" in events:
        assert events.index("throughput recovered") > events.index("disk freed")
    else:  # on a busy machine the few seconds left may not get back to 90 %: then none did
        freed = next(e["t_s"] for e in timeline["timeline"] if e["event"] == "disk freed")
        intervals = pd.read_csv(folder / "intervals.csv")
        t = intervals["t_s"]
        before = intervals["tps"][(t > 0) & (t <= 2)].mean()
        assert (intervals["tps"][t - 1 >= freed] < 0.9 * before).all()
    ended = [e for e in timeline["timeline"] if e["event"] == "client run ended"]
    if ended:  # the table needed room while the disk was full: the inserts failed
        assert "1114" in ended[0]["reason"] and "client restarted" in events
        assert any("is full" in line for line in timeline["server_errors"])
    assert not is_mounted(run / "workspace")
    assert_no_partial_trials(run)
