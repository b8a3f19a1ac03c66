"""Faults found by the reliability review of dbrig's own handling (issue 11), against a real
server, real signals and a real filesystem; the unit-level ones are in
tests/unit/test_review_faults.py."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from tests.helpers.wait import wait_for
from tests.integration.helpers import (
    DBRIG,
    TINY_CONFIG,
    only_run_dir,
    run_dbrig,
    tiny_scenario,
    write_scenario,
)
from tests.integration.test_interrupt import (
    sysbench_running_in_a_partial_trial,
    wait_for_nothing_left,
)


@pytest.mark.integration
def test_a_server_killed_by_sigkill_is_explained_without_note_lines(tmp_path: Path) -> None:
    """Finding 11, on a real kill -9: the reason says the signal, and quotes no [Note] line."""
    sandbox = Sandbox("victim", find_server(), tmp_path / "server")
    sandbox.initialize()
    try:
        sandbox.start(TINY_CONFIG)
        assert sandbox.pid is not None
        os.kill(sandbox.pid, signal.SIGKILL)
        reason = wait_for("the server's death", sandbox.died, timeout=30)
    finally:
        sandbox.close()
    assert "ready for connections" in (tmp_path / "server" / "mysqld.err").read_text()
    assert "[Note]" not in reason and "ready for connections" not in reason, reason
    assert "SIGKILL" in reason, reason


@pytest.mark.integration
def test_the_socket_folder_of_a_sigkilled_dbrig_is_removed_by_the_resume(
    tmp_path: Path, short_tmp: Path
) -> None:
    """Finding 10: SIGKILL of dbrig left an empty 0700 $TMPDIR/dbrig-XXXX that no later run
    removed."""
    scenario = tiny_scenario(
        workload={"sysbench": {**tiny_scenario()["workload"]["sysbench"], "time": 20}}
    )
    path = write_scenario(tmp_path / "long.yaml", scenario)
    out = tmp_path / "runs"
    child = subprocess.Popen(
        [str(DBRIG), "run", str(path), "--out", str(out)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(
            "sysbench running",
            lambda: sysbench_running_in_a_partial_trial(out),
            timeout=90,
            child=child,
        )
        child.kill()
        child.wait()
        assert wait_for_nothing_left(tmp_path, timeout=30) == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert list(short_tmp.glob("dbrig-*")), "the socket folder is expected after SIGKILL"
    resumed = run_dbrig("run", "--resume", only_run_dir(out), "--no-report", timeout=180)
    assert resumed.code == 0, resumed.err
    assert list(short_tmp.glob("dbrig-*")) == []
