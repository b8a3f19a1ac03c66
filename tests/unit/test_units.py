"""Tests for dbrig.util.units (sizes and lenient floats) and dbrig.util.files (atomic writes)."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

from dbrig.server.handles import normalise_setting
from dbrig.util.files import replacing, write_bytes_atomic, write_json_atomic, write_text_atomic
from dbrig.util.units import parse_size, to_float


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("134217728", 134217728),
        ("128M", 128 * 2**20),
        ("128m", 128 * 2**20),
        (" 64 K ", 64 * 1024),
        ("16MB", 16 * 2**20),
        ("2gb", 2 * 2**30),
        ("1T", 2**40),
        ("1P", 2**50),
        ("1E", 2**60),
        ("1.5G", 3 * 2**29),
        ("18446744073709551615", 2**64 - 1),  # exact, no float rounding
        (0, 0),
        (67108864, 67108864),
        (67108864.0, 67108864),
        ("0.1K", None),  # 102.4 bytes
        (0.5, None),
        (-1, None),
        ("-1M", None),
        ("128MiB", None),  # MySQL refuses it too
        ("1X", None),
        ("auto", None),
        ("", None),
        (None, None),
        (True, None),
        (math.nan, None),
        (math.inf, None),
    ],
)
def test_parse_size(value: object, expected: int | None) -> None:
    assert parse_size(value) == expected
    if expected is not None:
        assert isinstance(parse_size(value), int)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3.0),
        (2.5, 2.5),
        ("2.5", 2.5),
        (" 7 ", 7.0),
        ("-1e3", -1000.0),
        ("inf", math.inf),
        (None, None),
        ("", None),
        ("  ", None),
        ("nan", None),
        (math.nan, None),
        (float("nan"), None),
        ("12 ms", None),
        ("ON", None),
        (True, None),
        ([1], None),
    ],
)
def test_to_float(value: object, expected: float | None) -> None:
    assert to_float(value) == expected


def test_normalise_setting_still_matches_what_the_server_reports() -> None:
    assert normalise_setting("128M") == normalise_setting("134217728") == "134217728"
    assert normalise_setting("1.5k") == "1536"
    assert normalise_setting("0.5") == normalise_setting("0.500000") == "0.5"
    assert normalise_setting("1.0") == "1"
    assert normalise_setting("ON") == normalise_setting(1) == "1"
    assert normalise_setting("O_DIRECT") == "o_direct"


# --------------------------------------------------------------------------- atomic writes


def test_atomic_writes_replace_the_file(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text("old")
    write_text_atomic(path, "new ü")
    assert path.read_text(encoding="utf-8") == "new ü"
    write_bytes_atomic(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    write_json_atomic(path, {"b": 1, "a": Path("/x")})
    assert path.read_text() == '{\n  "b": 1,\n  "a": "/x"\n}\n'
    assert json.loads(path.read_text()) == {"b": 1, "a": "/x"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_a_failed_write_keeps_the_old_file_and_no_tmp(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_text("old")
    with pytest.raises(RuntimeError), replacing(path) as tmp:
        assert tmp == tmp_path / ".results.csv.tmp"
        tmp.write_text("half")
        raise RuntimeError("disk full")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]
    with pytest.raises(TypeError):
        write_json_atomic(path, {(1, 2): "tuple keys are not JSON"})
    assert path.read_text() == "old"


def test_util_imports_nothing_from_dbrig_but_errors() -> None:
    folder = Path(parse_size.__code__.co_filename).parent
    for source in folder.glob("*.py"):
        tree = ast.parse(source.read_text())
        modules = {
            node.module if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        assert {m for m in modules if m and m.startswith("dbrig")} <= {"dbrig.errors"}, source
