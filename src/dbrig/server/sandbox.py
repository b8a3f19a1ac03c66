"""A managed server: a private mariadbd/mysqld that dbrig initialises, starts and stops.

Everything lives under one directory that dbrig creates and marks
(``<run>/servers/<name>/``): the datadir, snapshots, ``my.cnf`` and the error
log, which survives every restart so a failed cell can be explained. Only the
unix socket lives elsewhere, in a short temporary directory, because socket
paths are limited to 107 bytes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil
import pymysql

from dbrig import ownership, proc
from dbrig.endpoint import Endpoint
from dbrig.errors import ConfigError, ServerError, ServerInitError
from dbrig.server.binary import ServerBinary
from dbrig.server.datadir import incomplete_marker

log = logging.getLogger(__name__)

MAX_SOCKET_PATH = 107
_ERROR_LOG_TAIL = 12
PORT_ATTEMPTS = 3  # starts on a chosen port that another process took first
_INIT_TIMEOUT_S = 300


def my_cnf_lines(settings: Mapping[str, Any]) -> list[str]:
    """Option lines as my.cnf holds them: ``None`` is a bare option, booleans ON/OFF."""
    lines = []
    for key, value in settings.items():
        if value is None:
            lines.append(str(key))
        elif isinstance(value, bool):
            lines.append(f"{key}={'ON' if value else 'OFF'}")
        else:
            lines.append(f"{key}={value}")
    return lines


def render_my_cnf(settings: Mapping[str, Any]) -> str:
    """A ``[mysqld]`` section of :func:`my_cnf_lines`."""
    header = ["# written by dbrig: do not edit, it is rewritten before every start", "[mysqld]"]
    return "\n".join([*header, *my_cnf_lines(settings)]) + "\n"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_was_taken(log_text: str) -> bool:
    """The server's error log says it could not bind its TCP port: another process has it
    (MariaDB: ``Bind on TCP/IP port. Got error: 98: Address already in use``)."""
    return any(
        "[ERROR]" in line and "TCP/IP port" in line and "Address already in use" in line
        for line in log_text.splitlines()
    )


def port_is_free(port: int, address: str = "127.0.0.1") -> bool:
    """Nothing listens on ``port``. Connections of a stopped server in TIME_WAIT do not
    count: the server binds with SO_REUSEADDR too, so they do not stop it from starting."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


# Lines of an error log that say why a server died; [Note] lines ("ready for connections")
# never do, and [Warning] lines of clients ("Aborted connection") rarely.
_DEATH_MARKERS = ("[ERROR]", "got signal", "Aborting", "Fatal", "fatal", "Assertion", "assertion")


def death_excerpt(log_text: str) -> list[str]:
    """The error log lines that explain a server's death (none for a plain kill -9)."""
    lines = [ln.strip() for ln in log_text.splitlines()]
    return [ln for ln in lines if "[Note]" not in ln and any(m in ln for m in _DEATH_MARKERS)]


def _exit_words(done: proc.Finished) -> str:
    sig = done.killed_by_signal
    if sig is None:
        return done.exit_text
    with contextlib.suppress(ValueError):
        return f"killed by {signal.Signals(sig).name}"
    return f"killed by signal {sig}"


SOCKET_DIR_PREFIX = "dbrig-"


SERVER_NAMES = ("mariadbd", "mysqld")
_ORPHAN_EXIT_WAIT_S = 30


def remove_orphaned_socket_dirs(tmp: Path | None = None) -> list[Path]:
    """Remove the socket folders under ``tmp`` (default: where sockets go) that a dbrig
    now dead left behind (SIGKILL gives it no chance to): only folders marked as dbrig's
    socket folder, whose owner pid is gone. A server still running on such a folder
    (the parent-death signal missed it: no setpriv) is killed first, saying so. Returns
    the folders removed."""
    orphaned = {}
    for folder in (tmp or Path(_short_tmp())).glob(f"{SOCKET_DIR_PREFIX}*"):
        mark = ownership.marker(folder)
        owner = mark.get("owner_pid")
        if mark.get("role") == "socket" and isinstance(owner, int) and not proc.alive(owner):
            orphaned[folder.resolve()] = owner
    if orphaned:
        kill_orphaned_servers(orphaned)
    for folder, owner in orphaned.items():
        shutil.rmtree(folder, ignore_errors=True)
        log.info("removed %s, left by dbrig pid %d", folder, owner)
    return list(orphaned)


