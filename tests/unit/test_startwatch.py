"""sysbench's clock starts at "Threads started!", after its launch: the trial notes when
that line shows up in the output and moves the intervals onto its own clock by it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dbrig.run.intervals import on_window_clock
from dbrig.run.startwatch import StartWatch, first_line_starting
from dbrig.tools.sysbench import STARTED_LINE, intervals_frame, parse

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sysbench" / "1.0.20"
CAPTURED = FIXTURES / "oltp_read_write_checkpoint_run.txt"  # warm-up 2 s, then 3 s


def test_only_a_whole_line_counts() -> None:
    assert not first_line_starting("Initializing worker threads...\n", STARTED_LINE)
    assert not first_line_starting("Threads sta", STARTED_LINE)
    assert not first_line_starting("Threads started!", STARTED_LINE)  # no newline yet
    assert first_line_starting("Initializing worker threads...\n\nThreads started!\n", STARTED_LINE)


def test_the_watch_notes_the_clock_when_the_captured_line_is_written(tmp_path: Path) -> None:
    text = CAPTURED.read_text()
    cut = text.index(STARTED_LINE) + len("Threads sta")  # a write that splits the line
    out = tmp_path / "workload.out"
    now = [10.0]
    watch = StartWatch(out, STARTED_LINE, clock=lambda: now[0], poll_s=0.005)
    watch.start()
    try:
        time.sleep(0.05)  # the file does not exist yet
        out.write_text(text[:cut])
        time.sleep(0.05)
        assert watch.seen_at is None
        now[0] = 10.25
        with out.open("a") as handle:
            handle.write(text[cut:])
        deadline = time.monotonic() + 30
        while watch.seen_at is None and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        seen = watch.stop()
    assert seen == 10.25


def test_a_run_that_never_starts_leaves_no_time(tmp_path: Path) -> None:
    out = tmp_path / "workload.out"
    out.write_text((FIXTURES / "err_conn_refused.txt").read_text())
    watch = StartWatch(out, STARTED_LINE, clock=time.monotonic, poll_s=0.005)
    watch.start()
    time.sleep(0.05)
    assert watch.stop() is None


def test_intervals_move_by_the_start_delay_and_keep_the_tools_phases() -> None:
    intervals = intervals_frame(parse(CAPTURED.read_text()))
    frame = on_window_clock(intervals, -2, start_delay_s=0.391)
    # The checkpoint's interval (sysbench's 2 s) stays warm-up though it ends after 0.
    assert list(frame["phase"]) == ["warmup", "warmup"] + ["measure"] * (len(frame) - 2)
    assert list(frame["t_s"][:4]) == pytest.approx([-0.609, 0.391, 1.391, 2.391])
    assert on_window_clock(intervals, -2)["t_s"].iloc[2] == 1.0
