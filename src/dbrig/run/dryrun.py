"""``dbrig run --dry-run``: each cell's factors and the exact commands it would run."""

from __future__ import annotations

from collections.abc import Iterator

from dbrig import proc
from dbrig.run.commands import trial_commands
from dbrig.run.preflight import cell_endpoint, find_binaries
from dbrig.scenario import ExternalServer, ManagedServer, Plan


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
    for cell in plan.cells:
        endpoint = cell_endpoint(plan, cell)
        commands = trial_commands(cell.scenario, endpoint, workload_binary, interference_binaries)
        yield f"{cell.id} [{cell.server}] {cell.label(short_names)}"
        prepare = commands.workload.prepare_argv(endpoint, workload_binary)
        if prepare:
            yield "  prepare (once per data set): " + " ".join(proc.redact(prepare))
        yield "  run: " + " ".join(proc.redact(commands.argv))
        for interference in commands.interference:
            yield f"  {interference.role}: " + " ".join(proc.redact(interference.argv))
        yield from _server_lines(cell.scenario.server_specs[cell.server])
        settings = cell.scenario.system
        if settings.active:
            yield "  system: " + ", ".join(
                f"{k}={v}" for k, v in settings.model_dump(exclude_defaults=True).items()
            )


def _server_lines(config: ManagedServer | ExternalServer) -> Iterator[str]:
    if isinstance(config, ManagedServer) and config.config:
        yield "  my.cnf: " + ", ".join(f"{k}={v}" for k, v in config.config.items())
    if isinstance(config, ManagedServer) and config.cpus:
        yield "  server pinned to cores: " + ",".join(map(str, config.cpus))
