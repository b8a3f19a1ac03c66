"""``--set KEY=VALUE``: change one scenario key for this run without editing the file.

KEY is a dotted path as in ``matrix:`` (``workload.sysbench.time``, ``warmup``,
``soak.drift_threshold_pct_per_h``); VALUE is read as YAML (``5`` is a number,
``true`` a boolean, ``[1, 2]`` a list). Overrides are applied to the raw scenario
before validation, so a wrong key or value fails exactly as it would in the file,
and the saved ``raw_scenario`` (what ``--resume`` replays) is what ran.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from dbrig.errors import ConfigError


def parse_override(text: str) -> tuple[str, Any]:
    """``"a.b=5"`` -> ``("a.b", 5)``; raises ConfigError naming --set."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text}: expected KEY=VALUE with a dotted KEY (warmup=5)")
    try:
        return key, yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        raise ConfigError(f"--set {text}: the value is not valid YAML") from None


def apply_overrides(raw: Mapping[str, Any], overrides: Iterable[tuple[str, Any]]) -> dict:
    """A copy of ``raw`` with each override set; missing intermediate mappings are made."""
    result = copy.deepcopy(dict(raw))
    for key, value in overrides:
        _check_not_a_factor(result, key)
        node = result
        parts = key.split(".")
        for depth, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                where = ".".join(parts[: depth + 1])
                raise ConfigError(f"--set {key}: {where} is not a mapping, cannot set a key in it")
            node = child
        node[parts[-1]] = value
    return result


def _check_not_a_factor(raw: Mapping[str, Any], key: str) -> None:
    """A key the matrix varies would be overwritten by every cell: refuse, do not ignore."""
    matrix = raw.get("matrix") or {}
    blocks = matrix if isinstance(matrix, list) else [matrix]
    for block in blocks:
        for names in block if isinstance(block, dict) else ():
            if key in (name.strip() for name in str(names).split(",")):
                raise ConfigError(
                    f"--set {key}: is a matrix factor (the matrix sets it per cell); "
                    "change the matrix in the file instead"
                )
