"""The live progress line: the tools' latest interval from real captured output, its
text, plain lines at most every PLAIN_EVERY_S, and a display that never breaks a run."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from dbrig.commands import run as run_command
from dbrig.run import progress as progress_module
from dbrig.run.progress import (
    OutputTail,
    PlainLines,
    Progress,
    interval_text,
    live_text,
)
from dbrig.scenario import plan_from_dict
from dbrig.tools.registry import WORKLOAD_TOOLS, workload_for
from dbrig.tools.sysbench import parse

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SYSBENCH = FIXTURES / "sysbench" / "1.0.20"
RUN_FIXTURES = sorted(p for p in SYSBENCH.glob("*_run.txt") if "[ 1s ]" in p.read_text())


def tool(key: str = "sysbench", **block: object):
    plan = plan_from_dict({"name": "t", "workload": {key: block}}, seed=1)
    return workload_for(plan.scenario.workload)


def sysbench_tool(**block: object):
    return tool("sysbench", **{"time": 30, **block})


def captured(name: str) -> str:
    return (SYSBENCH / f"{name}.txt").read_text()


def up_to_line(text: str, needle: str) -> str:
    """The output as it stood when the line starting with ``needle`` had been written."""
    lines = text.splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if line.startswith(needle))
    return "".join(lines[: end + 1])


# -- the tools' latest interval, on real sysbench 1.0.20 output ------------------------------


def test_sysbench_reads_the_latest_interval_line_of_a_run_in_progress() -> None:
    so_far = up_to_line(captured("oltp_read_write_run"), "[ 5s ]")
    assert sysbench_tool().live_interval(so_far) == {
        "t_s": 5.0,
        "threads": 2.0,
        "tps": 382.14,
        "qps": 7622.78,
        "reads_per_s": 5332.95,
        "writes_per_s": 1525.56,
        "other_per_s": 764.28,
        "latency_pct_ms": 8.90,
        "errors_per_s": 0.0,
        "reconnects_per_s": 0.0,
        "percentile": 95.0,
    }


def test_a_line_still_being_written_is_left_out() -> None:
    text = captured("oltp_read_write_run")
    so_far = up_to_line(text, "[ 5s ]")
    half_of_the_next = "[ 6s ] thds: 2 tps: 35"
    assert half_of_the_next in text
    latest = sysbench_tool().live_interval(so_far + half_of_the_next)
    assert latest is not None and latest["t_s"] == 5.0 and latest["tps"] == 382.14


def test_a_tail_cut_in_the_middle_of_a_line_still_finds_the_latest_interval() -> None:
    so_far = up_to_line(captured("oltp_read_write_run"), "[ 7s ]")
    for cut in (150, 200, 333, 400):
        latest = sysbench_tool().live_interval(so_far[-cut:])
        assert latest is not None and (latest["t_s"], latest["tps"]) == (7.0, 339.97)


@pytest.mark.parametrize("path", RUN_FIXTURES, ids=lambda p: p.stem)
def test_every_interval_of_every_captured_run_is_seen_as_it_is_printed(path: Path) -> None:
    text = path.read_text()
    intervals = parse(text).intervals
    lines = text.splitlines(keepends=True)
    stamps = [
        i for i, line in enumerate(lines) if line.startswith("[") and "Checkpoint" not in line
    ]
    assert stamps, "a run fixture with interval lines"
    sysbench = sysbench_tool()
    seen = [sysbench.live_interval("".join(lines[: i + 1])) for i in stamps]
    assert all(s is not None for s in seen)
    # the --rate queue line merges into its second's interval, as in parse()
    assert sorted({s["t_s"] for s in seen if s}) == [i.t_s for i in intervals]


def test_the_interval_a_checkpoint_drained_has_no_latency() -> None:
    text = captured("oltp_read_write_checkpoint_run")
    lines = text.splitlines(keepends=True)
    after_checkpoint = next(i for i, line in enumerate(lines) if line.startswith("[ 2s ] thds"))
    latest = sysbench_tool().live_interval("".join(lines[: after_checkpoint + 1]))
    assert latest is not None and latest["tps"] == 1028.14
    assert "latency_pct_ms" not in latest  # printed as 0.00: unknown, not zero
    next_one = sysbench_tool().live_interval("".join(lines[: after_checkpoint + 2]))
    assert next_one is not None and next_one["latency_pct_ms"] == 3.82


def test_percentile_off_gives_no_latency() -> None:
    so_far = up_to_line(captured("oltp_point_select_percentile_off_run"), "[ 1s ]")
    latest = sysbench_tool().live_interval(so_far)
    assert latest is not None and latest["tps"] > 0
    assert "latency_pct_ms" not in latest and "percentile" not in latest


def test_the_p99_label_is_read_from_the_line() -> None:
    so_far = up_to_line(captured("oltp_point_select_rate_p99_run"), "[ 1s ]")
    latest = sysbench_tool().live_interval(so_far)
    assert latest is not None and latest["percentile"] == 99.0


@pytest.mark.parametrize("name", ["oltp_read_write_prepare", "err_conn_refused", "version"])
def test_output_without_an_interval_line_has_none(name: str) -> None:
    assert sysbench_tool().live_interval(captured(name)) is None
    assert sysbench_tool().live_interval("") is None
    # the banner and the start, before the first interval line
    started = up_to_line(captured("oltp_read_write_run"), "Threads started!")
    assert sysbench_tool().live_interval(started) is None


@pytest.mark.parametrize("key", sorted(WORKLOAD_TOOLS))
def test_every_workload_tool_answers_for_an_empty_output(key: str) -> None:
    blocks = {"sysbench": {"time": 10}, "mysqlslap": {"number_of_queries": 100}}
    assert tool(key, **blocks.get(key, {})).live_interval("") is None


def test_mysqlslap_prints_no_intervals() -> None:
    text = (FIXTURES / "mysqlslap" / "mariadb-slap-1.0" / "slap_engine_option_text.txt").read_text()
    assert tool("mysqlslap", number_of_queries=100).live_interval(text) is None


# -- the text ---------------------------------------------------------------------------------


def test_the_live_text_says_trial_time_left_rate_latency_and_run_eta() -> None:
    latest = sysbench_tool().live_interval(up_to_line(captured("oltp_read_write_run"), "[ 5s ]"))
    text = live_text(
        "c001-r2", elapsed_s=65.4, expected_s=1800, warmup=10, interval=latest, eta_s=15000
    )
    assert text == "    c001-r2 running 1m05s (28m55s left): 382.1 tps, p95 8.90 ms; run ETA 4h10m"


def test_the_live_text_during_warmup_before_any_interval_and_before_any_eta() -> None:
    text = live_text("c000-r1", elapsed_s=3.2, expected_s=35, warmup=5, interval=None, eta_s=None)
    assert text == "    c000-r1 warming up 3s (32s left)"


def test_a_fixed_work_tool_shows_elapsed_only_and_an_overrun_shows_nothing_left() -> None:
    text = live_text("c000-r1", elapsed_s=42, expected_s=None, warmup=0, interval=None, eta_s=90)
    assert text == "    c000-r1 running 42s; run ETA 1m30s"
    late = live_text("c000-r1", elapsed_s=31, expected_s=30, warmup=0, interval=None, eta_s=None)
    assert late == "    c000-r1 running 31s (0s left)"


def test_interval_text_picks_the_tools_rate_and_its_percentile() -> None:
    cpu = sysbench_tool().live_interval(up_to_line(captured("cpu_run"), "[ 2s ]"))
    assert cpu is not None and interval_text(cpu) == "2688.7 events/s, p95 0.83 ms"
    assert interval_text({"tps": 812.34, "latency_pct_ms": 9.8}) == "812.3 tps, latency 9.80 ms"
    assert interval_text({"t_s": 3.0}) == ""


# -- following a running trial ----------------------------------------------------------------


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class RecordingLine:
    def __init__(self, every_s: float, fail: bool = False) -> None:
        self.every_s = every_s
        self.shown: list[str] = []
        self.closed = 0
        self.fail = fail

    def show(self, text: str) -> None:
        if self.fail:
            raise RuntimeError("terminal gone")
        self.shown.append(text)

    def close(self) -> None:
        self.closed += 1


def a_trial():
    plan = plan_from_dict({"name": "t", "workload": {"sysbench": {"time": 30}}}, seed=1)
    return plan.trials[0]


def follow_a_run(
    progress: Progress, clock: FakeClock, out: Path, seconds: float, tool_=None
) -> None:
    """Poll every 0.25 s (the trial's watch loop) while sysbench prints a line a second."""
    lines = captured("oltp_rw_baseline_1").splitlines(keepends=True)
    stamps = iter([line for line in lines if line.startswith("[ ")])
    out.write_text("".join(lines[:12]))
    with progress.following(a_trial(), tool_ or sysbench_tool(), 0, out) as poll:
        for step in range(1, int(seconds * 4) + 1):
            clock.now += 0.25
            if step % 4 == 0:
                with out.open("a") as handle:
                    handle.write(next(stamps, ""))
            poll()


def test_plain_lines_come_at_most_every_plain_every_s(tmp_path: Path) -> None:
    clock, emitted = FakeClock(), []
    progress = Progress(1, emitted.append, clock=clock)
    follow_a_run(progress, clock, tmp_path / "workload.out", seconds=35)
    assert [line.split(" (")[0] for line in emitted] == [
        "    c000-r1 running 10s",
        "    c000-r1 running 20s",
        "    c000-r1 running 30s",
    ]
    assert all(" tps, p95 " in line for line in emitted)
    assert "(20s left)" in emitted[0] and "(0s left)" in emitted[2]


def test_a_late_poll_shows_its_true_time_and_adds_no_line(tmp_path: Path) -> None:
    """On a busy machine the watch loop polls late: the line says when it was shown
    (1.6 s rounds to 2 s, like the next one at 2.1 s), one line per grid second."""
    clock, emitted = FakeClock(), []
    progress = Progress(
        1, emitted.append, clock=clock, live_line=lambda: PlainLines(emitted.append, every_s=1.0)
    )
    (tmp_path / "o").write_text("")
    with progress.following(a_trial(), sysbench_tool(), 0, tmp_path / "o") as poll:
        for now in (0.5, 1.6, 1.9, 2.1, 2.4, 2.9, 3.0):
            clock.now = 1000.0 + now
            poll()
    assert [line.split(" (")[0] for line in emitted] == [
        "    c000-r1 running 2s",
        "    c000-r1 running 2s",
        "    c000-r1 running 3s",
    ]


def test_the_plain_interval_is_a_constant_that_can_be_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress_module, "PLAIN_EVERY_S", 4.0)
    clock, emitted = FakeClock(), []
    follow_a_run(Progress(1, emitted.append, clock=clock), clock, tmp_path / "o", seconds=13)
    assert len(emitted) == 3
    assert PlainLines(emitted.append, every_s=2.0).every_s == 2.0


