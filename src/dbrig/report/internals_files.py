"""A trial's waits.csv, digests.csv, internals.out (``sampling/internals.py``) and profile.folded
(``sampling/profile.py``) as the reports read them: a file the trial does not have is
None (not an empty list: its waits are unknown, not none), one that cannot be read or
parsed raises :class:`BadFile` with one line naming the file and what was wrong."""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

from dbrig.analysis.profile import parse_folded

WAITS, DIGESTS, FOLDED = "waits.csv", "digests.csv", "profile.folded"
# internals.out is written whenever the internals sampler ran, even when it had nothing
# to complain of; its lines say why a part is missing.
INTERNALS_OUT = "internals.out"
WARNING_PREFIX = "internals: "
Number = Callable[[str], float]
# The columns the reports use, and how each must parse (str: any text).
WAIT_COLUMNS: Mapping[str, Number | type[str]] = {"event": str, "count": int, "wait_ms": float}
DIGEST_COLUMNS: Mapping[str, Number | type[str]] = {
    "schema": str,
    "digest": str,
    "count": int,
    "total_ms": float,
    "rows_examined": int,
    "text": str,
}

Rows = list[dict[str, str]]


class BadFile(Exception):
    """A trial's file that cannot be used: its message names the file, one line."""


def read_rows(path: Path, columns: Mapping[str, Number | type[str]]) -> Rows | None:
    """The file's rows (None: no such file), every one checked to have ``columns``,
    their numbers finite."""
    if not path.exists():
        return None
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise BadFile(f"{path.name}: no column {', '.join(missing)} in its header")
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise BadFile(f"{path.name}: unreadable ({exc})") from None
    for line, row in enumerate(rows, start=2):
        for column, kind in columns.items():
            _check(path, line, column, row.get(column), kind)
    return rows


def _check(path: Path, line: int, column: str, value: str | None, kind: object) -> None:
    if value is None:
        raise BadFile(f"{path.name}: line {line} is short (no {column})")
    if kind is str:
        return
    try:
        number = kind(value)  # type: ignore[operator]
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        what = "a whole number" if kind is int else "a number"
        raise BadFile(f"{path.name}: line {line}: {column} {value!r} is not {what}")


def internals_warnings(folder: Path) -> tuple[str, ...]:
    """The trial's internals warnings (internals.out), without their prefix."""
    try:
        lines = (folder / INTERNALS_OUT).read_text(errors="replace").splitlines()
    except OSError:
        return ()
    return tuple(line.removeprefix(WARNING_PREFIX) for line in lines if line.strip())


def read_folded(path: Path) -> tuple[Counter[str], int] | None:
    """The folded stacks (None: no such file) and how many lines were not
    ``stack count`` (left out)."""
    if not path.exists():
        return None
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise BadFile(f"{path.name}: unreadable ({exc.strerror or exc})") from None
    skipped = sum(1 for line in text.splitlines() if line.strip() and not _parses(line))
    return parse_folded(text), skipped


def _parses(line: str) -> bool:  # as parse_folded reads a line
    stack, _, count = line.rstrip().rpartition(" ")
    return bool(stack) and count.isdigit()
