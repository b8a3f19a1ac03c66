"""What the runner holds for each named server: one face for managed and external ones.

A handle says where clients connect, reports a server that died, reads back the
settings in force, and cleans up:

- :class:`ManagedServerHandle`: a sandbox plus snapshots of its prepared data,
  one per data set, each named by the data set's digest: it restores a snapshot,
  starts with a cell's server block, stops, and snapshots its datadir.
- :class:`ExternalServerHandle`: a server dbrig only connects to. It remembers
  which data set is loaded in each database; it never restores anything.

Handles know nothing of workload tools: the run side (:mod:`dbrig.run.datasets`)
decides when data must be prepared, runs the tool's prepare against the endpoint
a handle gives, and asks the handle to snapshot the result under its key.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from dbrig import ownership
from dbrig.endpoint import Credentials, Endpoint
from dbrig.host.settings import SystemSettings, SystemState
from dbrig.scenario import ExternalServer, ManagedServer
from dbrig.server import datadir as dd
from dbrig.server.binary import ServerBinary
from dbrig.server.cache import SnapshotCache, entry_key
from dbrig.server.external import ExternalConnection
from dbrig.server.protocol import Capabilities, ClientRoute, DataSets, HostSampling
from dbrig.server.sandbox import Sandbox
from dbrig.util.units import parse_size, to_float

_BOOLEAN_WORDS = {"on": "1", "true": "1", "yes": "1", "off": "0", "false": "0", "no": "0"}


def server_info(conn: Any) -> dict[str, Any]:
    """Version and every global variable of a connected server."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = cur.fetchone()[0]
        cur.execute("SHOW GLOBAL VARIABLES")
        variables = dict(cur.fetchall())
    flavor = "mariadb" if "mariadb" in str(version).lower() else "mysql"
    return {"flavor": flavor, "version": version, "variables": variables}


def effective_settings(conn: Any, config: dict[str, Any]) -> dict[str, Any]:
    """The values the server runs with, for the keys the scenario set."""
    names = [_variable_name(k) for k in config if _variable_name(k).isidentifier()]
    if not names:
        return {}
    with conn.cursor() as cur:
        placeholders = ",".join(["%s"] * len(names))
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({placeholders})", names)
        return dict(cur.fetchall())


def _variable_name(key: str) -> str:
    return key.replace("-", "_").lower()


def normalise_setting(value: Any) -> str:
    """Compare my.cnf values the way the server reports them: 128M == 134217728, ON == 1."""
    text = str(value).strip()
    if text.lower() in _BOOLEAN_WORDS:
        return _BOOLEAN_WORDS[text.lower()]
    size = parse_size(text)
    if size is not None:
        return str(size)
    number = to_float(text)  # 0.500000, as the server shows long_query_time = 0.5
    if number is not None:
        return str(int(number)) if number.is_integer() else str(number)
    return text.lower()


def setting_warnings(requested: dict[str, Any], effective: dict[str, Any]) -> list[str]:
    """One line per setting the server ignored (not a variable) or changed (clamped, rounded)."""
    found = {k.lower(): v for k, v in effective.items()}
    warnings = []
    for key, wanted in requested.items():
        name = _variable_name(key)
        if wanted is None or not name.isidentifier():
            continue
        if name not in found:
            warnings.append(f"{key}: not a server variable, so its effect cannot be checked")
        elif normalise_setting(wanted) != normalise_setting(found[name]):
            warnings.append(f"{key}: asked for {wanted}, the server runs with {found[name]}")
    return warnings


