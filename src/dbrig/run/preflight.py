"""Before anything starts: every binary found, every cell checked against this host.

A scenario that cannot run fails here, as one line, before a directory is
created or a server started.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dbrig import proc
from dbrig.endpoint import Endpoint
from dbrig.errors import ConfigError
from dbrig.host import probe
from dbrig.host import settings as host_settings
from dbrig.scenario import ExternalServer, ManagedServer, Plan
from dbrig.server.binary import ServerBinary, find_server
from dbrig.server.external import ExternalConnection
from dbrig.tools import stress_ng
from dbrig.tools.registry import workload_for


@dataclass(frozen=True)
class Toolbox:
    """Every binary a run needs, found and versioned before anything starts."""

    workload: Path
    workload_version: str | None
    stress_ng: Path | None
    stress_ng_version: str | None
    servers: dict[str, ServerBinary]


def preflight(plan: Plan, out: Path | None = None) -> Toolbox:
    """Find every binary and check every cell against this host; raises before anything runs."""
    tool = workload_for(plan.scenario.workload)
    binary = proc.which(tool.info.binaries, package=tool.info.package)
    cpu_count = os.cpu_count() or 1
    needs_stress = False
    for cell in plan.cells:
        try:
            # Building the command is where a driver refuses what its tool cannot do.
            workload = workload_for(cell.scenario.workload)
            spec = cell.scenario.server_specs[cell.server]
            workload.run_argv(
                display_endpoint(spec, workload.database), binary, cell.scenario.warmup
            )
            params = cell.scenario.interference.stress_ng
            if params is not None and params.active:
                stress_ng.validate_for_host(params, cpu_count)
                needs_stress = True
        except ConfigError as exc:  # the drivers know the key, not the file
            raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None
    stress = (
        proc.which(stress_ng.INFO.binaries, package=stress_ng.INFO.package)
        if needs_stress
        else None
    )
    servers: dict[str, ServerBinary] = {}
    for name in sorted({c.server for c in plan.cells}):
        spec = plan.scenario.server_specs[name]
        if isinstance(spec, ManagedServer):
            servers[name] = find_server(spec.basedir)
        else:
            _check_reachable(plan, name, spec)
    _check_system(plan, out or Path(plan.scenario.out))
    return Toolbox(
        workload=binary,
        workload_version=probe.tool_version(binary),
        stress_ng=stress,
        stress_ng_version=probe.tool_version(stress) if stress else None,
        servers=servers,
    )


def _check_reachable(plan: Plan, name: str, spec: ExternalServer) -> None:
    """An external server that does not answer (or refuses the password) stops the run here."""
    try:
        connection = ExternalConnection(name, spec)
        try:
            connection.check_reachable()
        finally:
            connection.close()
    except ConfigError as exc:
        raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None


def _check_system(plan: Plan, out: Path) -> None:
    wanted = [c.scenario.system for c in plan.cells]
    if any(s.active for s in wanted):
        try:
            host_settings.check(wanted, datadir_device(out))
        except ConfigError as exc:
            raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None


def datadir_device(where: Path) -> host_settings.BlockDevice | None:
    """The block device holding ``where`` (the run directory, so every managed datadir).

    Read-only: ``where`` may not exist yet, and preflight must create nothing.
    """
    name = probe.block_device_of(where)
    return host_settings.BlockDevice(name) if name else None


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
    return Endpoint(user="root", database=database, socket="<sandbox>/mysqld.sock")
