"""The saved run, typed: run.json as :class:`SavedRun`, trial.json as :class:`TrialResult`.

Every reader and writer of a run directory goes through these classes, so a
format change is made, and migrated, in one place. ``from_json`` takes the
parsed file at any format version this dbrig knows, migrates it to the current
one and checks the fields every reader relies on; ``to_json`` gives the
current format. Blocks that are free-form or checked elsewhere (the resolved
scenario, the environment, the servers' variables, metrics) stay mappings.

Format versions (``format_version`` in run.json and in every trial.json):

1. the first format.
2. trial.json ``commands`` is a mapping by role, ``{"workload": argv,
   "interference": argv}``, instead of a list (the workload's argv first, then
   stress-ng's when the cell has interference). run.json is unchanged; it says 2
   so that an older dbrig refuses a directory that may hold version-2 trials.

Optional run.json keys added without a version bump, because a dbrig that does
not know them still reads the run correctly (it keeps them in ``extra``):

- ``shard`` (``{index, count, cells}``): the run is one shard of a split plan
  (``dbrig run --shard I/N``); its ``cells`` and ``trials`` are that shard's,
  so an older reader sees a complete run of a smaller matrix, which it is.
- ``merged`` (``{pieces, environment_differences, missing}``): the run was put
  together by ``dbrig merge``; an older reader sees an ordinary run.

A run resumed by a newer dbrig may hold trials of both versions: each file is
migrated on its own when read. Files on disk are never rewritten to migrate.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbrig.errors import ConfigError

FORMAT_VERSION = 2
ROLES = ("workload", "interference")  # v1 commands list order

Json = dict[str, Any]


# -- format versions ---------------------------------------------------------------------


def _commands_by_role(data: Json, source: str) -> Json:
    """v1 -> v2: ``commands`` [workload argv, stress-ng argv] becomes {role: argv}."""
    commands = data.get("commands")
    if isinstance(commands, list):
        if len(commands) > len(ROLES):
            raise ConfigError(f"{source}: commands: {len(commands)} entries, expected at most 2")
        data = {**data, "commands": dict(zip(ROLES, commands, strict=False))}
    return data


def _unchanged(data: Json, source: str) -> Json:
    return data


# The migration from each version to the next.
RUN_MIGRATIONS: dict[int, Callable[[Json, str], Json]] = {1: _unchanged}
TRIAL_MIGRATIONS: dict[int, Callable[[Json, str], Json]] = {1: _commands_by_role}


def file_version(data: Mapping[str, Any], source: str) -> int:
    """The file's format_version, refused if missing or newer than this dbrig."""
    version = data.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ConfigError(f"{source}: no format_version: this is not a dbrig run directory")
    if version > FORMAT_VERSION:
        raise ConfigError(
            f"{source}: format_version {version!r} is newer than this dbrig "
            f"understands ({FORMAT_VERSION}): upgrade dbrig"
        )
    return version


def migrate(
    data: Mapping[str, Any],
    version: int,
    steps: Mapping[int, Callable[[Json, str], Json]],
    source: str,
) -> Json:
    current = dict(data)
    for step in range(version, FORMAT_VERSION):
        current = steps[step](current, source)
    current["format_version"] = FORMAT_VERSION
    return current


# -- field checks ------------------------------------------------------------------------


RUN_ID = re.compile(r"[0-9a-f]{8}")


def _run_id(data: Mapping[str, Any], where: str) -> str | None:
    """The run's id names its folders on other hosts: eight hex digits, nothing a path
    could climb out of ``~/.dbrig`` with."""
    run_id = _field(data, "run_id", str, where, None)
    if run_id is not None and not RUN_ID.fullmatch(run_id):
        raise ConfigError(f"{where}: run_id: expected eight hex digits, got {run_id!r}")
    return run_id


def _field(data: Mapping[str, Any], key: str, kinds: Any, source: str, default: Any) -> Any:
    """``data[key]`` checked to be one of ``kinds``; ``default`` when absent or null."""
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _tuple(kinds)):
        want = " or ".join(k.__name__ for k in _tuple(kinds))
        raise ConfigError(f"{source}: {key}: expected {want}, got {type(value).__name__}")
    return value


