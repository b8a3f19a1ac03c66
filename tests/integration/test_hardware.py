"""sysbench's hardware tests and a Lua script through ``dbrig run``: real sysbench, no server."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dbrig import ownership, proc
from tests.helpers.wait import wait_for
from tests.integration.helpers import (
    TINY_CONFIG,
    assert_no_partial_trials,
    killed_at_end,
    only_run_dir,
    read_json,
    run_main,
    spawn_dbrig,
    trial_dirs,
    write_scenario,
)

LUA = Path(__file__).parent.parent / "fixtures" / "sysbench" / "lua" / "counting.lua"
TEST = "workload.sysbench.test"


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every argv dbrig starts (the real proc.spawn still starts it)."""
    seen: list[list[str]] = []
    real = proc.spawn

    def recording(argv: Any, *args: Any, **kwargs: Any) -> proc.Child:
        seen.append([str(a) for a in argv])
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(proc, "spawn", recording)
    return seen


def run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scenario: dict, code: int = 0
) -> tuple[Path, Any]:
    path = write_scenario(tmp_path / "hw.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == code, result.err
    return only_run_dir(tmp_path / "runs"), result


def assert_no_server(run_dir: Path, spawned: list[list[str]]) -> None:
    assert not any("mariadbd" in Path(argv[0]).name for argv in spawned), spawned
    assert not any("install_db" in " ".join(argv) for argv in spawned)
    assert not (run_dir / "servers").exists()
    meta = read_json(run_dir / "run.json")
    assert not meta.get("servers")
    assert meta["environment"]["server"].startswith("no server: sysbench")
    folders = trial_dirs(run_dir)
    assert not any((folder / "status.csv").exists() for folder in folders)  # no SHOW STATUS
    # The host sampler still runs (a run shorter than one sample interval has no rows).
    assert any((folder / "cpu.csv").exists() for folder in folders)


def assert_work_folders_removed(where: Path) -> None:
    assert not list(where.glob(".dbrig-work-*"))


@pytest.mark.integration
def test_every_hardware_test_runs_with_no_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spawned: list[list[str]]
) -> None:
    scenario = {
        "name": "hw",
        "workload": {"sysbench": {"test": "cpu", "time": 1, "threads": 1}},
        "matrix": [
            {TEST: ["cpu"], "workload.sysbench.cpu_max_prime": [2000]},
            {TEST: ["memory"], "workload.sysbench.memory_total_size": ["64M"]},
            {TEST: ["threads"], "workload.sysbench.thread_locks": [2]},
            {TEST: ["mutex"], "workload.sysbench.mutex_locks": [1000]},
            {
                TEST: ["fileio"],
                "workload.sysbench.file_test_mode": ["rndrw"],
                "workload.sysbench.file_total_size": ["4M"],
                "workload.sysbench.file_num": [2],
            },
        ],
        "sampling": {"interval": 0.5},
        "order": "sequential",
    }
    run_dir, result = run(tmp_path, capsys, scenario)
    assert_no_server(run_dir, spawned)
    results = pd.read_csv(run_dir / "results.csv").set_index(TEST)
    assert set(results["status"]) == {"ok"}
    assert results.loc["cpu", "events_per_s"] > 0
    assert results.loc["memory", "mib_per_s"] > 0
    assert results.loc["threads", "events_per_s"] > 0
    assert results.loc["mutex", "latency_avg_ms"] > 0
    assert (
        results.loc["fileio", "read_mib_per_s"] >= 0 and results.loc["fileio", "events_per_s"] > 0
    )
    assert "MiB/s" in result.out and "events/s" in result.out
    # Each cell's own test, not the base block's (it said "sysbench cpu" for every cell).
    tests = "sysbench cpu, sysbench memory, sysbench threads, sysbench mutex, sysbench fileio"
    assert f"no server: {tests} need none" in (run_dir / "report.html").read_text()
    assert_work_folders_removed(tmp_path / "runs")


@pytest.mark.integration
def test_fileio_prepares_once_for_two_cells_and_cleans_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spawned: list[list[str]]
) -> None:
    files = tmp_path / "disk"
    files.mkdir()
    scenario = {
        "name": "fio",
        "workload": {
            "sysbench": {
                "test": "fileio",
                "file_total_size": "4M",
                "file_num": 2,
                "file_test_mode": "rndrd",
                "time": 1,
                "directory": str(files),
            }
        },
        "matrix": {"workload.sysbench.file_block_size": ["4K", "16K"]},
        "repeat": 2,
    }
    run_dir, _ = run(tmp_path, capsys, scenario)
    assert_no_server(run_dir, spawned)
    prepares = [argv for argv in spawned if argv[1:3] == ["fileio", "prepare"]]
    assert len(prepares) == 1
    timings = [read_json(f / "trial.json")["timings"] for f in trial_dirs(run_dir)]
    assert sum("prepare_s" in t for t in timings) == 1
    assert set(pd.read_csv(run_dir / "results.csv")["status"]) == {"ok"}
    assert list(files.iterdir()) == []  # the files and dbrig's folder are gone
    assert_no_partial_trials(run_dir)


