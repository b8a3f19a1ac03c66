"""SIGTERM, Ctrl-C and a closed terminal (SIGHUP) stop everything, keep finished trials, and
--resume finishes the run."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dbrig.commands import run as run_command
from dbrig.server import workspace as ws
from tests.helpers.wait import wait_for
from tests.integration.helpers import (
    DBRIG,
    assert_complete_run,
    assert_no_partial_trials,
    kill_leftovers,
    killed_at_end,
    only_run_dir,
    read_json,
    run_dbrig,
    run_main,
    sigkill_dbrig_mid_trial,
    spawn_dbrig,
    sysbench_running_in_a_partial_trial,
    tiny_scenario,
    trial_dirs,
    write_scenario,
)

FACTOR = "workload.sysbench.threads"
THREADS = [1, 2]
FOUR_TRIALS = tiny_scenario(matrix={FACTOR: THREADS}, repeat=2)


def finished_trials(out: Path) -> list[Path]:
    return sorted(out.glob("*/trials/c[0-9][0-9][0-9]-r[0-9]*/trial.json"))


def interrupt(child: subprocess.Popen, how: str) -> None:
    if how == "sigterm":
        os.kill(child.pid, signal.SIGTERM)
    else:  # Ctrl-C: the terminal signals the whole foreground process group
        os.killpg(child.pid, signal.SIGINT)


@pytest.mark.integration
@pytest.mark.parametrize(
    "how, when",
    [("sigterm", "while sysbench runs"), ("ctrl-c", "between trials")],
    ids=["sigterm-mid-trial", "ctrl-c-between-trials"],
)
def test_an_interrupted_run_stops_everything_and_resumes(
    tmp_path: Path, short_tmp: Path, how: str, when: str
) -> None:
    scenario = write_scenario(tmp_path / "four-trials.yaml", FOUR_TRIALS)
    out = tmp_path / "runs"
    with open(tmp_path / "stdout", "w") as stdout, open(tmp_path / "stderr", "w") as stderr:
        child = spawn_dbrig(["run", scenario, "--out", out], stdout=stdout, stderr=stderr)
        with killed_at_end(child):
            wait_for("the first trial", lambda: finished_trials(out), timeout=90, child=child)
            if when == "while sysbench runs":
                wait_for(
                    "sysbench in the second trial",
                    lambda: sysbench_running_in_a_partial_trial(out),
                    timeout=60,
                    child=child,
                )
            interrupt(child, how)
            code = child.wait(timeout=60)
    err = (tmp_path / "stderr").read_text()
    assert code == 130, err
    assert kill_leftovers(tmp_path) == [], "processes outlived the interrupted run"
    assert list(short_tmp.iterdir()) == [], "the socket directory was not removed"

    run = next(out.iterdir())
    last = err.strip().splitlines()[-1]
    assert last.startswith("dbrig: error: interrupted: 1 of 4 trials saved"), err
    assert f"--resume {run}" in last
    meta = read_json(run / "run.json")
    assert meta["status"] == "interrupted"
    assert_no_partial_trials(run)
    saved = {p.name: (p / "trial.json").read_text() for p in trial_dirs(run)}
    assert len(saved) == 1, f"expected only the first trial saved, got {sorted(saved)}"

    resumed = run_dbrig("run", "--resume", run)
    assert resumed.code == 0, resumed.err
    assert "3 trials" in resumed.err
    assert_complete_run(run, FACTOR, THREADS, repeat=2)
    for name, text in saved.items():
        assert (run / "trials" / name / "trial.json").read_text() == text, f"{name} was rerun"
    assert sorted(pd.read_csv(run / "results.csv")["trial"]) == [
        "c000-r1",
        "c000-r2",
        "c001-r1",
        "c001-r2",
    ]


@pytest.mark.integration
def test_a_sigkilled_dbrig_leaves_no_server_sysbench_or_stress_ng(tmp_path: Path) -> None:
    """SIGKILL gives dbrig no chance to clean up: the kernel's parent-death signal does it."""
    scenario = tiny_scenario(
        interference={"stress-ng": {"cpu": 1, "cpu_load": 50}},
        workload={"sysbench": {**tiny_scenario()["workload"]["sysbench"], "time": 20}},
    )
    path = write_scenario(tmp_path / "long.yaml", scenario)
    out = tmp_path / "runs"
    leftovers = sigkill_dbrig_mid_trial(
        ["run", path, "--out", out],
        tmp_path,
        what="sysbench under stress-ng",
        ready=lambda: (
            sysbench_running_in_a_partial_trial(out)
            and list(out.glob("*/trials/.c*.partial/stress-ng.err"))
        ),
    )
    assert leftovers == [], f"left running after SIGKILL: {leftovers}"


