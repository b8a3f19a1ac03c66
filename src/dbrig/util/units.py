"""Numbers from text: MySQL-style sizes (``128M``) and lenient floats.

Both answer None rather than raise: callers read values from my.cnf, ``SHOW
GLOBAL VARIABLES``, YAML and CSV cells, where "not a number" is an ordinary case.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

# A number, an optional 1024-based suffix and an optional B: 134217728, 128M, 1.5g, 16MB.
# MySQL and MariaDB accept K, M, G, T, P and E in either case.
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtpe]?)b?\s*$", re.IGNORECASE)
_POWERS = "kmgtpe"


def parse_size(value: Any) -> int | None:
    """A size in bytes: ``128M`` -> 134217728; None if ``value`` is not a whole number of bytes.

    Suffixes are 1024-based as in MySQL; a fraction is fine when the bytes come out whole
    (``1.5G``). Numbers count as bytes; bools, negative numbers and text such as ``auto`` do not.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() and value >= 0 else None
    match = _SIZE.match(str(value))
    if not match:
        return None
    number, suffix = match.groups()
    scale = 1024 ** (_POWERS.index(suffix.lower()) + 1) if suffix else 1
    amount = Fraction(number) * scale  # exact: 18446744073709551615 stays itself
    return int(amount) if amount.denominator == 1 else None


def to_float(value: Any) -> float | None:
    """``value`` as a float; None for None, a bool, ``''``, NaN or anything float() refuses.

    Infinity stays infinity; callers that need a finite number check for it.
    """
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def size_text(size: float) -> str:
    """Bytes as a warning line shows them: ``1.5 GiB`` from 1 GiB up, else ``12.0 MiB``."""
    if size >= 2**30:
        return f"{size / 2**30:.1f} GiB"
    return f"{size / 2**20:.1f} MiB"
