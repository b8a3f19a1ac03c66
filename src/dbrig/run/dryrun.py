"""``dbrig run --dry-run``: the resolved plan (``plan.py``) as text: each cell's factors and
the exact commands it would run, then the trial order. It reads the plan and decides
nothing itself: what it prints is what the run executes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from dbrig import proc
from dbrig.endpoint import Endpoint
from dbrig.remote.server import AGENT_MODULE, BENCHMARK_USER, REMOTE_HOME_ROOT, server_address
from dbrig.run import faults, sequential_run
from dbrig.run.commands import InterferenceCommand
from dbrig.run.datasets import data_set_id, prepare_steps, prepared_before_every_trial
from dbrig.run.plan import RunPlan, unchecked
from dbrig.run.plan_cells import cell_endpoint
from dbrig.run.plan_memory import largest_buffer_pool
from dbrig.run.remote import cell_host, display_run
from dbrig.scenario import Cell, ExternalServer, ManagedServer, Plan
from dbrig.server.binary import ServerBinary
from dbrig.server.cache import cached_entry, corrupt_entry, entry_key
from dbrig.server.sandbox import my_cnf_lines
from dbrig.tools.base import WorkloadTool


@dataclass(frozen=True)
class CacheView:
    """The snapshot cache as a dry run sees it: read, never created or changed."""

    root: Path
    binaries: dict[str, ServerBinary]  # the managed servers of this machine, by name

    def line(self, plan: Plan, server: str, digest: str) -> str | None:
        """Whether the run would take data set ``digest`` from the cache, or None for a
        server that does not use it (external, on another host, binary not found)."""
        spec = plan.scenario.server_specs[server]
        binary = self.binaries.get(server)
        if not isinstance(spec, ManagedServer) or spec.host is not None or binary is None:
            return None
        key = entry_key(binary, dict(spec.config), digest)
        entry = cached_entry(self.root, key)
        if entry is None and (corrupt := corrupt_entry(self.root, key)) is not None:
            return (
                f"snapshot cache: entry {corrupt.path / 'entry.json'} is unreadable "
                f"({corrupt.problem}): prepared again, and the entry replaced"
            )
        if entry is None:
            return f"snapshot cache: no entry yet: prepared, then kept in {self.root}"
        used = dt.datetime.fromtimestamp(entry.used).strftime("%Y-%m-%d %H:%M")
        return (
            f"snapshot cache: entry {entry.name} ({entry.bytes / 2**30:.2f} GiB, used "
            f"{used}): no init, no prepare"
        )


def describe(resolved: Plan | RunPlan, cache: CacheView | None = None) -> Iterator[str]:
    """The plan's size and seed, each cell's exact commands, then the trial order (of a
    resumed run: what is left). A bare ``Plan`` is resolved unchecked (tests of the text)."""
    if not isinstance(resolved, RunPlan):
        resolved = unchecked(resolved)
    plan, trials = resolved.plan, resolved.trials
    yield (
        f"scenario {plan.scenario.name}: {len(plan.cells)} cells x {plan.scenario.rounds} "
        f"repetitions = {len(plan.trials)} trials, order {plan.scenario.order} (seed {plan.seed}: "
        f"dbrig run --seed {plan.seed} keeps this order)"
    )
    if plan.shard is not None:
        yield (
            f"shard {plan.shard.label}: cells {' '.join(c.id for c in plan.cells)} of "
            f"{len(plan.shard.all_cells)} (whole cells; the unsharded order without the "
            "other shards' trials)"
        )
    if plan.scenario.sequential is not None:
        yield from sequential_run.design_lines(plan.scenario.sequential)
    if resolved.resumed:
        yield (
            f"resumed: {len(trials)} of {len(plan.trials)} trials left to run (the others "
            "are saved in the run); only their cells are shown"
        )
    yield from describe_commands(resolved, plan.short_names(), cache)
    yield "order: " + " ".join(t.id for t in trials)


def describe_disk(resolved: Plan | RunPlan) -> str:
    """The disk the run needs here, as preflight counted it."""
    if not isinstance(resolved, RunPlan):
        resolved = unchecked(resolved)
    return disk_line(resolved.disk_bytes, resolved.unsized_workloads)


def disk_line(counted: int, unsized: Sequence[str]) -> str:
    """The dry run's disk line: ``counted`` bytes, and the workloads whose data sets their
    tool cannot size (left out of ``counted``: said, not shown as nothing)."""
    line = (
        f"disk: {_size(counted)} on this machine (data sets, their snapshots and a working "
        "copy, per-interval files)"
    )
    if unsized:
        line += (
            f", plus the data sets of {', '.join(unsized)}: size unknown (the tool cannot "
            "say before loading them; each takes it twice, a snapshot and a working copy)"
        )
    return line


def describe_memory(resolved: Plan | RunPlan) -> str | None:
    """The largest buffer pool a managed server starts with here (one runs at a time)."""
    plan = resolved.plan if isinstance(resolved, RunPlan) else resolved
    pool = largest_buffer_pool(plan)
    if pool is None:
        return None
    return f"memory: a buffer pool of {pool.written} at the most ({pool.key})"


def _size(size: int) -> str:
    if size < 2**20:
        return "under 1 MiB"
    return "about " + (f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.0f} MiB")


def describe_commands(
    resolved: Plan | RunPlan, short_names: dict[str, str], cache: CacheView | None = None
) -> Iterator[str]:
    """Each cell's factors and the exact commands it would run: the plan's."""
    if not isinstance(resolved, RunPlan):
        resolved = unchecked(resolved)
    plan = resolved.plan
    loads = _data_set_loads(resolved)
    pending = {t.cell.id for t in resolved.trials}
    for cell in (c for c in plan.cells if c.id in pending):
        planned = resolved.cells[cell.id]
        commands = planned.commands
        yield f"{cell.id} [{cell.server}] {cell.label(short_names)}"
        if not planned.needs_server:
            where = commands.workload.work_root or "beside the run directory"
            yield f"  no server: {commands.workload.title} needs none (works in a folder {where})"
        endpoint, binary = cell_endpoint(plan, cell), resolved.tools.workload
        yield from _prepare_lines(cell, commands.workload, endpoint, binary, loads)
        if cache is not None and planned.needs_server:
            yield from _cache_lines(plan, cell, commands.workload, loads, cache)
        if cell_host(cell) is None:
            yield "  run: " + _shown(commands.argv, cell.scenario.server_specs[cell.server])
        else:
            yield "  run: " + display_run(plan, cell, proc.redact(commands.argv))
        for interference in commands.interference:
            yield f"  {interference.role}: " + _interference_line(plan, interference)
        if planned.needs_server:
            yield from _where_lines(plan, cell.server)
            yield from _server_lines(cell.scenario.server_specs[cell.server])
        rides_through = commands.workload.reconnects_itself
        fault_lines = faults.describe(cell.scenario.faults, rides_through)
        yield from (f"  fault {line}" for line in fault_lines)
        settings = cell.scenario.system
        if settings.active:
            values = settings.model_dump(exclude_defaults=True).items()
            shown = ", ".join(f"{k}={v}" for k, v in values)
            yield f"  system: {shown}{_system_where(plan, planned.server)}"


def _system_where(plan: Plan, server: str | None) -> str:
    """Where a cell's ``system`` settings act, when it is not this machine."""
    spec = plan.scenario.server_specs.get(server) if server is not None else None
    if isinstance(spec, ManagedServer) and spec.host is not None:
        return f" (on hosts.{spec.host}, under its datadir there)"
    return ""


