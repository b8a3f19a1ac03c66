"""A managed server on another host, driven through the agent (:mod:`dbrig.remote.agent`).

:class:`RemoteServerHandle` has the face of
:class:`dbrig.server.handles.ManagedServerHandle` (the runner and
:mod:`dbrig.run.datasets` treat both alike) and forwards each step to an agent
started through a *command prefix*: ``[]`` runs the agent here as a plain child
(the tests), an ssh prefix such as ``["ssh", "-o", "ControlPath=...", "db1", "--"]``
runs it on db1. Clients (the workload, prepare, SHOW GLOBAL STATUS) connect over
TCP to ``address`` and the server's port, as a benchmark account whose password
dbrig makes for the run and sends on the agent's stdin.

A lost connection (the agent's stdout ends, or a request gets no answer in time)
fails the request under way with the cause; ``died()`` then reports it, so the
trial fails with it, and the next trial starts a new agent.
"""

from __future__ import annotations

import contextlib
import os
import queue
import secrets
import shlex
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pymysql

import dbrig
from dbrig import proc
from dbrig.endpoint import Credentials, Endpoint, is_loopback
from dbrig.errors import DbrigError, ServerError
from dbrig.host.settings import SystemSettings, SystemState
from dbrig.remote import protocol
from dbrig.remote.profiling import RemoteProfile
from dbrig.remote.samples import merge_remote_samples
from dbrig.remote.ssh import SshError, SshHost, SshTarget, remote_command, resolved_hostname
from dbrig.sampling import SampleTiming
from dbrig.scenario import ExternalServer, ManagedServer
from dbrig.scenario.model import HostSpec
from dbrig.server.external import write_secret
from dbrig.server.protocol import Capabilities, ClientRoute, DataSets

AGENT_MODULE = "dbrig.remote.agent"
BENCHMARK_USER = "dbrig"
HELLO_TIMEOUT_S = 60.0
QUICK_TIMEOUT_S = 60.0  # a request that does no real work (died, sampling)
WORK_TIMEOUT_S = 6 * 3600.0  # init, restore, snapshot: as long as the data is big
STOP_AGENT_GRACE_S = 150.0  # its server's clean shutdown first (Sandbox.stop waits 120 s)
_STDERR_TAIL = 3


def agent_argv(prefix: list[str], python: str = "python3", *, shell: bool = False) -> list[str]:
    """The agent's command: through ``prefix`` on another host; without one, this very
    interpreter (so a test runs the dbrig it is testing). ``shell``: the prefix takes one
    command string the remote shell splits (an ssh prefix); ``python`` is then a command
    line of its own (``/opt/dbrig/bin/python``, ``sudo -n python3``)."""
    if not prefix:
        return [sys.executable, "-m", AGENT_MODULE]
    if shell:
        return [*prefix, remote_command([*shlex.split(python), "-m", AGENT_MODULE])]
    return [*prefix, python, "-m", AGENT_MODULE]


class AgentLost(ServerError):
    """The connection to the agent is gone (or it stopped answering)."""


