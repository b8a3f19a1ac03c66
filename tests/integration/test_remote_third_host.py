"""A managed server on db1 and its client on load1, neither of them dbrig's machine, for
real: db1 is the session's sshd (127.0.0.1), load1 a second sshd (127.0.0.2) with its own
keys. db1's ``address`` is this machine's network address, so the client on load1 must
connect there, to the server's own port, not through a tunnel back to dbrig.
Real MariaDB, real sysbench, 1 table x 1000 rows, one trial.
"""

from __future__ import annotations

import contextlib
import json
import socket
from pathlib import Path

import pandas as pd
import psutil
import pytest

from dbrig.remote.server import AGENT_MODULE, REMOTE_HOME_ROOT
from tests.integration.helpers import (
    TINY_SCENARIO,
    only_run_dir,
    read_json,
    run_main_watched,
    tiny_scenario,
    write_scenario,
)
from tests.integration.sshd import Sshd
from tests.integration.test_remote_client import control_folders, secret_folders
from tests.integration.test_remote_server import Watch, _cmdline, _remote_servers, db1

pytestmark = pytest.mark.integration


def network_address() -> str:
    """This machine's first IPv4 address that is not loopback (a third host's view of db1)."""
    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    pytest.skip("no IPv4 address besides loopback: db1 needs one a third host can reach")


class ClientWatch(Watch):
    """Every command line, the password, and while sysbench runs in load1's sessions: its
    argv, the TCP peers it connected to and the ssh master connections alive then."""

    def __init__(self, out: Path, load1: Sshd) -> None:
        super().__init__(out)
        self.load1 = load1
        self.masters: set[str] = set()  # alive while the client ran
        self.client_argv: list[str] = []
        self.client_peers: set[tuple[str, int]] = set()

    def _look(self) -> None:
        masters = set()
        for p in psutil.process_iter():
            line = _cmdline(p)
            self.cmdlines.add(line)
            if line.startswith("ssh ") and " -M " in f" {line} ":
                masters.add(line)
        self._read_passwords()
        for p in self.load1.session_processes():
            with contextlib.suppress(psutil.Error):
                # The measured run (preflight's `sysbench --version` is not it).
                if p.name() == "sysbench" and "run" in p.cmdline():
                    self.client_argv = p.cmdline()
                    self.masters |= masters
                    for c in p.net_connections(kind="tcp"):
                        if c.raddr:
                            self.client_peers.add((c.raddr.ip, c.raddr.port))


def test_a_server_on_db1_is_reached_from_a_client_on_load1_at_its_address(
    tmp_path: Path,
    short_tmp: Path,
    sshd: Sshd,
    second_sshd: Sshd,
    capsys: pytest.CaptureFixture[str],
) -> None:
    address = network_address()
    workload = json.loads(json.dumps(TINY_SCENARIO["workload"]))
    workload["sysbench"].update(time=3, host="load1")
    scenario = tiny_scenario(
        name="thirdhost",
        hosts={"db1": db1(sshd, address=address), "load1": second_sshd.hosts_entry()},
        server={**TINY_SCENARIO["server"], "host": "db1"},
        workload=workload,
    )
    path = write_scenario(tmp_path / "s.yaml", scenario)
    out = tmp_path / "runs"
    root_there = Path.home() / REMOTE_HOME_ROOT
    root_existed = root_there.exists()
    secrets_before = secret_folders()
    watch = ClientWatch(out, second_sshd)
    result = run_main_watched(["run", str(path), "--out", str(out), "--no-report"], capsys, watch)
    assert result.code == 0, result.err
    run = only_run_dir(out)
    results = pd.read_csv(run / "results.csv")
    assert list(results["status"]) == ["ok"], list(results["reason"])
    assert results.iloc[0]["tps"] > 0

    # Two hosts, two connections while the client ran: one master each, to its own sshd
    # (preflight opens and closes its own before the run).
    seen = sorted((m.split()[-1], m.split()[m.split().index("-S") + 1]) for m in watch.masters)
    assert [d for d, _ in seen] == ["root@127.0.0.1", "root@127.0.0.2"], seen

    # The client ran on load1 and connected to db1's address, at the server's own port.
    trial = read_json(next(run.glob("trials/*/trial.json")))
    saved = trial["commands"]["workload"]
    assert saved[:3] == ["ssh", "root@127.0.0.2", "--"], saved
    assert f"--mysql-host={address}" in saved and "--mysql-user=dbrig" in saved, saved
    port = next(int(a.split("=", 1)[1]) for a in saved if a.startswith("--mysql-port="))
    assert f"--mysql-host={address}" in watch.client_argv, "seen running under load1's sshd"
    assert (address, port) in watch.client_peers, watch.client_peers
    assert not [c for c in watch.cmdlines if " -O forward " in f" {c} "], "no tunnel"
    ports_on_db1 = {c.laddr.port for c in psutil.net_connections("tcp") if c.status == "LISTEN"}
    assert port not in ports_on_db1, "the server stopped"

    assert watch.passwords, "the benchmark account's password was seen in its option file"
    for password in watch.passwords:
        in_argv = [c[:160] for c in watch.cmdlines if password in c]
        assert not in_argv, f"the password in a command line: {in_argv}"
        for file in [f for f in run.rglob("*") if f.is_file()]:
            assert password not in file.read_text(errors="replace"), f"password in {file}"

    assert not (root_there / f"{run.name}-default").exists(), "the folder on db1 is removed"
    assert root_existed or not root_there.exists(), "~/.dbrig there goes when empty"
    assert secret_folders() == secrets_before, "the option file's folder on load1 is removed"
    assert not sshd.wait_sessions_gone(), "no process outlives the run on db1"
    assert not second_sshd.wait_sessions_gone(), "no process outlives the run on load1"
    assert _remote_servers(root_there) == []
    assert not [p for p in psutil.process_iter() if AGENT_MODULE in _cmdline(p)]
    assert not control_folders(short_tmp), "both control folders are removed"
