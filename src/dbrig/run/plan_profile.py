"""Refusals of CPU profiles (``sampling.profile.cpu``) when the plan is built.

perf records the server's process here: a cell whose server is external (dbrig does
not know its process), on another host (not done yet: it would go through the
agent) or absent (a workload that needs none) cannot be profiled, and nor can any
cell on a machine where perf cannot record (``host/perf.py``). The client too
(``client: true``) only when it runs here and after a warm-up (perf starts with the
window and follows the processes running then). Each is one line, so
the run exits 2 before anything exists rather than saving empty profiles.
"""

from __future__ import annotations

from dbrig.errors import ConfigError
from dbrig.host.perf import INSTALL_HINT, NOT_INSTALLED, perf_problem
from dbrig.scenario import Cell, Plan
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
    if (problem := perf_problem()) is not None:
        hint = INSTALL_HINT if problem == NOT_INSTALLED else f"or set {KEY} to 0"
        raise ConfigError(f"{plan.source}: {KEY}: {problem}", hint=hint)


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
    if spec.host is not None:
        return (
            f"server '{cell.server}' runs on host '{spec.host}': profiling a server on "
            "another host is not done yet (it will go through the agent there)"
        )
    return None
