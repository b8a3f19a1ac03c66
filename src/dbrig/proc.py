"""The only place that starts processes.

Every child gets an argument list (never a shell string), its own session and
so its own process group, output redirected to files (so a long run cannot
fill a pipe), and a place in a registry of live children. ``stop_all()`` ends
every registered group: the CLI calls it on success, failure, Ctrl-C and
SIGTERM, so nothing dbrig started outlives it.

``run()`` waits with ``os.wait4`` so the child's own user and system CPU time
come back with its exit code (seed 003 used ``time`` for this).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbrig.errors import ToolMissing

log = logging.getLogger(__name__)

_SECRET_ARG = re.compile(r"^(--?[\w-]*password[\w-]*=).*$", re.IGNORECASE)
_POLL_S = 0.02


def _die_with_parent_prefix() -> tuple[str, ...]:
    """``setpriv --pdeathsig TERM --``: children get SIGTERM if dbrig itself is killed.

    Ctrl-C and SIGTERM are handled by stop_all(), but SIGKILL (or the OOM killer)
    gives dbrig no chance to clean up; the kernel's parent-death signal still
    stops mariadbd, sysbench and stress-ng. setpriv is in util-linux, which
    every Debian has; without it (or without --pdeathsig) children start plainly.
    """
    setpriv = shutil.which("setpriv")
    if not setpriv:
        return ()
    try:
        helped = subprocess.run(
            [setpriv, "--help"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return (setpriv, "--pdeathsig", "TERM", "--") if "--pdeathsig" in helped.stdout else ()


_DIE_WITH_PARENT = _die_with_parent_prefix()
_live: dict[int, subprocess.Popen] = {}
_live_lock = threading.Lock()


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

    @property
    def killed_by_signal(self) -> int | None:
        return -self.returncode if self.returncode < 0 else None


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
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(_POLL_S)
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
        try:
            pid, status, usage = os.wait4(self.pid, flags)
        except ChildProcessError:
            pid, status, usage = self.pid, 0, None
        if pid == 0:
            return
        returncode = os.waitstatus_to_exitcode(status) if usage is not None else 0
        self.popen.returncode = returncode
        self._finished = Finished(
            argv=self.argv,
            returncode=returncode,
            wall_s=time.monotonic() - self.started,
            user_cpu_s=usage.ru_utime if usage else 0.0,
            sys_cpu_s=usage.ru_stime if usage else 0.0,
        )
        with _live_lock:
            _live.pop(self.pid, None)


def spawn(
    argv: Sequence[str],
    *,
    stdout: Path | None = None,
    stderr: Path | None = None,
    merge_stderr: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Child:
    """Start ``argv`` in its own process group; output goes to the given files (else /dev/null).

    With ``merge_stderr`` stderr goes to the stdout file, in the order it was printed.
    """
    argv = [str(a) for a in argv]
    if shutil.which(argv[0]) is None:
        raise ToolMissing(f"{argv[0]} not found")
    log.info("start: %s", " ".join(redact(argv)))
    out = open(stdout, "ab") if stdout else subprocess.DEVNULL  # noqa: SIM115
    err = (
        subprocess.STDOUT if merge_stderr else open(stderr, "ab") if stderr else subprocess.DEVNULL  # noqa: SIM115
    )
    full_env = None if env is None else {**os.environ, **env}
    child: Child | None = None
    held = _HeldSignals()
    try:
        child = _start_held(argv, out, err, full_env, cwd, held)
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
    argv: list[str],
    out: Any,
    err: Any,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    held: _HeldSignals,
) -> Child:
    """Popen and register the child with Ctrl-C and SIGTERM held (see _interrupts_held)."""
    with _interrupts_held(held):
        try:
            popen = subprocess.Popen(
                [*_DIE_WITH_PARENT, *argv],
                stdin=subprocess.DEVNULL,
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
        finally:
            for handle in (out, err):
                if hasattr(handle, "close"):
                    handle.close()
        child = Child(popen, argv, time.monotonic())
        with _live_lock:
            _live[popen.pid] = popen
        return child


class _HeldSignals:
    def __init__(self) -> None:
        self.signals: list[int] = []

    def hold(self, signum: int, frame: Any) -> None:
        self.signals.append(signum)

    def deliver(self) -> None:
        for signum in self.signals:
            signal.raise_signal(signum)
        self.signals.clear()


@contextlib.contextmanager
def _interrupts_held(held: _HeldSignals) -> Iterator[_HeldSignals]:
    """Hold Ctrl-C and SIGTERM while a child starts, to deliver after it is registered.

    Otherwise an interrupt inside Popen (it waits for the exec) loses the child: it
    runs on, unregistered, and nothing stops it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if handler is not None:
            previous[signum] = signal.signal(signum, held.hold)
    try:
        yield held
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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
    try:
        done = child.wait(timeout_s)
    except BaseException:
        child.stop(grace_s)
        raise
    if done is None:
        done = child.stop(grace_s)
        return dataclasses.replace(done, timed_out=True)
    return done


def capture(argv: Sequence[str], *, timeout_s: float = 30.0) -> tuple[int, str]:
    """Run a quick command and return (returncode, stdout+stderr): for version probes."""
    try:
        done = subprocess.run(
            [str(a) for a in argv],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            start_new_session=True,
        )
    except FileNotFoundError:
        return 127, ""
    except subprocess.TimeoutExpired:
        return -1, ""
    return done.returncode, (done.stdout or "") + (done.stderr or "")


def live_children() -> list[int]:
    with _live_lock:
        return list(_live)


def stop_all(grace_s: float = 10.0) -> None:
    """Stop every child dbrig started and has not reaped: the last line of defence."""
    with _live_lock:
        pids = list(_live)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ChildProcessError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for pid in pids:
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(_POLL_S)
        with contextlib.suppress(ProcessLookupError, ChildProcessError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, ChildProcessError, PermissionError):
            os.waitpid(pid, 0)
        with _live_lock:
            _live.pop(pid, None)


def _alive(pid: int) -> bool:
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return reaped == 0


def _kill_group_leftovers(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