def kill_orphaned_servers(orphaned: Mapping[Path, int]) -> list[int]:
    """SIGKILL every server whose socket is in one of the ``orphaned`` socket folders (to
    the dead dbrig that made each): one a dbrig started and can no longer stop. Not
    SIGTERM: one killed early in its start-up ignores it. Returns the pids killed."""
    killed = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        folder = socket_folder_of(process.info["cmdline"] or [])
        if folder is None or folder.resolve() not in orphaned:
            continue
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue
        except psutil.AccessDenied:
            log.warning("cannot kill server pid %d (left by a killed dbrig)", process.pid)
            continue
        log.warning(
            "killed %s pid %d: left running by dbrig pid %d, which was killed",
            Path(process.info["cmdline"][0]).name,
            process.pid,
            orphaned[folder.resolve()],
        )
        killed.append(process)
    _wait_gone(killed, _ORPHAN_EXIT_WAIT_S)  # it may hold files of a workspace to unmount
    return [p.pid for p in killed]


def _wait_gone(processes: list[psutil.Process], timeout_s: float) -> None:
    """Until each process is gone or a zombie (reaped by whoever adopted it, not us)."""
    deadline = time.monotonic() + timeout_s
    for process in processes:
        with contextlib.suppress(psutil.Error):
            while process.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
                time.sleep(0.05)


def socket_folder_of(cmdline: Sequence[str]) -> Path | None:
    """The folder of a server's ``--socket=`` on its command line (None: not a server)."""
    if not cmdline or Path(cmdline[0]).name not in SERVER_NAMES:
        return None
    sockets = [a.removeprefix("--socket=") for a in cmdline[1:] if a.startswith("--socket=")]
    return Path(sockets[-1]).parent if sockets else None


def tail(path: Path, lines: int, start_offset: int = 0) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(start_offset)
            text = handle.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


