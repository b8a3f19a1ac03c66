"""``system:`` for a managed server on another host: the agent's call, the original
values it keeps in the server's folder, and preflight's split between here and there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import dbrig
from dbrig.errors import ConfigError
from dbrig.host.settings import BlockDevice, SystemSettings, SystemState
from dbrig.remote import probe, protocol
from dbrig.remote.agent import Agent
from dbrig.remote.server import RemoteServerHandle
from dbrig.run.preflight import _check_system
from dbrig.run.remote_servers import on_host, system_blocks
from dbrig.scenario import ManagedServer
from dbrig.scenario.load import plan_from_dict


def fake_device(root: Path) -> BlockDevice:
    queue = root / "block" / "vdz" / "queue"
    queue.mkdir(parents=True)
    (queue / "scheduler").write_text("none [mq-deadline] kyber\n")
    (queue / "read_ahead_kb").write_text("128\n")
    return BlockDevice("vdz", sys_root=root)


def test_the_original_values_are_kept_in_the_memo_for_a_process_that_outlives_a_kill(
    tmp_path: Path,
) -> None:
    device = fake_device(tmp_path)
    memo = tmp_path / "memo.json"
    killed = SystemState(device, drop_caches_file=tmp_path / "drop", memo=memo)
    killed.apply(SystemSettings(io_scheduler="kyber", read_ahead_kb=64))
    assert json.loads(memo.read_text()) == {
        "io_scheduler": "mq-deadline",
        "read_ahead_kb": 128,
        "device": "vdz",
    }
    # The next one (the next agent of the folder) puts back the first one's originals...
    successor = SystemState(device, memo=memo)
    successor.apply(SystemSettings(read_ahead_kb=32))
    assert json.loads(memo.read_text())["read_ahead_kb"] == 128, "not the changed 64"
    successor.restore()
    assert device.scheduler()[0] == "mq-deadline" and device.read_ahead_kb() == 128
    assert not memo.exists(), "...and the memo goes with them"


def test_the_next_run_puts_back_what_a_killed_dbrig_left_changed_here(tmp_path: Path) -> None:
    import subprocess

    from dbrig.host.settings import MEMO_PREFIX, restore_orphaned, run_memo

    device = fake_device(tmp_path / "sys")
    dead = subprocess.Popen(["true"])
    dead.wait()
    killed = SystemState(device, drop_caches_file=tmp_path / "drop", memo=run_memo(tmp_path))
    killed.apply(SystemSettings(io_scheduler="kyber", read_ahead_kb=64))
    left = run_memo(tmp_path).rename(tmp_path / f"{MEMO_PREFIX}{dead.pid}.json")  # "killed"
    running = SystemState(device, memo=run_memo(tmp_path))  # this process: alive
    running.apply(SystemSettings(read_ahead_kb=64))

    said = restore_orphaned(tmp_path, sys_root=tmp_path / "sys")

    assert said == [
        f"put back io_scheduler=mq-deadline, read_ahead_kb=128 on vdz, left changed by "
        f"dbrig pid {dead.pid}"
    ]
    assert device.scheduler()[0] == "mq-deadline" and device.read_ahead_kb() == 128
    assert not left.exists() and run_memo(tmp_path).exists(), "a live dbrig's memo stays"


def test_an_unreadable_memo_is_no_original(tmp_path: Path) -> None:
    memo = tmp_path / "memo.json"
    memo.write_text("{not json")
    state = SystemState(fake_device(tmp_path), memo=memo)
    assert state.apply(SystemSettings()) == {}


def _agent_with(device: BlockDevice, tmp_path: Path) -> Agent:
    agent = Agent()
    agent.system = SystemState(device, drop_caches_file=tmp_path / "drop", memo=tmp_path / "m")
    return agent


def test_the_handle_sets_a_cells_settings_through_the_agent_and_gets_the_read_back(
    tmp_path: Path,
) -> None:
    device = fake_device(tmp_path / "sys")
    agent = _agent_with(device, tmp_path)
    handle = RemoteServerHandle(
        "db", ManagedServer(host="db1"), tmp_path, prefix=[], address="10.0.0.5", remote_home="h"
    )
    sent: list[tuple[str, dict[str, Any]]] = []

    def call(op: str, timeout_s: float = 0, **args: Any) -> Any:
        sent.append((op, args))
        return protocol.decode_response(agent.handle_line(protocol.encode_request(op, args)))

    handle.call = call  # type: ignore[method-assign]  # the wire, without ssh
    applied = handle.apply_system(SystemSettings(read_ahead_kb=64, drop_caches=True))
    assert applied == {"read_ahead_kb": 64, "drop_caches": True}
    assert sent[0][0] == "system_apply"
    assert (tmp_path / "drop").read_text() == "3\n" and device.read_ahead_kb() == 64
    assert handle.apply_system(SystemSettings()) == {"read_ahead_kb": 128}, "the original"


def test_the_agent_puts_the_originals_back_when_dbrig_is_gone(tmp_path: Path) -> None:
    """stop_everything is what the agent does at its stdin's end, a signal, or close."""
    device = fake_device(tmp_path / "sys")
    agent = _agent_with(device, tmp_path)
    line = protocol.encode_request("system_apply", {"settings": {"io_scheduler": "kyber"}})
    assert protocol.decode_response(agent.handle_line(line)) == {"io_scheduler": "kyber"}
    assert (tmp_path / "m").exists()
    agent.stop_everything()
    assert device.scheduler()[0] == "mq-deadline"
    assert not (tmp_path / "m").exists()


