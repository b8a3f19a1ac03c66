"""Prepared snapshots kept across runs, so a later run with the same key skips init and prepare.

A cache is a directory dbrig creates and marks (``--snapshot-cache DIR`` or the
``DBRIG_SNAPSHOT_CACHE`` environment variable). Each entry is a folder named by
its key's digest holding ``data/`` (the prepared datadir, as snapshotted) and
``entry.json`` (the key, the size, a SHA-256 digest of every file's path and
bytes, when it was made). The key is:

- the server binary: its path, ``--version`` line, size and mtime;
- the data set's digest (the workload's ``data_set_key()``);
- the server block's settings that may shape the data files: every setting but
  those known to act only at run time (:data:`RUNTIME_ONLY_PREFIXES`: buffer
  pool, I/O capacity, thread counts, caches, logs of queries...), so an unknown
  setting makes a miss, never a wrong hit.

An entry is written under ``.incoming-<key>-<pid>`` and renamed when complete:
an interrupted store is never used (the next open removes it once its process is
gone). On use the copy's digest is checked against ``entry.json``; a mismatch
discards the entry with a warning and the data is prepared again. An entry whose
``entry.json`` is unreadable (cut short, edited) is *corrupt*: said once, in a line
naming the file, listed and counted as such, evicted first, removed by ``cache prune``
and replaced by the next store of its key; only ever a folder carrying dbrig's
marker. The cache is bounded (``max_bytes``: least recently used entries are evicted first) and
never fills its filesystem: an entry that would leave less than ``reserve_bytes``
free is skipped, and said so.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbrig import proc
from dbrig.errors import ConfigError, DbrigError, UnsafePathError
from dbrig.ownership import is_owned, mark_owned, remove_owned
from dbrig.server import datadir as dd
from dbrig.server.binary import ServerBinary
from dbrig.util.files import write_json_atomic

ENV_DIR = "DBRIG_SNAPSHOT_CACHE"
ENV_MAX = "DBRIG_SNAPSHOT_CACHE_MAX"
DEFAULT_MAX_BYTES = 50 * 2**30
DEFAULT_RESERVE_BYTES = 2 * 2**30
_INCOMING = ".incoming-"
_ENTRY = "entry.json"

# Settings that change how a server runs but never what prepare writes to disk.
RUNTIME_ONLY_PREFIXES = (
    "innodb_buffer_pool",
    "innodb_io_capacity",
    "innodb_read_io_threads",
    "innodb_write_io_threads",
    "innodb_flush_log_at",
    "innodb_flush_method",
    "innodb_flush_neighbors",
    "innodb_adaptive",
    "innodb_lru",
    "innodb_max_dirty",
    "innodb_thread",
    "innodb_spin",
    "innodb_lock_wait",
    "innodb_stats_",
    "innodb_purge",
    "innodb_log_buffer_size",
    "innodb_doublewrite",
    "max_connections",
    "thread_",
    "table_open_cache",
    "table_definition_cache",
    "query_cache",
    "key_buffer",
    "sort_buffer",
    "join_buffer",
    "read_buffer",
    "read_rnd_buffer",
    "tmp_table_size",
    "max_heap_table_size",
    "performance_schema",
    "slow_query_log",
    "long_query_time",
    "general_log",
    "log_error",
    "sync_binlog",
    "skip_name_resolve",
    "wait_timeout",
    "interactive_timeout",
)


def shaping_settings(config: Mapping[str, Any]) -> dict[str, str]:
    """The server block's settings that may shape the data files, names normalised."""
    found = {}
    for key, value in config.items():
        name = str(key).replace("-", "_").lower()
        if not name.startswith(RUNTIME_ONLY_PREFIXES):
            found[name] = "" if value is None else str(value)
    return dict(sorted(found.items()))


def binary_identity(binary: ServerBinary) -> dict[str, Any]:
    st = binary.mysqld.stat()
    return {
        "mysqld": str(binary.mysqld),
        "version": binary.version_line,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
    }


