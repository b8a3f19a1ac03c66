"""``workload.<tool>.cpus``: the client runs under taskset, is checked against the host,
and the report says where it ran and warns when it shares the server's cores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbrig.endpoint import Endpoint
from dbrig.errors import ConfigError
from dbrig.report import run_warnings
from dbrig.run.commands import trial_commands
from dbrig.run.preflight import check_host
from dbrig.scenario import plan_from_dict
from tests.helpers.files import COMPLETE, copy_run

ENDPOINT = Endpoint(socket="/tmp/s.sock", user="root", database="sbtest")


def _plan(workload: dict, **extra: object):
    return plan_from_dict({"name": "pin", "workload": workload, **extra}, seed=1)


@pytest.mark.parametrize(
    "workload",
    [
        {"sysbench": {"cpus": [1], "time": 5}},
        {"mysqlslap": {"cpus": [1], "number_of_queries": 10}},
        {"tpcc": {"cpus": [1], "warehouses": 1, "time": 5}},
    ],
)
def test_every_workload_tool_runs_its_client_under_taskset(workload: dict) -> None:
    cell = _plan(workload).cells[0]
    argv = trial_commands(cell.scenario, ENDPOINT, Path("/usr/bin/tool"), {}).argv
    assert argv[:4] == ["taskset", "-c", "1", "/usr/bin/tool"]


def test_an_unpinned_client_runs_as_before() -> None:
    cell = _plan({"sysbench": {"time": 5}}).cells[0]
    assert trial_commands(cell.scenario, ENDPOINT, Path("/usr/bin/sysbench"), {}).argv[0] == (
        "/usr/bin/sysbench"
    )


@pytest.mark.parametrize(
    ("cpus", "message"),
    [([0, 0], "a core is listed twice"), ([], "at least one core"), ([-1], "start at 0")],
)
def test_bad_cores_are_one_line_naming_the_key(cpus: list[int], message: str) -> None:
    with pytest.raises(ConfigError, match=rf"workload\.sysbench\.cpus.*{message}"):
        _plan({"sysbench": {"cpus": cpus}})


def test_a_core_the_host_lacks_is_refused_before_anything_runs() -> None:
    plan = _plan({"sysbench": {"time": 5}}, matrix={"workload.sysbench.cpus": [[0], [4096]]})
    with pytest.raises(ConfigError, match=r"workload\.sysbench\.cpus: core 4096 does not exist"):
        check_host(plan, None, Path("/usr/bin/sysbench"), {}, strict=False)


def _pinned_run(tmp_path: Path, server_cpus: list[int] | None, client_cpus: list[int] | None):
    run = copy_run(COMPLETE, tmp_path)
    meta = json.loads((run / "run.json").read_text())
    scenario = meta["scenario"]
    scenario["server"] = {**(scenario.get("server") or {}), "cpus": server_cpus}
    scenario["workload"]["sysbench"]["cpus"] = client_cpus
    (run / "run.json").write_text(json.dumps(meta))
    return run


def _placement(run: Path) -> list[str]:
    return [w.message for w in run_warnings(run) if w.code == "client_placement"]


def test_a_pinned_server_with_an_unpinned_client_is_warned(tmp_path: Path) -> None:
    (message,) = _placement(_pinned_run(tmp_path, [0], None))
    assert "the server is pinned to cores 0 and the client is not in every cell" in message
    assert "workload.sysbench.cpus" in message


def test_client_and_server_on_the_same_core_is_warned(tmp_path: Path) -> None:
    (message,) = _placement(_pinned_run(tmp_path, [0, 1], [1]))
    assert "client and server both pinned to cores 1" in message


def test_client_pinned_apart_is_quiet_and_the_report_says_where_it_ran(tmp_path: Path) -> None:
    from dbrig.report import write_report

    run = _pinned_run(tmp_path, [0], [1])
    assert _placement(run) == []
    page = write_report(run).read_text()
    assert "Client placement" in page and "pinned to cores 1 (taskset)" in page
