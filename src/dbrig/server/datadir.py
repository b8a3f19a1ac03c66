"""Datadir ownership, snapshots and exact restores.

Only directories carrying dbrig's own marker (:mod:`dbrig.ownership`) are
ever deleted or copied over.

Snapshots are full copies, never hard links: InnoDB and Aria write their
files in place, so a hard-linked "snapshot" changes with the live datadir.
Copies use ``cp --reflink=auto``: on XFS and btrfs that is a copy-on-write
clone (milliseconds), elsewhere an ordinary copy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from dbrig import proc
from dbrig.errors import ServerError, UnsafePathError
from dbrig.ownership import mark_owned, remove_owned, require_owned
from dbrig.util.files import disk_full

_COPY_TIMEOUT_S = 3600


@dataclass(frozen=True)
class CopyTiming:
    seconds: float


def copy_tree(src: Path, dst: Path) -> CopyTiming:
    """Copy ``src`` to a new directory ``dst`` preserving everything (``cp -a``).

    ``dst`` is marked before the copy starts, so a copy cut short (Ctrl-C) is still
    known to be dbrig's and the next attempt may delete it.
    """
    if dst.exists():
        raise UnsafePathError(f"{dst} exists: refusing to copy over it")
    mark_owned(dst, role="copy")
    started = time.monotonic()
    code, output = proc.capture(
        ["cp", "-a", "--reflink=auto", f"{src}/.", str(dst)], timeout_s=_COPY_TIMEOUT_S
    )
    if code != 0:
        remove_owned(dst)  # half a copy is of no use, and on a full disk it holds the space
        if "No space left on device" in output:
            raise disk_full(dst)
        why = "timed out" if code == -1 else f"exit {code}"
        raise ServerError(f"copying {src} to {dst} failed (cp {why}): {output.strip()[:200]}")
    return CopyTiming(time.monotonic() - started)


def snapshot(datadir: Path, snapshot_dir: Path) -> CopyTiming:
    """Copy a stopped server's datadir to ``snapshot_dir`` (both end up marked).

    The copy is made under a sibling name and renamed when complete, so a
    ``snapshot_dir`` that exists is always whole.
    """
    require_owned(datadir)
    if snapshot_dir.exists():
        raise UnsafePathError(f"{snapshot_dir} exists: refusing to copy over it")
    staging = snapshot_dir.with_name(snapshot_dir.name + ".copying")
    remove_owned(staging)
    timing = copy_tree(datadir, staging)
    staging.rename(snapshot_dir)
    return timing


def restore(snapshot_dir: Path, datadir: Path) -> CopyTiming:
    """Make ``datadir`` an exact copy of ``snapshot_dir``.

    The copy goes to a sibling first and is swapped in by rename, so an
    interrupted restore never leaves a half-copied datadir under the real name.
    """
    require_owned(snapshot_dir)
    if datadir.exists():
        require_owned(datadir)
    started = time.monotonic()
    staging = datadir.with_name(datadir.name + ".restoring")
    remove_owned(staging)
    copy_tree(snapshot_dir, staging)
    if datadir.exists():
        doomed = datadir.with_name(datadir.name + ".old")
        if doomed.exists():
            remove_owned(doomed)
        datadir.rename(doomed)
        staging.rename(datadir)
        remove_owned(doomed)
    else:
        staging.rename(datadir)
    return CopyTiming(time.monotonic() - started)
