"""Atomic file writes: readers see the old file or the new one, never half of one.

Each write goes to a dot-tmp sibling (``.name.tmp``, same directory so the rename
stays on one filesystem) that ``os.replace`` then moves over the target. A
failed write leaves the target as it was and removes the sibling. No fsync: this
guards against readers and crashes of dbrig, not against power loss.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


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
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    with replacing(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: Path, text: str, encoding: str = "utf-8") -> None:
    with replacing(path) as tmp:
        tmp.write_text(text, encoding=encoding)


def write_json_atomic(path: Path, data: Any) -> None:
    """Indented JSON with a final newline; values JSON lacks (dates, paths) as strings."""
    write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")
