"""A scenario mapping to a validated :class:`Scenario`, with one-line errors."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dbrig.errors import ConfigError
from dbrig.scenario.messages import describe_error
from dbrig.scenario.model import Scenario


def validate(
    raw: Mapping[str, Any], source: str, context: str = "", base_dir: Path | None = None
) -> Scenario:
    """``base_dir``: what paths in it are relative to (a resumed run's: its scenario's
    folder when it started); default, the folder of ``source``."""
    base = base_dir if base_dir is not None else _folder_of(source)
    try:
        return Scenario.model_validate(_with_default_kinds(raw), context={"base_dir": base})
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


def _folder_of(source: str) -> Path | None:
    """Paths in a scenario (a Lua script) are relative to its file; None for a mapping
    that came from no file (then they are relative to the working directory)."""
    path = Path(source)
    return path.parent if path.is_file() else None
