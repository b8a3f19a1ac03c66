"""Scenario files: YAML in, a validated frozen :class:`Scenario` and its cells out.

A scenario names its server(s), one workload keyed by its tool, optional
interference, sampling, a parameter matrix and repetitions. Every mistake is
reported before anything runs, as one line naming the file, the key path and
what was expected.

The matrix
----------
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
import hashlib
import itertools
import json
import os
import random
import re
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from dbrig.errors import ConfigError
from dbrig.system import SystemSettings
from dbrig.tools.mysqlslap import MysqlslapParams
from dbrig.tools.stress_ng import StressNgParams
from dbrig.tools.sysbench import SysbenchParams

Scalar = str | int | float | bool | None
RESERVED_SERVER_SETTINGS = frozenset(
    {
        "datadir",
        "socket",
        "port",
        "pid_file",
        "log_error",
        "bind_address",
        "basedir",
        "user",
        "innodb_data_home_dir",
        "innodb_log_group_home_dir",
        "innodb_undo_directory",
        "aria_log_dir_path",
        "tmpdir",
    }
)
DEFAULT_SERVER = "default"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class ManagedServer(_Frozen):
    """A private server that dbrig initialises, starts, stops and restores."""

    kind: Literal["managed"] = "managed"
    basedir: Path | None = Field(
        None, description="installation prefix holding bin/ or sbin/ mariadbd or mysqld"
    )
    config: dict[str, Scalar] = Field(
        default_factory=dict,
        description="my.cnf [mysqld] settings, passed through unchanged (null = bare option)",
    )
    cpus: list[Annotated[int, Field(ge=0)]] | None = Field(
        None, description="pin the server to these cores (emulates a smaller instance)"
    )
    port: int | None = Field(None, ge=1024, le=65535, description="fixed TCP port on 127.0.0.1")
    startup_timeout: float = Field(120.0, gt=0, description="seconds to wait for it to answer")

    @field_validator("config")
    @classmethod
    def _no_sandbox_paths(cls, config: dict[str, Scalar]) -> dict[str, Scalar]:
        """The sandbox's own files and addresses are dbrig's: a scenario that moved the datadir
        would have dbrig start, write to and restore a directory it did not create."""
        for key in config:
            if key.replace("-", "_").lower() in RESERVED_SERVER_SETTINGS:
                raise ValueError(
                    f"'{key}' is set by dbrig for its sandbox (use port: for a fixed port)"
                )
        return config


class ExternalServer(_Frozen):
    """A server dbrig only connects to; it cannot restore its data."""

    kind: Literal["external"]
    host: str = "127.0.0.1"
    port: int = Field(3306, ge=1, le=65535)
    socket: str | None = None
    user: str
    password_env: str | None = Field(None, description="environment variable holding the password")
    defaults_file: Path | None = Field(None, description="client defaults file with the password")
    reset: Literal["none", "reprepare"] = Field(
        description=(
            "between trials: 'none' prepares each data set once, 'reprepare' runs the "
            "workload's cleanup + prepare before every trial"
        )
    )
    prepare: bool = Field(
        True, description="false: the data is already there; dbrig never drops or loads it"
    )

    @model_validator(mode="after")
    def _one_password_source(self) -> ExternalServer:
        if self.password_env and self.defaults_file:
            raise ValueError("give password_env or defaults_file, not both")
        return self


ServerSpec = Annotated[ManagedServer | ExternalServer, Field(discriminator="kind")]


class Workload(_Frozen):
    """Exactly one tool block."""

    sysbench: SysbenchParams | None = None
    mysqlslap: MysqlslapParams | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Workload:
        given = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(given) != 1:
            names = ", ".join(type(self).model_fields)
            raise ValueError(f"name exactly one workload tool ({names}); got {len(given)}")
        return self

    @property
    def tool(self) -> str:
        return next(n for n in type(self).model_fields if getattr(self, n) is not None)

    @property
    def params(self) -> BaseModel:
        return getattr(self, self.tool)


class Interference(_Frozen):
    stress_ng: StressNgParams | None = Field(None, alias="stress-ng")


class Sampling(_Frozen):
    enabled: bool = True
    interval: float = Field(1.0, ge=0.05, le=60, description="seconds between samples")
    devices: list[str] | None = Field(
        None, description="block devices to sample (default: the datadir's device)"
    )


class Scenario(_Frozen):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    server: ServerSpec | None = None
    servers: dict[str, ServerSpec] | None = None
    workload: Workload
    interference: Interference = Interference()
    sampling: Sampling = Sampling()
    system: SystemSettings = SystemSettings()
    matrix: dict[str, list[Any]] | list[dict[str, list[Any]]] = Field(default_factory=dict)
    repeat: int = Field(1, ge=1, le=1000)
    warmup: int = Field(0, ge=0, description="seconds of load run and discarded before measuring")
    order: Literal["shuffled", "sequential"] = "shuffled"
    seed: int | None = None
    out: str = "runs"

    @model_validator(mode="after")
    def _server_or_servers(self) -> Scenario:
        if self.server is not None and self.servers is not None:
            raise ValueError("give 'server' or 'servers', not both")
        if self.servers is not None and not self.servers:
            raise ValueError("'servers' names no server")
        return self

    @property
    def server_specs(self) -> dict[str, ManagedServer | ExternalServer]:
        if self.servers:
            return dict(self.servers)
        return {DEFAULT_SERVER: self.server or ManagedServer()}


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
class Plan:
    scenario: Scenario
    raw: dict[str, Any]
    source: str
    cells: tuple[Cell, ...]
    factor_names: tuple[str, ...]
    seed: int

    @property
    def trials(self) -> list[Trial]:
        return order_trials(self.cells, self.scenario.repeat, self.scenario.order, self.seed)

    @property
    def digest(self) -> str:
        """Identifies the scenario content, so ``--resume`` can refuse a changed file."""
        text = json.dumps(self.raw, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def short_names(self) -> dict[str, str]:
        return short_factor_names(self.factor_names)


# -- loading -----------------------------------------------------------------------

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


def load(path: Path | str) -> Plan:
    """Read, validate and expand a scenario file."""
    path = Path(path)
    return plan_from_dict(read_yaml(path), source=str(path))


def plan_from_dict(
    raw: dict[str, Any],
    *,
    source: str = "<scenario>",
    seed: int | None = None,
    cpu_count: int | None = None,
) -> Plan:
    """Validate and expand; ``seed`` (a resumed run's saved one) wins over the file's, and
    ``cpu_count`` (the saved host's) sizes ``nproc`` matrix values instead of this host's."""
    scenario = validate(raw, source)
    blocks = matrix_blocks(scenario.matrix, source, cpu_count)
    for block in blocks:
        for paths, _ in block:
            for p in paths:
                check_path(p, raw, source)
    cells = expand(raw, blocks, scenario, source)
    names = tuple(dict.fromkeys(k for c in cells for k, _ in c.factors))
    if seed is None:
        seed = scenario.seed
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    return Plan(scenario, raw, source, tuple(cells), names, seed)


def validate(raw: Mapping[str, Any], source: str, context: str = "") -> Scenario:
    try:
        return Scenario.model_validate(_with_default_kinds(raw))
    except ValidationError as exc:
        raise ConfigError(f"{source}: {context}{describe_error(exc)}") from None
    except ConfigError as exc:  # a driver's cross-field check, already naming its key
        raise ConfigError(f"{source}: {context}{exc.message}", hint=exc.hint) from None


def _with_default_kinds(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``kind: managed`` is the default; the discriminated union needs it spelled out."""
    data = copy.deepcopy(dict(raw))
    if isinstance(data.get("server"), dict):
        data["server"].setdefault("kind", "managed")
    if isinstance(data.get("servers"), dict):
        for spec in data["servers"].values():
            if isinstance(spec, dict):
                spec.setdefault("kind", "managed")
    return data


_SHOULD = "Input should be "


def describe_error(exc: ValidationError) -> str:
    """One pydantic error as ``key.path: what was expected (got X)``, on one line.

    Of the errors under the first one's top-level key, the deepest is the most precise:
    a union (``matrix``, ``config`` values) reports one error per member it tried.
    """
    errors = [(e, *_schema_loc(e["loc"])) for e in exc.errors()]
    top = errors[0][1][:1]
    candidates = [e for e in errors if e[1][:1] == top]
    err, loc, parent = max(candidates, key=lambda e: len(e[1]))
    path = _join_loc(loc) or "scenario"
    kind = err["type"]
    got = err.get("input")
    if kind == "extra_forbidden":
        return f"{path}: unknown key{_expected_keys(parent)}"
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


_HOST_RANGE = re.compile(r"^\s*(\d+|nproc)\s*\.\.\s*(\d+|nproc)\s*$")


def host_values(values: list[Any], cpu_count: int | None = None) -> list[Any]:
    """Values sized to this machine: ``nproc`` is its core count, ``"0..nproc"`` a range.

    So one scenario file scales seed 000's "0, 2, 4, 6, 8 busy cores" to any host.
    """
    cores = cpu_count or os.cpu_count() or 1
    out: list[Any] = []
    for value in values:
        match = _HOST_RANGE.match(value) if isinstance(value, str) else None
        if match:
            low, high = (cores if g == "nproc" else int(g) for g in match.groups())
            out.extend(range(low, high + 1))
        elif value == "nproc":
            out.append(cores)
        else:
            out.append(value)
    return out


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


def expand(raw: dict[str, Any], blocks: list[Block], base: Scenario, source: str) -> list[Cell]:
    cells: list[Cell] = []
    seen: set[str] = set()
    for block in blocks:
        for factors in _cross(block):
            key = json.dumps(sorted(factors, key=lambda f: f[0]), default=str)
            if key in seen:
                continue
            seen.add(key)
            cells.append(_make_cell(len(cells), factors, raw, base, source))
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
    index: int, factors: list[tuple[str, Any]], raw: dict, base: Scenario, source: str
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
    scenario = validate(data, source, context)
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
    if parts[-1] in ("basedir", "kind") and parts[0] in ("server", "servers"):
        raise ConfigError(
            f"{source}: matrix: '{path}' cannot vary: a server's binary and kind are fixed; "
            "name one server per binary under servers: and put 'server' in the matrix"
        )
    annotation: Any = Scenario
    for i, part in enumerate(parts):
        child = _child_type(annotation, part)
        if child is None:
            where = ".".join(parts[:i]) or "the scenario"
            raise ConfigError(
                f"{source}: matrix: '{path}' names nothing: '{part}' is not a key of {where}"
                + _expected_keys(annotation)
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


def _expected_keys(annotation: Any) -> str:
    keys = [
        field.alias or name
        for c in _unwrap(annotation)
        if isinstance(c, type) and issubclass(c, BaseModel)
        for name, field in c.model_fields.items()
    ]
    return f" (expected one of: {', '.join(dict.fromkeys(keys))})" if keys else ""


def short_factor_names(paths: Sequence[str]) -> dict[str, str]:
    """The shortest dotted suffix that tells each factor apart: ``threads``, ``cpu_load``."""
    names: dict[str, str] = {}
    for path in paths:
        parts = path.split(".")
        for n in range(1, len(parts) + 1):
            candidate = ".".join(parts[-n:])
            clashes = [p for p in paths if p != path and p.split(".")[-n:] == parts[-n:]]
            if not clashes:
                names[path] = candidate
                break
        else:
            names[path] = path
    return names


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
