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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from dbrig.endpoint import Credentials, Endpoint
from dbrig.metrics import Metric, WorkUnit


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


# A cell's value of a key of the tool's own block, as the run saved it (None when unset):
# ``setting("tables")`` is ``workload.sysbench.tables``.
Setting = Callable[[str], Any]


@dataclass(frozen=True)
class MeanLatency:
    """A workload's mean latency in ms, read from its metric columns, for the Scalability
    section's latency knee when a run has no percentile: ``column`` x ``scale``, divided by
    the column ``per`` when given, under ``heading``, with ``note`` saying why."""

    column: str
    heading: str
    note: str
    scale: float = 1.0
    per: str | None = None


@dataclass(frozen=True)
class DataEstimate:
    """The size of a cell's table data, estimated from its settings, and how."""

    bytes: float
    how: str  # "2 tables x 10,000 rows x ~230 B"


@dataclass(frozen=True)
class HostFacts:
    """What the saved run says of its host, for a tool's :class:`CellCheck`."""

    memory_bytes: float | None
    cpu_count: float | None


@dataclass(frozen=True)
class CellCheck:
    """A warning the report raises from a cell's settings and its host: a trap of the
    tool's own (sysbench fileio measuring the page cache). ``check`` returns the cell's
    text and how bad it is (larger is worse), or None when the cell is fine."""

    code: str  # the warning's stable code
    summary: str  # what many cells' warning is folded into: "fileio fits in RAM"
    suffix: str  # after each cell's text: why it matters, what to do
    where: str  # where every cell's value can be read
    check: Callable[[Setting, HostFacts], tuple[str, float] | None]


class WorkloadTool(Protocol):
    """A load generator run against a server: one instance per cell, from its params."""

    key: ClassVar[str]  # its key under ``workload:`` in a scenario
    info: ClassVar[ToolInfo]
    params_model: ClassVar[type[BaseModel]]
    required_by_doctor: ClassVar[bool]  # a machine without it cannot run the quick start
    # Its key counting concurrent clients (a sweep of it gets the Scalability section).
    concurrency_key: ClassVar[str | None]
    # The key of its block that sets space_needed() (the error line names it), if any.
    space_key: ClassVar[str | None]
    # It rides through a server restart by reconnecting on its own (acked_writes), so a
    # fault that takes the server away need not end its run.
    reconnects_itself: ClassVar[bool]
    # The line it prints when its own clock starts (run/startwatch.py), or None.
    start_line: ClassVar[str | None]
    # What the trial puts the server's costs per (cost per unit of work).
    units_of_work: ClassVar[tuple[WorkUnit, ...]]
    # The report's latency for the knee when a sweep has no percentile, or None.
    mean_latency: ClassVar[MeanLatency | None]
    # Warnings about the tool's own traps, raised by the report from the cells' settings.
    cell_checks: ClassVar[tuple[CellCheck, ...]]
    params: BaseModel

    @property
    def client_cpus(self) -> tuple[int, ...] | None:
        """The cores the scenario pins the client to, if any (its ``cpus``)."""
        ...

    @property
    def client_host(self) -> str | None:
        """The scenario's host (a key of ``hosts:``) the client runs on; None: here."""
        ...

    @property
    def interval_s(self) -> float | None:
        """Seconds between its interval lines (None: it prints none)."""
        ...

    @staticmethod
    def estimated_data(setting: Setting) -> DataEstimate | None:
        """A cell's table data size from its settings, for the report's "fits in the buffer
        pool" warning; None when it cannot say (a hardware test, a script)."""
        ...

    @property
    def database(self) -> str:
        """The schema the tool works in (created before prepare)."""
        ...

    @property
    def title(self) -> str:
        """What runs, in a few words (``sysbench cpu``), for run.json and the report."""
        ...

    @property
    def needs_server(self) -> bool:
        """False for a workload that never connects (sysbench cpu): the run starts no
        server; prepare and run work in a dbrig-owned directory instead (their cwd)."""
        ...

    @property
    def work_root(self) -> str | None:
        """Where that directory goes when the user names one (fileio's ``directory``);
        None: beside the run directory, on its filesystem."""
        ...

    def space_needed(self) -> int:
        """Bytes its prepare writes into the work directory (checked before the run)."""
        ...

    def inputs(self) -> dict[str, Path]:
        """Files the workload reads (a Lua script) that the run directory keeps a copy of."""
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


CLIENT_CPUS = Field(
    None,
    description=(
        "Pin the client (the workload tool) to these cores with taskset, e.g. [1]; keep it "
        "off the cores a pinned server uses. Unset: wherever the kernel puts it."
    ),
)


