"""Two real shard runs merged are the unsharded run: same trials, order and columns."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.integration.helpers import (
    only_run_dir,
    read_json,
    run_main,
    tiny_scenario,
    write_scenario,
)

FACTOR = "workload.sysbench.threads"
SCENARIO = tiny_scenario(
    workload={"sysbench": {"test": "oltp_read_only", "tables": 1, "table_size": 100, "time": 1}},
    warmup=0,
    matrix={FACTOR: [1, 2]},
)


@pytest.mark.fresh_data_sets  # a load and a cache hit time different columns
@pytest.mark.integration
def test_two_shards_merged_equal_the_unsharded_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = str(write_scenario(tmp_path / "s.yaml", SCENARIO))
    pieces = []
    for index in (1, 2):
        out = tmp_path / f"shard-{index}"
        args = ["run", scenario, "--shard", f"{index}/2", "--seed", "5", "--no-report"]
        result = run_main([*args, "--out", str(out)], capsys)
        assert result.code == 0, result.err
        pieces.append(only_run_dir(out))
        assert read_json(pieces[-1] / "run.json")["shard"]["index"] == index
    # no report: the merged run's is the one rendered and checked below
    args = ["run", scenario, "--seed", "5", "--no-report", "--out", str(tmp_path / "whole")]
    whole = run_main(args, capsys)
    assert whole.code == 0, whole.err
    unsharded = only_run_dir(tmp_path / "whole")

    merged = tmp_path / "merged"
    result = run_main(["merge", *map(str, pieces), "--out", str(merged)], capsys)
    assert result.code == 0, result.err
    got, want = read_json(merged / "run.json"), read_json(unsharded / "run.json")
    for key in ("status", "digest", "seed", "cells", "trials", "factors"):
        assert got[key] == want[key], key
    got_rows = pd.read_csv(merged / "results.csv")
    want_rows = pd.read_csv(unsharded / "results.csv")
    assert list(got_rows["trial"]) == list(want_rows["trial"])
    assert set(got_rows.columns) == set(want_rows.columns)
    assert (got_rows["status"] == "ok").all()

    shown = run_main(["show", str(merged)], capsys)
    assert shown.code == 0, shown.err
    assert "threads" in shown.out and "TPS" in shown.out
    report = run_main(["report", str(merged)], capsys)
    assert report.code == 0, report.err
    assert (merged / "report.html").is_file()
    compared = run_main(["compare", str(unsharded), str(merged)], capsys)
    assert compared.code == 0, compared.err
    assert "incomparable" not in compared.out  # one machine: the environments agree
