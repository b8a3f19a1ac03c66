"""A server a SIGKILLed dbrig left behind: the kernel kills it, or the next run does.

Stand-ins, not MariaDB (the real server is in tests/integration/test_sandbox.py): a
'mariadbd' that ignores SIGTERM, as MariaDB 10.11 does early in its start-up, and one that
keeps its command line (a Python named mariadbd) for the next run to find it by.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.helpers.wait import wait_for

SRC = Path(__file__).resolve().parents[2] / "src"
DEAF_SERVER = '#!/bin/sh\ntrap \'\' TERM\necho $$ > "$(dirname "$0")/pid"\nexec sleep 600\n'


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def read_if_there(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""


def dead_pid() -> int:
    """The pid of a process that has exited: a dbrig that was killed."""
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen]]:
    """Processes a test starts; killed at its end whatever happened."""
    children: list[subprocess.Popen] = []
    yield children
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()


def test_a_server_started_by_dbrig_is_killed_when_dbrig_is_killed(
    tmp_path: Path, started: list[subprocess.Popen]
) -> None:
    """The parent-death signal of a managed server is SIGKILL: a SIGTERM early in its
    start-up left MariaDB 10.11 hung for good, after dbrig was gone."""
    server = tmp_path / "mariadbd"
    server.write_text(DEAF_SERVER)
    server.chmod(0o755)
    dbrig = textwrap.dedent(
        f"""
        from pathlib import Path
        from dbrig.server.binary import ServerBinary
        from dbrig.server.sandbox import Sandbox

        binary = ServerBinary(Path({str(server)!r}), "mariadb", "10.11.19", "stand-in", None, None)
        Sandbox("deaf", binary, Path({str(tmp_path / "home")!r})).start({{}})
        """
    )
    (tmp_path / "home").mkdir()
    env = {**os.environ, "PYTHONPATH": str(SRC), "TMPDIR": str(tmp_path)}
    started.append(subprocess.Popen([sys.executable, "-c", dbrig], env=env))
    pid_file = tmp_path / "pid"
    pid = int(wait_for("the stand-in server", lambda: read_if_there(pid_file), timeout=30))
    try:
        os.kill(started[0].pid, signal.SIGKILL)
        started[0].wait()
        wait_for("the stand-in server to die with dbrig", lambda: gone(pid), timeout=30)
    finally:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)
