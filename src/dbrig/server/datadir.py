"""Datadir ownership, snapshots and exact restores.

Only directories carrying dbrig's own marker (:mod:`dbrig.ownership`) are
ever deleted or copied over.

A restore copies back only what changed when it can: after every restore (and
snapshot) the datadir's manifest (:mod:`dbrig.server.manifest`) is saved beside
it, and the next restore from the same snapshot copies back the files whose
size, mtime, ctime or inode moved, removes what the trial created and leaves
the rest. While it works in place a ``datadir.incomplete`` marker sits beside the
datadir: the server refuses to start on it and the next restore copies the whole
snapshot. Without a manifest for that snapshot the whole snapshot is copied to a
sibling and swapped in by rename.

Snapshots are full copies, never hard links: InnoDB and Aria write their
files in place, so a hard-linked "snapshot" changes with the live datadir.
Copies use ``cp --reflink=auto``: on XFS and btrfs that is a copy-on-write
clone (milliseconds), elsewhere an ordinary copy.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from dbrig import proc
from dbrig.errors import ServerError, UnsafePathError
from dbrig.ownership import mark_owned, remove_owned, require_owned
from dbrig.server import manifest as mf
from dbrig.util.files import disk_full

_COPY_TIMEOUT_S = 3600
_FILES_PER_CP = 500


@dataclass(frozen=True)
class CopyTiming:
    seconds: float
    path: str = "whole"  # how a restore went: "whole" (copy and swap) or "changed"
    files_copied: int | None = None


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
    record_manifest(datadir, snapshot_dir)  # the datadir equals it: the next restore is cheap
    return timing


def remove_datadir(datadir: Path) -> None:
    """Delete a datadir dbrig made, and its manifest and marker beside it."""
    remove_owned(datadir)
    manifest_path(datadir).unlink(missing_ok=True)
    incomplete_marker(datadir).unlink(missing_ok=True)


def manifest_path(datadir: Path) -> Path:
    return datadir.with_name(datadir.name + ".manifest.json")


def incomplete_marker(datadir: Path) -> Path:
    """Present while a restore works in the datadir itself: not a datadir to start on."""
    return datadir.with_name(datadir.name + ".incomplete")


def record_manifest(datadir: Path, snapshot_dir: Path) -> None:
    """Remember that ``datadir`` (stopped) now equals ``snapshot_dir``."""
    mf.record(datadir, snapshot_dir, manifest_path(datadir))


def restore(snapshot_dir: Path, datadir: Path) -> CopyTiming:
    """Make ``datadir`` an exact copy of ``snapshot_dir``, copying only what changed
    when the datadir's manifest says it was last made from this very snapshot."""
    require_owned(snapshot_dir)
    if datadir.exists():
        require_owned(datadir)
    started = time.monotonic()
    changes = _changes_since_restore(snapshot_dir, datadir)
    if changes is None:
        _restore_whole(snapshot_dir, datadir)
        copied = None
    else:
        _restore_changes(snapshot_dir, datadir, changes)
        copied = len(changes.changed)
    record_manifest(datadir, snapshot_dir)
    seconds = time.monotonic() - started
    return CopyTiming(seconds, "whole" if copied is None else "changed", copied)


def _changes_since_restore(snapshot_dir: Path, datadir: Path) -> mf.Changes | None:
    """What the trial changed, or None when only a whole copy is safe."""
    if incomplete_marker(datadir).exists() or not datadir.is_dir():
        return None
    recorded = mf.load(manifest_path(datadir))
    if recorded is None or recorded.snapshot != mf.snapshot_identity(snapshot_dir):
        return None
    changes = mf.compare(recorded.tree, mf.scan(datadir))
    return None if changes.kind_changed else changes


def _restore_whole(snapshot_dir: Path, datadir: Path) -> None:
    """Copy to a sibling and swap it in by rename: never a half-copied datadir."""
    manifest_path(datadir).unlink(missing_ok=True)
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
    incomplete_marker(datadir).unlink(missing_ok=True)


def _restore_changes(snapshot_dir: Path, datadir: Path, changes: mf.Changes) -> None:
    if changes.none:
        return
    marker = incomplete_marker(datadir)
    marker.write_text(f"restoring from {snapshot_dir}\n")
    manifest_path(datadir).unlink()
    for rel in changes.created_files:
        (datadir / rel).unlink(missing_ok=True)
    for rel in sorted(changes.created_dirs, key=len, reverse=True):
        shutil.rmtree(datadir / rel, ignore_errors=True)
    for rel in changes.missing_dirs:  # sorted: parents first
        (datadir / rel).mkdir(exist_ok=True)
    _copy_files(snapshot_dir, datadir, changes.changed)
    for rel in sorted({*changes.missing_dirs, *_parents(changes)}, key=len, reverse=True):
        if (snapshot_dir / rel).is_dir() and (datadir / rel).is_dir():
            shutil.copystat(snapshot_dir / rel, datadir / rel, follow_symlinks=False)
    marker.unlink()


def _copy_files(snapshot_dir: Path, datadir: Path, files: list[str]) -> None:
    """Replace each file by the snapshot's (a new inode, cloned where the filesystem can):
    one ``cp`` per directory."""
    by_dir: dict[str, list[str]] = defaultdict(list)
    for rel in files:
        by_dir[os.path.dirname(rel)].append(rel)
        (datadir / rel).unlink(missing_ok=True)
    for parent, names in sorted(by_dir.items()):
        for start in range(0, len(names), _FILES_PER_CP):  # argv stays far under ARG_MAX
            chunk = names[start : start + _FILES_PER_CP]
            sources = [str(snapshot_dir / rel) for rel in chunk]
            argv = ["cp", "-a", "--reflink=auto", *sources, f"{datadir / parent}/"]
            done = proc.run(argv, timeout_s=_COPY_TIMEOUT_S, stderr=None)
            if done.returncode != 0:
                raise ServerError(
                    f"copying {len(chunk)} file(s) back from {snapshot_dir} to "
                    f"{datadir / parent} failed (cp {done.exit_text})"
                )


def _parents(changes: mf.Changes) -> set[str]:
    """Directories whose entries a restore changed (their mtime is put back too)."""
    touched = [*changes.changed, *changes.created_files, *changes.created_dirs]
    return {os.path.dirname(rel) for rel in touched}
