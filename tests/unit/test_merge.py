"""``dbrig merge``: shard pieces cut from a real saved run, joined back, and the bad inputs."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dbrig import cli, store
from dbrig.commands import merge as merge_module
from dbrig.commands._common import load_run_input
from dbrig.commands.merge import merge_runs
from dbrig.commands.run import resume_plan
from dbrig.errors import ConfigError
from dbrig.report import run_warnings
from dbrig.run.runner import pending_trials
from dbrig.scenario import plan_from_dict, shard_plan
from tests.helpers.files import COMPLETE


def cut_shards(tmp_path: Path, count: int = 2, source: Path = COMPLETE) -> list[Path]:
    """The pieces ``dbrig run --shard I/N`` would have saved, cut from a whole run."""
    saved = store.RunDir.open(source).saved()
    assert saved.raw_scenario is not None and saved.seed is not None
    plan = plan_from_dict(dict(saved.raw_scenario), seed=saved.seed, cpu_count=2)
    pieces = []
    for index in range(1, count + 1):
        shard = shard_plan(plan, index, count)
        mine = {c.id for c in shard.cells}
        target = tmp_path / f"shard-{index}" / source.name
        shutil.copytree(source, target)
        run = store.RunDir(target)
        for trial_id in run.trial_ids():
            if trial_id.split("-")[0] not in mine:
                shutil.rmtree(run.trial_path(trial_id))
        trials = run.trials()
        run.write_saved(
            saved.replace(
                cells=tuple(c for c in saved.cells if c.cell in mine),
                trials=tuple(t.id for t in shard.trials),
                shard=store.ShardRecord(index, count, tuple(sorted(mine))),
                trials_saved=len(trials),
            )
        )
        run.write_results(store.results_frame(trials.values()))
        pieces.append(target)
    return pieces


def edit_run_json(path: Path, **changes: Any) -> None:
    data = json.loads((path / "run.json").read_text())
    for key, value in changes.items():
        node = data
        *parents, last = key.split("__")
        for part in parents:
            node = node[part]
        node[last] = value
    (path / "run.json").write_text(json.dumps(data))


def digest_tree(path: Path) -> str:
    digest = hashlib.sha256()
    for item in sorted(path.rglob("*")):
        digest.update(str(item.relative_to(path)).encode())
        if item.is_file():
            digest.update(item.read_bytes())
    return digest.hexdigest()


def test_merged_shards_are_the_unsharded_run(tmp_path: Path) -> None:
    pieces = cut_shards(tmp_path, 2)
    before = [digest_tree(p) for p in pieces]
    outcome = merge_runs(pieces, out=tmp_path / "merged")
    assert (outcome.pieces, outcome.trials, outcome.missing) == (2, 12, ())
    merged, whole = store.RunDir.open(tmp_path / "merged"), store.RunDir.open(COMPLETE)
    got, want = merged.saved(), whole.saved()
    assert got.status == "complete" and got.shard is None
    assert (got.cells, got.trials, got.digest, got.seed) == (
        want.cells,
        want.trials,
        want.digest,
        want.seed,
    )
    assert merged.trial_ids() == whole.trial_ids()
    pd.testing.assert_frame_equal(merged.results(), whole.results())
    assert (merged.path / "results.parquet").is_file()
    assert [p["shard"]["index"] for p in got.extra["merged"]["pieces"]] == [1, 2]
    assert [digest_tree(p) for p in pieces] == before  # the inputs are never changed
    load_run_input(merged.path)  # compare takes it as a complete run


def test_show_reads_the_merged_run(tmp_path: Path, capsys: Any) -> None:
    merge_runs(cut_shards(tmp_path, 2), out=tmp_path / "merged")
    with pytest.raises(SystemExit) as ended:
        cli.main(["show", str(tmp_path / "merged")])
    assert ended.value.code == 0
    assert "threads" in capsys.readouterr().out


def test_history_and_compare_read_the_merged_run(tmp_path: Path, capsys: Any) -> None:
    history = tmp_path / "history"
    history.mkdir()
    shutil.copytree(COMPLETE, history / COMPLETE.name)
    merge_runs(cut_shards(tmp_path, 2), out=history / "merged")
    for args in (
        ["history", str(history), "--metric", "tps"],
        ["compare", str(history / COMPLETE.name), str(history / "merged")],
    ):
        with pytest.raises(SystemExit) as ended:
            cli.main(args)
        out = capsys.readouterr().out
        assert ended.value.code == 0, args
        assert "merged" in out
    assert "incomparable" not in out


def test_a_different_scenario_is_refused(tmp_path: Path) -> None:
    pieces = cut_shards(tmp_path, 2)
    edit_run_json(pieces[1], digest="0123456789abcdef")
    with pytest.raises(ConfigError, match="scenario digest 0123456789abcdef differs"):
        merge_runs(pieces, out=tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_a_different_seed_is_refused(tmp_path: Path) -> None:
    pieces = cut_shards(tmp_path, 2)
    edit_run_json(pieces[1], seed=8)
    with pytest.raises(ConfigError, match=r"seed 8 differs .* same --seed"):
        merge_runs(pieces, out=tmp_path / "merged")


def test_overlapping_pieces_are_refused(tmp_path: Path) -> None:
    pieces = cut_shards(tmp_path, 2)
    with pytest.raises(ConfigError, match=r"trial c\d{3}-r\d is in both .*the pieces overlap"):
        merge_runs([COMPLETE, pieces[0]], out=tmp_path / "merged")


def test_missing_trials_are_refused_then_allowed_as_partial(tmp_path: Path) -> None:
    pieces = cut_shards(tmp_path, 2)
    with pytest.raises(ConfigError, match=r"6 of 12 trials are missing .*missing shard 2/2"):
        merge_runs(pieces[:1], out=tmp_path / "merged")
    outcome = merge_runs(pieces[:1], out=tmp_path / "merged", allow_partial=True)
    assert len(outcome.missing) == 6
    saved = store.RunDir.open(tmp_path / "merged").saved()
    assert saved.status == "partial" and saved.extra["merged"]["missing"] == list(outcome.missing)
    assert len(saved.trials) == 12 and saved.trials_saved == 6
    with pytest.raises(ConfigError, match="the run is partial, not complete"):
        load_run_input(tmp_path / "merged")  # compare refuses to gate on it
    incomplete = [w for w in run_warnings(tmp_path / "merged") if w.code == "incomplete"]
    assert "6 of 12 trials saved; merged without" in incomplete[0].message


def test_a_missing_trial_inside_a_piece_is_found(tmp_path: Path) -> None:
    pieces = cut_shards(tmp_path, 2)
    shutil.rmtree(store.RunDir(pieces[0]).trial_path(store.RunDir(pieces[0]).trial_ids()[0]))
    with pytest.raises(ConfigError, match="1 of 12 trials are missing"):
        merge_runs(pieces, out=tmp_path / "merged")


def test_an_environment_difference_is_refused_then_listed(tmp_path: Path) -> None:
    pieces = cut_shards(tmp_path, 2)
    edit_run_json(pieces[1], environment__host__cpu_model="Other CPU")
    with pytest.raises(ConfigError, match=r"environments differ .*CPU model.*--allow-env-diff"):
        merge_runs(pieces, out=tmp_path / "merged")
    outcome = merge_runs(pieces, out=tmp_path / "merged", allow_env_diff=True)
    assert len(outcome.differences) == 1 and "Other CPU" in outcome.differences[0]
    saved = store.RunDir.open(tmp_path / "merged").saved()
    listed = saved.extra["merged"]["environment_differences"]
    assert [(d["what"], d["piece_value"]) for d in listed] == [("CPU model", "Other CPU")]
    warned = [w for w in run_warnings(tmp_path / "merged") if w.code == "merged_env_diff"]
    assert len(warned) == 1 and "Other CPU" in warned[0].message


def test_a_server_variable_the_matrix_does_not_vary_is_a_difference(tmp_path: Path) -> None:
    pieces = cut_shards(tmp_path, 2)
    edit_run_json(pieces[1], servers__default__variables__innodb_flush_method="O_DIRECT_X")
    with pytest.raises(ConfigError, match="innodb_flush_method"):
        merge_runs(pieces, out=tmp_path / "merged")


def test_a_non_empty_out_is_refused_an_empty_one_used(tmp_path: Path) -> None:
    pieces = cut_shards(tmp_path, 2)
    out = tmp_path / "merged"
    out.mkdir()
    (out / "x").write_text("mine")
    with pytest.raises(ConfigError, match="exists and is not empty"):
        merge_runs(pieces, out=out)
    assert (out / "x").read_text() == "mine"
    (out / "x").unlink()
    merge_runs(pieces, out=out)
    assert (out / "run.json").is_file()


def test_out_inside_an_input_is_refused(tmp_path: Path) -> None:
    pieces = cut_shards(tmp_path, 2)
    with pytest.raises(ConfigError, match="is inside"):
        merge_runs(pieces, out=pieces[0] / "merged")


def test_a_failed_merge_leaves_nothing_behind(tmp_path: Path, monkeypatch: Any) -> None:
    pieces = cut_shards(tmp_path, 2)
    out = tmp_path / "out" / "merged"
    out.parent.mkdir()

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(merge_module.store.RunDir, "write_results", broken)
    with pytest.raises(OSError, match="disk full"):
        merge_runs(pieces, out=out)
    assert list(out.parent.iterdir()) == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "Missing option '--out'"),
        (["--out", "FILE"], "is a file"),
    ],
)
def test_the_cli_exits_2_in_one_line(
    tmp_path: Path, capsys: Any, extra: list[str], message: str
) -> None:
    (tmp_path / "FILE").write_text("")
    args = [a.replace("FILE", str(tmp_path / "FILE")) for a in extra]
    with pytest.raises(SystemExit) as ended:
        cli.main(["merge", str(COMPLETE), *args])
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_a_resumed_shard_keeps_its_shard(tmp_path: Path) -> None:
    piece = cut_shards(tmp_path, 2)[1]
    run = store.RunDir(piece)
    dropped = run.trial_ids()[0]
    shutil.rmtree(run.trial_path(dropped))
    run_dir, plan = resume_plan(piece)
    assert plan.shard is not None and plan.shard.label == "2/2"
    assert tuple(c.id for c in plan.cells) == run.saved().shard.cells  # type: ignore[union-attr]
    assert [t.id for t in plan.trials] == list(run.saved().trials)
    assert [t.id for t in pending_trials(plan, run_dir, retry_failed=False)] == [dropped]