def test_a_terminal_line_is_redrawn_every_second_and_closed_at_the_end(tmp_path: Path) -> None:
    clock, line = FakeClock(), RecordingLine(every_s=1.0)
    progress = Progress(1, print, clock=clock, live_line=lambda: line)
    follow_a_run(progress, clock, tmp_path / "workload.out", seconds=5)
    assert [text.split(" (")[0] for text in line.shown] == [
        f"    c000-r1 running {s}s" for s in range(1, 6)
    ]
    # the tail follows the file as it grows: the latest line printed, second by second
    tps = [text.split(": ")[1].split(" tps")[0] for text in line.shown[1:]]
    assert len(set(tps)) == len(tps)
    assert line.closed == 1


def test_the_run_eta_counts_from_the_trials_done_and_the_current_ones_time() -> None:
    clock = FakeClock()
    progress = Progress(3, print, clock=clock)
    trial = a_trial()
    progress.starting(trial, "x")
    assert progress.eta_s() is None
    clock.now += 60
    progress.finished(trial, "ok", "done")
    progress.starting(trial, "x")
    assert progress.eta_s() == 120
    clock.now += 45
    assert progress.eta_s() == 75
    clock.now += 1000
    assert progress.eta_s() == 0


def test_a_failing_display_is_logged_closed_and_the_trial_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock, line = FakeClock(), RecordingLine(every_s=1.0, fail=True)
    progress = Progress(1, print, clock=clock, live_line=lambda: line)
    follow_a_run(progress, clock, tmp_path / "workload.out", seconds=5)
    assert line.closed == 1
    assert caplog.text.count("the live progress line failed (RuntimeError: terminal gone)") == 1