def test_a_refusal_names_the_host_after_its_key() -> None:
    label = "hosts.db1 (root@db1)"
    assert (
        on_host("system.io_scheduler: 'x' is not offered by vda (expected one of: none)", label)
        == "system.io_scheduler: hosts.db1 (root@db1): 'x' is not offered by vda "
        "(expected one of: none)"
    )
    assert (
        on_host("system: ... needs root", label) == "system: hosts.db1 (root@db1): ... needs root"
    )
    assert on_host("odd", label) == "system: hosts.db1 (root@db1): odd"


def _remote_plan(**system: Any) -> Any:
    return plan_from_dict(
        {
            "name": "x",
            "hosts": {"db1": {"ssh": "root@db1"}},
            "servers": {"here": {}, "there": {"host": "db1"}},
            "matrix": {"server": ["here", "there"]},
            "workload": {"sysbench": {}},
            "system": system,
        }
    )


def test_preflight_checks_here_only_the_cells_whose_data_is_here(tmp_path: Path) -> None:
    plan = _remote_plan(io_scheduler="nosuch")
    assert system_blocks(plan, "there") == [
        {"io_scheduler": "nosuch", "read_ahead_kb": None, "drop_caches": False}
    ]
    with pytest.raises(ConfigError, match=r"system.io_scheduler|system: "):
        _check_system(plan, tmp_path)  # the cell on 'here' is checked against this machine
    remote_only = plan_from_dict(
        {
            "name": "x",
            "hosts": {"db1": {"ssh": "root@db1"}},
            "server": {"host": "db1"},
            "workload": {"sysbench": {}},
            "system": {"io_scheduler": "nosuch"},
        }
    )
    _check_system(remote_only, tmp_path)  # db1's probe checks it, not this machine
    assert system_blocks(_remote_plan(), "there") == []


def test_the_probe_checks_the_system_blocks_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = [{"io_scheduler": "nosuch"}]
    probe.main(["--system", json.dumps(blocks), "--home", str(tmp_path / "not-yet")])
    answer = json.loads(capsys.readouterr().out)
    assert answer["version"] == dbrig.__version__
    # Not offered, no queue or not root, depending on the machine: refused in any case.
    assert answer["system"]["error"].startswith("system"), answer
    probe.main([])
    assert "system" not in json.loads(capsys.readouterr().out)


def test_the_dry_run_says_on_which_host_a_cells_settings_act() -> None:
    from dbrig.run.dryrun import describe_commands

    plan = _remote_plan(drop_caches=True)
    lines = [ln for ln in describe_commands(plan, plan.short_names()) if "system:" in ln]
    assert lines == [
        "  system: drop_caches=True",
        "  system: drop_caches=True (on hosts.db1, under its datadir there)",
    ]


def test_two_servers_on_one_host_cannot_share_its_disk_settings() -> None:
    from dbrig.run.remote_servers import check_server_hosts

    plan = plan_from_dict(
        {
            "name": "x",
            "hosts": {"db1": {"ssh": "root@db1"}},
            "servers": {"a": {"host": "db1"}, "b": {"host": "db1"}},
            "matrix": {"server": ["a", "b"]},
            "workload": {"sysbench": {}},
            "system": {"read_ahead_kb": 256},
        }
    )
    # Refused before any connection is tried (db1 does not exist).
    with pytest.raises(ConfigError, match=r"system\.read_ahead_kb: servers 'a', 'b' all run on"):
        check_server_hosts(plan)
