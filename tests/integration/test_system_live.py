"""The datadir's real block device: set the I/O scheduler and read-ahead, then put them back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dbrig.host import probe
from dbrig.host.settings import BlockDevice, SystemSettings, SystemState

pytestmark = pytest.mark.integration


def _device() -> BlockDevice:
    name = probe.block_device_name(probe.filesystem_of(Path.cwd()).get("device", ""))
    if not name:
        pytest.skip("the work directory is not on a block device with a /sys/block queue")
    device = BlockDevice(name)
    if os.geteuid() != 0 or not os.access(device.queue / "scheduler", os.W_OK):
        pytest.skip(f"/sys/block/{name}/queue is read-only here (needs root and a writable /sys)")
    return device


def test_scheduler_and_read_ahead_are_set_read_back_and_restored() -> None:
    device = _device()
    before_scheduler, offered = device.scheduler()
    before_read_ahead = device.read_ahead_kb()
    other = next((s for s in offered if s != before_scheduler), before_scheduler)
    state = SystemState(device)
    try:
        applied = state.apply(SystemSettings(io_scheduler=other, read_ahead_kb=64))
        assert applied == {"io_scheduler": other, "read_ahead_kb": 64}
        assert device.scheduler()[0] == other
        assert device.read_ahead_kb() == 64
    finally:
        state.restore()
    assert device.scheduler()[0] == before_scheduler
    assert device.read_ahead_kb() == before_read_ahead


def test_a_run_over_io_schedulers_records_each_and_puts_the_original_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.integration.helpers import (
        only_run_dir,
        read_json,
        run_main,
        tiny_scenario,
        write_scenario,
    )

    device = _device()
    before, offered = device.scheduler()
    wanted = [s for s in ("none", "mq-deadline") if s in offered] or offered[:2]
    scenario = tiny_scenario(matrix={"system.io_scheduler": wanted}, system={"drop_caches": True})
    path = write_scenario(tmp_path / "sched.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    seen = {}
    for trial in sorted((run / "trials").iterdir()):
        record = read_json(trial / "trial.json")
        seen[record["factors"]["system.io_scheduler"]] = record["system"]
    assert set(seen) == set(wanted)
    for name, applied in seen.items():
        assert applied == {"io_scheduler": name, "drop_caches": True}
    assert device.scheduler()[0] == before


def test_a_scheduler_the_device_does_not_offer_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.integration.helpers import one_error_line, run_main, tiny_scenario, write_scenario

    _device()
    path = write_scenario(tmp_path / "bad.yaml", tiny_scenario(system={"io_scheduler": "cfq"}))
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 2
    assert "system.io_scheduler: 'cfq' is not offered" in one_error_line(result.err)
    assert not (tmp_path / "runs").exists()


def test_a_trial_without_a_setting_runs_under_the_original_not_the_previous_one() -> None:
    device = _device()
    before, offered = device.scheduler()
    other = next((s for s in offered if s != before), None)
    if other is None:
        pytest.skip("the device offers a single scheduler")
    state = SystemState(device)
    try:
        assert state.apply(SystemSettings(io_scheduler=other))["io_scheduler"] == other
        assert state.apply(SystemSettings())["io_scheduler"] == before
        assert device.scheduler()[0] == before
    finally:
        state.restore()
    assert device.scheduler()[0] == before


def test_settings_a_sigkilled_dbrig_left_changed_are_put_back_by_the_next_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dbrig.host.settings import MEMO_PREFIX
    from tests.integration.helpers import (
        run_main,
        sigkill_dbrig_mid_trial,
        tiny_scenario,
        write_scenario,
    )

    device = _device()
    before = device.read_ahead_kb()
    changed = 96 if before != 96 else 112
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    earlier = set(tmp.glob(f"{MEMO_PREFIX}*.json"))  # other runs' of the suite, if any
    workload = tiny_scenario()["workload"]
    workload["sysbench"]["time"] = 30
    killed = write_scenario(
        tmp_path / "killed.yaml",
        tiny_scenario(workload=workload, system={"read_ahead_kb": changed}),
    )
    try:
        left = sigkill_dbrig_mid_trial(["run", killed, "--out", tmp_path / "runs"], tmp_path)
        assert left == []
        assert device.read_ahead_kb() == changed, "SIGKILL gave it no chance to put it back"
        memos = set(tmp.glob(f"{MEMO_PREFIX}*.json")) - earlier
        assert memos, "the original was kept in a memo as soon as it was read"
        plain = write_scenario(tmp_path / "next.yaml", tiny_scenario())
        result = run_main(["run", str(plain), "--out", str(tmp_path / "next")], capsys)
        assert result.code == 0, result.err
        # Put back by this run (it says so), or by another run of the suite started meanwhile.
        assert device.read_ahead_kb() == before
        assert not any(m.exists() for m in memos)
    finally:
        device.set_read_ahead_kb(before)
