"""Stopping a managed server that has not answered yet, with a stand-in for mariadbd that
ignores SIGTERM: MariaDB 10.11 given SIGTERM early in its start-up hangs for good in
init_slave(), deaf to more SIGTERMs, and a Ctrl-C then waited out the whole stop timeout."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dbrig import proc
from dbrig.errors import ServerError
from dbrig.server.binary import ServerBinary
from dbrig.server.sandbox import Sandbox

# Far below the 120 s a stop gives a server that answered, far above a kill under load.
HANG_S = 60
DEAF_SERVER = "#!/bin/sh\ntrap '' TERM\nexec sleep 600\n"


@pytest.fixture(autouse=True)
def nothing_left_running() -> Iterator[None]:
    yield
    proc.stop_all(grace_s=2)


@pytest.fixture
def default_ctrl_c() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt, as in dbrig run (a test worker may ignore it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def deaf_sandbox(tmp_path: Path, **kwargs) -> Sandbox:
    """A sandbox whose 'mariadbd' ignores SIGTERM and never answers."""
    server = tmp_path / "mariadbd"
    server.write_text(DEAF_SERVER)
    server.chmod(0o755)
    binary = ServerBinary(server, "mariadb", "10.11.19", "stand-in", None, None)
    home = tmp_path / "server"
    home.mkdir()
    return Sandbox("deaf", binary, home, **kwargs)


def returns_in_time(call: Callable[[], object]) -> bool:
    """Whether ``call`` returns (or raises) within HANG_S, run in a thread."""

    def quietly() -> None:
        with contextlib.suppress(Exception):  # the caller asks only whether it returned
            call()

    thread = threading.Thread(target=quietly, daemon=True)
    thread.start()
    thread.join(HANG_S)
    return not thread.is_alive()


def test_ctrl_c_while_the_server_starts_kills_it_instead_of_waiting_for_it(
    tmp_path: Path, default_ctrl_c: None
) -> None:
    sandbox = deaf_sandbox(tmp_path, startup_timeout_s=600)

    def ctrl_c_while_waiting_for_an_answer(database: str | None = None) -> None:
        signal.raise_signal(signal.SIGINT)

    sandbox.connect = ctrl_c_while_waiting_for_an_answer  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        sandbox.start({})
    pid = sandbox.pid
    assert pid is not None and proc.alive(pid)
    assert returns_in_time(sandbox.close), "stop() waited for a server deaf to SIGTERM"
    assert not proc.alive(pid)


def test_a_server_that_does_not_answer_in_time_is_killed_instead_of_waited_for(
    tmp_path: Path,
) -> None:
    sandbox = deaf_sandbox(tmp_path, startup_timeout_s=1)
    errors: list[Exception] = []

    def start() -> None:
        try:
            sandbox.start({})
        except ServerError as exc:
            errors.append(exc)

    assert returns_in_time(start), "start() waited for a server deaf to SIGTERM"
    assert len(errors) == 1 and "did not answer within 1 s" in str(errors[0])
    assert sandbox.pid is None
    sandbox.close()
