"""Reference tables in docs/, rendered from the code so the two never drift apart.

- docs/metrics.md: every results.csv column, from the metric registry;
- docs/scenario.md: a tool block's keys (default, type, meaning), from its params model,
  for each tool whose section there holds the markers ``<key> keys``.

Each table sits between a ``<!-- NAME: generated ... -->`` marker and
``<!-- end of NAME -->``; ``scripts/update-reference-docs.py`` rewrites them and a
unit test fails when a page is out of date.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from dbrig.metrics import REGISTRY, Metric, direction_of
from dbrig.tools.registry import INTERFERENCE_TOOLS, WORKLOAD_TOOLS

# --------------------------------------------------------------------------- metrics


def _flags(metric: Metric) -> str:
    flags = []
    if metric.headline:
        flags.append("table")
    if metric.compared:
        flags.append("compared")
    if metric.per_interval:
        flags.append("per interval")
    return ", ".join(flags)


def _direction(metric: Metric) -> str:
    """As compare decides it: the stated direction, else the naming rules."""
    direction = direction_of(metric.name)
    return f"{direction.value} is better" if direction else ""


def metrics_markdown() -> str:
    """One row per results.csv column: name, label, unit, direction, producer, meaning."""
    rows = [
        [
            f"`{m.name}`",
            m.label.replace("{pct}", "N"),
            m.unit,
            _direction(m),
            m.source,
            _flags(m),
            m.description,
        ]
        for m in REGISTRY
    ]
    return _table(["column", "label", "unit", "direction", "produced by", "shown", "meaning"], rows)


# --------------------------------------------------------------------------- tool keys


def keys_markdown(model: type[BaseModel]) -> str:
    """One row per key of a scenario block: its default, type and meaning."""
    rows = [
        [
            f"`{name}`",
            _default(field.default, field.default_factory),
            _type(field.annotation),
            field.description or "",
        ]
        for name, field in model.model_fields.items()
    ]
    return _table(["key", "default", "type", "meaning"], rows)


def _default(value: object, factory: Callable[[], object] | None) -> str:
    if value is PydanticUndefined:
        if factory is None:
            return "required"
        value = factory()
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict) and not value:
        return "`{}`"
    if isinstance(value, tuple | list) and not value:
        return "`[]`"
    return f"`{value}`"


def _type(annotation: object) -> str:
    """``int | tuple[int, ...] | None`` as "integer, or a list of integer"."""
    parts = [a for a in _union(annotation) if a is not type(None)]
    return ", or ".join(_one_type(a) for a in parts)


def _union(annotation: object) -> tuple[object, ...]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


_PLAIN = {bool: "boolean", int: "integer", float: "number", str: "text"}


def _one_type(annotation: object) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " / ".join(str(a) for a in typing.get_args(annotation))
    if origin in (tuple, list):
        inner = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return "a list of " + (" or ".join(_one_type(a) for a in inner) or "values")
    if origin is dict:
        return "a mapping"
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "file path"
    if isinstance(annotation, type) and annotation in _PLAIN:
        return _PLAIN[annotation]
    return getattr(annotation, "__name__", str(annotation))


# --------------------------------------------------------------------------- pages


def _table(headings: list[str], rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(headings), line(["---"] * len(headings)), *map(line, rows)])


def _keys_table(model: type[BaseModel]) -> Callable[[], str]:
    return lambda: keys_markdown(model)


# Every tool's keys table, "<key> keys": generated where docs/scenario.md has its markers
# (the tools whose keys are not described by hand there).
TOOL_KEYS: dict[str, tuple[str, Callable[[], str]]] = {
    f"{key} keys": ("scenario.md", _keys_table(tool.params_model))
    for key, tool in (*WORKLOAD_TOOLS.items(), *INTERFERENCE_TOOLS.items())
}
GENERATED: dict[str, tuple[str, Callable[[], str]]] = {
    "metrics table": ("metrics.md", metrics_markdown),
    **TOOL_KEYS,
}


def _begin(name: str) -> str:
    return f"<!-- {name}: generated by scripts/update-reference-docs.py, do not edit -->"


def _end(name: str) -> str:
    return f"<!-- end of {name} -->"


def render_page(page: str, names: list[str]) -> str:
    """``page`` with each named table between its markers replaced by the current one."""
    for name in names:
        begin, end = _begin(name), _end(name)
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
        if not pattern.search(page):
            if name in TOOL_KEYS:
                continue  # this tool's keys are described by hand
            raise ValueError(f"no '{begin}' ... '{end}' markers for {name}")
        replacement = f"{begin}\n{GENERATED[name][1]()}\n{end}"
        page = pattern.sub(lambda _, text=replacement: text, page)
    return page


def pages() -> dict[str, list[str]]:
    """docs/ file name -> the generated tables it holds."""
    found: dict[str, list[str]] = {}
    for name, (page, _) in GENERATED.items():
        found.setdefault(page, []).append(name)
    return found
