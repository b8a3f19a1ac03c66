"""Data sets: the workload's prepared data, made once per key and put back before each trial.

The run side owns this, not the server: it asks a managed server for its base
datadir, runs the tool's prepare against it and has the result snapshotted
under the data set's digest; before a trial it has that snapshot restored. An
external server cannot be restored, so its data is prepared once per data set
(``reset: none``) or before every trial (``reset: reprepare``): the tool's
cleanup, then its prepare.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from dbrig import proc
from dbrig.endpoint import Endpoint
from dbrig.errors import ToolError
from dbrig.remote.server import RemoteServerHandle
from dbrig.run.workdir import WorkDirHandle
from dbrig.scenario import ExternalServer, ManagedServer
from dbrig.server.handles import ExternalServerHandle, ManagedServerHandle
from dbrig.server.protocol import DataSets, Handle
from dbrig.tools.base import FolderWorkload, WorkloadTool

AnyHandle = Handle  # what the runner holds per server: see server/protocol.py
# The faces data sets use, by ``capabilities.data_sets`` (a type annotation, never a check).
ManagedHandle = ManagedServerHandle | RemoteServerHandle  # SNAPSHOTS

PREPARE_TIMEOUT_S = 3600
NO_SERVER = "none"  # the handle's name when the workload needs no server


def data_set_id(workload: WorkloadTool) -> tuple[tuple, str]:
    """The data set's key (what prepare depends on) and its short digest."""
    key = workload.data_set_key()
    return key, hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()[:12]


def client_endpoint(server: AnyHandle, workload: WorkloadTool) -> Endpoint:
    """Where ``workload`` connects, its password (if any) in its own 0600 option file."""
    credentials = server.credentials()
    if credentials is None:
        return server.endpoint(workload.database)
    options = workload.client_options(credentials)
    return server.endpoint(workload.database, options, f"{workload.info.name}.cnf")


@dataclass(frozen=True)
class PrepareStep:
    """One command that loads a data set: ``cleanup`` or ``prepare``."""

    name: str
    argv: list[str]

    @property
    def output(self) -> str:
        return f"{self.name}.out"


def prepare_steps(
    workload: WorkloadTool, spec: ManagedServer | ExternalServer, endpoint: Endpoint, binary: Path
) -> list[PrepareStep]:
    """What loads the workload's data on this server, in order (the dry run prints these).

    A managed server starts from a fresh datadir, so only prepare runs; an external one
    is cleaned up first (its database may hold another data set); ``prepare: false``
    loads nothing.
    """
    if isinstance(spec, ExternalServer) and not spec.prepare:
        return []
    steps = [("prepare", workload.prepare_argv(endpoint, binary))]
    if isinstance(workload, FolderWorkload):  # the script's own check of what it loaded
        steps.append(("check", workload.check_argv(endpoint, binary)))
    if isinstance(spec, ExternalServer):
        steps.insert(0, ("cleanup", workload.cleanup_argv(endpoint, binary)))
    return [PrepareStep(name, argv) for name, argv in steps if argv]


def prepared_before_every_trial(spec: ManagedServer | ExternalServer) -> bool:
    """True for an external server with ``reset: reprepare``; else once per data set."""
    return isinstance(spec, ExternalServer) and spec.prepare and spec.reset == "reprepare"


def ready_for_trial(
    server: AnyHandle,
    workload: WorkloadTool,
    spec: ManagedServer | ExternalServer,
    binary: Path,
    before_start: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
    say: Callable[[str], None] = lambda line: None,
) -> dict[str, float]:
    """The server started (or reached) with the workload's data in place; the timings.
    ``say`` gets a line before and after a data set load, which can take many minutes."""
    data_sets = server.capabilities.data_sets
    if data_sets is DataSets.FOLDER:
        timings = _ready_workdir(cast(WorkDirHandle, server), workload, binary, clock)
        before_start()
        return timings
    if data_sets is DataSets.SNAPSHOTS:
        assert isinstance(spec, ManagedServer)
        managed = cast(ManagedHandle, server)
        return _ready_managed(managed, workload, spec, binary, before_start, clock, say)
    assert isinstance(spec, ExternalServer)
    before_start()
    return _ready_external(cast(ExternalServerHandle, server), workload, spec, binary, clock, say)


