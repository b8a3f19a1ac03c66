"""The clone workspace: an XFS loop mount under the run directory, gone on every way out,
and one left by a SIGKILLed dbrig cleaned by the next run."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from dbrig.server import workspace as ws
from tests.integration.helpers import (
    only_run_dir,
    run_main,
    sigkill_dbrig_mid_trial,
    tiny_scenario,
    write_scenario,
)

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def needs_root_and_xfs() -> None:
    if os.geteuid() != 0 or not shutil.which("mkfs.xfs"):
        pytest.skip("needs root and mkfs.xfs (Debian package xfsprogs)")


def in_workspace(**changes: object) -> dict:
    return tiny_scenario(workspace={"image": "1G"}, **changes)


def test_a_run_in_a_clone_workspace_keeps_its_data_there_samples_its_disk_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_scenario(tmp_path / "ws.yaml", in_workspace(repeat=2))
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs"), "--no-report"], capsys)
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    assert (pd.read_csv(run / "results.csv")["status"] == "ok").all()
    my_cnf = next(run.glob("servers/*/my.cnf")).read_text()
    assert f"datadir={run / 'workspace' / 'servers'}" in my_cnf
    assert not ws.is_mounted(run / "workspace")
    assert not (run / "workspace").exists() and not (run / "workspace.img").exists()
    assert list(run.glob("servers/*/mysqld.err"))  # the logs stay with the run
    disks = pd.concat(pd.read_csv(trial / "disk.csv") for trial in run.glob("trials/*"))
    assert len(disks) and disks["device"].str.match(r"loop\d+$").all(), set(disks["device"])


def test_a_workspace_left_by_a_sigkilled_dbrig_is_cleaned_by_the_next_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sysbench = {**tiny_scenario()["workload"]["sysbench"], "time": 20}
    path = write_scenario(tmp_path / "long.yaml", in_workspace(workload={"sysbench": sysbench}))
    out = tmp_path / "runs"
    leftovers = sigkill_dbrig_mid_trial(
        ["run", path, "--out", out, "--no-report"],
        tmp_path,
        what="sysbench running on the workspace",
    )
    assert leftovers == []
    run = only_run_dir(out)
    assert ws.is_mounted(run / "workspace")  # SIGKILL left it: nothing could unmount it

    plain = write_scenario(tmp_path / "plain.yaml", tiny_scenario())
    result = run_main(["run", str(plain), "--out", str(tmp_path / "next"), "--no-report"], capsys)
    assert result.code == 0, result.err
    assert not ws.is_mounted(run / "workspace")
    assert not (run / "workspace").exists() and not (run / "workspace.img").exists()
