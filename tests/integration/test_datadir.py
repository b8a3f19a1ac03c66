"""Snapshots and restores of a real datadir: exact, and never of a directory dbrig did not make."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from dbrig import ownership, proc
from dbrig.errors import ServerError, UnsafePathError
from dbrig.server import datadir as dd
from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from dbrig.tools import sysbench
from tests.integration.helpers import TINY_CONFIG

ROWS = 1000


def table_state(sandbox: Sandbox) -> tuple[int, int, int]:
    """(CHECKSUM TABLE, row count, rows written by the test) of sbtest.sbtest1."""
    with contextlib.closing(sandbox.connect("sbtest")) as conn, conn.cursor() as cur:
        cur.execute("CHECKSUM TABLE sbtest1")
        checksum = cur.fetchone()[1]
        cur.execute("SELECT COUNT(*), SUM(c = 'written-after-snapshot') FROM sbtest1")
        count, written = cur.fetchone()
    return int(checksum), int(count), int(written or 0)


def prepare_sysbench_data(sandbox: Sandbox, out: Path) -> None:
    params = sysbench.SysbenchParams(tables=1, table_size=ROWS)
    binary = proc.which(sysbench.INFO.binaries, package=sysbench.INFO.package)
    argv = sysbench.build_command(
        params, sandbox.endpoint(params.db), "prepare", binary=str(binary)
    )
    sandbox.prepare_accounts(params.db)
    done = proc.run(argv, timeout_s=120, stdout=out, merge_stderr=True)
    assert done.returncode == 0, out.read_text()


@pytest.mark.integration
@pytest.mark.parametrize("path", ["changed", "whole"])
def test_a_restore_brings_back_the_snapshot_exactly(tmp_path: Path, path: str) -> None:
    """Both restore paths: files the trial changed copied back (the datadir's manifest is
    there), or the whole snapshot copied and swapped in (no manifest)."""
    sandbox = Sandbox("it", find_server(), tmp_path / "server")
    snapshot = sandbox.home / "snapshots" / "data"
    sandbox.initialize()
    try:
        sandbox.start(TINY_CONFIG)
        prepare_sysbench_data(sandbox, tmp_path / "prepare.out")
        sandbox.stop()
        dd.snapshot(sandbox.datadir, snapshot)

        sandbox.start(TINY_CONFIG)
        at_snapshot = table_state(sandbox)
        assert at_snapshot[1:] == (ROWS, 0)
        sandbox.execute(
            "INSERT INTO sbtest.sbtest1 (k, c, pad) "
            "VALUES (1, 'written-after-snapshot', 'x'), (2, 'written-after-snapshot', 'y')",
            "DELETE FROM sbtest.sbtest1 WHERE id <= 10",
            "CREATE TABLE sbtest.made_after_snapshot (id INT PRIMARY KEY)",
        )
        assert table_state(sandbox) != at_snapshot
        sandbox.stop()

        if path == "whole":
            dd.manifest_path(sandbox.datadir).unlink()
        assert dd.restore(snapshot, sandbox.datadir).path == path
        sandbox.start(TINY_CONFIG)
        assert table_state(sandbox) == at_snapshot
        with contextlib.closing(sandbox.connect("sbtest")) as conn, conn.cursor() as cur:
            cur.execute("SHOW TABLES LIKE 'made_after_snapshot'")
            assert cur.fetchall() == ()
    finally:
        sandbox.close()

    assert ownership.is_owned(sandbox.datadir) and ownership.is_owned(snapshot)
    siblings = {p.name for p in sandbox.home.iterdir()}
    assert "datadir.restoring" not in siblings and "datadir.old" not in siblings
    assert "datadir.incomplete" not in siblings


def listing(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.integration
def test_restore_and_remove_refuse_a_directory_without_the_marker(tmp_path: Path) -> None:
    foreign = tmp_path / "somebody-elses-datadir"
    (foreign / "mysql").mkdir(parents=True)
    (foreign / "ibdata1").write_bytes(b"precious")
    (foreign / "mysql" / "user.MAD").write_bytes(b"accounts")
    before = listing(foreign)
    snapshot = tmp_path / "snapshot"
    ownership.mark_owned(snapshot, role="snapshot")
    (snapshot / "ibdata1").write_bytes(b"from the snapshot")

    with pytest.raises(UnsafePathError) as restoring:
        dd.restore(snapshot, foreign)
    with pytest.raises(UnsafePathError) as removing:
        ownership.remove_owned(foreign)
    with pytest.raises(UnsafePathError):
        dd.restore(foreign, tmp_path / "restored-from-foreign")
    with pytest.raises(UnsafePathError):
        dd.snapshot(foreign, tmp_path / "snapshot-of-foreign")
    with pytest.raises(UnsafePathError):
        ownership.mark_owned(foreign, role="datadir")

    for raised in (restoring, removing):
        assert str(foreign) in str(raised.value) and ownership.MARKER in str(raised.value)
    assert listing(foreign) == before
    assert not ownership.is_owned(foreign)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snapshot", "somebody-elses-datadir"]


def fill(directory: Path, files: int = 200, size: int = 100_000) -> None:
    for i in range(files):
        (directory / f"file{i:03d}").write_bytes(bytes([i % 256]) * size)


def interrupted_at(delay_s: float, action: Callable[[], object]) -> bool:
    """Run ``action`` with a Ctrl-C arriving after ``delay_s``; True if it was cut short.

    After the CLI's own fashion, whatever the interrupt left running is stopped.
    """
    armed = True

    def ctrl_c(signum: int, frame: object) -> None:
        if armed:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, ctrl_c)
    main = threading.main_thread().ident
    timer = threading.Timer(delay_s, signal.pthread_kill, (main, signal.SIGINT))
    try:
        try:
            timer.start()
            action()
        finally:
            armed = False
    except KeyboardInterrupt:
        proc.stop_all()
        return True
    finally:
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGINT, previous)
    return False


@pytest.mark.integration
@pytest.mark.parametrize("delay_s", [0.001, 0.002, 0.004, 0.008, 0.015, 0.03, 0.06, 0.12])
def test_a_copy_cut_short_by_ctrl_c_never_blocks_the_next_one(
    tmp_path: Path, delay_s: float
) -> None:
    """Whenever Ctrl-C lands, the next snapshot and restore work and are exact."""
    datadir, snapshot = tmp_path / "datadir", tmp_path / "snapshots" / "data"
    ownership.mark_owned(datadir, role="datadir")
    fill(datadir)
    expected = listing(datadir)

    if interrupted_at(delay_s, lambda: dd.snapshot(datadir, snapshot)):
        assert not snapshot.exists() or listing(snapshot) == expected
    if not snapshot.exists():
        dd.snapshot(datadir, snapshot)
    assert listing(snapshot) == expected

    (datadir / "file000").write_bytes(b"changed after the snapshot")
    (datadir / "file001").unlink()
    (datadir / "made-by-the-trial").write_bytes(b"new")
    for _ in range(2):  # the second time, only what changed is copied back
        interrupted_at(delay_s, lambda: dd.restore(snapshot, datadir))
        dd.restore(snapshot, datadir)
        assert listing(datadir) == expected
        assert not dd.incomplete_marker(datadir).exists()
        (datadir / "file002").write_bytes(b"changed by another trial")


@pytest.mark.integration
def test_a_restore_in_place_cut_short_is_never_started_on_and_is_redone_whole(
    tmp_path: Path,
) -> None:
    datadir, snapshot = tmp_path / "datadir", tmp_path / "snapshots" / "data"
    ownership.mark_owned(datadir, role="datadir")
    fill(datadir, files=20)
    expected = listing(datadir)
    dd.snapshot(datadir, snapshot)
    (datadir / "file000").write_bytes(b"changed")
    dd.incomplete_marker(datadir).write_text("a restore was cut short here\n")

    sandbox = Sandbox("it", find_server(), tmp_path)
    with pytest.raises(ServerError, match="half-restored"):
        sandbox.start(TINY_CONFIG)
    timing = dd.restore(snapshot, datadir)
    assert timing.path == "whole" and listing(datadir) == expected
    assert not dd.incomplete_marker(datadir).exists()
    (datadir / "file001").write_bytes(b"changed")
    assert dd.restore(snapshot, datadir).path == "changed"
    assert listing(datadir) == expected


@pytest.mark.integration
def test_many_changed_files_are_copied_back_in_several_cp_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dd, "_FILES_PER_CP", 3)
    datadir, snapshot = tmp_path / "datadir", tmp_path / "snapshots" / "data"
    ownership.mark_owned(datadir, role="datadir")
    fill(datadir, files=20)
    expected = listing(datadir)
    dd.snapshot(datadir, snapshot)
    for i in range(7):
        (datadir / f"file{i:03d}").write_bytes(b"changed")
    timing = dd.restore(snapshot, datadir)
    assert (timing.path, timing.files_copied) == ("changed", 7)
    assert listing(datadir) == expected
