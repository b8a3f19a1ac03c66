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
from dbrig.endpoint import is_loopback
from dbrig.errors import ConfigError, ToolMissing
from dbrig.host import probe
from dbrig.host import settings as host_settings
from dbrig.run.commands import binary_key, trial_commands
from dbrig.run.plan_cells import cell_data_parent, cell_endpoint, cell_needs_server
from dbrig.run.remote import ClientTool, check_client_hosts, check_interference_hosts
from dbrig.run.remote_servers import check_server_hosts, remote_servers, server_key
from dbrig.run.workdir import check_work_parent
from dbrig.scenario import Cell, ExternalServer, ManagedServer, Plan
from dbrig.server.binary import ServerBinary, find_server
from dbrig.server.external import ExternalConnection
from dbrig.tools.base import (
    SizedDataSet,
    ToolInfo,
    WorkloadTool,
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


def preflight(plan: Plan, out: Path | None = None, *, strict: bool = True) -> Toolbox:
    """Find every binary and check every cell against this host and the other hosts it
    uses; raises before anything runs. ``strict=False`` is the dry run's: the same checks,
    but a tool or server binary not installed here at all is named, not refused, and no
    version is asked."""
    workload, interference = find_binaries(plan, strict=strict)
    servers = check_host(plan, out, workload, interference, strict=strict)
    remote = check_client_hosts(plan)
    elsewhere = check_interference_hosts(plan)
    versions: dict[str, str | None] = {}
    if strict:
        versions = {k: probe.tool_version(p) for k, p in interference.items() if k not in elsewhere}
        versions.update({k: tool.version for k, tool in elsewhere.items()})
    return Toolbox(
        workload=workload,
        workload_version=probe.tool_version(workload) if strict else None,
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
                if tool.host is None:  # another host's cores: preflight's
                    tool.check_host(cpu_count)
            tool = workload_for(cell.scenario.workload)
            if tool.client_host is None:  # a remote client's cores: check_client_hosts
                _check_client_cores(tool, cpu_count)
            # Building the commands is where a driver refuses what its tool cannot do.
            trial_commands(cell.scenario, cell_endpoint(plan, cell), workload, interference)
    except ConfigError as exc:  # the drivers know the key, not the file
        raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None
    servers: dict[str, ServerBinary] = {}
    needs_server = any(cell_needs_server(c) for c in plan.cells)
    if not all(cell_needs_server(c) for c in plan.cells):
        _check_work_directories(plan, out or Path(plan.scenario.out))
    remote = remote_servers(plan) if needs_server else {}
    _check_workspace(plan, remote)
    for name in sorted({c.server for c in plan.cells if cell_needs_server(c)}):
        spec = plan.scenario.server_specs[name]
        if name in remote:
            continue  # its host's binaries: check_server_hosts, below
        if isinstance(spec, ManagedServer):
            binary = _server_binary(plan, spec, strict)
            if binary is not None:
                servers[name] = binary
        else:
            _check_reachable(plan, name, spec, [c for c in plan.cells if c.server == name])
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
    for core in workload.client_cpus or ():
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
        key: _binary(tool.info, strict) if tool.host is None else Path(tool.info.binaries[0])
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


def _check_reachable(plan: Plan, name: str, spec: ExternalServer, cells: list[Cell]) -> None:
    """An external server that does not answer (or refuses the password), or a password
    its cells' tools cannot be given, stops the run here."""
    try:
        connection = ExternalConnection(name, spec)
        try:
            _check_password_fits(plan, name, spec, connection, cells)
            connection.check_reachable()
        finally:
            connection.close()
    except ConfigError as exc:
        raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None


def _check_password_fits(
    plan: Plan, name: str, spec: ExternalServer, connection: ExternalConnection, cells: list[Cell]
) -> None:
    """Each cell's tool writes the password into its option file as the run will: one it
    cannot hold (sysbench: both ' and ") is refused under the key it came from."""
    source = "password_env" if spec.password_env else "defaults_file"
    for cell in cells:
        try:
            workload_for(cell.scenario.workload).client_options(connection.options_for_tool())
        except ConfigError as exc:
            raise ConfigError(
                f"{server_key(plan, name, source)}: {exc.message}", hint=exc.hint
            ) from None


def _check_work_directories(plan: Plan, out: Path) -> None:
    """A workload with no server writes into its work directory: writable, with room."""
    needed: dict[Path, dict[tuple, int]] = {}  # parent -> data set key -> bytes
    size_keys: dict[Path, str] = {}  # parent -> the key setting what its data sets take
    for cell in plan.cells:
        if cell_needs_server(cell):
            continue
        workload = workload_for(cell.scenario.workload)
        key = f"workload.{workload.key}.directory" if workload.work_root else "out"
        # The run directory is made inside ``out``; the work folder goes beside it.
        parent = Path(workload.work_root) if workload.work_root else out
        try:
            check_work_parent(parent, 0, key)
        except ConfigError as exc:
            raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None
        needed.setdefault(parent, {})[workload.data_set_key()] = workload.space_needed()
        space = workload.space_key
        size_keys[parent] = f"workload.{workload.key}.{space}" if space else key
    for parent, sets in needed.items():
        try:  # every data set stays until the run ends
            check_work_parent(parent, sum(sets.values()), size_keys[parent])
        except ConfigError as exc:
            raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None


def _check_system(plan: Plan, out: Path) -> None:
    """The settings of the cells whose data is on this machine (a managed server on
    another host has its own checked there: ``check_server_hosts``)."""
    _check_external_system(plan)
    remote = remote_servers(plan)
    wanted: dict[Path, list[host_settings.SystemSettings]] = {}  # data folder -> settings
    for cell in plan.cells:
        if cell_needs_server(cell) and cell.server in remote:
            continue
        wanted.setdefault(cell_data_parent(cell, out), []).append(cell.scenario.system)
    for where, settings in wanted.items():
        if not any(s.active for s in settings):
            continue
        try:
            host_settings.check(settings, datadir_device(where))
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


def data_set_bytes(workload: WorkloadTool) -> int | None:
    """A workload's data set, as its tool estimates it; None: the tool cannot say."""
    return workload.data_set_bytes() if isinstance(workload, SizedDataSet) else None


def is_managed_here(spec: ManagedServer | ExternalServer) -> bool:
    """A server dbrig starts on this machine (its data sets are on the run's disk)."""
    return isinstance(spec, ManagedServer) and spec.host is None


def managed_data_bytes(plan: Plan) -> int:
    """Bytes the managed servers' data sets need on the run's disk: one snapshot per data
    set plus the working datadir of the largest (0 when the tool cannot say)."""
    sizes: dict[tuple, int] = {}
    for cell in plan.cells:
        workload = workload_for(cell.scenario.workload)
        size = data_set_bytes(workload)
        if is_managed_here(plan.scenario.server_specs[cell.server]) and size is not None:
            sizes[(cell.server, workload.data_set_key())] = size
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
            hint=f"use fewer {workload.size_key} or a run directory on a bigger disk",
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
        total += seconds * per_s * scenario.rounds
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
