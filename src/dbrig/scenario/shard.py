"""``--shard I/N``: a plan's cells split over N machines, whole cells at a time.

A cell is never split: its repetitions on two machines would mix the machines'
differences into the cell's spread, which then reads as noise (or hides a
regression). Each shard runs the unsharded run's seeded order with the other
shards' trials left out, so the merged run has the order a single machine
would have run.

Cells that differ only in the ``server`` factor go to one shard together, as a
group: ``dbrig compare RUN --by server`` (the interleaved CI workflow, base and
candidate as two servers) then compares each pair on one machine. Any other
factor is spread over the shards.

The split is deterministic given the scenario: groups are weighed by their
expected time (repetitions x the workload's ``expected_seconds``, summed over
the group's cells) when every cell's is known, else by their number of trials.
Heaviest first (matrix order among equals), each group goes to the shard with
the least weight so far; among shards of equal weight, to the one holding the
fewest cells that share a factor value with it (then the lowest index). Dealt
round-robin in matrix order, equal groups would give each shard one value of
the last factor, and every comparison along that factor would be a comparison
of machines. The cells of one shard are kept in matrix order. The seed plays
no part.
"""

from __future__ import annotations

import re
from collections import Counter

from dbrig.errors import ConfigError
from dbrig.scenario.matrix import Cell, Plan
from dbrig.tools.registry import workload_for

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str, flag: str = "--shard") -> tuple[int, int]:
    """``"2/4"`` as (2, 4); ConfigError naming ``flag`` for anything else."""
    match = _SHARD.match(text)
    if match is None:
        raise ConfigError(f"{flag} {text}: expected I/N, shard I of N (e.g. 1/4)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1:
        raise ConfigError(f"{flag} {text}: N must be at least 1")
    if not 1 <= index <= count:
        raise ConfigError(f"{flag} {text}: I must be between 1 and {count} (shards count from 1)")
    return index, count


def cell_weight(cell: Cell, repeat: int) -> float | None:
    """The cell's expected seconds over all its repetitions, None when the tool cannot say."""
    scenario = cell.scenario
    seconds = workload_for(scenario.workload).expected_seconds(scenario.warmup)
    return None if seconds is None else seconds * repeat


def split_cells(plan: Plan, count: int) -> list[tuple[str, ...]]:
    """The cell ids of each of ``count`` shards (index 0 is shard 1), balanced by weight."""
    groups = server_groups(plan.cells)
    repeat = plan.scenario.rounds
    cell_weights = [cell_weight(c, repeat) for c in plan.cells]
    known = all(w is not None for w in cell_weights)
    by_id = {
        c.id: (w if known else float(repeat)) for c, w in zip(plan.cells, cell_weights, strict=True)
    }
    weights = [sum(by_id[c.id] or 0.0 for c in group) for group in groups]
    loads = [0.0] * count
    values: list[Counter[str]] = [Counter() for _ in range(count)]  # factor=value per shard
    members: list[list[Cell]] = [[] for _ in range(count)]
    for i in sorted(range(len(groups)), key=lambda i: (-weights[i], i)):
        mine = [v for cell in groups[i] for v in _factor_values(cell)]
        chosen = min(range(count), key=lambda s: (loads[s], sum(values[s][v] for v in mine), s))
        loads[chosen] += weights[i]
        values[chosen].update(mine)
        members[chosen].extend(groups[i])
    return [tuple(c.id for c in sorted(shard, key=lambda c: c.index)) for shard in members]


def server_groups(cells: tuple[Cell, ...]) -> list[list[Cell]]:
    """The cells in groups that differ only in ``server``, in matrix order of their first."""
    groups: dict[str, list[Cell]] = {}
    for cell in cells:
        key = repr([(path, value) for path, value in cell.factors if path != "server"])
        groups.setdefault(key, []).append(cell)
    return list(groups.values())


def _factor_values(cell: Cell) -> list[str]:
    return [f"{path}={value!r}" for path, value in cell.factors if path != "server"]


def shard_plan(plan: Plan, index: int, count: int, flag: str = "--shard") -> Plan:
    """The plan of shard ``index`` of ``count``; ConfigError when a shard would be empty."""
    groups = len(server_groups(plan.cells))
    if count > groups:
        what = (
            f"{len(plan.cells)} cells"
            if groups == len(plan.cells)
            else (f"{groups} groups of cells that differ only in server")
        )
        raise ConfigError(
            f"{flag} {index}/{count}: the scenario has {what}, and neither a cell nor such a "
            f"group is split over shards; use at most {groups} shards"
        )
    cell_ids = split_cells(plan, count)[index - 1]
    return plan.sharded(index, count, cell_ids)
