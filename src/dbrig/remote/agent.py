"""The agent: ``python3 -m dbrig.remote.agent``, run on the server's host by dbrig.

It drives one managed server there with the same code a local run uses
(:class:`dbrig.server.handles.ManagedServerHandle`: init, base and data-set
snapshots, restore, start, stop) and samples that host with the same samplers
(:class:`dbrig.sampling.HostSampler`: CPU per core, disks, memory, the server's
processes), so a remote trial has the columns of a local one. It records the
server's CPU profile there too when a trial asks (``perf record`` over the measured
window, folded there: :mod:`dbrig.remote.profiling`); only the folded stacks travel.

It reads one request per line on stdin and answers one line on stdout
(:mod:`dbrig.remote.protocol`). Its stdout carries only the protocol: anything
else that prints goes to stderr, which dbrig keeps in the run directory.

It applies the cells' ``system`` settings to the block device under the datadir
here with the same code too (:class:`dbrig.host.settings.SystemState`), keeping the
original values in the server's folder as soon as it reads them.

When stdin ends (dbrig closed it, dbrig died, the ssh connection dropped), or on
SIGTERM or SIGHUP, it stops the server and everything else it started (every child
is in a process group of its own and gets SIGTERM if the agent itself is killed:
:mod:`dbrig.proc`), removes perf's files of a profile under way, puts the original
``system`` values back and exits (after a SIGKILL, the next agent of that folder puts
them back and removes those files). The datadir and snapshots stay for the next
agent unless dbrig asked for them to go (``close``).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pymysql

import dbrig
from dbrig import ownership, proc
from dbrig.errors import DbrigError, ServerError
from dbrig.host import probe
from dbrig.host.settings import SystemSettings, SystemState, device_under
from dbrig.remote import protocol
from dbrig.remote.profiling import PROFILE_FOLDER, AgentProfile
from dbrig.sampling import HostSampler, SampleTiming
from dbrig.scenario import ManagedServer
from dbrig.server.binary import find_server
from dbrig.server.handles import ManagedServerHandle
from dbrig.server.sandbox import free_port, port_is_free

log = logging.getLogger("dbrig.remote.agent")

LOCK_WAIT_S = 60.0  # an agent whose connection just dropped may still be stopping its server
OLD_SERVER_WAIT_S = 150.0  # a clean InnoDB shutdown of a server whose agent was killed
LOG_FILES = ("mysqld.err", "my.cnf", "initialize.log", "mysqld.stdout")
LOG_LIMIT = 4 * 2**20  # bytes of each log sent back: the end of it
SYSTEM_MEMO = ".system-original.json"  # in the server's folder: the values to put back


class Agent:
    """One managed server on this host, and the sampler of this host."""

    def __init__(self) -> None:
        self.handle: ManagedServerHandle | None = None
        self.home: Path | None = None
        self.account: tuple[str, str] | None = None  # (user, password): never logged
        self.sampler: HostSampler | None = None
        self.profile: AgentProfile | None = None
        self.system: SystemState | None = None
        self._lock: IO[str] | None = None
        self._made: list[Path] = []  # the home and the parents open created, innermost first
        self.done = False

    def ops(self) -> dict[str, Callable[..., Any]]:
        return {
            "ping": self.ping,
            "open": self.open,
            "has_data_set": lambda digest: self._handle().has_data_set(digest),
            "load_base": lambda database: self._handle().load_base(database),
            "start_for_prepare": self.start_for_prepare,
            "stop": lambda: self._handle().stop(),
            "save_data_set": lambda digest, key: self._handle().save_data_set(digest, tuple(key)),
            "restore_data_set": lambda digest: self._handle().restore_data_set(digest),
            "start": self.start,
            "effective": lambda spec: self._handle().effective(ManagedServer(**spec)),
            "finish_trial": lambda: self._handle().finish_trial(),
            "died": self.died,
            "sampling_start": self.sampling_start,
            "sampling_stop": self.sampling_stop,
            "profile_start": self.profile_start,
            "profile_stop": self.profile_stop,
            "system_apply": self.system_apply,
            "logs": self.logs,
            "close": self.close,
        }

    def handle_line(self, line: bytes) -> bytes:
        """One request line in, one response line out; a failure is a response too."""
        op = "?"
        try:
            op, args = protocol.decode_request(line)
            action = self.ops().get(op)
            if action is None:
                raise protocol.ProtocolError(f"the agent has no operation '{op}'")
            return protocol.encode_result(action(**args))
        except Exception as exc:
            # The op's name only: a request's arguments may hold the account's password.
            log.info("%s failed: %s", op, protocol.one_line(str(exc)), exc_info=_is_bug(exc))
            return protocol.encode_error(exc)

    def ping(self) -> dict[str, Any]:
        """Who answers: this host and the agent's process group (for a kill over ssh)."""
        return {"host": socket.gethostname(), "pid": os.getpid(), "pgid": os.getpgid(0)}

    # -- the server ----------------------------------------------------------------------

    def open(
        self,
        name: str,
        spec: dict[str, Any],
        home: str,
        account: dict[str, str],
        bind_address: str = "0.0.0.0",
    ) -> dict[str, Any]:
        """Take ``home`` (relative: to this user's home directory) for server ``name``."""
        if self.handle is not None:
            raise ServerError(f"the agent already drives server '{self.handle.name}'")
        where = Path(home).expanduser()
        if where.is_absolute():
            self._made = [p for p in (where, *where.parents) if not p.exists()]
        else:
            # ~/.dbrig/...: dbrig's own folders (this agent's, or an earlier one's of the
            # run); each goes at close when nothing else is in it.
            where = Path.home() / where
            self._made = [p for p in (where, *where.parents) if Path.home() in p.parents]
        where.mkdir(parents=True, exist_ok=True)
        if not ownership.is_owned(where):
            ownership.mark_owned(where, role="remote-server")  # refuses a folder not empty
        self._take_lock(where, name)
        _wait_for_old_server(where / "mysqld.pid", name)
        shutil.rmtree(where / PROFILE_FOLDER, ignore_errors=True)  # a killed agent's perf files
        managed = ManagedServer(**spec)
        port = managed.port or _free_port_on(bind_address)
        managed = managed.model_copy(update={"port": port})
        binary = find_server(managed.basedir)
        self.home = where
        self.account = (account["user"], account["password"])
        self.handle = ManagedServerHandle(
            name, managed, binary, where, cache=None, bind_address=bind_address
        )
        if (where / SYSTEM_MEMO).exists():  # an agent killed before it put them back
            self._system()
        return {"port": port, "home": str(where), "binary": str(binary.mysqld)}

    def _take_lock(self, where: Path, name: str) -> None:
        """One agent per server home: a second one waits for the first to let go."""
        lock = open(where / ".agent.lock", "w")  # noqa: SIM115 (held until the agent exits)
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock = lock
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    lock.close()
                    raise ServerError(
                        f"server '{name}': another agent still holds {where} "
                        f"after {LOCK_WAIT_S:.0f} s"
                    ) from None
                time.sleep(0.2)

    def died(self) -> str | None:
        """Why the trial must stop: the server died, or this host's sampler failed (the
        trial polls this, so a remote sampler fails it as a local one would)."""
        reason = self._handle().died()
        if reason is None and self.sampler is not None:
            reason = self.sampler.error
        return reason

    def start_for_prepare(self, database: str) -> None:
        self._handle().start_for_prepare(database)
        self._ensure_account()

    def start(self, spec: dict[str, Any]) -> dict[str, Any]:
        handle = self._handle()
        managed = ManagedServer(**spec).model_copy(update={"port": handle.spec.port})
        timings = handle.start(managed)
        self._ensure_account()
        return {"timings": timings, "info": handle.info}

    def _ensure_account(self) -> None:
        """The benchmark account clients on other hosts log in with (root has no
        password and logs in only over the socket). A snapshot made by an earlier run
        has another password: set this run's (a TCP login that works needs nothing)."""
        handle = self._handle()
        assert self.account is not None
        user, password = self.account
        with contextlib.suppress(pymysql.err.OperationalError):
            pymysql.connect(
                host="127.0.0.1",
                port=handle.sandbox.port,
                user=user,
                password=password,
                connect_timeout=5,
            ).close()
            return
        with contextlib.closing(handle.connect()) as conn, conn.cursor() as cur:
            cur.execute("CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s", (user, password))
            cur.execute("ALTER USER %s@'%%' IDENTIFIED BY %s", (user, password))
            cur.execute("GRANT ALL PRIVILEGES ON *.* TO %s@'%%'", (user,))

    def system_apply(self, settings: dict[str, Any]) -> dict[str, Any]:
        """Set the cell's ``system`` settings here; the values read back."""
        return self._system().apply(SystemSettings(**settings))

    def _system(self) -> SystemState:
        if self.system is None:
            device = device_under(self._handle().sandbox.datadir)
            self.system = SystemState(device, memo=self._home() / SYSTEM_MEMO)
        return self.system

    def logs(self) -> dict[str, str]:
        """The server's logs (the end of each), for dbrig's run directory."""
        found = {}
        for name in LOG_FILES:
            path = self._home() / name
            if path.is_file():
                with open(path, "rb") as handle:
                    handle.seek(max(0, path.stat().st_size - LOG_LIMIT))
                    found[name] = handle.read().decode(errors="replace")
        return found

    def close(self, keep_data: bool) -> None:
        """Stop the server; without ``keep_data`` remove the datadir, snapshots and home."""
        self.stop_everything()
        if self.handle is not None:
            self.handle.close(keep_data)
            if not keep_data and self.home is not None:
                ownership.remove_owned(self.home)
                for parent in self._made[1:]:  # the folders open made, if nothing else is there
                    with contextlib.suppress(OSError):
                        parent.rmdir()
        self.done = True

    def stop_everything(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
            self.sampler = None
        self._drop_profile()
        if self.handle is not None:
            self.handle.sandbox.close()
        proc.stop_all()
        if self.system is not None:
            try:
                self.system.restore()
            except OSError as exc:  # the memo stays: the next agent of this folder tries
                log.error("putting back the system settings failed: %s", exc)

    # -- sampling -------------------------------------------------------------------------

    def sampling_start(
        self, interval: float, t0_in_s: float, warmup_s: float, devices: list[str] | None
    ) -> None:
        """Sample this host from now; the measured window starts ``t0_in_s`` from now."""
        folder = self._sampling_folder()
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        if not devices:
            device = probe.block_device_of(self._handle().sandbox.datadir)
            devices = [device] if device else None
        timing = SampleTiming(
            interval=interval,
            clock=time.monotonic,
            t0=time.monotonic() + t0_in_s,
            warmup_s=warmup_s,
        )
        self.sampler = HostSampler(folder, timing=timing, processes=self._roles, devices=devices)
        self.sampler.start()

    def _roles(self) -> dict[str, list[int]]:
        pid = self.handle.pid if self.handle else None
        return {"server": [pid]} if pid else {}

    def sampling_stop(self) -> dict[str, Any]:
        """The sampler's CSV files (name -> text) and its error, if it failed."""
        sampler, self.sampler = self.sampler, None
        if sampler is None:
            return {"files": {}, "error": None}
        sampler.stop()
        folder = self._sampling_folder()
        files = {p.name: p.read_text() for p in sorted(folder.glob("*.csv"))}
        shutil.rmtree(folder, ignore_errors=True)
        return {"files": files, "error": sampler.error}

    # -- the CPU profile ---------------------------------------------------------------------

    def profile_start(self, frequency: int, t0_in_s: float) -> None:
        """perf record of the server from the measured window's start, ``t0_in_s`` from
        now, until ``profile_stop`` (remote/profiling.py)."""
        self._drop_profile()  # a trial that ended without profile_stop (the agent was lost)
        self.profile = AgentProfile(
            self._home() / PROFILE_FOLDER,
            frequency,
            time.monotonic() + t0_in_s,
            lambda: self.handle.pid if self.handle else None,
        )
        self.profile.start()

    def profile_stop(self) -> dict[str, Any]:
        """The folded stacks, perf record's output and the trial's lines; perf's files go."""
        profile, self.profile = self.profile, None
        if profile is None:
            raise protocol.ProtocolError("profile_stop without profile_start")
        return profile.finish()

    def _drop_profile(self) -> None:
        profile, self.profile = self.profile, None
        if profile is not None:
            profile.discard()

    def _sampling_folder(self) -> Path:
        return self._home() / "sampling"

    def _handle(self) -> ManagedServerHandle:
        if self.handle is None:
            raise protocol.ProtocolError("the agent was not opened (the first request is open)")
        return self.handle

    def _home(self) -> Path:
        self._handle()
        assert self.home is not None
        return self.home


def _wait_for_old_server(pid_file: Path, name: str) -> None:
    """A server of an agent that was killed (SIGKILL leaves it no time to stop it) shuts
    down on its own (parent-death signal); its datadir must not be restored meanwhile."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + OLD_SERVER_WAIT_S
    while _is_server(pid):
        if time.monotonic() >= deadline:
            raise ServerError(
                f"server '{name}': the server a previous agent started (pid {pid}) "
                f"is still running after {OLD_SERVER_WAIT_S:.0f} s"
            )
        time.sleep(0.2)


def _is_server(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() in ("mariadbd", "mysqld")
    except OSError:
        return False


def _is_bug(exc: Exception) -> bool:
    return not isinstance(exc, DbrigError | OSError | pymysql.err.Error)


def _free_port_on(address: str) -> int:
    port = free_port()
    while not port_is_free(port, address):
        port = free_port()
    return port


def _stop_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def serve(requests: IO[bytes], responses: IO[bytes]) -> int:
    """Answer ``requests`` until they end or ``close``; the server is stopped either way."""
    agent = Agent()
    responses.write(protocol.encode_hello(dbrig.__version__, os.getpid(), socket.gethostname()))
    responses.flush()
    try:
        for line in requests:
            if not line.strip():
                continue
            responses.write(agent.handle_line(line))
            responses.flush()
            if agent.done:
                break
    finally:
        agent.stop_everything()
    return 0


def main() -> int:
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s agent %(levelname)s %(message)s"
    )
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _stop_on_signal)
    # The protocol keeps fd 1 to itself: whatever else prints goes to stderr.
    responses = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        return serve(sys.stdin.buffer, responses)
    except BrokenPipeError:
        return 1  # dbrig is gone: the server was stopped on the way out


if __name__ == "__main__":
    sys.exit(main())
