"""Several servers in one scenario, server settings as factors, mysqlslap, external targets."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from tests.integration.helpers import (
    TINY_SCENARIO,
    closed_port,
    one_error_line,
    only_run_dir,
    read_json,
    run_main,
    tiny_scenario,
    write_scenario,
)

pytestmark = pytest.mark.integration

SMALL = {"innodb_buffer_pool_size": "64M", "innodb_log_file_size": "16M"}
LOAD_TYPES = ["read", "write", "key", "update", "mixed"]
SECRET = "s3cr3t-Pw#1"


def trials(run: Path) -> list[dict]:
    return [read_json(p / "trial.json") for p in sorted((run / "trials").iterdir())]


def test_two_managed_servers_run_all_five_mysqlslap_load_types(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = {
        "name": "slap",
        "servers": {
            "small": {"config": {**SMALL, "innodb_buffer_pool_size": "32M"}},
            "large": {"config": {**SMALL, "innodb_buffer_pool_size": "96M"}},
        },
        "workload": {
            "mysqlslap": {
                "load_type": "read",
                "number_of_queries": 200,
                "concurrency": 2,
                "iterations": 1,
                "number_char_cols": 3,
                "number_int_cols": 5,
            }
        },
        "sampling": {"interval": 0.5},
        "matrix": {"server": ["small", "large"], "workload.mysqlslap.load_type": LOAD_TYPES},
        "order": "sequential",
    }
    path = write_scenario(tmp_path / "slap.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    results = pd.read_csv(run / "results.csv")
    assert len(results) == 10
    assert (results["status"] == "ok").all(), results[["trial", "reason"]]
    assert (results["avg_s"] > 0).all() and (results["queries_per_s"] > 0).all()
    assert set(results["workload.mysqlslap.load_type"]) == set(LOAD_TYPES)
    assert (results["client_user_cpu_s"] + results["client_sys_cpu_s"] > 0).all()
    pools = {t["server"]: t["effective_config"]["innodb_buffer_pool_size"] for t in trials(run)}
    assert pools == {"small": str(32 * 2**20), "large": str(96 * 2**20)}
    meta = read_json(run / "run.json")
    assert set(meta["servers"]) == {"small", "large"}
    assert (run / "servers" / "small" / "mysqld.err").is_file()
    assert (run / "servers" / "large" / "mysqld.err").is_file()


def test_a_server_setting_in_the_matrix_is_read_back_and_a_clamped_one_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tiny_scenario(
        matrix={
            "server.config.sync_binlog": [0, 1],
            # Below InnoDB's minimum of 100: the server clamps it, and says so only in its log.
            "server.config.innodb_io_capacity": [50],
        }
    )
    path = write_scenario(tmp_path / "durability.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 0, result.err
    by_value = {
        t["factors"]["server.config.sync_binlog"]: t
        for t in trials(only_run_dir(tmp_path / "runs"))
    }
    assert by_value[0]["effective_config"]["sync_binlog"] == "0"
    assert by_value[1]["effective_config"]["sync_binlog"] == "1"
    for trial in by_value.values():
        assert trial["effective_config"]["innodb_io_capacity"] == "100"
        assert "innodb_io_capacity: asked for 50, the server runs with 100" in trial["warnings"]


@pytest.fixture
def external_server(tmp_path: Path) -> Sandbox:
    """A server dbrig did not start: made here with a password account for the benchmark."""
    box = Sandbox("outside", find_server(), tmp_path / "outside")
    box.initialize()
    box.start(SMALL)
    box.execute(
        "CREATE DATABASE bench",
        f"CREATE USER 'bench'@'127.0.0.1' IDENTIFIED BY '{SECRET}'",
        f"CREATE USER 'bench'@'localhost' IDENTIFIED BY '{SECRET}'",
        "GRANT ALL ON bench.* TO 'bench'@'127.0.0.1'",
        "GRANT ALL ON bench.* TO 'bench'@'localhost'",
    )
    return box


def external_scenario(port: int, **server: object) -> dict:
    workload = json.loads(json.dumps(TINY_SCENARIO["workload"]))
    workload["sysbench"]["db"] = "bench"
    return tiny_scenario(
        name="ext",
        server={
            "kind": "external",
            "host": "127.0.0.1",
            "port": port,
            "user": "bench",
            "password_env": "BENCH_PW",
            "reset": "reprepare",
            **server,
        },
        workload=workload,
        repeat=2,
    )


def test_an_external_server_is_benchmarked_without_its_password_leaking(
    tmp_path: Path,
    external_server: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("BENCH_PW", SECRET)
    try:
        assert external_server.port is not None
        path = write_scenario(tmp_path / "ext.yaml", external_scenario(external_server.port))
        result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
        assert result.code == 0, result.err
        run = only_run_dir(tmp_path / "runs")
        results = pd.read_csv(run / "results.csv")
        assert (results["status"] == "ok").all(), results[["trial", "reason"]]
        assert (results["tps"] > 0).all()
        assert (results["time_reset_s"] > 0).all(), "reset: reprepare reloads before every trial"
        meta = read_json(run / "run.json")
        assert meta["servers"]["default"]["kind"] == "external"
        assert meta["servers"]["default"]["reset"] == "reprepare"
        for file in run.rglob("*"):
            if file.is_file():
                assert SECRET not in file.read_text(errors="replace"), f"password in {file}"
        assert SECRET not in result.out + result.err
    finally:
        external_server.close()


def test_an_external_server_with_a_wrong_password_is_one_line_and_never_shows_it(
    tmp_path: Path,
    external_server: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("BENCH_PW", "not-the-" + SECRET)
    try:
        path = write_scenario(tmp_path / "ext.yaml", external_scenario(external_server.port))
        result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
        assert result.code == 2
        line = one_error_line(result.err)
        assert f"127.0.0.1:{external_server.port}" in line and "access denied" in line
        assert SECRET not in line
        assert not (tmp_path / "runs").exists(), "nothing is written before the run starts"
    finally:
        external_server.close()


def test_an_external_server_that_does_not_answer_names_host_and_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BENCH_PW", "x")
    with closed_port() as port:
        path = write_scenario(tmp_path / "ext.yaml", external_scenario(port))
        result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 2
    line = one_error_line(result.err)
    assert f"cannot connect to 127.0.0.1:{port}" in line
    assert not (tmp_path / "runs").exists()


def test_a_matrix_server_name_not_in_servers_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tiny_scenario(servers={"a": {}}, matrix={"server": ["a", "b"]})
    scenario.pop("server")
    path = write_scenario(tmp_path / "bad.yaml", scenario)
    result = run_main(["run", str(path), "--dry-run"], capsys)
    assert result.code == 2
    assert "'b' is not in servers" in one_error_line(result.err)
