"""Faults found by the reliability review of dbrig's own handling (issue 11), against a real
server, real signals and a real filesystem; the unit-level ones are in
tests/unit/test_review_faults.py."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from tests.helpers.wait import wait_for
from tests.integration.helpers import (
    TINY_CONFIG,
    killed_at_end,
    one_error_line,
    only_run_dir,
    read_json,
    run_dbrig,
    sigkill_dbrig_mid_trial,
    spawn_dbrig,
    sysbench_running_in_a_partial_trial,
    tiny_scenario,
    write_scenario,
)


@pytest.mark.integration
def test_a_server_killed_by_sigkill_is_explained_without_note_lines(tmp_path: Path) -> None:
    """Finding 11, on a real kill -9: the reason says the signal, and quotes no [Note] line."""
    sandbox = Sandbox("victim", find_server(), tmp_path / "server")
    sandbox.initialize()
    try:
        sandbox.start(TINY_CONFIG)
        assert sandbox.pid is not None
        os.kill(sandbox.pid, signal.SIGKILL)
        reason = wait_for("the server's death", sandbox.died, timeout=30)
    finally:
        sandbox.close()
    assert "ready for connections" in (tmp_path / "server" / "mysqld.err").read_text()
    assert "[Note]" not in reason and "ready for connections" not in reason, reason
    assert "SIGKILL" in reason, reason


@pytest.mark.integration
def test_the_socket_folder_of_a_sigkilled_dbrig_is_removed_by_the_resume(
    tmp_path: Path, short_tmp: Path
) -> None:
    """Finding 10: SIGKILL of dbrig left an empty 0700 $TMPDIR/dbrig-XXXX that no later run
    removed."""
    # Long enough for the SIGKILL to land mid-trial (it follows sysbench's start within a
    # fraction of a second), short because the resume runs the whole trial again.
    scenario = tiny_scenario(
        workload={"sysbench": {**tiny_scenario()["workload"]["sysbench"], "time": 6}}
    )
    path = write_scenario(tmp_path / "long.yaml", scenario)
    out = tmp_path / "runs"
    assert sigkill_dbrig_mid_trial(["run", path, "--out", out], tmp_path) == []
    assert list(short_tmp.glob("dbrig-*")), "the socket folder is expected after SIGKILL"
    resumed = run_dbrig("run", "--resume", only_run_dir(out), "--no-report")
    assert resumed.code == 0, resumed.err
    assert list(short_tmp.glob("dbrig-*")) == []


def start_dbrig(tmp_path: Path, scenario: dict, *, ignore_sigint: bool = False) -> subprocess.Popen:
    """``dbrig run`` as a child writing to tmp_path/stdout and tmp_path/stderr; with
    ``ignore_sigint`` it starts with SIGINT ignored, as a background job of a script does."""
    path = write_scenario(tmp_path / "scenario.yaml", scenario)

    def ignore() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    with open(tmp_path / "stdout", "w") as stdout, open(tmp_path / "stderr", "w") as stderr:
        return spawn_dbrig(
            ["run", path, "--out", tmp_path / "runs"],
            stdout=stdout,
            stderr=stderr,
            preexec_fn=ignore if ignore_sigint else None,
        )


def stopped(child: subprocess.Popen, sig: int) -> int:
    with killed_at_end(child):
        child.send_signal(sig)
        return child.wait(timeout=90)


@pytest.mark.integration
def test_sigint_stops_a_run_started_with_sigint_ignored(tmp_path: Path) -> None:
    """Finding 2: `dbrig run x.yaml &` in a script inherits SIGINT ignored; kill -INT did
    nothing and the run went on to exit 0."""
    scenario = tiny_scenario(
        workload={"sysbench": {**tiny_scenario()["workload"]["sysbench"], "time": 30}}
    )
    child = start_dbrig(tmp_path, scenario, ignore_sigint=True)
    out = tmp_path / "runs"
    try:
        wait_for("sysbench running", lambda: sysbench_running_in_a_partial_trial(out), timeout=90)
    finally:
        code = stopped(child, signal.SIGINT)
    err = (tmp_path / "stderr").read_text()
    assert code == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert read_json(only_run_dir(out) / "run.json")["status"] == "interrupted"


@pytest.mark.integration
def test_sigterm_before_the_first_trial_leaves_an_empty_run_show_and_report_read(
    tmp_path: Path,
) -> None:
    """Finding 12: SIGTERM before the first trial printed a pandas traceback, and show and
    report of that run exited 70."""
    child = start_dbrig(tmp_path, tiny_scenario())
    out = tmp_path / "runs"
    try:
        wait_for(
            "the run to start",
            lambda: "trials ->" in (tmp_path / "stderr").read_text(),
            timeout=60,
            child=child,
        )
    finally:
        code = stopped(child, signal.SIGTERM)
    err = (tmp_path / "stderr").read_text()
    assert code == 130, err
    assert "Traceback" not in err and "internal error" not in err, err
    run = only_run_dir(out)
    assert read_json(run / "run.json")["status"] == "interrupted"
    assert list((run / "trials").glob("*/trial.json")) == []
    shown = run_dbrig("show", run)
    assert shown.code == 0 and "no trials saved yet" in shown.out, shown.err
    reported = run_dbrig("report", run)
    assert reported.code == 0, reported.err


@pytest.mark.fresh_data_sets  # asserts the init ran, once
@pytest.mark.integration
def test_a_server_that_cannot_initialise_fails_the_run_once_with_exit_3(tmp_path: Path) -> None:
    """Finding 3: a failing mariadb-install-db was retried for every trial (6 identical
    failures) and the run ended with exit 1."""
    basedir = tmp_path / "basedir"
    (basedir / "bin").mkdir(parents=True)
    (basedir / "bin" / "mariadbd").symlink_to(find_server().mysqld)
    # a basedir supplies every program (server.basedir): the real my_print_defaults
    print_defaults = shutil.which("my_print_defaults")
    assert print_defaults is not None
    (basedir / "bin" / "my_print_defaults").symlink_to(print_defaults)
    calls = tmp_path / "install-db-calls"
    install_db = basedir / "bin" / "mariadb-install-db"
    install_db.write_text(
        f"#!/bin/sh\necho called >> {calls}\n"
        "cat <<'END'\n"
        'ERROR: 1 Can\'t create/write to file (Errcode: 28 "No space left on device")\n'
        "END\n"
        "exit 1\n"
    )
    install_db.chmod(0o755)
    scenario = tiny_scenario(
        server={"basedir": str(basedir), "config": TINY_CONFIG},
        matrix={"workload.sysbench.threads": [1, 2]},
        repeat=2,
    )
    path = write_scenario(tmp_path / "noinit.yaml", scenario)
    out = tmp_path / "runs"
    result = run_dbrig("run", path, "--out", out, "--no-report")
    assert result.code == 3, result.err
    line = one_error_line(result.err.replace(result.err.split("dbrig: error:")[0], ""))
    assert "initialising the datadir failed" in line and "No space left" in line, line
    assert calls.read_text().count("called") == 1
    run = only_run_dir(out)
    assert read_json(run / "run.json")["status"] == "aborted"
    assert list((run / "trials").iterdir()) == []


# -- 1: a full disk while saving -----------------------------------------------------------------

LEFT_BEHIND = (".*.tmp", "*.restoring", "*.copying", ".*.partial", "datadir.old")


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 400 MiB ext4 filesystem, loop-mounted (root only), unmounted whatever happens."""
    if os.geteuid() != 0:
        pytest.skip("mounting a loop filesystem needs root")
    image, mount = tmp_path / "fs.img", tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["truncate", "-s", "400M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
    try:
        yield mount
    finally:
        done = subprocess.run(["umount", str(mount)], check=False)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], check=False)
        image.unlink(missing_ok=True)


