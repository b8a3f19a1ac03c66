"""util.background: a value computed in a forked child, its errors, and no child left behind."""

from __future__ import annotations

import os
import signal
import time

import pytest

from dbrig.util.background import Background, in_background


def _pid_and_square() -> tuple[int, int]:
    return os.getpid(), 7 * 7


def test_the_value_comes_back_from_another_process() -> None:
    with in_background(_pid_and_square, fork=True) as job:
        pid, value = job.result()
    assert value == 49
    assert pid != os.getpid()


def test_without_a_fork_it_runs_in_the_caller_when_asked() -> None:
    with in_background(_pid_and_square, fork=False) as job:
        assert job.pid is None
        pid, value = job.result()
    assert (pid, value) == (os.getpid(), 49)


def _fails() -> None:
    raise ValueError("no such column: tps")


def test_the_childs_exception_is_raised_in_the_caller_with_its_traceback() -> None:
    with in_background(_fails, fork=True) as job, pytest.raises(ValueError) as raised:
        job.result()
    assert "no such column: tps" in str(raised.value)
    assert any("_fails" in note for note in raised.value.__notes__)


def _dies() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_child_that_dies_is_an_error_not_a_hang() -> None:
    with in_background(_dies, fork=True) as job, pytest.raises(RuntimeError, match="signal 9"):
        job.result()


def _sleeps() -> None:
    time.sleep(60)


def test_leaving_early_kills_and_reaps_the_child() -> None:
    with pytest.raises(KeyError), in_background(_sleeps, fork=True) as job:
        pid = job.pid
        assert pid is not None
        raise KeyError("the parent's own work failed")
    assert job.pid is None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped already: not our child any more


def test_cancel_twice_is_harmless() -> None:
    job = Background(_sleeps, fork=True)
    job.cancel()
    job.cancel()
    assert job.pid is None
