"""Faults found by the reliability review of dbrig's own handling (issue 11), one test each.

Each test reproduced its finding on the code before the fix; the integration ones that need
a real server or a real filesystem are in tests/integration/test_review_faults.py.
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest

from dbrig import ownership
from dbrig.cli import main

SYSBENCH = "workload:\n  sysbench: {tables: 1, table_size: 100, time: 1}\n"


def dbrig(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(args)
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err


def one_error_line(err: str) -> str:
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert lines[0].startswith("dbrig: error: "), lines[0]
    return lines[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- 5 and 6: the dry run checks the host as the run does; every error names the file ------


MYSQLSLAP_WITH_WARMUP = """\
name: slap
workload:
  mysqlslap: {concurrency: 2, iterations: 1, number_of_queries: 100}
warmup: 3
"""
MISSING_BASEDIR = "name: nb\nserver: {basedir: /nonexistent/mariadb}\n" + SYSBENCH
CORE_THE_MACHINE_LACKS = (
    "name: core\n" + SYSBENCH + "interference:\n  stress-ng: {cpu: 1, taskset: [4096]}\n"
)


def external(port: int, password_env: str | None = None) -> str:
    secret = f", password_env: {password_env}" if password_env else ""
    return (
        "name: ext\nservers:\n  db: {kind: external, host: 127.0.0.1, port: "
        f"{port}, user: bench, reset: none{secret}}}\n" + SYSBENCH
    )


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
@pytest.mark.parametrize(
    "text, expected",
    [
        (MYSQLSLAP_WITH_WARMUP, "warmup: mysqlslap runs a fixed number of queries"),
        (MISSING_BASEDIR, "basedir /nonexistent/mariadb is not a directory"),
        (CORE_THE_MACHINE_LACKS, "4096"),
        (external(closed_port()), "db"),
        (external(3306, "DBRIG_TEST_UNSET_PASSWORD"), "DBRIG_TEST_UNSET_PASSWORD is not set"),
    ],
    ids=["mysqlslap-warmup", "missing-basedir", "taskset-core", "unreachable", "unset-password"],
)
def test_a_host_problem_fails_the_run_and_the_dry_run_alike_naming_the_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    text: str,
    expected: str,
    dry_run: bool,
) -> None:
    """Findings 5 (a dry run passed all of these) and 6 (two errors lacked the file name)."""
    monkeypatch.delenv("DBRIG_TEST_UNSET_PASSWORD", raising=False)
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(text)
    out = tmp_path / "runs"
    flags = ["--dry-run"] if dry_run else []
    code, _, err = dbrig(["run", str(scenario), "--out", str(out), *flags], capsys)
    line = one_error_line(err)
    assert code == 2, err
    assert f"{scenario}: " in line
    assert expected in line
    assert not out.exists()


# -- 11: a dead server's reason quotes only what explains the death -------------------------

ERROR_LOG_SAMPLE = Path("/work/shared/fixtures/mariadbd_error_log_sample.txt")


def test_a_killed_servers_reason_quotes_no_note_lines() -> None:
    """Finding 11: the reason quoted "ready for connections" and "Buffer pool(s) load"."""
    from dbrig.server.sandbox import death_excerpt

    text = ERROR_LOG_SAMPLE.read_text()
    assert "[Note]" in text and "[ERROR]" not in text
    assert death_excerpt(text) == []


def test_a_crash_reason_quotes_the_error_and_signal_lines() -> None:
    from dbrig.server.sandbox import death_excerpt

    crash = (
        "2026-11-21 22:36:55 0 [Note] mariadbd: ready for connections.\n"
        "2026-11-21 22:37:00 8 [Warning] Aborted connection 8 to db: 'sbtest'\n"
        "2026-11-21 22:37:01 0 [ERROR] InnoDB: Write to file ./ib_logfile0 failed\n"
        "261121 22:37:01 [ERROR] mysqld got signal 6 ;\n"
        "2026-11-21 22:37:01 0 [Note] InnoDB: Buffer pool(s) load completed\n"
    )
    assert death_excerpt(crash) == [
        "2026-11-21 22:37:01 0 [ERROR] InnoDB: Write to file ./ib_logfile0 failed",
        "261121 22:37:01 [ERROR] mysqld got signal 6 ;",
    ]


# -- 7: a completed run leaves no snapshots folder -------------------------------------------


def test_closing_a_managed_server_removes_its_snapshots_folder(tmp_path: Path) -> None:
    """Finding 7: an empty servers/<name>/snapshots/ was left in every completed run."""
    from dbrig import ownership
    from dbrig.scenario import ManagedServer
    from dbrig.server.binary import ServerBinary
    from dbrig.server.handles import ManagedServerHandle

    binary = ServerBinary(Path("/usr/sbin/mariadbd"), "mariadb", "10.11.19", "", None, None)
    home = tmp_path / "servers" / "default"
    handle = ManagedServerHandle("default", ManagedServer(), binary, home)
    for name in ("base", "data-0123abcd"):
        ownership.mark_owned(handle.snapshots / name, role="snapshot")
    (handle.snapshots / "data-0123abcd.json").write_text("{}")
    handle.close(keep_data=False)
    assert not handle.snapshots.exists()
    assert home.is_dir()


def test_closing_keeps_a_snapshots_folder_holding_something_dbrig_did_not_make(
    tmp_path: Path,
) -> None:
    from dbrig.scenario import ManagedServer
    from dbrig.server.binary import ServerBinary
    from dbrig.server.handles import ManagedServerHandle

    binary = ServerBinary(Path("/usr/sbin/mariadbd"), "mariadb", "10.11.19", "", None, None)
    handle = ManagedServerHandle("default", ManagedServer(), binary, tmp_path / "default")
    handle.snapshots.mkdir(parents=True)
    (handle.snapshots / "notes.txt").write_text("mine")
    handle.close(keep_data=False)
    assert (handle.snapshots / "notes.txt").read_text() == "mine"


# -- 8 and 12: show and report read the trial folders; an empty run is a valid run ---------

V1_RUN = Path(__file__).parents[1] / "fixtures" / "runs" / "v1" / "small-20261121-235548"


def copied_run(tmp_path: Path) -> Path:
    import shutil

    run = tmp_path / V1_RUN.name
    shutil.copytree(V1_RUN, run)
    return run


def test_show_and_report_rebuild_from_the_trials_when_results_csv_disagrees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 8: results.csv cut to its header hid 12 saved trials from show and report."""
    import pandas as pd

    run = copied_run(tmp_path)
    csv = run / "results.csv"
    csv.write_text(csv.read_text().splitlines()[0] + "\n")
    trials = len(list((run / "trials").glob("*/trial.json")))
    assert trials == 12

    code, out, err = dbrig(["show", str(run)], capsys)
    assert code == 0, err
    assert "no trials saved yet" not in out
    warned = [r.getMessage() for r in caplog.records if "rebuilt" in r.getMessage()]
    assert warned and "results.csv lists 0 trials but 12 are saved" in warned[0]

    code, out, err = dbrig(["report", str(run)], capsys)
    assert code == 0, err
    by_cell = pd.read_csv(run / "results_by_cell.csv")
    assert by_cell["trials"].sum() == trials


