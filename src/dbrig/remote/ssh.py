"""Commands on another host, over the system ``ssh`` client and one connection per host.

The system client, so ``~/.ssh/config``, the agent, ProxyJump and known_hosts work as
for every other tool. One master connection per host (``ControlMaster``, its socket in a
short private folder) carries every command: a trial's commands cost no handshake.
``BatchMode=yes``: a password or passphrase prompt is an error, never a hang.

Remote processes never outlive the run. Every command runs under :data:`WRAPPER`, a
few lines of POSIX sh that start it in the background and watch their own stdin, a pipe
dbrig holds open: at EOF (dbrig stopped the local ``ssh``, the connection dropped, or
dbrig died and the kernel closed the pipe) the wrapper sends SIGTERM to its process
group, waits for the command and reports its CPU times when asked (a stopped
stress-ng's count), then SIGKILLs the group once the wrapper is gone (5 s at most). So
closing the local ``ssh``'s stdin stops the command cleanly (:func:`stop_wrapped`);
killing the local ``ssh`` stops it too, unreported. The exit code after such a stop is
the command's under dash (Debian's sh); under bash as sh it may be 143 (bash can reap
the command before the wrapper's wait returns), so nothing relies on it. The group is
the ssh session's: sshd makes each session its own, and the remote command line starts with
``exec`` so the wrapper is its leader. The wrapper signals the group numbered by its own
pid, so run anywhere it is not a group leader, it signals nothing (never its caller's).
``ssh -tt`` would give SIGHUP on hang-up too, but a terminal merges stderr into stdout
and turns ``\\n`` into ``\\r\\n`` in the tool's output; the wrapper leaves the output
as the tool wrote it.

A secret (a client's password file) travels on the same stdin, before the watch
begins: the wrapper makes a private folder (``umask 077``, ``mkdir`` fails if the name
exists), writes the file there from stdin, and removes the folder when it exits, on
every way out. The secret is never in a remote (or local) command line.

Local end: the master is a child registered in :mod:`dbrig.proc` (stopped on every way
out, parent-death signal on SIGKILL); :meth:`SshHost.close` says ``ssh -O exit`` and
removes the control folder; a folder whose dbrig died is removed by the next run.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shlex
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dbrig import ownership, proc
from dbrig.errors import DbrigError

log = logging.getLogger(__name__)

SSH = "ssh"
CONTROL_DIR_PREFIX = "dbrig-ssh-"
CONTROL_ROLE = "ssh-control"
CONNECT_TIMEOUT_S = 10
QUICK_TIMEOUT_S = 30.0
SSH_FAILED = 255  # ssh's own exit code: the connection failed, not the remote command
SECRET_FOLDER_TAKEN = 125  # the wrapper's: the secret's folder could not be made
STOP_GRACE_S = 5  # the wrapper's wait between SIGTERM and SIGKILL of its group
# Options dbrig sets itself: a scenario that changed them would break the connection's
# lifecycle (ControlPersist would outlive the run) or bring back password prompts.
RESERVED_OPTIONS = frozenset({"batchmode", "controlmaster", "controlpath", "controlpersist"})

TIMES_MARKER = "dbrig-client-times"  # then ``times``: the shell's and its children's CPU
_TIMES = re.compile(
    rf"^{TIMES_MARKER}\n\d+m[\d.]+s \d+m[\d.]+s\n(\d+)m([\d.]+)s (\d+)m([\d.]+)s\n?",
    re.MULTILINE,
)

# One line, so any login shell (csh too) passes it to sh unchanged.
WRAPPER = "; ".join(
    [
        'd=$1; f=$2; t=$3; s=; shift 3; trap "exit 143" TERM HUP INT',
        'if [ -n "$d" ]; then umask 077; mkdir "$d" || exit 125; trap "rm -rf \\"$d\\"" EXIT'
        '; IFS= read -r n || exit 125; dd of="$d/$f" bs=1 count="$n" 2>/dev/null || exit 125; fi',
        "exec 3<&0 </dev/null",
        'trap "s=1" TERM HUP INT; "$@" & c=$!',
        "{ trap '' TERM; while read -r _; do :; done <&3; kill -TERM -$$"
        f"; for i in {' '.join(map(str, range(STOP_GRACE_S)))}"
        "; do kill -0 $$ || break; sleep 1; done"
        '; [ -z "$d" ] || rm -rf "$d"; kill -KILL -$$; } >/dev/null 2>&1 & w=$!',
        'wait "$c"; r=$?; while [ -n "$s" ] && kill -0 "$c" 2>/dev/null; do wait "$c"; r=$?; done',
        '[ -n "$s" ] || kill -KILL "$w" 2>/dev/null',
        f'if [ -n "$t" ]; then echo {TIMES_MARKER} >&2; times >&2; fi; exit "$r"',
    ]
)


class SshError(DbrigError):
    """A host cannot be reached, refuses the key, or lacks what a run needs there."""


@dataclass(frozen=True)
class SshTarget:
    """One host of a scenario's ``hosts:`` block: how the ssh client reaches it."""

    name: str  # its key under hosts: (the destination itself for doctor --host user@host)
    destination: str  # [user@]host, or a Host alias of ~/.ssh/config
    port: int | None = None
    options: Mapping[str, str] = field(default_factory=dict)  # extra -o Key=Value

    @property
    def label(self) -> str:
        """``hosts.db1 (root@db1:2222)``: what an error line names."""
        where = self.destination + (f":{self.port}" if self.port else "")
        return where if self.name == self.destination else f"hosts.{self.name} ({where})"


