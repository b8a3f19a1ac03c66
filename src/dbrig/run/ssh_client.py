"""The workload's client on another host (``workload.<tool>.host``), over that host's
one multiplexed ssh connection (:mod:`dbrig.remote.ssh`).

The data set is prepared where dbrig runs, as for a local client. Where the client
connects:

- an external server: its ``host:port`` as the scenario gives it (the client host must
  reach it); the password travels in the tool's option file, written on the client host
  through stdin into a private folder the wrapper removes when the tool ends;
- a managed server here (it listens on this machine's 127.0.0.1 only, root without a
  password): a port on the client host's 127.0.0.1 forwarded back through the ssh
  connection (``ssh -O forward -R``), so nothing listens on a network address;
- a managed server on a host of its own: its benchmark account over TCP.

The local ``ssh`` is the trial's workload process: stopping it, or losing the
connection, stops the remote tool's process group. Its CPU times come back from the
wrapper's ``times`` at the end of the output (``ssh.client_times``), which are cut off
before the tool's parser reads the output; ssh's own messages go to a file of their own
(``workload.ssh.log``), so a lost connection is explained by ssh, not by the tool's last
progress line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dbrig.endpoint import Endpoint
from dbrig.remote.ssh import (
    SSH_FAILED,
    RemoteSecret,
    SshHost,
    client_times,
    connection_error,
    new_secret,
    stop_wrapped,
)
from dbrig.run.client import ClientReport, ClientRun, start_watch
from dbrig.server.protocol import ClientRoute, Handle
from dbrig.tools.base import WorkloadTool

SSH_LOG_SUFFIX = ".ssh.log"


@dataclass(frozen=True)
class RemoteRun:
    """What a trial needs to start its workload on a client host."""

    host: SshHost
    endpoint: Endpoint
    secret: RemoteSecret | None

    def saved_argv(self, argv: list[str]) -> list[str]:
        """trial.json's record of the command: where it ran, then what ran there."""
        return saved_argv(self.host, argv)


def saved_argv(host: SshHost, argv: list[str]) -> list[str]:
    """trial.json's record of a command run on ``host``: where it ran, then what ran there."""
    return ["ssh", host.target.destination, "--", *argv]


@contextmanager
def remote_run(host: SshHost, server: Handle, workload: WorkloadTool) -> Iterator[RemoteRun]:
    """Connected (reconnected after a loss) and with a way to the server, for one trial."""
    host.connect()
    route = server.capabilities.client_route
    if route is ClientRoute.DIRECT:
        yield _direct(host, server, workload)
        return
    if route is ClientRoute.NONE:
        yield RemoteRun(host, server.endpoint(workload.database), None)
        return
    port = server.port
    assert port is not None, "the server is started before its clients"
    forwarded = host.forward_to_local(port)
    try:
        endpoint = Endpoint("root", workload.database, host="127.0.0.1", port=forwarded)
        yield RemoteRun(host, endpoint, None)
    finally:
        if host.is_connected():
            host.cancel_forward(forwarded, port)


def _direct(host: SshHost, server: Handle, workload: WorkloadTool) -> RemoteRun:
    """A server reached at an address with an account: an external one at its
    ``host:port`` as the scenario gives it; a managed one on another host over TCP to
    127.0.0.1 when the client runs on the server's own host, else to its address."""
    credentials = server.credentials()
    assert credentials is not None, "a server reached directly logs in with an account"
    options = workload.client_options(credentials)
    secret = new_secret(f"{workload.info.name}.cnf", options) if options else None
    endpoint = Endpoint(
        user=credentials.user,
        database=workload.database,
        host=server.address_from(host.target.name),
        port=credentials.port if credentials.port is not None else server.port,
        client_options_file=Path(secret.path) if secret else None,
    )
    return RemoteRun(host, endpoint, secret)


def lost_connection(
    host: SshHost, returncode: int, output: str, ssh_messages: str | None = None
) -> str | None:
    """The failure reason when ssh itself failed (exit 255 and the connection gone: a tool
    that exits 255 over a live connection is the tool's failure), else None. The cause is
    ssh's own: ``ssh_messages`` (what it wrote apart from the command's output, when it
    was given a file of its own), else what the connection's master left, else the last
    line of ``output`` (where ssh's messages go without a file of their own)."""
    if returncode != SSH_FAILED or host.is_connected():
        return None
    if ssh_messages is not None:
        why = connection_error(ssh_messages) if ssh_messages.strip() else host.lost_cause()
    else:
        why = host.lost_cause() or connection_error(output)
    return f"{host.target.label}: the ssh connection was lost: {why or connection_error('')}"


class SshClient:
    """The client on a client host, under the ssh wrapper (stopped with its group when
    the local ``ssh`` ends or the connection is lost)."""

    def __init__(
        self,
        tool: str,
        remote: RemoteRun,
        binary: Path,
        clock: Callable[[], float],
        start_line: str | None = None,
    ) -> None:
        self.tool = tool
        self.remote = remote
        self.endpoint = remote.endpoint
        self.binary = binary
        self.clock = clock
        self.start_line = start_line

    def launch(self, argv: Sequence[str], out: Path, cwd: Path | None) -> ClientRun:
        """``cwd`` is this machine's: a client elsewhere runs in its login folder."""
        launched = self.clock()
        child = self.remote.host.spawn(
            argv,
            stdout=out,
            secret=self.remote.secret,
            report_times=True,
            ssh_log=ssh_log(out),
        )
        watch = start_watch(out, self.start_line, self.clock)
        # The host sampler follows no process: the client is elsewhere.
        return ClientRun(child, out, launched, watch, pid=None, stop=stop_wrapped)

    def saved_argv(self, argv: list[str]) -> list[str]:
        return self.remote.saved_argv(argv)

    def report(self, runs: Sequence[ClientRun]) -> ClientReport:
        users, systems, output = [], [], ""
        for run in runs:
            output, user, system = client_times(run.text())
            users.append(user)
            systems.append(system)
        last = runs[-1]
        failure = None
        if last.finished is not None:
            messages = _read(ssh_log(last.output))
            lost = lost_connection(self.remote.host, last.finished.returncode, output, messages)
            failure = f"{self.tool} on {lost}" if lost else None
        known = None not in users and None not in systems
        return ClientReport(
            output=output,
            user_cpu_s=sum(u for u in users if u is not None) if known else None,
            sys_cpu_s=sum(s for s in systems if s is not None) if known else None,
            failure=failure,
        )


def ssh_log(out: Path) -> Path:
    """Where ssh writes its own messages for the run whose output is ``out``."""
    return out.with_name(out.stem + SSH_LOG_SUFFIX)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