class AgentConnection:
    """One running agent: requests go to its stdin, answers come from its stdout."""

    def __init__(
        self,
        prefix: list[str],
        where: str,
        stderr_log: Path,
        python: str,
        *,
        shell: bool = False,
        connection_lost: Callable[[], str | None] | None = None,
    ) -> None:
        """``connection_lost``: why the transport is gone (an ssh connection that
        dropped), or None: the first reason a lost agent gives."""
        self.where = where
        self._connection_lost = connection_lost
        self.stderr_log = stderr_log
        self.lost: str | None = None
        self._lock = threading.Lock()
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        stderr_log.parent.mkdir(parents=True, exist_ok=True)
        argv = agent_argv(prefix, python, shell=shell)
        self._child = proc.spawn_piped(argv, stderr=stderr_log)
        self._reader = threading.Thread(target=self._read, name="dbrig-agent-reader", daemon=True)
        self._reader.start()
        try:
            hello = self._next_line(HELLO_TIMEOUT_S, "its start")
            self.hello = protocol.decode_hello(hello, dbrig.__version__, where)
        except AgentLost:
            self.close()
            raise ServerError(
                f"{where}: the agent did not start: {self._stderr_tail() or 'no error output'}",
                hint=f"is dbrig {dbrig.__version__} installed for {python} there?",
            ) from None
        except DbrigError:
            self.close()
            raise

    def _read(self) -> None:
        stdout = self._child.popen.stdout
        assert stdout is not None
        for line in stdout:
            self._lines.put(line)
        self._lines.put(None)

    def call(self, op: str, timeout_s: float = QUICK_TIMEOUT_S, **args: Any) -> Any:
        """Send one request and wait for its answer; a remote error is raised here."""
        with self._lock:
            if self.lost:
                raise AgentLost(self.lost)
            stdin = self._child.popen.stdin
            assert stdin is not None
            try:
                stdin.write(protocol.encode_request(op, args))
                stdin.flush()
            except (OSError, ValueError):  # ValueError: the pipe was closed here
                self._lose(op)
            return protocol.decode_response(self._next_line(timeout_s, op))

    def _next_line(self, timeout_s: float, doing: str) -> bytes:
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            self._lose(doing, f"no answer in {timeout_s:.0f} s")
        if line is None:
            self._lose(doing)
        return line

    def _lose(self, doing: str, why: str = "") -> NoReturn:
        """Record the lost connection (stopping the local end) and raise it."""
        if not why and self._connection_lost is not None:
            why = self._connection_lost() or ""
        why = why or self._stderr_tail() or "the agent exited"
        self.lost = protocol.one_line(
            f"{self.where}: the connection to its agent was lost (during {doing}): {why}"
        )
        self._child.stop(grace_s=5)
        raise AgentLost(self.lost)

    def _stderr_tail(self) -> str:
        with contextlib.suppress(OSError):
            lines = self.stderr_log.read_text(errors="replace").strip().splitlines()
            wanted = [ln for ln in lines if " INFO " not in ln]
            return " | ".join(wanted[-_STDERR_TAIL:])
        return ""

    def close(self) -> None:
        """End the agent's stdin: it stops its server and exits (killed if it does not)."""
        stdin = self._child.popen.stdin
        with contextlib.suppress(OSError):
            if stdin is not None:
                stdin.close()
        if self._child.wait(STOP_AGENT_GRACE_S) is None:
            self._child.stop(grace_s=5)
        self._child.stop(grace_s=0)  # its process group: nothing it started stays behind
        self._reader.join(5)  # the pipe ended with the agent
        with contextlib.suppress(OSError):
            if self._child.popen.stdout is not None and not self._reader.is_alive():
                self._child.popen.stdout.close()
        self.lost = self.lost or f"{self.where}: the agent was closed"

    @property
    def pid(self) -> int:
        return self._child.pid


class RemoteSampling:
    """The agent's host sampler for one trial: the registry's ``server-host`` sampler
    (:mod:`dbrig.sampling.registry`); ``collect`` merges its files into the trial's."""

    def __init__(self, server: RemoteServerHandle, timing: SampleTiming, devices: list[str] | None):
        self.server = server
        self.timing = timing
        self.devices = devices
        self.error: str | None = None
        self.failure: BaseException | None = None
        self.files: dict[str, str] = {}

    def start(self) -> None:
        t0 = self.timing.t0 if self.timing.t0 is not None else self.timing.clock()
        self.server.call(
            "sampling_start",
            interval=self.timing.interval,
            t0_in_s=t0 - self.timing.clock(),
            warmup_s=self.timing.warmup_s,
            devices=self.devices,
        )

    def stop(self) -> None:
        try:
            answer = self.server.call("sampling_stop")
        except ServerError as exc:
            self.error = exc.message
            return
        self.files = dict(answer["files"])
        self.error = self.error or answer["error"]

    def collect(self, folder: Path) -> None:
        """The agent's files beside the client host's (remote/samples.py)."""
        merge_remote_samples(folder, self.files)