def _interference_line(plan: Plan, command: InterferenceCommand) -> str:
    """Its command, after ``ssh <destination> --`` when it runs on another host (the
    tool's name there: its path is found when the run connects)."""
    text = " ".join(proc.redact(command.argv))
    if command.host is None:
        return text
    return f"ssh {plan.scenario.hosts[command.host].ssh} -- {text}"


@dataclass(frozen=True)
class _Loads:
    first_cell: str  # whose trial loads the data set first
    times: int  # how often it is loaded in this order


def _data_set_loads(resolved: RunPlan) -> dict[tuple[str, str], _Loads]:
    """How often each (server, data set) is loaded, walking the trials in order.

    A managed server snapshots a data set once and restores it; an external one
    (``reset: none``) holds one data set per database, so it loads again each time
    the trials switch back to one.
    """
    loads: dict[tuple[str, str], _Loads] = {}
    holding: dict[tuple[str, str], str] = {}  # (server, database) -> digest loaded there
    for trial in resolved.trials:
        planned = resolved.of(trial)
        workload, digest = planned.workload, planned.data_set
        key, place = (trial.cell.server, digest), (trial.cell.server, workload.database)
        external = isinstance(trial.cell.scenario.server_specs[trial.cell.server], ExternalServer)
        if key in loads and (not external or holding.get(place) == digest):
            continue
        holding[place] = digest
        before = loads.get(key)
        loads[key] = (
            _Loads(trial.cell.id, 1) if before is None else replace(before, times=before.times + 1)
        )
    return loads


