"""A datadir's manifest: what it held right after a restore, so the next restore can
copy back only what a trial changed.

Per file: size, mtime, ctime and inode (``lstat``, nanoseconds). A file whose four
values are all unchanged still holds the snapshot's bytes. Why that is safe for a
stopped mariadbd/mysqld:

- every way a server changes a file goes through the kernel and sets its ctime:
  ``write``/``pwrite`` (buffered or ``O_DIRECT``), ``fallocate`` (InnoDB's file
  extension, and punch hole for page compression), ``ftruncate``, and writes
  through a shared ``mmap`` (MariaDB 10.11 maps ``ib_logfile0`` by default,
  ``innodb_log_file_mmap=ON``; the kernel stamps the file when a clean mapped page
  is first written). A file replaced by rename (Aria's control file, ``.frm``
  rewrites, ``ALTER TABLE``'s ``#sql`` files) has a new inode.
- user space can set mtime back (``utime``) but never ctime; only a change of the
  system clock could, which a benchmark host does not do in mid-run.
- the one trap is a write in the same clock tick as the restore: the file would
  keep the ctime it was restored with. :func:`settle` waits, after a restore and
  before the manifest is taken, until the filesystem's clock has moved past every
  recorded ctime, so any later write stamps a ctime the manifest does not hold.

``tests/integration/test_restore_changed.py`` proves it on a real server: one row
updated in place is found, and the restore is exact by ``CHECKSUM TABLE``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from dbrig.util.files import write_text_atomic

_SETTLE_LIMIT_S = 2.0
_FORMAT = 1


@dataclass(frozen=True)
class FileStamp:
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileStamp:
        return cls(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


@dataclass(frozen=True)
class Tree:
    """Every file (anything not a directory) and directory under a root, by relative path."""

    files: dict[str, FileStamp]
    dirs: frozenset[str]

    @property
    def newest_ctime_ns(self) -> int:
        return max((s.ctime_ns for s in self.files.values()), default=0)


@dataclass(frozen=True)
class Manifest:
    """A datadir's tree right after it was made equal to ``snapshot`` (its identity)."""

    snapshot: str
    tree: Tree


@dataclass(frozen=True)
class Changes:
    """What a restore must do to bring a datadir back to its manifest."""

    changed: list[str] = field(default_factory=list)  # differ, or missing: copy back
    created_files: list[str] = field(default_factory=list)  # not in the snapshot: remove
    created_dirs: list[str] = field(default_factory=list)
    missing_dirs: list[str] = field(default_factory=list)
    kind_changed: bool = False  # a file became a directory or back: restore it whole

    @property
    def none(self) -> bool:
        return not (self.changed or self.created_files or self.created_dirs or self.missing_dirs)


def scan(root: Path) -> Tree:
    """``lstat`` of everything under ``root`` (symbolic links are not followed)."""
    files: dict[str, FileStamp] = {}
    dirs: set[str] = set()
    pending = [("", str(root))]
    while pending:
        prefix, path = pending.pop()
        with os.scandir(path) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    dirs.add(rel)
                    pending.append((rel + "/", entry.path))
                else:
                    files[rel] = FileStamp.of(entry.stat(follow_symlinks=False))
    return Tree(files, frozenset(dirs))


def compare(recorded: Tree, now: Tree) -> Changes:
    changed = [rel for rel, stamp in recorded.files.items() if now.files.get(rel) != stamp]
    created = [rel for rel in now.files if rel not in recorded.files]
    created_dirs = [d for d in now.dirs if d not in recorded.dirs]
    missing_dirs = [d for d in recorded.dirs if d not in now.dirs]
    kind_changed = any(rel in now.dirs for rel in recorded.files) or any(
        rel in now.files for rel in recorded.dirs
    )
    return Changes(
        changed=sorted(changed),
        created_files=sorted(created),
        created_dirs=sorted(created_dirs),
        missing_dirs=sorted(missing_dirs),
        kind_changed=kind_changed,
    )


def snapshot_identity(snapshot_dir: Path) -> str:
    """Which snapshot, this incarnation of it: a snapshot remade under the same name
    (a new directory, renamed into place) has another inode or ctime."""
    st = snapshot_dir.stat()
    return f"{snapshot_dir.resolve()}:{st.st_ino}:{st.st_ctime_ns}"


def settle(directory: Path, newest_ctime_ns: int) -> bool:
    """Wait until a file written in ``directory`` gets a ctime past ``newest_ctime_ns``.

    Timestamps come from the filesystem's own (coarse) clock, so the probe is a
    real file on the same filesystem. False if the clock did not move within a
    couple of seconds (then no manifest is trusted: the next restore is whole).
    """
    probe = directory / ".dbrig-clock"
    deadline = time.monotonic() + _SETTLE_LIMIT_S
    try:
        while True:
            with open(probe, "wb") as handle:
                handle.write(b"t")
            if probe.stat().st_ctime_ns > newest_ctime_ns:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)
    finally:
        probe.unlink(missing_ok=True)


def record(datadir: Path, snapshot_dir: Path, path: Path) -> Manifest | None:
    """Scan a datadir that is now equal to ``snapshot_dir`` and save its manifest."""
    tree = scan(datadir)
    if not settle(datadir.parent, tree.newest_ctime_ns):
        return None
    manifest = Manifest(snapshot_identity(snapshot_dir), tree)
    save(manifest, path)
    return manifest


def save(manifest: Manifest, path: Path) -> None:
    files = {
        rel: [s.size, s.mtime_ns, s.ctime_ns, s.inode] for rel, s in manifest.tree.files.items()
    }
    data = {
        "format": _FORMAT,
        "snapshot": manifest.snapshot,
        "dirs": sorted(manifest.tree.dirs),
        "files": files,
    }
    write_text_atomic(path, json.dumps(data, separators=(",", ":")))


def load(path: Path) -> Manifest | None:
    """The saved manifest, or None if there is none or it cannot be read whole."""
    try:
        data = json.loads(path.read_text())
        if data.get("format") != _FORMAT:
            return None
        files = {rel: FileStamp(*map(int, v)) for rel, v in data["files"].items()}
        return Manifest(str(data["snapshot"]), Tree(files, frozenset(data["dirs"])))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
