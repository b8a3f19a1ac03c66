"""The resolved plan: what a run will do, decided once, before anything exists.

:func:`build` takes the validated scenario plan, runs every check of this host and the
other hosts the scenario uses (``preflight.py``), and resolves each cell: a server or
none (from the cell's own workload, never the scenario's base block), where its data
lives, the clone workspace, the workload's and interference's commands and limits.
Every refusal is raised here, before a run directory exists. ``dbrig run --dry-run``
prints the :class:`RunPlan` (``dryrun.py``) and the run executes it (``runner.py``):
both call :func:`build`, so the dry run refuses exactly what the run refuses and shows
what the run does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from dbrig.errors import ConfigError
from dbrig.run import inputs, preflight, sequential_run
from dbrig.run.commands import TrialCommands, trial_commands
from dbrig.run.datasets import data_set_id
from dbrig.run.plan_cells import cell_data_parent, cell_endpoint
from dbrig.run.plan_internals import check_internals
from dbrig.run.plan_memory import check_memory
from dbrig.run.plan_profile import check_profiling
from dbrig.run.preflight import Toolbox, find_binaries
from dbrig.run.remote import cell_host
from dbrig.run.remote import display_endpoint as remote_endpoint
from dbrig.scenario import Cell, Plan, Trial
from dbrig.server import workspace
from dbrig.tools.base import WorkloadTool
from dbrig.tools.registry import workload_for
from dbrig.util.units import parse_size

RUN_DIRECTORY = "<run directory>"  # where the commands' paths into the run start


@dataclass(frozen=True)
class CellRun:
    """One cell as the run will run it."""

    cell: Cell
    workload: WorkloadTool
    server: str | None  # the server its trials run against; None: its workload needs none
    data_parent: Path  # where its data lives here: the run's folder, or its work folder's
    data_set: str  # the data set's digest
    # As the run builds them, with placeholders for what a server's start decides (its
    # socket, port and option file); a client on another host: as run there.
    commands: TrialCommands

    @property
    def needs_server(self) -> bool:
        return self.server is not None

    @property
    def server_note(self) -> str:
        """What runs the cell's trials against, for run.json."""
        if self.server is None:
            return f"no server: {self.workload.title} needs none"
        return f"server '{self.server}'"


@dataclass(frozen=True)
class RunPlan:
    """Every cell resolved, the trials this invocation runs, the binaries found and the
    clone workspace's size."""

    plan: Plan
    cells: dict[str, CellRun]  # by cell id
    trials: tuple[Trial, ...]  # what this invocation runs, in order (a resume: what is left)
    tools: Toolbox
    image_bytes: int | None  # the clone workspace; None: none
    out: Path  # the folder the run directory is made in (a resume: the one it is in)

    def of(self, trial: Trial) -> CellRun:
        return self.cells[trial.cell.id]

    @property
    def needs_server(self) -> bool:
        """Some cell runs against a server (a plan's cells all agree: scenario/load.py)."""
        return any(c.needs_server for c in self.cells.values())

    @property
    def servers(self) -> list[str]:
        """The servers some cell runs against, by name."""
        return sorted({c.server for c in self.cells.values() if c.server is not None})

    @property
    def resumed(self) -> bool:
        return len(self.trials) < len(self.plan.trials)

    def data_location(self, run_path: Path) -> Path:
        """Where the data lives: the datadirs (in the run directory) or, with no server,
        the first cell's work folder's parent (its ``work_root``, else beside the run)."""
        if self.needs_server:
            return run_path
        cell = next(iter(self.cells.values()))
        return cell.data_parent if cell.workload.work_root else run_path.parent

    def server_notes(self) -> dict[str, Any]:
        """For run.json: ``server``, what ran when no cell had a server (as before), and
        ``cell_servers``: each cell's own."""
        notes = {c.cell.id: c.server_note for c in self.cells.values()}
        if self.needs_server:
            return {"cell_servers": notes}
        titles = list(dict.fromkeys(c.workload.title for c in self.cells.values()))
        verb = "needs" if len(titles) == 1 else "need"
        summary = f"no server: {', '.join(titles)} {verb} none"
        return {"server": summary, "cell_servers": notes}

    @property
    def disk_bytes(self) -> int:
        """What the run writes on this machine, as preflight counts it: each managed data
        set's snapshot and a working copy (0 for a tool that cannot say), each data set
        of a workload with no server, and every trial's per-interval files."""
        work = {
            (c.data_parent, c.data_set): c.workload.space_needed()
            for c in self.cells.values()
            if not c.needs_server
        }
        series = preflight.series_bytes(self.plan, os.cpu_count() or 1)
        return preflight.managed_data_bytes(self.plan) + sum(work.values()) + series

    @property
    def unsized_workloads(self) -> list[str]:
        """The workloads whose data sets on a managed server here ``disk_bytes`` leaves
        out: their tool cannot size them (a script's tables, mysqlslap's)."""
        specs = self.plan.scenario.server_specs
        return sorted(
            {
                c.workload.title
                for c in self.cells.values()
                if c.server is not None
                and preflight.is_managed_here(specs[c.server])
                and preflight.data_set_bytes(c.workload) is None
            }
        )


