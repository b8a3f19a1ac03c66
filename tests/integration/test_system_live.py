"""The datadir's real block device: set the I/O scheduler and read-ahead, then put them back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dbrig.server import datadir as dd
from dbrig.system import BlockDevice, SystemSettings, SystemState

pytestmark = pytest.mark.integration


def _device() -> BlockDevice:
    name = dd.block_device_name(dd.filesystem_of(Path.cwd()).get("device", ""))
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
