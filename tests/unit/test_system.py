from __future__ import annotations

from pathlib import Path

import pytest

from dbrig.errors import ConfigError
from dbrig.host.probe import parse_scheduler
from dbrig.host.settings import BlockDevice, SystemSettings, check
from dbrig.run.preflight import _check_system
from dbrig.scenario import Plan, plan_from_dict


def test_parse_scheduler_reads_active_and_offered() -> None:
    assert parse_scheduler("none [mq-deadline] kyber bfq\n") == (
        "mq-deadline",
        ["none", "mq-deadline", "kyber", "bfq"],
    )
    assert parse_scheduler("[none]") == ("none", ["none"])
    assert parse_scheduler("") == (None, [])
    assert parse_scheduler("none\n") == ("none", ["none"])  # the only one, shown bare


def fake_device(tmp_path: Path, scheduler: str = "none [mq-deadline] kyber") -> BlockDevice:
    queue = tmp_path / "block" / "vdz" / "queue"
    queue.mkdir(parents=True)
    (queue / "scheduler").write_text(scheduler + "\n")
    (queue / "read_ahead_kb").write_text("128\n")
    return BlockDevice("vdz", sys_root=tmp_path)


def test_check_accepts_an_offered_scheduler(tmp_path: Path) -> None:
    check([SystemSettings(io_scheduler="kyber")], fake_device(tmp_path), is_root=True)


def test_check_refuses_a_scheduler_the_device_does_not_offer(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"system.io_scheduler: 'bfq' is not offered by vdz"):
        check([SystemSettings(io_scheduler="bfq")], fake_device(tmp_path), is_root=True)


def test_check_needs_root_only_when_something_is_set(tmp_path: Path) -> None:
    device = fake_device(tmp_path)
    check([SystemSettings()], device, is_root=False)
    with pytest.raises(ConfigError, match="needs root"):
        check([SystemSettings(drop_caches=True)], device, is_root=False)


def test_check_refuses_a_missing_device(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no block device queue"):
        check([SystemSettings(read_ahead_kb=64)], BlockDevice("nope", tmp_path), is_root=True)


def test_read_ahead_is_read_from_the_queue(tmp_path: Path) -> None:
    assert fake_device(tmp_path).read_ahead_kb() == 128


def test_settings_reject_unknown_keys() -> None:
    with pytest.raises(ValueError):
        SystemSettings.model_validate({"io_sched": "none"})


def test_the_block_device_is_found_from_the_path_itself() -> None:
    import os

    from dbrig.host import probe

    here = probe.block_device_of(Path(__file__))
    if here is None:
        pytest.skip("the tests do not live on a block device here")
    assert Path(f"/sys/block/{here}").exists()
    # A path that does not exist yet is looked up through its nearest existing parent.
    assert probe.block_device_of(Path(__file__).parent / "not" / "yet") == here
    assert probe.block_device_of(Path("/proc")) is None or os.major(os.stat("/proc").st_dev) != 0


def _external_plan(system: dict, **server: object) -> Plan:
    spec = {"kind": "external", "user": "bench", "reset": "none", **server}
    return plan_from_dict(
        {"name": "x", "server": spec, "workload": {"sysbench": {}}, "system": system}
    )


@pytest.mark.parametrize("key, value", [("io_scheduler", "none"), ("read_ahead_kb", 128)])
def test_an_external_servers_disk_settings_are_refused(
    tmp_path: Path, key: str, value: object
) -> None:
    with pytest.raises(ConfigError, match=rf"system\.{key}: server 'default' is external"):
        _check_system(_external_plan({key: value}), tmp_path)


def test_drop_caches_is_refused_only_for_an_external_server_on_another_machine(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match=r"system\.drop_caches: .* external on 10\.0\.0\.5"):
        _check_system(_external_plan({"drop_caches": True}, host="10.0.0.5"), tmp_path)
    for here in ({"host": "127.0.0.1"}, {"host": "localhost"}, {"socket": "/run/mysqld.sock"}):
        plan = _external_plan({"drop_caches": True}, **here)
        try:
            _check_system(plan, tmp_path)
        except ConfigError as exc:  # this machine's own refusals (not root) are not ours
            assert "external" not in exc.message
