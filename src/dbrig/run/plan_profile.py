"""Refusals of CPU profiles (``sampling.profile.cpu``) when the plan is built.

perf records the server's process where it runs: here, or on its host through the
agent there (``remote/profiling.py``; preflight asks that host whether perf can
record, ``run/remote_servers.py``). A cell whose server is external (dbrig does not
know its process) or absent (a workload that needs none) cannot be profiled, and
nor can a cell profiled here on a machine where perf cannot record
(``host/perf.py``). The client too (``client: true``) only when it runs here, beside
a server of this machine, and after a warm-up (perf starts with the window and
follows the processes running then). Each is one line, so the run exits 2 before
anything exists rather than saving empty profiles.
"""

from __future__ import annotations

import os

from dbrig.errors import ConfigError
from dbrig.host.perf import INSTALL_HINT, NOT_INSTALLED, perf_problem
from dbrig.remote.server import LOCAL_AGENT_ENV
from dbrig.scenario import Cell, ManagedServer, Plan
from dbrig.tools.registry import workload_for

KEY = "sampling.profile.cpu.frequency"


def check_profiling(plan: Plan) -> None:
    """Raises ConfigError (one line) when a cell asks for a CPU profile dbrig cannot take."""
    asked = [cell for cell in plan.cells if cell.scenario.sampling.profile.cpu.frequency > 0]
    if not asked:
        return
    for cell in asked:
        if (why := _unprofilable(cell)) is not None:
            raise ConfigError(f"{plan.source}: {KEY}: {why}", hint=f"set {KEY} to 0 there")
    if not any(_server_host(cell) is None for cell in asked):
        return  # each server's host: preflight asks it (run/remote_servers.py)
    if (problem := perf_problem()) is not None:
        hint = INSTALL_HINT if problem == NOT_INSTALLED else f"or set {KEY} to 0"
        raise ConfigError(f"{plan.source}: {KEY}: {problem}", hint=hint)


def _server_host(cell: Cell) -> str | None:
    """The host of the cell's managed server, when it is on another one."""
    spec = cell.scenario.server_specs[cell.server]
    return spec.host if isinstance(spec, ManagedServer) else None


def _agent_of(cell: Cell) -> str | None:
    """Where the agent that profiles the cell's server runs (None: no agent, dbrig's
    own perf records it)."""
    if (host := _server_host(cell)) is not None:
        return f"on host '{host}'"
    if os.environ.get(LOCAL_AGENT_ENV) == "1" and isinstance(
        cell.scenario.server_specs[cell.server], ManagedServer
    ):
        return f"under a local agent ({LOCAL_AGENT_ENV}=1)"
    return None


def _unprofilable(cell: Cell) -> str | None:
    workload = workload_for(cell.scenario.workload)
    if not workload.needs_server:
        return f"{workload.title} needs no server: there is no server process to profile"
    if cell.scenario.sampling.profile.cpu.client:
        if (host := workload.client_host) is not None:
            return (
                f"client: the client runs on host '{host}': profiling it there is not "
                "done yet (set sampling.profile.cpu.client to false)"
            )
        if (agent := _agent_of(cell)) is not None:
            return (
                f"client: server '{cell.server}' runs {agent}, whose agent profiles it: "
                "profiling the client beside it is not done yet (set "
                "sampling.profile.cpu.client to false)"
            )
        if cell.scenario.warmup == 0:
            return (
                "client: perf starts when the measured window does and follows the "
                "processes running then; with warmup: 0 the client is not started yet "
                "(give the scenario a warm-up of 1 s or more)"
            )
    spec = cell.scenario.server_specs[cell.server]
    if spec.kind == "external":
        return (
            f"server '{cell.server}' is external: dbrig does not know its process, "
            "so it cannot profile it (profile a managed server)"
        )
    return None
