"""The only place that starts processes.

Every child gets an argument list (never a shell string), its own session and
so its own process group, output redirected to files (so a long run cannot
fill a pipe), and a place in a registry of live children. ``stop_all()`` ends
every registered group: the CLI calls it on success, failure, Ctrl-C and
SIGTERM, so nothing dbrig started outlives it.

``run()`` waits with ``os.wait4`` so the child's own user and system CPU time
come back with its exit code (seed 003 used ``time`` for this). ``capture()``,
for quick probes, takes the same path with temporary files for the output.

Importing this module starts nothing: whether ``setpriv`` can set a parent-death
signal is probed on the first spawn.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbrig.errors import ToolMissing
from dbrig.util.signals import HeldSignals, interrupts_held

log = logging.getLogger(__name__)

_SECRET_ARG = re.compile(r"^(--?[\w-]*password[\w-]*=).*$", re.IGNORECASE)
_POLL_S = 0.02
_CAPTURE_KILL_WAIT_S = 2.0

# The returncode of a child whose exit status was lost because something else reaped it.
# Not -1, which is "killed by SIGHUP": no real exit code or signal number is this value.
LOST_RETURNCODE = -1000
LOST_REASON = "exit status lost: the process was reaped elsewhere"


def _setpriv_with_pdeathsig() -> str | None:
    """setpriv, if it can set a parent-death signal (``--pdeathsig``).

    Ctrl-C and SIGTERM are handled by stop_all(), but SIGKILL (or the OOM killer)
    gives dbrig no chance to clean up; the kernel's parent-death signal still
    stops mariadbd, sysbench and stress-ng. setpriv is in util-linux, which
    every Debian has; without it (or without --pdeathsig) children start plainly.
    """
    setpriv = shutil.which("setpriv")
    if not setpriv:
        return None
    try:
        helped = subprocess.run(
            [setpriv, "--help"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return setpriv if "--pdeathsig" in helped.stdout else None


# Environment variables that hold secrets (the one a password_env names): no child sees them.
_scrubbed: set[str] = set()


def scrub_from_children(name: str) -> None:
    """Keep the environment variable ``name`` out of every child started from now on."""
    _scrubbed.add(name)


def child_environment(env: Mapping[str, str] | None) -> dict[str, str] | None:
    """dbrig's environment plus ``env``, without the scrubbed names (None: inherit as is)."""
    if env is None and not _scrubbed:
        return None
    merged = {**os.environ, **(env or {})}
    return {k: v for k, v in merged.items() if k not in _scrubbed}


_setpriv: str | None = None
_probed = False
_probe_lock = threading.Lock()
_live: dict[int, subprocess.Popen] = {}
_live_lock = threading.Lock()
_reap_lock = threading.RLock()  # a reap and the recording of its status, as one step


def _die_with_parent_argv(sig: str = "TERM") -> tuple[str, ...]:
    """``setpriv --pdeathsig SIG --``: the child gets ``sig`` if dbrig itself is killed
    (nothing without setpriv). Probed once, on first use (not at import: that starts a
    process)."""
    global _setpriv, _probed
    with _probe_lock:
        if not _probed:
            _setpriv, _probed = _setpriv_with_pdeathsig(), True
    return (_setpriv, "--pdeathsig", sig, "--") if _setpriv else ()


def redact(argv: Sequence[str]) -> list[str]:
    """The argv as it may be logged or saved: any ``--...password...=`` value masked."""
    return [_SECRET_ARG.sub(r"\1***", str(a)) for a in argv]


