"""A clone workspace: an XFS filesystem with reflink in a sparse file, loop-mounted under
the run directory, where managed servers keep their datadirs and snapshots.

On ext4 (the usual default) every snapshot and restore is a real copy; on XFS with
``reflink=1`` it is a copy-on-write clone. ``workspace: {image: 20G}`` gives any
host the clone path, as root: the image is a sparse file (it takes the space the
data takes, up to its size), made with ``mkfs.xfs -m reflink=1`` and mounted with
``mount -o loop`` at ``<run>/workspace``.

It is unmounted and deleted on every way out. A dbrig killed by SIGKILL cannot do
that, so each workspace is recorded in :data:`REGISTRY` with the owning process's
id; the next ``dbrig run`` (or ``--resume``) unmounts and deletes every recorded
workspace whose process is gone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dbrig import proc
from dbrig.errors import ConfigError, ServerError
from dbrig.ownership import mark_owned
from dbrig.server.sandbox import remove_orphaned_socket_dirs
from dbrig.util.files import write_json_atomic

log = logging.getLogger(__name__)

REGISTRY = Path(os.environ.get("DBRIG_WORKSPACE_REGISTRY", "/run/dbrig/workspaces"))
MIN_IMAGE_BYTES = 512 * 2**20  # mkfs.xfs refuses a filesystem under 300 MiB
_MOUNT_TIMEOUT_S = 120
KEY = "workspace.image"


@dataclass(frozen=True)
class Workspace:
    mount: Path
    image: Path
    record: Path

    @property
    def data_root(self) -> Path:
        """Where servers keep their datadirs and snapshots."""
        return self.mount / "servers"


def check_can_make(
    size_bytes: int,
    *,
    key: str = KEY,
    written: str | None = None,
    parent: Path | None = None,
    filled: bool = False,
) -> None:
    """Refuse, before anything runs, what cannot make a workspace (exit 2): ``key`` is the
    scenario key the size came from, ``written`` the size as written there, ``parent`` the
    folder the run directory (and so the image) goes in. An image that a ``disk_full``
    fault fills (``filled``) needs that much free space; any other must fit the disk."""
    shown = written or f"{size_bytes} bytes"
    if os.geteuid() != 0:
        raise ConfigError(
            f"{key}: a clone workspace needs root (it makes and loop-mounts an XFS filesystem)",
            hint="run dbrig as root, or remove 'workspace' from the scenario",
        )
    if size_bytes < MIN_IMAGE_BYTES:
        raise ConfigError(f"{key}: at least 512M, got {shown}")
    for tool, package in (("mkfs.xfs", "xfsprogs"), ("mount", "mount"), ("umount", "mount")):
        if shutil.which(tool) is None:
            raise ConfigError(f"{key}: {tool} is not installed (Debian package {package})")
    if parent is not None:
        _check_room(size_bytes, key, shown, parent, filled)


def _check_room(size_bytes: int, key: str, shown: str, parent: Path, filled: bool) -> None:
    where = next(p for p in (parent.resolve(), *parent.resolve().parents) if p.exists())
    usage = shutil.disk_usage(where)
    room, what = (usage.free, "free") if filled else (usage.total, "in all")
    if size_bytes > room:
        raise ConfigError(
            f"{key}: {shown} is more than the {room / 2**30:.1f} GiB {what} on the disk "
            f"under {where}, where the image would be made",
            hint="give a smaller size, or --out on a bigger disk",
        )


@contextlib.contextmanager
def clone_workspace(run_path: Path, size_bytes: int | None) -> Iterator[Path | None]:
    """Where servers keep their data: a workspace made and mounted for the block (its
    ``servers/`` folder), unmounted and deleted however the block ends; None without one.
    What a dbrig killed with SIGKILL left is cleaned first: the servers it left running
    and their socket folders, then (the servers gone, nothing holds them) its workspaces."""
    remove_orphaned_socket_dirs()
    clean_abandoned()
    if size_bytes is None:
        yield None
        return
    made = make(run_path, size_bytes)
    try:
        yield made.data_root
    finally:
        remove(made)


def make(run_path: Path, size_bytes: int) -> Workspace:
    check_can_make(size_bytes)
    mount, image = run_path / "workspace", run_path / "workspace.img"
    REGISTRY.mkdir(parents=True, exist_ok=True)
    record = REGISTRY / f"{os.getpid()}-{abs(hash(str(mount))):x}.json"
    made = Workspace(mount, image, record)
    write_json_atomic(record, {"pid": os.getpid(), "mount": str(mount), "image": str(image)})
    try:
        mount.mkdir()
        try:
            with open(image, "wb") as handle:
                handle.truncate(size_bytes)
        except OSError as exc:  # a size the filesystem cannot hold: checked before, mostly
            raise ServerError(f"{KEY}: making {image} failed: {exc.strerror}") from None
        _run(["mkfs.xfs", "-q", "-m", "reflink=1", str(image)], "making the XFS filesystem")
        _run(["mount", "-o", "loop", str(image), str(mount)], "loop-mounting it")
        mark_owned(made.data_root, role="workspace")
    except BaseException:
        remove(made)
        raise
    return made


def remove(made: Workspace) -> None:
    """Unmount (lazily if something still holds it), then delete the image and the record."""
    if is_mounted(made.mount):
        code, out = proc.capture(["umount", str(made.mount)], timeout_s=_MOUNT_TIMEOUT_S)
        if code != 0:
            log.warning("umount %s failed (%s): detaching it lazily", made.mount, out.strip())
            proc.capture(["umount", "-l", str(made.mount)], timeout_s=_MOUNT_TIMEOUT_S)
    if not is_mounted(made.mount):
        with contextlib.suppress(OSError):
            made.mount.rmdir()
        made.image.unlink(missing_ok=True)
        made.record.unlink(missing_ok=True)


def clean_abandoned() -> list[Path]:
    """Unmount and delete the workspaces of dbrig processes that are gone (SIGKILL)."""
    cleaned = []
    for record in sorted(REGISTRY.glob("*.json")) if REGISTRY.is_dir() else []:
        try:
            data = json.loads(record.read_text())
            pid, mount, image = int(data["pid"]), Path(data["mount"]), Path(data["image"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if proc.alive(pid):
            continue
        remove(Workspace(mount, image, record))
        cleaned.append(mount)
    return cleaned


def is_mounted(path: Path) -> bool:
    target = str(path.resolve()) if path.exists() else str(path)
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return False
    return any(line.split()[1].replace("\\040", " ") == target for line in lines)


def _run(argv: list[str], what: str) -> None:
    code, out = proc.capture(argv, timeout_s=_MOUNT_TIMEOUT_S)
    if code != 0:
        detail = " ".join(out.split())[:200] or f"exit {code}"
        raise ServerError(f"{KEY}: {what} failed: {argv[0]}: {detail}")
