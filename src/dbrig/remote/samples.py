"""A remote trial's sampler files, put together so they read like a local trial's.

In a local trial one host sampler sees the server's host and every process. With
the server on another host two samplers run: the agent's, on the server's host
(CPU, disks, memory and the ``server`` processes), and dbrig's own, on the client's
host (the ``workload`` and interference processes), which writes into ``client/``.
The trial folder then gets the same files, columns and summary keys as a local
trial: cpu.csv, disk.csv and memory.csv are the server host's; procs.csv holds the
server's rows and the client's; sampler.csv holds every sampler's own cost (the
client's host sampler as ``client-host``). ``client/`` keeps the client host's
cpu.csv, disk.csv and memory.csv, which no summary key reads.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path

from dbrig.sampling.registry import CLIENT_FOLDER

HOST_FILES = ("cpu.csv", "disk.csv", "memory.csv")
CLIENT_SAMPLER = "client-host"


def merge_remote_samples(folder: Path, remote: Mapping[str, str]) -> None:
    """Write the agent's files (name -> CSV text) into ``folder`` beside the client's."""
    client = folder / CLIENT_FOLDER
    for name in HOST_FILES:
        if name in remote:
            (folder / name).write_text(remote[name])
    _append_rows(folder / "procs.csv", [remote.get("procs.csv", ""), _text(client / "procs.csv")])
    client_costs = _renamed(_text(client / "sampler.csv"), "sampler", CLIENT_SAMPLER)
    _append_rows(folder / "sampler.csv", [remote.get("sampler.csv", ""), client_costs])
    for name in ("procs.csv", "sampler.csv"):
        (client / name).unlink(missing_ok=True)


def _text(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


def _append_rows(target: Path, sources: list[str]) -> None:
    """Append every source's rows to ``target`` under one header (the first one seen)."""
    existing = _text(target)
    header: list[str] | None = None
    rows: list[dict[str, str]] = []
    for text in [existing, *sources]:
        reader = csv.DictReader(io.StringIO(text))
        if reader.fieldnames is None:
            continue
        header = header or list(reader.fieldnames)
        rows.extend(reader)
    if header is None:
        return
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    target.write_text(out.getvalue())


def _renamed(text: str, column: str, value: str) -> str:
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None:
        return ""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=reader.fieldnames, lineterminator="\n")
    writer.writeheader()
    writer.writerows({**row, column: value} for row in reader)
    return out.getvalue()
