"""dbrig.proc on real, short-lived processes (sh, sleep): start, wait, stop, capture."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from dbrig import proc
from dbrig.errors import ToolMissing
from dbrig.tools import mysqlslap, stress_ng, sysbench
from tests.helpers.wait import wait_for

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(autouse=True)
def nothing_left_running():
    yield
    proc.stop_all(grace_s=2)


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes in process group ``pgid``."""
    members = []
    for process in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(process.pid) == pgid and process.info["status"] != "zombie":
                members.append(process.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


# --- import and the setpriv probe ------------------------------------------------------------


def test_importing_proc_starts_no_process():
    code = textwrap.dedent(
        """
        import subprocess

        def refuse(*args, **kwargs):
            raise AssertionError(f"a process was started at import: {args}")

        subprocess.Popen = refuse
        import dbrig.proc
        assert dbrig.proc._probed is False
        print("imported")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "imported"


def test_the_setpriv_probe_runs_once_for_concurrent_first_spawns(monkeypatch):
    calls = []

    def probe() -> str | None:
        calls.append(1)
        time.sleep(0.05)  # widen the window in which a second probe could start
        return None

    monkeypatch.setattr(proc, "_probed", False)
    monkeypatch.setattr(proc, "_setpriv_with_pdeathsig", probe)
    threads = [threading.Thread(target=proc.run, args=(["true"],), kwargs={"timeout_s": 5})]
    threads += [threading.Thread(target=proc.capture, args=(["true"],)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [1]
    assert proc._setpriv is None


# --- spawn, run, stop -------------------------------------------------------------------------


def test_run_returns_the_exit_code_and_writes_the_output_files(tmp_path):
    out, err = tmp_path / "out", tmp_path / "err"
    done = proc.run(
        ["sh", "-c", "echo hello; echo oops >&2; exit 3"], timeout_s=10, stdout=out, stderr=err
    )
    assert (done.returncode, done.timed_out, done.reaped_elsewhere) == (3, False, False)
    assert done.exit_text == "exit 3"
    assert out.read_text() == "hello\n"
    assert err.read_text() == "oops\n"
    assert proc.live_children() == []


def test_merged_stderr_keeps_the_printed_order(tmp_path):
    out = tmp_path / "out"
    proc.run(
        ["sh", "-c", "echo 1; echo 2 >&2; echo 3"], timeout_s=10, stdout=out, merge_stderr=True
    )
    assert out.read_text().split() == ["1", "2", "3"]


def test_run_past_its_timeout_stops_the_group_and_says_so():
    started = time.monotonic()
    done = proc.run(["sleep", "30"], timeout_s=0.2, grace_s=2)
    assert done.timed_out
    assert done.killed_by_signal == signal.SIGTERM
    assert time.monotonic() - started < 20  # stopped, not waited out (30 s)


def test_a_spawned_child_is_registered_until_stopped():
    child = proc.spawn(["sleep", "30"])
    assert child.pid in proc.live_children()
    assert child.poll() is None
    assert os.getpgid(child.pid) == child.pid  # its own group
    done = child.stop(grace_s=2)
    assert done.killed_by_signal == signal.SIGTERM
    assert child.pid not in proc.live_children()
    assert child.poll() is done


def test_stop_kills_a_group_that_ignores_sigterm(tmp_path):
    # The shell says when its trap is set: a fixed 0.2 s was sometimes too short on a busy
    # machine, and SIGTERM then ended it before the trap (SIGTERM, not SIGKILL).
    ready = tmp_path / "trap-set"
    child = proc.spawn(["sh", "-c", f"trap '' TERM; : > {ready}; sleep 30 & wait"])
    wait_for("the trap", ready.exists, timeout=30)
    done = child.stop(grace_s=0.3)
    assert done.killed_by_signal == signal.SIGKILL
    wait_for("the group to end", lambda: group_members(child.pid) == [], timeout=30)


def test_a_missing_program_is_tool_missing(tmp_path):
    with pytest.raises(ToolMissing, match="no-such-dbrig-tool not found"):
        proc.spawn(["no-such-dbrig-tool"], stdout=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_stop_all_stops_every_registered_group():
    children = [proc.spawn(["sleep", "30"]) for _ in range(2)]
    proc.stop_all(grace_s=2)
    assert proc.live_children() == []
    for child in children:
        done = child.wait(1)
        assert done is not None and done.killed_by_signal == signal.SIGTERM


# --- capture ----------------------------------------------------------------------------------


def test_capture_returns_the_code_and_stdout_then_stderr():
    code, text = proc.capture(["sh", "-c", "echo err >&2; echo out; exit 2"])
    assert (code, text) == (2, "out\nerr\n")


def test_capture_of_a_missing_program_is_127():
    assert proc.capture(["no-such-dbrig-tool", "--version"]) == (127, "")


def test_capture_logs_the_command_with_passwords_masked(caplog):
    caplog.set_level(logging.INFO, logger="dbrig.proc")
    code, _ = proc.capture(["sh", "-c", "true", "--password=hunter2"])
    assert code == 0
    assert "start: sh -c true --password=***" in caplog.text
    assert "hunter2" not in caplog.text


def test_capture_runs_as_a_registered_child_that_stop_all_stops(tmp_path):
    pid_file = tmp_path / "pid"
    result: list[tuple[int, str]] = []
    argv = ["sh", "-c", f"echo $$ > {pid_file}; exec sleep 30"]
    thread = threading.Thread(target=lambda: result.append(proc.capture(argv)))
    thread.start()
    pid = wait_for(
        "the pid file", lambda: pid_file.exists() and pid_file.read_text().strip(), timeout=30
    )
    # The child may write its pid before the thread that started it has registered it.
    wait_for("the child's registration", lambda: int(pid) in proc.live_children(), timeout=30)
    assert os.getpgid(int(pid)) == int(pid)
    proc.stop_all(grace_s=2)
    thread.join(30)
    assert not thread.is_alive()
    assert result == [(-signal.SIGTERM, "")]


def test_two_threads_reaping_one_child_both_get_its_status(monkeypatch):
    """Seen in CI under two test workers: a waiter that lost the reap to another thread
    found the child gone before its status was recorded, and reported it lost."""
    real_wait4 = os.wait4

    def slow_wait4(pid: int, flags: int):
        reaped = real_wait4(pid, flags)
        if reaped[0] != 0:
            time.sleep(0.3)  # between the reap and the recording of its status
        return reaped

    child = proc.spawn(["sh", "-c", "exit 3"])
    wait_for(
        "the child to exit", lambda: psutil.Process(child.pid).status() == "zombie", timeout=30
    )
    monkeypatch.setattr(os, "wait4", slow_wait4)
    first = threading.Thread(target=child.poll)
    first.start()
    time.sleep(0.1)
    second = child.poll()
    first.join(5)
    assert second is not None and not second.reaped_elsewhere
    assert second.returncode == 3


def test_capture_past_its_timeout_is_minus_1_and_its_group_is_killed(tmp_path):
    pid_file = tmp_path / "pid"
    argv = ["sh", "-c", f"echo $$ > {pid_file}; sleep 30 & wait"]
    started = time.monotonic()
    assert proc.capture(argv, timeout_s=0.3) == (-1, "")
    assert time.monotonic() - started < 20  # stopped, not waited out (30 s)
    pgid = int(pid_file.read_text())
    wait_for("the group to end", lambda: group_members(pgid) == [], timeout=30)
    assert proc.live_children() == []


# --- a child reaped by someone else -----------------------------------------------------------


def test_a_child_reaped_elsewhere_is_not_a_success():
    child = proc.spawn(["sh", "-c", "exit 0"])
    os.waitpid(child.pid, 0)  # the status goes to this call, not to the Child
    done = child.wait(5)
    assert done is not None
    assert done.reaped_elsewhere
    assert done.returncode == proc.LOST_RETURNCODE != 0
    assert done.killed_by_signal is None
    assert done.exit_text == "exit status lost: the process was reaped elsewhere"
    assert child.pid not in proc.live_children()


def test_a_status_the_reaper_recorded_on_the_popen_is_used():
    child = proc.spawn(["sh", "-c", "exit 4"])
    child.popen.wait(5)  # reaps and keeps the status on the Popen
    done = child.wait(5)
    assert done is not None
    assert (done.returncode, done.reaped_elsewhere) == (4, False)


def test_stop_all_keeps_the_status_of_the_children_it_reaps():
    child = proc.spawn(["sleep", "30"])
    proc.stop_all(grace_s=2)
    done = child.poll()
    assert done is not None
    assert not done.reaped_elsewhere
    assert done.killed_by_signal == signal.SIGTERM


def test_no_tool_reads_a_lost_status_as_success():
    # The run side names the cause (Finished.exit_text); a tool must only never pass it.
    lost = proc.LOST_RETURNCODE
    reasons = [
        sysbench.failure_reason(sysbench.parse(""), lost),
        mysqlslap.failure_reason(mysqlslap.parse(""), lost, ""),
        stress_ng.failure_reason(stress_ng.parse(""), lost),
    ]
    assert all(reason is not None for reason in reasons)
