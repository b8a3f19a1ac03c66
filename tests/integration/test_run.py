"""Whole runs through the command line: in-process, as a child process, and --dry-run."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from dbrig.endpoint import Endpoint
from dbrig.tools import sysbench
from tests.integration.helpers import (
    assert_complete_run,
    only_run_dir,
    run_dbrig,
    run_main,
    tiny_scenario,
    write_scenario,
)

FACTOR = "workload.sysbench.threads"
THREADS = [1, 2]
TWO_CELLS = tiny_scenario(matrix={FACTOR: THREADS})


def assert_result_table(text: str) -> None:
    assert "it: mean ±95% CI (CV) over repetitions" in text
    assert "threads" in text and "TPS" in text
    assert "c000" in text and "c001" in text


@pytest.mark.integration
def test_a_two_cell_run_in_process(
    tmp_path: Path, short_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = write_scenario(tmp_path / "two-cells.yaml", TWO_CELLS)
    result = run_main(["run", str(scenario), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    assert_complete_run(run, FACTOR, THREADS)
    assert_result_table(result.out)
    assert f"saved: {run}" in result.out
    assert "[1/2]" in result.err and "[2/2]" in result.err
    assert list(short_tmp.iterdir()) == [], "the socket directory was not removed"

    shown = run_main(["show", str(run)], capsys)
    assert shown.code == 0, shown.err
    assert_result_table(shown.out)


@pytest.mark.integration
def test_a_two_cell_run_as_a_child_process(tmp_path: Path, short_tmp: Path) -> None:
    scenario = write_scenario(tmp_path / "two-cells.yaml", TWO_CELLS)
    result = run_dbrig("run", scenario, "--out", tmp_path / "runs")
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    assert_complete_run(run, FACTOR, THREADS)
    assert_result_table(result.out)
    assert list(short_tmp.iterdir()) == [], "the socket directory was not removed"

    shown = run_dbrig("show", run)
    assert shown.code == 0, shown.err
    assert_result_table(shown.out)


@pytest.mark.integration
def test_dry_run_prints_each_cell_and_the_exact_command_and_creates_nothing(
    tmp_path: Path, short_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = write_scenario(tmp_path / "two-cells.yaml", TWO_CELLS)
    out = tmp_path / "runs"
    result = run_main(["run", str(scenario), "--out", str(out), "--dry-run"], capsys)
    assert result.code == 0, result.err
    lines = result.out.splitlines()

    assert lines[0].startswith("scenario it: 2 cells x 1 repetitions = 2 trials")
    for index, threads in enumerate(THREADS):
        header = f"c{index:03d} [default] threads={threads}"
        assert header in lines
        run_line = lines[lines.index(header) + 1 :]
        shown = next(ln for ln in run_line if ln.startswith("  run: "))
        argv = shlex.split(shown.removeprefix("  run: "))
        socket_arg = next(a for a in argv if a.startswith("--mysql-socket="))
        endpoint = Endpoint(user="root", database="sbtest", socket=socket_arg.split("=", 1)[1])
        options = {**TWO_CELLS["workload"]["sysbench"], "threads": threads}
        params = sysbench.SysbenchParams(**options)
        # The binary as the run resolves and records it, not a bare name.
        assert argv[0] == shutil.which("sysbench")
        assert argv == sysbench.build_command(params, endpoint, "run", binary=argv[0], warmup=1)
    assert any(ln.startswith("order: ") for ln in lines)

    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["two-cells.yaml"]
    assert list(short_tmp.iterdir()) == []


@pytest.mark.integration
def test_a_relative_out_directory_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The quickstart's default is out: runs, relative to where dbrig is started; mariadbd
    and mariadb-install-db resolve a relative datadir against /usr, not against that."""
    monkeypatch.chdir(tmp_path)
    write_scenario(tmp_path / "one.yaml", tiny_scenario())
    result = run_main(["run", "one.yaml", "--out", "runs", "--no-report"], capsys)
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    assert f"saved: {run}" in result.out
