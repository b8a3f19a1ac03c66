"""Clients on another host over ssh, for real: a throwaway sshd on 127.0.0.1 is the host.

The "remote" host is this machine reached through sshd, so everything the transport
does runs for real: the multiplexed connection, the wrapper that stops remote commands
with their process group, the password file written through stdin, the port forwarded
back to a managed server, a connection lost mid-trial.
"""

from __future__ import annotations

import glob
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from dbrig.remote.ssh import SshHost, SshTarget
from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from tests.integration.helpers import (
    TINY_SCENARIO,
    closed_port,
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

pytestmark = pytest.mark.integration

SECRET = "r3mote-Pw#9"
# The columns the host sampler takes from the client's own process: a remote client is
# not a process of this machine (remote sampling is the remote agent's part). Nor is the
# host's other work known: the ssh connection carrying the client's queries is not followed.
LOCAL_PROCESS_COLUMNS = ("workload_", "other_cpu_pct")


def remote_scenario(sshd: Sshd, **changes: Any) -> dict[str, Any]:
    workload = json.loads(json.dumps(TINY_SCENARIO["workload"]))
    workload["sysbench"].update(time=3, host="load1")
    data = tiny_scenario(name="remote", hosts={"load1": sshd.hosts_entry()}, workload=workload)
    data.update(changes)
    return data


def secret_folders() -> set[str]:
    return set(glob.glob("/tmp/dbrig-secret-*"))


def control_folders(short_tmp: Path) -> list[Path]:
    return list(short_tmp.glob("dbrig-ssh-*"))


def trial_jsons(run: Path) -> list[dict]:
    return [read_json(p) for p in sorted(run.glob("trials/*/trial.json"))]


def test_a_remote_client_gives_a_local_ones_columns_and_survives_a_lost_connection(
    tmp_path: Path, short_tmp: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two cells, here and on load1, two repetitions each, in that order; the ssh
    connection is killed during load1's first trial: that trial fails with the reason,
    the next one reconnects."""
    workload = json.loads(json.dumps(TINY_SCENARIO["workload"]))
    workload["sysbench"]["time"] = 3
    scenario = tiny_scenario(
        name="placement",
        hosts={"load1": sshd.hosts_entry()},
        workload=workload,
        matrix={"workload.sysbench.host": [None, "load1"]},
        repeat=2,
        order="sequential",
    )
    path = write_scenario(tmp_path / "s.yaml", scenario)
    killed: list[int] = []
    killer = threading.Thread(target=kill_master_when_the_client_runs, args=(sshd, killed))
    killer.start()
    try:
        result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    finally:
        killer.join()
    assert killed, "the connection was killed mid-trial"
    assert result.code == 1, result.err
    run = only_run_dir(tmp_path / "runs")
    trials = {
        (t["factors"]["workload.sysbench.host"], t["repetition"]): t for t in trial_jsons(run)
    }
    lost, remote = trials["load1", 1], trials["load1", 2]
    assert lost["status"] == "failed"
    assert "hosts.load1" in lost["reason"] and "connection was lost" in lost["reason"]
    # In ssh's words or its master's end, never the tool's last line of output.
    assert "avg/stddev" not in lost["reason"] and "tps:" not in lost["reason"], lost["reason"]
    assert remote["status"] == "ok", remote["reason"]
    local = trials[None, 1]
    assert local["status"] == "ok" and trials[None, 2]["status"] == "ok"
    assert local["metrics"]["tps"] > 0 and remote["metrics"]["tps"] > 0
    assert remote["commands"]["workload"][:3] == ["ssh", "root@127.0.0.1", "--"]
    assert "--mysql-host=127.0.0.1" in remote["commands"]["workload"]
    expected = {k for k in local["metrics"] if not k.startswith(LOCAL_PROCESS_COLUMNS)}
    assert expected <= set(remote["metrics"]), expected - set(remote["metrics"])
    assert remote["metrics"]["client_user_cpu_s"] > 0, "the wrapper's times came back"
    tools = read_json(run / "run.json")["environment"]["tools"]
    assert tools["workload@load1"].startswith("sysbench 1.0.20")
    assert not control_folders(short_tmp), "the control folder is removed"
    assert not sshd.wait_sessions_gone(), "no remote process outlives the run"


@pytest.fixture
def external_server(tmp_path: Path) -> Any:
    box = Sandbox("outside", find_server(), tmp_path / "outside")
    box.initialize()
    box.start({"innodb_buffer_pool_size": "64M", "innodb_log_file_size": "16M"})
    box.execute(
        "CREATE DATABASE bench",
        f"CREATE USER 'bench'@'127.0.0.1' IDENTIFIED BY '{SECRET}'",
        "GRANT ALL ON bench.* TO 'bench'@'127.0.0.1'",
    )
    try:
        yield box
    finally:
        box.close()


class SecretWatch(threading.Thread):
    """Looks, while the run goes, at every process's argv and at the secret folders."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.in_argv: list[str] = []
        self.modes: set[str] = set()

    def run(self) -> None:
        while not self.stop.is_set():
            for p in psutil.process_iter(["cmdline"]):
                line = " ".join(p.info["cmdline"] or [])
                if SECRET in line:
                    self.in_argv.append(line[:200])
            for folder in secret_folders():
                for file in Path(folder).glob("*"):
                    try:
                        self.modes.add(oct(file.stat().st_mode & 0o777))
                    except OSError:
                        continue
            time.sleep(0.1)


def test_a_remote_clients_password_travels_through_stdin_and_is_removed(
    tmp_path: Path,
    sshd: Sshd,
    external_server: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("BENCH_PW", SECRET)
    before = secret_folders()
    scenario = remote_scenario(sshd)
    scenario["workload"]["sysbench"]["db"] = "bench"
    scenario["server"] = {
        "kind": "external",
        "host": "127.0.0.1",
        "port": external_server.port,
        "user": "bench",
        "password_env": "BENCH_PW",
        "reset": "none",
    }
    path = write_scenario(tmp_path / "s.yaml", scenario)
    watch = SecretWatch()
    result = run_main_watched(["run", str(path), "--out", str(tmp_path / "runs")], capsys, watch)
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    (trial,) = trial_jsons(run)
    assert trial["status"] == "ok", trial["reason"]
    assert any(
        a.startswith("--config-file=/tmp/dbrig-secret-") for a in trial["commands"]["workload"]
    )
    assert not watch.in_argv, f"the password in a command line: {watch.in_argv}"
    assert watch.modes == {"0o600"}, "the option file existed there, 0600"
    assert secret_folders() == before, "the remote secret folder is removed"
    for file in run.rglob("*"):
        if file.is_file():
            assert SECRET not in file.read_text(errors="replace"), f"password in {file}"
    assert not sshd.wait_sessions_gone()


def kill_master_when_the_client_runs(sshd: Sshd, killed: list[int]) -> None:
    """Once the measured sysbench runs under sshd, SIGKILL dbrig's master ssh connection
    (once). Preflight's `sysbench --version` there is not it: killed then, the master
    would be gone before load1's first trial, which would connect anew and pass."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if sshd.runs("sysbench", "run"):
            time.sleep(1.0)
            for p in psutil.process_iter(["cmdline"]):
                argv = p.info["cmdline"] or []
                if "-M" in argv and str(sshd.port) in argv:
                    p.kill()
                    killed.append(p.pid)
                    return
        time.sleep(0.1)


def test_an_unreachable_host_or_a_refused_key_is_exit_2_before_any_trial(
    tmp_path: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    with closed_port() as port:
        closed = remote_scenario(sshd, hosts={"load1": sshd.hosts_entry(port=port)})
        path = write_scenario(tmp_path / "closed.yaml", closed)
        result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 2
    line = one_error_line(result.err)
    assert "closed.yaml" in line and "hosts.load1 (root@127.0.0.1:" in line
    assert "cannot connect" in line and "refused" in line

    other_key = tmp_path / "other_key"
    keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)]
    subprocess.run(keygen, check=True, stdin=subprocess.DEVNULL)
    entry = sshd.hosts_entry()
    entry["options"]["IdentityFile"] = str(other_key)
    path = write_scenario(tmp_path / "key.yaml", remote_scenario(sshd, hosts={"load1": entry}))
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 2
    line = one_error_line(result.err)
    assert "hosts.load1" in line and "Permission denied" in line
    assert not (tmp_path / "runs").exists(), "nothing is written before the run starts"


def test_a_tool_missing_on_the_host_is_named(sshd: Sshd, short_tmp: Path) -> None:
    entry = sshd.hosts_entry()
    host = SshHost(SshTarget("load1", entry["ssh"], entry["port"], entry["options"]))
    try:
        host.check_reachable()
        assert host.which(["no-such-benchmark", "sysbench"]) == "/usr/bin/sysbench"
        assert host.which(["no-such-benchmark"]) is None
        code, output = host.run(["sh", "-c", 'printf "%s|" "$@"', "x", "a b", "$HOME", "'"])
        assert (code, output) == (0, "a b|$HOME|'|")
    finally:
        host.close()
    assert not control_folders(short_tmp)


def test_doctor_checks_a_remote_host(
    tmp_path: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_scenario(tmp_path / "s.yaml", remote_scenario(sshd))
    result = run_main(["doctor", "--host", "load1", "--scenario", str(path)], capsys)
    assert result.code == 0, result.err
    assert "key accepted" in result.out and "sysbench 1.0.20" in result.out
    result = run_main(["doctor", "--host", "nope", "--scenario", str(path)], capsys)
    assert result.code == 2
    assert "'nope' is not a key of hosts:" in one_error_line(result.err)


def test_sigkill_of_dbrig_stops_the_remote_client_and_the_next_run_cleans_up(
    tmp_path: Path, short_tmp: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = remote_scenario(sshd)
    scenario["workload"]["sysbench"]["time"] = 30
    path = write_scenario(tmp_path / "s.yaml", scenario)

    def remote_sysbench() -> bool:
        return sshd.runs("sysbench", "run")  # the trial's, not preflight's --version

    args: list[str | Path] = ["run", path, "--out", tmp_path / "runs"]
    assert (
        sigkill_dbrig_mid_trial(args, tmp_path, what="remote sysbench", ready=remote_sysbench) == []
    )
    assert not sshd.wait_sessions_gone(), "the remote client died with the connection"
    assert control_folders(short_tmp), "SIGKILL left the control folder"
    result = run_main(["doctor", "--host", "load1", "--scenario", str(path)], capsys)
    assert result.code == 0, result.err
    assert not control_folders(short_tmp), "the next dbrig removed it"
