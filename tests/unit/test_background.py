"""util.background: values computed in a forked child (alone or sharing a job list with the
caller), its errors, and no child left behind."""

from __future__ import annotations

import functools
import os
import signal
import time
from pathlib import Path

import pytest

from dbrig.util.background import Background, SharedJobs, in_background, shared_jobs
from dbrig.util.signals import stop_on_signals


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


# --------------------------------------------------------------------------- shared jobs


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


def test_shared_jobs_are_split_between_the_child_and_the_caller_in_order(tmp_path: Path) -> None:
    started, first_done = tmp_path / "started", tmp_path / "first-done"

    def held_by_the_child() -> int:  # job 0: busy until the caller has done job 1
        started.touch()
        _wait_for(first_done)
        return os.getpid()

    def quick() -> int:
        first_done.touch()
        return os.getpid()

    with shared_jobs([held_by_the_child, quick, quick, quick], fork=True) as pool:
        _wait_for(started)
        pids = pool.results()
    assert pids[0] != os.getpid()
    assert pids[1] == os.getpid()
    assert len(pids) == 4


def test_without_a_fork_the_caller_does_every_job_in_order() -> None:
    with shared_jobs([functools.partial(pow, 2, n) for n in range(5)], fork=False) as pool:
        assert pool.results() == [1, 2, 4, 8, 16]


def test_a_failed_job_in_the_child_is_raised_in_the_caller(tmp_path: Path) -> None:
    started = tmp_path / "started"

    def fails_in_the_child() -> None:
        started.touch()
        raise ValueError("no such column: tps")

    with shared_jobs([fails_in_the_child], fork=True) as pool, pytest.raises(ValueError) as raised:
        _wait_for(started)
        pool.results()
    assert any("in the background worker" in note for note in raised.value.__notes__)


def test_leaving_a_pool_early_kills_and_reaps_its_child() -> None:
    with pytest.raises(KeyError), shared_jobs([_sleeps, _sleeps], fork=True) as pool:
        pid = pool._helper.pid
        raise KeyError("the parent's own work failed")
    assert pid is not None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_more_jobs_than_a_pipe_page_holds_are_refused() -> None:
    with pytest.raises(ValueError, match="at most 1024"):
        SharedJobs([_pid_and_square] * 1025, fork=False)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_ends_the_child_not_the_callers_code_in_it(signum: int) -> None:
    """The child inherits dbrig's handlers that raise a stop (SIGHUP's among them): it must
    die of the signal, not hand the parent an interrupt it never got."""
    signums = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.getsignal(s) for s in signums}
    stop_on_signals()
    try:
        with in_background(_sleeps, fork=True) as job:
            assert job.pid is not None
            time.sleep(0.2)  # the child sets its handlers first thing
            os.kill(job.pid, signum)
            with pytest.raises(RuntimeError, match=f"signal {int(signum)}"):
                job.result()
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
