"""Host probing: CPU, memory, kernel, filesystem, block device, I/O scheduler, reflink.

What a result depends on besides the scenario. Saved in run.json so that
``compare`` can check two runs are comparable and a report can say where its
numbers came from. Read-only: nothing here changes the host.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import tempfile
from pathlib import Path
from typing import Any

import psutil

from dbrig import __version__, proc


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def host() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "os": _os_release(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "dbrig": __version__,
        "is_root": os.geteuid() == 0,
    }


def storage(path: Path) -> dict[str, Any]:
    fs = filesystem_of(path)
    device = block_device_of(path)
    return {
        **fs,
        "block_device": device,
        "io_scheduler": io_scheduler(device),
        "reflink": supports_reflink(path),
    }


def _os_release() -> str:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return platform.system()
    match = re.search(r'^PRETTY_NAME="?([^"\n]+)', text, re.MULTILINE)
    return match.group(1) if match else platform.system()


def tool_version(binary: Path | str, args: tuple[str, ...] = ("--version",)) -> str | None:
    code, out = proc.capture([str(binary), *args], timeout_s=10)
    if code != 0 or not out.strip():
        return None
    return out.strip().splitlines()[0]


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
    """The active I/O scheduler of a block device, if readable."""
    if not block_device:
        return None
    try:
        text = Path(f"/sys/block/{block_device}/queue/scheduler").read_text()
    except OSError:
        return None
    return parse_scheduler(text)[0]


def parse_scheduler(text: str) -> tuple[str | None, list[str]]:
    """(active, offered) from a ``queue/scheduler`` file: ``none [mq-deadline] kyber bfq``.

    The active one is bracketed; a device that offers only one shows it bare.
    """
    offered, active = [], None
    for word in text.split():
        name = word.strip("[]")
        offered.append(name)
        if word.startswith("["):
            active = name
    if active is None and len(offered) == 1:
        active = offered[0]
    return active, offered


def git_checkout(directory: Path) -> dict[str, str]:
    """The commit (and branch, unless detached) of the git checkout ``directory`` is in,
    so runs can be ordered by commit (``dbrig publish``); {} outside a checkout or
    without git. A dirty work tree is marked, since the commit then is not all that ran."""
    code, out = proc.capture(
        ["git", "-C", str(directory), "rev-parse", "HEAD", "--abbrev-ref", "HEAD"], timeout_s=10
    )
    lines = out.split()
    if code != 0 or len(lines) != 2 or not re.fullmatch(r"[0-9a-f]{40}", lines[0]):
        return {}
    found = {"commit": lines[0]}
    if lines[1] != "HEAD":
        found["branch"] = lines[1]
    code, status = proc.capture(
        ["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
        timeout_s=10,
    )
    if code == 0 and status.strip():
        found["dirty"] = "true"
    return found