def _prepare_lines(
    cell: Cell,
    workload: WorkloadTool,
    endpoint: Endpoint,
    binary: Path,
    loads: dict[tuple[str, str], _Loads],
) -> Iterator[str]:
    spec = cell.scenario.server_specs[cell.server]
    steps = prepare_steps(workload, spec, endpoint, binary)
    if isinstance(spec, ExternalServer) and not spec.prepare:
        yield f"  prepare: none (servers.{cell.server}.prepare: false: the data is there)"
        return
    if prepared_before_every_trial(spec):
        for step in steps:
            yield f"  {step.name} (before every trial): " + " ".join(proc.redact(step.argv))
        return
    _, digest = data_set_id(workload)
    loaded = loads[(cell.server, digest)]
    when = "once" if loaded.times == 1 else f"{loaded.times} times, as the trial order switches"
    if loaded.first_cell != cell.id:
        if steps:
            yield f"  data set {digest}: loaded {when}, first by {loaded.first_cell}'s trial"
        return
    for step in steps:
        argv = _shown(step.argv, spec)
        yield f"  {step.name} ({when}, data set {digest}): {argv}"


def _cache_lines(
    plan: Plan,
    cell: Cell,
    workload: WorkloadTool,
    loads: dict[tuple[str, str], _Loads],
    cache: CacheView,
) -> Iterator[str]:
    """Under the cell that loads a data set first: whether it comes from the cache."""
    _, digest = data_set_id(workload)
    loaded = loads.get((cell.server, digest))
    if not workload.needs_server or loaded is None or loaded.first_cell != cell.id:
        return
    if (line := cache.line(plan, cell.server, digest)) is not None:
        yield f"  {line}"


PORT_OPTIONS = ("--mysql-port", "--port")


def _shown(argv: list[str], spec: ManagedServer | ExternalServer) -> str:
    """The command as the dry run prints it: secrets redacted; a remote managed server's
    port (chosen when it starts) as a placeholder."""
    words = proc.redact(argv)
    if isinstance(spec, ManagedServer) and spec.host is not None and spec.port is None:
        zero = {f"{option}=0" for option in PORT_OPTIONS}
        words = [w.replace("=0", "=<the server's>") if w in zero else w for w in words]
    return " ".join(words)


def _where_lines(plan: Plan, name: str) -> Iterator[str]:
    """Where a managed server on another host runs, and where its clients connect."""
    spec = plan.scenario.server_specs[name]
    if not isinstance(spec, ManagedServer) or spec.host is None:
        return
    host = plan.scenario.hosts[spec.host]
    ssh = host.ssh + (f":{host.port}" if host.port else "")
    address = server_address(spec.host, host)
    port = spec.port or "<chosen then>"
    yield (
        f"  server: on hosts.{spec.host} ({ssh}) through dbrig's agent ({host.python} -m "
        f"{AGENT_MODULE}), in ~/{REMOTE_HOME_ROOT}/<run folder>-<run id>-{name}; "
        f"clients connect to {address}:{port} as {BENCHMARK_USER} (127.0.0.1 from "
        f"hosts.{spec.host} itself)"
    )


def _server_lines(config: ManagedServer | ExternalServer) -> Iterator[str]:
    if isinstance(config, ManagedServer) and config.config:
        yield "  my.cnf: " + ", ".join(my_cnf_lines(config.config))
    if isinstance(config, ManagedServer) and config.cpus:
        yield "  server pinned to cores: " + ",".join(map(str, config.cpus))