def build(
    plan: Plan,
    out: Path | None,
    *,
    keep_data: bool = False,
    strict: bool = True,
    trials: Sequence[Trial] | None = None,
) -> RunPlan:
    """Check everything and resolve every cell; raises DbrigError (one line) for anything
    the run would refuse. ``strict=False`` is the dry run's: a tool not installed here is
    named, not refused. ``trials``: what is left of a resumed run (default: all)."""
    where = out or Path(plan.scenario.out)
    image = workspace_image(plan, keep_data, where)
    check_profiling(plan)
    check_memory(plan, psutil.virtual_memory().total)
    check_internals(plan)
    sequential_run.check_design(plan)
    tools = preflight.preflight(plan, where, strict=strict)
    # A folder workload (a Lua script) is asked which commands it defines: sysbench runs.
    plan = inputs.probed_plan(plan, tools.workload, strict=strict)
    if trials is not None:
        trials = inputs.trials_of(plan, trials)
    return resolve(plan, tools, where, image, trials)


def resolve(
    plan: Plan,
    tools: Toolbox,
    out: Path,
    image_bytes: int | None = None,
    trials: Sequence[Trial] | None = None,
) -> RunPlan:
    """Every cell resolved against ``tools`` (no check of this host: :func:`build`'s)."""
    cells = {cell.id: _resolve_cell(plan, cell, tools, out) for cell in plan.cells}
    chosen = tuple(plan.trials if trials is None else trials)
    return RunPlan(plan, cells, chosen, tools, image_bytes, out)


def unchecked(plan: Plan) -> RunPlan:
    """The plan with this machine's binaries (named when missing) and no check: what the
    dry run's text is made of, for tests of that text."""
    workload, interference = find_binaries(plan, strict=False)
    tools = Toolbox(workload, None, interference, {}, {})
    return resolve(plan, tools, Path(plan.scenario.out))


def _resolve_cell(plan: Plan, cell: Cell, tools: Toolbox, out: Path) -> CellRun:
    # A script runs from the run's copy (runner.py): its commands read so, as the run's do.
    cell = inputs.at_copy(cell, Path(RUN_DIRECTORY))
    workload = workload_for(cell.scenario.workload)
    host = cell_host(cell)
    if host is None:
        endpoint, binary = cell_endpoint(plan, cell), tools.workload
    else:  # the tool's path there, once preflight found it; its name until then
        found = tools.remote_workload.get(host)
        binary = Path(found.path if found else workload.info.binaries[0])
        endpoint = remote_endpoint(plan, cell)
    commands = trial_commands(cell.scenario, endpoint, binary, tools.interference)
    return CellRun(
        cell,
        workload,
        cell.server if workload.needs_server else None,
        cell_data_parent(cell, out),
        data_set_id(workload)[1],
        commands,
    )


def workspace_image(plan: Plan, keep_data: bool, out: Path) -> int | None:
    """The clone workspace's size, checked before anything runs (root, xfsprogs, room):
    the cells' ``workspace.image``, or the filesystem their ``disk_full`` fault fills."""
    sizes: dict[int, tuple[str, str]] = {}  # bytes -> the key and the size as written
    filled = False
    for cell in plan.cells:
        fault = cell.scenario.faults.disk_full
        filled |= fault is not None
        if fault is not None and fault.size is not None:
            sizes.setdefault(parse_size(fault.size) or 0, ("faults.disk_full.size", fault.size))
        if (image := cell.scenario.workspace.image) is not None:
            sizes.setdefault(parse_size(image) or 0, ("workspace.image", image))
    if not sizes:
        return None
    if len(sizes) > 1:
        written = ", ".join(size for _, size in sizes.values())
        raise ConfigError(
            f"{plan.source}: {next(iter(sizes.values()))[0]}: the run's datadirs live on one "
            f"filesystem, so every cell needs the same size (got {written})"
        )
    size, (key, written) = next(iter(sizes.items()))
    _check_workspace_use(plan, key, filled, keep_data)
    try:
        workspace.check_can_make(size, key=key, written=written, parent=out, filled=filled)
    except ConfigError as exc:
        raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None
    return size


def _check_workspace_use(plan: Plan, key: str, filled: bool, keep_data: bool) -> None:
    if filled and os.geteuid() != 0:
        raise ConfigError(
            f"{plan.source}: faults.disk_full needs root: dbrig makes, loop-mounts and "
            "fills a filesystem for the datadirs",
            hint="run dbrig as root, or remove the disk_full fault",
        )
    if not any(workload_for(c.scenario.workload).needs_server for c in plan.cells):
        title = workload_for(plan.cells[0].scenario.workload).title
        raise ConfigError(
            f"{plan.source}: {key}: {title} needs no server: no datadir would live in the "
            "clone workspace",
            hint="remove workspace: from the scenario",
        )
    if keep_data:
        raise ConfigError(
            f"--keep-data: a clone workspace ({key}) is removed when the run ends; drop one of them"
        )
