"""A CPU profile of a managed server on another host, for real: the sshd fixture on
127.0.0.1 is db1, dbrig's agent runs the server there and records it with perf there;
only the folded stacks come back to the trial. Real MariaDB under a rate-limited
sysbench, 1 table x 1000 rows.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

import pytest

from dbrig.analysis.profile import parse_folded
from dbrig.host.perf import perf_problem
from dbrig.remote.server import remote_folder
from tests.integration.helpers import (
    TINY_SCENARIO,
    one_error_line,
    only_run_dir,
    read_json,
    run_main,
    write_scenario,
)
from tests.integration.sshd import Sshd
from tests.integration.test_remote_server import SOURCE, remote_server_scenario

PERF_PROBLEM = perf_problem()  # db1 is this machine: its perf is this one
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(PERF_PROBLEM is not None, reason=f"no CPU profiles here: {PERF_PROBLEM}"),
]

PROFILED = {"enabled": False, "profile": {"cpu": {"frequency": 99}}}


def test_a_server_on_db1_is_profiled_there_and_only_its_folded_stacks_come_back(
    tmp_path: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    sysbench = {**TINY_SCENARIO["workload"]["sysbench"], "rate": 100, "threads": 1}
    scenario = remote_server_scenario(sshd, workload={"sysbench": sysbench}, sampling=PROFILED)
    path = write_scenario(tmp_path / "s.yaml", scenario)
    out = tmp_path / "runs"
    # --keep-data: the server's folder on db1 stays, to be searched for perf's files.
    result = run_main(["run", str(path), "--out", str(out), "--no-report", "--keep-data"], capsys)
    run = only_run_dir(out)
    run_id = read_json(run / "run.json")["run_id"]
    remote_home = Path.home() / remote_folder(run.name, run_id, "default")
    try:
        assert result.code == 0, result.err
        (trial_folder,) = (run / "trials").iterdir()
        trial = read_json(trial_folder / "trial.json")
        assert trial["status"] == "ok", trial
        stacks = parse_folded((trial_folder / "profile.folded").read_text())
        assert sum(stacks.values()) == trial["metrics"]["profile_samples"] > 0
        assert {stack.split(";")[0] for stack in stacks} == {"mariadbd"}
        assert any("do_command" in stack for stack in stacks), list(stacks)[:5]
        assert "perf record" in (trial_folder / "profile.out").read_text()
        assert not [p.name for p in trial_folder.iterdir() if p.name.endswith((".data", ".script"))]
        assert remote_home.is_dir(), "--keep-data keeps the server's folder on db1"
        left = [str(p) for p in remote_home.rglob("*") if p.name.startswith(("profile", "perf."))]
        assert left == [], "perf's files are removed on db1 once folded"
    finally:
        shutil.rmtree(remote_home, ignore_errors=True)
        with contextlib.suppress(OSError):
            remote_home.parent.rmdir()  # ~/.dbrig, when this test made it
    assert not sshd.wait_sessions_gone(), "no perf, agent or server outlives the run on db1"


def test_a_server_host_where_perf_cannot_record_is_exit_2_naming_the_host(
    tmp_path: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    """db1's perf refuses the system call (as in a container whose seccomp blocks it)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "perf").write_text(
        "#!/bin/sh\necho 'Error: perf_event_open() syscall returned with 1 "
        "(Operation not permitted)' >&2\nexit 1\n"
    )
    (fake / "perf").chmod(0o755)
    scenario = remote_server_scenario(sshd, sampling=PROFILED)
    path_there = f"{fake}:{os.environ['PATH']}"
    scenario["hosts"]["db1"]["python"] = (
        f"env PATH={path_there} PYTHONPATH={SOURCE} {sys.executable}"
    )
    path = write_scenario(tmp_path / "s.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 2, result.err
    line = one_error_line(result.err)
    assert line.startswith(
        f"dbrig: error: {path}: sampling.profile.cpu.frequency: hosts.db1 (root@127.0.0.1:"
    ), line
    assert "perf cannot open a CPU event here" in line and "Operation not permitted" in line
    assert not (tmp_path / "runs").exists(), "nothing is written before the run starts"
    assert not sshd.wait_sessions_gone()
