"""What one cell needs, from its own scenario (never the base block): a server or
none, where its data lives on this machine, and where its client would connect
(with placeholders for what a server's start decides). Read by preflight's checks
and by the plan (``plan.py``)."""

from __future__ import annotations

from pathlib import Path

from dbrig.endpoint import Endpoint, no_server_endpoint
from dbrig.remote.server import BENCHMARK_USER
from dbrig.scenario import Cell, ExternalServer, ManagedServer, Plan
from dbrig.tools.registry import workload_for


def cell_needs_server(cell: Cell) -> bool:
    """Whether the cell's own workload (not the scenario's base block) needs a server."""
    return workload_for(cell.scenario.workload).needs_server


def cell_data_parent(cell: Cell, out: Path) -> Path:
    """Where a cell's data lives on this machine: the run's folder ``out`` (its datadirs
    go in the run directory made there), or for a workload with no server the folder its
    work folder goes in (the tool's ``work_root``, else ``out``)."""
    workload = workload_for(cell.scenario.workload)
    if not workload.needs_server and workload.work_root:
        return Path(workload.work_root)
    return out


def cell_endpoint(plan: Plan, cell: Cell) -> Endpoint:
    """Where a cell's workload would connect, with placeholders for what is not known yet."""
    workload = workload_for(cell.scenario.workload)
    if not workload.needs_server:
        return no_server_endpoint("<work folder>", workload.database)
    return display_endpoint(plan.scenario.server_specs[cell.server], workload.database)


def display_endpoint(spec: ManagedServer | ExternalServer, database: str) -> Endpoint:
    """Where a cell's tool would connect, for checks and --dry-run (no secrets, no sockets)."""
    if isinstance(spec, ExternalServer):
        secret = spec.password_env or spec.defaults_file
        return Endpoint(
            user=spec.user,
            database=database,
            socket=spec.socket,
            host=None if spec.socket else spec.host,
            port=None if spec.socket else spec.port,
            client_options_file=Path("<0600 option file>") if secret else None,
        )
    if spec.host is not None:  # the address and port are known when the run starts it
        return Endpoint(
            user=BENCHMARK_USER,
            database=database,
            host=f"<hosts.{spec.host} address>",
            port=spec.port or 0,
            client_options_file=Path("<0600 option file>"),
        )
    return Endpoint(user="root", database=database, socket="<sandbox>/mysqld.sock")
