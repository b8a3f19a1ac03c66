"""Run directories: creating, opening, writing trials atomically, tidy results, resuming."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from dbrig.errors import ConfigError
from dbrig.ownership import MARKER
from dbrig.run.runner import pending_trials
from dbrig.scenario import plan_from_dict
from dbrig.store import (
    FORMAT_VERSION,
    TRIAL_JSON,
    ResultsLog,
    RunDir,
    SavedRun,
    TrialResult,
    find_runs,
    parquet_safe,
    results_frame,
)

NOW = dt.datetime(2026, 3, 14, 15, 9, 26)


def record(cell: str, rep: int, status: str = "ok", **extra) -> dict:
    rec = {
        "trial": f"{cell}-r{rep}",
        "cell": cell,
        "repetition": rep,
        "server": "default",
        "status": status,
        "reason": None if status == "ok" else "sysbench exited with status 1",
        "factors": {},
        "metrics": {},
        "timings": {},
    }
    rec.update(extra)
    return rec


def save_trial(run: RunDir, rec: dict) -> None:
    with run.writing_trial(rec["trial"]) as folder:
        (folder / TRIAL_JSON).write_text(json.dumps(rec))


@pytest.fixture
def run(tmp_path: Path) -> RunDir:
    created = RunDir.create(tmp_path / "runs", "quick", NOW)
    created.write_saved(SavedRun(status="running"))
    return created


# -- creating and opening --------------------------------------------------------------------


def test_create_makes_a_marked_directory(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "runs", "quick", NOW)
    assert run.path == tmp_path / "runs" / "quick-20260314-150926"
    assert (run.path / MARKER).is_file()
    assert run.trials_dir.is_dir()
    assert run.trials() == {}


def test_create_never_reuses_an_existing_name(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    (out / "quick-20260314-150926").mkdir(parents=True)  # someone else's folder
    (out / "quick-20260314-150926" / "notes.txt").write_text("mine")
    paths = [RunDir.create(out, "quick", NOW).path for _ in range(3)]
    assert [p.name for p in paths] == [
        "quick-20260314-150926-2",
        "quick-20260314-150926-3",
        "quick-20260314-150926-4",
    ]
    assert (out / "quick-20260314-150926" / "notes.txt").read_text() == "mine"
    assert not (out / "quick-20260314-150926" / MARKER).exists()


def test_open_reads_back_what_was_written(run: RunDir) -> None:
    run.update_saved(seed=3)
    opened = RunDir.open(run.path)
    assert opened.saved() == SavedRun(status="running", seed=3)
    assert json.loads((run.path / "run.json").read_text())["format_version"] == FORMAT_VERSION
    assert find_runs(run.path.parent) == [run.path]


def test_open_refuses_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        RunDir.open(tmp_path / "nothing")
    assert str(info.value) == f"{tmp_path / 'nothing'}: no such run directory"


def test_open_refuses_a_directory_without_run_json(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"run\.json: missing"):
        RunDir.open(tmp_path)


def test_open_refuses_a_newer_format_version(run: RunDir) -> None:
    (run.path / "run.json").write_text(json.dumps({"format_version": FORMAT_VERSION + 1}))
    with pytest.raises(ConfigError) as info:
        RunDir.open(run.path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(run.path / "run.json"))
    assert f"format_version {FORMAT_VERSION + 1}" in message
    assert "upgrade dbrig" in message


@pytest.mark.parametrize("content", ["{}", '{"format_version": "1"}', "{not json"])
def test_open_refuses_an_unreadable_run_json(run: RunDir, content: str) -> None:
    (run.path / "run.json").write_text(content)
    with pytest.raises(ConfigError) as info:
        RunDir.open(run.path)
    assert "\n" not in str(info.value)


# -- writing trials --------------------------------------------------------------------------


def test_writing_trial_renames_into_place_on_success(run: RunDir) -> None:
    with run.writing_trial("c000-r1") as folder:
        assert folder.name.startswith(".")  # hidden while incomplete
        (folder / "workload.out").write_text("output")
        assert not run.trial_path("c000-r1").exists()
    assert (run.trial_path("c000-r1") / "workload.out").read_text() == "output"
    assert [p.name for p in run.trials_dir.iterdir()] == ["c000-r1"]


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_writing_trial_removes_the_partial_folder_on_an_exception(
    run: RunDir, error: BaseException
) -> None:
    with pytest.raises(type(error)), run.writing_trial("c000-r1") as folder:
        (folder / "workload.out").write_text("half")
        raise error
    assert list(run.trials_dir.iterdir()) == []


def test_writing_trial_replaces_an_older_failed_trial(run: RunDir) -> None:
    save_trial(run, record("c000", 1, "failed"))
    (run.trial_path("c000-r1") / "stale.csv").write_text("old")
    save_trial(run, record("c000", 1))
    assert run.trials()["c000-r1"].status == "ok"
    assert not (run.trial_path("c000-r1") / "stale.csv").exists()


def test_writing_trial_clears_a_partial_left_by_a_crash(run: RunDir) -> None:
    leftover = run.trials_dir / ".c000-r1.partial"
    leftover.mkdir()
    (leftover / "junk").write_text("x")
    save_trial(run, record("c000", 1))
    assert sorted(p.name for p in run.trial_path("c000-r1").iterdir()) == [TRIAL_JSON]
    assert not leftover.exists()


def test_trials_ignore_hidden_partial_and_incomplete_folders(run: RunDir) -> None:
    save_trial(run, record("c001", 1))
    save_trial(run, record("c000", 2, "failed"))
    (run.trials_dir / ".c000-r1.partial").mkdir()
    (run.trials_dir / ".c000-r1.partial" / TRIAL_JSON).write_text("{}")
    (run.trials_dir / ".hidden").mkdir()
    (run.trials_dir / "c002-r1").mkdir()  # no trial.json
    trials = run.trials()
    assert list(trials) == ["c000-r2", "c001-r1"]
    assert trials["c000-r2"].status == "failed"
    assert run.trial_ids() == ["c000-r2", "c001-r1"]


# -- tidy results ----------------------------------------------------------------------------


def two_cells() -> list[TrialResult]:
    return [TrialResult.from_json(rec) for rec in two_cell_records()]


def two_cell_records() -> list[dict]:
    return [
        record(
            "c001",
            1,
            factors={"workload.sysbench.threads": 2, "server.config.x": "1G"},
            metrics={"tps": 210.5, "latency_avg_ms": 9.5},
            timings={"run_s": 10.2},
        ),
        record(
            "c000",
            2,
            "failed",
            factors={"workload.sysbench.threads": 1, "server.config.x": "128M"},
        ),
        record(
            "c000",
            1,
            factors={"workload.sysbench.threads": 1, "server.config.x": "128M"},
            metrics={"tps": 101.0, "latency_avg_ms": 9.9},
            timings={"run_s": 10.1},
        ),
    ]


def test_results_frame_has_one_row_per_trial_with_factors_and_metrics() -> None:
    frame = results_frame(two_cells())
    assert list(frame.columns) == [
        "trial",
        "cell",
        "repetition",
        "server",
        "status",
        "reason",
        "workload.sysbench.threads",
        "server.config.x",
        "tps",
        "latency_avg_ms",
        "time_run_s",
    ]
    assert list(frame["trial"]) == ["c000-r1", "c000-r2", "c001-r1"]  # sorted by cell, repetition
    assert list(frame["workload.sysbench.threads"]) == [1, 1, 2]
    assert list(frame["status"]) == ["ok", "failed", "ok"]
    assert frame.loc[1, "reason"] == "sysbench exited with status 1"
    assert pd.isna(frame.loc[1, "tps"])
    assert frame.loc[2, "time_run_s"] == 10.2


def test_results_frame_of_nothing_is_empty() -> None:
    assert results_frame([]).empty


def test_write_results_csv_and_parquet_read_back_equal(run: RunDir) -> None:
    frame = results_frame(two_cells())
    run.write_results(frame)
    pd.testing.assert_frame_equal(pd.read_parquet(run.path / "results.parquet"), frame)
    pd.testing.assert_frame_equal(pd.read_csv(run.path / "results.csv"), frame)
    pd.testing.assert_frame_equal(run.results(), frame)
    assert not list(run.path.glob(".results*"))


def test_results_without_a_csv_come_from_the_trials(run: RunDir) -> None:
    for rec in two_cell_records():
        save_trial(run, rec)
    pd.testing.assert_frame_equal(run.results(), results_frame(two_cells()))


# -- resuming --------------------------------------------------------------------------------


def test_pending_trials_are_the_saved_order_minus_the_saved_trials(run: RunDir) -> None:
    plan = plan_from_dict(
        {
            "name": "quick",
            "workload": {"sysbench": {}},
            "matrix": {"workload.sysbench.threads": [1, 2]},
            "repeat": 2,
            "seed": 9,
        }
    )
    order = ["c001-r1", "c000-r1", "c000-r2", "c001-r2"]
    run.update_saved(trials=tuple(order))
    save_trial(run, record("c001", 1))
    save_trial(run, record("c000", 2, "failed"))
    pending = pending_trials(plan, run, retry_failed=False)
    assert [t.id for t in pending] == ["c000-r1", "c001-r2"]
    assert pending[0].cell is plan.cells[0]
    retried = pending_trials(plan, run, retry_failed=True)
    assert [t.id for t in retried] == ["c000-r1", "c000-r2", "c001-r2"]


def test_results_with_a_factor_of_mixed_types_still_write_parquet(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "mixed", dt.datetime(2026, 1, 1))
    frame = pd.DataFrame(
        {"server.config.innodb_buffer_pool_size": ["128M", 1073741824], "tps": [1.0, 2.0]}
    )
    run.write_results(frame)
    back = pd.read_parquet(run.path / "results.parquet")
    assert list(back["server.config.innodb_buffer_pool_size"]) == ["128M", "1073741824"]


def test_open_refuses_a_run_json_without_format_version(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"status": "complete"}))
    with pytest.raises(ConfigError, match="no format_version: this is not a dbrig run"):
        RunDir.open(tmp_path)


def test_create_refuses_an_out_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file, expected a directory"):
        RunDir.create(tmp_path / "file", "x", dt.datetime(2026, 1, 1))


def test_a_run_held_by_another_process_is_refused(tmp_path: Path) -> None:
    import subprocess
    import sys

    run = RunDir.create(tmp_path, "locked", dt.datetime(2026, 1, 1))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); "
            "fcntl.flock(f, fcntl.LOCK_EX); f.write('4242'); f.flush(); print('held', flush=True); "
            "time.sleep(30)",
            str(run.path / ".lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        refused = pytest.raises(ConfigError, match=r"another dbrig \(pid 4242\) is running this")
        with refused, run.lock():
            pass
    finally:
        holder.kill()
        holder.wait()
    with run.lock():  # free again once the holder is gone
        assert (run.path / ".lock").read_text().strip().isdigit()


# -- results kept current trial by trial -----------------------------------------------------


def saved(run: RunDir, log: ResultsLog, rec: dict) -> TrialResult:
    """A trial saved as the runner saves it: trial.json renamed into place, then its row."""
    result = TrialResult.from_json(rec)
    with run.writing_trial(result.trial) as folder:
        run.write_trial(folder, result)
    log.add(result)
    return result


def csv_text(run: RunDir) -> str:
    return (run.path / "results.csv").read_text()


def test_each_trial_appends_one_line_and_leaves_the_rest_untouched(run: RunDir) -> None:
    log = ResultsLog.open(run)
    assert not (run.path / "results.csv").exists()  # nothing saved yet
    first, _, third = two_cell_records()
    saved(run, log, first)
    before = csv_text(run)
    saved(run, log, third)  # same columns as the first: appended
    after = csv_text(run)
    assert after.startswith(before)
    assert after[len(before) :].count("\n") == 1
    frame = pd.read_csv(run.path / "results.csv")
    assert list(frame["trial"]) == ["c001-r1", "c000-r1"]  # completion order while running
    assert list(frame["tps"]) == [210.5, 101.0]
    assert list(frame.columns) == list(pd.read_csv(io.StringIO(before)).columns)
    assert not list(run.path.glob(".results*"))


def test_a_trial_with_a_new_column_rewrites_the_header(run: RunDir) -> None:
    log = ResultsLog.open(run)
    failed = record("c000", 2, "failed", factors={"workload.sysbench.threads": 1})
    saved(run, log, failed)  # no metric at all
    assert "tps" not in pd.read_csv(run.path / "results.csv").columns
    saved(run, log, record("c000", 1, metrics={"tps": 99.5}, timings={"run_s": 3.0}))
    saved(run, log, record("c001", 1, metrics={"tps": 98.0, "qps": 2000.0}))
    frame = pd.read_csv(run.path / "results.csv")
    assert list(frame["trial"]) == ["c000-r2", "c000-r1", "c001-r1"]
    assert pd.isna(frame.loc[0, "tps"]) and frame.loc[1, "tps"] == 99.5
    assert frame.loc[2, "qps"] == 2000.0 and pd.isna(frame.loc[1, "qps"])
    assert frame.loc[1, "time_run_s"] == 3.0
    assert frame.loc[0, "reason"] == "sysbench exited with status 1"


def test_a_retried_trial_replaces_its_row(run: RunDir) -> None:
    log = ResultsLog.open(run)
    saved(run, log, record("c000", 1, "failed"))
    saved(run, log, record("c001", 1, metrics={"tps": 5.0}))
    saved(run, log, record("c000", 1, metrics={"tps": 7.0}))  # --resume --retry-failed
    frame = pd.read_csv(run.path / "results.csv")
    assert list(frame["trial"]) == ["c001-r1", "c000-r1"]
    assert list(frame["status"]) == ["ok", "ok"]
    assert list(frame["tps"]) == [5.0, 7.0]


def test_a_resumed_run_starts_from_the_trials_on_disk(run: RunDir) -> None:
    first, second, third = two_cell_records()
    save_trial(run, first)
    save_trial(run, second)  # saved, but results.csv lost (the run was killed)
    log = ResultsLog.open(run)
    pd.testing.assert_frame_equal(
        pd.read_csv(run.path / "results.csv"), results_frame(two_cells()[:2])
    )
    saved(run, log, third)
    assert len(pd.read_csv(run.path / "results.csv")) == 3


def test_finish_writes_what_every_trial_json_gives_sorted(run: RunDir) -> None:
    log = ResultsLog.open(run)
    records = [
        record("c001", 2, "failed", factors={"x": "1G"}),
        record("c001", 1, factors={"x": "1G"}, metrics={"tps": 2.0}, timings={"run_s": 1.5}),
        record("c000", 10, factors={"x": 128}, metrics={"tps": 3.0, "qps": 9.0}),
        record("c000", 2, "failed", factors={"x": 128}),
        record("c000", 1, factors={"x": 128}, metrics={"tps": 1.0}),
    ]
    for rec in records:
        saved(run, log, rec)
    saved(run, log, record("c001", 2, factors={"x": "1G"}, metrics={"tps": 4.0}))  # retried
    # A trial renamed into place just before a Ctrl-C, never added to the log:
    save_trial(run, record("c002", 1, factors={"x": 256}, metrics={"tps": 5.0}))
    log.finish()
    expected = results_frame(run.trials().values())
    assert list(expected["trial"]) == [
        "c000-r1",
        "c000-r2",
        "c000-r10",
        "c001-r1",
        "c001-r2",
        "c002-r1",
    ]
    assert csv_text(run) == expected.to_csv(index=False)  # byte for byte what it was
    parquet = pd.read_parquet(run.path / "results.parquet")
    pd.testing.assert_frame_equal(parquet, parquet_safe(expected))
    assert list(parquet["x"]) == ["128", "128", "128", "1G", "1G", "256"]  # mixed: text
    saved(run, log, record("c003", 1, factors={"x": 1}, metrics={"tps": 6.0}))  # appends again
    assert len(pd.read_csv(run.path / "results.csv")) == 7


def test_the_csv_is_readable_after_every_save(run: RunDir) -> None:
    log = ResultsLog.open(run)
    for i in range(1, 6):
        metrics = {"tps": float(i), f"only_{i % 2}": 1.0}
        saved(run, log, record("c000", i, "ok" if i % 2 else "failed", metrics=metrics))
        frame = pd.read_csv(run.path / "results.csv")
        assert len(frame) == i
        assert csv_text(run).endswith("\n")


def test_a_real_run_saved_trial_by_trial_ends_with_the_same_results_csv(tmp_path: Path) -> None:
    source = RunDir.open(
        Path(__file__).parents[1] / "fixtures" / "runs" / "v1" / "small-20261121-235548"
    )
    run = RunDir.create(tmp_path, "small", NOW)
    run.write_saved(source.saved())
    log = ResultsLog.open(run)
    results = source.trials()
    for trial_id in source.saved().trials:  # the shuffled order the run had
        with run.writing_trial(trial_id) as folder:
            run.write_trial(folder, results[trial_id])
        log.add(results[trial_id])
    log.finish()
    assert csv_text(run) == (source.path / "results.csv").read_text()


def test_a_run_stopped_before_its_first_trial_has_empty_results(run: RunDir) -> None:
    ResultsLog.open(run).finish()
    assert not (run.path / "results.csv").exists()
    assert run.results().empty


def test_an_empty_results_csv_reads_as_no_results(run: RunDir) -> None:
    (run.path / "results.csv").write_text("\n")  # what 0.1.0 wrote for such a run
    assert run.results().empty