@pytest.mark.integration
def test_a_lua_script_runs_its_prepare_and_a_lua_error_fails_its_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spawned: list[list[str]]
) -> None:
    bench = tmp_path / "bench"
    bench.mkdir()
    shutil.copy(LUA, bench / "counting.lua")
    scenario = {
        "name": "lua",
        "workload": {
            "sysbench": {
                "script": "bench/counting.lua",
                "needs_server": False,
                "time": 1,
                "options": {"rounds": 100},
            }
        },
        "matrix": {"workload.sysbench.options.fail": [False, True]},
        "order": "sequential",
    }
    run_dir, _ = run(tmp_path, capsys, scenario, code=1)  # one trial failed, on purpose
    assert_no_server(run_dir, spawned)
    results = pd.read_csv(run_dir / "results.csv").set_index("workload.sysbench.options.fail")
    assert results.loc[False, "status"] == "ok" and results.loc[False, "events_per_s"] > 0
    assert results.loc[True, "status"] == "failed"
    assert results.loc[True, "reason"].endswith(
        "counting.lua:26: attempt to index local 'missing' (a nil value)"
    )
    meta = read_json(run_dir / "run.json")
    [(name, kept)] = meta["environment"]["inputs"].items()
    assert (run_dir / "inputs" / name / "counting.lua").read_bytes() == LUA.read_bytes()
    assert kept["source"] == str(bench.resolve()) and kept["main"] == "counting.lua"
    assert len(kept["sha256"]) == 64
    copy = run_dir / "inputs" / name
    assert kept["search_path"] == {"LUA_PATH": f"{copy}/?.lua;{copy}/?/init.lua;;"}
    workload = read_json(trial_dirs(run_dir)[0] / "trial.json")["commands"]["workload"]
    assert str(copy / "counting.lua") in workload  # sysbench ran the run's copy
    assert_work_folders_removed(tmp_path / "runs")


@pytest.mark.integration
def test_a_lua_script_that_asks_for_a_driver_runs_against_the_managed_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(LUA.with_name("select_one.lua"), tmp_path / "select_one.lua")
    scenario = {
        "name": "lua-db",
        "server": {"config": TINY_CONFIG},
        "workload": {"sysbench": {"script": "select_one.lua", "time": 1, "threads": 2}},
    }
    run_dir, _ = run(tmp_path, capsys, scenario)
    results = pd.read_csv(run_dir / "results.csv")
    assert list(results["status"]) == ["ok"]
    assert results.loc[0, "queries_read"] > 0  # sysbench counted the SELECTs it sent
    meta = read_json(run_dir / "run.json")
    assert "server" not in meta["environment"] and meta["servers"]["default"]["version"]


@pytest.mark.integration
def test_sigterm_while_fileio_works_removes_its_files(tmp_path: Path) -> None:
    """Stopped while the files are prepared or used (whichever the signal meets), the
    work folder goes; a folder left by a killed run goes with the next run."""
    out = tmp_path / "runs"
    abandoned = out / ".dbrig-work-999999999"
    ownership.mark_owned(abandoned, "work directory")  # as if left by a SIGKILLed run
    scenario = {
        "name": "fio-term",
        "workload": {
            "sysbench": {
                "test": "fileio",
                "file_total_size": "256M",
                "file_num": 4,
                "file_test_mode": "rndrd",
                "time": 60,
            }
        },
    }
    path = write_scenario(tmp_path / "fio.yaml", scenario)
    with open(tmp_path / "stdout", "w") as stdout, open(tmp_path / "stderr", "w") as stderr:
        child = spawn_dbrig(["run", path, "--out", out], stdout=stdout, stderr=stderr)
        with killed_at_end(child):
            wait_for(
                "the fileio data set folder",
                lambda: [
                    p for p in out.glob(".dbrig-work-*/*") if p.is_dir() and p.parent != abandoned
                ],
                timeout=60,
                child=child,
            )
            os.kill(child.pid, signal.SIGTERM)
            code = child.wait(timeout=60)
    assert code != 0
    assert "interrupted" in (tmp_path / "stderr").read_text()
    assert_work_folders_removed(out)
