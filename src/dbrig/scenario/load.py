"""Scenario files: YAML in, a validated, expanded :class:`Plan` out.

Every mistake is reported before anything runs, as one line naming the file,
the key path and what was expected.
"""

from __future__ import annotations

import random
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from dbrig.errors import ConfigError
from dbrig.scenario.matrix import Cell, Plan, check_path, expand, matrix_blocks
from dbrig.scenario.overrides import apply_overrides
from dbrig.scenario.validate import validate
from dbrig.tools.registry import workload_for

_MERGE_TAG = "tag:yaml.org,2002:merge"


def _refuse_duplicate_keys(
    node: yaml.Node, loader: yaml.SafeLoader, path: str = "", walked: set[int] | None = None
) -> None:
    """PyYAML silently keeps the last of two equal keys; refuse them, naming the key path."""
    walked = set() if walked is None else walked
    if id(node) in walked:  # an alias seen before (or a recursive one)
        return
    walked.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                _refuse_duplicate_keys(value_node, loader, path, walked)
                continue
            key = loader.construct_object(key_node, deep=True)
            where = f"{path}.{key}" if path else str(key)
            if isinstance(key, typing.Hashable):
                if key in seen:
                    line = key_node.start_mark.line + 1
                    raise ConfigError(f"line {line}: {where}: key is given twice")
                seen.add(key)
            _refuse_duplicate_keys(value_node, loader, where, walked)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _refuse_duplicate_keys(item, loader, f"{path}[{i}]", walked)


def _parse_yaml(text: str) -> Any:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _refuse_duplicate_keys(node, loader)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such scenario file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (not valid UTF-8)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = _parse_yaml(text)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.message}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}: {where}YAML syntax error: {problem}") from None
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise ConfigError(
            f"{path}: expected a mapping of scenario keys at the top level, got {got}"
        )
    return data


def load(
    path: Path | str,
    seed: int | None = None,
    overrides: Iterable[tuple[str, Any]] = (),
) -> Plan:
    """Read, validate and expand a scenario file; ``seed`` wins over the file's own, and
    ``overrides`` (``--set``, see :mod:`~dbrig.scenario.overrides`) over its keys."""
    path = Path(path)
    raw = apply_overrides(read_yaml(path), overrides)
    return plan_from_dict(raw, source=str(path), seed=seed)


def plan_from_dict(
    raw: dict[str, Any],
    *,
    source: str = "<scenario>",
    seed: int | None = None,
    cpu_count: int | None = None,
    base_dir: Path | None = None,
) -> Plan:
    """Validate and expand; ``seed`` (a resumed run's saved one) wins over the file's,
    ``cpu_count`` (the saved host's) sizes ``nproc`` matrix values instead of this host's,
    and ``base_dir`` (a resumed run's first scenario folder) is what paths are relative to."""
    scenario = validate(raw, source, base_dir=base_dir)
    blocks = matrix_blocks(scenario.matrix, source, cpu_count)
    for block in blocks:
        for paths, _ in block:
            for p in paths:
                check_path(p, raw, source)
    cells = expand(raw, blocks, scenario, source, base_dir)
    _refuse_mixed_server_needs(cells, source)
    names = tuple(dict.fromkeys(k for c in cells for k, _ in c.factors))
    if seed is None:
        seed = scenario.seed
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    return Plan(scenario, raw, source, tuple(cells), names, seed)


def _refuse_mixed_server_needs(cells: list[Cell], source: str) -> None:
    """One run either starts servers or starts none: its cells must agree."""
    needs: dict[bool, str] = {}
    for cell in cells:
        tool = workload_for(cell.scenario.workload)
        needs.setdefault(tool.needs_server, tool.title)
    if len(needs) > 1:
        raise ConfigError(
            f"{source}: matrix: {needs[False]} needs no server but {needs[True]} needs one; "
            "put them in two scenarios"
        )
