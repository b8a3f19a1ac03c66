"""The interval series joined across a trial's runs (run/intervals.py): pure, on frames."""

from __future__ import annotations

import pandas as pd
import pytest

from dbrig.run.intervals import RunSeries, joined_series, measured


def intervals(*ends: float, tps: float = 100.0) -> pd.DataFrame:
    return pd.DataFrame({"t_s": list(ends), "tps": [tps] * len(ends)})


def test_one_run_is_put_on_the_windows_clock_by_its_warmup_and_start_delay() -> None:
    frame = joined_series([RunSeries(intervals(1, 2, 3, 4), launched_s=-2, start_delay_s=0.25)])
    assert frame is not None
    assert list(frame["phase"]) == ["warmup", "warmup", "measure", "measure"]
    assert list(frame["t_s"]) == pytest.approx([-0.75, 0.25, 1.25, 2.25])


def test_a_resumed_run_follows_the_first_with_a_gap_for_the_outage() -> None:
    first = RunSeries(intervals(1, 2, 3, 4), launched_s=-1, start_delay_s=0.0)
    resumed = RunSeries(intervals(1, 2, 3, tps=50), launched_s=4.6, start_delay_s=0.04)
    frame = joined_series([resumed, first])  # in launch order, whatever the order given
    assert frame is not None
    assert list(frame["t_s"]) == pytest.approx([0, 1, 2, 3, 5.64, 6.64, 7.64])
    assert list(frame["phase"]) == ["warmup"] + ["measure"] * 6
    assert list(frame["tps"][-3:]) == [50, 50, 50]
    assert frame["t_s"].is_monotonic_increasing


def test_every_run_is_joined_not_only_the_first_and_the_last() -> None:
    runs = [
        RunSeries(intervals(1, 2), launched_s=0),
        RunSeries(intervals(1, 2, tps=70), launched_s=2.5),
        RunSeries(intervals(1, 2, tps=40), launched_s=5.5),
    ]
    frame = joined_series(runs)
    assert frame is not None and len(frame) == 6
    assert list(frame["tps"]) == [100, 100, 70, 70, 40, 40]


def test_runs_that_printed_no_interval_are_left_out() -> None:
    assert joined_series([RunSeries(None, -2), RunSeries(None, 3)]) is None
    frame = joined_series([RunSeries(None, -2), RunSeries(intervals(1), 3)])
    assert frame is not None and list(frame["t_s"]) == [4]
    assert measured(None) is None
    assert list(measured(frame)["t_s"]) == [4]  # type: ignore[index]
