"""The TPC-C-like workload against a real MariaDB: load, mix, retries, consistency, a trial.

W=1 is loaded once per module into a datadir (the loading server is stopped again,
fixtures own no process); each test starts its own server on a copy of it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dbrig import proc
from dbrig.server.sandbox import Sandbox
from dbrig.tools import tpcc
from dbrig.tools.tpcc import TpccParams, build_command
from tests.integration import helpers
from tests.integration.helpers import (
    only_run_dir,
    read_json,
    run_main,
    tiny_scenario,
    trial_dirs,
    write_scenario,
)

pytestmark = pytest.mark.integration

CONFIG = {"innodb_buffer_pool_size": "256M", "innodb_log_file_size": "64M"}
W1 = TpccParams(warehouses=1, threads=4, time=60)
# Clause 4.3.3.1's cardinalities for one warehouse.
CARDINALITIES = {
    "warehouse": 1,
    "district": 10,
    "customer": 30_000,
    "history": 30_000,
    "orders": 30_000,
    "new_order": 9_000,
    "item": 100_000,
    "stock": 100_000,
}
MIX = {"new_order": 45, "payment": 43, "order_status": 4, "delivery": 4, "stock_level": 4}


@pytest.fixture(scope="module")
def loaded_datadir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A datadir holding W=1, loaded by the tool's own prepare command."""
    home = tmp_path_factory.mktemp("tpcc-template") / "server"
    return helpers.prepared_template(
        "tpcc-load",
        home,
        CONFIG,
        W1.db,
        lambda box: build_command(W1, box.endpoint(W1.db), "prepare"),
    )


def server_on_copy(template: Path, home: Path, **config: object) -> AbstractContextManager[Sandbox]:
    return helpers.server_on_copy("tpcc", template, home, {**CONFIG, **config})


def run_tpcc(sandbox: Sandbox, out: Path, *extra: str, threads: int = 2, time: int = 5) -> str:
    params = TpccParams(warehouses=1, threads=threads, time=time, report_interval=0)
    argv = [*build_command(params, sandbox.endpoint(params.db), "run"), *extra]
    done = proc.run(argv, timeout_s=900, stdout=out, merge_stderr=True)
    text = out.read_text()
    assert done.returncode == 0, text
    return text


def scalar(sandbox: Sandbox, sql: str) -> int:
    with contextlib.closing(sandbox.connect("tpcc")) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return int(cur.fetchone()[0])


def violations(sandbox: Sandbox) -> dict[str, int]:
    return {name: scalar(sandbox, sql) for name, sql in tpcc.consistency_queries().items()}


def test_loading_one_warehouse_gives_the_specs_cardinalities(
    tmp_path: Path, loaded_datadir: Path
) -> None:
    with server_on_copy(loaded_datadir, tmp_path / "s") as sandbox:
        for table, rows in CARDINALITIES.items():
            assert scalar(sandbox, f"SELECT COUNT(*) FROM {table}") == rows, table
        # 5..15 lines per order, 30,000 orders: about 300,000 order lines
        assert 5 * 30_000 <= scalar(sandbox, "SELECT COUNT(*) FROM order_line") <= 15 * 30_000
        assert 270_000 < scalar(sandbox, "SELECT COUNT(*) FROM order_line") < 330_000
        original = scalar(sandbox, "SELECT COUNT(*) FROM item WHERE i_data LIKE '%ORIGINAL%'")
        assert 8_000 < original < 12_000  # 10 % of the items
        names = scalar(sandbox, "SELECT COUNT(DISTINCT c_last) FROM customer")
        assert names == 1000  # customers 1..1000 of a district take every syllable name
        assert violations(sandbox) == dict.fromkeys(tpcc.consistency_queries(), 0)


def test_thousands_of_transactions_keep_the_mix_and_the_consistency(
    tmp_path: Path, loaded_datadir: Path
) -> None:
    with server_on_copy(loaded_datadir, tmp_path / "s") as sandbox:
        # A fixed number of events, not a time: the mix is judged on enough of them
        text = run_tpcc(sandbox, tmp_path / "run.out", "--time=0", "--events=6000", threads=4)
        result = tpcc.parse(text)
        counts = {name: s.count for name, s in result.types.items()}
        total = sum(counts.values())
        assert total == 6000
        for name, share in MIX.items():
            assert abs(100 * counts[name] / total - share) <= 2, counts
        new_order = result.types["new_order"]
        assert 0.2 <= 100 * new_order.rollbacks / new_order.count <= 2.5
        assert violations(sandbox) == dict.fromkeys(tpcc.consistency_queries(), 0)

        corruptions = [
            ("consistency_1_violations", "UPDATE district SET d_ytd = d_ytd + 1 WHERE d_id = 1"),
            ("consistency_2_violations", "UPDATE district SET d_next_o_id = 9 WHERE d_id = 2"),
            (
                "consistency_3_violations",
                "DELETE FROM new_order WHERE no_d_id = 3 AND no_o_id = 2950",
            ),
            ("consistency_4_violations", "DELETE FROM order_line WHERE ol_d_id = 4 LIMIT 1"),
        ]
        for name, sql in corruptions:
            sandbox.execute("USE tpcc", sql)
            counts_now = violations(sandbox)
            assert counts_now[name] == 1, (name, counts_now)
            _, reason = tpcc.evaluate_consistency(counts_now)
            assert reason is not None and f"condition {name.split('_')[1]}" in reason


