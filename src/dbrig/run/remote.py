"""Other hosts before and beside the run: the scenario's ``hosts:`` as ssh targets, the
run's connections to client hosts (:class:`RemoteClients`), preflight's checks of the
client and interference hosts (they answer, have the tool and the cores it is pinned
to), and the dry run's picture of a remote client.

A client's run there is ``run/ssh_client.py``; a managed server's host is checked by
``run/remote_servers.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbrig.endpoint import Endpoint
from dbrig.errors import ConfigError
from dbrig.remote.server import BENCHMARK_USER, server_address
from dbrig.remote.ssh import SshError, SshHost, SshTarget
from dbrig.run.commands import binary_key
from dbrig.scenario import Cell, ExternalServer, ManagedServer, Plan, Scenario
from dbrig.tools.base import (
    InterferenceTool,
    ToolInfo,
    WorkloadTool,
)
from dbrig.tools.registry import interference_for, workload_for


def target(scenario: Scenario, name: str) -> SshTarget:
    spec = scenario.hosts[name]
    options = {key: str(value) for key, value in spec.options.items()}
    return SshTarget(name, spec.ssh, spec.port, options)


def cell_host(cell: Cell) -> str | None:
    """The host the cell's client runs on (a key of ``hosts:``), or None for this machine."""
    return workload_for(cell.scenario.workload).client_host


class RemoteClients:
    """The run's ssh connections, one per client host, opened when first used."""

    def __init__(self, scenario: Scenario, tools: dict[str, ClientTool]) -> None:
        self.scenario = scenario
        self.binaries = {name: tool.path for name, tool in tools.items()}
        self.hosts: dict[str, SshHost] = {}

    def host(self, name: str) -> SshHost:
        if name not in self.hosts:
            self.hosts[name] = SshHost(target(self.scenario, name))
        return self.hosts[name]

    def close(self) -> None:
        for host in self.hosts.values():
            host.close()


def display_endpoint(plan: Plan, cell: Cell) -> Endpoint:
    """Where a remote cell's client would connect, for --dry-run (placeholders, no secret)."""
    workload = workload_for(cell.scenario.workload)
    spec = plan.scenario.server_specs[cell.server]
    if isinstance(spec, ExternalServer):
        secret = spec.password_env or spec.defaults_file
        return Endpoint(
            user=spec.user,
            database=workload.database,
            host=spec.host,
            port=spec.port,
            client_options_file=Path("<0600 file on the client host>") if secret else None,
        )
    if spec.host is not None:
        same_host = spec.host == cell_host(cell)
        address = (
            "127.0.0.1" if same_host else server_address(spec.host, plan.scenario.hosts[spec.host])
        )
        return Endpoint(
            user=BENCHMARK_USER,
            database=workload.database,
            host=address,
            port=0,
            client_options_file=Path("<0600 file on the client host>"),
        )
    return Endpoint("root", workload.database, host="127.0.0.1", port=0)


def display_run(plan: Plan, cell: Cell, argv: list[str]) -> str:
    """The dry run's line for a remote cell's run (port 0: the forwarded port, chosen then)."""
    name = cell_host(cell)
    assert name is not None
    spec = plan.scenario.server_specs[cell.server]
    port = "<the server's>" if isinstance(spec, ManagedServer) and spec.host else "<forwarded>"
    text = " ".join(argv).replace("--mysql-port=0", f"--mysql-port={port}")
    return f"ssh {plan.scenario.hosts[name].ssh} -- {text}"


# -- preflight -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientTool:
    """The workload's binary on a client host, found by preflight."""

    path: str
    version: str | None  # its version line, for run.json (``workload@<host>``)


def check_client_hosts(plan: Plan) -> dict[str, ClientTool]:
    """Every client host answers, has the workload's binary and the cores it is pinned to;
    the binary on each, by host name. One line naming the host and its key otherwise (the
    run has not started)."""
    used: dict[str, list[Cell]] = {}
    for cell in plan.cells:
        if (name := cell_host(cell)) is not None:
            used.setdefault(name, []).append(cell)
    binaries: dict[str, ClientTool] = {}
    for name, cells in sorted(used.items()):
        _check_reachable_servers(plan, name, cells)
        binaries[name] = _checked_on(plan, name, _check_one_host, cells)
    return binaries


def _checked_on(
    plan: Plan, name: str, check: Callable[[SshHost, list[Any]], ClientTool], what: list[Any]
) -> ClientTool:
    """``check(host, what)`` over a connection of its own to host ``name``, closed after;
    its refusal as one line naming the scenario file."""
    host = SshHost(target(plan.scenario, name))
    try:
        return check(host, what)
    except (SshError, ConfigError) as exc:
        raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None
    finally:
        host.close()


