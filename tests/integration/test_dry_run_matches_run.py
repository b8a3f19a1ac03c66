"""``--dry-run`` prints the exact commands, seed and order that the real run then uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.integration.helpers import (
    only_run_dir,
    read_json,
    run_main,
    tiny_scenario,
    write_scenario,
)

_SOCKET = re.compile(r"--mysql-socket=(\S+)/mysqld\.sock")


def _dry_run(text: str) -> tuple[int, list[str], dict[str, dict[str, list[str]]]]:
    """The seed, the trial order and each cell's commands by role, from the printed plan."""
    seed = int(re.search(r"\(seed (\d+)", text).group(1))
    order = next(ln for ln in text.splitlines() if ln.startswith("order: ")).split()[1:]
    cells: dict[str, dict[str, list[str]]] = {}
    cell = ""
    for line in text.splitlines():
        if re.match(r"^c\d{3} ", line):
            cell = line.split()[0]
            cells[cell] = {}
        for role in ("run", "interference"):
            if line.startswith(f"  {role}: "):
                cells[cell][role] = line.split(": ", 1)[1].split(" ")
    return seed, order, cells


def _with_placeholders(argv: list[str]) -> list[str]:
    """The sandbox's socket directory is only known once it exists: print it as the dry run."""
    return [_SOCKET.sub("--mysql-socket=<sandbox>/mysqld.sock", arg) for arg in argv]


@pytest.mark.integration
def test_every_recorded_command_is_the_one_the_dry_run_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tiny_scenario(
        interference={"stress-ng": {"cpu": 1, "cpu_load": 30}},
        matrix={"workload.sysbench.threads": [1, 2]},
        repeat=2,
        warmup=0,  # only the commands are compared: the shortest trials do
    )
    scenario["workload"]["sysbench"]["time"] = 1
    del scenario["seed"]  # chosen by dbrig: the dry run shows it, --seed reruns its order
    path = write_scenario(tmp_path / "same.yaml", scenario)

    dry = run_main(["run", str(path), "--dry-run"], capsys)
    assert dry.code == 0, dry.err
    seed, order, planned = _dry_run(dry.out)

    out = ["--out", str(tmp_path / "runs"), "--no-report", "--seed", str(seed)]
    done = run_main(["run", str(path), *out], capsys)
    assert done.code == 0, done.err
    run = only_run_dir(tmp_path / "runs")
    meta = read_json(run / "run.json")
    assert meta["seed"] == seed
    assert meta["trials"] == order

    for trial_id in order:
        trial = read_json(run / "trials" / trial_id / "trial.json")
        recorded = trial["commands"]
        cell = planned[trial["cell"]]
        assert _with_placeholders(recorded["workload"]) == cell["run"]
        assert recorded["interference"] == cell["interference"]
