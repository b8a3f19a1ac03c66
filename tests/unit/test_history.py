"""dbrig history on a synthetic series of saved runs with a step."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dbrig.analysis import history
from dbrig.commands.history import history_command, load_scenario_runs
from dbrig.errors import ConfigError
from tests.helpers.cli import invoke as invoke_command

THREADS = "workload.sysbench.threads"
# Repetition noise of about 1 %, the same pattern in every run.
NOISE = (1.0, 0.99, 1.01)
# threads=1 drops 15 % from the 6th run on; threads=2 stays flat (with run-to-run noise).
LEVELS_1 = (500, 505, 495, 502, 498, 425, 428, 423, 426, 424)
LEVELS_2 = (900, 905, 895, 902, 898, 901, 899, 904, 896, 900)


def write_run(
    root: Path,
    name: str,
    created_at: str,
    levels: dict[int, float],
    *,
    scenario: str = "hist",
    status: str = "complete",
    metric: str = "tps",
) -> Path:
    """A minimal run directory: run.json and results.csv, one cell per threads value."""
    folder = root / name
    folder.mkdir(parents=True)
    cells = [
        {"cell": f"c{i:03d}", "server": "default", "factors": {THREADS: t}}
        for i, t in enumerate(levels)
    ]
    rows = [
        {
            "trial": f"{cell['cell']}-r{r + 1}",
            "cell": cell["cell"],
            "repetition": r + 1,
            "server": "default",
            "status": "ok",
            "reason": None,
            THREADS: threads,
            metric: level * NOISE[r],
        }
        for cell, (threads, level) in zip(cells, levels.items(), strict=True)
        for r in range(len(NOISE))
    ]
    meta = {
        "format_version": 1,
        "status": status,
        "created_at": created_at,
        "scenario": {"name": scenario},
        "factors": [THREADS],
        "factor_labels": {THREADS: "threads"},
        "cells": cells,
    }
    (folder / "run.json").write_text(json.dumps(meta))
    pd.DataFrame(rows).to_csv(folder / "results.csv", index=False)
    return folder


def write_series(root: Path, first: tuple = LEVELS_1, second: tuple = LEVELS_2) -> None:
    # Directory names deliberately out of time order: created_at decides.
    for i, (a, b) in enumerate(zip(first, second, strict=True)):
        name = f"hist-{len(first) - 1 - i:02d}"
        write_run(root, name, f"2026-11-{10 + i:02d}T12:00:00", {1: a, 2: b})


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    write_series(tmp_path)
    return tmp_path


def build(runs_dir: Path, **kwargs) -> history.History:
    name, runs = load_scenario_runs(runs_dir, "hist")
    return history.build_history(runs, kwargs.pop("metric", "tps"), scenario=name, **kwargs)


def invoke(args: list[str]) -> tuple[int, str]:
    return invoke_command(history_command, args)


# --------------------------------------------------------------------------- building


def test_runs_are_ordered_by_created_at(runs_dir):
    found = build(runs_dir)
    assert found.runs == tuple(f"hist-{9 - i:02d}" for i in range(10))
    assert found.created_at[0] == "2026-11-10T12:00:00"


def test_points_are_per_run_means_with_intervals(runs_dir):
    found = build(runs_dir)
    one, two = found.series
    assert (one.label, two.label) == ("threads=1", "threads=2")
    first = one.points[0]
    assert first.n == 3
    assert first.mean == pytest.approx(500)
    assert first.ci_low < 500 < first.ci_high


def test_step_is_found_where_the_level_drops(runs_dir):
    found = build(runs_dir)
    one, two = found.series
    (step,) = one.steps
    assert step.index == 5
    assert step.delta_pct == pytest.approx(-15, abs=0.5)
    assert found.is_bad(step) is True
    assert two.steps == ()
    assert found.current_regressions() == [(one, step)]
    assert "step at run 6 (hist-04)" in history.step_line(found, one, step)


def test_a_recovered_step_is_not_a_current_regression(tmp_path):
    # Binary segmentation needs the recovery to a new level: a dip back to exactly the old
    # level (500, 425, 500) makes no first split significant on its own.
    write_series(tmp_path, (*LEVELS_1, 471, 468, 470, 472, 469), (*LEVELS_2, *LEVELS_2[:5]))
    found = build(tmp_path)
    one = found.series[0]
    assert len(one.steps) == 2
    assert found.current_regressions() == []


def test_lower_is_better_metric_step_up_is_bad(tmp_path):
    for i, level in enumerate((2.0, 2.02, 1.98, 2.01, 1.99, 2.6, 2.62, 2.58, 2.61)):
        write_run(
            tmp_path, f"r{i}", f"2026-01-{i + 1:02d}T00:00:00", {1: level}, metric="latency_avg_ms"
        )
    found = build(tmp_path, metric="latency_avg_ms")
    (step,) = found.series[0].steps
    assert step.after_mean > step.before_mean
    assert found.is_bad(step) is True


def test_cell_filter(runs_dir):
    found = build(runs_dir, cells={"threads": "2"})
    assert [s.label for s in found.series] == ["threads=2"]
    assert build(runs_dir, cells={THREADS: "2.0"}).series[0].label == "threads=2"


def test_cell_filter_errors(runs_dir):
    with pytest.raises(ConfigError, match="no cell of hist matches"):
        build(runs_dir, cells={"threads": "64"})
    with pytest.raises(ConfigError, match="no such factor"):
        build(runs_dir, cells={"rate": "1"})


def test_a_run_without_the_cell_is_a_gap(tmp_path):
    write_series(tmp_path)
    write_run(tmp_path, "hist-late", "2026-11-30T00:00:00", {2: 900})
    found = build(tmp_path)
    one = found.series[0]
    assert one.points[-1].n == 0 and one.points[-1].mean is None
    assert one.steps[0].index == 5
    assert found.current_regressions() == []  # the newest run has no value for threads=1


def test_unknown_metric(runs_dir):
    with pytest.raises(ConfigError, match="--metric qps: no such column"):
        build(runs_dir, metric="qps")


def test_parse_cell_filters():
    assert history.parse_cell_filters(["threads=2", " cpu = 0 "]) == {"threads": "2", "cpu": "0"}
    with pytest.raises(ConfigError, match="expected FACTOR=VALUE"):
        history.parse_cell_filters(["threads"])


# --------------------------------------------------------------------------- loading


def test_incomplete_and_other_scenarios_are_skipped(runs_dir, capsys):
    write_run(runs_dir, "hist-running", "2026-12-01T00:00:00", {1: 1.0}, status="running")
    write_run(runs_dir, "other-1", "2026-12-01T00:00:00", {1: 1.0}, scenario="other")
    name, runs = load_scenario_runs(runs_dir, "hist")
    assert name == "hist" and len(runs) == 10
    assert "skipped" in capsys.readouterr().err


def test_scenario_is_required_when_several(runs_dir):
    write_run(runs_dir, "other-1", "2026-12-01T00:00:00", {1: 1.0}, scenario="other")
    with pytest.raises(
        ConfigError, match=r"name the scenario with --scenario \(found: hist, other\)"
    ):
        load_scenario_runs(runs_dir, None)
    assert load_scenario_runs(runs_dir, "other")[0] == "other"


def test_unknown_scenario_and_missing_directory(tmp_path):
    with pytest.raises(ConfigError, match="no such directory"):
        load_scenario_runs(tmp_path / "nope", "hist")
    write_series(tmp_path)
    with pytest.raises(ConfigError, match="no runs of scenario x"):
        load_scenario_runs(tmp_path, "x")


# --------------------------------------------------------------------------- command


def test_command_prints_table_and_flags_the_step(runs_dir):
    code, out = invoke([str(runs_dir), "--scenario", "hist", "--metric", "tps"])
    assert code == 0
    assert "hist: tps per run" in out
    assert "▼ 425.0" in out
    assert "step: threads=1: step at run 6 (hist-04): 500 -> 425.2 (-15.0 %), worse" in out


def test_command_writes_png(runs_dir, tmp_path):
    png = tmp_path / "history.png"
    code, _ = invoke([str(runs_dir), "--png", str(png)])
    assert code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fail_on_step_exits_1_after_a_bad_step(runs_dir):
    assert invoke([str(runs_dir), "--fail-on-step"])[0] == 1
    assert invoke([str(runs_dir), "--fail-on-step", "--cell", "threads=2"])[0] == 0


def test_fail_on_step_with_no_step_exits_0(tmp_path):
    write_series(tmp_path, LEVELS_2, LEVELS_2)
    code, out = invoke([str(tmp_path), "--fail-on-step"])
    assert code == 0
    assert "no step changes of 5 % or more" in out


def test_command_bad_input_exits_2(runs_dir, tmp_path):
    assert invoke([str(runs_dir), "--metric", "nope"])[0] == 2
    assert invoke([str(runs_dir), "--cell", "threads"])[0] == 2
    assert invoke([str(tmp_path / "missing")])[0] == 2
    assert invoke([str(runs_dir), "--threshold", "abc"])[0] == 2
    code, message = invoke([str(runs_dir), "--png", str(tmp_path / "no" / "dir.png")])
    assert code == 2 and "--png" in message


def test_fail_on_step_needs_a_known_direction(tmp_path):
    for i in range(6):
        write_run(
            tmp_path, f"r{i}", f"2026-01-{i + 1:02d}T00:00:00", {1: 50.0}, metric="cpu_busy_pct"
        )
    code, message = invoke([str(tmp_path), "--metric", "cpu_busy_pct", "--fail-on-step"])
    assert code == 2 and "direction" in message
