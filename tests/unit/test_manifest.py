"""The datadir manifest: what counts as changed, and the kernel behaviour it relies on."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from dbrig.server import manifest as mf


def make_tree(root: Path) -> None:
    (root / "db").mkdir(parents=True)
    (root / "ibdata1").write_bytes(b"a" * 4096)
    (root / "db" / "t1.ibd").write_bytes(b"b" * 4096)


def test_an_untouched_tree_has_no_changes(tmp_path: Path) -> None:
    make_tree(tmp_path)
    tree = mf.scan(tmp_path)
    assert set(tree.files) == {"ibdata1", "db/t1.ibd"} and tree.dirs == {"db"}
    assert mf.compare(tree, mf.scan(tmp_path)).none


def test_a_write_in_place_keeping_size_and_mtime_is_found(tmp_path: Path) -> None:
    """InnoDB writes pages in place: same size; and mtime can be set back, ctime cannot."""
    make_tree(tmp_path)
    target = tmp_path / "db" / "t1.ibd"
    before = target.stat()
    recorded = mf.scan(tmp_path)
    assert mf.settle(tmp_path, recorded.newest_ctime_ns)
    with open(target, "r+b") as handle:
        handle.seek(100)
        handle.write(b"X")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert mf.compare(recorded, mf.scan(tmp_path)).changed == ["db/t1.ibd"]


def test_a_write_through_a_shared_mmap_is_found(tmp_path: Path) -> None:
    """MariaDB 10.11 maps ib_logfile0 (innodb_log_file_mmap=ON): such writes stamp ctime too."""
    make_tree(tmp_path)
    recorded = mf.scan(tmp_path)
    assert mf.settle(tmp_path, recorded.newest_ctime_ns)
    with open(tmp_path / "ibdata1", "r+b") as handle, mmap.mmap(handle.fileno(), 4096) as m:
        m[10:11] = b"Z"
        m.flush()
    assert mf.compare(recorded, mf.scan(tmp_path)).changed == ["ibdata1"]


def test_created_removed_and_replaced_entries(tmp_path: Path) -> None:
    make_tree(tmp_path)
    recorded = mf.scan(tmp_path)
    (tmp_path / "db" / "t1.ibd").unlink()
    (tmp_path / "db2").mkdir()
    (tmp_path / "db2" / "t2.ibd").write_bytes(b"new")
    replacement = tmp_path / "ibdata1.tmp"
    replacement.write_bytes(b"a" * 4096)
    replacement.rename(tmp_path / "ibdata1")  # same size and bytes, another inode
    changes = mf.compare(recorded, mf.scan(tmp_path))
    assert changes.changed == ["db/t1.ibd", "ibdata1"]
    assert changes.created_files == ["db2/t2.ibd"] and changes.created_dirs == ["db2"]
    assert not changes.kind_changed


def test_a_file_that_became_a_directory_asks_for_a_whole_restore(tmp_path: Path) -> None:
    make_tree(tmp_path)
    recorded = mf.scan(tmp_path)
    (tmp_path / "ibdata1").unlink()
    (tmp_path / "ibdata1").mkdir()
    assert mf.compare(recorded, mf.scan(tmp_path)).kind_changed


def test_a_manifest_survives_saving_and_a_damaged_one_is_ignored(tmp_path: Path) -> None:
    root, snapshot = tmp_path / "datadir", tmp_path / "snapshot"
    make_tree(root)
    snapshot.mkdir()
    path = tmp_path / "datadir.manifest.json"
    saved = mf.record(root, snapshot, path)
    assert saved is not None and mf.load(path) == saved
    assert saved.snapshot == mf.snapshot_identity(snapshot)
    path.write_text(path.read_text()[:-10])
    assert mf.load(path) is None
    assert mf.load(tmp_path / "missing.json") is None
    assert not (tmp_path / ".dbrig-clock").exists()


def test_a_snapshot_remade_under_the_same_name_is_another_snapshot(tmp_path: Path) -> None:
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    first = mf.snapshot_identity(snapshot)
    snapshot.rmdir()
    (tmp_path / "staging").mkdir()
    (tmp_path / "staging").rename(snapshot)
    assert mf.snapshot_identity(snapshot) != first