def _tuple(kinds: Any) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _required(data: Mapping[str, Any], key: str, kinds: Any, source: str) -> Any:
    if data.get(key) is None:
        raise ConfigError(f"{source}: {key}: missing")
    return _field(data, key, kinds, source, None)


def _strings(data: Mapping[str, Any], key: str, source: str) -> tuple[str, ...]:
    values = _field(data, key, list, source, [])
    return tuple(str(v) for v in values)


def _mapping(data: Mapping[str, Any], key: str, source: str) -> dict[str, Any]:
    return dict(_field(data, key, dict, source, {}) or {})


def _extra(data: Mapping[str, Any], cls: type) -> dict[str, Any]:
    """Keys this dbrig does not know (a hand edit, a note): kept when the file is rewritten."""
    known = {f.name for f in dataclasses.fields(cls)} | {"format_version"}
    return {k: v for k, v in data.items() if k not in known}


def _drop_none(data: Json) -> Json:
    return {k: v for k, v in data.items() if v is not None}


# -- run.json ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CellPlan:
    """One cell of the plan as saved: its id, its server and its factor values."""

    cell: str
    server: str = ""
    factors: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any, source: str) -> CellPlan:
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected an object, got {type(data).__name__}")
        return cls(
            cell=str(_required(data, "cell", (str, int), source)),
            server=str(data.get("server") or ""),
            factors=_mapping(data, "factors", source),
        )

    def to_json(self) -> Json:
        return {"cell": self.cell, "server": self.server, "factors": dict(self.factors)}


@dataclass(frozen=True)
class ShardRecord:
    """run.json ``shard``: this run is shard ``index`` of ``count`` and ran these cells."""

    index: int
    count: int
    cells: tuple[str, ...]

    @classmethod
    def from_json(cls, data: Any, source: str) -> ShardRecord | None:
        if data is None:
            return None
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected an object, got {type(data).__name__}")
        index = _required(data, "index", int, source)
        count = _required(data, "count", int, source)
        if not 1 <= index <= count:
            raise ConfigError(f"{source}: index {index} of count {count}: expected 1..count")
        return cls(index, count, _strings(data, "cells", source))

    def to_json(self) -> Json:
        return {"index": self.index, "count": self.count, "cells": list(self.cells)}

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class SavedRun:
    """run.json: what was planned, where it ran, and how far it got.

    Mappings (``scenario``, ``environment``, ``servers`` ...) are the saved JSON
    objects: read them, do not change them in place.
    """

    status: str | None = None  # running, complete, interrupted or aborted
    created_at: str | None = None
    run_id: str | None = None  # drawn at creation: tells runs apart on other hosts
    source: str | None = None  # the scenario file as given
    digest: str | None = None
    seed: int | None = None
    scenario: Mapping[str, Any] = field(default_factory=dict)  # resolved, with defaults
    raw_scenario: Mapping[str, Any] | None = None  # the file as written
    factors: tuple[str, ...] = ()
    factor_labels: Mapping[str, str] = field(default_factory=dict)
    cells: tuple[CellPlan, ...] = ()
    trials: tuple[str, ...] = ()  # the planned order
    environment: Mapping[str, Any] = field(default_factory=dict)
    servers: Mapping[str, Any] = field(default_factory=dict)  # filled as servers start
    finished_at: str | None = None
    trials_saved: int | None = None
    trials_failed: int | None = None
    shard: ShardRecord | None = None  # a run of one shard of the plan (--shard I/N)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str | Path = "run.json") -> SavedRun:
        where = str(source)
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a JSON object")
        data = migrate(data, file_version(data, where), RUN_MIGRATIONS, where)
        cells = _field(data, "cells", list, where, [])
        return cls(
            status=_field(data, "status", str, where, None),
            created_at=_field(data, "created_at", str, where, None),
            run_id=_run_id(data, where),
            source=_field(data, "source", str, where, None),
            digest=_field(data, "digest", str, where, None),
            seed=_field(data, "seed", int, where, None),
            scenario=_mapping(data, "scenario", where),
            raw_scenario=_field(data, "raw_scenario", dict, where, None),
            factors=_strings(data, "factors", where),
            factor_labels=_mapping(data, "factor_labels", where),
            cells=tuple(CellPlan.from_json(c, f"{where}: cells[{i}]") for i, c in enumerate(cells)),
            trials=_strings(data, "trials", where),
            environment=_mapping(data, "environment", where),
            servers=_mapping(data, "servers", where),
            finished_at=_field(data, "finished_at", str, where, None),
            trials_saved=_field(data, "trials_saved", int, where, None),
            trials_failed=_field(data, "trials_failed", int, where, None),
            shard=ShardRecord.from_json(data.get("shard"), f"{where}: shard"),
            extra=_extra(data, cls),
        )

    def to_json(self) -> Json:
        return _drop_none(
            {
                "format_version": FORMAT_VERSION,
                "status": self.status,
                "created_at": self.created_at,
                "run_id": self.run_id,
                "source": self.source,
                "digest": self.digest,
                "seed": self.seed,
                "scenario": dict(self.scenario),
                "raw_scenario": self.raw_scenario,
                "factors": list(self.factors),
                "factor_labels": dict(self.factor_labels),
                "cells": [c.to_json() for c in self.cells],
                "trials": list(self.trials),
                "environment": dict(self.environment),
                "servers": dict(self.servers) or None,  # absent until a server starts
                "finished_at": self.finished_at,
                "trials_saved": self.trials_saved,
                "trials_failed": self.trials_failed,
                "shard": self.shard.to_json() if self.shard else None,
                **self.extra,
            }
        )

    @property
    def name(self) -> str:
        return str(self.scenario.get("name") or "")

    def replace(self, **changes: Any) -> SavedRun:
        return dataclasses.replace(self, **changes)