CLIENT_HOST = Field(
    None,
    description=(
        "Run the client on this host of the scenario's hosts: block, over ssh (a matrix "
        "factor like any key). Unset: where dbrig runs."
    ),
)


class ClientPlacement(BaseModel):
    """What every workload block accepts besides its tool's own keys: where the client runs
    (the client competes with the server for the CPU; on one host, pin them apart).

    A params model inherits this and ends its fields with ``host: str | None = CLIENT_HOST``
    and ``cpus: tuple[int, ...] | None = CLIENT_CPUS``, so the keys come last in errors and
    docs, after the tool's own.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("cpus", check_fields=False)
    @classmethod
    def _cores_are_distinct(cls, value: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if value is not None:
            if not value:
                raise ValueError("give at least one core, or leave cpus out")
            if min(value) < 0:
                raise ValueError("core numbers start at 0")
            if len(set(value)) != len(value):
                raise ValueError("a core is listed twice")
        return value


def column_prefixes(tools: Iterable[InterferenceTool]) -> dict[str, str]:
    """By process role (the tool's key in procs.csv), the prefix of its summary columns."""
    return {tool.key: tool.column_prefix for tool in tools}


def pinned_argv(argv: list[str], cpus: tuple[int, ...] | None) -> list[str]:
    """``argv`` run under ``taskset -c`` when cores are given."""
    if not cpus:
        return argv
    return ["taskset", "-c", ",".join(map(str, cpus)), *argv]


class WorkloadBase:
    """The answers every workload tool gives alike unless it says otherwise: a tool class
    inherits them (directly or through :class:`ServerWorkload`) and overrides what differs.
    Its params model is a :class:`ClientPlacement` (``host`` and ``cpus``)."""

    params: Any
    space_key: ClassVar[str | None] = None
    reconnects_itself: ClassVar[bool] = False
    start_line: ClassVar[str | None] = None
    units_of_work: ClassVar[tuple[WorkUnit, ...]] = ()
    mean_latency: ClassVar[MeanLatency | None] = None
    cell_checks: ClassVar[tuple[CellCheck, ...]] = ()

    @property
    def client_cpus(self) -> tuple[int, ...] | None:
        return self.params.cpus

    @property
    def client_host(self) -> str | None:
        return self.params.host

    @property
    def interval_s(self) -> float | None:
        return None

    @staticmethod
    def estimated_data(setting: Setting) -> DataEstimate | None:
        return None


class ServerWorkload(WorkloadBase):
    """The answers of a workload that always runs against a server and reads no file of
    its own: a tool class inherits them and keeps only what differs (sysbench's hardware
    tests and scripts answer otherwise)."""

    key: ClassVar[str]

    @property
    def title(self) -> str:
        return self.key

    @property
    def needs_server(self) -> bool:
        return True

    @property
    def work_root(self) -> str | None:
        return None

    def space_needed(self) -> int:
        return 0

    def inputs(self) -> dict[str, Path]:
        return {}


@dataclass(frozen=True)
class InputFolder:
    """Files a workload reads that are its own (a Lua script and the modules it requires):
    the run keeps a copy of them under ``inputs/<name>/`` and the workload reads that copy."""

    name: str  # the copy's folder name in the run: unique per content
    root: Path  # the folder they are in
    files: tuple[str, ...]  # relative to root, sorted
    digest: str  # over every file's relative path and content: part of the data-set key
    main: str  # the file the tool starts with (relative to root)


@dataclass(frozen=True)
class CommandsProbe:
    """A command that asks the tool which commands a workload defines: ``argv`` run with
    ``stdin``, its output handed back to :meth:`FolderWorkload.probed`."""

    argv: list[str]
    stdin: str


@runtime_checkable
class FolderWorkload(Protocol):
    """A workload made of a folder of files (a sysbench Lua script that requires others).

    The tool stays pure: the run side copies :meth:`input_folder` into the run and
    rewrites the cell's block with :meth:`at_copy`, so what runs is that copy; and when
    the plan is built it runs :meth:`commands_probe` (on a copy made in a temporary
    folder) and rewrites the block with :meth:`probed`: prepare and cleanup run only
    when the workload defines them.
    """

    def input_folder(self) -> InputFolder | None:
        """Its files, or None (a block that reads none: a built-in test)."""
        ...

    def at_copy(self, root: Path) -> BaseModel:
        """Its params, reading the copy of :meth:`input_folder` at ``root``."""
        ...

    def search_path(self, root: Path) -> dict[str, str]:
        """The variables that put the copy at ``root`` on its search path, for run.json."""
        ...

    def commands_probe(self, binary: Path, root: Path, empty: Path) -> CommandsProbe | None:
        """How to ask which commands the copy at ``root`` defines (run in the folder
        ``empty``); None when the scenario declares them."""
        ...

    def check_argv(self, endpoint: Endpoint, binary: Path) -> list[str] | None:
        """Its own check of a data set just prepared (sysbench's ``check`` command), run
        before the data set is kept; None when it defines none."""
        ...

    def probed(self, output: str, root: Path) -> BaseModel:
        """Its params with the commands the probe found; raises ConfigError (one line)
        when the workload did not load (a module it requires is missing)."""
        ...


@runtime_checkable
class CheckedWorkload(Protocol):
    """A workload whose database must pass checks after every run (tpcc's consistency).

    The tool stays pure: it names the queries, the run side executes them against
    the trial's server and hands back their single numbers.
    """

    def after_run_checks(self) -> dict[str, str]:
        """By check name, a query returning one number (0 when the check holds)."""
        ...

    def evaluate_checks(self, counts: Mapping[str, int]) -> tuple[dict[str, float], str | None]:
        """Metrics to save and the failure reason naming the failed check, or None."""
        ...


@runtime_checkable
class ClientLogWorkload(Protocol):
    """A workload whose client writes files while it runs (the ids of the commits the server
    acknowledged), checked against the database after the run (acked_writes' lost commits).

    The run side starts the client in an empty folder of the trial, reads the files there
    whose names match ``client_log_glob``, runs the tool's queries against the trial's
    server and hands back what they found; the folder is removed with the trial's work.
    """

    client_log_glob: ClassVar[str]

    def client_log_queries(self, logs: Mapping[str, str]) -> list[str]:
        """From the files' texts by name, queries each returning one integer column."""
        ...

    def evaluate_client_logs(self, logs: Mapping[str, str], found: Iterable[int]) -> Outcome:
        """Metrics to save, tables to save beside them (the lost ids) and a failure reason
        (or None), from the files and the values the queries returned; no intervals."""


@runtime_checkable
class ResumableWorkload(Protocol):
    """A workload dbrig can start again for the rest of its time after a fault ended it.

    A fault that takes the server away (kill_server KILL or TERM) or kills the client
    (kill_client) ends the run: sysbench 1.0.20 linked with libmariadb crashes when it
    reconnects (akopytov/sysbench#527), so the run side starts a second run for the
    rest of the measured window instead of relying on the tool's own reconnects.
    """

    def resumed_argv(self, endpoint: Endpoint, binary: Path, seconds: int) -> list[str]:
        """A run of ``seconds`` with no warm-up, on the data as the fault left it."""
        ...


@runtime_checkable
class SizedDataSet(Protocol):
    """A workload that can say how many bytes its prepared data takes, before loading it."""

    key: ClassVar[str]
    size_key: ClassVar[str]  # the key of its block that sets the size (for the error line)

    def data_set_bytes(self) -> int | None:
        """About how many bytes its loaded data takes; None: this block cannot say (a
        script's own tables)."""
        ...


class InterferenceTool(Protocol):
    """Load that competes with the server while a workload runs (stress-ng)."""

    key: ClassVar[str]  # its key under ``interference:`` in a scenario
    info: ClassVar[ToolInfo]
    params_model: ClassVar[type[BaseModel]]
    required_by_doctor: ClassVar[bool]
    # The prefix of its process's summary columns (``<prefix>_cpu_pct``), from procs.csv.
    column_prefix: ClassVar[str]
    # The report's words for a block that asks for no work: "none (<inactive_note>)".
    inactive_note: ClassVar[str]
    # Its metric of the CPU it got over the CPU it asked for (the report warns under 0.8).
    achieved_ratio_metric: ClassVar[str | None]
    params: BaseModel

    @property
    def host(self) -> str | None:
        """The scenario's host (a key of ``hosts:``) it runs on; None: this machine."""
        ...

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

    def pinned_cores(self) -> list[int] | None:
        """The cores it is pinned to (stress-ng's ``taskset``), None when it is not: the
        trial's ``pinned_cores_busy_pct`` is their mean busy share."""
        ...

    def failure_reason(self, stderr: str, returncode: int) -> str | None:
        """Why it stopped early, in one line (None if the output shows no reason)."""
        ...

    def analyse(self, stderr: str, usage: Usage) -> dict[str, float]:
        """Metrics of a finished run: its own report plus achieved versus asked CPU."""
        ...
