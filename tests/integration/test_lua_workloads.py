"""Lua workloads as others write them, through ``dbrig run`` with the real sysbench: a
folder of files (the main script requires a module holding the driver, prepare and a
check), kept in the run and run from there, its needs declared or asked of sysbench,
and a script whose server is missing reaching no server at all."""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from tests.integration.helpers import (
    TINY_CONFIG,
    assert_data_removed,
    one_error_line,
    only_run_dir,
    read_json,
    run_main,
    trial_dirs,
    write_scenario,
)

ORDERS = Path(__file__).parents[2] / "scenarios" / "lua-orders"
DATA_SET = re.compile(r"data set ([0-9a-f]{12})")


def orders_scenario(name: str, **top: object) -> dict:
    return {
        "name": name,
        "workload": {
            "sysbench": {
                "script": "orders/orders.lua",
                "threads": 2,
                "time": 1,
                "options": {"rows": 200, "rollback_pct": 5},
                "normal_errors": 0.2,
            }
        },
        "repeat": 2,
        "order": "sequential",
        **top,
    }


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, data: dict) -> Path:
    path = write_scenario(tmp_path / f"{name}.yaml", data)
    out = tmp_path / f"runs-{name}"
    result = run_main(["run", str(path), "--out", str(out), "--no-report"], capsys)
    assert result.code == 0, result.err
    return only_run_dir(out)


def data_set_of(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: dict) -> str:
    path = write_scenario(tmp_path / "dry.yaml", data)
    result = run_main(["run", "--dry-run", str(path)], capsys)
    assert result.code == 0, result.err
    found = DATA_SET.search(result.out)
    assert found, result.out
    return found[1]


@pytest.mark.fresh_data_sets  # asserts the prepare ran, once
@pytest.mark.integration
@pytest.mark.parametrize("server_block", [False, True], ids=["no-server-block", "server-block"])
def test_a_multi_file_script_is_prepared_once_measured_and_kept_with_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server_block: bool
) -> None:
    shutil.copytree(ORDERS, tmp_path / "orders")
    extra = {"server": {"config": TINY_CONFIG}} if server_block else {}
    run_dir = run(tmp_path, capsys, "orders", orders_scenario("orders", **extra))
    results = pd.read_csv(run_dir / "results.csv")
    assert list(results["status"]) == ["ok", "ok"]
    assert (results["tps"] > 0).all()
    # The deliberate rollbacks are the script's normal errors, not the warning's.
    assert (results["normal_errors_per_s"] > 0).all()
    assert (results["errors_per_s"] == 0).all()
    # Prepared once (and checked by the script's own check), then restored per trial.
    loads = [
        read_json(t / "trial.json")["timings"].get("data_set_load_s") for t in trial_dirs(run_dir)
    ]
    assert sum(x is not None for x in loads) == 1
    server = run_dir / "servers" / "default"
    assert "orders: 200 rows" in (server / "prepare.out").read_text()
    assert "orders: check passed" in (server / "check.out").read_text()
    # Every file is in the run, and what ran was that copy, with it on LUA_PATH.
    meta = read_json(run_dir / "run.json")
    [(name, kept)] = meta["environment"]["inputs"].items()
    copy = run_dir / "inputs" / name
    for file in ("orders.lua", "orders_common.lua"):
        assert (copy / file).read_bytes() == (ORDERS / file).read_bytes()
    assert kept["files"] == ["orders.lua", "orders_common.lua"]
    assert kept["search_path"]["LUA_PATH"] == f"{copy}/?.lua;{copy}/?/init.lua;;"
    argv = read_json(trial_dirs(run_dir)[0] / "trial.json")["commands"]["workload"]
    assert argv[:2] == ["env", f"LUA_PATH={copy}/?.lua;{copy}/?/init.lua;;"]
    assert str(copy / "orders.lua") in argv
    assert_data_removed(run_dir)  # cleaned up: no datadir, no snapshot left


@pytest.mark.integration
def test_editing_a_sibling_changes_the_data_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(ORDERS, tmp_path / "orders")
    data = orders_scenario("key")
    before = data_set_of(tmp_path, capsys, data)
    common = tmp_path / "orders" / "orders_common.lua"
    common.write_text(common.read_text().replace("500", "250"))
    assert data_set_of(tmp_path, capsys, data) != before
    (tmp_path / "orders" / "README.txt").write_text("not part of the workload\n")
    after = data_set_of(tmp_path, capsys, data)
    assert data_set_of(tmp_path, capsys, data) == after


NO_SERVER_MAIN = """\
-- This script never connects, though this comment names sysbench.sql.driver().
require("lib")

function thread_init()
  local f = io.open("prepared.txt", "r")
  if f == nil then error("prepare did not run here") end
  f:close()
end

function event()
  local sum = 0
  for i = 1, 100 do sum = sum + i end
end
"""
NO_SERVER_LIB = """\
function prepare()
  local f = assert(io.open("prepared.txt", "w"))
  f:write("ready\\n")
  f:close()
end
"""


@pytest.mark.integration
def test_a_comment_naming_the_driver_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "counting"
    folder.mkdir()
    (folder / "main.lua").write_text(NO_SERVER_MAIN)
    (folder / "lib.lua").write_text(NO_SERVER_LIB)
    block = {"script": "counting/main.lua", "needs_server": False, "time": 1}
    data = {"name": "quiet", "workload": {"sysbench": block}, "repeat": 2}
    run_dir = run(tmp_path, capsys, "quiet", data)
    assert list(pd.read_csv(run_dir / "results.csv")["status"]) == ["ok", "ok"]
    assert not (run_dir / "servers").exists()  # no server started for it
    assert read_json(run_dir / "run.json")["environment"]["server"].startswith("no server")


