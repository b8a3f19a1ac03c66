"""``dbrig run --dry-run``: each cell's factors and the exact commands it would run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from dbrig import proc
from dbrig.run.preflight import display_endpoint
from dbrig.scenario import ManagedServer, Plan
from dbrig.tools import stress_ng
from dbrig.tools.registry import workload_for


def describe(plan: Plan) -> Iterator[str]:
    """The plan's size and seed, each cell's exact commands, then the trial order."""
    trials = plan.trials
    yield (
        f"scenario {plan.scenario.name}: {len(plan.cells)} cells x {plan.scenario.repeat} "
        f"repetitions = {len(trials)} trials, order {plan.scenario.order} (seed {plan.seed})"
    )
    yield from describe_commands(plan, plan.short_names())
    yield "order: " + " ".join(t.id for t in trials)


def describe_commands(plan: Plan, short_names: dict[str, str]) -> Iterator[str]:
    """Each cell's factors and the exact commands it would run."""
    for cell in plan.cells:
        workload = workload_for(cell.scenario.workload)
        binary = Path(workload.info.binaries[0])
        endpoint = display_endpoint(cell.scenario.server_specs[cell.server], workload.database)
        yield f"{cell.id} [{cell.server}] {cell.label(short_names)}"
        prepare = workload.prepare_argv(endpoint, binary)
        if prepare:
            yield "  prepare (once per data set): " + " ".join(proc.redact(prepare))
        yield "  run: " + " ".join(
            proc.redact(workload.run_argv(endpoint, binary, cell.scenario.warmup))
        )
        params = cell.scenario.interference.stress_ng
        if params is not None and params.active:
            expected = workload.expected_seconds(cell.scenario.warmup) or 3600
            argv = stress_ng.build_command(params, timeout_s=int(expected * 1.5 + 60))
            yield "  interference: " + " ".join(argv)
        config = cell.scenario.server_specs[cell.server]
        if isinstance(config, ManagedServer) and config.config:
            yield "  my.cnf: " + ", ".join(f"{k}={v}" for k, v in config.config.items())
        if isinstance(config, ManagedServer) and config.cpus:
            yield "  server pinned to cores: " + ",".join(map(str, config.cpus))
        settings = cell.scenario.system
        if settings.active:
            yield "  system: " + ", ".join(
                f"{k}={v}" for k, v in settings.model_dump(exclude_defaults=True).items()
            )