def test_show_and_report_of_a_run_stopped_before_its_first_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Finding 12: a run with no trial saved is a valid, empty run (exit 0)."""
    import json
    import shutil

    run = copied_run(tmp_path)
    shutil.rmtree(run / "trials")
    (run / "trials").mkdir()
    (run / "results.csv").unlink()
    saved = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**saved, "status": "interrupted"}))

    code, out, err = dbrig(["show", str(run)], capsys)
    assert code == 0, err
    assert "no trials saved yet" in out
    code, out, err = dbrig(["report", str(run)], capsys)
    assert code == 0, err
    assert (run / "report.html").is_file()


# -- 4: the run lock comes first ---------------------------------------------------------------


def test_a_refused_resume_changes_nothing_in_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Finding 4: a second --resume wrote status 'running' over 'complete' before the lock
    refused it."""
    import json

    from dbrig import store

    run = copied_run(tmp_path)
    before = (run / "run.json").read_text()
    assert json.loads(before)["status"] == "complete"
    with store.RunDir(run).lock():
        code, out, err = dbrig(["run", "--resume", str(run)], capsys)
    assert code == 2, err
    assert "another dbrig" in one_error_line(err)
    assert "trials ->" not in out + err
    assert (run / "run.json").read_text() == before
    assert not (run / "dbrig.log").exists()


# -- 9: the password variable never reaches a child ----------------------------------------------