class ManagedServerHandle:
    """A sandbox plus the snapshots of its prepared data, one per data set."""

    capabilities = Capabilities(
        data_sets=DataSets.SNAPSHOTS,
        client_route=ClientRoute.FORWARDED,  # root over 127.0.0.1 only
        faults=True,
        status=True,
        followed_here=True,
        samples_its_host=False,
    )
    sampled_host: str | None = None
    work_folder: Path | None = None

    def __init__(
        self,
        name: str,
        spec: ManagedServer,
        binary: ServerBinary,
        home: Path,
        cache: SnapshotCache | None = None,
        data_home: Path | None = None,
        bind_address: str = "127.0.0.1",
    ) -> None:
        """``data_home`` (default ``home``) holds the datadir and snapshots: a clone
        workspace's filesystem when there is one; logs and my.cnf stay in ``home``.
        ``bind_address``: where the server listens for TCP clients."""
        data_home = data_home or home
        self.name = name
        self.binary = binary
        self.cache = cache
        self.spec = spec
        self.sandbox = Sandbox(
            name,
            binary,
            home,
            cpus=spec.cpus,
            port=spec.port,
            startup_timeout_s=spec.startup_timeout,
            datadir=data_home / "datadir",
            bind_address=bind_address,
        )
        self.home = home
        self.snapshots = data_home / "snapshots"
        self.info: dict[str, Any] = {}

    @property
    def pid(self) -> int | None:
        return self.sandbox.pid

    @property
    def port(self) -> int | None:
        return self.sandbox.port

    def died(self) -> str | None:
        return self.sandbox.died()

    def connect(self) -> Any:
        return self.sandbox.connect()

    def endpoint(
        self, database: str, options_text: str | None = None, filename: str = "client.cnf"
    ) -> Endpoint:
        """Where clients connect: root over the sandbox's socket, which needs no password."""
        return self.sandbox.endpoint(database)

    def credentials(self) -> Credentials | None:
        return None  # root over the socket

    def address_from(self, host: str) -> str:
        return "127.0.0.1"  # through the port forwarded to that host's 127.0.0.1

    def apply_system(self, settings: SystemSettings, here: SystemState) -> dict[str, Any]:
        return here.apply(settings)

    def host_sampler(self, timing: Any, devices: list[str] | None) -> HostSampling | None:
        return None  # this machine: dbrig's host sampler

    def profiler(self, timing: Any, frequency: int) -> None:
        return None  # dbrig's perf record, when it is a server of this machine

    def has_data_set(self, digest: str) -> bool:
        """True if data set ``digest`` is snapshotted here."""
        return self._data_set_path(digest).exists()

    def take_from_cache(self, digest: str) -> bool:
        """Snapshot data set ``digest`` from the snapshot cache if it holds it (then init
        and prepare are skipped); False without a cache or on a miss."""
        if self.cache is None:
            return False
        # A hit skips the init that makes home, where my.cnf and the logs go: with a
        # clone workspace the snapshots are elsewhere, so making them does not make it.
        self.home.mkdir(parents=True, exist_ok=True)
        self.snapshots.mkdir(parents=True, exist_ok=True)
        return self.cache.fetch(self._cache_key(digest), self._data_set_path(digest))

    def load_base(self, database: str) -> None:
        """The freshly initialised datadir (made on first use), ready for a prepare."""
        self._use(self.spec)
        base = self._base_snapshot(database, dict(self.spec.config))
        self.sandbox.stop()
        dd.restore(base, self.sandbox.datadir)

    def start_for_prepare(self, database: str) -> None:
        """Started under the server's own block, so cells that vary only run-time settings
        share one snapshot."""
        self._use(self.spec)
        self.sandbox.start(dict(self.spec.config))
        self.sandbox.prepare_accounts(database)

    def stop(self) -> float:
        return self.sandbox.stop()

    def save_data_set(self, digest: str, key: tuple) -> None:
        """Snapshot the stopped datadir as data set ``digest``; ``key`` is kept beside it."""
        target = self._data_set_path(digest)
        dd.snapshot(self.sandbox.datadir, target)
        (target.parent / f"{target.name}.json").write_text(json.dumps({"key": key}, default=str))
        if self.cache is not None:
            self.cache.store(self._cache_key(digest), target)

    def _cache_key(self, digest: str) -> dict[str, Any]:
        return entry_key(self.binary, dict(self.spec.config), digest)

    def restore_data_set(self, digest: str) -> float:
        """Stop the server and make its datadir an exact copy of data set ``digest``."""
        self.sandbox.stop()
        return dd.restore(self._data_set_path(digest), self.sandbox.datadir).seconds

    def _data_set_path(self, digest: str) -> Path:
        return self.snapshots / f"data-{digest}"

    def start(self, spec: ManagedServer) -> dict[str, float]:
        self._use(spec)
        started = self.sandbox.start(dict(spec.config))
        if not self.info:  # a resumed run made no base snapshot, so it has not asked yet
            self.info = self._server_info()
        return {"server_start_s": started}

    def effective(self, spec: ManagedServer | ExternalServer) -> dict[str, Any]:
        config = getattr(spec, "config", {}) or {}
        with contextlib.closing(self.connect()) as conn:
            return effective_settings(conn, dict(config))

    def finish_trial(self) -> dict[str, float]:
        return {"server_stop_s": self.sandbox.stop()}

    def close(self, keep_data: bool) -> None:
        self.sandbox.close()
        if keep_data:
            return
        dd.remove_datadir(self.sandbox.datadir)
        if self.snapshots.is_dir():
            for path in self.snapshots.iterdir():
                if path.is_dir():
                    ownership.remove_owned(path)
                elif path.suffix == ".json":
                    path.unlink()
            with contextlib.suppress(OSError):  # not empty: something dbrig did not make
                self.snapshots.rmdir()

    # -- snapshots --------------------------------------------------------------------

    def _base_snapshot(self, database: str, config: dict) -> Path:
        base = self.snapshots / "base"
        if base.exists():
            return base
        self.home.mkdir(parents=True, exist_ok=True)
        # Left by an attempt that failed or was interrupted.
        dd.remove_datadir(self.sandbox.datadir)
        self.sandbox.initialize()
        self.sandbox.start(config)
        try:
            self.sandbox.prepare_accounts(database)
            self.info = self._server_info()
        finally:
            self.sandbox.stop()
        dd.snapshot(self.sandbox.datadir, base)
        return base

    def _server_info(self) -> dict[str, Any]:
        with contextlib.closing(self.sandbox.connect()) as conn:
            info = server_info(conn)
        return {"kind": "managed", **info, "binary": str(self.sandbox.binary.mysqld)}

    def _use(self, spec: ManagedServer) -> None:
        """Start-up settings: the server's own for prepare, each cell's for its trials."""
        self.sandbox.cpus = spec.cpus
        self.sandbox.fixed_port = spec.port
        self.sandbox.startup_timeout_s = spec.startup_timeout