CONNECTS = """\
-- Declared needs_server: false, yet it connects: it must reach nothing.
function thread_init()
  con = sysbench.sql.driver():connect()
end

function event()
  con:query("SELECT 1")
end
"""


@contextlib.contextmanager
def listeners(tmp_path: Path) -> Iterator[tuple[Path, int, list[str]]]:
    """A Unix socket and a loopback port that accept connections, noting each: stand-ins
    for a server dbrig did not start (a client given no options goes to one of them)."""
    came: list[str] = []
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    path = tmp_path / "other.sock"
    unix.bind(str(path))
    tcp.bind(("127.0.0.1", 0))
    stop = threading.Event()

    def accept(listener: socket.socket, what: str) -> None:
        listener.listen(8)
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            came.append(what)
            conn.close()

    threads = [
        threading.Thread(target=accept, args=(unix, "unix"), daemon=True),
        threading.Thread(target=accept, args=(tcp, "tcp"), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        yield path, int(tcp.getsockname()[1]), came
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        unix.close()
        tcp.close()


@pytest.mark.integration
def test_a_script_whose_server_is_missing_reaches_no_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "connects.lua").write_text(CONNECTS)
    block = {"script": "connects.lua", "needs_server": False, "time": 1}
    data = {"name": "nothing", "workload": {"sysbench": block}}
    path = write_scenario(tmp_path / "nothing.yaml", data)
    out = tmp_path / "runs"
    with listeners(tmp_path) as (unix, port, came):
        # Where libmysqlclient goes when given no socket, host or port of its own.
        monkeypatch.setenv("MYSQL_UNIX_PORT", str(unix))
        monkeypatch.setenv("MYSQL_HOST", "127.0.0.1")
        monkeypatch.setenv("MYSQL_TCP_PORT", str(port))
        result = run_main(["run", str(path), "--out", str(out), "--no-report"], capsys)
    assert result.code == 1, result.err  # its trial failed
    assert came == []  # nothing reached the stand-ins
    run_dir = only_run_dir(out)
    [trial] = trial_dirs(run_dir)
    saved = read_json(trial / "trial.json")
    assert saved["reason"] == (  # a failure reason names the tool that failed
        "sysbench: connects.lua connects to a server, but its scenario declares "
        "needs_server: false (dbrig started none, and it reached none)"
    )
    output = (trial / "workload.out").read_text()
    assert "unable to connect to MySQL server on socket" in output
    assert "no-server/mysqld.sock" in output and "/run/mysqld/mysqld.sock" not in output
    argv = saved["commands"]["workload"]
    socket_arg = next(a for a in argv if a.startswith("--mysql-socket="))
    work = socket_arg.removeprefix("--mysql-socket=")
    assert work.endswith("/no-server/mysqld.sock") and str(out) in work
    assert not Path(work).exists()
    assert "--mysql-host=127.0.0.1" in argv and "--mysql-port=1" in argv
    assert not (run_dir / "servers").exists()


@pytest.mark.integration
def test_a_module_left_out_is_refused_before_the_run_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(ORDERS, tmp_path / "orders")
    data = orders_scenario("left-out")
    data["workload"]["sysbench"]["files"] = ["orders.lua"]
    path = write_scenario(tmp_path / "left.yaml", data)
    result = run_main(["run", "--dry-run", str(path)], capsys)
    assert result.code == 2
    line = one_error_line(result.err)
    assert "module 'orders_common' not found" in line
    assert f"{(tmp_path / 'orders').resolve()}/orders_common.lua" in line
    assert "files:" in line


@pytest.mark.integration
def test_a_resume_runs_the_kept_copy_and_refuses_changed_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "counting"
    folder.mkdir()
    (folder / "main.lua").write_text(NO_SERVER_MAIN.replace("sum + i", "sum + i + fail()"))
    (folder / "lib.lua").write_text(
        NO_SERVER_LIB + "\nsysbench.cmdline.options = {boom = {'fail', false}}\n"
        "function fail() if sysbench.opt.boom then error('boom') end return 0 end\n"
    )
    block = {"script": "counting/main.lua", "needs_server": False, "time": 1}
    data = {
        "name": "again",
        "workload": {"sysbench": block},
        "matrix": {"workload.sysbench.options.boom": [False, True]},
        "order": "sequential",
    }
    path = write_scenario(tmp_path / "again.yaml", data)
    out = tmp_path / "runs"
    first = run_main(["run", str(path), "--out", str(out), "--no-report"], capsys)
    assert first.code == 1, first.err  # the boom cell failed, on purpose
    run_dir = only_run_dir(out)
    again = run_main(["run", "--resume", str(run_dir), "--retry-failed", "--no-report"], capsys)
    assert again.code == 1, again.err  # the same trial ran again, from the run's copy
    [name] = read_json(run_dir / "run.json")["environment"]["inputs"]
    argvs = [read_json(t / "trial.json")["commands"]["workload"] for t in trial_dirs(run_dir)]
    assert all(str(run_dir / "inputs" / name / "main.lua") in a for a in argvs)
    (folder / "lib.lua").write_text("-- changed since\n" + (folder / "lib.lua").read_text())
    refused = run_main(["run", "--resume", str(run_dir), "--retry-failed"], capsys)
    assert refused.code == 2
    assert "changed since the run started" in one_error_line(refused.err)
