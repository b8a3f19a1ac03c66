"""The managed sandbox against the real server: initialise, start, answer, stop, fail well."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from dbrig import ownership
from dbrig.errors import ConfigError, ServerError
from dbrig.server import datadir as dd
from dbrig.server import sandbox as sandbox_module
from dbrig.server.binary import find_server
from dbrig.server.sandbox import (
    MAX_SOCKET_PATH,
    Sandbox,
    remove_orphaned_socket_dirs,
    socket_folder_of,
)
from tests.helpers.wait import wait_for
from tests.integration.helpers import BUFFER_POOL_BYTES, TINY_CONFIG


@pytest.fixture(scope="module")
def initialised_datadir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One freshly initialised datadir; tests start from a copy of it."""
    sandbox = Sandbox("template", find_server(), tmp_path_factory.mktemp("template") / "server")
    sandbox.initialize()
    return sandbox.datadir


def sandbox_from(template: Path, home: Path, **kwargs) -> Sandbox:
    sandbox = Sandbox("it", find_server(), home, **kwargs)
    dd.copy_tree(template, sandbox.datadir)
    return sandbox


def query(sandbox: Sandbox, sql: str) -> tuple:
    with contextlib.closing(sandbox.connect()) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()


@pytest.mark.integration
def test_a_sandbox_initialises_starts_answers_and_stops(tmp_path: Path) -> None:
    sandbox = Sandbox("life", find_server(), tmp_path / "server")
    sandbox.initialize()
    assert ownership.is_owned(sandbox.datadir)
    assert (sandbox.datadir / "mysql").is_dir()
    try:
        sandbox.start(TINY_CONFIG)
        assert sandbox.is_running and sandbox.died() is None
        version, datadir, sock, port, pool = query(
            sandbox,
            "SELECT VERSION(), @@datadir, @@socket, @@port, @@innodb_buffer_pool_size",
        )
        assert version.startswith(sandbox.binary.version)
        assert Path(datadir) == sandbox.datadir
        assert sock == str(sandbox.socket_path)
        assert len(sock) <= MAX_SOCKET_PATH
        assert port == sandbox.port
        assert str(pool) == BUFFER_POOL_BYTES

        sandbox.prepare_accounts("sbtest")
        assert query(sandbox, "SELECT COUNT(*) FROM mysql.user WHERE user = ''") == (0,)
        assert query(sandbox, "SHOW DATABASES LIKE 'sbtest'") == ("sbtest",)
    finally:
        sandbox.stop()
    assert not sandbox.is_running and sandbox.pid is None

    sandbox.start(TINY_CONFIG)  # a second start appends to the same error log
    socket_dir = sandbox.socket_path.parent
    sandbox.close()
    assert not socket_dir.exists()
    log = sandbox.error_log.read_text()
    assert log.count("ready for connections") == 2
    assert len(re.findall(r"(?:mariadbd|mysqld): Shutdown complete", log)) == 2


@pytest.mark.integration
def test_a_server_that_cannot_start_raises_server_error_with_its_error_log_line(
    tmp_path: Path, initialised_datadir: Path
) -> None:
    sandbox = sandbox_from(initialised_datadir, tmp_path / "server")
    try:
        with pytest.raises(ServerError) as bad_value:
            sandbox.start({**TINY_CONFIG, "innodb_buffer_pool_size": "banana"})
        assert not sandbox.is_running
        with pytest.raises(ServerError) as unknown_option:
            sandbox.start({**TINY_CONFIG, "no_such_option": 1})
        assert not sandbox.is_running
        sandbox.start(TINY_CONFIG)  # nothing of the failed starts is in the way
        assert query(sandbox, "SELECT 1") == (1,)
    finally:
        sandbox.close()

    first, second = str(bad_value.value), str(unknown_option.value)
    assert "[ERROR]" in first and "banana" in first
    assert "[ERROR]" in second and "no_such_option" in second
    assert "banana" not in second, "the second failure quotes the first one's log lines"
    assert "\n" not in first + second
    errors = [ln for ln in sandbox.error_log.read_text().splitlines() if "[ERROR]" in ln]
    assert any("banana" in ln for ln in errors)
    assert any("no_such_option" in ln for ln in errors)


@pytest.mark.integration
def test_a_fixed_port_that_is_taken_is_a_one_line_config_error(
    tmp_path: Path, initialised_datadir: Path
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        sandbox = sandbox_from(initialised_datadir, tmp_path / "server", port=port)
        try:
            with pytest.raises(ConfigError) as raised:
                sandbox.start(TINY_CONFIG)
            assert not sandbox.is_running
        finally:
            sandbox.close()
    message = str(raised.value)
    assert f"port {port}" in message and "taken" in message
    assert "\n" not in message


@pytest.mark.integration
def test_a_long_tmpdir_still_gives_a_short_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_tmp = tmp_path / ("t" * 60)
    long_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long_tmp))
    sandbox = Sandbox("it", find_server(), tmp_path / "server")
    try:
        path = sandbox.socket_path
        assert len(str(path)) <= MAX_SOCKET_PATH
        assert not path.is_relative_to(long_tmp)
    finally:
        sandbox.close()
    assert not path.parent.exists()


