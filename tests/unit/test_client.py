"""The workload's client behind one interface (run/client.py, run/ssh_client.py): a local
child, and the ssh client through a local ``sh -c`` standing in for the remote login
shell (the ssh transport itself is tests/integration's)."""

from __future__ import annotations

import time
from pathlib import Path

from dbrig.endpoint import Endpoint
from dbrig.remote.ssh import SshHost, SshTarget
from dbrig.run.client import LocalClient, named_reason
from dbrig.run.ssh_client import RemoteRun, SshClient, ssh_log

ENDPOINT = Endpoint("root", "sbtest", host="127.0.0.1", port=3306)
PROGRESS = "[ 1s ] thds: 2 tps: 10.00 qps: 200.00 (r/w/o: 140.00/40.00/20.00) lat (ms,95%): 3.0"


class ShellHost(SshHost):
    """``sh -c`` in place of ``ssh <destination>``, under the real wrapper."""

    def __init__(self, connected: bool = True) -> None:
        super().__init__(SshTarget("load1", "root@load1"))
        self.connected = connected

    def command_prefix(self) -> list[str]:
        return ["sh", "-c"]

    def spawn(self, argv, *, ssh_log=None, **options):  # type: ignore[no-untyped-def, override]
        return super().spawn(argv, **options)  # sh has no -E: ssh's log is the test's to write

    def is_connected(self) -> bool:
        return self.connected


def wait_ended(run) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 30
    while run.wait(0.1) is None:
        assert time.monotonic() < deadline, "the client did not end"


def test_a_local_run_notes_when_its_clock_started_and_reports_its_cpu(tmp_path: Path) -> None:
    client = LocalClient("sysbench", ENDPOINT, Path("sysbench"), time.monotonic, "Threads started!")
    script = "sleep 0.2; echo 'Threads started!'; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"
    run = client.launch(["sh", "-c", script], tmp_path / "workload.out", cwd=tmp_path)
    assert run.pid is not None  # the host sampler follows it
    wait_ended(run)
    run.stop()
    assert run.started and 0.15 <= run.start_delay_s < 5
    report = client.report([run])
    assert report.output == "Threads started!\n" and report.failure is None
    assert report.user_cpu_s is not None and report.user_cpu_s + (report.sys_cpu_s or 0) > 0
    assert client.saved_argv(["sysbench", "run"]) == ["sysbench", "run"]


def test_a_run_with_no_start_line_starts_at_its_launch(tmp_path: Path) -> None:
    client = LocalClient("mysqlslap", ENDPOINT, Path("mysqlslap"), time.monotonic)
    run = client.launch(["true"], tmp_path / "workload.out", cwd=None)
    wait_ended(run)
    assert not run.started and run.start_delay_s == 0.0


def test_stopping_a_local_run_that_never_ends(tmp_path: Path) -> None:
    client = LocalClient("sysbench", ENDPOINT, Path("sysbench"), time.monotonic)
    run = client.launch(["sleep", "60"], tmp_path / "workload.out", cwd=None)
    assert run.wait(0.05) is None
    finished = run.stop(grace_s=5)
    assert finished.killed_by_signal is not None and run.finished is finished


def ssh_client(connected: bool) -> SshClient:
    remote = RemoteRun(ShellHost(connected), ENDPOINT, None)
    return SshClient("sysbench", remote, Path("/usr/bin/sysbench"), time.monotonic)


def test_a_lost_connection_is_told_in_ssh_own_words_not_the_tools_last_line(
    tmp_path: Path,
) -> None:
    client = ssh_client(connected=False)
    out = tmp_path / "workload.out"
    run = client.launch(["sh", "-c", f"echo '{PROGRESS}'; exit 255"], out, cwd=None)
    assert run.pid is None  # the local ssh is not the tool
    wait_ended(run)
    ssh_log(out).write_text("Connection to load1 closed by remote host.\n")
    report = client.report([run])
    assert report.failure == (
        "sysbench on hosts.load1 (root@load1): the ssh connection was lost: "
        "Connection to load1 closed by remote host."
    )
    assert report.output.strip() == PROGRESS  # the wrapper's times are cut off
    assert report.user_cpu_s is not None


def test_with_no_word_from_ssh_the_tools_output_is_not_quoted(tmp_path: Path) -> None:
    client = ssh_client(connected=False)
    out = tmp_path / "workload.out"
    run = client.launch(["sh", "-c", f"echo '{PROGRESS}'; exit 255"], out, cwd=None)
    wait_ended(run)
    failure = client.report([run]).failure
    assert failure == (
        "sysbench on hosts.load1 (root@load1): the ssh connection was lost: ssh gave no reason"
    )


def test_a_tool_exiting_255_over_a_live_connection_is_the_tools_failure(tmp_path: Path) -> None:
    client = ssh_client(connected=True)
    run = client.launch(["sh", "-c", "exit 255"], tmp_path / "workload.out", cwd=None)
    wait_ended(run)
    assert client.report([run]).failure is None
    assert client.saved_argv(["sysbench", "run"]) == ["ssh", "root@load1", "--", "sysbench", "run"]


def test_a_tools_reason_names_the_tool() -> None:
    assert named_reason("sysbench", "killed by signal / no summary (rc=-9)") == (
        "sysbench: killed by signal / no summary (rc=-9)"
    )
    assert named_reason("mysqlslap", "mysqlslap was killed by signal 9") == (
        "mysqlslap was killed by signal 9"
    )
