"""Faults found by the reliability review of dbrig's own handling (issue 11), against a real
server, real signals and a real filesystem; the unit-level ones are in
tests/unit/test_review_faults.py."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from tests.helpers.wait import wait_for
from tests.integration.helpers import TINY_CONFIG


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
