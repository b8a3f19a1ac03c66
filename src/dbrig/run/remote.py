"""Clients on other hosts: the scenario's ``hosts:`` and ``workload.<tool>.host``.

The workload's measured run goes to the host the cell names, over that host's one
multiplexed ssh connection (:mod:`dbrig.remote.ssh`); the data set is prepared where
dbrig runs, as for a local client. Where the client connects:

- an external server: its ``host:port`` as the scenario gives it (the client host must
  reach it); the password travels in the tool's option file, written on the client host
  through stdin into a private folder the wrapper removes when the tool ends;
- a managed server (it listens on this machine's 127.0.0.1 only, root without a
  password): a port on the client host's 127.0.0.1 forwarded back through the ssh
  connection (``ssh -O forward -R``), so nothing listens on a network address.

The local ``ssh`` is the trial's workload process: stopping it, or losing the
connection, stops the remote tool's process group. Its CPU times come back from the
wrapper's ``times`` at the end of the output (``ssh.client_times``), which are cut off
before the tool's parser reads the output.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dbrig
from dbrig.endpoint import Endpoint
from dbrig.errors import ConfigError
from dbrig.remote.probe import PROBE_MODULE
from dbrig.remote.server import (
    BENCHMARK_USER,
    REMOTE_HOME_ROOT,
    server_address,
)
from dbrig.remote.ssh import (
    SSH_FAILED,
    RemoteSecret,
    SshError,
    SshHost,
    SshTarget,
    connection_error,
    new_secret,
)
from dbrig.run.commands import binary_key
from dbrig.scenario import Cell, ExternalServer, ManagedServer, Plan, Scenario
from dbrig.server.binary import ServerBinary
from dbrig.server.protocol import ClientRoute, Handle
from dbrig.tools.base import (
    InterferenceTool,
    ToolInfo,
    WorkloadTool,
    client_cpus,
    client_host,
    interference_host,
)
from dbrig.tools.registry import interference_for, workload_for

log = logging.getLogger(__name__)


def target(scenario: Scenario, name: str) -> SshTarget:
    spec = scenario.hosts[name]
    options = {key: str(value) for key, value in spec.options.items()}
    return SshTarget(name, spec.ssh, spec.port, options)


def cell_host(cell: Cell) -> str | None:
    """The host the cell's client runs on (a key of ``hosts:``), or None for this machine."""
    return client_host(workload_for(cell.scenario.workload))


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


@dataclass(frozen=True)
class RemoteRun:
    """What a trial needs to start its workload on a client host."""

    host: SshHost
    endpoint: Endpoint
    secret: RemoteSecret | None

    def saved_argv(self, argv: list[str]) -> list[str]:
        """trial.json's record of the command: where it ran, then what ran there."""
        return saved_argv(self.host, argv)


def saved_argv(host: SshHost, argv: list[str]) -> list[str]:
    """trial.json's record of a command run on ``host``: where it ran, then what ran there."""
    return ["ssh", host.target.destination, "--", *argv]


@contextmanager
def remote_run(host: SshHost, server: Handle, workload: WorkloadTool) -> Iterator[RemoteRun]:
    """Connected (reconnected after a loss) and with a way to the server, for one trial."""
    host.connect()
    route = server.capabilities.client_route
    if route is ClientRoute.DIRECT:
        yield _direct(host, server, workload)
        return
    if route is ClientRoute.NONE:
        yield RemoteRun(host, server.endpoint(workload.database), None)
        return
    port = server.port
    assert port is not None, "the server is started before its clients"
    forwarded = host.forward_to_local(port)
    try:
        endpoint = Endpoint("root", workload.database, host="127.0.0.1", port=forwarded)
        yield RemoteRun(host, endpoint, None)
    finally:
        if host.is_connected():
            host.cancel_forward(forwarded, port)


