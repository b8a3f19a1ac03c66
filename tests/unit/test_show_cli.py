"""`dbrig show` on the command line: filters, joint factors and what was pooled."""

from __future__ import annotations

import pytest

from dbrig.cli import main
from tests.helpers.files import COMPLETE


def dbrig(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(args)
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err


def test_where_keeps_only_the_matching_cells(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = dbrig(
        ["show", str(COMPLETE), "--where", "threads=1", "--format", "markdown"], capsys
    )
    assert code == 0, err
    cells = [line for line in out.splitlines() if line.startswith("| c0")]
    assert len(cells) == 2
    assert all("| 1 |" in line for line in cells)


def test_pivot_with_a_filter_says_what_was_fixed(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["show", str(COMPLETE), "--rows", "threads", "--columns", "cpu", "--metric", "tps"]
    code, out, err = dbrig([*args, "--where", "cpu=0"], capsys)
    assert code == 0, err
    assert "fixed: cpu=0" in out


def test_pivot_on_one_factor_refuses_to_pool_the_other(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["show", str(COMPLETE), "--rows", "threads", "--columns", "threads", "--metric", "tps"]
    code, _, err = dbrig(args, capsys)
    assert code == 2
    assert "average over cpu (2 values)" in err
    code, out, err = dbrig([*args, "--pool"], capsys)
    assert code == 0, err
    assert "averaged over cpu (2 values) (--pool)" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--where", "threads"], "--where threads: expected FACTOR=VALUE"),
        (["--where", "threads=9"], "no trial has threads=9"),
        (["--pool"], "--pool only applies to a pivot"),
    ],
)
def test_bad_show_options_exit_2(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = dbrig(["show", str(COMPLETE), *extra], capsys)
    assert code == 2
    assert message in err