# -- trial.json --------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialResult:
    """trial.json: one repetition of one cell, as saved."""

    trial: str
    cell: str
    repetition: int
    server: str
    status: str  # ok or failed
    reason: str | None = None
    label: str = ""
    factors: Mapping[str, Any] = field(default_factory=dict)
    started_at: str = ""
    timings: Mapping[str, float] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    effective_config: Mapping[str, Any] = field(default_factory=dict)
    system: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    output_tail: tuple[str, ...] = ()
    commands: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # role -> argv
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str | Path = "trial.json") -> TrialResult:
        where = str(source)
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a JSON object")
        # Trials were always written with a version; a hand-made one without is taken as v1.
        version = file_version({"format_version": 1, **data}, where)
        data = migrate(data, version, TRIAL_MIGRATIONS, where)
        return cls(
            trial=str(_required(data, "trial", str, where)),
            cell=str(_required(data, "cell", (str, int), where)),
            repetition=_required(data, "repetition", int, where),
            server=str(_required(data, "server", str, where)),
            status=_required(data, "status", str, where),
            reason=_field(data, "reason", str, where, None),
            label=_field(data, "label", str, where, ""),
            factors=_mapping(data, "factors", where),
            started_at=_field(data, "started_at", str, where, ""),
            timings=_mapping(data, "timings", where),
            metrics=_mapping(data, "metrics", where),
            effective_config=_mapping(data, "effective_config", where),
            system=_mapping(data, "system", where),
            warnings=_strings(data, "warnings", where),
            output_tail=_strings(data, "output_tail", where),
            commands=_commands(data, where),
            extra=_extra(data, cls),
        )

    def to_json(self) -> Json:
        return {
            "format_version": FORMAT_VERSION,
            "trial": self.trial,
            "cell": self.cell,
            "repetition": self.repetition,
            "server": self.server,
            "label": self.label,
            "factors": dict(self.factors),
            "status": self.status,
            "reason": self.reason,
            "started_at": self.started_at,
            "timings": dict(self.timings),
            "metrics": dict(self.metrics),
            "effective_config": dict(self.effective_config),
            "system": dict(self.system),
            "warnings": list(self.warnings),
            "output_tail": list(self.output_tail),
            "commands": {role: list(argv) for role, argv in self.commands.items()},
            **self.extra,
        }


def _commands(data: Mapping[str, Any], source: str) -> dict[str, tuple[str, ...]]:
    commands = _mapping(data, "commands", source)
    for role, argv in commands.items():
        if not isinstance(argv, list):
            raise ConfigError(f"{source}: commands.{role}: expected a list of arguments")
    return {role: tuple(str(a) for a in argv) for role, argv in commands.items()}