def which(names: Sequence[str], *, package: str, extra_dirs: Sequence[Path] = ()) -> Path:
    """The first of ``names`` found in ``extra_dirs``, PATH, /usr/sbin or /usr/local/sbin."""
    search = [*map(str, extra_dirs), os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"]
    path = os.pathsep.join(p for p in search if p)
    for name in names:
        found = shutil.which(name, path=path)
        if found:
            return Path(found)
    raise ToolMissing(
        f"{' or '.join(names)} not found",
        hint=f"install the Debian package '{package}': apt-get install {package}",
    )


@dataclass(frozen=True)
class Finished:
    """A child that has exited."""

    argv: tuple[str, ...]
    returncode: int
    wall_s: float
    user_cpu_s: float
    sys_cpu_s: float
    timed_out: bool = False
    # Something else reaped the child: returncode is LOST_RETURNCODE, never a success.
    reaped_elsewhere: bool = False

    @property
    def killed_by_signal(self) -> int | None:
        if self.reaped_elsewhere:
            return None
        return -self.returncode if self.returncode < 0 else None

    @property
    def exit_text(self) -> str:
        """``exit N`` for messages, or why there is no N."""
        return LOST_REASON if self.reaped_elsewhere else f"exit {self.returncode}"


class Child:
    """A running child in its own process group, writing to files."""

    def __init__(self, popen: subprocess.Popen, argv: Sequence[str], started: float) -> None:
        self.popen = popen
        self.argv = tuple(argv)
        self.started = started
        self._finished: Finished | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> Finished | None:
        """The result if the child has exited (reaping it), else None."""
        if self._finished is None:
            self._reap(os.WNOHANG)
        return self._finished

    def wait(self, timeout: float | None = None) -> Finished | None:
        """Wait up to ``timeout`` seconds (forever when None); None if still running."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return None
            _until_exit(self.pid, _POLL_S if deadline is None else min(_POLL_S, deadline - now))
        return self._finished

    def signal_group(self, sig: int) -> None:
        if self.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)

    def stop(self, grace_s: float = 10.0, sig: int = signal.SIGTERM) -> Finished:
        """Send ``sig`` to the whole group, wait ``grace_s``, then SIGKILL the group."""
        self.signal_group(sig)
        done = self.wait(grace_s)
        if done is None:
            log.warning("%s did not stop in %.0f s: killing its group", self.argv[0], grace_s)
            self.signal_group(signal.SIGKILL)
            done = self.wait()
        # Grandchildren that ignored the signal (stress-ng workers) share the group.
        _kill_group_leftovers(self.pid)
        assert done is not None
        return done

    def _reap(self, flags: int) -> None:
        # Under _reap_lock, reaping and recording the status are one step: a thread waiting
        # on this child beside stop_all (or another waiter) finds the status recorded,
        # never a child gone with no status.
        with _reap_lock:
            if self._finished is not None:
                return
            try:
                pid, status, usage = os.wait4(self.pid, flags)
            except ChildProcessError:
                self._reaped_elsewhere()
                return
            if pid == 0:
                return
            self._finish(
                os.waitstatus_to_exitcode(status),
                user_cpu_s=usage.ru_utime,
                sys_cpu_s=usage.ru_stime,
            )

    def _reaped_elsewhere(self) -> None:
        """The child is gone but not reaped here: its status is known only if the reaper
        recorded it on the Popen (stop_all and Popen.wait do)."""
        known = self.popen.returncode
        if known is not None:
            self._finish(known)
            return
        log.warning("%s (pid %d): %s", self.argv[0], self.pid, LOST_REASON)
        self._finish(LOST_RETURNCODE, reaped_elsewhere=True)

    def _finish(
        self,
        returncode: int,
        *,
        user_cpu_s: float = 0.0,
        sys_cpu_s: float = 0.0,
        reaped_elsewhere: bool = False,
    ) -> None:
        self.popen.returncode = returncode
        if self.popen.stdin is not None:
            with contextlib.suppress(OSError):
                self.popen.stdin.close()
        self._finished = Finished(
            argv=self.argv,
            returncode=returncode,
            wall_s=time.monotonic() - self.started,
            user_cpu_s=user_cpu_s,
            sys_cpu_s=sys_cpu_s,
            reaped_elsewhere=reaped_elsewhere,
        )
        with _live_lock:
            _live.pop(self.pid, None)


def _until_exit(pid: int, seconds: float) -> None:
    """Sleep up to ``seconds``, waking when ``pid`` exits (a pidfd, where Linux has one).

    A plain sleep noticed an exit 10 ms late on average: 10 to 20 ms on every short
    command, and on every ``cp`` of a restore (one per directory).
    """
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        time.sleep(seconds)
        return
    try:
        select.select([pidfd], [], [], seconds)
    finally:
        os.close(pidfd)


def spawn(
    argv: Sequence[str],
    *,
    stdout: Path | None = None,
    stderr: Path | None = None,
    merge_stderr: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin_pipe: bool = False,
    parent_death_signal: str = "TERM",
) -> Child:
    """Start ``argv`` in its own process group; output goes to the given files (else /dev/null).

    With ``merge_stderr`` stderr goes to the stdout file, in the order it was printed.
    With ``stdin_pipe`` its stdin is a pipe held open by ``child.popen.stdin`` (else
    /dev/null): an ssh command's remote side watches it to know dbrig is still there.
    ``parent_death_signal`` (a name setpriv knows: TERM, KILL) is what the child gets
    from the kernel if dbrig dies without stopping it (SIGKILL).
    """
    argv = [str(a) for a in argv]
    _require_found(argv[0])  # before the output files are created
    with contextlib.ExitStack() as files:
        out = files.enter_context(open(stdout, "ab")) if stdout else subprocess.DEVNULL
        if merge_stderr:
            err: Any = subprocess.STDOUT
        else:
            err = files.enter_context(open(stderr, "ab")) if stderr else subprocess.DEVNULL
        return _spawn_into(
            argv,
            out,
            err,
            env=env,
            cwd=cwd,
            stdin_pipe=stdin_pipe,
            parent_death_signal=parent_death_signal,
        )


def spawn_piped(
    argv: Sequence[str], *, stderr: Path, env: Mapping[str, str] | None = None
) -> Child:
    """Start ``argv`` like :func:`spawn`, but with pipes to its stdin and stdout
    (``child.popen.stdin``, ``child.popen.stdout``, binary): a process dbrig talks to
    line by line, such as the remote agent. Its stderr goes to the file ``stderr``."""
    argv = [str(a) for a in argv]
    _require_found(argv[0])
    with open(stderr, "ab") as err:
        prefix = _die_with_parent_argv()
        log.info("start: %s", " ".join(redact(argv)))
        held = HeldSignals()
        child: Child | None = None
        try:
            child = _start_held(
                prefix,
                argv,
                subprocess.PIPE,
                err,
                child_environment(env),
                None,
                held,
                stdin=subprocess.PIPE,
            )
        finally:
            held.deliver()
    return child


def _require_found(name: str) -> None:
    if shutil.which(name) is None:
        raise ToolMissing(f"{name} not found")


def _spawn_into(
    argv: list[str],
    out: Any,
    err: Any,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin_pipe: bool = False,
    parent_death_signal: str = "TERM",
) -> Child:
    """Log, start and register ``argv`` writing to open handles (the caller closes them).

    The caller has checked that ``argv[0]`` exists (:func:`_require_found`).
    """
    prefix = _die_with_parent_argv(parent_death_signal)
    log.info("start: %s", " ".join(redact(argv)))
    full_env = child_environment(env)
    child: Child | None = None
    held = HeldSignals()
    try:
        stdin = subprocess.PIPE if stdin_pipe else subprocess.DEVNULL
        child = _start_held(prefix, argv, out, err, full_env, cwd, held, stdin=stdin)
    finally:
        if child is None:
            held.deliver()  # the start failed: a Ctrl-C that arrived meanwhile still counts
    try:
        held.deliver()
    except BaseException:
        child.stop()  # the caller never sees this child, so it cannot stop it
        raise
    return child


def _start_held(
    prefix: tuple[str, ...],
    argv: list[str],
    out: Any,
    err: Any,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    held: HeldSignals,
    stdin: Any = subprocess.DEVNULL,
) -> Child:
    """Popen and register the child with Ctrl-C and SIGTERM held (see interrupts_held)."""
    with interrupts_held(held):
        try:
            popen = subprocess.Popen(
                [*prefix, *argv],
                stdin=stdin,
                stdout=out,
                stderr=err,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise ToolMissing(f"{argv[0]} not found") from exc
        except PermissionError as exc:
            raise ToolMissing(f"{argv[0]} is not executable: {exc.strerror}") from exc
        child = Child(popen, argv, time.monotonic())
        with _live_lock:
            _live[popen.pid] = popen
        return child


def run(
    argv: Sequence[str],
    *,
    timeout_s: float,
    stdout: Path | None = None,
    stderr: Path | None = None,
    merge_stderr: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    grace_s: float = 5.0,
) -> Finished:
    """Run ``argv`` to completion; on timeout stop its group and mark ``timed_out``."""
    child = spawn(argv, stdout=stdout, stderr=stderr, merge_stderr=merge_stderr, env=env, cwd=cwd)
    return _wait_or_stop(child, timeout_s, grace_s=grace_s)


def _wait_or_stop(
    child: Child, timeout_s: float, *, grace_s: float, sig: int = signal.SIGTERM
) -> Finished:
    """Wait for ``child``; past ``timeout_s`` (or on an exception) stop its whole group."""
    try:
        done = child.wait(timeout_s)
    except BaseException:
        child.stop(grace_s, sig)
        raise
    if done is None:
        done = child.stop(grace_s, sig)
        return dataclasses.replace(done, timed_out=True)
    return done


def capture(
    argv: Sequence[str],
    *,
    timeout_s: float = 30.0,
    input: bytes | None = None,
    hold_stdin: bool = False,
) -> tuple[int, str]:
    """Run a quick command and return (returncode, stdout+stderr): for version probes.

    ``input`` is written to its stdin, which is then closed (a secret travels this way,
    never in argv), or with ``hold_stdin`` kept open until the command exits. 127 when
    the command is not found; -1 when it ran out of time (its group is killed).
    """
    argv = [str(a) for a in argv]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            _require_found(argv[0])
            child = _spawn_into(argv, out, err, stdin_pipe=input is not None)
        except ToolMissing:
            return 127, ""
        if input is not None:
            feed(child, input, close=not hold_stdin)
        done = _wait_or_stop(child, timeout_s, grace_s=_CAPTURE_KILL_WAIT_S, sig=signal.SIGKILL)
        if done.timed_out:
            log.warning("%s did not finish within %g s: killed", argv[0], timeout_s)
            return -1, ""
        return done.returncode, _read_all(out) + _read_all(err)


def feed(child: Child, data: bytes, *, close: bool = False) -> None:
    """Write ``data`` to a child's stdin pipe (a child that already exited is not an error:
    its pipe is broken, or closed when it was reaped)."""
    stdin = child.popen.stdin
    if stdin is None:
        raise ValueError("the child was started without stdin_pipe")
    if stdin.closed:
        return
    with contextlib.suppress(BrokenPipeError, OSError, ValueError):  # ValueError: closed since
        stdin.write(data)
        stdin.flush()
        if close:
            stdin.close()


def _read_all(handle: Any) -> str:
    handle.seek(0)
    return handle.read().decode(errors="replace")


def live_children() -> list[int]:
    with _live_lock:
        return list(_live)


def stop_all(grace_s: float = 10.0) -> None:
    """Stop every child dbrig started and has not reaped: the last line of defence."""
    with _live_lock:
        live = dict(_live)
    for pid in live:
        with contextlib.suppress(ProcessLookupError, ChildProcessError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for pid, popen in live.items():
        while time.monotonic() < deadline and _alive(popen):
            time.sleep(_POLL_S)
        with contextlib.suppress(ProcessLookupError, ChildProcessError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        _reap_recording(popen, 0)
        with _live_lock:
            _live.pop(pid, None)


def _alive(popen: subprocess.Popen) -> bool:
    return popen.returncode is None and not _reap_recording(popen, os.WNOHANG)


def _reap_recording(popen: subprocess.Popen, flags: int) -> bool:
    """Reap ``popen`` if it has exited, keeping its status on it for Child._reap; True if gone."""
    with _reap_lock:
        return _reap_recording_held(popen, flags)


def _reap_recording_held(popen: subprocess.Popen, flags: int) -> bool:
    if popen.returncode is not None:
        return True
    try:
        pid, status = os.waitpid(popen.pid, flags)
    except ChildProcessError:
        return True
    if pid == 0:
        return False
    popen.returncode = os.waitstatus_to_exitcode(status)
    return True


def _kill_group_leftovers(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
