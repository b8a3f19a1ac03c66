"""The workload's client behind one interface: here (:class:`LocalClient`) or on another
host over ssh (``run/ssh_client.py``).

A client launches runs of the workload (:class:`ClientRun`: its process, its output
file, the watch for the line that starts the tool's clock, its end), records where each
argv ran for trial.json, and reports what its runs left (:class:`ClientReport`): the
last run's output for the tool's parser, the CPU seconds the client took, and a failure
of the client's own (a lost connection) that the tool's output cannot tell. A run
started again after a fault is one more launch of the same client.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dbrig import proc
from dbrig.endpoint import Endpoint
from dbrig.run.startwatch import StartWatch

STOP_GRACE_S = 5.0


class ClientRun:
    """One run of the workload's client: started, watched, waited for or stopped."""

    def __init__(
        self,
        child: proc.Child,
        output: Path,
        launched_at: float,
        watch: StartWatch | None,
        pid: int | None,
        stop: Callable[[proc.Child], proc.Finished] | None = None,
    ) -> None:
        """``pid``: the process the host sampler follows (None: the client runs
        elsewhere); ``stop``: how to stop it so that it still reports (an ssh client)."""
        self.child = child
        self.output = output
        self.launched_at = launched_at
        self.watch = watch
        self.pid = pid
        self.finished: proc.Finished | None = None
        self._stop = stop

    def wait(self, timeout_s: float) -> proc.Finished | None:
        """Its end if it ended within ``timeout_s``, else None."""
        if self.finished is None:
            self.finished = self.child.wait(timeout_s)
        return self.finished

    def stop(self, grace_s: float = STOP_GRACE_S) -> proc.Finished:
        """Stopped (if still running) and its end."""
        if self.finished is None:
            if self._stop is not None:
                self.finished = self._stop(self.child)
            else:
                self.finished = self.child.stop(grace_s=grace_s)
        self.stop_watch()
        return self.finished

    def kill(self) -> None:
        """SIGKILL to its process group (a client crash)."""
        self.child.signal_group(signal.SIGKILL)

    def stop_watch(self) -> None:
        if self.watch is not None:
            self.watch.stop()

    @property
    def start_delay_s(self) -> float:
        """Its launch until the tool said it started (0 when it never did, or has no such
        line): its own clock is that much behind the trial's."""
        if self.watch is None or self.watch.seen_at is None:
            return 0.0
        return max(0.0, self.watch.seen_at - self.launched_at)

    @property
    def started(self) -> bool:
        return self.watch is not None and self.watch.seen_at is not None

    def text(self) -> str:
        return self.output.read_text(errors="replace")


@dataclass(frozen=True)
class ClientReport:
    """What a client's runs left, for the trial's metrics and reason."""

    output: str  # the last run's, as the tool's parser reads it
    user_cpu_s: float | None  # every run's, summed; None when unknown
    sys_cpu_s: float | None
    failure: str | None  # the client's own failure (a lost connection), not the tool's


class Client(Protocol):
    """Where and how the workload's client runs."""

    tool: str  # the tool's name, for failure reasons
    endpoint: Endpoint  # where it connects
    binary: Path  # the tool's binary where it runs

    def launch(self, argv: Sequence[str], out: Path, cwd: Path | None) -> ClientRun: ...

    def saved_argv(self, argv: list[str]) -> list[str]:
        """trial.json's record of ``argv``: where it ran, then what ran."""
        ...

    def report(self, runs: Sequence[ClientRun]) -> ClientReport: ...


def start_watch(out: Path, start_line: str | None, clock: Callable[[], float]) -> StartWatch | None:
    """A started watch for the tool's start line in ``out``, or None for a tool with none."""
    if not start_line:
        return None
    watch = StartWatch(out, start_line, clock)
    watch.start()
    return watch


class LocalClient:
    """The client as a child of dbrig on this machine."""

    def __init__(
        self,
        tool: str,
        endpoint: Endpoint,
        binary: Path,
        clock: Callable[[], float],
        start_line: str | None = None,
    ) -> None:
        self.tool = tool
        self.endpoint = endpoint
        self.binary = binary
        self.clock = clock
        self.start_line = start_line

    def launch(self, argv: Sequence[str], out: Path, cwd: Path | None) -> ClientRun:
        launched = self.clock()
        child = proc.spawn(argv, stdout=out, merge_stderr=True, cwd=cwd)
        watch = start_watch(out, self.start_line, self.clock)
        return ClientRun(child, out, launched, watch, pid=child.pid)

    def saved_argv(self, argv: list[str]) -> list[str]:
        return list(argv)

    def report(self, runs: Sequence[ClientRun]) -> ClientReport:
        ended = [run.finished for run in runs if run.finished is not None]
        return ClientReport(
            output=runs[-1].text(),
            user_cpu_s=sum(f.user_cpu_s for f in ended),
            sys_cpu_s=sum(f.sys_cpu_s for f in ended),
            failure=None,
        )


def named_reason(tool: str, reason: str) -> str:
    """A tool's failure reason naming the tool (``sysbench: killed by signal 9 ...``)."""
    return reason if tool in reason else f"{tool}: {reason}"
