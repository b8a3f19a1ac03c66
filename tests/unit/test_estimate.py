"""``--dry-run``'s wall-time estimate: load time from the tool, set-up from earlier runs."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from dbrig.run.estimate import History, estimate, read_history
from dbrig.scenario import plan_from_dict

SYSBENCH = {"sysbench": {"tables": 1, "table_size": 100, "time": 30}}
SLAP = {"mysqlslap": {"number_of_queries": 100, "concurrency": 2}}


def _plan(workload: dict, **extra: object):
    raw = {"name": "est", "workload": workload, "repeat": 2, **extra}
    return plan_from_dict(raw, seed=1)


def _saved(out: Path, name: str, **columns: list[float]) -> None:
    run = out / name
    run.mkdir(parents=True)
    frame = pd.DataFrame({"status": ["ok"] * len(next(iter(columns.values()))), **columns})
    frame.to_csv(run / "results.csv", index=False)


def test_setup_costs_are_the_median_of_earlier_trials(tmp_path: Path) -> None:
    _saved(tmp_path, "a-20260101-000000", time_restore_s=[1.0, 1.0], time_server_start_s=[2, 4])
    _saved(tmp_path, "est-20260102-000000", time_restore_s=[1.0], time_workload_s=[7.0])
    history = read_history(tmp_path, "est")
    assert history.setup_s == pytest.approx(3.0)  # per trial: 3, 5, 1 -> median 3
    assert history.setup_trials == 3
    assert history.workload_s == 7.0  # only from runs of the same scenario


def test_a_timed_workload_counts_warmup_time_and_setup() -> None:
    plan = _plan(SYSBENCH, warmup=5, matrix={"workload.sysbench.threads": [1, 2]})
    found = estimate(plan, History(setup_s=2.0, setup_trials=10, workload_s=None))
    assert found.total_s == pytest.approx(4 * (5 + 30) + 4 * 2.0)
    assert any("median of 10 earlier trials" in line for line in found.lines)


def test_without_history_the_setup_is_said_to_be_left_out() -> None:
    found = estimate(_plan(SYSBENCH), History(None, 0, None))
    assert found.total_s == 60
    assert any("not counted (no earlier run" in line for line in found.lines)


def test_fixed_work_uses_an_earlier_run_of_the_scenario_or_says_it_cannot() -> None:
    assert estimate(_plan(SLAP), History(1.0, 5, workload_s=4.0)).total_s == pytest.approx(10.0)
    unknown = estimate(_plan(SLAP), History(1.0, 5, workload_s=None))
    assert any("fixed amount of work" in line for line in unknown.lines)


def test_external_servers_have_no_setup() -> None:
    external = {"kind": "external", "host": "127.0.0.1", "port": 3306, "user": "u", "reset": "none"}
    plan = _plan(SYSBENCH, server=external)
    assert estimate(plan, History(9.0, 5, None)).total_s == 60


def test_data_set_loads_are_timed_from_the_newest_run_of_the_scenario_that_loaded_them(
    tmp_path: Path,
) -> None:
    _saved(tmp_path, "est-20260101-000000", time_data_set_load_s=[100.0, float("nan")])
    _saved(tmp_path, "est-20260102-000000", time_data_set_load_s=[50.0, 70.0])
    _saved(tmp_path, "est-20260103-000000", time_data_set_cache_s=[0.5, float("nan")])
    _saved(tmp_path, "other-20260104-000000", time_data_set_load_s=[9.0])
    for age, run in enumerate(sorted(tmp_path.iterdir())):
        results = run / "results.csv"
        os.utime(results, (1000 + age, 1000 + age))
    history = read_history(tmp_path, "est")
    assert history.data_set_load_s == 120.0  # the cache-only run and other scenarios skipped
    found = estimate(_plan(SYSBENCH), history)
    assert "plus the data set loads (2m00s in the newest run" in found.lines[-1]
    assert estimate(_plan(SYSBENCH), History(None, 0, None)).lines[-1] == (
        "plus the data set loads (prepare) and the report"
    )


def test_cells_whose_workload_needs_no_server_add_no_managed_setup() -> None:
    """The base block names only ``time`` (its test would need a server); the blocks
    choose hardware tests: no restore, start or stop to add."""
    plan = _plan(
        {"sysbench": {"time": 2}},
        matrix=[{"workload.sysbench.test": ["cpu"]}, {"workload.sysbench.test": ["memory"]}],
    )
    found = estimate(plan, History(setup_s=9.0, setup_trials=5, workload_s=None))
    assert found.total_s == 4 * 2
    assert not any("managed set-ups" in line for line in found.lines)


def test_only_the_trials_given_are_timed() -> None:
    plan = _plan(SYSBENCH)
    found = estimate(plan, History(None, 0, None), plan.trials[:1])
    assert found.total_s == 30
    assert found.lines[0].startswith("1 trials: ")
