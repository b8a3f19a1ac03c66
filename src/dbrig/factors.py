"""Factor names: the matrix's dotted paths and the short labels tables show for them."""

from __future__ import annotations

from collections.abc import Sequence


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