def test_a_line_that_cannot_open_leaves_the_trial_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse() -> RecordingLine:
        raise OSError("no terminal")

    clock = FakeClock()
    follow_a_run(Progress(1, print, clock=clock, live_line=refuse), clock, tmp_path / "o", 3)
    assert "opening the live progress line failed" in caplog.text


class BrokenParser:
    """A tool whose interval parser raises: elapsed and time left still show."""

    key = "broken"

    def expected_seconds(self, warmup: int) -> float:
        return 30.0

    def live_interval(self, text_tail: str) -> dict[str, float] | None:
        raise ValueError("unexpected line")


def test_a_failing_interval_parser_still_shows_time_and_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock, line = FakeClock(), RecordingLine(every_s=1.0)
    progress = Progress(1, print, clock=clock, live_line=lambda: line)
    follow_a_run(progress, clock, tmp_path / "o", seconds=3, tool_=BrokenParser())
    assert line.shown == [f"    c000-r1 running {s}s ({30 - s}s left)" for s in (1, 2, 3)]
    assert caplog.text.count("broken: reading its latest interval failed (ValueError") == 1


def test_ctrl_c_closes_the_line_and_goes_through(tmp_path: Path) -> None:
    clock, line = FakeClock(), RecordingLine(every_s=1.0)
    progress = Progress(1, print, clock=clock, live_line=lambda: line)
    with (
        pytest.raises(KeyboardInterrupt),
        progress.following(a_trial(), sysbench_tool(), 0, tmp_path / "o"),
    ):
        raise KeyboardInterrupt
    assert line.closed == 1


