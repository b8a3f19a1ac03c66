"""Compute values in a forked child process while the caller goes on with other work.

The report draws its time-series figures this way while the parent computes the
warnings, factor charts and tables: matplotlib holds the GIL, so threads would not
help, and a fork starts in milliseconds with the run's data already in memory (no
pickling of inputs; only the result comes back, pickled through a pipe).
:func:`shared_jobs` splits a list of such jobs between the child and the caller
once the caller is free, so neither core waits for the other at the end.

The child is not a tool: it runs dbrig's own code and ends with ``os._exit``, so it
never returns into the caller's stack, flushes nothing of the parent's and runs no
``atexit`` handler. It dies with the parent (``PR_SET_PDEATHSIG``, so a SIGKILLed
dbrig leaves no child), takes the default action on Ctrl-C, SIGTERM and SIGHUP (the
parent's handlers would stop the parent's children), and leaving the ``with``
block without its result kills and reaps it.

Where a fork is not worth it or not safe, the function runs in the caller when the
result is asked for: one usable CPU, no ``os.fork``, or other threads alive (a
fork copies only the calling thread; a lock another thread holds stays locked in
the child).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import select
import signal
import struct
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")

_PR_SET_PDEATHSIG = 1
_TOKEN = struct.Struct("<I")  # a job's index in the queue pipe
# The queue is written whole before any job starts, so it must fit the smallest pipe
# Linux makes (one page, when a user is over pipe-user-pages-soft): 1024 jobs.
_QUEUE_BYTES = select.PIPE_BUF


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    """Whether a background child would run beside the caller and is safe to start."""
    return hasattr(os, "fork") and usable_cpus() > 1 and threading.active_count() == 1


class Background(Generic[T]):
    """``fn()`` running in a forked child (or, where :func:`can_fork` says no, deferred)."""

    def __init__(self, fn: Callable[[], T], *, fork: bool | None = None) -> None:
        self._fn = fn
        self.pid: int | None = None
        self._read: int | None = None
        if fork if fork is not None else can_fork():
            self._start()

    def _start(self) -> None:
        read, write = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read)
            _child(self._fn, write, parent)
        os.close(write)
        self.pid, self._read = pid, read

    def result(self) -> T:
        """The value ``fn`` returned; its exception, re-raised here, if it raised."""
        if self.pid is None:
            return self._fn()
        assert self._read is not None
        with os.fdopen(self._read, "rb") as pipe:
            self._read = None
            payload = pipe.read()
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        if not payload:
            raise RuntimeError(f"background worker died ({_status_text(status)}) before its result")
        ok, value = pickle.loads(payload)
        if not ok:
            raise value
        return value

    def cancel(self) -> None:
        """Kill and reap the child if it is still there (safe to call twice)."""
        if self._read is not None:
            os.close(self._read)
            self._read = None
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = None


@contextlib.contextmanager
def in_background(fn: Callable[[], T], *, fork: bool | None = None) -> Iterator[Background[T]]:
    """``with in_background(fn) as job: ...; job.result()``; leaving early kills the child."""
    job = Background(fn, fork=fork)
    try:
        yield job
    finally:
        job.cancel()


class SharedJobs(Generic[T]):
    """Jobs taken one at a time, in order, by a forked child and, once it asks for the
    results, by the caller: whichever is free takes the next one.

    The queue is a pipe holding every job's index, written before the fork and closed
    for writing, so a read of one token is atomic and an empty pipe reads as its end.
    Put the longest jobs first: the last one taken decides when both are done.
    """

    def __init__(self, jobs: Sequence[Callable[[], T]], *, fork: bool | None = None) -> None:
        if len(jobs) * _TOKEN.size > _QUEUE_BYTES:
            raise ValueError(f"{len(jobs)} jobs: at most {_QUEUE_BYTES // _TOKEN.size}")
        self._jobs = list(jobs)
        read, write = os.pipe()
        with os.fdopen(write, "wb") as queue:
            queue.write(b"".join(_TOKEN.pack(i) for i in range(len(self._jobs))))
        self._queue: int | None = read
        self._helper = Background(self._take_all, fork=fork)

    def results(self) -> list[T]:
        """Every job's value in the order of the jobs; the first failure is raised here."""
        mine = self._take_all()
        theirs = self._helper.result()  # without a fork, runs in the caller: nothing left
        done = {**theirs, **mine}
        return [done[index] for index in range(len(self._jobs))]

    def cancel(self) -> None:
        """Kill and reap the child if it is still there and close the queue (safe twice)."""
        self._helper.cancel()
        if self._queue is not None:
            os.close(self._queue)
            self._queue = None

    def _take_all(self) -> dict[int, T]:
        done = {}
        while (index := self._take()) is not None:
            done[index] = self._jobs[index]()
        return done

    def _take(self) -> int | None:
        assert self._queue is not None
        token = os.read(self._queue, _TOKEN.size)
        return _TOKEN.unpack(token)[0] if token else None


@contextlib.contextmanager
def shared_jobs(
    jobs: Sequence[Callable[[], T]], *, fork: bool | None = None
) -> Iterator[SharedJobs[T]]:
    """``with shared_jobs(jobs) as pool: ...; pool.results()``; leaving early kills the child."""
    pool = SharedJobs(jobs, fork=fork)
    try:
        yield pool
    finally:
        pool.cancel()


def _child(fn: Callable[[], object], write: int, parent: int) -> None:
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:  # nohup's stays ignored
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
        _die_with_parent(parent)
        try:
            payload = pickle.dumps((True, fn()))
        except BaseException as error:  # every failure goes back to the parent
            payload = _pickled_error(error)
        with os.fdopen(write, "wb") as pipe:
            pipe.write(payload)
    except BaseException:  # the parent sees an empty pipe and says so
        code = 1
    finally:
        os._exit(code)


def _pickled_error(error: BaseException) -> bytes:
    error.add_note("in the background worker:\n" + "".join(traceback.format_exception(error)))
    try:
        return pickle.dumps((False, error))
    except Exception:  # an exception that does not pickle: its text does
        return pickle.dumps((False, RuntimeError("".join(traceback.format_exception(error)))))


def _die_with_parent(parent: int) -> None:
    """SIGKILL this child when its parent dies (Linux; elsewhere a no-op)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the prctl took effect
        os._exit(1)


def _status_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"