class RemoteServerHandle:
    """A managed server on another host, through its agent (see the module docstring)."""

    capabilities = Capabilities(
        data_sets=DataSets.SNAPSHOTS,
        client_route=ClientRoute.DIRECT,  # the benchmark account over TCP
        faults=False,
        status=True,
        followed_here=False,  # cpu.csv is its host's
        samples_its_host=True,  # by its agent
    )
    # The server's processes are on another host: the local process sampler cannot follow
    # them (the agent's sampler does).
    pid = None
    port: int | None = None  # the agent's open answers it
    work_folder: Path | None = None

    def __init__(
        self,
        name: str,
        spec: ManagedServer,
        home: Path,
        *,
        prefix: list[str],
        address: str,
        remote_home: str,
        where: str | None = None,
        bind_address: str | None = None,
        python: str = "python3",
        host: SshHost | None = None,
    ) -> None:
        """``home`` is the local folder (prepare outputs, the agent's log, the server's
        logs fetched back); ``remote_home`` the server's folder on its host (relative: to
        the remote user's home); ``address`` where clients reach the server. With ``host``
        the agent runs over that host's ssh connection (reopened after a loss, closed
        with the handle) and ``prefix`` is not used."""
        self.name = name
        self.spec = spec
        self.home = home
        self.prefix = list(prefix)
        self.address = address
        self.remote_home = remote_home
        self.where = where or f"server '{name}' on {address}"
        self.bind_address = bind_address or ("127.0.0.1" if is_loopback(address) else "0.0.0.0")
        self.python = python
        self.host = host
        self.info: dict[str, Any] = {}
        self.port: int | None = None
        self._password = secrets.token_urlsafe(24)
        self._secrets: Path | None = None
        self._agent: AgentConnection | None = None
        self._connections = 0

    # -- the agent -------------------------------------------------------------------------

    def call(self, op: str, timeout_s: float = QUICK_TIMEOUT_S, **args: Any) -> Any:
        """One request to the agent (started now if there is none); a remote error is
        raised as its own class, its message naming the host."""
        if self._agent is None:
            self._connect_agent()
        assert self._agent is not None
        try:
            return self._agent.call(op, timeout_s, **args)
        except AgentLost:
            raise
        except DbrigError as exc:
            raise located(exc, self.name, self.where) from None

    def _connect_agent(self) -> None:
        self._connections += 1
        log = self.home / f"agent-{self._connections}.log"
        self.home.mkdir(parents=True, exist_ok=True)
        if self.host is not None:
            try:
                self.host.connect()
            except SshError as exc:
                raise ServerError(f"{self.where}: {exc.message}", hint=exc.hint) from None
            prefix = self.host.command_prefix()
            self._agent = AgentConnection(
                prefix, self.where, log, self.python, shell=True, connection_lost=self._ssh_lost
            )
        else:
            self._agent = AgentConnection(self.prefix, self.where, log, self.python)
        opened = self._agent.call(
            "open",
            WORK_TIMEOUT_S,
            name=self.name,
            spec=self.spec.model_dump(mode="json"),
            home=self.remote_home,
            account={"user": BENCHMARK_USER, "password": self._password},
            bind_address=self.bind_address,
        )
        self.port = int(opened["port"])

    def _ssh_lost(self) -> str | None:
        if self.host is None or self.host.is_connected():
            return None
        return f"the ssh connection to {self.host.target.label} was lost"

    def _lost(self) -> str | None:
        return self._agent.lost if self._agent is not None else None

    # -- the ManagedServerHandle face -------------------------------------------------------

    def has_data_set(self, digest: str) -> bool:
        """The first step of every trial: a lost agent is replaced here."""
        if self._lost():
            self._drop_agent()
        return bool(self.call("has_data_set", WORK_TIMEOUT_S, digest=digest))

    def take_from_cache(self, digest: str) -> bool:
        """The snapshot cache serves servers of this machine only."""
        return False

    def load_base(self, database: str) -> None:
        self.call("load_base", WORK_TIMEOUT_S, database=database)

    def start_for_prepare(self, database: str) -> None:
        self.call("start_for_prepare", WORK_TIMEOUT_S, database=database)

    def stop(self) -> float:
        return float(self.call("stop", WORK_TIMEOUT_S))

    def save_data_set(self, digest: str, key: tuple) -> None:
        self.call("save_data_set", WORK_TIMEOUT_S, digest=digest, key=list(key))

    def restore_data_set(self, digest: str) -> float:
        return float(self.call("restore_data_set", WORK_TIMEOUT_S, digest=digest))

    def start(self, spec: ManagedServer) -> dict[str, float]:
        answer = self.call("start", WORK_TIMEOUT_S, spec=spec.model_dump(mode="json"))
        if not self.info:
            self.info = {**answer["info"], "host": self.address}
        return {k: float(v) for k, v in answer["timings"].items()}

    def effective(self, spec: ManagedServer | ExternalServer) -> dict[str, Any]:
        assert isinstance(spec, ManagedServer)
        return dict(self.call("effective", spec=spec.model_dump(mode="json")))

    @property
    def sampled_host(self) -> str | None:
        """Its host, whose cores its agent samples (None: a local agent, on this machine)."""
        return self.host.target.name if self.host is not None else None

    def address_from(self, host: str) -> str:
        """127.0.0.1 on the server's own host, else its address."""
        return "127.0.0.1" if host == self.sampled_host else self.address

    def apply_system(
        self, settings: SystemSettings, here: SystemState | None = None
    ) -> dict[str, Any]:
        """The cell's ``system`` settings on the server's host (the agent remembers the
        original values and puts them back when it closes or loses dbrig); the values
        read back there, for the trial record. ``here`` (this machine's) is not used."""
        answer = self.call("system_apply", WORK_TIMEOUT_S, settings=settings.model_dump())
        return dict(answer)

    def finish_trial(self) -> dict[str, float]:
        """Stop the server after a trial; nothing to stop when the agent was lost."""
        if self._lost():
            return {}
        with contextlib.suppress(AgentLost):
            return {k: float(v) for k, v in self.call("finish_trial", WORK_TIMEOUT_S).items()}
        return {}

    def died(self) -> str | None:
        """Why the server is gone: it died on its host, or the agent was lost."""
        if self._agent is None:
            return None
        try:
            return self.call("died")
        except AgentLost as exc:
            return exc.message

    def connect(self) -> pymysql.Connection:
        return pymysql.connect(
            host=self.address,
            port=self._port(),
            user=BENCHMARK_USER,
            password=self._password,
            connect_timeout=5,
            autocommit=True,
        )

    def endpoint(
        self, database: str, options_text: str | None = None, filename: str = "client.cnf"
    ) -> Endpoint:
        """Where clients connect over TCP; the password goes to a 0600 option file."""
        options = None
        if options_text:
            options = write_secret(self._secret_dir(), filename, options_text)
        return Endpoint(
            user=BENCHMARK_USER,
            database=database,
            host=self.address,
            port=self._port(),
            client_options_file=options,
        )

    def credentials(self) -> Credentials:
        return Credentials(
            user=BENCHMARK_USER,
            password=self._password,
            host=self.address,
            port=self._port(),
            socket=None,
        )

    def host_sampler(self, timing: SampleTiming, devices: list[str] | None) -> RemoteSampling:
        """The agent's sampler of the server's host, for one trial."""
        return RemoteSampling(self, timing, devices)

    def profiler(self, timing: SampleTiming, frequency: int) -> RemoteProfile:
        """The server's CPU profile for one trial, recorded and folded by its agent."""
        return RemoteProfile(self.call, timing, frequency, self.where)

    def close(self, keep_data: bool) -> None:
        """Fetch the server's logs into ``home/remote/``, then stop everything there (a lost
        agent is replaced for that, so its folder does not stay behind)."""
        if self._agent is not None and self._lost():
            self._drop_agent()
            with contextlib.suppress(ServerError):
                self._connect_agent()
        elif self._agent is None and self.host is not None and not keep_data:
            # A resumed run that did not use this server: its folder there still goes.
            with contextlib.suppress(ServerError):
                self._connect_agent()
        if self._agent is not None and not self._lost():
            with contextlib.suppress(ServerError):
                self._save_logs(self.call("logs"))
            with contextlib.suppress(ServerError):
                self.call("close", WORK_TIMEOUT_S, keep_data=keep_data)
        self._drop_agent()
        if self.host is not None:
            self.host.close()
        if self._secrets is not None:
            shutil.rmtree(self._secrets, ignore_errors=True)
            self._secrets = None

    def _save_logs(self, logs: dict[str, str]) -> None:
        folder = self.home / "remote"
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in logs.items():
            (folder / Path(name).name).write_text(text)

    def _drop_agent(self) -> None:
        if self._agent is not None:
            self._agent.close()
            self._agent = None

    def _port(self) -> int:
        if self.port is None:
            self._connect_agent()
        assert self.port is not None
        return self.port

    def _secret_dir(self) -> Path:
        if self._secrets is None:
            self._secrets = Path(tempfile.mkdtemp(prefix="dbrig-secrets-"))
            os.chmod(self._secrets, 0o700)
        return self._secrets


