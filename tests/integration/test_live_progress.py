"""The live progress line of a real sysbench trial, off a terminal (as in CI logs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dbrig.run import progress
from tests.integration.helpers import run_main, tiny_scenario, write_scenario

LIVE = re.compile(
    r"^    c000-r1 (?:warming up|running) (\d+)s \((\d+)s left\): [\d.]+ tps, p95 [\d.]+ ms$"
)


@pytest.mark.integration
@pytest.mark.serial  # two progress lines in a 4 s trial: not beside another test
def test_plain_progress_lines_show_the_tps_while_the_trial_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "PLAIN_EVERY_S", 1.0)  # 10 s in CI logs; the trial lasts 5
    data = tiny_scenario()
    data["workload"]["sysbench"].update(time=4, report_interval=1)
    scenario = write_scenario(tmp_path / "live.yaml", data)
    result = run_main(
        ["run", str(scenario), "--out", str(tmp_path / "runs"), "--no-report"], capsys
    )
    assert result.code == 0, result.err

    lines = result.err.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("[1/1] c000-r1")))
    end = lines.index(next(line for line in lines if line.startswith("    ok: ")))
    live = [m for line in lines[start + 1 : end] if (m := LIVE.match(line))]
    assert len(live) >= 2, result.err
    # One line per grid second at most (the grid itself: tests/unit/test_live_progress.py).
    # Elapsed is the poll's true time, rounded: a poll late by half a second rounds up to
    # the next line's value, so two neighbours may be equal; never three lines in a row.
    elapsed = [int(m.group(1)) for m in live]
    assert elapsed == sorted(elapsed), result.err
    assert all(elapsed[i + 2] > elapsed[i] for i in range(len(elapsed) - 2)), result.err
    # printed while sysbench ran: with time left, before the trial's end line
    assert any(int(m.group(2)) > 0 for m in live), result.err
    assert "password" not in result.err and "--mysql" not in result.err
