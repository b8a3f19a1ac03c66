"""Refusals of server internals (``sampling.internals``) when the plan is built.

performance_schema's wait events and digests exist only on a server started with
``performance_schema=ON`` (MariaDB's default is OFF), a setting of the cell's server and
so a factor like any other. A managed cell that asks for internals without it is
refused in one line, before anything exists, rather than saving waits.csv with
nothing in it. An external server's setting is not known before the run: there the
trial reads INNODB_METRICS alone and its warnings say so (sampling/internals.py). A
workload that needs no server has no internals to read.
"""

from __future__ import annotations

from dbrig.errors import ConfigError
from dbrig.scenario import Cell, Plan
from dbrig.tools.registry import workload_for

KEY = "sampling.internals.enabled"
_ON = {"1", "on", "true", "yes"}


def check_internals(plan: Plan) -> None:
    """Raises ConfigError (one line) when a cell asks for internals it cannot get."""
    for cell in plan.cells:
        if cell.scenario.sampling.internals.enabled and (why := _unreadable(cell)) is not None:
            raise ConfigError(f"{plan.source}: {KEY}: {why}", hint=_hint(cell))


def performance_schema_on(config: dict[str, object]) -> bool:
    """Whether a managed server's settings turn performance_schema on (YAML's ON is True)."""
    for key, value in config.items():
        if key.replace("-", "_").lower() == "performance_schema":
            return str(value).strip().lower() in _ON
    return False


def _unreadable(cell: Cell) -> str | None:
    workload = workload_for(cell.scenario.workload)
    if not workload.needs_server:
        return f"{workload.title} needs no server: there are no server internals to read"
    spec = cell.scenario.server_specs[cell.server]
    if spec.kind == "managed" and not performance_schema_on(dict(spec.config)):
        return (
            f"server '{cell.server}' runs with performance_schema OFF (MariaDB's default), "
            "so it has no wait events or statement digests"
        )
    return None


def _hint(cell: Cell) -> str:
    spec = cell.scenario.server_specs[cell.server]
    if spec.kind == "managed":
        return (
            "set server.config.performance_schema: ON (servers.<name>.config with servers:), "
            f"or {KEY}: false there"
        )
    return f"set {KEY} to false there"
