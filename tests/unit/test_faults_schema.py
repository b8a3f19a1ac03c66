"""The scenario's faults: block: what it accepts, and one-line errors before anything runs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dbrig.errors import EXIT_BAD_INPUT, ConfigError
from dbrig.scenario import load

SCENARIO = """\
name: f
workload:
  sysbench: {test: oltp_write_only, time: 8}
warmup: 1
"""


def plan(tmp_path: Path, extra: str):
    path = tmp_path / "f.yaml"
    path.write_text(SCENARIO + textwrap.dedent(extra))
    return load(path)


def error(tmp_path: Path, extra: str) -> str:
    with pytest.raises(ConfigError) as info:
        plan(tmp_path, extra)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / 'f.yaml'}: ")
    assert info.value.exit_code == EXIT_BAD_INPUT
    return message.split(": ", 1)[1]


def test_a_kill_and_its_defaults(tmp_path: Path) -> None:
    faults = plan(tmp_path, "faults: {kill_server: {at: 3}}").scenario.faults
    assert faults.kill_server is not None
    assert (faults.kill_server.signal, faults.kill_server.at) == ("KILL", 3)
    assert faults.kill_server.timeout == 120 and faults.ends_client


def test_a_freeze_lasts_for_seconds(tmp_path: Path) -> None:
    fault = plan(tmp_path, "faults: {kill_server: {signal: STOP, at: 1, for: 2}}").scenario.faults
    assert fault.kill_server is not None and fault.kill_server.frozen_s == 2
    assert not fault.ends_client


def test_the_signal_is_a_matrix_factor(tmp_path: Path) -> None:
    cells = plan(
        tmp_path,
        """\
        faults: {kill_server: {at: 3}}
        matrix: {faults.kill_server.signal: [KILL, TERM]}
        """,
    ).cells
    assert [c.scenario.faults.kill_server.signal for c in cells] == ["KILL", "TERM"]


def test_faults_fire_in_time_order(tmp_path: Path) -> None:
    text = "faults: {kill_server: {at: 3}, delete_file: {path: sbtest/sbtest1.ibd, at: 1}}"
    assert list(plan(tmp_path, text).scenario.faults.given) == ["delete_file", "kill_server"]


@pytest.mark.parametrize(
    "extra, expected",
    [
        (
            "faults: {kill_server: {signal: HUP, at: 1}}",
            "faults.kill_server.signal: Input should be 'KILL', 'TERM' or 'STOP' (got 'HUP')",
        ),
        (
            "faults: {kill_server: {signal: TERM, at: 1, for: 2}}",
            "faults.kill_server: 'for' is the length of a STOP (freeze); a TERM has none",
        ),
        (
            "faults: {kill_server: {at: 8}}",
            "faults: kill_server.at = 8 s is not inside the 8 s measured window",
        ),
        (
            "faults: {kill_server: {signal: STOP, at: 4}}",  # for: 5 by default
            "faults: kill_server.at + for = 9 s is not inside the 8 s measured window",
        ),
        ("faults: {kill_client: {at: -1}}", "faults.kill_client.at: Input should be greater"),
        (
            "faults: {delete_file: {path: ../x, at: 1}}",
            "faults.delete_file.path: expected a path relative to the datadir",
        ),
        ("faults: {kill_server: {}}", "faults.kill_server.at: required key is missing"),
        ("faults: {disk_ful: {at: 1}}", "faults.disk_ful: unknown key"),
        (
            "faults: {disk_full: {at: 1}}",
            "faults: disk_full: give its size (e.g. size: 1G): dbrig fills only a filesystem",
        ),
        (
            "faults: {disk_full: {at: 1, size: 1G}}\nworkspace: {image: 2G}",
            "faults: disk_full.size 1G differs from workspace.image 2G",
        ),
        ("faults: {disk_full: {at: 1, size: lots}}", "faults.disk_full.size: expected a size"),
        (
            "faults: {disk_full: {at: 5, for: 3, size: 1G}}",
            "faults: disk_full.at + for = 8 s is not inside the 8 s measured window",
        ),
    ],
)
def test_bad_faults(tmp_path: Path, extra: str, expected: str) -> None:
    assert error(tmp_path, extra).startswith(expected)


def test_a_full_disk_on_the_workspace(tmp_path: Path) -> None:
    text = "faults: {disk_full: {at: 1, for: 2}}\nworkspace: {image: 1G}"
    fault = plan(tmp_path, text).scenario.faults.disk_full
    assert fault is not None and fault.for_ == 2 and fault.size_bytes is None


def test_no_faults_on_an_external_server(tmp_path: Path) -> None:
    message = error(
        tmp_path,
        """\
        server: {kind: external, user: bench, reset: none}
        faults: {kill_server: {at: 1}}
        """,
    )
    assert message.startswith("faults: server 'default' is external: dbrig does not own it")


def test_faults_need_a_time_limit(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text(
        "name: f\nworkload: {sysbench: {test: oltp_write_only, time: 0, events: 100}}\n"
        "faults: {kill_client: {at: 1}}\n"
    )
    with pytest.raises(ConfigError, match="faults: faults need a time-limited workload"):
        load(path)


def test_a_cell_whose_fault_falls_outside_its_window_is_named(tmp_path: Path) -> None:
    message = error(
        tmp_path,
        """\
        faults: {kill_server: {at: 3}}
        matrix: {workload.sysbench.time: [8, 2]}
        """,
    )
    assert "time=2" in message and "kill_server.at = 3 s is not inside the 2 s" in message


def _acked(tmp_path: Path, faults: str) -> Path:
    path = tmp_path / "f.yaml"
    path.write_text(f"name: f\nworkload:\n  acked_writes: {{time: 8}}\nfaults: {faults}\n")
    return path


def test_a_client_that_reconnects_itself_rides_through_a_kill(tmp_path: Path) -> None:
    faults = load(_acked(tmp_path, "{kill_server: {at: 3}}")).scenario.faults
    assert faults.kill_server is not None and faults.ends_client


def test_a_killed_client_that_cannot_be_started_again_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be started again after a fault"):
        load(_acked(tmp_path, "{kill_client: {at: 3}}"))


def test_faults_need_the_client_on_this_machine(tmp_path: Path) -> None:
    message = error(
        tmp_path,
        """\
        hosts: {load1: {ssh: bench@load1}}
        faults: {kill_server: {at: 3}}
        matrix: {workload.sysbench.host: [load1]}
        """,
    )
    assert "faults need the client on this machine" in message and "load1" in message
