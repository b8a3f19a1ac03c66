"""The managed sandbox against the real server: initialise, start, answer, stop, fail well."""

from __future__ import annotations

import contextlib
import re
import socket
import tempfile
from pathlib import Path

import pytest

from dbrig import ownership
from dbrig.errors import ConfigError, ServerError
from dbrig.server import datadir as dd
from dbrig.server import sandbox as sandbox_module
from dbrig.server.binary import find_server
from dbrig.server.sandbox import MAX_SOCKET_PATH, Sandbox
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
