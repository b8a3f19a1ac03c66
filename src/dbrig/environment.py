"""What a result depends on besides the scenario: host, kernel, disk, versions.

Saved in run.json so that ``compare`` can check two runs are comparable and a
report can say where its numbers came from.
"""

from __future__ import annotations

import os
import platform
import re
import socket
from pathlib import Path
from typing import Any

import psutil

from dbrig import __version__, proc
from dbrig.server import datadir as dd


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
    fs = dd.filesystem_of(path)
    device = dd.block_device_of(path)
    return {
        **fs,
        "block_device": device,
        "io_scheduler": dd.io_scheduler(device),
        "reflink": dd.supports_reflink(path),
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
