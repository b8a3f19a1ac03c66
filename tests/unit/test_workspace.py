"""The clone workspace's bad input: refused before anything runs, naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbrig.errors import EXIT_BAD_INPUT, ConfigError
from dbrig.run.plan import workspace_image
from dbrig.server import workspace as ws
from tests.unit.test_scenario import BASE, config_error, plan_of


def test_the_scenario_key_takes_a_size(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, BASE + "workspace: {image: 20G}\n")
    assert plan.scenario.workspace.image_bytes == 20 * 2**30
    assert plan_of(tmp_path, BASE).scenario.workspace.image_bytes is None
    message = config_error(tmp_path, BASE + "workspace: {image: lots}\n")
    assert "workspace.image" in message and "20G" in message


def test_without_root_it_is_one_clear_error_with_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ws.os, "geteuid", lambda: 1000)
    with pytest.raises(ConfigError) as info:
        ws.check_can_make(20 * 2**30)
    assert "workspace.image" in str(info.value) and "root" in str(info.value)
    assert info.value.exit_code == EXIT_BAD_INPUT


def test_an_image_too_small_for_xfs_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ws.os, "geteuid", lambda: 0)
    with pytest.raises(ConfigError, match=r"workspace\.image: at least 512M"):
        ws.check_can_make(100 * 2**20)


def test_keep_data_with_a_workspace_is_refused(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, BASE + "workspace: {image: 20G}\n")
    with pytest.raises(ConfigError, match="--keep-data"):
        workspace_image(plan, True, tmp_path)
    assert workspace_image(plan_of(tmp_path, BASE), True, tmp_path) is None
