"""Interference in the background for the length of one trial (stress-ng)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from dbrig import proc
from dbrig.tools.base import InterferenceTool, Usage


class InterferenceRun:
    """One interference tool started before the workload and stopped after it."""

    def __init__(
        self,
        tool: InterferenceTool,
        argv: list[str],
        folder: Path,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tool = tool
        self.argv = argv
        self.clock = clock
        self.stderr = folder / f"{tool.key}.err"
        self.child: proc.Child | None = None
        self._started = 0.0

    def start(self) -> None:
        self._started = self.clock()
        self.child = proc.spawn(self.argv, stderr=self.stderr)

    @property
    def pid(self) -> int | None:
        return self.child.pid if self.child else None

    def died(self) -> str | None:
        """Why it stopped before being told to, or None while it runs."""
        if self.child is None:
            return None
        done = self.child.poll()
        if done is None:
            return None
        if done.reaped_elsewhere:
            return f"{self.tool.info.name}: {done.exit_text}"
        reason = self.tool.failure_reason(self._output(), done.returncode)
        return f"{self.tool.info.name} exited early: {reason or done.exit_text}"

    def stop(self) -> dict[str, float]:
        """Stop it and return its metrics (its own report, achieved versus asked CPU)."""
        if self.child is None:
            return {}
        finished = self.child.stop(grace_s=10)
        self.child = None
        wall = finished.wall_s or (self.clock() - self._started)
        usage = Usage(wall, finished.user_cpu_s, finished.sys_cpu_s)
        return self.tool.analyse(self._output(), usage)

    def _output(self) -> str:
        return self.stderr.read_text(errors="replace") if self.stderr.exists() else ""
