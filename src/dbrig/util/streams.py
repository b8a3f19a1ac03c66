"""stdout and stderr that may close under a running dbrig, without changing how it ends.

``dbrig run s.yaml 2>&1 | head -3`` closes the pipe after three lines; a dropped ssh
session hangs up the terminal. A write there then fails (EPIPE, EIO) and, unguarded,
raised out of whatever was printing: a run aborted, or left ``running``, because
nobody was reading its progress. :func:`guarded_std_streams` wraps both streams: the
first failed write marks the stream closed, says so once (the log: dbrig.log, and
the other stream if it still reads), points its descriptor at /dev/null (so the
buffer Python flushes at exit, and anything writing to the descriptor, goes nowhere
instead of failing again) and drops everything written to it from then on. The run
goes on; what it prints on stderr goes to dbrig.log instead (``commands/run.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

log = logging.getLogger(__name__)


class GuardedStream:
    """A text stream that, once a write or flush fails, drops everything written to it.

    Anything else (``encoding``, ``fileno``, ``buffer``...) is the wrapped stream's, so
    rich, click, print and logging write to it as to the stream itself.
    """

    def __init__(self, stream: TextIO, label: str) -> None:
        self.stream = stream
        self.label = label
        self.closed_because: str | None = None
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        if self.closed_because is None:
            try:
                return self.stream.write(text)
            except BlockingIOError:
                raise  # full, not closed: not ours to drop
            except OSError as exc:
                self._closed(exc)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.closed_because is None:
            try:
                self.stream.flush()
            except BlockingIOError:
                raise
            except OSError as exc:
                self._closed(exc)

    def isatty(self) -> bool:
        return self.closed_because is None and self.stream.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def _closed(self, exc: OSError) -> None:
        with self._lock:
            if self.closed_because is not None:
                return
            self.closed_because = exc.strerror or type(exc).__name__
        _write_to_devnull(self.stream)
        # After the mark: the log's own handler may write to this very stream.
        log.warning(
            "%s is closed (%s): dbrig goes on without it; %s",
            self.label,
            self.closed_because,
            _INSTEAD.get(self.label, "what it would print there is dropped"),
        )


_INSTEAD = {
    "stdout": "the results stay in the run directory",
    "stderr": "a run's progress lines go to its dbrig.log",
}


def _write_to_devnull(stream: TextIO) -> None:
    """Point the stream's descriptor at /dev/null and empty the buffer into it."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    with contextlib.suppress(OSError, ValueError):
        stream.flush()


_STD_FDS = {"stdout": 1, "stderr": 2}


@contextlib.contextmanager
def guarded_std_streams() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` guarded inside the block (a stream already guarded
    stays as it is); put back afterwards."""
    originals = {name: getattr(sys, name) for name in _STD_FDS}
    for name, stream in originals.items():
        if stream is None:
            setattr(sys, name, _closed_from_the_start(name))
        elif not isinstance(stream, GuardedStream):
            setattr(sys, name, GuardedStream(stream, name))
    try:
        yield
    finally:
        for name, stream in originals.items():
            guarded = getattr(sys, name)
            if not isinstance(guarded, GuardedStream) or guarded is stream:
                continue
            guarded.flush()  # while a failure is still caught
            setattr(sys, name, stream)
            if stream is None:
                guarded.stream.close()


def _closed_from_the_start(name: str) -> GuardedStream:
    """A stream closed before dbrig started (``dbrig run s.yaml >&-``): Python made it
    None, and the next file opened would take its descriptor; /dev/null takes it now."""
    fd = _STD_FDS[name]
    try:
        os.fstat(fd)
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)
    guarded = GuardedStream(open(os.devnull, "w"), name)  # noqa: SIM115 (closed at the end)
    guarded.closed_because = "already when dbrig started"
    return guarded


def closed_streams() -> dict[str, str]:
    """The standard streams found closed so far, and why: ``{"stderr": "Broken pipe"}``."""
    found = {}
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, GuardedStream) and stream.closed_because is not None:
            found[name] = stream.closed_because
    return found
