"""Cells whose own workload needs no server run with none, whatever the base block says.

The base block names only ``time`` (its test would need a server); every matrix block
chooses a hardware test. The run starts no server and leaves nothing outside the run
directory and dbrig's work folder (sysbench fileio's files included), and run.json says
per cell what ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.helpers import only_run_dir, read_json, run_main, write_scenario

FILEIO = {
    "workload.sysbench.test": ["fileio"],
    "workload.sysbench.file_test_mode": ["rndrw"],
    "workload.sysbench.file_total_size": ["16M"],
    "workload.sysbench.file_num": [2],
}


def _everything_under(folder: Path) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob("*")}


@pytest.mark.integration
@pytest.mark.parametrize(
    "blocks",
    [
        [{"workload.sysbench.test": ["cpu"]}, {"workload.sysbench.test": ["memory"]}],
        [{"workload.sysbench.test": ["cpu"]}, FILEIO],
    ],
    ids=["cpu-memory", "cpu-fileio"],
)
def test_hardware_cells_start_no_server_and_leave_nothing_behind(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    blocks: list[dict[str, list]],
) -> None:
    here = tmp_path / "here"
    here.mkdir()
    scenario = {"name": "repro-noserver", "workload": {"sysbench": {"time": 2}}, "matrix": blocks}
    write_scenario(here / "repro.yaml", scenario)
    monkeypatch.chdir(here)  # where a user runs it: the run directory goes in ./runs
    before = _everything_under(here)

    dry = run_main(["run", "repro.yaml", "--dry-run"], capsys)
    assert dry.code == 0, dry.err
    assert dry.out.count("  no server: sysbench ") == 2
    assert "managed set-ups" not in dry.out  # no restore, start or stop to time

    done = run_main(["run", "repro.yaml", "--no-report"], capsys)
    assert done.code == 0, done.err
    run = only_run_dir(here / "runs")
    new = _everything_under(here) - before
    outside = {p for p in new if not (here / p).is_relative_to(run) and p != Path("runs")}
    assert not outside, f"left outside the run directory: {sorted(map(str, outside))}"
    assert not (run / "servers").exists()
    log = (run / "dbrig.log").read_text()
    assert "mariadbd" not in log and "mariadb-install-db" not in log

    meta = read_json(run / "run.json")
    assert not meta.get("servers")
    cells = {c["cell"]: c["factors"]["workload.sysbench.test"] for c in meta["cells"]}
    notes = meta["environment"]["cell_servers"]
    assert notes == {cell: f"no server: sysbench {test} needs none" for cell, test in cells.items()}
    assert meta["environment"]["server"].startswith("no server: sysbench ")
    for trial in meta["trials"]:
        commands = read_json(run / "trials" / trial / "trial.json")["commands"]
        assert list(commands) == ["workload"]
        assert not any("mysql" in word for word in commands["workload"])
