"""Factor names: the matrix's dotted paths and the short labels tables show for them."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any


def short_factor_names(paths: Sequence[str]) -> dict[str, str]:
    """The shortest dotted suffix that tells each factor apart: ``threads``, ``cpu_load``."""
    names: dict[str, str] = {}
    for path in paths:
        parts = path.split(".")
        for n in range(1, len(parts) + 1):
            candidate = ".".join(parts[-n:])
            clashes = [p for p in paths if p != path and p.split(".")[-n:] == parts[-n:]]
            if not clashes:
                names[path] = candidate
                break
        else:
            names[path] = path
    return names


_HOST_RANGE = re.compile(r"^\s*(\d+|nproc)\s*\.\.\s*(\d+|nproc)\s*$")


def host_values(values: list[Any], cpu_count: int | None = None) -> list[Any]:
    """Values sized to this machine: ``nproc`` is its core count, ``"0..nproc"`` a range.

    So one scenario file scales seed 000's "0, 2, 4, 6, 8 busy cores" to any host.
    """
    cores = cpu_count or os.cpu_count() or 1
    out: list[Any] = []
    for value in values:
        match = _HOST_RANGE.match(value) if isinstance(value, str) else None
        if match:
            low, high = (cores if g == "nproc" else int(g) for g in match.groups())
            out.extend(range(low, high + 1))
        elif value == "nproc":
            out.append(cores)
        else:
            out.append(value)
    return out