@dataclass(frozen=True)
class RemoteSecret:
    """A file the remote command reads (a password file), written there through stdin."""

    folder: str  # made by the wrapper, 0700, removed when the command ends
    name: str
    text: str

    @property
    def path(self) -> str:
        return f"{self.folder}/{self.name}"


def new_secret(name: str, text: str) -> RemoteSecret:
    """A secret for a fresh, unguessable folder under the remote host's /tmp."""
    return RemoteSecret(f"/tmp/dbrig-secret-{secrets.token_hex(8)}", name, text)


def ssh_options(target: SshTarget, control_path: Path) -> list[str]:
    """The ssh options of every command to ``target``: BatchMode first (the first value
    given wins), the scenario's options next (they may set a shorter ConnectTimeout),
    dbrig's defaults last."""
    argv = ["-o", "BatchMode=yes", "-S", str(control_path)]
    if target.port is not None:
        argv += ["-p", str(target.port)]
    for key, value in target.options.items():
        argv += ["-o", f"{key}={value}"]
    argv += [
        "-o",
        f"ConnectTimeout={CONNECT_TIMEOUT_S}",
        "-o",
        "ServerAliveInterval=5",
        "-o",
        "ServerAliveCountMax=3",
        "-o",
        "LogLevel=ERROR",
    ]
    return argv


def resolved_hostname(target: SshTarget) -> str:
    """The host name ssh connects to for ``target`` (``ssh -G`` applies ~/.ssh/config:
    a Host alias gives its HostName); the destination's host part if ssh cannot say."""
    fallback = target.destination.rpartition("@")[2]
    argv = [SSH, "-G"]
    if target.port is not None:
        argv += ["-p", str(target.port)]
    for key, value in target.options.items():
        argv += ["-o", f"{key}={value}"]
    code, output = proc.capture([*argv, target.destination], timeout_s=QUICK_TIMEOUT_S)
    if code != 0:
        return fallback
    for line in output.splitlines():
        key, _, value = line.partition(" ")
        if key.lower() == "hostname" and value.strip():
            return value.strip()
    return fallback


def remote_command(argv: Sequence[str]) -> str:
    """One string the remote login shell splits back into ``argv`` exactly, and execs
    (the command takes the place of the shell: it leads the session's process group)."""
    return "exec " + shlex.join(str(a) for a in argv)


