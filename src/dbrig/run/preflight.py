"""Before anything starts: every binary found, every cell checked against this host.

A scenario that cannot run fails here, as one line, before a directory is
created or a server started.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from dbrig import proc
from dbrig.endpoint import Endpoint, is_loopback
from dbrig.errors import ConfigError, ToolMissing
from dbrig.host import probe
from dbrig.host import settings as host_settings
from dbrig.remote.server import BENCHMARK_USER
from dbrig.run.commands import binary_key, trial_commands
from dbrig.run.remote import ClientTool, check_client_hosts, check_interference_hosts
from dbrig.run.remote_servers import check_server_hosts, remote_servers
from dbrig.run.workdir import check_work_parent
from dbrig.scenario import Cell, ExternalServer, ManagedServer, Plan
from dbrig.server.binary import ServerBinary, find_server
from dbrig.server.external import ExternalConnection
from dbrig.tools.base import (
    SizedDataSet,
    ToolInfo,
    WorkloadTool,
    client_cpus,
    client_host,
    interference_host,
)
from dbrig.tools.registry import INTERFERENCE_TOOLS, interference_for, workload_for


@dataclass(frozen=True)
class Toolbox:
    """Every binary a run needs, found and versioned before anything starts."""

    workload: Path
    workload_version: str | None
    # Only the tools some cell uses, by binary_key: the YAML key, ``<key>@<host>`` for the
    # binary on another host (``interference.<tool>.host``).
    interference: dict[str, Path]
    interference_versions: dict[str, str | None]
    servers: dict[str, ServerBinary]
    # The workload's binary on each client host (``workload.<tool>.host``), by name.
    remote_workload: dict[str, ClientTool] = field(default_factory=dict)

    def versions(self) -> dict[str, str | None]:
        """For run.json: the workload's, every interference tool's (None when unused) and
        its version on each host it runs on, each server's version line, and the
        workload's on each client host."""
        return {
            "workload": self.workload_version,
            **{key: self.interference_versions.get(key) for key in INTERFERENCE_TOOLS},
            **{k: v for k, v in self.interference_versions.items() if "@" in k},
            **{f"server:{n}": b.version_line for n, b in self.servers.items()},
            **{f"workload@{n}": t.version for n, t in self.remote_workload.items()},
        }

    @property
    def uses_other_hosts(self) -> bool:
        """A client or an interference tool runs on another host (over ssh)."""
        return bool(self.remote_workload) or any("@" in k for k in self.interference)


def preflight(plan: Plan, out: Path | None = None) -> Toolbox:
    """Find every binary and check every cell against this host; raises before anything runs."""
    workload, interference = find_binaries(plan, strict=True)
    servers = check_host(plan, out, workload, interference, strict=True)
    remote = check_client_hosts(plan)
    elsewhere = check_interference_hosts(plan)
    versions = {k: probe.tool_version(p) for k, p in interference.items() if k not in elsewhere}
    versions.update({k: tool.version for k, tool in elsewhere.items()})
    return Toolbox(
        workload=workload,
        workload_version=probe.tool_version(workload),
        interference={**interference, **{k: Path(t.path) for k, t in elsewhere.items()}},
        interference_versions=versions,
        servers=servers,
        remote_workload=remote,
    )


def check_host(
    plan: Plan,
    out: Path | None,
    workload: Path,
    interference: dict[str, Path],
    *,
    strict: bool,
) -> dict[str, ServerBinary]:
    """Every cell against this host: cores, commands, server binaries, external servers,
    OS settings. ``--dry-run`` checks this too (``strict=False``: a tool or server binary
    that is not installed at all is named, not refused); it starts no server or workload."""
    try:
        cpu_count = os.cpu_count() or 1
        for cell in plan.cells:
            for tool in interference_for(cell.scenario.interference):
                if interference_host(tool) is None:  # another host's cores: preflight's
                    tool.check_host(cpu_count)
            tool = workload_for(cell.scenario.workload)
            if client_host(tool) is None:  # a remote client's cores: check_client_hosts
                _check_client_cores(tool, cpu_count)
            # Building the commands is where a driver refuses what its tool cannot do.
            trial_commands(cell.scenario, cell_endpoint(plan, cell), workload, interference)
    except ConfigError as exc:  # the drivers know the key, not the file
        raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None
    servers: dict[str, ServerBinary] = {}
    needs_server = workload_for(plan.scenario.workload).needs_server
    if not needs_server:
        _check_work_directories(plan, out or Path(plan.scenario.out))
    remote = remote_servers(plan) if needs_server else {}
    _check_workspace(plan, remote)
    for name in sorted({c.server for c in plan.cells} if needs_server else ()):
        spec = plan.scenario.server_specs[name]
        if name in remote:
            continue  # its host's binaries: check_server_hosts, below
        if isinstance(spec, ManagedServer):
            binary = _server_binary(plan, spec, strict)
            if binary is not None:
                servers[name] = binary
        else:
            _check_reachable(plan, name, spec)
    _check_system(plan, out or Path(plan.scenario.out))
    _check_disk(plan, out or Path(plan.scenario.out))
    _check_series_disk(plan, out or Path(plan.scenario.out))
    if remote:
        servers.update(check_server_hosts(plan))
    return servers