LOCK_WAIT_TIMEOUT_S = 1


def lock_waits(conn: Any) -> int:
    """InnoDB's row lock waits so far (counted when a wait begins)."""
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'")
        return int(cur.fetchone()[1])


def test_lock_wait_timeouts_are_retried_and_counted(tmp_path: Path, loaded_datadir: Path) -> None:
    with server_on_copy(
        loaded_datadir, tmp_path / "s", innodb_lock_wait_timeout=LOCK_WAIT_TIMEOUT_S
    ) as sandbox:
        holder = sandbox.connect("tpcc")
        locked, ran = threading.Event(), threading.Event()

        def hold_the_warehouse_row() -> None:
            # Held until a lock wait has begun and twice its timeout more: a Payment has
            # timed out then, however long sysbench took to start (a fixed 3 s from
            # before its launch could end before its first Payment had waited 1 s).
            with holder.cursor() as cur, contextlib.closing(sandbox.connect()) as watcher:
                before = lock_waits(watcher)
                cur.execute("BEGIN")
                cur.execute("UPDATE warehouse SET w_ytd = w_ytd WHERE w_id = 1")
                locked.set()
                while lock_waits(watcher) == before and not ran.is_set():
                    time.sleep(0.05)
                ran.wait(2 * LOCK_WAIT_TIMEOUT_S)
                cur.execute("ROLLBACK")

        thread = threading.Thread(target=hold_the_warehouse_row)
        thread.start()
        try:
            assert locked.wait(60)
            text = run_tpcc(sandbox, tmp_path / "run.out", threads=2, time=5)
        finally:
            ran.set()
            thread.join()
            holder.close()
        result = tpcc.parse(text)
        assert result.threads_reported == 2
        assert result.types["payment"].retries >= 1  # every Payment updates that row first
        assert result.types["payment"].count > 0
        assert violations(sandbox) == dict.fromkeys(tpcc.consistency_queries(), 0)


def external_tpcc_scenario(sandbox: Sandbox) -> dict:
    return tiny_scenario(
        name="tpcc-ext",
        server={
            "kind": "external",
            "socket": str(sandbox.socket_path),
            "user": "root",
            "reset": "none",
            "prepare": False,
        },
        workload={"tpcc": {"warehouses": 1, "threads": 2, "time": 2}},
    )


def test_a_trial_saves_the_consistency_and_fails_naming_the_broken_condition(
    tmp_path: Path, loaded_datadir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # dbrig stops every child of its process when a run ends, so one server per run
    with server_on_copy(loaded_datadir, tmp_path / "s1") as sandbox:
        scenario = write_scenario(tmp_path / "ok.yaml", external_tpcc_scenario(sandbox))
        result = run_main(["run", str(scenario), "--out", str(tmp_path / "ok")], capsys)
    assert result.code == 0, result.err
    (trial,) = trial_dirs(only_run_dir(tmp_path / "ok"))
    saved = read_json(trial / "trial.json")
    assert saved["status"] == "ok", saved["reason"]
    for n in range(1, 5):
        assert saved["metrics"][f"consistency_{n}_violations"] == 0
    assert saved["metrics"]["nopm"] > 0

    with server_on_copy(loaded_datadir, tmp_path / "s2") as sandbox:
        sandbox.execute("USE tpcc", "UPDATE warehouse SET w_ytd = w_ytd + 5")
        scenario = write_scenario(tmp_path / "bad.yaml", external_tpcc_scenario(sandbox))
        result = run_main(["run", str(scenario), "--out", str(tmp_path / "bad")], capsys)
    assert result.code != 0
    run = only_run_dir(tmp_path / "bad")
    (trial,) = trial_dirs(run)
    saved = read_json(trial / "trial.json")
    assert saved["status"] == "failed"
    assert "condition 1 (W_YTD = sum(D_YTD))" in saved["reason"]
    assert saved["metrics"]["consistency_1_violations"] == 1
    results = pd.read_csv(run / "results.csv")
    assert results.loc[0, "consistency_1_violations"] == 1
