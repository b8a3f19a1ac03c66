"""The window's throughput with a fault, from the tool's own totals (analysis/recovery.py).

Real sysbench 1.0.20 outputs of faulted trials (tests/fixtures/sysbench/1.0.20/README.md):
a progress line missing (the window's last second, the outage) or printed twice must not
change the figure, which agrees with sysbench's own total within 0.5 %.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dbrig.analysis.recovery import ClientRun, client_run, window_rate
from dbrig.tools.sysbench import intervals_frame, parse

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysbench" / "1.0.20"
INTERVAL_S = 1.0


def captured(name: str) -> tuple[ClientRun, dict[str, float], list[float]]:
    """The client run of a captured output, its summary, and its measured lines' tps."""
    result = parse((FIXTURES / name).read_text())
    frame = intervals_frame(result)
    measured = frame[frame["measured"]]
    summary = dict(result.summary)
    rates = [float(r) for r in measured["tps"]]
    run = client_run(summary, rates, interval_s=INTERVAL_S)
    return run, summary, rates


@pytest.mark.parametrize(
    ("name", "window_s"),
    [
        ("fault_window_stop_rode_through.txt", 12.0),
        ("fault_window_stop_rode_through_2.txt", 12.0),
        ("fault_window_stop_repeated_line.txt", 12.0),
        ("fault_window_acked_writes_rode_through.txt", 6.0),
    ],
)
def test_a_client_that_rode_through_agrees_with_its_own_total(name: str, window_s: float) -> None:
    run, summary, _ = captured(name)
    own = summary["transactions"] / summary["measured_time_s"]
    assert window_rate([run], window_s) == pytest.approx(own, rel=0.005)
    # The progress lines alone miss the window's last second (and the outage's, or
    # count a repeated one twice): the figure dbrig used to compute.
    lines = run.from_intervals / window_s
    assert abs(lines / own - 1) > 0.005


def test_a_repeated_progress_line_changes_nothing() -> None:
    once, *_ = captured("fault_window_stop_rode_through.txt")
    twice, *_ = captured("fault_window_stop_repeated_line.txt")
    assert window_rate([twice], 12.0) == window_rate([once], 12.0)
    assert twice.from_intervals > once.from_intervals  # the lines did count it twice


def test_a_resumed_client_adds_its_two_runs() -> None:
    killed, killed_summary, killed_rates = captured("fault_window_kill_first.txt")
    resumed, resumed_summary, _ = captured("fault_window_kill_resumed.txt")
    assert killed_summary.get("transactions") is None  # killed: no summary, its lines stand in
    assert killed.total is None and killed.events == pytest.approx(sum(killed_rates))
    assert resumed.total == resumed_summary["transactions"] == 12376
    expected = (sum(killed_rates) + 12376) / 8.0
    assert window_rate([killed, resumed], 8.0) == pytest.approx(expected)


def test_no_run_or_no_window_has_no_rate() -> None:
    assert window_rate([], 12.0) is None
    assert window_rate([ClientRun(total=100.0)], 0.0) is None


def test_a_rate_without_a_count_falls_back_to_the_lines() -> None:
    run = client_run({}, [10.0, float("nan"), 20.0], interval_s=0.5, rate="tps")
    assert run.total is None and run.events == pytest.approx(15.0)
