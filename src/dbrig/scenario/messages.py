"""Pydantic's validation errors as one line: ``key.path: what was expected (got X)``.

Also the schema walk that both these messages and the matrix checks use: which
type a key path leads to, and which keys a mapping accepts.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ValidationError

from dbrig.scenario.model import Scenario

_SHOULD = "Input should be "


def describe_error(exc: ValidationError) -> str:
    """One pydantic error as ``key.path: what was expected (got X)``, on one line.

    Of the errors under the first one's top-level key, the deepest is the most precise:
    a union (``matrix``, ``config`` values) reports one error per member it tried. An
    unknown key comes first: a misspelt key is also a required key missing, and the
    misspelling is what the user has to fix.
    """
    errors = [(e, *_schema_loc(e["loc"])) for e in exc.errors()]
    unknown = [e for e in errors if e[0]["type"] == "extra_forbidden"]
    top = (unknown or errors)[0][1][:1]
    candidates = [e for e in (unknown or errors) if e[1][:1] == top]
    err, loc, parent = max(candidates, key=lambda e: len(e[1]))
    path = _join_loc(loc) or "scenario"
    kind = err["type"]
    got = err.get("input")
    if kind == "extra_forbidden":
        return f"{path}: unknown key{_expected_keys(parent, str(loc[-1]))}"
    if kind == "missing":
        return f"{path}: required key is missing"
    if kind == "union_tag_invalid":
        ctx = err.get("ctx", {})
        key = str(ctx.get("discriminator", "kind")).strip("'")
        expected = str(ctx.get("expected_tags", "")).replace("'", "")
        return f"{_join_loc([*loc, key])}: expected one of: {expected} (got {ctx.get('tag')!r})"
    if kind == "invalid_key":
        return f"{_join_loc(loc[:-1]) or 'scenario'}: keys must be strings (got {got!r})"
    message = err["msg"].removeprefix("Value error, ")
    alternatives = [e["msg"] for e, other, _ in errors if other == loc]
    if len(alternatives) > 1 and all(m.startswith(_SHOULD) for m in alternatives):
        message = _SHOULD + _or_list([m.removeprefix(_SHOULD) for m in alternatives])
    shown = "" if isinstance(got, dict | list) or kind.startswith("value_error") else _got(got)
    return " ".join(f"{path}: {message}{shown}".split("\n"))


def _got(value: Any) -> str:
    text = repr(value)
    return f" (got {text if len(text) <= 60 else text[:57] + '...'})"


def _or_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _schema_loc(loc: Sequence[str | int]) -> tuple[list[str | int], Any]:
    """Pydantic's error location without its union tags, and the type holding the last key.

    A union adds the member it tried (``managed``, ``str``, ``dict[str,list[any]]``) to the
    location; walking the schema alongside tells those apart from real keys, so a server
    named ``managed`` keeps its name.
    """
    annotation: Any = Scenario
    parent: Any = None
    out: list[str | int] = []
    for part in loc:
        members = _unwrap(annotation) if annotation is not None else []
        if len(members) > 1 and isinstance(part, str):
            member = _member_for_tag(part, members)
            if member is not None:
                annotation = member
                continue
            if "[" in part:  # a tag this walk cannot match to a member
                continue
        out.append(part)
        parent = annotation
        annotation = _child_type(annotation, part) if annotation is not None else None
    return out, parent


def _member_for_tag(tag: str, members: list[Any]) -> Any:
    for member in members:
        if isinstance(member, type) and issubclass(member, BaseModel) and tag in _tags(member):
            return member
        origin = typing.get_origin(member) or member
        if tag.split("[")[0] == getattr(origin, "__name__", "").lower():
            return member
    return None


def _tags(model: type[BaseModel]) -> set[str]:
    """The names a union may give this member: its class name and its discriminator
    (a field holding a single literal, like ``kind: Literal["managed"]``)."""
    tags = {model.__name__}
    for field in model.model_fields.values():
        values = typing.get_args(field.annotation)
        if typing.get_origin(field.annotation) is Literal and len(values) == 1:
            tags.add(str(values[0]))
    return tags


def _join_loc(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _child_type(model: Any, part: str | int) -> Any:
    for candidate in _unwrap(model):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            for name, field in candidate.model_fields.items():
                if part in (name, field.alias):
                    return field.annotation
        origin = typing.get_origin(candidate)
        if origin is dict and isinstance(part, str):
            return typing.get_args(candidate)[1]
        if origin in (list, tuple) and isinstance(part, int):
            return typing.get_args(candidate)[0]
    return None


def _unwrap(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [a for arg in typing.get_args(annotation) for a in _unwrap(arg)]
    return [annotation]


def _expected_keys(annotation: Any, unknown: str | None = None) -> str:
    """`` (expected one of: a, b, c)`` for a mapping's keys, led by the closest to an
    ``unknown`` one (``did you mean 'threads'?``) when one is close."""
    keys = list(
        dict.fromkeys(
            field.alias or name
            for c in _unwrap(annotation)
            if isinstance(c, type) and issubclass(c, BaseModel)
            for name, field in c.model_fields.items()
        )
    )
    if not keys:
        return ""
    close = difflib.get_close_matches(unknown, keys, n=1, cutoff=0.8) if unknown else []
    guess = f"; did you mean '{close[0]}'?" if close else ""
    return f"{guess} (expected one of: {', '.join(keys)})"