def test_no_password_or_command_line_in_the_live_line(tmp_path: Path) -> None:
    clock, emitted = FakeClock(), []
    follow_a_run(Progress(1, emitted.append, clock=clock), clock, tmp_path / "o", seconds=12)
    assert emitted and not any("password" in e or "sysbench" in e or "--" in e for e in emitted)


# -- the output tail --------------------------------------------------------------------------


def test_the_tail_reads_what_was_added_and_keeps_the_end(tmp_path: Path) -> None:
    path = tmp_path / "out"
    tail = OutputTail(path, keep=10)
    assert tail.read() == ""
    path.write_text("abc\n")
    assert tail.read() == "abc\n"
    with path.open("a") as handle:
        handle.write("defgh\n")
    assert tail.read() == "abc\ndefgh\n"
    with path.open("a") as handle:
        handle.write("0123456789ABCDEF")
    assert tail.read() == "6789ABCDEF"
    assert tail.read() == "6789ABCDEF"


def test_the_tail_follows_the_workload_started_again_after_a_fault(tmp_path: Path) -> None:
    outputs = [tmp_path / "workload.out"]
    outputs[0].write_text("[ 1s ] first run\n")
    tail = OutputTail(lambda: outputs[-1])
    assert tail.read() == "[ 1s ] first run\n"
    outputs.append(tmp_path / "workload-2.out")
    outputs[-1].write_text("[ 1s ] again\n")
    assert tail.read() == "[ 1s ] again\n"


# -- the terminal's live line -----------------------------------------------------------------


def test_the_terminal_line_draws_in_place_and_leaves_nothing_behind() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=60)
    line = run_command._TerminalLine(console)
    line.show("    c000-r1 running 3s (27s left): 812.3 tps, p95 9.84 ms; run ETA 1m")
    line.show("    c000-r1 running 4s (26s left): 800.0 tps, p95 9.90 ms; run ETA 59s")
    line.close()
    drawn = buffer.getvalue()
    assert "running 3s (27s left): 812.3 tps, p95 9.84 ms; …" in drawn  # cut to the width
    assert "\r\x1b[2K    c000-r1 running 4s" in drawn  # redrawn over the same line
    assert drawn.count("\n") == 1 and drawn.endswith("\x1b[1A\x1b[2K")  # erased when closed


def test_off_a_terminal_the_run_prints_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_command, "err_console", lambda: Console(file=io.StringIO()))
    assert run_command._terminal_live_line() is None
    terminal = Console(file=io.StringIO(), force_terminal=True)
    monkeypatch.setattr(run_command, "err_console", lambda: terminal)
    factory = run_command._terminal_live_line()
    assert factory is not None
    line = factory()
    assert line.every_s == progress_module.TERMINAL_EVERY_S
    line.close()


def test_late_polls_keep_to_the_grid_and_skip_what_they_missed(tmp_path: Path) -> None:
    clock, emitted = FakeClock(), []
    progress = Progress(1, emitted.append, clock=clock)
    with progress.following(a_trial(), sysbench_tool(), 0, tmp_path / "o") as poll:
        for late in (10.3, 20.2, 41.0, 44.0, 50.0):
            clock.now = 1000.0 + late
            poll()
    assert [line.split(" (")[0] for line in emitted] == [
        f"    c000-r1 running {s}s" for s in (10, 20, 41, 50)
    ]
