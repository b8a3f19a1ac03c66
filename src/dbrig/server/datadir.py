"""Datadir ownership, snapshots and exact restores.

dbrig only ever deletes a directory that carries its own marker file,
``.dbrig-owned``, written when dbrig created the directory. A datadir that
somebody else made (``/var/lib/mysql``) is refused, whatever the scenario says.

Snapshots are full copies, never hard links: InnoDB and Aria write their
files in place, so a hard-linked "snapshot" changes with the live datadir.
Copies use ``cp --reflink=auto``: on XFS and btrfs that is a copy-on-write
clone (milliseconds), elsewhere an ordinary copy.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from dbrig import proc
from dbrig.errors import ServerError, UnsafePathError

MARKER = ".dbrig-owned"
_COPY_TIMEOUT_S = 3600


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
    done = proc.run(
        ["cp", "-a", "--reflink=auto", f"{src}/.", str(dst)],
        timeout_s=_COPY_TIMEOUT_S,
        stderr=None,
    )
    if done.returncode != 0:
        raise ServerError(f"copying {src} to {dst} failed (cp exit {done.returncode})")
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


def supports_reflink(directory: Path) -> bool:
    """Whether files in ``directory`` can be cloned copy-on-write (XFS, btrfs)."""
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".dbrig-reflink-") as tmp:
        src = Path(tmp) / "a"
        src.write_bytes(b"dbrig")
        code, _ = proc.capture(["cp", "--reflink=always", str(src), str(Path(tmp) / "b")])
        return code == 0


def filesystem_of(path: Path) -> dict[str, str]:
    """Filesystem type, source device and mount point holding ``path`` (from /proc/mounts)."""
    path = path.resolve()
    while not path.exists():
        path = path.parent
    best: tuple[str, str, str] = ("", "", "")
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return {}
    for line in mounts:
        source, target, fstype, *_ = line.split()
        target = target.replace("\\040", " ")
        is_parent = str(path) == target or str(path).startswith(target.rstrip("/") + "/")
        if is_parent and len(target) > len(best[1]):
            best = (source, target, fstype)
    source, target, fstype = best
    return {"device": source, "mount": target, "fstype": fstype}


def block_device_name(device: str) -> str | None:
    """The /sys/block name for a device path (``/dev/vda1`` -> ``vda``), if there is one."""
    name = Path(device).name
    if not name or not Path("/dev", name).exists():
        return None
    try:
        major_minor = os.stat(f"/dev/{name}").st_rdev
    except OSError:
        return None
    sys_dev = Path(f"/sys/dev/block/{os.major(major_minor)}:{os.minor(major_minor)}")
    if not sys_dev.exists():
        return None
    resolved = sys_dev.resolve()
    # A partition's parent directory is the whole disk.
    return resolved.parent.name if (resolved / "partition").exists() else resolved.name


def block_device_of(path: Path) -> str | None:
    """The /sys/block name of the device holding ``path``, from the path's own st_dev.

    Works where the mount source is not a /dev name of its own (``/dev/root``,
    ``/dev/mapper/vg-lv``: LVM gives ``dm-0``); falls back to the mount's source.
    """
    path = path.absolute()
    while not path.exists():
        path = path.parent
    dev = os.stat(path).st_dev
    sys_dev = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if os.major(dev) and sys_dev.exists():
        resolved = sys_dev.resolve()
        return resolved.parent.name if (resolved / "partition").exists() else resolved.name
    source = filesystem_of(path).get("device", "")
    return block_device_name(source) if source else None


def io_scheduler(block_device: str | None) -> str | None:
    """The active I/O scheduler of a block device (the bracketed entry), if readable."""
    if not block_device:
        return None
    try:
        text = Path(f"/sys/block/{block_device}/queue/scheduler").read_text()
    except OSError:
        return None
    for word in text.split():
        if word.startswith("["):
            return word.strip("[]")
    return text.strip() or None
