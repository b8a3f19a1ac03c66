"""``dbrig run --dry-run``: each cell's factors and the exact commands it would run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from dbrig import proc
from dbrig.endpoint import Endpoint
from dbrig.run.commands import trial_commands
from dbrig.run.datasets import data_set_id, prepare_steps, prepared_before_every_trial
from dbrig.run.preflight import cell_endpoint, find_binaries
from dbrig.scenario import Cell, ExternalServer, ManagedServer, Plan
from dbrig.tools.base import WorkloadTool
from dbrig.tools.registry import workload_for


def describe(plan: Plan) -> Iterator[str]:
    """The plan's size and seed, each cell's exact commands, then the trial order."""
    trials = plan.trials
    yield (
        f"scenario {plan.scenario.name}: {len(plan.cells)} cells x {plan.scenario.repeat} "
        f"repetitions = {len(trials)} trials, order {plan.scenario.order} (seed {plan.seed}: "
        f"dbrig run --seed {plan.seed} keeps this order)"
    )
    yield from describe_commands(plan, plan.short_names())
    yield "order: " + " ".join(t.id for t in trials)


def describe_commands(plan: Plan, short_names: dict[str, str]) -> Iterator[str]:
    """Each cell's factors and the exact commands it would run (built as the run builds them)."""
    workload_binary, interference_binaries = find_binaries(plan, strict=False)
    loaded_by = _first_cell_per_data_set(plan)
    for cell in plan.cells:
        endpoint = cell_endpoint(plan, cell)
        commands = trial_commands(cell.scenario, endpoint, workload_binary, interference_binaries)
        yield f"{cell.id} [{cell.server}] {cell.label(short_names)}"
        yield from _prepare_lines(cell, commands.workload, endpoint, workload_binary, loaded_by)
        yield "  run: " + " ".join(proc.redact(commands.argv))
        for interference in commands.interference:
            yield f"  {interference.role}: " + " ".join(proc.redact(interference.argv))
        yield from _server_lines(cell.scenario.server_specs[cell.server])
        settings = cell.scenario.system
        if settings.active:
            yield "  system: " + ", ".join(
                f"{k}={v}" for k, v in settings.model_dump(exclude_defaults=True).items()
            )


def _first_cell_per_data_set(plan: Plan) -> dict[tuple[str, str], str]:
    """Which cell loads each (server, data set): the first in trial order that uses it."""
    first: dict[tuple[str, str], str] = {}
    for trial in plan.trials:
        _, digest = data_set_id(workload_for(trial.cell.scenario.workload))
        first.setdefault((trial.cell.server, digest), trial.cell.id)
    return first


def _prepare_lines(
    cell: Cell,
    workload: WorkloadTool,
    endpoint: Endpoint,
    binary: Path,
    loaded_by: dict[tuple[str, str], str],
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
    first = loaded_by[(cell.server, digest)]
    if first != cell.id:
        if steps:
            yield f"  data set {digest}: loaded once, by {first}'s first trial"
        return
    for step in steps:
        yield f"  {step.name} (once, data set {digest}): " + " ".join(proc.redact(step.argv))


def _server_lines(config: ManagedServer | ExternalServer) -> Iterator[str]:
    if isinstance(config, ManagedServer) and config.config:
        yield "  my.cnf: " + ", ".join(f"{k}={v}" for k, v in config.config.items())
    if isinstance(config, ManagedServer) and config.cpus:
        yield "  server pinned to cores: " + ",".join(map(str, config.cpus))
