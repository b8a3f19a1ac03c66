"""InterferenceRun on another host: the real wrapper, through a local ``sh -c`` standing
in for the remote login shell (the ssh transport itself is tests/integration's)."""

from __future__ import annotations

import time
from pathlib import Path

from dbrig.remote.ssh import SshHost, SshTarget
from dbrig.run.interference import InterferenceRun
from dbrig.tools.stress_ng import StressNgParams, StressNgTool

TOOL = StressNgTool(StressNgParams(cpu=1, cpu_load=50, host="db1"))


class ShellHost(SshHost):
    """``sh -c`` in place of ``ssh <destination>``: the command string runs as a login
    shell would run it, under the wrapper, here."""

    def __init__(self, connected: bool = True) -> None:
        super().__init__(SshTarget("db1", "root@db1"))
        self.connected = connected

    def command_prefix(self) -> list[str]:
        return ["sh", "-c"]

    def is_connected(self) -> bool:
        return self.connected


def test_stopping_it_there_keeps_its_output_and_counts_its_cpu_from_the_wrappers_times(
    tmp_path: Path,
) -> None:
    burn = 'trap "echo stopped >&2; exit 0" TERM; echo started >&2; while :; do :; done'
    run = InterferenceRun(TOOL, ["sh", "-c", burn], tmp_path, host=ShellHost())
    run.start()
    assert run.pid is None, "the local ssh is not the tool: the host sampler follows none"
    deadline = time.monotonic() + 10
    while "started" not in run._output() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    assert run.died() is None
    metrics = run.stop()
    assert metrics["stress_cpu_s_achieved"] > 0
    assert metrics["stress_cpu_s_requested"] > 0
    assert (tmp_path / "stress-ng.err").read_text().startswith("started\nstopped\n")


def test_an_early_end_there_names_the_host(tmp_path: Path) -> None:
    run = InterferenceRun(TOOL, ["sh", "-c", "exit 3"], tmp_path, host=ShellHost())
    run.start()
    assert run.child is not None and run.child.wait(30) is not None
    reason = run.died()
    assert reason is not None
    assert reason.startswith(
        "stress-ng on hosts.db1 (root@db1) exited early: stress-ng exited with status 3"
    )
    run.stop()


def test_a_lost_connection_names_the_host(tmp_path: Path) -> None:
    lost = "Connection to db1 closed by remote host."
    command = ["sh", "-c", f"echo '{lost}' >&2; exit 255"]
    run = InterferenceRun(TOOL, command, tmp_path, host=ShellHost(connected=False))
    run.start()
    assert run.child is not None and run.child.wait(30) is not None
    assert run.died() == f"stress-ng: hosts.db1 (root@db1): the ssh connection was lost: {lost}"
    metrics = run.stop()
    assert metrics["stress_cpu_s_requested"] > 0
