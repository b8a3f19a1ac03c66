"""The snapshot cache with a real server: a cached snapshot restores exactly (CHECKSUM
TABLE), and a second run of the same scenario skips init and prepare."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dbrig.server import cache as sc
from dbrig.server import datadir as dd
from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from tests.integration.helpers import (
    TINY_CONFIG,
    only_run_dir,
    run_main,
    tiny_scenario,
    write_scenario,
)
from tests.integration.test_datadir import prepare_sysbench_data, table_state

pytestmark = pytest.mark.integration


def test_a_snapshot_from_the_cache_restores_exactly(tmp_path: Path) -> None:
    said: list[str] = []
    cache = sc.SnapshotCache.open(tmp_path / "cache", say=said.append)
    key = {"data_set": "it", "settings": sc.shaping_settings(TINY_CONFIG)}
    first = Sandbox("it", find_server(), tmp_path / "first")
    first.initialize()
    try:
        first.start(TINY_CONFIG)
        prepare_sysbench_data(first, tmp_path / "prepare.out")
        expected = table_state(first)
        first.stop()
        dd.snapshot(first.datadir, first.home / "snapshots" / "data")
        assert cache.store(key, first.home / "snapshots" / "data")
    finally:
        first.close()

    second = Sandbox("it", find_server(), tmp_path / "second")
    snapshot = second.home / "snapshots" / "data"
    assert cache.fetch(key, snapshot)
    try:
        dd.restore(snapshot, second.datadir)
        second.start(TINY_CONFIG)
        assert table_state(second) == expected
        second.execute("UPDATE sbtest.sbtest1 SET k = k + 1 WHERE id = 3")
        second.stop()
        assert dd.restore(snapshot, second.datadir).path == "changed"
        second.start(TINY_CONFIG)
        assert table_state(second) == expected
    finally:
        second.close()
    assert said == []


def test_a_second_run_with_the_cache_skips_init_and_prepare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_scenario(tmp_path / "one.yaml", tiny_scenario())
    cache = tmp_path / "cache"
    prepared = []
    for attempt, expected in (("first", "no entry yet"), ("second", "no init, no prepare")):
        out = tmp_path / attempt
        args = ["run", str(path), "--out", str(out), "--no-report", "--snapshot-cache", str(cache)]
        dry = run_main([*args, "--dry-run"], capsys)
        assert dry.code == 0 and "  snapshot cache: " in dry.out and expected in dry.out
        assert cache.exists() == (attempt == "second"), "a dry run creates no cache"
        result = run_main(args, capsys)
        assert result.code == 0, result.err
        run = only_run_dir(out)
        results = pd.read_csv(run / "results.csv")
        assert (results["status"] == "ok").all()
        # The load (or the copy from the cache) is said as it happens and timed once.
        step, said = (
            ("load", ": loaded in ")
            if attempt == "first"
            else ("cache", ": from the snapshot cache")
        )
        assert said in result.err
        assert results[f"time_data_set_{step}_s"].notna().sum() == 1
        prepared.append(sorted(p.name for p in run.glob("servers/*/*.log")))
        prepared[-1] += sorted(p.name for p in run.glob("servers/*/prepare.out"))
    assert "prepare.out" in prepared[0] and "initialize.log" in prepared[0]
    assert prepared[1] == []
    entries = sc.SnapshotCache.open(cache).entries()
    assert len(entries) == 1 and entries[0].bytes > 0

    # A corrupt entry.json: said once, naming the file; prepared again; the entry replaced.
    record = entries[0].path / "entry.json"
    record.write_text("{")
    out = tmp_path / "third"
    args = ["run", str(path), "--out", str(out), "--no-report", "--snapshot-cache", str(cache)]
    result = run_main(args, capsys)
    assert result.code == 0, result.err
    warned = [line for line in result.err.splitlines() if str(record) in line]
    assert len(warned) == 1 and "unreadable" in warned[0], result.err
    assert ": loaded in " in result.err
    replaced = sc.SnapshotCache.open(cache)
    assert replaced.corrupt() == [] and [e.name for e in replaced.entries()] == [entries[0].name]
