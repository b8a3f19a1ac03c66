"""stress-ng on another host over ssh (``interference.stress-ng.host``), for real: a
throwaway sshd on 127.0.0.1 is the host, so the wrapper, its stop at stdin's EOF and its
CPU times all run as they would on a database host."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbrig.tools.base import ToolInfo
from dbrig.tools.stress_ng import StressNgTool
from tests.integration.helpers import (
    one_error_line,
    only_run_dir,
    read_json,
    run_main,
    tiny_scenario,
    write_scenario,
)
from tests.integration.sshd import Sshd

pytestmark = pytest.mark.integration


def scenario_with_remote_stress(sshd: Sshd, **stress: object) -> dict:
    workload = tiny_scenario()["workload"]
    workload["sysbench"]["time"] = 3
    block = {"cpu": 1, "cpu_load": 50, "host": "load1", **stress}
    return tiny_scenario(
        name="remote-stress",
        hosts={"load1": sshd.hosts_entry()},
        workload=workload,
        interference={"stress-ng": block},
    )


def test_stress_ng_on_another_host_is_measured_and_stopped_there(
    tmp_path: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two cells in order: stress-ng on load1 for the whole trial, then one that ends
    there on its own after 100 bogo ops: that trial fails naming the host."""
    scenario = scenario_with_remote_stress(sshd)
    scenario.update(
        matrix={"interference.stress-ng.extra_args": [[], ["--cpu-ops", "100"]]},
        order="sequential",
    )
    path = write_scenario(tmp_path / "s.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 1, result.err
    run = only_run_dir(tmp_path / "runs")
    trial = read_json(run / "trials" / "c000-r1" / "trial.json")
    assert trial["status"] == "ok", trial["reason"]
    command = trial["commands"]["interference"]
    assert command[:3] == ["ssh", "root@127.0.0.1", "--"]
    assert Path(command[3]).name == "stress-ng"
    metrics = trial["metrics"]
    assert metrics["stress_cpu_s_requested"] > 0
    assert metrics["stress_cpu_s_achieved"] > 0, "the remote wrapper's times came back"
    assert metrics["stress_bogo_ops"] > 0, "stress-ng's own report came back after the stop"
    tools = read_json(run / "run.json")["environment"]["tools"]
    assert tools["stress-ng@load1"].startswith("stress-ng, version")

    ended = read_json(run / "trials" / "c001-r1" / "trial.json")
    assert ended["status"] == "failed"
    assert f"stress-ng on hosts.load1 (root@127.0.0.1:{sshd.port}) exited early" in ended["reason"]
    assert not sshd.wait_sessions_gone(), "nothing is left running on the host"
    assert not sshd.runs("stress-ng")


def test_a_host_without_stress_ng_or_the_pinned_core_is_refused_before_any_trial(
    tmp_path: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "runs"
    path = write_scenario(tmp_path / "core.yaml", scenario_with_remote_stress(sshd, taskset=[999]))
    result = run_main(["run", str(path), "--out", str(out)], capsys)
    assert result.code == 2
    line = one_error_line(result.err)
    assert "interference.stress-ng.taskset: core 999 does not exist on hosts.load1" in line

    missing = ToolInfo(name="stress-ng", binaries=("no-such-stress-ng",), package="stress-ng")
    monkeypatch.setattr(StressNgTool, "info", missing)
    path = write_scenario(tmp_path / "missing.yaml", scenario_with_remote_stress(sshd))
    result = run_main(["run", str(path), "--out", str(out)], capsys)
    assert result.code == 2
    line = one_error_line(result.err)
    assert "interference.stress-ng.host: hosts.load1 (root@127.0.0.1:" in line
    assert "no-such-stress-ng not found there" in line
    assert "install the Debian package 'stress-ng'" in result.err
    assert not out.exists(), "nothing is written before the run starts"
