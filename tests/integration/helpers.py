"""Helpers for the integration suite: tiny scenarios, the CLI in-process and as a child,
finding leftover processes, and the checks every complete run must pass."""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import psutil
import pytest
import yaml

from dbrig import proc, store
from dbrig.cli import main
from dbrig.ownership import MARKER
from dbrig.server import datadir as dd
from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from tests.helpers.wait import wait_for

LEAK_TAG = "DBRIG_INTEGRATION_TEST"
DBRIG = Path(sys.executable).with_name("dbrig")
LEFTOVER_GRACE_S = 2.0

# The smallest scenario that still exercises everything: 1 table x 1000 rows,
# 1 s of warm-up and 2 s measured, a small buffer pool and redo log so restores are quick.
TINY_SCENARIO: dict[str, Any] = {
    "name": "it",
    "server": {"config": {"innodb_buffer_pool_size": "64M", "innodb_log_file_size": "16M"}},
    "workload": {
        "sysbench": {
            "test": "oltp_read_write",
            "tables": 1,
            "table_size": 1000,
            "time": 2,
            "report_interval": 1,
        }
    },
    "sampling": {"interval": 0.5},
    "warmup": 1,
    "seed": 1,
}
TINY_CONFIG: dict[str, Any] = TINY_SCENARIO["server"]["config"]
BUFFER_POOL_BYTES = str(64 * 2**20)

# -- scenarios -----------------------------------------------------------------------------


def tiny_scenario(**changes: Any) -> dict[str, Any]:
    """TINY_SCENARIO with top-level keys replaced."""
    data = copy.deepcopy(TINY_SCENARIO)
    data.update(copy.deepcopy(changes))
    return data


