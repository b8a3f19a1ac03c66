"""The scenarios shipped inside the package: listed, found by name, copied out.

They live in the repository's ``scenarios/`` folder; ``src/dbrig/scenarios`` is a
symlink to it, so the checkout and an installed wheel find them at the same
place, ``dbrig/scenarios/``. A shipped scenario runs from there, in place, so a
file it names relative to itself sits beside it as in the repository.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dbrig.errors import ConfigError
from dbrig.scenario.load import read_yaml
from dbrig.util.files import write_bytes_atomic

SUFFIX = ".yaml"


@dataclass(frozen=True)
class ShippedScenario:
    name: str
    path: Path
    description: str


@dataclass(frozen=True)
class ScenarioSource:
    """What ``dbrig run NAME`` runs: a file given by path, or a shipped scenario."""

    path: Path
    shipped: bool


def shipped_dir() -> Path:
    # Wheels install unpacked, so the package's data is an ordinary folder.
    return Path(str(resources.files("dbrig") / "scenarios")).resolve()


def shipped_names() -> list[str]:
    folder = shipped_dir()
    if not folder.is_dir():
        return []
    return sorted(p.name.removesuffix(SUFFIX) for p in folder.glob(f"*{SUFFIX}") if p.is_file())


def shipped_path(name: str) -> Path | None:
    """The shipped file called ``name`` (``quickstart`` or ``quickstart.yaml``), if any."""
    stem = name.removesuffix(SUFFIX)
    if stem in shipped_names():
        return shipped_dir() / f"{stem}{SUFFIX}"
    return None


def shipped_scenarios() -> list[ShippedScenario]:
    """Every shipped scenario with its own one-line description (or its name)."""
    return [
        ShippedScenario(name, path, _one_line(path))
        for name in shipped_names()
        for path in [shipped_dir() / f"{name}{SUFFIX}"]
    ]


def _one_line(path: Path) -> str:
    try:
        raw = read_yaml(path)
    except ConfigError as exc:
        return f"(unreadable: {exc})"
    text = str(raw.get("description") or raw.get("name") or "")
    return " ".join(text.split())


def resolve(name_or_path: str | Path) -> ScenarioSource:
    """A file path always wins; else a shipped scenario by name; else one line, exit 2."""
    given = Path(name_or_path)
    if given.exists():
        return ScenarioSource(given, shipped=False)
    text = str(name_or_path)
    found = None if "/" in text else shipped_path(text)
    if found is not None:
        return ScenarioSource(found, shipped=True)
    if shipped_path(given.name) is not None:  # a checkout's path, typed without the checkout
        stem = given.name.removesuffix(SUFFIX)
        raise ConfigError(
            f"{text}: no such scenario file; the shipped scenario {stem} runs with: "
            f"dbrig run {stem} (or copy it: dbrig examples copy {stem})"
        )
    raise ConfigError(
        f"{text}: no such scenario file, and no shipped scenario of that name "
        f"(shipped: {_names_line()}; see: dbrig examples)"
    )


def copy_shipped(name: str, directory: Path, force: bool = False) -> Path:
    """Write shipped scenario ``name`` into ``directory``; an existing file only with force."""
    source = shipped_path(name)
    if source is None:
        raise ConfigError(f"{name}: no shipped scenario of that name (shipped: {_names_line()})")
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"{directory}: not a directory (give the folder to copy into)")
    target = directory / source.name
    # A folder named as the scenario holds its own files (a Lua workload): it comes along.
    own = source.with_suffix("")
    files = sorted(p for p in own.rglob("*") if p.is_file()) if own.is_dir() else []
    targets = [target, *(directory / own.name / p.relative_to(own) for p in files)]
    existing = [t for t in targets if t.exists()]
    if existing and not force:
        raise ConfigError(f"{existing[0]}: already exists; not overwritten (--force replaces it)")
    try:
        for path, dest in zip([source, *files], targets, strict=True):
            dest.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(dest, path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"{target}: cannot write ({exc.strerror or exc})") from None
    return target


def _names_line() -> str:
    return ", ".join(shipped_names()) or "none found: is the package installed completely?"