def located(exc: DbrigError, name: str, where: str) -> DbrigError:
    """``exc`` again, its message saying on which host: "server 'db'" becomes ``where``."""
    own = f"server '{name}'"
    if exc.message.startswith(where):
        message = exc.message
    elif exc.message.startswith(own):
        message = where + exc.message[len(own) :]
    else:
        message = f"{where}: {exc.message}"
    return type(exc)(message, hint=exc.hint)


LOCAL_AGENT_ENV = "DBRIG_LOCAL_AGENT"  # "1": managed servers run under a local agent (tests)
REMOTE_HOME_ROOT = ".dbrig"  # under the remote user's home: <run folder>-<run id>-<server>


@dataclass(frozen=True)
class AgentTarget:
    """How to reach the agent of one managed server, and its server."""

    prefix: list[str]  # the command prefix that runs a command on the server's host
    address: str  # where clients connect to the server
    remote_home: str  # the server's folder there (relative: to the remote user's home)
    where: str  # for messages: "server 'db' on hosts.db1 (root@10.0.0.5)"
    ssh: SshTarget | None = None  # the server's host (None: a local agent, ``prefix`` [])
    python: str = "python3"  # the command line of the Python with dbrig there
    host_name: str | None = field(default=None)  # its key under hosts:


def host_target(name: str, spec: HostSpec) -> SshTarget:
    """The ssh client's view of ``hosts.<name>``."""
    options = {key: str(value) for key, value in spec.options.items()}
    return SshTarget(name, spec.ssh, spec.port, options)