def wrapped(
    argv: Sequence[str], secret: RemoteSecret | None = None, *, report_times: bool = False
) -> list[str]:
    """``argv`` under the wrapper: stopped with its group when its stdin closes.

    ``report_times``: when it ends, the wrapper prints :data:`TIMES_MARKER` and its
    ``times`` on stderr (:func:`client_times` reads and removes them).
    """
    folder, name = (secret.folder, secret.name) if secret else ("", "")
    times = "times" if report_times else ""
    return ["sh", "-c", WRAPPER, "dbrig-wrap", folder, name, times, *map(str, argv)]


def client_times(output: str) -> tuple[str, float | None, float | None]:
    """The output without the wrapper's times lines, and the user and system CPU seconds
    of the command it ran (None when they are missing: the connection broke first)."""
    found = list(_TIMES.finditer(output))
    if not found:
        return output, None, None
    last = found[-1]
    user = int(last.group(1)) * 60 + float(last.group(2))
    system = int(last.group(3)) * 60 + float(last.group(4))
    return output[: last.start()] + output[last.end() :], user, system


def secret_preamble(secret: RemoteSecret | None) -> bytes:
    """What the wrapper reads from stdin before the watch: the length, then the bytes."""
    if secret is None:
        return b""
    data = secret.text.encode()
    return f"{len(data)}\n".encode() + data


def stop_wrapped(child: proc.Child, grace_s: float = STOP_GRACE_S + 10) -> proc.Finished:
    """Stop a command :meth:`SshHost.spawn` started so that it still reports: close its
    stdin (the wrapper stops the remote group, waits for the command, prints its times),
    wait for the local ``ssh`` to end, and stop it after ``grace_s`` (a silent link)."""
    proc.feed(child, b"", close=True)
    done = child.wait(grace_s)
    return done if done is not None else child.stop(grace_s=5)


