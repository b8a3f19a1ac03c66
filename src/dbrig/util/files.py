"""Atomic file writes: readers see the old file or the new one, never half of one.

Each write goes to a dot-tmp sibling (``.name.tmp``, same directory so the rename
stays on one filesystem) that ``os.replace`` then moves over the target. A
failed write leaves the target as it was and removes the sibling. No fsync: this
guards against readers and crashes of dbrig, not against power loss.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dbrig.errors import DiskFull


def tmp_sibling(path: Path) -> Path:
    """Where :func:`replacing` writes before the rename: ``dir/.name.tmp``."""
    return path.with_name(f".{path.name}.tmp")


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A path to write instead of ``path``; it replaces ``path`` only if the block finishes.

    ``with replacing(out) as tmp: frame.to_csv(tmp)`` works for any writer that takes a path.
    """
    tmp = tmp_sibling(path)
    try:
        yield tmp
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if is_disk_full(exc):
            raise disk_full(path) from exc
        raise
    os.replace(tmp, path)


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def disk_full(path: Path) -> DiskFull:
    """The one-line error for a write to ``path`` that found its filesystem full."""
    mount = mount_point(path)
    free = shutil.disk_usage(mount).free
    return DiskFull(
        f"no space left on the filesystem mounted at {mount} (writing {path}; "
        f"{free // 1024} KiB free)",
        hint="free space there, then continue with dbrig run --resume RUN_DIR",
    )


@contextlib.contextmanager
def naming_a_full_disk(path: Path) -> Iterator[None]:
    """Turn ENOSPC while writing ``path`` into :class:`DiskFull` naming its filesystem."""
    try:
        yield
    except OSError as exc:
        if is_disk_full(exc):
            raise disk_full(path) from exc
        raise


def mount_point(path: Path) -> Path:
    """The mount point of the filesystem holding ``path`` (which may not exist yet)."""
    current = path.absolute()
    while not os.path.ismount(current) and current != current.parent:
        current = current.parent
    return current


def write_bytes_atomic(path: Path, data: bytes) -> None:
    with replacing(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: Path, text: str, encoding: str = "utf-8") -> None:
    with replacing(path) as tmp:
        tmp.write_text(text, encoding=encoding)


def write_json_atomic(path: Path, data: Any) -> None:
    """Indented JSON with a final newline; values JSON lacks (dates, paths) as strings."""
    write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")