def _direct(host: SshHost, server: Handle, workload: WorkloadTool) -> RemoteRun:
    """A server reached at an address with an account: an external one at its
    ``host:port`` as the scenario gives it; a managed one on another host over TCP to
    127.0.0.1 when the client runs on the server's own host, else to its address."""
    credentials = server.credentials()
    assert credentials is not None, "a server reached directly logs in with an account"
    options = workload.client_options(credentials)
    secret = new_secret(f"{workload.info.name}.cnf", options) if options else None
    endpoint = Endpoint(
        user=credentials.user,
        database=workload.database,
        host=server.address_from(host.target.name),
        port=credentials.port if credentials.port is not None else server.port,
        client_options_file=Path(secret.path) if secret else None,
    )
    return RemoteRun(host, endpoint, secret)


def lost_connection(host: SshHost, returncode: int, output: str) -> str | None:
    """The trial's failure reason when ssh itself failed (exit 255 and the connection
    gone: a tool that exits 255 over a live connection is the tool's failure), else None."""
    if returncode != SSH_FAILED or host.is_connected():
        return None
    return f"{host.target.label}: the ssh connection was lost: {connection_error(output)}"


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
    pinned = {core for c in cells for core in client_cpus(workload_for(c.scenario.workload)) or ()}
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
            if interference_host(tool) is not None:
                used.setdefault(binary_key(tool), []).append(tool)
    return used


def check_interference_hosts(plan: Plan) -> dict[str, ClientTool]:
    """Every host that runs interference answers and has the tool and the cores it is
    pinned to; the tool's binary there, by :func:`binary_key`. One line naming the key and
    the host otherwise (the run has not started)."""
    found: dict[str, ClientTool] = {}
    for key, tools in sorted(interference_hosts(plan).items()):
        name = interference_host(tools[0])
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


# -- managed servers on other hosts ------------------------------------------------------------


def remote_servers(plan: Plan) -> dict[str, str]:
    """The cells' managed servers that run on another host: server name -> host name."""
    specs = plan.scenario.server_specs
    used = sorted({c.server for c in plan.cells})
    return {n: spec.host for n in used if isinstance(spec := specs[n], ManagedServer) and spec.host}


def server_key(plan: Plan, name: str, key: str) -> str:
    """``servers.<name>.<key>``, or ``server.<key>`` for the single ``server:`` block."""
    return f"servers.{name}.{key}" if plan.scenario.servers else f"server.{key}"


class SystemRefused(ConfigError):
    """The server's host cannot apply the cells' ``system`` settings."""


def on_host(message: str, label: str) -> str:
    """A settings message naming the host after its key: ``system.io_scheduler: 'x' is
    not offered ...`` -> ``system.io_scheduler: hosts.db1 (...): 'x' is not offered ...``."""
    key, sep, rest = message.partition(": ")
    if not sep or not key.startswith("system"):
        return f"system: {label}: {message}"
    return f"{key}: {label}: {rest}"


def system_blocks(plan: Plan, server: str) -> list[dict]:
    """The ``system`` blocks of the cells on ``server`` that set something, as JSON."""
    blocks = [c.scenario.system for c in plan.cells if c.server == server]
    return [b.model_dump(mode="json") for b in blocks if b.active]


def _check_one_device_owner_per_host(plan: Plan) -> None:
    """Each remote server's agent keeps the original disk settings of its own cells: two
    servers on one host would each take the other's values for the originals, and one's
    cells would run with the other's settings. Refused when their cells set any."""
    by_host: dict[str, list[str]] = {}
    for name, host_name in remote_servers(plan).items():
        by_host.setdefault(host_name, []).append(name)
    for host_name, names in sorted(by_host.items()):
        if len(names) < 2:
            continue
        for cell in plan.cells:
            settings = cell.scenario.system
            key = settings.device_setting
            if cell.server in names and key is not None:
                others = ", ".join(f"'{n}'" for n in names)
                raise ConfigError(
                    f"{plan.source}: system.{key}: servers {others} all run on "
                    f"hosts.{host_name}, where one disk setting would be shared by their "
                    "agents",
                    hint="put the servers on different hosts, or leave io_scheduler and "
                    "read_ahead_kb out",
                )


