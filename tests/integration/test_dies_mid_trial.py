"""A server or stress-ng that dies in the middle of a trial fails that trial, not the run."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers.wait import wait_for
from tests.integration.helpers import (
    LEAK_TAG,
    TINY_SCENARIO,
    killed_at_end,
    read_json,
    spawn_dbrig,
    tiny_scenario,
    write_scenario,
)

pytestmark = pytest.mark.integration


def tagged(tmp_path: Path, name: str) -> list[psutil.Process]:
    """This test's live processes called ``name`` (they inherit the test's tag)."""
    found = []
    for p in psutil.process_iter(["name", "environ"]):
        environ = p.info["environ"] or {}
        if p.info["name"] == name and environ.get(LEAK_TAG) == str(tmp_path):
            found.append(p)
    return found


def measured_trial_running(out: Path) -> bool:
    outputs = out.glob("*/trials/.c*.partial/workload.out")
    return any("Threads started!" in p.read_text(errors="replace") for p in outputs)


@pytest.mark.parametrize(
    "victim, reason",
    [("mariadbd", "server 'default' died"), ("stress-ng", "stress-ng exited early")],
)
def test_a_process_killed_mid_trial_fails_that_trial_and_the_run_goes_on(
    tmp_path: Path, victim: str, reason: str
) -> None:
    sysbench = {**TINY_SCENARIO["workload"]["sysbench"], "time": 6}
    scenario = tiny_scenario(
        workload={"sysbench": sysbench},
        interference={"stress-ng": {"cpu": 1, "cpu_load": 30}},
        repeat=2,
        order="sequential",
    )
    path = write_scenario(tmp_path / "victim.yaml", scenario)
    out = tmp_path / "runs"
    child = spawn_dbrig(
        ["run", path, "--out", out, "--no-report"], stderr=subprocess.PIPE, text=True
    )
    with killed_at_end(child):
        wait_for(
            "the first measured trial",
            lambda: measured_trial_running(out),
            timeout=90,
            child=child,
        )
        time.sleep(1)
        victims = tagged(tmp_path, victim)
        assert victims, f"no {victim} of this test was running"
        for process in victims:
            os.kill(process.pid, signal.SIGKILL)
        _, err = child.communicate(timeout=120)
    assert child.returncode == 1, err  # finished, with a failed trial
    run = next(out.iterdir())
    first = read_json(run / "trials" / "c000-r1" / "trial.json")
    second = read_json(run / "trials" / "c000-r2" / "trial.json")
    assert first["status"] == "failed" and reason in first["reason"], first["reason"]
    assert first["output_tail"], "a failed trial keeps the tail of the tool's output"
    assert second["status"] == "ok", second["reason"]
    assert read_json(run / "run.json")["status"] == "complete"