def fill(filesystem: Path) -> Path:
    """Fill ``filesystem`` to the last block with one file; returns it."""
    filler = filesystem / "filler"
    with open(filler, "wb") as handle:
        free = shutil.disk_usage(filesystem).free
        with contextlib.suppress(OSError):
            os.posix_fallocate(handle.fileno(), 0, max(free - 4096, 4096))
        chunk = b"\0" * 4096
        with contextlib.suppress(OSError):
            while True:
                handle.write(chunk)
                handle.flush()
    return filler


@pytest.mark.integration
def test_a_full_results_disk_stops_the_run_with_exit_3_and_resume_finishes_it(
    tmp_path: Path, small_filesystem: Path
) -> None:
    """Finding 1: ENOSPC while saving ended with exit 70 ("internal error (a bug)"), run.json
    left 'running' and .run.json.tmp, .results.csv.tmp, datadir.restoring behind."""
    scenario = tiny_scenario(
        # the disk is filled as soon as sysbench starts: 4 s leave time for that, and the
        # resume runs both trials again
        workload={"sysbench": {**tiny_scenario()["workload"]["sysbench"], "time": 4}},
        repeat=2,
        out=str(small_filesystem / "runs"),
    )
    path = write_scenario(tmp_path / "full.yaml", scenario)
    out = small_filesystem / "runs"
    with open(tmp_path / "stderr", "w") as stderr:
        child = spawn_dbrig(["run", path, "--no-report"], stderr=stderr)
    with killed_at_end(child):
        wait_for("sysbench running", lambda: sysbench_running_in_a_partial_trial(out), timeout=90)
        filler = fill(small_filesystem)
        code = child.wait(timeout=120)
    err = (tmp_path / "stderr").read_text()
    assert code == 3, err
    assert "Traceback" not in err and "internal error" not in err, err
    errors = [ln for ln in err.splitlines() if ln.startswith("dbrig: error:")]
    assert len(errors) == 1, err
    assert "no space left" in errors[0] and str(small_filesystem) in errors[0], errors[0]
    run = only_run_dir(out)
    assert read_json(run / "run.json")["status"] == "aborted"
    left = [p for pattern in LEFT_BEHIND for p in run.rglob(pattern)]
    assert left == [], left

    filler.unlink()
    resumed = run_dbrig("run", "--resume", run, "--no-report")
    assert resumed.code == 0, resumed.err
    assert read_json(run / "run.json")["status"] == "complete"
    assert len(list((run / "trials").glob("*/trial.json"))) == 2