def check_server_hosts(plan: Plan) -> dict[str, ServerBinary]:
    """Every managed server's host answers over ssh and has python3, this dbrig's version
    and the server binaries (what the agent will find there), and can apply the ``system``
    settings of the server's cells; each server's binary, by server name. One line naming
    the key and the host otherwise (nothing has started)."""
    _check_one_device_owner_per_host(plan)
    found: dict[str, ServerBinary] = {}
    for name, host_name in remote_servers(plan).items():
        spec = plan.scenario.server_specs[name]
        assert isinstance(spec, ManagedServer)
        host_spec = plan.scenario.hosts[host_name]
        host = SshHost(target(plan.scenario, host_name))
        system = system_blocks(plan, name)
        try:
            host.check_reachable()
            found[name] = probe_server_host(host, host_spec.python, spec.basedir, system)
        except SystemRefused as exc:
            raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None
        except SshError as exc:
            key = server_key(plan, name, "host")
            raise ConfigError(f"{plan.source}: {key}: {exc.message}", hint=exc.hint) from None
        except ConfigError as exc:
            key = server_key(plan, name, "host")
            raise ConfigError(f"{plan.source}: {key}: {exc.message}", hint=exc.hint) from None
        finally:
            host.close()
    return found


def probe_server_host(
    host: SshHost, python: str, basedir: Path | None, system: list[dict] | None = None
) -> ServerBinary:
    """``python3 -m dbrig.remote.probe`` there: dbrig's version and the server; with
    ``system`` (blocks that set something), whether that host can apply them under
    ``~/.dbrig`` (:class:`SystemRefused` otherwise)."""
    label = host.target.label
    argv = [*shlex.split(python), "-m", PROBE_MODULE, *([str(basedir)] if basedir else [])]
    if system:
        argv += ["--system", json.dumps(system), "--home", REMOTE_HOME_ROOT]
    code, output = host.run(argv, wrap=False)
    install = f"pip install dbrig=={dbrig.__version__} there"
    if code == SSH_FAILED:
        raise SshError(f"{label}: lost the connection: {connection_error(output)}")
    if code == 127:
        raise ConfigError(
            f"{label}: '{python}' not found there",
            hint=f"install python3 and dbrig {dbrig.__version__} there, or set "
            f"hosts.{host.name}.python to the Python that has it",
        )
    if "No module named 'dbrig'" in output:
        raise ConfigError(f"{label}: dbrig is not installed for '{python}' there", hint=install)
    if f"No module named {PROBE_MODULE}" in output:
        raise ConfigError(
            f"{label}: the dbrig there is older than {dbrig.__version__} (it has no "
            f"{PROBE_MODULE}): the agent must be the same version",
            hint=install,
        )
    answer = _last_json_line(output)
    if answer is None:
        raise ConfigError(
            f"{label}: '{python} -m {PROBE_MODULE}' failed: {connection_error(output)}"
        )
    if answer.get("version") != dbrig.__version__:
        raise ConfigError(
            f"{label}: dbrig {answer.get('version')} there, {dbrig.__version__} here "
            "(the agent must be the same version)",
            hint=install,
        )
    if "error" in answer:
        raise ConfigError(f"{label}: {answer['error']}", hint=answer.get("hint"))
    refused = answer.get("system", {}).get("error")
    if refused:
        raise SystemRefused(on_host(refused, label), hint=answer["system"].get("hint"))
    server = answer["server"]
    return ServerBinary(
        mysqld=Path(server["mysqld"]),
        flavor=server["flavor"],
        version=server["version"],
        version_line=server["version_line"],
        install_db=Path(server["install_db"]) if server["install_db"] else None,
        basedir=Path(server["basedir"]) if server["basedir"] else None,
    )


def _last_json_line(output: str) -> dict | None:
    for line in reversed(output.strip().splitlines()):
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    return None