def _check_workspace(plan: Plan, remote: dict[str, str]) -> None:
    """A clone workspace holds datadirs of this machine: refused when every managed
    server runs on another host (it would be made, and hold nothing)."""
    if plan.scenario.workspace.image is None or not remote:
        return
    specs = plan.scenario.server_specs
    local = [n for n in {c.server for c in plan.cells} if n not in remote]
    if not any(isinstance(specs[n], ManagedServer) for n in local):
        name, host = next(iter(remote.items()))
        raise ConfigError(
            f"{plan.source}: workspace.image: the clone workspace holds datadirs of this "
            f"machine, and server '{name}' runs on hosts.{host}",
            hint="remove workspace: (a remote server keeps its data in ~/.dbrig there)",
        )


def _check_client_cores(workload: WorkloadTool, cpu_count: int) -> None:
    for core in client_cpus(workload) or ():
        if core >= cpu_count:
            raise ConfigError(
                f"workload.{workload.key}.cpus: core {core} does not exist "
                f"(this machine has {cpu_count} cores: 0-{cpu_count - 1})"
            )


def _server_binary(plan: Plan, spec: ManagedServer, strict: bool) -> ServerBinary | None:
    try:
        return find_server(spec.basedir)
    except ToolMissing as exc:
        if not strict and spec.basedir is None:
            return None  # the dry run of a machine without the server installed
        raise ToolMissing(f"{plan.source}: {exc.message}", hint=exc.hint) from None


def find_binaries(plan: Plan, *, strict: bool) -> tuple[Path, dict[str, Path]]:
    """The workload's binary and each used interference tool's, by :func:`binary_key`.

    ``strict=False`` (the dry run) names a tool that is not installed by its first
    binary name instead of refusing.
    """
    workload = workload_for(plan.scenario.workload)
    used = {binary_key(t): t for c in plan.cells for t in interference_for(c.scenario.interference)}
    binaries = {
        # on another host: its name until preflight finds it there (check_interference_hosts)
        key: _binary(tool.info, strict)
        if interference_host(tool) is None
        else Path(tool.info.binaries[0])
        for key, tool in used.items()
    }
    return _binary(workload.info, strict), binaries


def _binary(info: ToolInfo, strict: bool) -> Path:
    try:
        return proc.which(info.binaries, package=info.package)
    except ToolMissing:
        if strict:
            raise
        return Path(info.binaries[0])


def cell_endpoint(plan: Plan, cell: Cell) -> Endpoint:
    """Where a cell's workload would connect, with placeholders for what is not known yet."""
    workload = workload_for(cell.scenario.workload)
    return display_endpoint(plan.scenario.server_specs[cell.server], workload.database)


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


def _check_work_directories(plan: Plan, out: Path) -> None:
    """A workload with no server writes into its work directory: writable, with room."""
    needed: dict[Path, dict[tuple, int]] = {}  # parent -> data set key -> bytes
    for cell in plan.cells:
        workload = workload_for(cell.scenario.workload)
        key = f"workload.{workload.key}.directory" if workload.work_root else "out"
        # The run directory is made inside ``out``; the work folder goes beside it.
        parent = Path(workload.work_root) if workload.work_root else out
        try:
            check_work_parent(parent, 0, key)
        except ConfigError as exc:
            raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None
        needed.setdefault(parent, {})[workload.data_set_key()] = workload.space_needed()
    for parent, sets in needed.items():
        try:  # every data set stays until the run ends
            check_work_parent(parent, sum(sets.values()), "workload.sysbench.file_total_size")
        except ConfigError as exc:
            raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None


def _check_system(plan: Plan, out: Path) -> None:
    """The settings of the cells whose data is on this machine (a managed server on
    another host has its own checked there: ``check_server_hosts``)."""
    _check_external_system(plan)
    workload = workload_for(plan.scenario.workload)
    remote = remote_servers(plan) if workload.needs_server else {}
    wanted = [c.scenario.system for c in plan.cells if c.server not in remote]
    if not workload.needs_server and workload.work_root:
        out = Path(workload.work_root)
    if any(s.active for s in wanted):
        try:
            host_settings.check(wanted, datadir_device(out))
        except ConfigError as exc:
            raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None


