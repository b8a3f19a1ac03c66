"""The files a fault touches: the filler that fills the datadir's filesystem (``disk_full``)
and the server's error log, read from where it stood when the fault began."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

FILLER = ".dbrig-disk-filler"  # beside the datadir, on the filesystem dbrig made
WORKSPACE_MOUNT = "workspace"  # the name of the clone workspace's mount point
_FILL_CHUNK = 64 * 2**20
LOGGED_ERRORS = 5  # distinct [ERROR] lines kept in faults.json


def on_workspace(home: Path) -> bool:
    """``home`` is on the clone workspace, the one filesystem dbrig made and may fill."""
    return mount_point(home).name == WORKSPACE_MOUNT


def free_kb(home: Path) -> int:
    left = os.statvfs(home)
    return left.f_bavail * left.f_frsize // 1024


def fill(path: Path) -> int:
    """Preallocate ``path`` until the filesystem is full; the bytes it took."""
    done, chunk = 0, _FILL_CHUNK
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    try:
        while chunk >= 4096:
            try:
                os.posix_fallocate(fd, done, chunk)
                done += chunk
            except OSError:
                chunk //= 2
    finally:
        os.close(fd)
    return done


# fallocate(2)'s FALLOC_FL_UNSHARE_RANGE (linux/falloc.h): give a file's shared
# (reflinked) extents blocks of its own, its data unchanged.
FALLOC_FL_UNSHARE_RANGE = 0x40


def unshare(datadir: Path) -> int:
    """Give every file of ``datadir`` blocks of its own; the bytes it covered.

    The workspace restores datadirs as reflink clones of their snapshot, and on a
    full XFS even an overwrite in place of a shared block fails (ENOSPC): InnoDB's
    redo log and pages would fail where a real server's, whose files own their
    blocks, only fails to grow. The data is unchanged (the server may run on)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    covered = 0
    for path in sorted(datadir.rglob("*")):
        if not path.is_file() or path.is_symlink() or (size := path.stat().st_size) == 0:
            continue
        fd = os.open(path, os.O_WRONLY)
        try:
            if libc.fallocate(fd, FALLOC_FL_UNSHARE_RANGE, 0, size) != 0:
                code = ctypes.get_errno()
                if code in (errno.EOPNOTSUPP, errno.EINVAL):
                    return covered  # a filesystem without shared extents: nothing to do
                raise OSError(code, os.strerror(code), str(path))
        finally:
            os.close(fd)
        covered += size
    return covered


def mount_point(path: Path) -> Path:
    path = path.resolve()
    while not os.path.ismount(path):
        path = path.parent
    return path


def error_lines(log_text: str) -> list[str]:
    """The error log's [ERROR] lines, without their timestamp and thread id."""
    found = []
    for line in log_text.splitlines():
        if "[ERROR]" in line:
            found.append(line[line.index("[ERROR]") :].strip())
    return found


def first_errors(log_text: str) -> list[str]:
    """The first distinct [ERROR] lines, for faults.json."""
    return list(dict.fromkeys(error_lines(log_text)))[:LOGGED_ERRORS]


def read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
    except OSError:
        return ""