def server_address(name: str, spec: HostSpec) -> str:
    """Where clients reach a server on ``hosts.<name>``: its ``address:``, else the host
    name ssh connects to (``ssh -G``: a Host alias resolves to its HostName)."""
    return spec.address or resolved_hostname(host_target(name, spec))


def remote_folder(run_folder: str, run_id: str | None, server: str) -> str:
    """The server's folder on its host, relative to the ssh user's home.

    Two runs named alike (started in the same second from two machines, or two --out
    folders) must not share it, and a --resume of a killed run must find its folder
    again (the old server's pid file, the disk settings to put back): hence the run's
    id from run.json. A run.json without one (an older dbrig's) keeps the old name.
    """
    parts = [run_folder, run_id, server] if run_id else [run_folder, server]
    return f"{REMOTE_HOME_ROOT}/{'-'.join(parts)}"


def agent_target(
    name: str,
    spec: ManagedServer,
    run_path: Path,
    hosts: Mapping[str, HostSpec] | None = None,
    run_id: str | None = None,
) -> AgentTarget | None:
    """Where managed server ``name`` runs, when it runs under an agent; None: in-process.

    The one place that decides it. ``host:`` (a key of ``hosts``) runs the agent on that
    host over ssh, its server in :func:`remote_folder` there. Without it,
    ``DBRIG_LOCAL_AGENT=1`` runs it under a local agent (prefix ``[]``): the tests, and
    a way to measure what the agent costs.
    """
    if spec.host is not None:
        host_spec = (hosts or {})[spec.host]
        ssh = host_target(spec.host, host_spec)
        return AgentTarget(
            prefix=[],
            address=server_address(spec.host, host_spec),
            remote_home=remote_folder(run_path.name, run_id, name),
            where=f"server '{name}' on {ssh.label}",
            ssh=ssh,
            python=host_spec.python,
            host_name=spec.host,
        )
    if os.environ.get(LOCAL_AGENT_ENV) != "1":
        return None
    return AgentTarget(
        prefix=[],
        address="127.0.0.1",
        remote_home=str(run_path / "servers" / name / "agent-home"),
        where=f"server '{name}' (local agent)",
    )