class ExternalServerHandle:
    """A server dbrig does not manage: connect, (re)prepare its data, never restore it."""

    capabilities = Capabilities(
        data_sets=DataSets.IN_DATABASE,
        client_route=ClientRoute.DIRECT,
        faults=False,
        status=True,
        followed_here=False,  # its processes, wherever they are, are not dbrig's to see
        samples_its_host=False,
    )
    pid = None
    sampled_host: str | None = None
    work_folder: Path | None = None

    def __init__(self, name: str, spec: ExternalServer, home: Path) -> None:
        self.name = name
        self.spec = spec
        self.home = home
        self.connection = ExternalConnection(name, spec)
        self.info: dict[str, Any] = {}
        self._loaded: dict[str, str] = {}  # database -> the data set in it now

    def died(self) -> str | None:
        return None

    def connect(self) -> Any:
        return self.connection.connect()

    @property
    def port(self) -> int | None:
        return self.spec.port

    def endpoint(
        self, database: str, options_text: str | None = None, filename: str = "client.cnf"
    ) -> Endpoint:
        """Where clients connect; ``options_text`` (the password, in the tool's own option
        file format) goes to a 0600 file named ``filename``."""
        return self.connection.endpoint(database, options_text, filename)

    def credentials(self) -> Credentials:
        return self.connection.options_for_tool()

    def address_from(self, host: str) -> str:
        return self.spec.host  # as the scenario gives it: the client host must reach it

    def apply_system(self, settings: SystemSettings, here: SystemState) -> dict[str, Any]:
        return here.apply(settings)  # this machine's: the client's, beside the run

    def host_sampler(self, timing: Any, devices: list[str] | None) -> HostSampling | None:
        return None

    def profiler(self, timing: Any, frequency: int) -> None:
        return None  # its process is not dbrig's to record

    def describe_once(self) -> None:
        """Version, variables and where it is, asked once (for run.json and reports)."""
        if not self.info:
            with contextlib.closing(self.connect()) as conn:
                self.info = {"kind": "external", **server_info(conn), **self.connection.describe()}

    def loaded(self, database: str) -> str | None:
        """The digest of the data set loaded in ``database`` now (None if none yet).

        All data sets of a run share the workload's database: what matters is which one
        is loaded there now, not whether it was ever loaded.
        """
        return self._loaded.get(database)

    def mark_loaded(self, database: str, digest: str) -> None:
        self._loaded[database] = digest

    def forget_loaded(self, database: str) -> None:
        """Nothing known to be in ``database``: a cleanup is about to empty it."""
        self._loaded.pop(database, None)

    def ensure_database(self, database: str) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        with contextlib.closing(self.connect()) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")

    def effective(self, spec: ManagedServer | ExternalServer) -> dict[str, Any]:
        return {}

    def finish_trial(self) -> dict[str, float]:
        return {}

    def close(self, keep_data: bool) -> None:
        self.connection.close()