@pytest.mark.integration
def test_a_socket_path_over_the_limit_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only reachable when even the fallback temporary directory is long.
    long_tmp = tmp_path / ("s" * 100)
    long_tmp.mkdir()
    monkeypatch.setattr(sandbox_module, "_short_tmp", lambda: str(long_tmp))
    sandbox = Sandbox("it", find_server(), tmp_path / "server")
    try:
        with pytest.raises(ConfigError) as raised:
            sandbox.start(TINY_CONFIG)
        assert not sandbox.is_running
    finally:
        sandbox.close()
    message = str(raised.value)
    assert str(MAX_SOCKET_PATH) in message and "socket" in message
    assert "\n" not in message
    assert list(long_tmp.iterdir()) == []


# -- a dbrig SIGKILLed while its server starts ------------------------------------------------

SRC = Path(__file__).resolve().parents[2] / "src"
# Where MariaDB 10.11 given SIGTERM hangs in init_slave() (0.05 to 0.2 s into its start here).
KILL_AFTER_S = 0.1
DBRIG_STARTING_A_SERVER = """
import json, sys
from pathlib import Path
from dbrig import proc
from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox

home, config, setpriv = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3] == "setpriv"
if not setpriv:  # a host without setpriv: nothing kills the server when dbrig dies
    proc._probed, proc._setpriv = True, None
Sandbox("killed", find_server(), home).start(config)
"""


def server_of(home: Path) -> psutil.Process | None:
    """The live server started with ``home``'s my.cnf."""
    wanted = f"--defaults-file={home / 'my.cnf'}"
    for process in psutil.process_iter(["cmdline", "status"]):
        mine = wanted in (process.info["cmdline"] or [])
        if mine and process.info["status"] != psutil.STATUS_ZOMBIE:
            return process
    return None


@pytest.mark.integration
@pytest.mark.parametrize("setpriv", ["setpriv", "no-setpriv"])
def test_a_server_left_starting_by_a_killed_dbrig_does_not_outlive_the_next_run(
    tmp_path: Path, initialised_datadir: Path, setpriv: str, caplog: pytest.LogCaptureFixture
) -> None:
    """dbrig SIGKILLed as its server starts, where MariaDB 10.11 given SIGTERM hangs for
    good: the kernel's parent-death SIGKILL ends the server; without setpriv the next
    run's clean-up (before its socket folders and workspaces) kills it, saying so."""
    home = tmp_path / "server"
    dd.copy_tree(initialised_datadir, home / "datadir")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    argv = [sys.executable, "-c", DBRIG_STARTING_A_SERVER, home, json.dumps(TINY_CONFIG), setpriv]
    dbrig = subprocess.Popen(list(map(str, argv)), env=env)
    try:
        server = wait_for("the server to start", lambda: server_of(home), timeout=60, child=dbrig)
        time.sleep(KILL_AFTER_S)
    finally:
        dbrig.kill()
        dbrig.wait()
    socket_folder = socket_folder_of(server.info["cmdline"])
    name = Path(server.info["cmdline"][0]).name
    assert socket_folder is not None and socket_folder.is_dir()
    if setpriv == "setpriv":
        wait_for("the server to die with dbrig", lambda: server_of(home) is None, timeout=30)
    else:
        time.sleep(1)
        assert server_of(home) is not None, "no parent-death signal: the server runs on"

    assert remove_orphaned_socket_dirs() == [socket_folder.resolve()]  # the next run
    assert server_of(home) is None
    assert not socket_folder.exists()
    killed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("killed")]
    said = f"killed {name} pid {server.pid}: left running by dbrig pid {dbrig.pid}"
    assert killed == ([] if setpriv == "setpriv" else [f"{said}, which was killed"])


@pytest.mark.integration
def test_a_chosen_port_taken_before_the_server_binds_it_is_replaced(
    tmp_path: Path, initialised_datadir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process (another dbrig's server) binds the port dbrig found free before
    mariadbd does, after its InnoDB start-up: the start goes on with another port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        choices = iter([port])
        real_free_port = sandbox_module.free_port
        monkeypatch.setattr(
            sandbox_module, "free_port", lambda: next(choices, None) or real_free_port()
        )
        sandbox = sandbox_from(initialised_datadir, tmp_path / "server")
        try:
            sandbox.start(TINY_CONFIG)
            assert sandbox.port not in (None, port)
            assert query(sandbox, "SELECT @@port") == (sandbox.port,)
        finally:
            sandbox.close()
    log = sandbox.error_log.read_text()
    assert f"running on port: {port}" in log and log.count("ready for connections") == 1
