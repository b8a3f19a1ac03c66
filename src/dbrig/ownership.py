"""What dbrig created: the ``.dbrig-owned`` marker, and deleting only what carries it.

dbrig only ever deletes a directory that carries its own marker file, written
when dbrig created the directory. A datadir that somebody else made
(``/var/lib/mysql``) is refused, whatever the scenario says. Neutral on
purpose: run directories (store) and datadirs (server) both use it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from dbrig.errors import UnsafePathError

MARKER = ".dbrig-owned"


def mark_owned(path: Path, role: str) -> None:
    """Create ``path`` (which must not exist or be empty) and mark it as dbrig's."""
    path.mkdir(parents=True, exist_ok=True)
    if any(p.name != MARKER for p in path.iterdir()):
        raise UnsafePathError(
            f"{path} already exists and is not empty: dbrig creates its own directories",
            hint="choose another --out or remove it yourself",
        )
    (path / MARKER).write_text(json.dumps({"created_by": "dbrig", "role": role}) + "\n")


def is_owned(path: Path) -> bool:
    return (path / MARKER).is_file()


def require_owned(path: Path) -> None:
    if not is_owned(path):
        raise UnsafePathError(
            f"refusing to delete {path}: it has no {MARKER} marker, so dbrig did not create it"
        )


def remove_owned(path: Path) -> None:
    """Delete a directory dbrig created; refuse anything else."""
    if not path.exists():
        return
    require_owned(path)
    shutil.rmtree(path)
