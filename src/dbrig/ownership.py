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
from dbrig.util.signals import HeldSignals, interrupts_held

MARKER = ".dbrig-owned"


def mark_owned(path: Path, role: str, owner_pid: int | None = None) -> None:
    """Create ``path`` (which must not exist or be empty) and mark it as dbrig's.

    ``owner_pid``: the dbrig process whose lifetime the folder belongs to (a socket folder),
    so a later run can tell it was left by a dbrig that is gone.
    """
    marker: dict[str, object] = {"created_by": "dbrig", "role": role}
    if owner_pid is not None:
        marker["owner_pid"] = owner_pid
    held = HeldSignals()
    try:
        # A Ctrl-C between the mkdir and the marker would leave a folder dbrig may not remove.
        with interrupts_held(held):
            path.mkdir(parents=True, exist_ok=True)
            if any(p.name != MARKER for p in path.iterdir()):
                raise UnsafePathError(
                    f"{path} already exists and is not empty: dbrig creates its own directories",
                    hint="choose another --out or remove it yourself",
                )
            (path / MARKER).write_text(json.dumps(marker) + "\n")
    finally:
        held.deliver()


def marker(path: Path) -> dict[str, object]:
    """What the marker says ({} when there is none or it cannot be read)."""
    try:
        data = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


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
