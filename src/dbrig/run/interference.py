"""Interference in the background for the length of one trial (stress-ng), here or on
another host over ssh (``interference.<tool>.host``)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dbrig import proc
from dbrig.remote.ssh import SshHost, client_times, stop_wrapped
from dbrig.run.commands import InterferenceCommand
from dbrig.run.ssh_client import lost_connection, saved_argv
from dbrig.tools.base import InterferenceTool, Usage


class InterferenceRun:
    """One interference tool started before the workload and stopped after it.

    With ``host`` it runs there under the ssh wrapper: the trial holds the local ``ssh``,
    stopping it closes its stdin (the wrapper stops the tool and reports its CPU times),
    and a lost connection stops the tool there too.
    """

    def __init__(
        self,
        tool: InterferenceTool,
        argv: list[str],
        folder: Path,
        clock: Callable[[], float] = time.monotonic,
        host: SshHost | None = None,
    ) -> None:
        self.tool = tool
        self.argv = argv
        self.clock = clock
        self.host = host
        self.stderr = folder / f"{tool.key}.err"
        self.child: proc.Child | None = None
        self._started = 0.0

    def start(self) -> None:
        self._started = self.clock()
        if self.host is None:
            self.child = proc.spawn(self.argv, stderr=self.stderr)
        else:
            self.child = self.host.spawn(self.argv, stdout=self.stderr, report_times=True)

    @property
    def pid(self) -> int | None:
        """Its process here, for the host sampler (None on another host: the local ``ssh``
        is not the tool)."""
        return self.child.pid if self.child and self.host is None else None

    def died(self) -> str | None:
        """Why it stopped before being told to, or None while it runs."""
        if self.child is None:
            return None
        done = self.child.poll()
        if done is None:
            return None
        name = self.tool.info.name
        if done.reaped_elsewhere:
            return f"{name}{self._where}: {done.exit_text}"
        output = self._output()
        if self.host is not None and (lost := lost_connection(self.host, done.returncode, output)):
            return f"{name}: {lost}"
        reason = self.tool.failure_reason(output, done.returncode)
        return f"{name}{self._where} exited early: {reason or done.exit_text}"

    def stop(self) -> dict[str, float]:
        """Stop it and return its metrics (its own report, achieved versus asked CPU)."""
        if self.child is None:
            return {}
        if self.host is None:
            finished = self.child.stop(grace_s=10)
            user, system = finished.user_cpu_s, finished.sys_cpu_s
        else:
            finished = stop_wrapped(self.child)
            _, user, system = client_times(self._raw_output())
        self.child = None
        wall = finished.wall_s or (self.clock() - self._started)
        nan = float("nan")  # the wrapper's times never came back: the connection broke
        usage = Usage(wall, nan if user is None else user, nan if system is None else system)
        return self.tool.analyse(self._output(), usage)

    @property
    def _where(self) -> str:
        return "" if self.host is None else f" on {self.host.target.label}"

    def _raw_output(self) -> str:
        return self.stderr.read_text(errors="replace") if self.stderr.exists() else ""

    def _output(self) -> str:
        """What the tool printed (without the remote wrapper's times)."""
        return client_times(self._raw_output())[0]


@dataclass
class InterferenceOn:
    """A trial's interference tools, each started before the block and stopped after it."""

    folder: Path
    clock: Callable[[], float]
    hosts: Callable[[str], SshHost] | None  # the run's connections to other hosts
    running: list[InterferenceRun]  # those running now (the host sampler follows them)

    @contextlib.contextmanager
    def running_for(
        self,
        commands: Sequence[InterferenceCommand],
        saved: dict[str, list[str]],
        metrics: dict[str, float],
    ) -> Iterator[list[InterferenceRun]]:
        """Each command started, its argv in ``saved`` (by role), its metrics in
        ``metrics`` once stopped."""
        with contextlib.ExitStack() as stack:
            for command in commands:
                stack.enter_context(self._one(command, saved, metrics))
            yield self.running

    @contextlib.contextmanager
    def _one(
        self, command: InterferenceCommand, saved: dict[str, list[str]], metrics: dict[str, float]
    ) -> Iterator[None]:
        host = None
        if command.host is not None:
            assert self.hosts is not None, "preflight opened no interference hosts"
            host = self.hosts(command.host)
            host.connect()  # reconnected after a loss; SshError names the host
        run = InterferenceRun(command.tool, command.argv, self.folder, self.clock, host)
        saved[command.role] = command.argv if host is None else saved_argv(host, command.argv)
        run.start()
        self.running.append(run)
        try:
            yield
        finally:
            self.running.remove(run)
            metrics.update(run.stop())