def connection_error(text: str) -> str:
    """ssh's own complaint from its output, in one line (its last non-empty line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "ssh gave no reason"


class SshHost:
    """Commands on one remote host over one multiplexed connection.

    ``connect()`` opens (or reopens) the master connection; ``command_prefix()`` is the
    argv that runs one command string there; ``argv()``, ``run()`` and ``spawn()`` build
    on it; ``close()`` ends the connection and removes the control folder.
    :class:`LocalHost` answers the same calls for this machine.

    ``command_prefix() + [cmd]`` takes ONE command string, which the remote login shell
    splits: build it with :func:`remote_command` (``argv()`` does), never by joining.
    A command that reads its own stdin (a JSON-lines agent) cannot run under the wrapper,
    which owns stdin: use ``argv(..., wrap=False)`` and have it stop its own children
    when its stdin reaches EOF; it still dies with the connection (sshd closes its pipes).
    """

    def __init__(self, target: SshTarget) -> None:
        self.target = target
        self._folder: Path | None = None
        self._master: proc.Child | None = None

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def control_path(self) -> Path:
        if self._folder is None:
            tmp = _short_tmp()
            remove_orphaned_control_dirs(tmp)
            self._folder = Path(tempfile.mkdtemp(prefix=CONTROL_DIR_PREFIX, dir=tmp))
            ownership.mark_owned(self._folder, role=CONTROL_ROLE, owner_pid=os.getpid())
        return self._folder / "cm"

    def command_prefix(self) -> list[str]:
        """``ssh <options> <destination>``: append ONE command string (see :meth:`argv`)."""
        options = ssh_options(self.target, self.control_path)
        return [SSH, *options, "-o", "ControlMaster=no", self.target.destination]

    def argv(self, argv: Sequence[str], *, wrap: bool = True) -> list[str]:
        """The local argv that runs ``argv`` there (under the wrapper unless ``wrap=False``)."""
        remote = wrapped(argv) if wrap else list(map(str, argv))
        return [*self.command_prefix(), remote_command(remote)]

    # -- the connection ------------------------------------------------------------------

    def connect(self) -> None:
        """Open the master connection, or reopen it if it died; SshError says why not."""
        if self.is_connected():
            return
        self._stop_master()
        log_file = self.control_path.parent / "master.log"
        log_file.write_text("")
        argv = [SSH, *ssh_options(self.target, self.control_path), "-M", "-N"]
        argv += ["-o", "ControlPersist=no", "-o", "ExitOnForwardFailure=yes"]
        self._master = proc.spawn([*argv, self.target.destination], stderr=log_file)
        deadline = time.monotonic() + CONNECT_TIMEOUT_S + 5
        while time.monotonic() < deadline:
            if self._master.poll() is not None:
                break
            if self.control_path.exists() and self._answers():
                return
            time.sleep(0.05)
        self._stop_master()
        why = connection_error(log_file.read_text(errors="replace"))
        raise SshError(f"{self.target.label}: cannot connect: {why}")

    def _answers(self) -> bool:
        code, _ = proc.capture(self._control("check"), timeout_s=QUICK_TIMEOUT_S)
        return code == 0

    def _control(self, command: str, *extra: str) -> list[str]:
        options = ssh_options(self.target, self.control_path)
        return [SSH, *options, "-O", command, *extra, self.target.destination]

    def is_connected(self) -> bool:
        """The master connection is up and answers."""
        return self._master is not None and self._master.poll() is None and self._answers()

    def lost_cause(self) -> str | None:
        """Why the master connection is gone: ssh's last word in its log, else how its
        process ended (None when there was no connection to lose)."""
        if self._master is None or self._folder is None:
            return None
        log_file = self.control_path.parent / "master.log"
        words = log_file.read_text(errors="replace").strip() if log_file.exists() else ""
        if words:
            return connection_error(words)
        done = self._master.poll()
        if done is None:
            return None
        signum = done.killed_by_signal
        how = f"killed by signal {signum}" if signum else done.exit_text
        return f"its master connection ended ({how})"

    def check_reachable(self) -> None:
        """Connected and a command runs there; SshError naming the host otherwise."""
        self.connect()
        code, output = self.run(["true"], wrap=False)
        if code != 0:
            raise SshError(f"{self.target.label}: cannot run a command: {connection_error(output)}")

    def close(self) -> None:
        """``ssh -O exit``, stop the master, remove the control folder (every way out)."""
        if self._master is not None and self._master.poll() is None:
            proc.capture(self._control("exit"), timeout_s=QUICK_TIMEOUT_S)
        self._stop_master()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def _stop_master(self) -> None:
        if self._master is not None:
            self._master.stop(grace_s=5)
            self._master = None
        if self._folder is not None:
            self.control_path.unlink(missing_ok=True)

    # -- commands ------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout_s: float = QUICK_TIMEOUT_S,
        wrap: bool = True,
    ) -> tuple[int, str]:
        """Run ``argv`` there to completion: (exit code, stdout+stderr). 255: ssh failed."""
        local = self.argv(argv, wrap=wrap)
        # The wrapper stops its command at stdin's EOF: hold stdin open until it is done.
        return proc.capture(local, timeout_s=timeout_s, input=input or b"", hold_stdin=wrap)

    def spawn(
        self,
        argv: Sequence[str],
        *,
        stdout: Path | None = None,
        merge_stderr: bool = True,
        secret: RemoteSecret | None = None,
        report_times: bool = False,
        ssh_log: Path | None = None,
    ) -> proc.Child:
        """Start ``argv`` there under the wrapper; stopping the returned (local) child, or
        losing the connection, stops the remote process group. ``secret`` is written to
        its 0600 file before ``argv`` starts (``secret.path`` goes in ``argv``).
        ``ssh_log``: the file ssh writes its own messages to (``-E``), apart from the
        command's output (a lost connection's cause)."""
        remote = wrapped(argv, secret, report_times=report_times)
        prefix = self.command_prefix()
        if ssh_log is not None:
            prefix[1:1] = ["-E", str(ssh_log)]
        local = [*prefix, remote_command(remote)]
        child = proc.spawn(local, stdout=stdout, merge_stderr=merge_stderr, stdin_pipe=True)
        proc.feed(child, secret_preamble(secret))
        return child

    def which(self, names: Sequence[str]) -> str | None:
        """The path of the first of ``names`` on the remote PATH (or /usr/sbin), or None."""
        script = (
            'PATH="$PATH:/usr/sbin:/usr/local/sbin"'
            '; for n; do command -v "$n" && exit 0; done; exit 1'
        )
        code, output = self.run(["sh", "-c", script, "which", *names], wrap=False)
        if code == SSH_FAILED:
            raise SshError(f"{self.target.label}: lost the connection: {connection_error(output)}")
        found = output.strip().splitlines()
        return found[-1].strip() if code == 0 and found else None

    def cpu_count(self) -> int | None:
        code, output = self.run(["getconf", "_NPROCESSORS_ONLN"], wrap=False)
        text = output.strip()
        return int(text) if code == 0 and text.isdigit() else None

    def forward_to_local(self, port: int) -> int:
        """A port on the remote host's 127.0.0.1 that reaches ``127.0.0.1:port`` here,
        through the connection (``ssh -O forward -R 0:...``); removed with the connection."""
        code, output = proc.capture(
            self._control("forward", "-R", f"0:127.0.0.1:{port}"), timeout_s=QUICK_TIMEOUT_S
        )
        match = re.search(r"^(\d+)\s*$", output, re.MULTILINE)
        if code != 0 or match is None:
            raise SshError(
                f"{self.target.label}: cannot forward a port back to 127.0.0.1:{port}: "
                f"{connection_error(output)}"
            )
        return int(match.group(1))

    def cancel_forward(self, remote_port: int, port: int) -> None:
        proc.capture(
            self._control("cancel", "-R", f"{remote_port}:127.0.0.1:{port}"),
            timeout_s=QUICK_TIMEOUT_S,
        )


class LocalHost:
    """:class:`SshHost`'s calls for this machine: no connection, no wrapper (proc.py
    already runs every child in its own group and stops it on every way out)."""

    name = "local"

    def command_prefix(self) -> list[str]:
        return []

    def argv(self, argv: Sequence[str], *, wrap: bool = True) -> list[str]:
        return [str(a) for a in argv]

    def connect(self) -> None:
        pass

    def check_reachable(self) -> None:
        pass

    def is_connected(self) -> bool:
        return True

    def close(self) -> None:
        pass

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout_s: float = QUICK_TIMEOUT_S,
        wrap: bool = True,
    ) -> tuple[int, str]:
        return proc.capture(self.argv(argv), timeout_s=timeout_s, input=input)

    def spawn(
        self, argv: Sequence[str], *, stdout: Path | None = None, merge_stderr: bool = True
    ) -> proc.Child:
        return proc.spawn(self.argv(argv), stdout=stdout, merge_stderr=merge_stderr)


def _short_tmp() -> Path:
    """$TMPDIR, or /tmp when it is long: ssh binds the control socket (and a temporary
    name 17 bytes longer) under the 107-byte limit of unix socket paths."""
    tmp = tempfile.gettempdir()
    return Path(tmp if len(tmp) < 40 else "/tmp")


def remove_orphaned_control_dirs(tmp: Path) -> list[Path]:
    """Remove control folders under ``tmp`` whose dbrig died (SIGKILL gives it no chance)."""
    removed = []
    for folder in tmp.glob(f"{CONTROL_DIR_PREFIX}*"):
        mark = ownership.marker(folder)
        owner = mark.get("owner_pid")
        if mark.get("role") != CONTROL_ROLE or not isinstance(owner, int) or proc.alive(owner):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        log.info("removed %s, left by dbrig pid %d", folder, owner)
        removed.append(folder)
    return removed
