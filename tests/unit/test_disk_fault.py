"""The disk_full fault's datadir unsharing (run/disk_fault.py) on whatever filesystem the
tests' tmp folder is: the data stays as it was. The full disk itself, on a reflink XFS,
is tests/integration/test_faults.py's."""

from __future__ import annotations

from pathlib import Path

from dbrig.run.disk_fault import unshare


def test_unsharing_a_datadir_leaves_its_data_and_counts_at_most_its_bytes(tmp_path: Path) -> None:
    datadir = tmp_path / "datadir"
    (datadir / "sbtest").mkdir(parents=True)
    files = {"ib_logfile0": b"r" * 70_000, "sbtest/sbtest1.ibd": b"p" * 16_384, "empty": b""}
    for name, data in files.items():
        (datadir / name).write_bytes(data)
    (datadir / "link").symlink_to(datadir / "ib_logfile0")
    covered = unshare(datadir)
    # every byte where the filesystem shares extents (XFS, btrfs); none where it cannot
    assert covered in (0, 70_000 + 16_384)
    assert {name: (datadir / name).read_bytes() for name in files} == files
