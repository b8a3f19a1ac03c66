"""Interference in the background for the length of one trial (stress-ng), here or on
another host over ssh (``interference.<tool>.host``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from dbrig import proc
from dbrig.remote.ssh import SshHost, client_times, stop_wrapped
from dbrig.run.remote import lost_connection
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
