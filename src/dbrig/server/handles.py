"""What the runner holds for each named server: one face for managed and external ones.

A handle readies its server for a trial, says where clients connect, reports a
server that died, reads back the settings in force, and cleans up:

- :class:`ManagedServerHandle`: a sandbox plus snapshots of its prepared data,
  one per data set. Before every trial: restore, then start with the cell's
  server block. After it: stop.
- :class:`ExternalServerHandle`: a server dbrig only connects to. Its data is
  prepared once per data set (``reset: none``) or before every trial
  (``reset: reprepare``): the workload's cleanup, then its prepare.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dbrig import ownership, proc
from dbrig.endpoint import Endpoint
from dbrig.errors import ToolError
from dbrig.scenario import ExternalServer, ManagedServer
from dbrig.server import datadir as dd
from dbrig.server.binary import ServerBinary
from dbrig.server.external import ExternalConnection
from dbrig.server.sandbox import Sandbox
from dbrig.tools.registry import Workload

PREPARE_TIMEOUT_S = 3600
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtKMGT]?)[bB]?\s*$")
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
    match = _SIZE.match(text)
    if match:
        number, unit = match.groups()
        scale = 1024 ** " KMGT".index(unit.upper() or " ")
        amount = float(number) * scale
        return str(int(amount)) if amount == int(amount) else str(amount)
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


def run_prepare(name: str, argv: list[str], out: Path) -> None:
    """Run a workload's prepare or cleanup; a failure is one line from its output."""
    done = proc.run(argv, timeout_s=PREPARE_TIMEOUT_S, stdout=out, merge_stderr=True)
    if done.returncode == 0 and not done.timed_out:
        return
    text = out.read_text(errors="replace") if out.exists() else ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    fatal = [ln for ln in lines if "FATAL" in ln or "error" in ln.lower()]
    detail = (fatal or lines[-1:] or [done.exit_text])[0]
    if done.reaped_elsewhere:
        detail = done.exit_text
    if done.timed_out:
        detail = f"did not finish within {PREPARE_TIMEOUT_S} s"
    raise ToolError(f"server '{name}': preparing the data failed: {detail}")


def data_key(workload: Workload) -> tuple[tuple, str]:
    key = workload.prepare_key()
    return key, hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()[:12]


class ManagedServerHandle:
    """A sandbox plus the snapshots of its prepared data, one per data set."""

    kind = "managed"

    def __init__(self, name: str, spec: ManagedServer, binary: ServerBinary, home: Path) -> None:
        self.name = name
        self.spec = spec
        self.sandbox = Sandbox(
            name,
            binary,
            home,
            cpus=spec.cpus,
            port=spec.port,
            startup_timeout_s=spec.startup_timeout,
        )
        self.home = home
        self.snapshots = home / "snapshots"
        self.info: dict[str, Any] = {}

    @property
    def datadir(self) -> Path:
        return self.sandbox.datadir

    @property
    def pid(self) -> int | None:
        return self.sandbox.pid

    def died(self) -> str | None:
        return self.sandbox.died()

    def connect(self) -> Any:
        return self.sandbox.connect()

    def endpoint(self, workload: Workload) -> Endpoint:
        return self.sandbox.endpoint(workload.database)

    def prepare_trial(
        self,
        workload: Workload,
        spec: ManagedServer,
        binary: Path,
        before_start: Callable[[], None] = lambda: None,
    ) -> dict[str, float]:
        """Restore the workload's data set and start with the cell's own server block."""
        snapshot = self._snapshot_for(workload, binary)
        self.sandbox.stop()
        restored = dd.restore(snapshot, self.sandbox.datadir)
        before_start()
        return {"restore_s": restored.seconds, **self.start(spec)}

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
        ownership.remove_owned(self.sandbox.datadir)
        if self.snapshots.is_dir():
            for path in self.snapshots.iterdir():
                if path.is_dir():
                    ownership.remove_owned(path)
                elif path.suffix == ".json":
                    path.unlink()

    # -- snapshots --------------------------------------------------------------------

    def _snapshot_for(self, workload: Workload, binary: Path) -> Path:
        """The snapshot holding ``workload``'s prepared data, made on first use.

        Data is prepared under the server's own block, so cells that vary only
        run-time settings share one snapshot.
        """
        key, digest = data_key(workload)
        target = self.snapshots / f"data-{digest}"
        if target.exists():
            return target
        self._use(self.spec)
        config = dict(self.spec.config)
        base = self._base_snapshot(workload.database, config)
        dd.restore(base, self.sandbox.datadir)
        argv = workload.prepare_argv(self.sandbox.endpoint(workload.database), binary)
        if argv:
            self.sandbox.start(config)
            try:
                self.sandbox.prepare_accounts(workload.database)
                run_prepare(self.name, argv, self.home / "prepare.out")
            finally:
                self.sandbox.stop()
        dd.snapshot(self.sandbox.datadir, target)
        (target.parent / f"{target.name}.json").write_text(json.dumps({"key": key}, default=str))
        return target

    def _base_snapshot(self, database: str, config: dict) -> Path:
        base = self.snapshots / "base"
        if base.exists():
            return base
        self.home.mkdir(parents=True, exist_ok=True)
        # Left by an attempt that failed or was interrupted.
        ownership.remove_owned(self.sandbox.datadir)
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

    kind = "external"
    pid = None
    datadir = None

    def __init__(self, name: str, spec: ExternalServer, home: Path) -> None:
        self.name = name
        self.spec = spec
        self.home = home
        self.connection = ExternalConnection(name, spec)
        self.info: dict[str, Any] = {}
        self._loaded: dict[str, str] = {}  # database -> the data set in it now

    def check_reachable(self) -> None:
        self.connection.check_reachable()

    def died(self) -> str | None:
        return None

    def connect(self) -> Any:
        return self.connection.connect()

    def endpoint(self, workload: Workload) -> Endpoint:
        options = workload.client_options(self.connection.options_for_tool())
        return self.connection.endpoint(workload.database, options, f"{workload.info.name}.cnf")

    def prepare_trial(
        self,
        workload: Workload,
        spec: ExternalServer,
        binary: Path,
        before_start: Callable[[], None] = lambda: None,
    ) -> dict[str, float]:
        before_start()
        if not self.info:
            with contextlib.closing(self.connect()) as conn:
                self.info = {"kind": "external", **server_info(conn), **self.connection.describe()}
        _, digest = data_key(workload)
        # All data sets of a run share the workload's database: what matters is which one
        # is loaded there now, not whether it was ever loaded.
        loaded = self._loaded.get(workload.database) == digest
        if not spec.prepare or (spec.reset == "none" and loaded):
            return {}
        started = time.monotonic()
        self._reprepare(workload, binary)
        self._loaded[workload.database] = digest
        return {"reset_s": time.monotonic() - started}

    def _reprepare(self, workload: Workload, binary: Path) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        endpoint = self.endpoint(workload)
        with contextlib.closing(self.connect()) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{workload.database}`")
        cleanup = workload.cleanup_argv(endpoint, binary)
        if cleanup:
            run_prepare(self.name, cleanup, self.home / "cleanup.out")
        prepare = workload.prepare_argv(endpoint, binary)
        if prepare:
            run_prepare(self.name, prepare, self.home / "prepare.out")

    def effective(self, spec: ManagedServer | ExternalServer) -> dict[str, Any]:
        return {}

    def finish_trial(self) -> dict[str, float]:
        return {}

    def close(self, keep_data: bool) -> None:
        self.connection.close()


ServerHandle = ManagedServerHandle | ExternalServerHandle