def _check_external_system(plan: Plan) -> None:
    """``system`` settings an external server's cell cannot have: dbrig does not know the
    disk under its datadir, and only drops this machine's page cache."""
    for cell in plan.cells:
        spec = plan.scenario.server_specs.get(cell.server)
        settings = cell.scenario.system
        if not isinstance(spec, ExternalServer) or not settings.active:
            continue
        device_key = settings.device_setting
        if device_key is not None:
            raise ConfigError(
                f"{plan.source}: system.{device_key}: server '{cell.server}' is external: "
                "dbrig does not know the disk under its datadir",
                hint="set it on the server's host yourself, or use a managed server "
                "(server.host: for one on another host)",
            )
        on_this_machine = spec.socket is not None or is_loopback(spec.host)
        if settings.drop_caches and not on_this_machine:
            raise ConfigError(
                f"{plan.source}: system.drop_caches: server '{cell.server}' is external on "
                f"{spec.host}: dropping this machine's page cache does nothing for it",
                hint="drop its host's caches yourself, or use a managed server there "
                "(server.host:)",
            )


def managed_data_bytes(plan: Plan) -> int:
    """Bytes the managed servers' data sets need on the run's disk: one snapshot per data
    set plus the working datadir of the largest (0 when the tool cannot say)."""
    sizes: dict[tuple, int] = {}
    for cell in plan.cells:
        workload = workload_for(cell.scenario.workload)
        spec = plan.scenario.server_specs[cell.server]
        local = isinstance(spec, ManagedServer) and spec.host is None
        if local and isinstance(workload, SizedDataSet):
            sizes[(cell.server, workload.data_set_key())] = workload.data_set_bytes()
    return sum(sizes.values()) + max(sizes.values(), default=0)


def _check_disk(plan: Plan, out: Path) -> None:
    needed = managed_data_bytes(plan)
    if not needed:
        return
    where = next(p for p in (out.resolve(), *out.resolve().parents) if p.exists())
    free = shutil.disk_usage(where).free
    if needed > free:
        workload = workload_for(plan.scenario.workload)
        assert isinstance(workload, SizedDataSet)
        raise ConfigError(
            f"{plan.source}: workload.{workload.key}.{workload.size_key}: the data sets need "
            f"about {needed / 2**30:.1f} GiB (each snapshot and a working copy) but only "
            f"{free / 2**30:.1f} GiB are free under {where}",
            hint="use fewer warehouses or a run directory on a bigger disk",
        )


# What one row adds to a trial's folder, measured at minute 55 of a MariaDB soak and rounded
# up (docs/reliability.md, Soak): about 1.2 KB a second on 2 cores, 4.3 MB an hour.
TOOL_BYTES_PER_S = 250  # the raw interval line (~150 B) and its intervals.csv row (~95 B)
SAMPLE_BYTES = 500 + 80 + 90 + 2 * 55  # status.csv, memory.csv, disk.csv, sampler.csv rows
CORE_SAMPLE_BYTES = 80  # cpu.csv: one row per core
ROLE_SAMPLE_BYTES = 75  # procs.csv: one row per process role


def series_bytes(plan: Plan, cpu_count: int) -> int:
    """Bytes the per-interval files of every trial will take: the tool's series and the
    samplers' rows over each trial's expected time (0 for runs limited by events only)."""
    total = 0.0
    for cell in plan.cells:
        scenario = cell.scenario
        seconds = workload_for(scenario.workload).expected_seconds(scenario.warmup)
        if not seconds:
            continue
        per_s = float(TOOL_BYTES_PER_S)
        if scenario.sampling.enabled:
            roles = 2 + len(interference_for(scenario.interference))
            devices = len(scenario.sampling.devices or ()) or 1
            row = SAMPLE_BYTES + CORE_SAMPLE_BYTES * cpu_count + ROLE_SAMPLE_BYTES * roles
            row += 90 * (devices - 1)
            per_s += row / scenario.sampling.interval
        total += seconds * per_s * scenario.repeat
    return int(total)


def _check_series_disk(plan: Plan, out: Path) -> None:
    """A soak's samples are kept whole: refuse one whose files would not fit the free disk."""
    needed = series_bytes(plan, os.cpu_count() or 1)
    if not needed:
        return
    where = next(p for p in (out.resolve(), *out.resolve().parents) if p.exists())
    free = shutil.disk_usage(where).free - managed_data_bytes(plan)
    if needed <= free:
        return
    workload = workload_for(plan.scenario.workload)
    timed = "time" in type(workload.params).model_fields
    key = f"workload.{workload.key}.time" if timed else "sampling.interval"
    raise ConfigError(
        f"{plan.source}: {key}: the per-interval data of {_trials(len(plan.trials))} "
        f"(samples every {plan.scenario.sampling.interval:g} s) needs about "
        f"{_gib(needed)} but only {_gib(max(free, 0))} are free under {where}",
        hint="shorten the run, sample less often (sampling.interval), or use --out on a "
        "bigger disk",
    )


def _trials(count: int) -> str:
    return f"{count} trial" if count == 1 else f"{count} trials"


def _gib(size: float) -> str:
    return f"{size / 2**40:.1f} TiB" if size >= 2**40 else f"{size / 2**30:.1f} GiB"


def datadir_device(where: Path) -> host_settings.BlockDevice | None:
    """The block device holding ``where`` (the run directory, so every managed datadir).

    Read-only: ``where`` may not exist yet, and preflight must create nothing.
    """
    return host_settings.device_under(where)


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