def _check_what_runs_there(workload: WorkloadTool) -> None:
    """A remote client runs the tool's measured run only: files of this machine it would
    read, or a work folder prepared here, are not there."""
    key = f"workload.{workload.key}.host"
    if workload.inputs():
        names = ", ".join(str(p) for p in workload.inputs().values())
        raise ConfigError(
            f"{key}: the workload reads {names}, a file of this machine; a client on "
            "another host cannot run it",
            hint="run dbrig on that host, or leave host out",
        )
    if not workload.needs_server and workload.space_needed() > 0:
        raise ConfigError(
            f"{key}: {workload.title} works in files prepared where dbrig runs; "
            "a client on another host cannot",
            hint="run dbrig on that host, or leave host out",
        )


def _check_one_host(host: SshHost, cells: list[Cell]) -> ClientTool:
    workload = workload_for(cells[0].scenario.workload)
    for cell in cells:
        _check_what_runs_there(workload_for(cell.scenario.workload))
    host.check_reachable()
    found = _tool_there(host, workload.info, f"workload.{workload.key}.host")
    pinned = {core for c in cells for core in workload_for(c.scenario.workload).client_cpus or ()}
    if pinned:
        if host.which(["taskset"]) is None:
            raise ConfigError(
                f"workload.{workload.key}.cpus: {host.target.label} has no taskset",
                hint="install util-linux there, or leave cpus out for a remote client",
            )
        _check_cores_there(host, pinned, f"workload.{workload.key}.cpus")
    return found


def _check_cores_there(host: SshHost, pinned: set[int], key: str) -> int:
    """The host's core count, every pinned core among them; one line naming ``key`` when
    a core is missing or the count cannot be read (a pin to a core that may not exist is
    not run on trust)."""
    count = host.cpu_count()
    if count is None:
        raise ConfigError(
            f"{key}: cannot read the core count of {host.target.label} "
            "(getconf _NPROCESSORS_ONLN failed there)",
            hint="install libc-bin there, or leave the cores out",
        )
    if max(pinned) >= count:
        raise ConfigError(
            f"{key}: core {max(pinned)} does not exist on {host.target.label} "
            f"({count} cores: 0-{count - 1})"
        )
    return count


def _tool_there(host: SshHost, info: ToolInfo, key: str) -> ClientTool:
    """The tool's binary on ``host`` and its version line; one line naming ``key`` (the
    scenario key that sent it there) when it is not installed there."""
    binary = host.which(info.binaries)
    if binary is None:
        raise ConfigError(
            f"{key}: {host.target.label}: {' or '.join(info.binaries)} not found there",
            hint=f"install the Debian package '{info.package}' on {host.target.destination}",
        )
    code, output = host.run([binary, *info.version_args], wrap=False)
    lines = output.strip().splitlines()
    return ClientTool(binary, lines[0] if code == 0 and lines else None)


def interference_hosts(plan: Plan) -> dict[str, list[InterferenceTool]]:
    """The interference tools of the cells that run on another host, by :func:`binary_key`
    (``stress-ng@db1``): one entry per tool and host, with every cell's block."""
    used: dict[str, list[InterferenceTool]] = {}
    for cell in plan.cells:
        for tool in interference_for(cell.scenario.interference):
            if tool.host is not None:
                used.setdefault(binary_key(tool), []).append(tool)
    return used


def check_interference_hosts(plan: Plan) -> dict[str, ClientTool]:
    """Every host that runs interference answers and has the tool and the cores it is
    pinned to; the tool's binary there, by :func:`binary_key`. One line naming the key and
    the host otherwise (the run has not started)."""
    found: dict[str, ClientTool] = {}
    for key, tools in sorted(interference_hosts(plan).items()):
        name = tools[0].host
        assert name is not None
        found[key] = _checked_on(plan, name, _check_interference_host, tools)
    return found


def _check_interference_host(host: SshHost, tools: list[InterferenceTool]) -> ClientTool:
    key = f"interference.{tools[0].key}"
    try:
        host.check_reachable()
        found = _tool_there(host, tools[0].info, f"{key}.host")
    except SshError as exc:
        raise SshError(f"{key}.host: {exc.message}", hint=exc.hint) from None
    pinned = {core for tool in tools for core in tool.pinned_cores() or ()}
    if pinned:
        count = _check_cores_there(host, pinned, f"{key}.taskset")
        for tool in tools:  # the rest of its checks: cores listed twice, workers sharing one
            tool.check_host(count)
    return found


def _check_reachable_servers(plan: Plan, name: str, cells: list[Cell]) -> None:
    for cell in cells:
        spec = plan.scenario.server_specs.get(cell.server)
        if isinstance(spec, ExternalServer) and spec.socket:
            raise ConfigError(
                f"{plan.source}: servers.{cell.server}.socket: a client on hosts.{name} cannot "
                "reach a unix socket of this machine",
                hint="give the server's host and port instead",
            )