class Sandbox:
    """One managed server instance."""

    def __init__(
        self,
        name: str,
        binary: ServerBinary,
        home: Path,
        *,
        cpus: list[int] | None = None,
        port: int | None = None,
        startup_timeout_s: float = 120.0,
        datadir: Path | None = None,
        bind_address: str = "127.0.0.1",
    ) -> None:
        """``bind_address`` is where the server listens for TCP clients: 127.0.0.1, or
        0.0.0.0 when the clients run on another host (a server driven by the agent)."""
        self.name = name
        self.bind_address = bind_address
        self.binary = binary
        self.home = home
        self.datadir = datadir or home / "datadir"
        self.error_log = home / "mysqld.err"
        self.my_cnf = home / "my.cnf"
        self.cpus = cpus
        self.fixed_port = port
        self.port: int | None = None
        self.startup_timeout_s = startup_timeout_s
        self._socket_dir: Path | None = None
        self._child: proc.Child | None = None
        self._answered = False  # the running server has answered a connection
        self._log_offset = 0  # where the running server's part of the error log starts

    # -- paths -------------------------------------------------------------------

    @property
    def socket_path(self) -> Path:
        if self._socket_dir is None:
            remove_orphaned_socket_dirs(Path(_short_tmp()))
            self._socket_dir = Path(tempfile.mkdtemp(prefix=SOCKET_DIR_PREFIX, dir=_short_tmp()))
            ownership.mark_owned(self._socket_dir, role="socket", owner_pid=os.getpid())
        path = self._socket_dir / "mysqld.sock"
        if len(str(path)) > MAX_SOCKET_PATH:
            raise ConfigError(
                f"unix socket path {path} is {len(str(path))} bytes; "
                f"the limit is {MAX_SOCKET_PATH}",
                hint="set TMPDIR to a short directory such as /tmp",
            )
        return path

    def endpoint(self, database: str) -> Endpoint:
        return Endpoint(user="root", database=database, socket=str(self.socket_path))

    # -- lifecycle ---------------------------------------------------------------

    def initialize(self) -> float:
        """Create and initialise an empty datadir; returns the seconds it took."""
        if not os.access(self.home.parent, os.W_OK) and self.home.parent.exists():
            raise ConfigError(f"{self.home.parent} is not writable")
        self.home.mkdir(parents=True, exist_ok=True)
        ownership.mark_owned(self.datadir, role="datadir")
        started = time.monotonic()
        out = self.home / "initialize.log"
        argv = self._initialize_argv()
        done = proc.run(argv, timeout_s=_INIT_TIMEOUT_S, stdout=out, merge_stderr=True)
        if done.returncode != 0 or done.timed_out:
            raise ServerInitError(
                f"server '{self.name}': initialising the datadir failed ({done.exit_text}): "
                + _first_errors(out)
            )
        return time.monotonic() - started

    def _initialize_argv(self) -> list[str]:
        b = self.binary
        if b.flavor == "mariadb":
            assert b.install_db is not None
            argv = [
                str(b.install_db),
                "--no-defaults",
                f"--datadir={self.datadir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ]
        else:
            argv = [str(b.mysqld), "--no-defaults", "--initialize-insecure"]
            argv.append(f"--datadir={self.datadir}")
        if b.basedir:
            argv.append(f"--basedir={b.basedir}")
        if _is_root():
            argv.append("--user=root")
        return argv

    def start(self, config: Mapping[str, Any]) -> float:
        """Write my.cnf from ``config`` and start; returns seconds until the server answered.

        A port dbrig chose can be taken by another process (another dbrig's server)
        between the choice and mariadbd's bind, which comes after its InnoDB start-up:
        such a start is tried again on another port, up to :data:`PORT_ATTEMPTS` times.
        """
        if self.is_running:
            raise ServerError(f"server '{self.name}' is already running")
        if incomplete_marker(self.datadir).exists():
            raise ServerError(
                f"server '{self.name}': {self.datadir} was left half-restored; "
                "restoring it again copies the whole snapshot"
            )
        chosen_here = self.fixed_port is None and "port" not in config
        attempts = PORT_ATTEMPTS if chosen_here else 1
        for attempt in range(1, attempts + 1):
            try:
                return self._start_once(config)
            except ServerError:
                taken = port_was_taken(tail(self.error_log, _ERROR_LOG_TAIL, self._log_offset))
                if attempt == attempts or not taken:
                    raise
                log.warning(
                    "server '%s': port %s was taken before it could bind it; another port",
                    self.name,
                    self.port,
                )
        raise AssertionError("unreachable")

    def _start_once(self, config: Mapping[str, Any]) -> float:
        self.port = self._choose_port()
        self.my_cnf.write_text(render_my_cnf({**self._base_settings(), **config}))
        log_offset = self.error_log.stat().st_size if self.error_log.exists() else 0
        self._log_offset = log_offset
        # The socket on the command line too: how a later dbrig finds this server if this
        # one is killed (see remove_orphaned_socket_dirs).
        argv = [
            str(self.binary.mysqld),
            f"--defaults-file={self.my_cnf}",
            f"--socket={self.socket_path}",
        ]
        if self.cpus:
            argv = ["taskset", "-c", ",".join(map(str, self.cpus)), *argv]
        started = time.monotonic()
        self._answered = False
        # Killed, not sent SIGTERM, if dbrig dies: SIGTERM early in its start-up leaves
        # MariaDB hung for good (see stop()), and the datadir of a trial cut short is
        # restored before it is used again, so a clean shutdown would keep nothing.
        self._child = proc.spawn(
            argv,
            stdout=self.home / "mysqld.stdout",
            merge_stderr=True,
            parent_death_signal="KILL",
        )
        self._wait_ready(log_offset)
        return time.monotonic() - started

    def _choose_port(self) -> int:
        if self.fixed_port is None:
            return free_port()
        if not port_is_free(self.fixed_port, self.bind_address):
            raise ConfigError(
                f"server '{self.name}': port {self.fixed_port} on {self.bind_address} is taken"
            )
        return self.fixed_port

    def _base_settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "datadir": str(self.datadir),
            "socket": str(self.socket_path),
            "port": self.port,
            "bind-address": self.bind_address,
            "pid-file": str(self.home / "mysqld.pid"),
            "log-error": str(self.error_log),
        }
        if self.binary.basedir:
            settings["basedir"] = str(self.binary.basedir)
        if _is_root():
            settings["user"] = "root"
        return settings

    def _wait_ready(self, log_offset: int) -> None:
        assert self._child is not None
        deadline = time.monotonic() + self.startup_timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            done = self._child.poll()
            if done is not None:
                self._child = None
                raise ServerError(
                    f"server '{self.name}' exited during start-up ({done.exit_text}): "
                    + self._log_excerpt(log_offset)
                )
            try:
                self.connect().close()
                self._answered = True
                return
            except pymysql.err.OperationalError as exc:
                last_error = exc
                time.sleep(0.1)
        self.stop()
        raise ServerError(
            f"server '{self.name}' did not answer within {self.startup_timeout_s:.0f} s "
            f"({last_error}): " + self._log_excerpt(log_offset)
        )

    def _log_excerpt(self, offset: int) -> str:
        text = tail(self.error_log, _ERROR_LOG_TAIL, offset)
        important = [ln for ln in text.splitlines() if "[ERROR]" in ln or "Aborting" in ln]
        return " | ".join(important or text.splitlines()[-3:]) or f"see {self.error_log}"

    @property
    def is_running(self) -> bool:
        return self._child is not None and self._child.poll() is None

    def died(self) -> str | None:
        """A reason if the server was started and has since exited on its own."""
        if self._child is None:
            return None
        done = self._child.poll()
        if done is None:
            return None
        explained = death_excerpt(tail(self.error_log, 200, self._log_offset))[-3:]
        why = " | ".join(explained) or f"nothing in {self.error_log} explains it"
        return f"server '{self.name}' died ({_exit_words(done)}): {why}"

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the running server (a fault: KILL, TERM, STOP, CONT)."""
        if self._child is None:
            raise ServerError(f"server '{self.name}' is not running")
        self._child.signal_group(sig)

    def wait_exit(self, timeout_s: float) -> bool:
        """Wait for the server to exit after a signal; False if it still runs."""
        return self._child is None or self._child.wait(timeout_s) is not None

    @property
    def log_size(self) -> int:
        """Where the error log ends now: what a restart writes comes after it."""
        return self.error_log.stat().st_size if self.error_log.exists() else 0

    def stop(self, timeout_s: float = 120.0) -> float:
        """SIGTERM and wait (a clean InnoDB shutdown), SIGKILL after ``timeout_s``.

        A server that has not answered yet is killed at once: MariaDB 10.11 given SIGTERM
        early in its start-up hangs for good (in init_slave(), deaf to more SIGTERMs), so a
        Ctrl-C during a start waited the whole ``timeout_s``. A clean shutdown would keep
        nothing: every trial restores the datadir, and a snapshot is taken only of a server
        that answered and stopped.
        """
        if self._child is None:
            return 0.0
        started = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            self._child.signal_group(signal.SIGCONT)  # a frozen server cannot shut down
        sig = signal.SIGTERM if self._answered else signal.SIGKILL
        self._child.stop(grace_s=timeout_s, sig=sig)
        self._child = None
        return time.monotonic() - started

    def close(self) -> None:
        """Stop the server and remove the socket directory."""
        self.stop()
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child else None

    # -- SQL ------------------------------------------------------------------------

    def connect(self, database: str | None = None) -> pymysql.Connection:
        return pymysql.connect(
            unix_socket=str(self.socket_path),
            user="root",
            password="",
            database=database,
            connect_timeout=5,
            autocommit=True,
        )

    def execute(self, *statements: str) -> None:
        with contextlib.closing(self.connect()) as conn, conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)

    def prepare_accounts(self, database: str) -> None:
        """No anonymous accounts (they shadow password logins), and the workload's database."""
        with contextlib.closing(self.connect()) as conn, conn.cursor() as cur:
            cur.execute("SELECT user, host FROM mysql.user WHERE user = ''")
            for _, host in cur.fetchall():
                cur.execute("DROP USER ''@%s", (host,))
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")


def _first_errors(log_file: Path) -> str:
    """The lines that say what went wrong (mariadb-install-db buries them in advice)."""
    text = tail(log_file, 200)
    wanted = ("[ERROR]", "Can't", "ERROR", "error:", "Errcode")
    found = [ln.strip() for ln in text.splitlines() if any(w in ln for w in wanted)]
    return " | ".join(dict.fromkeys(found[:3])) or tail(log_file, 3).replace("\n", " | ")


def _is_root() -> bool:
    return os.geteuid() == 0


def _short_tmp() -> str:
    tmp = tempfile.gettempdir()
    return tmp if len(tmp) < 40 else "/tmp"
