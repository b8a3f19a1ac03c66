"""The matrix: factor paths and values in, cells and the order of their trials out.

Keys are dotted paths into the scenario (``workload.sysbench.threads``) and
values are lists; the cells are the cross product::

    matrix:
      workload.sysbench.threads: [1, 2, 4]
      interference.stress-ng.cpu: [0, 2]

Several keys that vary *together* share one entry, their paths joined by
commas, each value a list with one item per path::

    matrix:
      "servers.db.config.sync_binlog, servers.db.config.innodb_flush_log_at_trx_commit":
        [[0, 2], [1, 1]]

A list of such blocks is their union, in order (seed 000: cores 0..8 at 90 %,
then 8 cores at 20..100 %)::

    matrix:
      - {interference.stress-ng.cpu: [0, 1, 2], interference.stress-ng.cpu_load: [90]}
      - {interference.stress-ng.cpu: [2], interference.stress-ng.cpu_load: [20, 60, 100]}

The key ``server`` chooses among the named ``servers:``. A path must name a key of
the schema, and under ``servers.`` and ``workload.`` a server or tool the file names;
``stress-ng`` and ``stress_ng`` (like my.cnf's ``a-b`` and ``a_b``) are one key, so a
matrix value replaces the file's own spelling instead of adding a second key.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbrig.errors import ConfigError
from dbrig.factors import host_values, short_factor_names
from dbrig.scenario.messages import _child_type, _expected_keys
from dbrig.scenario.model import Scenario
from dbrig.scenario.validate import validate


@dataclass(frozen=True)
class Cell:
    """One point of the matrix: its factors and the scenario they resolve to."""

    index: int
    factors: tuple[tuple[str, Any], ...]
    server: str
    scenario: Scenario

    @property
    def id(self) -> str:
        return f"c{self.index:03d}"

    @property
    def factor_dict(self) -> dict[str, Any]:
        return dict(self.factors)

    def label(self, short_names: Mapping[str, str] | None = None) -> str:
        names = short_names or {}
        return " ".join(f"{names.get(k, k)}={v}" for k, v in self.factors) or "(single cell)"


@dataclass(frozen=True)
class Trial:
    """One repetition of one cell: what the runner executes and saves."""

    cell: Cell
    repetition: int  # 1-based

    @property
    def id(self) -> str:
        return f"{self.cell.id}-r{self.repetition}"


@dataclass(frozen=True)
class Shard:
    """Which part of a split plan this is: ``index`` of ``count`` (1-based), and the
    whole plan's cells, whose seeded order the shard's trials keep."""

    index: int
    count: int
    all_cells: tuple[Cell, ...]

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class Plan:
    """The cells to run and their seeded trial order; a shard's plan holds only its cells."""

    scenario: Scenario
    raw: dict[str, Any]
    source: str
    cells: tuple[Cell, ...]
    factor_names: tuple[str, ...]
    seed: int
    shard: Shard | None = None

    @property
    def trials(self) -> list[Trial]:
        """The seeded order; a shard keeps the whole plan's order, minus other shards' cells."""
        everything = self.shard.all_cells if self.shard else self.cells
        order = order_trials(everything, self.scenario.rounds, self.scenario.order, self.seed)
        if self.shard is None:
            return order
        mine = {c.id for c in self.cells}
        return [t for t in order if t.cell.id in mine]

    def sharded(self, index: int, count: int, cell_ids: Sequence[str]) -> Plan:
        """This plan restricted to the cells of shard ``index`` of ``count``."""
        if self.shard is not None:
            raise ValueError("a shard's plan cannot be split again")
        wanted = set(cell_ids)
        unknown = wanted - {c.id for c in self.cells}
        if unknown:
            raise ConfigError(
                f"shard {index}/{count}: cells {', '.join(sorted(unknown))} are not in the plan"
            )
        cells = tuple(c for c in self.cells if c.id in wanted)
        return dataclasses.replace(self, cells=cells, shard=Shard(index, count, self.cells))

    @property
    def digest(self) -> str:
        """Identifies the scenario content, so ``--resume`` can refuse a changed file."""
        text = json.dumps(self.raw, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def short_names(self) -> dict[str, str]:
        return short_factor_names(self.factor_names)


# -- the matrix --------------------------------------------------------------------

Block = list[tuple[tuple[str, ...], list[tuple[Any, ...]]]]


def matrix_blocks(matrix: dict | list, source: str, cpu_count: int | None = None) -> list[Block]:
    """Normalise the matrix into blocks of (paths, rows of values)."""
    raw_blocks = matrix if isinstance(matrix, list) else [matrix]
    blocks: list[Block] = []
    for i, raw in enumerate(raw_blocks):
        where = f"matrix[{i}]" if isinstance(matrix, list) else "matrix"
        block: Block = []
        for key, values in raw.items():
            paths = tuple(p.strip() for p in key.split(","))
            if not all(paths):
                raise ConfigError(f"{source}: {where}: key '{key}' has an empty path")
            if not values:
                raise ConfigError(f"{source}: {where}.{key}: expected a non-empty list of values")
            values = host_values(values, cpu_count) if len(paths) == 1 else values
            rows = [_row(v, paths, f"{where}.{key}", source) for v in values]
            block.append((paths, rows))
        _refuse_overlaps([p for paths, _ in block for p in paths], where, source)
        blocks.append(block)
    return blocks or [[]]


def _refuse_overlaps(paths: list[str], where: str, source: str) -> None:
    """Two keys of one block setting the same value would silently overwrite each other."""
    for i, path in enumerate(paths):
        for other in paths[:i]:
            a, b = _same_spelling(path), _same_spelling(other)
            if a == b:
                raise ConfigError(f"{source}: {where}: '{path}' is given twice")
            if a.startswith(b + ".") or b.startswith(a + "."):
                raise ConfigError(f"{source}: {where}: '{path}' and '{other}' overlap")


def _same_spelling(key: str) -> str:
    """``stress-ng`` and ``stress_ng`` (and my.cnf's ``a-b`` and ``a_b``) name one key."""
    return key.replace("-", "_")


def _row(value: Any, paths: tuple[str, ...], where: str, source: str) -> tuple[Any, ...]:
    if len(paths) == 1:
        return (value,)
    if not isinstance(value, list) or len(value) != len(paths):
        raise ConfigError(
            f"{source}: {where}: each value must be a list of {len(paths)} items, "
            f"one per key (got {value!r})"
        )
    return tuple(value)


def expand(
    raw: dict[str, Any],
    blocks: list[Block],
    base: Scenario,
    source: str,
    base_dir: Path | None = None,
) -> list[Cell]:
    cells: list[Cell] = []
    seen: set[str] = set()
    for block in blocks:
        for factors in _cross(block):
            key = json.dumps(sorted(factors, key=lambda f: f[0]), default=str)
            if key in seen:
                continue
            seen.add(key)
            cells.append(_make_cell(len(cells), factors, raw, base, source, base_dir))
    return cells


def _cross(block: Block) -> Iterator[list[tuple[str, Any]]]:
    if not block:
        yield []
        return
    for combo in itertools.product(*(rows for _, rows in block)):
        factors: list[tuple[str, Any]] = []
        for (paths, _), row in zip(block, combo, strict=True):
            factors.extend(zip(paths, row, strict=True))
        yield factors


def _make_cell(
    index: int,
    factors: list[tuple[str, Any]],
    raw: dict,
    base: Scenario,
    source: str,
    base_dir: Path | None = None,
) -> Cell:
    data = copy.deepcopy(raw)
    data.pop("matrix", None)
    server = None
    for path, value in factors:
        if path == "server":
            server = value
        else:
            _deep_set(data, path.split("."), value)
    context = "matrix cell " + " ".join(f"{k}={v}" for k, v in factors) + ": "
    scenario = validate(data, source, context, base_dir)
    names = list(base.server_specs)
    if server is None:
        if len(names) > 1:
            raise ConfigError(
                f"{source}: matrix: several servers are named ({', '.join(names)}); "
                "add a 'server' key to the matrix to choose among them"
            )
        server = names[0]
    elif server not in names:
        raise ConfigError(
            f"{source}: matrix.server: '{server}' is not in servers: (expected one of: "
            f"{', '.join(names)})"
        )
    return Cell(index, tuple(factors), str(server), scenario)


def _deep_set(data: dict, parts: list[str], value: Any) -> None:
    node = data
    for part in parts[:-1]:
        key = _existing_key(node, part)
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[_existing_key(node, parts[-1])] = value


def _existing_key(node: dict, part: str) -> str:
    """The file's own spelling of ``part``, so a matrix value replaces it rather than
    adding a second key (``stress_ng`` next to ``stress-ng``)."""
    if part in node:
        return part
    return next((k for k in node if _same_spelling(str(k)) == _same_spelling(part)), part)


def check_path(path: str, raw: Mapping[str, Any], source: str) -> None:
    """Refuse a matrix key that names nothing in the scenario's schema."""
    if path == "server":
        if not raw.get("servers"):
            raise ConfigError(f"{source}: matrix.server: choosing a server needs named 'servers:'")
        return
    if path in ("matrix", "repeat", "order", "seed", "out", "name") or path.startswith("matrix."):
        raise ConfigError(f"{source}: matrix: '{path}' cannot vary within a run")
    parts = path.split(".")
    if parts[-1] in ("basedir", "kind", "host") and parts[0] in ("server", "servers"):
        raise ConfigError(
            f"{source}: matrix: '{path}' cannot vary: a server's binary, kind and host are "
            "fixed; name one server per binary or host under servers: and put 'server' in "
            "the matrix"
        )
    annotation: Any = Scenario
    for i, part in enumerate(parts):
        child = _child_type(annotation, part)
        if child is None:
            where = ".".join(parts[:i]) or "the scenario"
            raise ConfigError(
                f"{source}: matrix: '{path}' names nothing: '{part}' is not a key of {where}"
                + _expected_keys(annotation, part)
            )
        annotation = child
    _check_names(path, parts, raw, source)


def _check_names(path: str, parts: list[str], raw: Mapping[str, Any], source: str) -> None:
    """The schema allows any server or tool name; the file decides which ones exist."""
    head, name = parts[0], parts[1] if len(parts) > 1 else None
    servers = raw.get("servers") if isinstance(raw.get("servers"), dict) else {}
    if head == "server" and servers:
        raise ConfigError(
            f"{source}: matrix: '{path}': this scenario names its servers under 'servers:' "
            f"(write servers.<name>.{'.'.join(parts[1:])})"
        )
    if head == "servers" and name is not None and name not in servers:
        choices = f"expected one of: {', '.join(servers)}" if servers else "there is no 'servers:'"
        raise ConfigError(
            f"{source}: matrix: '{path}': server '{name}' is not in servers: ({choices})"
        )
    tools = [str(t) for t in raw["workload"]] if isinstance(raw.get("workload"), dict) else []
    if head == "workload" and name is not None and tools and not _spelled_as_one_of(name, tools):
        raise ConfigError(
            f"{source}: matrix: '{path}': the workload is {', '.join(tools)}, not {name}"
        )


def _spelled_as_one_of(name: str, names: list[str]) -> bool:
    return _same_spelling(name) in {_same_spelling(n) for n in names}


def order_trials(cells: Sequence[Cell], repeat: int, order: str, seed: int) -> list[Trial]:
    """Round-robin repetitions in a seeded shuffle, or matrix order with repetitions together."""
    if order == "sequential":
        return [Trial(c, r) for c in cells for r in range(1, repeat + 1)]
    rng = random.Random(seed)
    trials: list[Trial] = []
    for rep in range(1, repeat + 1):
        round_cells = list(cells)
        rng.shuffle(round_cells)
        trials.extend(Trial(c, rep) for c in round_cells)
    return trials
