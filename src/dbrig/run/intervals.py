"""The workload's interval series on the measured window's clock, joined across its runs.

A trial's workload may run more than once: a fault that ends its run makes the trial
start it again for the rest of the window (docs/reliability.md). Each run prints
intervals on its own clock, which starts when the tool says so (sysbench: ``Threads
started!``), a little after its launch (run/startwatch.py). :func:`joined_series` puts
every run's intervals on one clock, 0 at the end of the warm-up: pure, from what each
run printed, where it was launched and how late its clock started.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from dbrig.sampling import MEASURE, WARMUP


@dataclass(frozen=True)
class RunSeries:
    """One run's intervals and where its clock sits on the measured window's."""

    intervals: pd.DataFrame | None  # t_s on the tool's clock (seconds since it started)
    launched_s: float  # its launch on the window's clock: -warmup for the first run
    start_delay_s: float = 0.0  # its launch until its clock started


def on_window_clock(
    intervals: pd.DataFrame, launched_s: float, start_delay_s: float = 0.0
) -> pd.DataFrame:
    """``t_s`` moved from a run's clock to the window's: ``launched_s`` and the
    ``start_delay_s`` its clock started after its launch added. The ``phase`` column goes
    by the tool's clock: an interval ending at or before the window's start by that clock
    is warm-up (the warm-up checkpoint's interval stays warm-up though it ends after 0)."""
    frame = intervals.copy()
    tool_t = frame["t_s"] + launched_s
    frame["t_s"] = (tool_t + start_delay_s).round(3)
    frame.insert(0, "phase", [WARMUP if t <= 0 else MEASURE for t in tool_t])
    return frame


def joined_series(runs: Sequence[RunSeries]) -> pd.DataFrame | None:
    """Every run's intervals on the window's clock, in launch order; None when no run
    printed any. A gap stays where no client ran (the outage of a fault)."""
    frames = [
        on_window_clock(run.intervals, run.launched_s, run.start_delay_s)
        for run in sorted(runs, key=lambda r: r.launched_s)
        if run.intervals is not None
    ]
    return pd.concat(frames, ignore_index=True) if frames else None


def measured(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """The measured window's rows of a joined series."""
    return frame[frame["phase"] == MEASURE] if frame is not None else None
