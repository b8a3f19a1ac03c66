"""A server a SIGKILLed dbrig left behind: the kernel kills it, or the next run does.

Stand-ins, not MariaDB (the real server is in tests/integration/test_sandbox.py): a
'mariadbd' that ignores SIGTERM, as MariaDB 10.11 does early in its start-up, and one that
keeps its command line (a Python named mariadbd) for the next run to find it by.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from dbrig import ownership
from dbrig.server.sandbox import SOCKET_DIR_PREFIX, remove_orphaned_socket_dirs, socket_folder_of
from dbrig.server.workspace import clone_workspace
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


@pytest.fixture
def short_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Where sockets go, short enough to be used (a long TMPDIR falls back to /tmp)."""
    short = Path(tempfile.mkdtemp(prefix="dos-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(short))
    yield short
    shutil.rmtree(short, ignore_errors=True)


def test_the_socket_folder_of_a_server_is_read_from_its_command_line() -> None:
    argv = ["/usr/sbin/mariadbd", "--defaults-file=/r/my.cnf", "--socket=/t/dbrig-x/mysqld.sock"]
    assert socket_folder_of(argv) == Path("/t/dbrig-x")
    assert socket_folder_of(["mysqld", "--socket=/a/s.sock", "--socket=/b/s.sock"]) == Path("/b")
    assert socket_folder_of(["/usr/sbin/mariadbd", "--defaults-file=/r/my.cnf"]) is None
    assert socket_folder_of(["sysbench", "--socket=/t/dbrig-x/mysqld.sock"]) is None
    assert socket_folder_of([]) is None


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


def stand_in(
    started: list[subprocess.Popen], bin_dir: Path, name: str, socket_dir: Path
) -> psutil.Process:
    """A process named ``name`` whose command line gives a socket in ``socket_dir``."""
    bin_dir.mkdir(exist_ok=True)
    program = bin_dir / name
    if not program.exists():
        program.symlink_to(sys.executable)
    argv = [program, "-c", "import time; time.sleep(600)", f"--socket={socket_dir}/mysqld.sock"]
    started.append(subprocess.Popen(argv, start_new_session=True))
    return psutil.Process(started[-1].pid)


def test_the_next_run_kills_only_servers_a_dead_dbrig_left_running(
    tmp_path: Path, started: list[subprocess.Popen], short_tmp: Path
) -> None:
    """Without setpriv nothing kills a server when dbrig is SIGKILLed: the next run does,
    before it cleans the socket folders and workspaces. Only a server whose socket is in
    a dbrig socket folder whose dbrig is gone."""
    tmp = short_tmp
    killed_dbrig, live_dbrig = tmp / f"{SOCKET_DIR_PREFIX}dead", tmp / f"{SOCKET_DIR_PREFIX}live"
    ownership.mark_owned(killed_dbrig, role="socket", owner_pid=dead_pid())
    ownership.mark_owned(live_dbrig, role="socket", owner_pid=os.getpid())
    unmarked = tmp / f"{SOCKET_DIR_PREFIX}not-ours"
    unmarked.mkdir()
    bin_dir = tmp_path / "bin"
    left = stand_in(started, bin_dir, "mariadbd", killed_dbrig)
    running = stand_in(started, bin_dir, "mariadbd", live_dbrig)
    not_ours = stand_in(started, bin_dir, "mysqld", unmarked)
    client = stand_in(started, bin_dir, "sysbench", killed_dbrig)
    wait_for(
        "the stand-ins",
        lambda: all(p.cmdline() for p in (left, running, not_ours, client)),
        timeout=30,
    )

    with clone_workspace(tmp_path / "run", None):
        pass

    assert gone(left.pid)
    assert not any(gone(p.pid) for p in (running, not_ours, client))
    assert not killed_dbrig.exists()
    assert live_dbrig.is_dir() and unmarked.is_dir()


def test_a_killed_server_is_said_in_one_line(
    tmp_path: Path, started: list[subprocess.Popen], caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / f"{SOCKET_DIR_PREFIX}dead"
    owner = dead_pid()
    ownership.mark_owned(folder, role="socket", owner_pid=owner)
    left = stand_in(started, tmp_path / "bin", "mariadbd", folder)
    wait_for("the stand-in", left.cmdline, timeout=30)
    assert remove_orphaned_socket_dirs(tmp_path) == [folder.resolve()]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    said = f"killed mariadbd pid {left.pid}: left running by dbrig pid {owner}, which was killed"
    assert warnings == [said]
    assert gone(left.pid)
