"""The commands of a trial, built one way: the dry run prints what the real run executes.

Argv, the workload's time limit and the interference's safety-net limit all come
from :func:`trial_commands`, so ``dbrig run --dry-run`` shows the exact
commands (with placeholders where the sandbox's paths are not known yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dbrig.endpoint import Endpoint
from dbrig.scenario import Scenario
from dbrig.tools.base import (
    InterferenceTool,
    WorkloadTool,
    pinned_argv,
)
from dbrig.tools.registry import interference_for, workload_for

# A run with no time limit of its own (a fixed number of events or queries) may take this long.
DEFAULT_EVENTS_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class InterferenceCommand:
    tool: InterferenceTool
    argv: list[str]
    limit_s: int
    role: str  # its key in trial.json's commands and its label in the dry run
    host: str | None = None  # the key of hosts: it runs on over ssh; None: this machine


@dataclass(frozen=True)
class TrialCommands:
    workload: WorkloadTool
    argv: list[str]
    timeout_s: float  # the workload is stopped and the trial failed after this long
    interference: list[InterferenceCommand]


def binary_key(tool: InterferenceTool) -> str:
    """Where the run keeps the tool's binary: its YAML key, or ``<key>@<host>`` for the
    one found on another host (run.json names its version so)."""
    host = tool.host
    return tool.key if host is None else f"{tool.key}@{host}"


def workload_timeout_s(expected_s: float | None, events_timeout_s: float) -> float:
    """Half again the expected time plus a minute; the fallback for runs of fixed work."""
    return expected_s * 1.5 + 60 if expected_s else events_timeout_s


def interference_limit_s(expected_s: float | None, events_timeout_s: float) -> int:
    """Only a safety net should dbrig die: longer than the workload's own deadline, so an
    overrunning workload is reported as such, not as "stress-ng exited early"."""
    return int((expected_s or events_timeout_s) * 2 + 120)


def trial_commands(
    scenario: Scenario,
    endpoint: Endpoint,
    workload_binary: Path,
    interference_binaries: dict[str, Path],
    events_timeout_s: float = DEFAULT_EVENTS_TIMEOUT_S,
) -> TrialCommands:
    """Everything a trial of a cell with this scenario will start, and its limits."""
    workload = workload_for(scenario.workload)
    argv = pinned_argv(
        workload.run_argv(endpoint, workload_binary, scenario.warmup), workload.client_cpus
    )
    expected = workload.expected_seconds(scenario.warmup)
    limit = interference_limit_s(expected, events_timeout_s)
    tools = interference_for(scenario.interference)
    interference = [
        InterferenceCommand(
            tool,
            tool.argv(interference_binaries[binary_key(tool)], limit),
            limit,
            "interference" if len(tools) == 1 else f"interference.{tool.key}",
            tool.host,
        )
        for tool in tools
    ]
    return TrialCommands(
        workload, argv, workload_timeout_s(expected, events_timeout_s), interference
    )
