"""The integration tests' one way to leave no child behind (tests/integration/helpers.py)."""

from __future__ import annotations

import signal
import subprocess

import psutil
import pytest

from tests.helpers.wait import wait_for
from tests.integration.helpers import killed_at_end


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_child_still_running_when_the_block_fails_is_killed_and_reaped() -> None:
    child = subprocess.Popen(["sleep", "60"])
    with pytest.raises(RuntimeError), killed_at_end(child):
        raise RuntimeError("the test failed")
    assert child.returncode == -signal.SIGKILL


def test_with_group_its_whole_process_group_goes() -> None:
    child = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], start_new_session=True)
    with killed_at_end(child, group=True):
        wait_for("the shell's child", lambda: psutil.Process(child.pid).children(), timeout=10)
        (grandchild,) = psutil.Process(child.pid).children()
    assert child.returncode == -signal.SIGKILL
    wait_for("the shell's child to die", lambda: _gone(grandchild.pid), timeout=10)


def test_a_child_that_ended_is_left_as_it_ended() -> None:
    with killed_at_end(subprocess.Popen(["true"])) as child:
        assert child.wait(timeout=10) == 0
    assert child.returncode == 0
