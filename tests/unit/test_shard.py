"""``run --shard I/N``: the split of a plan's cells over N machines (no server)."""

from __future__ import annotations

from typing import Any

import pytest

from dbrig import cli
from dbrig.errors import ConfigError
from dbrig.run.dryrun import describe
from dbrig.scenario import parse_shard, plan_from_dict, shard_plan, split_cells
from dbrig.store import SavedRun, ShardRecord

SYSBENCH = {"test": "oltp_read_write", "tables": 1, "table_size": 100, "time": 10}


def _plan(repeat: int = 3, seed: int = 11, **raw: Any) -> Any:
    scenario = {
        "name": "s",
        "workload": {"sysbench": SYSBENCH},
        "matrix": {"workload.sysbench.threads": [1, 2, 4, 8], "warmup": [0, 5]},
        "repeat": repeat,
        **raw,
    }
    return plan_from_dict(scenario, seed=seed)


@pytest.mark.parametrize("count", [1, 2, 3, 4, 8])
def test_every_cell_is_in_exactly_one_shard(count: int) -> None:
    plan = _plan()
    shards = split_cells(plan, count)
    assert len(shards) == count and all(shards)
    ids = [cell for shard in shards for cell in shard]
    assert sorted(ids) == sorted(c.id for c in plan.cells)


def test_the_split_is_deterministic_and_ignores_the_seed() -> None:
    assert split_cells(_plan(seed=1), 3) == split_cells(_plan(seed=1), 3)
    assert split_cells(_plan(seed=1), 3) == split_cells(_plan(seed=99), 3)


@pytest.mark.parametrize("order", ["shuffled", "sequential"])
def test_shards_keep_the_unsharded_order_and_together_are_the_unsharded_trials(
    order: str,
) -> None:
    plan = _plan(order=order)
    unsharded = [t.id for t in plan.trials]
    together: list[str] = []
    for index in (1, 2, 3):
        shard = shard_plan(plan, index, 3)
        mine = {c.id for c in shard.cells}
        ids = [t.id for t in shard.trials]
        assert ids == [t for t in unsharded if t.split("-")[0] in mine]
        together += ids
    assert sorted(together) == sorted(unsharded)


def test_whole_cells_never_repetitions_are_split() -> None:
    plan = _plan(repeat=3)
    for index in (1, 2):
        trials = shard_plan(plan, index, 2).trials
        cells = {t.cell.id for t in trials}
        assert len(trials) == 3 * len(cells)


def test_shards_are_balanced_by_expected_time() -> None:
    """Cells with warm-up 5 take 15 s, the others 10 s: each shard gets about half the time."""
    plan = _plan(repeat=1)
    shards = split_cells(plan, 2)
    weight = {c.id: 10 + c.scenario.warmup for c in plan.cells}
    loads = [sum(weight[c] for c in shard) for shard in shards]
    assert abs(loads[0] - loads[1]) <= 5  # 100 s in all, one 15-s cell at most apart


def test_equal_cells_are_not_dealt_round_robin_along_the_last_factor() -> None:
    """A split along one factor would make every comparison on it a comparison of machines."""
    matrix = {"workload.sysbench.threads": [1, 2, 4, 8], "workload.sysbench.tables": [1, 2]}
    plan = _plan(repeat=1, matrix=matrix)  # every cell weighs the same
    tables = [
        {c.factor_dict["workload.sysbench.tables"] for c in plan.cells if c.id in shard}
        for shard in split_cells(plan, 2)
    ]
    assert all(t == {1, 2} for t in tables)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("3/2", "--shard 3/2: I must be between 1 and 2"),
        ("0/2", "--shard 0/2: I must be between 1 and 2"),
        ("1/0", "--shard 1/0: N must be at least 1"),
        ("a/b", "--shard a/b: expected I/N"),
        ("2", "--shard 2: expected I/N"),
        ("-1/2", "--shard -1/2: expected I/N"),
        ("", "--shard : expected I/N"),
    ],
)
def test_bad_shard_values_are_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_shard(text)
    assert caught.value.exit_code == 2


def test_more_shards_than_cells_is_refused() -> None:
    with pytest.raises(ConfigError, match="8 cells, and neither a cell nor such a group is split"):
        shard_plan(_plan(), 1, 9)


def test_dry_run_shows_the_shards_cells_and_order() -> None:
    shard = shard_plan(_plan(repeat=2), 2, 3)
    lines = list(describe(shard))
    ids = [c.id for c in shard.cells]
    assert lines[1].startswith(f"shard 2/3: cells {' '.join(ids)} of 8")
    described = [ln.split()[0] for ln in lines if ln.startswith("c0")]
    assert described == ids
    assert lines[-1] == "order: " + " ".join(t.id for t in shard.trials)


SCENARIO = """\
name: s
workload:
  sysbench: {test: oltp_read_only, tables: 1, table_size: 100, time: 1}
matrix:
  workload.sysbench.threads: [1, 2, 4]
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shard", "3/2", "--seed", "1"], "--shard 3/2: I must be between 1 and 2"),
        (["--shard", "x", "--seed", "1"], "--shard x: expected I/N"),
        (["--shard", "1/2"], "--shard 1/2: give every shard the same --seed N"),
    ],
)
def test_the_cli_refuses_bad_shards_in_one_line_with_exit_2(
    tmp_path: Any, capsys: Any, args: list[str], message: str
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    with pytest.raises(SystemExit) as ended:
        cli.main(["run", str(path), "--dry-run", *args])
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_a_resumed_run_refuses_a_new_shard(tmp_path: Any, capsys: Any) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(["run", "--resume", str(tmp_path), "--shard", "1/2"])
    assert ended.value.code == 2
    assert "--shard: a resumed run keeps its saved shard" in capsys.readouterr().err


def test_run_json_shard_round_trips_and_is_checked() -> None:
    base = {"format_version": 2, "status": "complete"}
    shard = {"index": 2, "count": 3, "cells": ["c001", "c004"]}
    saved = SavedRun.from_json({**base, "shard": shard})
    assert saved.shard == ShardRecord(2, 3, ("c001", "c004")) and saved.shard.label == "2/3"
    assert saved.to_json()["shard"] == shard and "shard" not in saved.extra
    assert "shard" not in SavedRun.from_json(base).to_json()
    with pytest.raises(ConfigError, match="shard: index 4 of count 3"):
        SavedRun.from_json({**base, "shard": {**shard, "index": 4}})
    with pytest.raises(ConfigError, match="shard: expected an object"):
        SavedRun.from_json({**base, "shard": "2/3"})


def test_cells_that_differ_only_in_server_stay_on_one_shard() -> None:
    """compare --by server then compares each base/candidate pair on one machine."""
    servers = {"base": {}, "candidate": {"config": {"innodb_flush_log_at_trx_commit": 2}}}
    matrix = {"server": ["base", "candidate"], "workload.sysbench.threads": [1, 2, 4, 8]}
    plan = _plan(repeat=2, servers=servers, matrix=matrix)
    by_id = {c.id: c for c in plan.cells}
    for shard in split_cells(plan, 3):
        pairs: dict[int, list[str]] = {}
        for cell_id in shard:
            cell = by_id[cell_id]
            pairs.setdefault(cell.factor_dict["workload.sysbench.threads"], []).append(cell.server)
        assert pairs and all(sorted(p) == ["base", "candidate"] for p in pairs.values())
    with pytest.raises(ConfigError, match="4 groups of cells that differ only in server"):
        shard_plan(plan, 1, 5)
