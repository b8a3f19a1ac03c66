"""The seam between dbrig and its tools: what every workload and interference tool provides.

A tool module (``sysbench.py``, ``mysqlslap.py``, ``stress_ng.py``) holds:

- ``INFO``: a :class:`ToolInfo` (binary names, Debian package, version flag): how
  preflight finds it and how ``dbrig doctor`` probes it;
- a frozen pydantic ``...Params`` model: the scenario's ``workload.<key>`` or
  ``interference.<key>`` block, validated;
- pure ``build_command(params, ...) -> list[str]`` (an argv list, never a shell string)
  and ``parse(text)`` (survives empty, truncated and error output);
- one class implementing :class:`WorkloadTool` or :class:`InterferenceTool` over them,
  named in :mod:`dbrig.tools.registry` by its YAML key.

Tools never start processes, read clocks or look at global state: the run side
(:mod:`dbrig.run`) does, through the methods below.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

import pandas as pd
from pydantic import BaseModel

from dbrig.endpoint import Credentials, Endpoint
from dbrig.metrics import Metric


@dataclass(frozen=True)
class ToolInfo:
    """How to find a tool and what to tell the user when it is missing."""

    name: str
    binaries: tuple[str, ...]  # tried in order, e.g. ("mariadb-slap", "mysqlslap")
    package: str  # the Debian package that provides it
    version_args: tuple[str, ...] = ("--version",)


@dataclass(frozen=True)
class Outcome:
    """What one run of a workload measured."""

    metrics: dict[str, float]
    intervals: pd.DataFrame | None  # t_s on the tool's own clock (seconds since it started)
    reason: str | None  # None when the run succeeded
    extra_tables: dict[str, pd.DataFrame]


@dataclass(frozen=True)
class Usage:
    """What the kernel says a finished child used (wall clock and CPU seconds)."""

    wall_s: float
    user_cpu_s: float
    sys_cpu_s: float


class WorkloadTool(Protocol):
    """A load generator run against a server: one instance per cell, from its params."""

    key: ClassVar[str]  # its key under ``workload:`` in a scenario
    info: ClassVar[ToolInfo]
    params_model: ClassVar[type[BaseModel]]
    required_by_doctor: ClassVar[bool]  # a machine without it cannot run the quick start
    params: BaseModel

    @property
    def database(self) -> str:
        """The schema the tool works in (created before prepare)."""
        ...

    def metrics(self) -> tuple[Metric, ...]:
        """The metric columns it produces (entries of :mod:`dbrig.metrics`)."""
        ...

    def data_set_key(self) -> tuple:
        """What ``prepare`` writes: cells with equal keys share one snapshot."""
        ...

    def prepare_argv(self, endpoint: Endpoint, binary: Path) -> list[str] | None: ...

    def cleanup_argv(self, endpoint: Endpoint, binary: Path) -> list[str] | None: ...

    def client_options(self, credentials: Credentials) -> str | None:
        """The 0600 option file's text that carries the password, or None without one."""
        ...

    def run_argv(self, endpoint: Endpoint, binary: Path, warmup: int) -> list[str]:
        """The measured run's argv; raises ConfigError for what the tool cannot do."""
        ...

    def expected_seconds(self, warmup: int) -> float | None:
        """How long a run should take, or None when it runs a fixed amount of work."""
        ...

    def analyse(self, output: str, returncode: int) -> Outcome:
        """Metrics, per-interval frame and failure reason from the tool's output."""
        ...

    def live_interval(self, text_tail: str) -> dict[str, float] | None:
        """The latest interval of a run still going, from the end of its output so far.

        Keys are metric names (``tps``, ``latency_pct_ms``, ``percentile``...); None when
        the tail holds no interval, or the tool prints none (mysqlslap). A line still
        being written (no newline yet) is ignored. The live progress line shows it.
        """
        ...


class InterferenceTool(Protocol):
    """Load that competes with the server while a workload runs (stress-ng)."""

    key: ClassVar[str]  # its key under ``interference:`` in a scenario
    info: ClassVar[ToolInfo]
    params_model: ClassVar[type[BaseModel]]
    required_by_doctor: ClassVar[bool]
    params: BaseModel

    @property
    def active(self) -> bool:
        """False when the block asks for no work at all (every stressor at 0)."""
        ...

    def metrics(self) -> tuple[Metric, ...]:
        """The metric columns it produces (entries of :mod:`dbrig.metrics`)."""
        ...

    def check_host(self, cpu_count: int) -> None:
        """Raise ConfigError for what this host cannot give (cores it does not have)."""
        ...

    def argv(self, binary: Path, limit_s: int) -> list[str]: ...

    def pinned_cores(self) -> list[int] | None: ...

    def failure_reason(self, stderr: str, returncode: int) -> str | None:
        """Why it stopped early, in one line (None if the output shows no reason)."""
        ...

    def analyse(self, stderr: str, usage: Usage) -> dict[str, float]:
        """Metrics of a finished run: its own report plus achieved versus asked CPU."""
        ...
