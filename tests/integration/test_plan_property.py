"""The dry run and the run build one plan: they accept the same scenarios, refuse the
same ones with the same line, and the commands the dry run prints are the ones the run
records.

Scenarios are generated from the schema's parts (tests/helpers/scenarios.py): matrix
blocks of different tests, faults, a clone workspace, client hosts, managed and external
servers, interference. The dry run goes through ``dbrig run --dry-run``; the run through
the planning ``dbrig run`` does before it creates the run directory
(``commands.run.planned``). A sample of small generated scenarios is then really run and
each trial.json's commands compared with the plan's.
"""

from __future__ import annotations

import functools
import os
import random
import re
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dbrig import proc
from dbrig.commands.run import planned
from dbrig.endpoint import Endpoint
from dbrig.errors import DbrigError
from dbrig.host import probe
from dbrig.run import preflight
from dbrig.run.commands import trial_commands
from dbrig.run.plan import CellRun, RunPlan
from dbrig.run.remote import cell_host
from dbrig.run.workdir import WorkDirHandle
from dbrig.scenario import ManagedServer
from tests.helpers.scenarios import PASSWORD_ENV, password, scenario
from tests.integration.helpers import only_run_dir, read_json, run_main, write_scenario

EXAMPLES = 500
_SOCKET = re.compile(r"--mysql-socket=(\S+)/mysqld\.sock")
PLACEHOLDER = "--mysql-socket=<sandbox>/mysqld.sock"


@pytest.fixture(scope="module")
def closed_port() -> Iterator[int]:
    """Bound and never listened on: an external server or ssh there is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def probes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server binary and tool versions are asked once: the same answer every example,
    without a process start each (the checks themselves all still run)."""
    monkeypatch.setattr(preflight, "find_server", functools.cache(preflight.find_server))
    monkeypatch.setattr(probe, "tool_version", functools.cache(probe.tool_version))


def _refusal(path: Path, out: Path, keep_data: bool) -> tuple[RunPlan | None, str | None]:
    """The run's plan, or the line it refuses with."""
    try:
        return planned(path, out=out, keep_data=keep_data), None
    except DbrigError as exc:
        return None, str(exc)


def _run_lines(text: str) -> dict[str, str]:
    """Each cell's ``run:`` line from the printed plan."""
    lines: dict[str, str] = {}
    cell = ""
    for line in text.splitlines():
        if re.match(r"^c\d{3} ", line):
            cell = line.split()[0]
        elif line.startswith("  run: "):
            lines[cell] = line.removeprefix("  run: ")
    return lines


def _planned_commands(cell: CellRun) -> dict[str, list[str]]:
    roles = {i.role: i.argv for i in cell.commands.interference}
    return {
        "workload": proc.redact(cell.commands.argv),
        **{r: proc.redact(a) for r, a in roles.items()},
    }


def _as_the_run_builds_them(resolved: RunPlan, cell: CellRun, out: Path) -> dict[str, list[str]]:
    """What a trial of the cell records: trial.py's trial_commands with the endpoint its
    handle gives (a work folder's, or a started sandbox's socket, put back as the
    placeholder the plan shows until the server exists)."""
    database = cell.workload.database
    if cell.server is None:
        endpoint = WorkDirHandle("none", out).endpoint(database)
    else:
        endpoint = Endpoint(user="root", database=database, socket=str(out / "s/mysqld.sock"))
    commands = trial_commands(
        cell.cell.scenario, endpoint, resolved.tools.workload, resolved.tools.interference
    )
    roles = {i.role: proc.redact(i.argv) for i in commands.interference}
    workload = [_SOCKET.sub(PLACEHOLDER, word) for word in proc.redact(commands.argv)]
    return {"workload": workload, **roles}


def _comparable(cell: CellRun) -> bool:
    """A local managed or no-server cell: its commands are built here with a known endpoint."""
    spec = cell.cell.scenario.server_specs[cell.cell.server]
    return cell_host(cell.cell) is None and isinstance(spec, ManagedServer) and spec.host is None


@pytest.mark.fresh_data_sets  # the dry run as a user without a cache prints it
@pytest.mark.integration
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_the_dry_run_accepts_exactly_what_the_run_plans_and_shows_its_commands(
    data: st.DataObject,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    closed_port: int,
    probes_once: None,
) -> None:
    def pick(options: Sequence[Any]) -> Any:
        return data.draw(st.sampled_from(list(options)))

    raw = scenario(pick, closed_port)
    keep_data = pick([False, False, True])
    os.environ[PASSWORD_ENV] = password(pick)
    path = write_scenario(tmp_path / "gen.yaml", raw)
    out = tmp_path / "runs"
    flags = ["--keep-data"] if keep_data else []

    dry = run_main(["run", str(path), "--dry-run", "--out", str(out), *flags], capsys)
    resolved, refused = _refusal(path, out, keep_data)
    assert not out.exists()
    event("planned" if refused is None else "refused")  # --hypothesis-show-statistics
    if refused is not None:
        assert dry.code == 2, (refused, dry.out, dry.err)
        assert dry.err.strip("\n").splitlines() == [f"dbrig: error: {refused}"]
        return
    assert dry.code == 0, dry.err
    assert resolved is not None
    printed = _run_lines(dry.out)
    assert set(printed) == set(resolved.cells)
    for cell_id, cell in resolved.cells.items():
        if not _comparable(cell):
            continue
        assert printed[cell_id] == " ".join(proc.redact(cell.commands.argv))
        assert _as_the_run_builds_them(resolved, cell, tmp_path) == _planned_commands(cell)


# Seeds whose small scenario is accepted: cells of hardware tests (fileio, cpu, memory) with
# no server and stress-ng beside them, and a server's cells of two tests.
REAL_RUN_SEEDS = [0, 5, 14]


@pytest.mark.integration
@pytest.mark.parametrize("seed", REAL_RUN_SEEDS)
def test_a_generated_run_records_the_commands_of_its_plan(
    seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = scenario(random.Random(seed).choice, 1, small=True)
    raw["seed"] = 7
    path = write_scenario(tmp_path / "gen.yaml", raw)
    out = tmp_path / "runs"
    resolved = planned(path, out=out)
    assert len(resolved.trials) <= 4, "keep the sample short: choose another seed"

    done = run_main(["run", str(path), "--out", str(out), "--no-report"], capsys)
    assert done.code == 0, done.err
    run = only_run_dir(out)
    for trial in resolved.trials:
        recorded = read_json(run / "trials" / trial.id / "trial.json")["commands"]
        recorded["workload"] = [_SOCKET.sub(PLACEHOLDER, w) for w in recorded["workload"]]
        assert recorded == _planned_commands(resolved.of(trial))
