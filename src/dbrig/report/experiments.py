"""The matrix as experiments: which cells belong together on one chart, and on which axes.

A matrix given as a list of blocks is a list of experiments (seed 000: "0..N
cores at 90 %", then "N cores at 20..100 %"): each block gets its own charts.
Keys varied together (``"load_type, number_of_queries"``) are one factor with a
joint label. Both come from the matrix as written (run.json ``raw_scenario``),
so runs saved before this module existed get them too; a run without it (or
whose cells do not match it) is one experiment with one factor per path.

A cell is left off a factor's axis when that factor has no effect in it: an
interference tool that does nothing in the cell (stress-ng with 0 workers), and
would do nothing at any other value of the factor the run has, does not make the
cell a point of its ``cpu_load`` curve. The tool itself judges (``active``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbrig.factors import host_values
from dbrig.store import SavedRun
from dbrig.tools.registry import INTERFERENCE_TOOLS

Row = tuple[str, ...]


@dataclass(frozen=True)
class FactorGroup:
    """One or more matrix paths varied together, shown as one factor."""

    paths: tuple[str, ...]
    label: str  # "load_type, number_of_queries"

    @property
    def joint(self) -> bool:
        return len(self.paths) > 1

    def value(self, factors: Mapping[str, Any]) -> str:
        """The cell's value of this factor as labels show it: ``key, 100000``."""
        return ", ".join(plain_value(factors.get(p)) for p in self.paths)


@dataclass(frozen=True)
class Experiment:
    """One block of the matrix: its factors and its cells, in matrix order."""

    number: int  # 1-based
    groups: tuple[FactorGroup, ...]
    cells: tuple[str, ...]


def plain_value(value: Any) -> str:
    """A factor value as the labels show it: 4 not 4.0, null for None, nothing for NaN
    (a table's cell whose matrix block does not set the factor)."""
    if isinstance(value, float) and math.isnan(value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None:
        return "null"
    return str(value)


def experiments(saved: SavedRun, labels: Mapping[str, str]) -> list[Experiment]:
    """The run's experiments; one experiment of every cell when the matrix cannot tell."""
    cells = [(c.cell, dict(c.factors)) for c in saved.cells]
    blocks = _written_blocks(saved)
    if blocks:
        found = _assign(blocks, cells, labels)
        if found is not None:
            return found
    groups = tuple(FactorGroup((f,), labels.get(f, f)) for f in saved.factors)
    return [Experiment(1, groups, tuple(c for c, _ in cells))]


def _written_blocks(saved: SavedRun) -> list[list[tuple[tuple[str, ...], set[Row]]]]:
    """Each block of the matrix as written: (paths, the rows of values it allows)."""
    matrix = (saved.raw_scenario or {}).get("matrix")
    raw = matrix if isinstance(matrix, list) else [matrix] if isinstance(matrix, dict) else []
    cores = (saved.environment.get("host") or {}).get("cpu_count")
    blocks = []
    for block in raw:
        if not isinstance(block, dict):
            return []
        parsed = []
        for key, values in block.items():
            paths = tuple(p.strip() for p in str(key).split(","))
            if not isinstance(values, list):
                return []
            if len(paths) == 1:
                rows = {(plain_value(v),) for v in host_values(values, cores)}
            else:
                rows = {tuple(map(plain_value, v)) for v in values if isinstance(v, list)}
            parsed.append((paths, rows))
        blocks.append(parsed)
    return blocks


def _assign(
    blocks: list[list[tuple[tuple[str, ...], set[Row]]]],
    cells: list[tuple[str, dict[str, Any]]],
    labels: Mapping[str, str],
) -> list[Experiment] | None:
    """Cells per block (a cell two blocks share is in both); None if a cell fits no block."""
    members: list[list[str]] = [[] for _ in blocks]
    for cell, factors in cells:
        fits = [i for i, block in enumerate(blocks) if _fits(block, factors)]
        if not fits:
            return None
        for i in fits:
            members[i].append(cell)
    out = []
    for i, block in enumerate(blocks):
        groups = tuple(
            FactorGroup(paths, ", ".join(labels.get(p, p) for p in paths)) for paths, _ in block
        )
        if members[i]:
            out.append(Experiment(i + 1, groups, tuple(members[i])))
    return out


def _fits(block: list[tuple[tuple[str, ...], set[Row]]], factors: Mapping[str, Any]) -> bool:
    paths = [p for paths, _ in block for p in paths]
    if set(paths) != set(factors):
        return False
    return all(tuple(plain_value(factors[p]) for p in ps) in rows for ps, rows in block)


# --------------------------------------------------------------------------- no effect


class EffectJudge:
    """Whether a factor changes anything in a cell (cached: a run may have 1000 cells)."""

    def __init__(self, scenario: Mapping[str, Any]) -> None:
        self.interference = dict(scenario.get("interference") or {})
        self._active: dict[str, bool] = {}

    def has_effect(
        self, group: FactorGroup, factors: Mapping[str, Any], values: Iterable[Row]
    ) -> bool:
        """False when every path of ``group`` sets an interference tool that is idle in
        this cell and stays idle at each of ``values`` (the group's values in the run)."""
        tools = {self._tool_of(p) for p in group.paths}
        if None in tools or len(tools) != 1:
            return True
        key = next(iter(tools))
        assert key is not None
        if self._is_active(key, factors):
            return True
        for row in values:
            changed = dict(factors) | dict(zip(group.paths, row, strict=True))
            if self._is_active(key, changed):
                return True
        return False

    def _tool_of(self, path: str) -> str | None:
        parts = path.split(".")
        if len(parts) < 3 or parts[0] != "interference":
            return None
        key = _registry_key(parts[1])
        return key if key is not None and self._block_key(key) is not None else None

    def _block_key(self, key: str) -> str | None:
        return next((k for k in self.interference if _registry_key(k) == key), None)

    def _is_active(self, key: str, factors: Mapping[str, Any]) -> bool:
        block_key = self._block_key(key)
        params = dict(self.interference.get(block_key or key) or {})
        prefixes = {f"interference.{block_key}.", f"interference.{key}."}
        for path, value in factors.items():
            for prefix in prefixes:
                if path.startswith(prefix):
                    params[path[len(prefix) :]] = _typed(value)
        cache_key = key + json.dumps(params, sort_keys=True, default=str)
        if cache_key not in self._active:
            tool = INTERFERENCE_TOOLS[key]
            try:
                self._active[cache_key] = tool(tool.params_model.model_validate(params)).active
            except ValueError:  # a block an older dbrig accepted: assume it did something
                self._active[cache_key] = True
        return self._active[cache_key]


def _registry_key(key: str) -> str | None:
    return next(
        (k for k in INTERFERENCE_TOOLS if k.replace("_", "-") == key.replace("_", "-")), None
    )


def _typed(value: Any) -> Any:
    """A factor value as the cell had it (rows compare as text; the model wants numbers)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def group_rows(group: FactorGroup, cells: Sequence[Mapping[str, Any]]) -> list[Row]:
    """The group's distinct values over ``cells``, in order of first appearance, typed."""
    rows = dict.fromkeys(tuple(_hashable(c.get(p)) for p in group.paths) for c in cells)
    return list(rows)


def _hashable(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, list | dict) else value
