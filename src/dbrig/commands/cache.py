"""``dbrig cache list|prune``: the snapshot cache's entries, and emptying it.

:func:`open_cache` is also what ``dbrig run --snapshot-cache DIR`` uses: the
directory and maximum come from the flags, else from ``DBRIG_SNAPSHOT_CACHE`` and
``DBRIG_SNAPSHOT_CACHE_MAX``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import click

from dbrig.commands.console import err_console, out_console, print_line
from dbrig.errors import ConfigError
from dbrig.server.cache import (
    DEFAULT_MAX_BYTES,
    ENV_DIR,
    ENV_MAX,
    Corrupt,
    Entry,
    SnapshotCache,
    check_cache_dir,
)
from dbrig.util.units import parse_size


def cache_max_bytes(text: str | None, flag: str = "--snapshot-cache-max") -> int:
    if text is None:
        return DEFAULT_MAX_BYTES
    size = parse_size(text)
    if size is None or size == 0:
        raise ConfigError(f"{flag}: expected a size such as 50G or 500M, got {text!r}")
    return size


def open_cache(
    directory: Path | None, max_size: str | None, say: Callable[[str], None]
) -> SnapshotCache | None:
    """The snapshot cache to use, or None when neither the flag nor the variable names one."""
    if directory is None:
        return None
    return SnapshotCache.open(directory, cache_max_bytes(max_size), say=say)


def check_cache_options(
    directory: Path | None,
    max_size: str | None,
    *,
    max_given: bool,
    max_name: str = "--snapshot-cache-max",
) -> None:
    """The cache flags as ``dbrig run`` reads them, checked without creating anything (a
    dry run checks the same): a bad size, a directory dbrig may not use, or a maximum given
    on the command line with no cache to bound. ``max_name`` is where the maximum came from
    (the flag or its environment variable), for the error."""
    cache_max_bytes(max_size, max_name)
    if directory is not None:
        check_cache_dir(directory)
    elif max_given:
        raise ConfigError(
            "--snapshot-cache-max: there is no snapshot cache to bound",
            hint=f"give --snapshot-cache DIR too, or set {ENV_DIR}",
        )


def list_entries(directory: Path) -> list[Entry | Corrupt]:
    """Corrupt entries first (they are removed first), then least recently used first."""
    cache = _existing(directory)
    return [*cache.corrupt(), *cache.entries()]


def prune_entries(directory: Path, keep: str | None = None) -> list[Entry | Corrupt]:
    keep_bytes = 0 if keep is None else cache_max_bytes(keep, "--keep")
    cache = _existing(directory)
    return [*cache.remove_corrupt(), *cache.prune(keep_bytes)]


def _existing(directory: Path) -> SnapshotCache:
    if not directory.is_dir():
        raise ConfigError(f"--snapshot-cache {directory}: no such directory")
    return SnapshotCache.open(directory, say=lambda line: print_line(err_console(), line))


def _entry_line(entry: Entry | Corrupt) -> str:
    if isinstance(entry, Corrupt):
        return (
            f"{entry.name}  {entry.bytes / 2**30:7.2f} GiB  corrupt: {entry.record} "
            f"unreadable ({entry.problem}); never used, removed by dbrig cache prune"
        )
    key = entry.key
    binary = key.get("binary", {})
    used = dt.datetime.fromtimestamp(entry.used).strftime("%Y-%m-%d %H:%M")
    settings = ", ".join(f"{k}={v}" for k, v in key.get("settings", {}).items()) or "-"
    return (
        f"{entry.name}  {entry.bytes / 2**30:7.2f} GiB  used {used}  "
        f"data set {key.get('data_set', '?')}  {binary.get('version', '?')}  {settings}"
    )


_DIR_OPTION = click.option(
    "--snapshot-cache",
    "directory",
    type=click.Path(path_type=Path),
    envvar=ENV_DIR,
    show_envvar=True,
    required=True,
    help="The snapshot cache directory.",
)


@click.group("cache")
def cache_command() -> None:
    """The snapshot cache kept by ``dbrig run --snapshot-cache DIR``."""


@cache_command.command("list")
@_DIR_OPTION
def cache_list_command(directory: Path) -> None:
    """One line per entry, least recently used first."""
    entries = list_entries(directory)
    for entry in entries:
        print_line(out_console(), _entry_line(entry))
    total = sum(e.bytes for e in entries)
    corrupt = sum(isinstance(e, Corrupt) for e in entries)
    count = f"{len(entries)} entries" + (f" ({corrupt} corrupt)" if corrupt else "")
    print_line(out_console(), f"{count}, {total / 2**30:.2f} GiB in {directory}")


@cache_command.command("prune")
@_DIR_OPTION
@click.option("--keep", help="Keep the most recently used entries up to this size (e.g. 20G).")
def cache_prune_command(directory: Path, keep: str | None) -> None:
    """Remove every entry (or the least recently used ones beyond --keep)."""
    removed = prune_entries(directory, keep)
    freed = sum(e.bytes for e in removed)
    print_line(out_console(), f"removed {len(removed)} entries, {freed / 2**30:.2f} GiB")


__all__ = ["ENV_MAX", "cache_command", "open_cache"]
