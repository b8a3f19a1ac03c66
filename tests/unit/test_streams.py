"""stdout and stderr closed under dbrig (a pipe's reader gone, a terminal hung up): what
would have been written is dropped, said once, and never changes how dbrig ends."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest
from rich.console import Console

from dbrig.cli import main
from dbrig.commands.run import _TerminalLine
from dbrig.util.streams import GuardedStream


@pytest.fixture
def dead_pipe() -> Iterator[TextIO]:
    """A text stream writing into a pipe whose reader is gone, as after ``| head -3``."""
    reader, writer = os.pipe()
    os.close(reader)
    stream = open(writer, "w")  # noqa: SIM115 (closed below)
    yield stream
    with contextlib.suppress(OSError):  # a buffer left unflushed into the broken pipe
        stream.close()


def test_a_dead_stream_is_said_once_and_then_written_to_nowhere(
    dead_pipe: TextIO, caplog: pytest.LogCaptureFixture
) -> None:
    guarded = GuardedStream(dead_pipe, "stderr")
    with caplog.at_level(logging.INFO):
        assert guarded.write("dbrig: 3 trials\n") == len("dbrig: 3 trials\n")
        guarded.flush()
        guarded.write("[1/3] c000-r1\n")
        guarded.flush()
    assert guarded.closed_because is not None and "pipe" in guarded.closed_because.lower()
    said = [r.getMessage() for r in caplog.records if "stderr" in r.getMessage()]
    assert len(said) == 1 and "dbrig.log" in said[0], said
    # The descriptor now writes to /dev/null: a buffer flushed at exit cannot fail again.
    assert os.fstat(dead_pipe.fileno()).st_rdev == os.stat(os.devnull).st_rdev
    assert not guarded.isatty()


def test_the_live_line_and_a_rich_console_on_a_dead_stream_do_not_raise(
    dead_pipe: TextIO,
) -> None:
    console = Console(file=GuardedStream(dead_pipe, "stderr"), force_terminal=True)
    line = _TerminalLine(console)
    line.show("    c000-r1 running 1s (1s left)")
    line.show("    c000-r1 running 2s (0s left)")
    line.close()
    console.print("dbrig: error: interrupted")


def test_an_error_said_on_a_dead_stderr_keeps_its_exit_code(
    dead_pipe: TextIO, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "stderr", dead_pipe)
    with pytest.raises(SystemExit) as exited:
        main(["cache", "list", "--snapshot-cache", str(tmp_path / "nope")])
    assert exited.value.code == 2
    assert sys.stderr is dead_pipe  # put back as it was


def test_a_process_whose_sigpipe_kills_still_ends_with_its_own_code(tmp_path: Path) -> None:
    """dbrig's main ignores SIGPIPE itself, so a write to a closed pipe is an error it
    handles, whatever the process it runs in had set."""
    script = (
        "import signal, sys\n"
        "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"
        "from dbrig.cli import main\n"
        f"main(['cache', 'list', '--snapshot-cache', {str(tmp_path / 'nope')!r}])\n"
    )
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], stdout=writer, stderr=writer, timeout=60
        )
    finally:
        os.close(writer)
    assert done.returncode == 2, f"ended by signal {-done.returncode}" * (done.returncode < 0)
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN  # this process: untouched


def test_streams_closed_before_dbrig_started_keep_its_exit_code(tmp_path: Path) -> None:
    """``dbrig ... >&- 2>&-``: Python starts with no sys.stdout or sys.stderr at all."""
    dbrig = Path(sys.executable).with_name("dbrig")
    missing = tmp_path / "nope"
    done = subprocess.run(
        ["bash", "-c", f"{dbrig} cache list --snapshot-cache {missing} >&- 2>&-"], timeout=60
    )
    assert done.returncode == 2
