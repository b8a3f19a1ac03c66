"""The CPU profile of a server on another host: ``perf record`` there, folded there.

Two halves, one per side of the agent's protocol:

- :class:`AgentProfile`, in the agent (requests ``profile_start`` and ``profile_stop``):
  a thread waits for the measured window to start, then runs ``perf record`` of the
  server's process (:func:`dbrig.sampling.profile.record_argv`, the command a local
  trial runs); at the stop perf gets SIGINT and writes its file, ``perf script``
  reads it there (it needs that host's binaries and symbols) and
  :func:`dbrig.sampling.profile.finish` folds its text there. Only the folded
  stacks go back (a few kB to a few hundred), with perf record's own output and the
  trial's lines; perf's files, in ``profile/`` of the server's folder, go as soon
  as they are folded, and on every other way out (the agent's close, its stdin
  ending, SIGTERM, Ctrl-C: :meth:`AgentProfile.discard`; after a SIGKILL the next
  agent of that folder removes them).
- :class:`RemoteProfile`, on dbrig's side: the registry's ``server-profile``
  sampler (:mod:`dbrig.sampling.registry`), built by the server's handle; its
  ``collect`` writes profile.folded and profile.out in the trial's folder, as a
  local trial's profile does, and gives the trial its metric and warnings.
"""

from __future__ import annotations

import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dbrig import proc
from dbrig.errors import ServerError
from dbrig.remote import protocol
from dbrig.sampling import profile
from dbrig.sampling.profile import ProfileOutcome
from dbrig.sampling.schedule import SampleTiming

PROFILE_FOLDER = "profile"  # in the server's folder on its host: perf's files, while they live
STOP_GRACE_S = 5.0  # perf record writes its file on SIGINT
SCRIPT_TIMEOUT_S = 300.0  # perf script of a long window
# What dbrig waits for profile_stop: perf record's stop, then perf script, then folding.
STOP_TIMEOUT_S = STOP_GRACE_S + SCRIPT_TIMEOUT_S + 120.0


class AgentProfile:
    """perf record of the server on this host for one trial's window (the agent's)."""

    def __init__(
        self, folder: Path, frequency: int, t0: float, server_pid: Callable[[], int | None]
    ) -> None:
        """``t0``: when the window starts, on ``time.monotonic``'s clock; ``server_pid``
        asked then (the server may have restarted since the request)."""
        self.folder = folder
        self.frequency = frequency
        self.t0 = t0
        self.pid: int | None = None
        self._server_pid = server_pid
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="profile", daemon=True)

    def start(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)  # an earlier agent's, killed
        self.folder.mkdir(parents=True)
        self._thread.start()

    def _run(self) -> None:
        """Wait for the window, record until told to stop. This thread lives as long as
        perf: the kernel's parent-death signal (proc's setpriv) follows the thread that
        started it."""
        if self._stopping.wait(max(0.0, self.t0 - time.monotonic())):
            return  # stopped during the warm-up
        self.pid = self._server_pid()
        if self.pid is None:
            return  # the outcome says so
        argv = profile.record_argv([self.pid], self.frequency, self.folder / profile.PERF_DATA)
        out = self.folder / profile.RECORD_OUT
        try:
            child = proc.spawn(argv, stdout=out, merge_stderr=True)
        except Exception as exc:  # said in the trial's warnings instead
            with open(out, "a") as handle:
                handle.write(f"Error: could not start {argv[0]}: {exc}\n")
            return
        self._stopping.wait()
        child.stop(grace_s=STOP_GRACE_S, sig=signal.SIGINT)

    def finish(self) -> dict[str, Any]:
        """Stop perf record, fold what it recorded: the answer to ``profile_stop``
        (:func:`dbrig.remote.protocol.profile_answer`). perf's files are gone after it."""
        try:
            self._stop_recording()
            notes = self._script()
            outcome = profile.finish(self.folder, self.pid)
            return protocol.profile_answer(
                folded=_text(self.folder / profile.FOLDED),
                record_out=_text(self.folder / profile.RECORD_OUT),
                metrics=outcome.metrics,
                warnings=[*notes, *outcome.warnings],
            )
        finally:
            self.discard()

    def _stop_recording(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def _script(self) -> list[str]:
        """perf script of the recorded file into profile.script; a failure is a line."""
        data = self.folder / profile.PERF_DATA
        if not data.exists():
            return []
        out = self.folder / profile.SCRIPT
        done = proc.run(profile.script_argv(data), timeout_s=SCRIPT_TIMEOUT_S, stdout=out)
        if done.timed_out or done.returncode != 0:
            how = f"ran past {SCRIPT_TIMEOUT_S:.0f} s" if done.timed_out else done.exit_text
            return [
                f"profile: perf script {how} on the server's host: its results may be incomplete"
            ]
        return []

    def discard(self) -> None:
        """perf stopped and its files removed (nothing of the profile stays on this host)."""
        self._stop_recording()
        shutil.rmtree(self.folder, ignore_errors=True)


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


class RemoteProfile:
    """The ``server-profile`` sampler of one trial: the agent records, dbrig collects."""

    def __init__(
        self, call: Callable[..., Any], timing: SampleTiming, frequency: int, where: str
    ) -> None:
        """``call``: a request to the server's agent (``RemoteServerHandle.call``);
        ``where``: the server, for lines ("server 'db' on hosts.db1 (...)")."""
        self._call = call
        self.timing = timing
        self.frequency = frequency
        self.where = where
        self.error: str | None = None  # never set: a profile that falls short is a warning
        self.failure: BaseException | None = None
        self.answer: protocol.ProfileAnswer | None = None
        self._lost: str | None = None

    def start(self) -> None:
        t0 = self.timing.t0 if self.timing.t0 is not None else self.timing.clock()
        self._call("profile_start", frequency=self.frequency, t0_in_s=t0 - self.timing.clock())

    def stop(self) -> None:
        try:
            result = self._call("profile_stop", STOP_TIMEOUT_S)
            self.answer = protocol.read_profile_answer(result)
        except ServerError as exc:
            self._lost = exc.message

    def collect(self, folder: Path) -> ProfileOutcome:
        """profile.folded and profile.out in the trial's ``folder``; its metric and lines."""
        answer = self.answer
        if answer is None:
            (folder / profile.FOLDED).write_text("")
            why = f"profile: the profile of {self.where} was lost: {self._lost}"
            return ProfileOutcome({"profile_samples": 0.0}, (why,))
        (folder / profile.FOLDED).write_text(answer.folded)
        (folder / profile.RECORD_OUT).write_text(answer.record_out)
        return ProfileOutcome(answer.metrics, answer.warnings)
