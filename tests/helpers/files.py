"""The saved runs under tests/fixtures and the files tests read back."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RUNS = FIXTURES / "runs"
COMPLETE = RUNS / "small-20261121-235548"
FAILED = RUNS / "small-failed"
COMPARE_RUNS = RUNS / "compare"


def copy_run(source: Path, tmp_path: Path) -> Path:
    """A copy of a saved run, under its own name in ``tmp_path``, for a test to change."""
    target = tmp_path / source.name
    shutil.copytree(source, target)
    return target


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))