def run_in_a_terminal_until_it_closes(
    args: Sequence[str | Path], until: Callable[[], object], child_dies: str
) -> int:
    """``dbrig ARGS`` in a terminal of its own (a pseudo-terminal it leads, as a login
    shell leads an ssh session's); once ``until()`` holds, the terminal closes, as when
    the ssh connection drops: the kernel sends the session's leader SIGHUP, and every
    later write to the terminal fails. Returns dbrig's exit code."""
    master, slave = os.openpty()
    child = subprocess.Popen(
        ["setsid", "--ctty", "--wait", str(DBRIG), *map(str, args)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    done = threading.Event()

    def read_the_screen() -> None:  # a terminal nobody reads fills up and blocks dbrig
        while not done.is_set():
            if select.select([master], [], [], 0.1)[0]:
                try:
                    os.read(master, 65536)
                except OSError:
                    return

    reader = threading.Thread(target=read_the_screen)
    reader.start()
    try:
        wait_for(child_dies, until, timeout=90, child=child)
    finally:
        done.set()
        reader.join()
        os.close(master)
    with killed_at_end(child):
        return child.wait(timeout=90)


@pytest.mark.integration
def test_a_closed_terminal_stops_the_run_like_sigterm_and_resume_counts_the_whole_run(
    tmp_path: Path, short_tmp: Path
) -> None:
    in_workspace = os.geteuid() == 0 and shutil.which("mkfs.xfs") is not None
    three = tiny_scenario(
        matrix={FACTOR: [1]}, repeat=3, **({"workspace": {"image": "1G"}} if in_workspace else {})
    )
    scenario = write_scenario(tmp_path / "three-trials.yaml", three)
    out = tmp_path / "runs"

    def saved_then_running(count: int) -> Callable[[], object]:
        return lambda: (
            len(finished_trials(out)) == count and sysbench_running_in_a_partial_trial(out)
        )

    code = run_in_a_terminal_until_it_closes(
        ["run", scenario, "--out", out], saved_then_running(1), "sysbench in the second trial"
    )
    assert code == 130
    assert kill_leftovers(tmp_path) == [], "processes outlived the closed terminal"
    assert list(short_tmp.iterdir()) == [], "the socket directory was not removed"
    run = only_run_dir(out)
    assert not ws.is_mounted(run / "workspace"), "the workspace stayed mounted"
    assert read_json(run / "run.json")["status"] == "interrupted"
    assert_no_partial_trials(run)
    log = (run / "dbrig.log").read_text()
    assert "stopping: SIGHUP (its terminal or ssh session closed)" in log
    assert f"interrupted: 1 of 3 trials saved in {run}" in log
    assert f"--resume {run}" in log and "(exit 130)" in log

    # Resumed and interrupted again: the line counts the whole run, not this invocation.
    with open(tmp_path / "stderr", "w") as stderr:
        child = spawn_dbrig(["run", "--resume", run, "--no-report"], stderr=stderr)
        with killed_at_end(child):
            wait_for("sysbench in the third trial", saved_then_running(2), timeout=90, child=child)
            interrupt(child, "sigterm")
            code = child.wait(timeout=60)
    err = (tmp_path / "stderr").read_text()
    assert code == 130, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"dbrig: error: interrupted: 2 of 3 trials saved in {run}"), err

    resumed = run_dbrig("run", "--resume", run, "--no-report")
    assert resumed.code == 0, resumed.err
    assert_complete_run(run, FACTOR, [1], repeat=3)


@pytest.mark.integration
def test_a_hangup_before_the_first_trial_leaves_the_run_interrupted_not_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run directory and run.json exist, no trial has started: a real SIGHUP lands."""
    logs_to = run_command._log_to  # called once run.json says running, before any trial

    def log_then_hang_up(*args: Any, **kwargs: Any) -> None:
        logs_to(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGHUP)

    monkeypatch.setattr(run_command, "_log_to", log_then_hang_up)
    scenario = write_scenario(tmp_path / "one.yaml", tiny_scenario())
    result = run_main(["run", str(scenario), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 130, result.err
    run = only_run_dir(tmp_path / "runs")
    last = result.err.strip().splitlines()[-1]
    assert last.startswith(f"dbrig: error: interrupted: 0 of 1 trials saved in {run}"), result.err
    assert read_json(run / "run.json")["status"] == "interrupted"
    assert "stopping: SIGHUP" in (run / "dbrig.log").read_text()