def write_scenario(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def only_run_dir(out: Path) -> Path:
    runs = [p for p in out.iterdir() if p.is_dir()]
    assert len(runs) == 1, f"expected one run directory in {out}, found {runs}"
    return runs[0]


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


# -- the command line, in-process and as a child process -----------------------------------


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> CliResult:
    """``dbrig.cli.main(args)`` in this process; it always ends in SystemExit.

    The CLI is written for a process of its own: it adds a log file handler, turns
    stream handlers down and installs handlers of Ctrl-C, SIGTERM and SIGHUP. Undo that, so the next
    in-process call does not write into this run's dbrig.log.
    """
    root = logging.getLogger()
    saved_handlers = [(h, h.level) for h in root.handlers]
    saved_level = root.level
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    saved_stops = {signum: signal.getsignal(signum) for signum in stops}
    try:
        with pytest.raises(SystemExit) as exited:
            main(args)
    finally:
        for signum, handler in saved_stops.items():
            signal.signal(signum, handler)
        for handler in root.handlers[:]:
            if all(handler is not h for h, _ in saved_handlers):
                root.removeHandler(handler)
                handler.close()
        for handler, level in saved_handlers:
            handler.setLevel(level)
        root.setLevel(saved_level)
    captured = capsys.readouterr()
    code = exited.value.code
    return CliResult(code if isinstance(code, int) else 1, captured.out, captured.err)


def run_main_watched(
    args: list[str], capsys: pytest.CaptureFixture[str], watch: threading.Thread
) -> CliResult:
    """:func:`run_main` while ``watch`` (a thread with a ``stop`` event) looks on from
    beside it; the watch is stopped and joined however the run ends."""
    watch.start()
    try:
        return run_main(args, capsys)
    finally:
        watch.stop.set()  # type: ignore[attr-defined]
        watch.join()


def run_dbrig(*args: str | Path, timeout: float = 300) -> CliResult:
    """The installed ``dbrig`` console script as a child process. The timeout only stops a
    hung run: a resume of three trials and its report can take a minute on a busy machine."""
    done = subprocess.run(
        [str(DBRIG), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return CliResult(done.returncode, done.stdout, done.stderr)


def one_error_line(err: str) -> str:
    """The single stderr line of an expected failure."""
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{err}"
    assert lines[0].startswith("dbrig: error: "), lines[0]
    return lines[0]


@contextlib.contextmanager
def closed_port(address: str = "127.0.0.1") -> Iterator[int]:
    """A port that refuses connections while the block runs: bound here, never listened
    on, so no other process (another test's server) can take it meanwhile, as it could a
    port merely found free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind((address, 0))
        yield int(held.getsockname()[1])


# -- nothing left behind -------------------------------------------------------------------


def processes_of(tmp_path: Path) -> list[psutil.Process]:
    """Live processes that mention ``tmp_path`` on their command line or carry its tag,
    and their descendants."""
    needle = str(tmp_path)
    found: dict[int, psutil.Process] = {}
    for p in psutil.process_iter(["pid", "cmdline", "environ", "status"]):
        info = p.info
        if info["pid"] == os.getpid() or info["status"] == psutil.STATUS_ZOMBIE:
            continue
        cmdline = info["cmdline"] or []
        environ = info["environ"] or {}
        if any(needle in arg for arg in cmdline) or environ.get(LEAK_TAG) == needle:
            found[p.pid] = p
            with contextlib.suppress(psutil.Error):
                found.update((c.pid, c) for c in p.children(recursive=True))
    return [p for p in found.values() if _alive(p)]


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def kill_leftovers(tmp_path: Path) -> list[str]:
    """Wait briefly for stragglers, then SIGKILL what is left; describe what was killed."""
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while (alive := processes_of(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    described = []
    for p in alive:
        try:
            described.append(f"{p.pid} {' '.join(p.cmdline())[:160]}")
            p.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(alive, timeout=5)
    return described


# -- what every complete run leaves behind ---------------------------------------------------


def trial_dirs(run: Path) -> list[Path]:
    return sorted((run / "trials").iterdir())


def assert_no_partial_trials(run: Path) -> None:
    for folder in trial_dirs(run):
        assert not folder.name.startswith("."), f"half-written trial left: {folder}"
        assert (folder / store.TRIAL_JSON).is_file(), f"{folder} has no trial.json"


def assert_data_removed(run: Path) -> None:
    """Datadir and snapshots are gone; the error log and my.cnf stay."""
    for server in (run / "servers").iterdir():
        assert not (server / "datadir").exists()
        assert not (server / "datadir.restoring").exists()
        assert not (server / "datadir.old").exists()
        snapshots = server / "snapshots"
        left = list(snapshots.iterdir()) if snapshots.exists() else []
        assert left == [], f"snapshots left behind: {left}"
        assert not snapshots.exists(), "an empty snapshots folder left behind"
        assert "ready for connections" in (server / "mysqld.err").read_text()
        assert (server / "my.cnf").is_file()


def assert_complete_run(run: Path, factor: str, values: list[Any], repeat: int = 1) -> None:
    """A finished run of ``len(values)`` cells x ``repeat`` in which every trial succeeded."""
    n_trials = len(values) * repeat
    assert (run / MARKER).is_file()
    assert (run / "scenario.yaml").is_file()
    assert (run / "dbrig.log").is_file()

    meta = read_json(run / store.RUN_JSON)
    assert meta["format_version"] == store.FORMAT_VERSION
    assert meta["status"] == "complete"
    assert meta["trials_saved"] == n_trials
    assert meta["trials_failed"] == 0
    assert meta["scenario"]["name"] == TINY_SCENARIO["name"]
    assert meta["factors"] == [factor]
    env = meta["environment"]
    assert env["host"]["hostname"] and env["host"]["kernel"] and env["host"]["cpu_count"] >= 1
    assert env["storage"]["fstype"] and env["storage"]["mount"]
    assert env["tools"]["workload"].startswith("sysbench 1.")
    assert "Ver" in env["tools"]["server:default"]
    server = meta["servers"]["default"]
    assert server["version"] and server["flavor"] in ("mariadb", "mysql")
    assert server["variables"]["innodb_buffer_pool_size"] == BUFFER_POOL_BYTES
    assert server["variables"]["datadir"].startswith(str(run))

    csv = pd.read_csv(run / "results.csv")
    parquet = pd.read_parquet(run / "results.parquet")
    for frame in (csv, parquet):
        assert len(frame) == n_trials
        assert frame["trial"].is_unique
        assert set(frame["status"]) == {"ok"}
        assert (frame["tps"] > 0).all()
        assert sorted(frame[factor].unique().tolist()) == sorted(values)
        assert frame.groupby(factor).size().tolist() == [repeat] * len(values)
    assert list(csv.columns) == list(parquet.columns)
    # Appended trial by trial during the run, sorted and whole at its end:
    every_trial = store.results_frame(store.RunDir(run).trials().values())
    assert (run / "results.csv").read_text() == every_trial.to_csv(index=False)

    assert_no_partial_trials(run)
    folders = trial_dirs(run)
    assert [f.name for f in folders] == sorted(csv["trial"])
    for folder in folders:
        assert_complete_trial(folder, factor)
    assert_data_removed(run)


def assert_complete_trial(folder: Path, factor: str) -> None:
    trial = read_json(folder / store.TRIAL_JSON)
    assert trial["status"] == "ok" and trial["reason"] is None
    assert trial["trial"] == folder.name
    assert factor in trial["factors"]
    assert trial["started_at"]
    assert trial["metrics"]["tps"] > 0
    assert trial["effective_config"]["innodb_buffer_pool_size"] == BUFFER_POOL_BYTES
    run_argv = trial["commands"]["workload"]
    assert "run" in run_argv[:3]
    assert "--report-checkpoints=1" in run_argv and "--time=3" in run_argv

    assert "Checkpoint report" in (folder / "workload.out").read_text()
    intervals = pd.read_csv(folder / "intervals.csv")
    assert set(intervals["phase"]) == {"warmup", "measure"}
    assert (intervals.loc[intervals["phase"] == "measure", "t_s"] > 0).all()
    for samples in ("cpu.csv", "status.csv"):
        frame = pd.read_csv(folder / samples)
        assert "measure" in set(frame["phase"]), f"{samples} has no measured rows"


# -- SIGKILL of dbrig mid-trial -----------------------------------------------------------------


def sysbench_running_in_a_partial_trial(out: Path) -> list[Path]:
    outputs = out.glob("*/trials/.c*.partial/workload.out")
    return [p for p in outputs if "Threads started!" in p.read_text(errors="replace")]


def wait_for_nothing_left(tmp_path: Path, timeout: float) -> list[str]:
    """[] once no process of the test is left; else kills and names what was left."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not processes_of(tmp_path):
            return []
        time.sleep(0.2)
    return kill_leftovers(tmp_path)


def spawn_dbrig(
    args: Sequence[str | Path],
    *,
    stdout: Any = subprocess.DEVNULL,
    stderr: Any = subprocess.DEVNULL,
    **popen: Any,
) -> subprocess.Popen:
    """``dbrig ARGS`` in the background, in its own session (a test sends Ctrl-C to its
    whole process group, as a terminal would), with stdin closed."""
    return subprocess.Popen(
        [str(DBRIG), *map(str, args)],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        **popen,
    )


@contextlib.contextmanager
def killed_at_end(child: subprocess.Popen, *, group: bool = False) -> Iterator[subprocess.Popen]:
    """``child`` for the block; SIGKILLed (with ``group``: its whole process group) and
    reaped if it still runs when the block ends, so a failing test leaves no dbrig."""
    try:
        yield child
    finally:
        if child.poll() is None:
            if group:
                os.killpg(child.pid, signal.SIGKILL)
            else:
                child.kill()
            child.wait()


def sigkill_dbrig_mid_trial(
    args: list[str | Path],
    tmp_path: Path,
    *,
    what: str = "sysbench running",
    ready: Callable[[], object] | None = None,
) -> list[str]:
    """Start ``dbrig ARGS`` in its own session, SIGKILL it once ``ready()`` (default:
    sysbench running in a trial under ``tmp_path/runs``), and return what was still
    running 30 s later (killed then): dbrig's children must die with it."""
    out = tmp_path / "runs"
    probe = ready or (lambda: sysbench_running_in_a_partial_trial(out))
    with killed_at_end(spawn_dbrig(args)) as child:
        wait_for(what, probe, timeout=90, child=child)
        child.kill()
        child.wait()
        # The children get their parent-death signal from the kernel (mariadbd: SIGKILL).
        return wait_for_nothing_left(tmp_path, timeout=30)


def prepared_template(
    name: str,
    home: Path,
    config: dict[str, Any],
    db: str,
    prepare_argv: Callable[[Sandbox], list[str]],
    timeout_s: float = 600,
) -> Path:
    """A datadir loaded by a workload's own prepare command, to copy for each test
    (``server_on_copy``): init, start, the accounts, the prepare, stop."""
    sandbox = Sandbox(name, find_server(), home)
    sandbox.initialize()
    sandbox.start(config)
    try:
        sandbox.prepare_accounts(db)
        out = home / "prepare.out"
        done = proc.run(prepare_argv(sandbox), timeout_s=timeout_s, stdout=out, merge_stderr=True)
        assert done.returncode == 0, out.read_text()
    finally:
        sandbox.close()
    return sandbox.datadir


@contextlib.contextmanager
def server_on_copy(
    name: str, template: Path, home: Path, config: dict[str, Any]
) -> Iterator[Sandbox]:
    """Sandbox ``name`` started on a copy of ``template`` (see ``prepared_template``)."""
    sandbox = Sandbox(name, find_server(), home)
    dd.copy_tree(template, sandbox.datadir)
    sandbox.start(config)
    try:
        yield sandbox
    finally:
        sandbox.close()
