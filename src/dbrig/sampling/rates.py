"""Pure arithmetic on psutil and status counters: deltas, per-second rates, MiB.

A result of None means "not known" (a missing or non-finite value, a counter that
went backwards); it becomes an empty CSV cell.
"""

from __future__ import annotations

import math
from typing import Any

from dbrig.util.units import to_float

MIB = 1024 * 1024


def _fields(snapshot: Any) -> dict[str, Any]:
    """A psutil namedtuple or a plain mapping, as a dict."""
    if hasattr(snapshot, "_asdict"):
        return snapshot._asdict()
    return dict(snapshot)


def _number(value: Any) -> float | None:
    """A finite number or None: an infinite counter is as unknown as a missing one."""
    number = to_float(value)
    return number if number is not None and math.isfinite(number) else None


def _delta(before: Any, after: Any) -> float | None:
    """after - before for a cumulative counter; None if unknown or it went backwards."""
    b, a = _number(before), _number(after)
    if b is None or a is None or a < b:
        return None
    return a - b


def _per_s(delta: float | None, elapsed_s: float, scale: float = 1.0) -> float | None:
    if delta is None or elapsed_s <= 0:
        return None
    return delta / elapsed_s / scale


def _mib(value: Any) -> float | None:
    number = _number(value)
    return None if number is None else number / MIB
