"""``system:`` for a managed server on db1 (the sshd fixture on 127.0.0.1): checked,
set, read back and put back there, by its agent, on the device under ~/.dbrig (the
"remote" host is this machine, so that is the device this test reads in /sys)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path

import pytest

from dbrig.host.settings import BlockDevice, device_under
from dbrig.remote.agent import SYSTEM_MEMO
from dbrig.remote.server import REMOTE_HOME_ROOT
from tests.integration.helpers import (
    one_error_line,
    only_run_dir,
    read_json,
    run_main,
    run_main_watched,
    write_scenario,
)
from tests.integration.sshd import Sshd
from tests.integration.test_remote_server import remote_home_of, remote_server_scenario

pytestmark = pytest.mark.integration


def _remote_device() -> BlockDevice:
    """The device under db1's ~/.dbrig, as the agent finds it; skipped when it has no
    writable queue (an overlay filesystem in a container, no root)."""
    device = device_under(Path.home() / REMOTE_HOME_ROOT)
    if device is None or not device.exists():
        pytest.skip("~/.dbrig is not on a block device with a /sys/block queue")
    if os.geteuid() != 0 or not os.access(device.queue / "read_ahead_kb", os.W_OK):
        pytest.skip(f"/sys/block/{device.name}/queue is read-only here (root, writable /sys)")
    return device


class MemoWatch(threading.Thread):
    """What the agent kept as the original values, in the server's folder on db1."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.seen: list[dict] = []

    def run(self) -> None:
        while not self.stop.is_set() and not self.seen:
            for memo in (Path.home() / REMOTE_HOME_ROOT).glob(f"*-default/{SYSTEM_MEMO}"):
                with contextlib.suppress(OSError, ValueError):  # removed meanwhile
                    self.seen.append(json.loads(memo.read_text()))
            self.stop.wait(0.05)


def test_system_settings_of_a_server_on_db1_are_set_there_and_put_back(
    tmp_path: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    device = _remote_device()
    before = device.read_ahead_kb()
    wanted = 256 if before != 256 else 512
    system = {"drop_caches": True, "read_ahead_kb": wanted}
    path = write_scenario(tmp_path / "s.yaml", remote_server_scenario(sshd, system=system))
    watch = MemoWatch()
    args = ["run", str(path), "--out", str(tmp_path / "runs"), "--no-report"]
    result = run_main_watched(args, capsys, watch)
    assert result.code == 0, result.err
    assert watch.seen[:1] == [{"read_ahead_kb": before, "device": device.name}], (
        "db1's agent kept the original, naming its device"
    )
    run = only_run_dir(tmp_path / "runs")
    (trial,) = run.glob("trials/*/trial.json")
    assert read_json(trial)["system"] == {"read_ahead_kb": wanted, "drop_caches": True}
    assert device.read_ahead_kb() == before, "the original read-ahead is back after the run"
    remote_home = remote_home_of(run)
    assert not (remote_home / SYSTEM_MEMO).exists() and not remote_home.exists()


def test_a_scheduler_db1_does_not_offer_is_one_line_naming_the_host_before_anything_runs(
    tmp_path: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    device = _remote_device()
    _, offered = device.scheduler()
    scenario = remote_server_scenario(sshd, system={"io_scheduler": "nosuch"})
    path = write_scenario(tmp_path / "bad.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 2, result.err
    line = one_error_line(result.err)
    where = f"dbrig: error: {path}: system.io_scheduler: hosts.db1 (root@127.0.0.1:"
    assert line.startswith(where), line
    assert f"'nosuch' is not offered by {device.name} (expected one of: " in line, line
    assert ", ".join(offered) in line, line
    assert not (tmp_path / "runs").exists(), "nothing runs, nothing is written"
    assert not sshd.wait_sessions_gone()
