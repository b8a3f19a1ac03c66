"""Restoring only what a trial changed, on a real server: what changed is found, what the
trial created is removed, what it dropped comes back, and CHECKSUM TABLE agrees."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbrig.server import datadir as dd
from dbrig.server import manifest as mf
from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from tests.integration.helpers import TINY_CONFIG
from tests.integration.test_datadir import ROWS, prepare_sysbench_data, table_state

pytestmark = pytest.mark.integration


@pytest.fixture
def prepared(tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    """A stopped sandbox holding 1 sysbench table, snapshotted (its manifest saved)."""
    sandbox = Sandbox("it", find_server(), tmp_path / "server")
    snapshot = sandbox.home / "snapshots" / "data"
    sandbox.initialize()
    try:
        sandbox.start(TINY_CONFIG)
        prepare_sysbench_data(sandbox, tmp_path / "prepare.out")
        sandbox.stop()
        dd.snapshot(sandbox.datadir, snapshot)
        yield sandbox, snapshot
    finally:
        sandbox.close()


def trial(sandbox: Sandbox, *statements: str) -> tuple[int, int, int]:
    """Start, note the table's state, run ``statements``, stop; the state before them."""
    sandbox.start(TINY_CONFIG)
    state = table_state(sandbox)
    sandbox.execute(*statements)
    sandbox.stop()
    return state


def changes_now(sandbox: Sandbox) -> mf.Changes:
    recorded = mf.load(dd.manifest_path(sandbox.datadir))
    assert recorded is not None
    return mf.compare(recorded.tree, mf.scan(sandbox.datadir))


def tables(sandbox: Sandbox) -> set[str]:
    with contextlib.closing(sandbox.connect("sbtest")) as conn, conn.cursor() as cur:
        cur.execute("SHOW TABLES")
        return {row[0] for row in cur.fetchall()}


def restored_exactly(sandbox: Sandbox, snapshot: Path, expected: tuple[int, int, int]) -> None:
    timing = dd.restore(snapshot, sandbox.datadir)
    assert timing.path == "changed"
    sandbox.start(TINY_CONFIG)
    assert table_state(sandbox) == expected
    assert tables(sandbox) == {"sbtest1"}
    sandbox.stop()


def test_one_row_updated_in_place_is_found_and_put_back(prepared: tuple[Sandbox, Path]) -> None:
    sandbox, snapshot = prepared
    before = trial(sandbox, "UPDATE sbtest.sbtest1 SET k = k + 1 WHERE id = 5")
    changes = changes_now(sandbox)
    assert "sbtest/sbtest1.ibd" in changes.changed
    assert "sbtest/sbtest1.frm" not in changes.changed
    restored_exactly(sandbox, snapshot, before)
    # restored from the restore's own manifest: a second trial is found the same way
    again = trial(sandbox, "DELETE FROM sbtest.sbtest1 WHERE id = 7")
    assert again == before and "sbtest/sbtest1.ibd" in changes_now(sandbox).changed
    restored_exactly(sandbox, snapshot, before)


def test_a_read_only_trial_leaves_the_tables_files_alone(prepared: tuple[Sandbox, Path]) -> None:
    sandbox, snapshot = prepared
    before = trial(sandbox, "SELECT SUM(k) FROM sbtest.sbtest1")
    changes = changes_now(sandbox)
    assert not any(rel.startswith("sbtest/") for rel in changes.changed), changes.changed
    assert before[1:] == (ROWS, 0)
    restored_exactly(sandbox, snapshot, before)


def test_a_created_table_and_database_are_removed(prepared: tuple[Sandbox, Path]) -> None:
    sandbox, snapshot = prepared
    before = trial(
        sandbox,
        "CREATE TABLE sbtest.made_by_trial (id INT PRIMARY KEY) ENGINE=InnoDB",
        "INSERT INTO sbtest.made_by_trial VALUES (1), (2)",
        "CREATE TABLE sbtest.made_by_trial_aria (id INT PRIMARY KEY) ENGINE=Aria",
        "CREATE DATABASE made_by_trial_db",
        "CREATE TABLE made_by_trial_db.t (id INT) ENGINE=InnoDB",
    )
    changes = changes_now(sandbox)
    assert "sbtest/made_by_trial.ibd" in changes.created_files
    assert "made_by_trial_db" in changes.created_dirs
    restored_exactly(sandbox, snapshot, before)
    assert not any("made_by_trial" in rel for rel in mf.scan(sandbox.datadir).files)
    assert not (sandbox.datadir / "made_by_trial_db").exists()
    sandbox.start(TINY_CONFIG)
    sandbox.execute("CREATE TABLE sbtest.made_by_trial (id INT PRIMARY KEY)")  # no leftovers
    sandbox.stop()


def test_a_dropped_table_comes_back(prepared: tuple[Sandbox, Path]) -> None:
    sandbox, snapshot = prepared
    before = trial(sandbox, "DROP TABLE sbtest.sbtest1")
    changes = changes_now(sandbox)
    assert {"sbtest/sbtest1.ibd", "sbtest/sbtest1.frm"} <= set(changes.changed)
    restored_exactly(sandbox, snapshot, before)