def entry_key(binary: ServerBinary, config: Mapping[str, Any], data_set: str) -> dict[str, Any]:
    return {
        "binary": binary_identity(binary),
        "settings": shaping_settings(config),
        "data_set": data_set,
    }


def key_digest(key: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


def tree_digest(root: Path) -> str:
    """SHA-256 over every file's relative path, size and bytes, in path order."""
    total = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(root).as_posix()
        with open(path, "rb") as handle:
            one = hashlib.file_digest(handle, "sha256").hexdigest()
        total.update(f"{rel}\0{path.stat().st_size}\0{one}\n".encode())
    return total.hexdigest()


def tree_bytes(root: Path) -> int:
    """Bytes the tree takes on disk (sparse files count what they use)."""
    return sum(p.lstat().st_blocks * 512 for p in root.rglob("*") if not p.is_dir())


@dataclass(frozen=True)
class Entry:
    path: Path
    key: dict[str, Any]
    bytes: int
    digest: str
    created: float
    used: float

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class Corrupt:
    """A folder of dbrig's in the cache whose ``entry.json`` cannot be read: never used,
    but its bytes are on disk, so it counts against the maximum until it is removed."""

    path: Path
    bytes: int
    problem: str

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def record(self) -> Path:
        return self.path / _ENTRY


class SnapshotCache:
    """A directory of prepared snapshots, each under the digest of its key."""

    def __init__(
        self,
        root: Path,
        max_bytes: int = DEFAULT_MAX_BYTES,
        *,
        say: Callable[[str], None] = print,
        reserve_bytes: int = DEFAULT_RESERVE_BYTES,
    ) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.reserve_bytes = reserve_bytes
        self.say = say
        self._said: set[str] = set()

    @classmethod
    def open(cls, root: Path, max_bytes: int = DEFAULT_MAX_BYTES, **kwargs: Any) -> SnapshotCache:
        """Create or reopen ``root`` (refusing a folder dbrig did not make) and drop what an
        interrupted store left."""
        check_cache_dir(root)
        if not is_owned(root):
            mark_owned(root, role="snapshot-cache")
        cache = cls(root, max_bytes, **kwargs)
        cache._drop_abandoned()
        return cache

    # -- reading ----------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        """Complete entries, least recently used first."""
        found = [e for e in self._scan() if isinstance(e, Entry)]
        return sorted(found, key=lambda e: e.used)

    def corrupt(self) -> list[Corrupt]:
        """dbrig's entry folders whose ``entry.json`` is missing or unreadable."""
        return [e for e in self._scan() if isinstance(e, Corrupt)]

    def _scan(self) -> list[Entry | Corrupt]:
        found: list[Entry | Corrupt] = []
        for path in sorted(self.root.iterdir()):
            if path.name.startswith(".") or not path.is_dir():
                continue
            entry = read_entry(path)
            if entry is None and is_owned(path):
                entry = _corrupt(path)
            if entry is not None:
                found.append(entry)
        return found

    def total_bytes(self) -> int:
        return sum(e.bytes for e in self._scan())

    def fetch(self, key: Mapping[str, Any], target: Path) -> bool:
        """Copy the entry for ``key`` (cloned where possible) to a new snapshot ``target``;
        False on a miss or a damaged entry (then discarded, with a warning)."""
        entry = cached_entry(self.root, key)
        if entry is None:
            self._say_if_corrupt(self.root / key_digest(key))
            return False
        path = entry.path
        self._say_once_if_not_cloning(target.parent)
        staging = target.with_name(target.name + ".copying")
        remove_owned(staging)
        try:
            dd.copy_tree(path / "data", staging)
        except (OSError, DbrigError) as exc:  # e.g. evicted meanwhile by another run
            self.say(f"dbrig: warning: snapshot cache entry {entry.name} unusable ({exc})")
            remove_owned(staging)
            return False
        if tree_digest(staging) != entry.digest:
            remove_owned(staging)
            self.say(
                f"dbrig: warning: snapshot cache entry {entry.name} is damaged (its digest no "
                "longer matches): discarded, the data is prepared again"
            )
            self._remove(path)
            return False
        staging.rename(target)
        os.utime(path / _ENTRY)
        return True

    # -- writing ----------------------------------------------------------------------

    def store(self, key: Mapping[str, Any], snapshot: Path) -> bool:
        """Keep a copy of ``snapshot`` under ``key``; False (and said why) if it is skipped."""
        name = key_digest(key)
        if (self.root / name).exists() and not self._replaceable(self.root / name):
            return read_entry(self.root / name) is not None
        size = tree_bytes(snapshot)
        if size > self.max_bytes:
            self.say(
                f"dbrig: snapshot cache: not keeping {snapshot.name} ({_gib(size)}): larger "
                f"than the cache's maximum ({_gib(self.max_bytes)})"
            )
            return False
        self._evict_for(size)
        if not self._room_on_disk(size):
            return False
        self._say_once_if_not_cloning(snapshot.parent)
        incoming = self.root / f"{_INCOMING}{name}-{os.getpid()}"
        try:
            self._write(incoming, key, snapshot, size)
        except (OSError, DbrigError) as exc:
            self.say(f"dbrig: warning: snapshot cache: could not keep {snapshot.name}: {exc}")
            with contextlib.suppress(OSError, DbrigError):
                remove_owned(incoming)
            return False
        try:
            incoming.rename(self.root / name)
        except OSError:  # another run stored the same key meanwhile: keep theirs
            remove_owned(incoming)
        return True

    def _write(self, incoming: Path, key: Mapping[str, Any], snapshot: Path, size: int) -> None:
        remove_owned(incoming)
        mark_owned(incoming, role="snapshot-cache-entry")
        dd.copy_tree(snapshot, incoming / "data")
        record = {
            "key": key,
            "bytes": size,
            "digest": tree_digest(incoming / "data"),
            "created": time.time(),
        }
        write_json_atomic(incoming / _ENTRY, record)

    def prune(self, keep_bytes: int = 0) -> list[Entry | Corrupt]:
        """Remove entries until at most ``keep_bytes`` remain: corrupt ones first (never
        used, so never worth keeping), then the least recently used."""
        removed: list[Entry | Corrupt] = []
        entries: list[Entry | Corrupt] = [*self.corrupt(), *self.entries()]
        total = sum(e.bytes for e in entries)
        for entry in entries:
            if total <= keep_bytes:
                break
            self._remove(entry.path)
            total -= entry.bytes
            removed.append(entry)
        return removed

    def remove_corrupt(self) -> list[Corrupt]:
        """Remove every corrupt entry, whatever room is left."""
        removed = self.corrupt()
        for corrupt in removed:
            self._remove(corrupt.path)
        return removed

    # -- internals ----------------------------------------------------------------------

    def _evict_for(self, size: int) -> None:
        for entry in self.prune(keep_bytes=self.max_bytes - size):
            why = "corrupt" if isinstance(entry, Corrupt) else "least recently used"
            self.say(
                f"dbrig: snapshot cache: evicted {entry.name} ({_gib(entry.bytes)}, {why}) "
                "to stay under its maximum"
            )

    def _replaceable(self, path: Path) -> bool:
        """Whether the folder of a key being stored is a corrupt entry of dbrig's (said,
        then removed to be written again). A complete entry is kept; a folder dbrig did
        not make is never touched, and said so."""
        if read_entry(path) is not None:
            return False
        if not is_owned(path):
            self._say_once(
                f"foreign:{path}",
                f"dbrig: warning: snapshot cache: not keeping a snapshot in {path}: "
                "that folder was not made by dbrig (no .dbrig-owned marker); remove it yourself",
            )
            return False
        self._say_if_corrupt(path)
        self._remove(path)
        return True

    def _say_if_corrupt(self, path: Path) -> None:
        if path.is_dir() and is_owned(path) and read_entry(path) is None:
            self._say_once(
                f"corrupt:{path}",
                f"dbrig: warning: snapshot cache: {path / _ENTRY} is unreadable "
                f"({_record_problem(path)}): the data set is prepared again and the entry "
                "replaced",
            )

    def _say_once(self, what: str, line: str) -> None:
        if what not in self._said:
            self._said.add(what)
            self.say(line)

    def _room_on_disk(self, size: int) -> bool:
        while shutil.disk_usage(self.root).free - size < self.reserve_bytes:
            entries: list[Entry | Corrupt] = [*self.corrupt(), *self.entries()]
            if not entries:
                self.say(
                    f"dbrig: snapshot cache: not keeping a {_gib(size)} snapshot: "
                    f"{self.root}'s filesystem would have less than "
                    f"{_gib(self.reserve_bytes)} free"
                )
                return False
            self._remove(entries[0].path)
            self.say(
                f"dbrig: snapshot cache: evicted {entries[0].name} ({_gib(entries[0].bytes)}) "
                "to keep its filesystem from filling"
            )
        return True

    def _remove(self, path: Path) -> None:
        remove_owned(path)  # marked when it was written: a folder dbrig did not make stays

    def _drop_abandoned(self) -> None:
        """Remove ``.incoming-*`` folders whose writing process is gone."""
        for path in self.root.glob(f"{_INCOMING}*"):
            pid = path.name.rsplit("-", 1)[-1]
            if pid.isdigit() and proc.alive(int(pid)) and int(pid) != os.getpid():
                continue
            try:
                remove_owned(path)
            except (OSError, UnsafePathError):
                continue

    def _say_once_if_not_cloning(self, other: Path) -> None:
        other.mkdir(parents=True, exist_ok=True)
        if os.stat(other).st_dev == os.stat(self.root).st_dev:
            return
        self._say_once(
            "filesystem",
            f"dbrig: snapshot cache {self.root} is on another filesystem than {other}: "
            "snapshots are copied to and from it, not cloned",
        )


def check_cache_dir(root: Path) -> None:
    """Refuse a cache directory dbrig may not use (read only: nothing is created)."""
    if root.exists() and not root.is_dir():
        raise ConfigError(f"--snapshot-cache {root}: not a directory")
    if root.is_dir() and any(root.iterdir()) and not is_owned(root):
        raise ConfigError(
            f"--snapshot-cache {root}: exists, is not empty and was not made by dbrig "
            "(no .dbrig-owned marker)"
        )


def cached_entry(root: Path, key: Mapping[str, Any]) -> Entry | None:
    """The complete entry for ``key`` in the cache at ``root``, read only: None for a
    miss, a cache not made yet, or an entry an interrupted store left unfinished."""
    path = root / key_digest(key)
    entry = read_entry(path) if path.is_dir() else None
    if entry is None or entry.key != json.loads(json.dumps(key)):
        return None
    return entry


def corrupt_entry(root: Path, key: Mapping[str, Any]) -> Corrupt | None:
    """The corrupt entry in ``key``'s place in the cache at ``root``, read only: what a dry
    run can name (the run prepares that data set and replaces the entry)."""
    path = root / key_digest(key)
    if not path.is_dir() or not is_owned(path) or read_entry(path) is not None:
        return None
    return _corrupt(path)


def _corrupt(path: Path) -> Corrupt:
    return Corrupt(path, tree_bytes(path), _record_problem(path))


def read_entry(path: Path) -> Entry | None:
    """The entry kept in ``path``, or None when its ``entry.json`` is missing or unreadable."""
    try:
        return _parse_entry(path)
    except _UNREADABLE:
        return None


def _parse_entry(path: Path) -> Entry:
    data = json.loads((path / _ENTRY).read_text())
    used = (path / _ENTRY).stat().st_mtime
    return Entry(
        path,
        dict(data["key"]),
        int(data["bytes"]),
        str(data["digest"]),
        float(data["created"]),
        used,
    )


_UNREADABLE = (OSError, ValueError, TypeError, KeyError)


def _record_problem(path: Path) -> str:
    """Why the entry.json in ``path`` cannot be read, in a few words."""
    try:
        _parse_entry(path)
    except FileNotFoundError:
        return "missing"
    except _UNREADABLE as exc:
        detail = str(exc).splitlines()[0] if str(exc) else ""
        return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    return "readable"


def _gib(size: int) -> str:
    return f"{size / 2**30:.2f} GiB"
