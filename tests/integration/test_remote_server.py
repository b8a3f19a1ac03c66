"""A managed server on another host over ssh, for real: the sshd fixture on 127.0.0.1 is
db1, and dbrig's agent runs there (``python -m dbrig.remote.agent`` over the multiplexed
connection): init, prepare, snapshot, restore, start, stop and sampling all happen
through it. Real MariaDB, real sysbench, 1 table x 1000 rows.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import psutil
import pytest

import dbrig
from dbrig.commands.doctor import _remote_agent as doctor_agent_check
from dbrig.remote.server import AGENT_MODULE, REMOTE_HOME_ROOT, host_target, remote_folder
from dbrig.remote.ssh import SshHost
from dbrig.scenario.model import HostSpec
from tests.helpers.wait import wait_for
from tests.integration.helpers import (
    TINY_SCENARIO,
    one_error_line,
    only_run_dir,
    read_json,
    run_main,
    run_main_watched,
    sigkill_dbrig_mid_trial,
    tiny_scenario,
    write_scenario,
)
from tests.integration.sshd import Sshd
from tests.integration.test_remote_agent import SAMPLED_COLUMNS

pytestmark = pytest.mark.integration

# The dbrig under test, as db1's "installed" one: sshd gives its sessions no PYTHONPATH.
SOURCE = Path(dbrig.__file__).resolve().parents[1]
REMOTE_PYTHON = f"env PYTHONPATH={SOURCE} {sys.executable}"


def db1(sshd: Sshd, **changes: Any) -> dict[str, Any]:
    return sshd.hosts_entry(python=REMOTE_PYTHON, **changes)


def remote_server_scenario(sshd: Sshd, **changes: Any) -> dict[str, Any]:
    server = {**TINY_SCENARIO["server"], "host": "db1"}
    return tiny_scenario(name="remoteserver", hosts={"db1": db1(sshd)}, server=server, **changes)


def remote_home_of(run: Path, server: str = "default") -> Path:
    """The server's folder on db1 (this machine's home), as a --resume finds it again."""
    return Path.home() / remote_folder(run.name, read_json(run / "run.json")["run_id"], server)


def _cmdline(process: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return " ".join(process.cmdline())
    return ""


def _agents_of(remote_home: Path) -> list[int]:
    """The agents holding their lock in ``remote_home``: this run's, not those of a remote
    test running beside it on the other worker."""
    found = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if AGENT_MODULE in _cmdline(p) and any(
                str(remote_home) in f.path for f in p.open_files()
            ):
                found.append(p.pid)
    return found


def _remote_servers(home: Path) -> list[int]:
    return [
        p.pid
        for p in psutil.process_iter(["name"])
        if "mariadbd" in (p.info["name"] or "") and str(home) in _cmdline(p)
    ]


class Watch(threading.Thread):
    """While the run goes: every command line seen, the benchmark password (read from
    the client's option files, here and on db1), and SIGKILL of the server's ssh master
    connection as soon as the first trial's sysbench has started."""

    def __init__(self, out: Path) -> None:
        super().__init__(daemon=True)
        self.out = out
        self.stop = threading.Event()
        self.cmdlines: set[str] = set()
        self.passwords: set[str] = set()
        self.killed: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(psutil.Error, OSError):  # processes come and go
                self._look()
            time.sleep(0.1)

    def _look(self) -> None:
        for p in psutil.process_iter():
            self.cmdlines.add(_cmdline(p))
        self._read_passwords()
        # At once: the trial's sysbench runs 3 s (1 s warm-up, 2 s measured); a second's
        # wait here, on a busy machine, could reach its end and spare every trial.
        if not self.killed and self._measuring():
            self._kill_server_master()

    def _read_passwords(self) -> None:
        for file in [*Path("/tmp").glob("dbrig-secret-*/*"), *Path("/tmp").glob("*/dbrig-sec*/*")]:
            with contextlib.suppress(OSError):
                for line in file.read_text().splitlines():
                    key, _, value = line.partition("=")
                    if key.strip() in ("password", "mysql-password") and value.strip():
                        self.passwords.add(value.strip())

    def _measuring(self) -> bool:
        outputs = self.out.glob("*/trials/.c*.partial/workload.out")
        return any("Threads started!" in p.read_text(errors="replace") for p in outputs)

    def _kill_server_master(self) -> None:
        """The master connection the agent's ssh rides on (the client has its own)."""
        agents = [p for p in psutil.process_iter() if AGENT_MODULE in _cmdline(p)]
        paths = set()
        for agent in agents:
            with contextlib.suppress(psutil.Error):
                argv = agent.cmdline()
                if argv and argv[0] == "ssh" and "-S" in argv:
                    paths.add(argv[argv.index("-S") + 1])
        for p in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                argv = p.cmdline()
                if argv[:1] == ["ssh"] and "-M" in argv and argv[argv.index("-S") + 1] in paths:
                    p.kill()
                    self.killed.append(" ".join(argv))


def test_a_managed_server_on_db1_runs_there_and_a_lost_connection_fails_one_trial(
    tmp_path: Path, short_tmp: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two cells: the client here, then on db1 beside the server; two repetitions each,
    in that order. The server's ssh connection is killed during the first trial: that
    trial fails with the reason, the next reconnects (a new agent, the snapshot kept)."""
    workload = json.loads(json.dumps(TINY_SCENARIO["workload"]))
    scenario = remote_server_scenario(
        sshd,
        workload=workload,
        matrix={"workload.sysbench.host": [None, "db1"]},
        repeat=2,
        order="sequential",
    )
    path = write_scenario(tmp_path / "s.yaml", scenario)
    out = tmp_path / "runs"
    root_there = Path.home() / REMOTE_HOME_ROOT
    root_existed = root_there.exists()
    watch = Watch(out)
    result = run_main_watched(["run", str(path), "--out", str(out), "--no-report"], capsys, watch)
    assert watch.killed, "the server's connection was killed mid-trial"
    assert result.code == 1, result.err  # one trial failed, the run went on
    run = only_run_dir(out)
    results = pd.read_csv(run / "results.csv").sort_values("trial")
    assert list(results["status"]) == ["failed", "ok", "ok", "ok"], list(results["reason"])
    reason = results.iloc[0]["reason"]
    assert reason.startswith("server 'default' on hosts.db1 (root@127.0.0.1:"), reason
    assert "the ssh connection to hosts.db1" in reason and "was lost" in reason, reason
    missing = [c for c in SAMPLED_COLUMNS if c not in results.columns]
    assert not missing, f"columns a local run has and a remote server's run lacks: {missing}"
    for _, ok in results.iloc[1:].iterrows():
        # A client on db1 is not a process of this machine: no workload_ columns for it.
        here = ok["workload.sysbench.host"] != "db1"
        wanted = [c for c in SAMPLED_COLUMNS if here or not c.startswith("workload_")]
        empty = [c for c in wanted if pd.isna(ok[c])]
        assert ok["tps"] > 0 and not empty, (ok["trial"], empty)
    trials = {read_json(p)["trial"]: read_json(p) for p in run.glob("trials/*/trial.json")}
    local_client = trials["c000-r2"]["commands"]["workload"]
    remote_client = trials["c001-r1"]["commands"]["workload"]
    assert "--mysql-host=127.0.0.1" in local_client and "--mysql-user=dbrig" in local_client
    assert remote_client[:3] == ["ssh", "root@127.0.0.1", "--"]
    assert "--mysql-host=127.0.0.1" in remote_client  # db1's own loopback

    saved = read_json(run / "run.json")
    assert saved["servers"]["default"]["kind"] == "managed"
    assert saved["environment"]["tools"]["server:default"].startswith("/")
    assert "ready for connections" in (run / "servers/default/remote/mysqld.err").read_text()
    assert len(list((run / "servers/default").glob("agent-*.log"))) >= 2, "one per agent"

    assert watch.passwords, "the benchmark account's password was seen in its option files"
    for password in watch.passwords:
        in_argv = [c[:160] for c in watch.cmdlines if password in c]
        assert not in_argv, f"the password in a command line: {in_argv}"
        for file in [f for f in run.rglob("*") if f.is_file()]:
            assert password not in file.read_text(errors="replace"), f"password in {file}"

    remote_home = remote_home_of(run)
    assert not remote_home.exists(), "the server's folder on db1 is removed"
    assert root_existed or not root_there.exists(), "~/.dbrig there goes when empty"
    assert not sshd.wait_sessions_gone(), "no process outlives the run on db1"
    assert _remote_servers(remote_home) == []
    assert _agents_of(remote_home) == []
    assert not list(short_tmp.glob("dbrig-ssh-*")), "the control folders are removed"


def test_sigkill_of_dbrig_stops_the_server_and_the_agent_on_db1(
    tmp_path: Path, short_tmp: Path, sshd: Sshd
) -> None:
    """dbrig is SIGKILLed mid-trial: its ssh child dies with it (parent-death signal),
    sshd closes the session, the agent reads EOF and stops the server it started."""
    workload = {"sysbench": {**TINY_SCENARIO["workload"]["sysbench"], "time": 30}}
    path = write_scenario(tmp_path / "s.yaml", remote_server_scenario(sshd, workload=workload))
    left_here = sigkill_dbrig_mid_trial(["run", path, "--out", tmp_path / "runs"], tmp_path)
    assert left_here == []

    run = only_run_dir(tmp_path / "runs")
    remote_home = remote_home_of(run)

    def still_on_db1() -> list[int]:
        return _agents_of(remote_home) + _remote_servers(remote_home)

    wait_for("db1's agent and server to stop", lambda: not still_on_db1(), timeout=60)
    assert not sshd.wait_sessions_gone(), "no process outlives dbrig on db1"
    assert remote_home.is_dir(), "the server ran on db1; its folder stays for --resume"
    shutil.rmtree(remote_home)
    with contextlib.suppress(OSError):
        remote_home.parent.rmdir()  # ~/.dbrig, when this test made it


def test_a_server_host_without_dbrig_is_exit_2_and_the_dry_run_says_where(
    tmp_path: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = remote_server_scenario(sshd)
    path = write_scenario(tmp_path / "s.yaml", scenario)
    result = run_main(["run", str(path), "--dry-run"], capsys)
    assert result.code == 0, result.err
    where = [ln for ln in result.out.splitlines() if ln.startswith("  server: on hosts.db1")]
    assert where and "clients connect to 127.0.0.1:" in where[0], result.out
    assert "--mysql-host=<hosts.db1 address> --mysql-port=<the server's>" in result.out

    host = SshHost(host_target("db1", HostSpec(**scenario["hosts"]["db1"])))
    try:  # doctor --host's row for it (the whole doctor --host is test_remote_client's)
        check = doctor_agent_check(host, REMOTE_PYTHON)
    finally:
        host.close()
    assert check.ok and check.detail.startswith(f"dbrig {dbrig.__version__} (env "), check

    scenario["hosts"]["db1"]["python"] = "/usr/bin/python3"  # no dbrig for it
    path = write_scenario(tmp_path / "bare.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 2
    line = one_error_line(result.err)
    assert line.startswith(f"dbrig: error: {path}: server.host: hosts.db1 (root@127.0.0.1:"), line
    assert "dbrig is not installed for '/usr/bin/python3' there" in line

    scenario["hosts"]["db1"]["python"] = "/nonexistent/python3"
    path = write_scenario(tmp_path / "nopython.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 2
    assert "'/nonexistent/python3' not found there" in one_error_line(result.err)
    assert not (tmp_path / "runs").exists(), "nothing is written before the run starts"
    assert not sshd.wait_sessions_gone()
