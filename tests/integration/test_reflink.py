"""Snapshots and restores on a filesystem with reflink (XFS on a loop device made here)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
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

pytestmark = pytest.mark.integration


@pytest.fixture
def xfs_mount() -> Iterator[Path]:
    """A 1 GiB XFS filesystem with reflink, mounted from a file; unmounted and deleted after."""
    if os.geteuid() != 0 or not shutil.which("mkfs.xfs"):
        pytest.skip("needs root and mkfs.xfs (Debian package xfsprogs) to make an XFS loop mount")
    work = Path(tempfile.mkdtemp(prefix="dbrig-xfs-", dir="/tmp"))
    image, mount = work / "fs.img", work / "mnt"
    mount.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(1 << 30)
    made = subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", str(image)], capture_output=True)
    mounted = (
        made.returncode == 0
        and (
            subprocess.run(["mount", "-o", "loop", str(image), str(mount)], capture_output=True)
        ).returncode
        == 0
    )
    if not mounted:
        shutil.rmtree(work, ignore_errors=True)
        pytest.skip("cannot mount a loop device here")
    try:
        yield mount
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            subprocess.run(["umount", str(mount)], check=True, timeout=60)
        shutil.rmtree(work, ignore_errors=True)


def test_a_run_on_xfs_uses_reflink_copies(
    xfs_mount: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_scenario(tmp_path / "one.yaml", tiny_scenario(repeat=2))
    result = run_main(["run", str(path), "--out", str(xfs_mount / "runs"), "--no-report"], capsys)
    assert result.code == 0, result.err
    run = only_run_dir(xfs_mount / "runs")
    storage = read_json(run / "run.json")["environment"]["storage"]
    assert storage["fstype"] == "xfs" and storage["reflink"] is True
    results = pd.read_csv(run / "results.csv")
    assert (results["status"] == "ok").all() and (results["time_restore_s"] > 0).all()