def test_the_password_variable_is_not_in_any_childs_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 9: the variable named by password_env was in /proc/<pid>/environ of sysbench."""
    from dbrig import proc
    from dbrig.server.external import read_password

    monkeypatch.setenv("DBRIG_TEST_SECRET_PW", "hunter2-secret")
    monkeypatch.setenv("DBRIG_TEST_HARMLESS", "kept")
    assert read_password("db", "DBRIG_TEST_SECRET_PW", None) == "hunter2-secret"
    out = tmp_path / "environ"
    done = proc.run(["cat", "/proc/self/environ"], timeout_s=30, stdout=out)
    assert done.returncode == 0
    environ = out.read_bytes().split(b"\0")
    assert b"DBRIG_TEST_HARMLESS=kept" in environ
    assert not any(b"hunter2-secret" in item or b"SECRET_PW" in item for item in environ)
    # and with an environment of the caller's own
    done = proc.run(["cat", "/proc/self/environ"], timeout_s=30, stdout=out, env={"X": "1"})
    assert b"hunter2-secret" not in out.read_bytes()
    code, text = proc.capture(["env"])
    assert code == 0 and "hunter2-secret" not in text and "DBRIG_TEST_HARMLESS" in text


# -- 10: socket folders of dead dbrig processes are removed by the next run ---------------------


def test_only_socket_folders_of_dead_dbrig_processes_are_removed(tmp_path: Path) -> None:
    """Finding 10 (the real SIGKILL is in the integration test): what is removed and what not."""
    import subprocess

    from dbrig import ownership
    from dbrig.server.sandbox import remove_orphaned_socket_dirs

    gone = subprocess.Popen(["true"])
    gone.wait()
    dead, live = tmp_path / "dbrig-dead", tmp_path / "dbrig-live"
    ownership.mark_owned(dead, role="socket", owner_pid=gone.pid)
    ownership.mark_owned(live, role="socket", owner_pid=os.getpid())
    unmarked = tmp_path / "dbrig-someone-elses"
    unmarked.mkdir()
    datadir_like = tmp_path / "dbrig-datadir"
    ownership.mark_owned(datadir_like, role="datadir")
    assert remove_orphaned_socket_dirs(tmp_path) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dbrig-datadir",
        "dbrig-live",
        "dbrig-someone-elses",
    ]


# -- 1: a full disk while saving (the real filesystem is in the integration test) ----------------


def test_an_atomic_write_on_a_full_disk_names_the_filesystem_and_leaves_no_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from dbrig.errors import EXIT_RUNTIME, DiskFull
    from dbrig.util import files

    target = tmp_path / "results.csv"

    def full(self: Path, text: str, **kwargs: object) -> int:
        self.write_bytes(b"half")  # what a write cut short leaves
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(DiskFull) as raised:
        files.write_text_atomic(target, "a,b\n")
    assert raised.value.exit_code == EXIT_RUNTIME
    assert "no space left on the filesystem mounted at" in str(raised.value)
    assert str(files.mount_point(tmp_path)) in str(raised.value)
    assert list(tmp_path.iterdir()) == []


def test_run_json_says_aborted_even_when_the_disk_has_no_room_for_its_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 1: the clean-up's update of run.json failed too, so it stayed 'running'."""
    from dbrig import store
    from dbrig.store import rundir
    from dbrig.util import files

    run = store.RunDir(copied_run(tmp_path))
    run.update_saved(status="running")

    def no_room(path: Path, data: object) -> None:
        raise files.disk_full(path)

    monkeypatch.setattr(rundir.files, "write_json_atomic", no_room)
    run.update_saved(status="aborted", finished_at="2026-11-23T23:00:00+00:00")
    monkeypatch.undo()
    assert run.saved().status == "aborted"
    assert not list(run.path.glob(".*.tmp"))


def test_a_ctrl_c_while_a_folder_is_made_still_leaves_its_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen under two test workers: a Ctrl-C between mkdir and the marker left a folder
    with no marker, which the next snapshot refused to remove. Now it is held till after."""
    real_mkdir = Path.mkdir

    def mkdir_then_ctrl_c(self: Path, *args: object, **kwargs: object) -> None:
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        signal.raise_signal(signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        monkeypatch.setattr(Path, "mkdir", mkdir_then_ctrl_c)
        with pytest.raises(KeyboardInterrupt):
            ownership.mark_owned(tmp_path / "data.copying", "copy")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert ownership.is_owned(tmp_path / "data.copying")