def _ready_managed(
    server: ManagedHandle,
    workload: WorkloadTool,
    spec: ManagedServer,
    binary: Path,
    before_start: Callable[[], None],
    clock: Callable[[], float],
    say: Callable[[str], None],
) -> dict[str, float]:
    key, digest = data_set_id(workload)
    timings = {}
    if not server.has_data_set(digest):
        timings = _load_managed(server, workload, binary, key, digest, clock, say)
    restored = server.restore_data_set(digest)
    before_start()  # after the restore (which fills the page cache), before the start
    return {**timings, "restore_s": restored, **server.start(spec)}


def _load_managed(
    server: ManagedHandle,
    workload: WorkloadTool,
    binary: Path,
    key: tuple,
    digest: str,
    clock: Callable[[], float],
    say: Callable[[str], None],
) -> dict[str, float]:
    """Data set ``digest`` snapshotted on the server's first use of it: from the snapshot
    cache, else initialised and prepared (the timing of whichever it was)."""
    started = clock()
    if server.take_from_cache(digest):
        took = clock() - started
        say(f"data set {digest}: from the snapshot cache in {took:.1f} s (no init, no prepare)")
        return {"data_set_cache_s": took}
    say(f"data set {digest}: loading it on server '{server.name}' (init, prepare, snapshot)")
    _prepare_managed(server, workload, binary, key, digest)
    took = clock() - started
    say(f"data set {digest}: loaded in {took:.1f} s; every trial restores it from its snapshot")
    return {"data_set_load_s": took}


def _prepare_managed(
    server: ManagedHandle, workload: WorkloadTool, binary: Path, key: tuple, digest: str
) -> None:
    server.load_base(workload.database)
    steps = prepare_steps(workload, server.spec, client_endpoint(server, workload), binary)
    if steps:
        server.start_for_prepare(workload.database)
        try:
            for step in steps:
                run_prepare(server.name, step.argv, server.home / step.output)
        finally:
            server.stop()
    server.save_data_set(digest, key)


def _ready_external(
    server: ExternalServerHandle,
    workload: WorkloadTool,
    spec: ExternalServer,
    binary: Path,
    clock: Callable[[], float],
    say: Callable[[str], None],
) -> dict[str, float]:
    server.describe_once()
    _, digest = data_set_id(workload)
    loaded = server.loaded(workload.database) == digest
    every_trial = prepared_before_every_trial(spec)  # then not worth a line each time
    if not spec.prepare or (loaded and not every_trial):
        return {}
    if not every_trial:
        say(f"data set {digest}: loading it into '{workload.database}' on server '{server.name}'")
    started = clock()
    server.ensure_database(workload.database)
    # Should a step fail, the old data set is gone too: the next trial must load again.
    server.forget_loaded(workload.database)
    for step in prepare_steps(workload, spec, client_endpoint(server, workload), binary):
        run_prepare(server.name, step.argv, server.home / step.output)
    server.mark_loaded(workload.database, digest)
    took = clock() - started
    if not every_trial:
        say(f"data set {digest}: loaded in {took:.1f} s")
    return {"reset_s": took}


def _ready_workdir(
    handle: WorkDirHandle, workload: WorkloadTool, binary: Path, clock: Callable[[], float]
) -> dict[str, float]:
    """No server: the data set is a folder, prepared once (fileio's files) and reused."""
    _, digest = data_set_id(workload)
    folder = handle.data_set_folder(workload.work_root, digest)
    endpoint = handle.endpoint(workload.database)
    steps = [("prepare", workload.prepare_argv(endpoint, binary))]
    if isinstance(workload, FolderWorkload):
        steps.append(("check", workload.check_argv(endpoint, binary)))

    def prepare(cwd: Path) -> None:
        for name, argv in steps:
            if argv:
                run_prepare(handle.name, argv, cwd.parent / f"{digest}.{name}.out", cwd=cwd)

    return handle.prepare(folder, prepare, clock)


def run_prepare(name: str, argv: list[str], out: Path, cwd: Path | None = None) -> None:
    """Run a workload's prepare or cleanup; a failure is one line from its output."""
    done = proc.run(argv, timeout_s=PREPARE_TIMEOUT_S, stdout=out, merge_stderr=True, cwd=cwd)
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
    what = "no server" if name == NO_SERVER else f"server '{name}'"
    raise ToolError(f"{what}: preparing the data failed: {detail}")
