"""Where a workload that needs no server works: a dbrig-owned directory, no database.

sysbench's hardware tests (cpu, memory, threads, mutex, fileio) and Lua scripts
that never connect are run with no server at all: no init, no snapshot, no
restore, no SHOW GLOBAL STATUS. :class:`WorkDirHandle` stands where a server
handle would for the trial: it is never dead, has no process and no settings,
and owns the directories the workload runs in (its working directory).

Its data sets are directories: ``<parent>/.dbrig-work-<pid>/<digest>``, where
``parent`` is the folder the user named (fileio's ``directory``) or the run
directory's parent (so the same filesystem as the run). Prepare (fileio writes
its files in its working directory) runs in ``<digest>.partial`` and the
folder is renamed when it succeeds, so an interrupted prepare never leaves a
file set a later trial would reuse. The ``.dbrig-work-<pid>`` folder carries
the ``.dbrig-owned`` marker, is removed when the run ends however it ends, and
one left by a run that was killed (its pid no longer alive) is removed by the
next run that uses the same parent.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dbrig import ownership, proc
from dbrig.endpoint import Credentials, Endpoint, no_server_endpoint
from dbrig.errors import ConfigError
from dbrig.host.settings import SystemSettings, SystemState
from dbrig.server.protocol import Capabilities, ClientRoute, DataSets, HostSampling

WORK_PREFIX = ".dbrig-work-"
_WORK_NAME = re.compile(rf"^{re.escape(WORK_PREFIX)}(\d+)$")
PARTIAL = ".partial"


class WorkDirHandle:
    """The run's stand-in for a server when the workload needs none."""

    capabilities = Capabilities(
        data_sets=DataSets.FOLDER,
        client_route=ClientRoute.NONE,
        faults=False,
        status=False,  # no SHOW GLOBAL STATUS
        followed_here=True,  # no server process at all
        samples_its_host=False,
    )
    pid: int | None = None
    port: int | None = None
    sampled_host: str | None = None

    def __init__(self, name: str, default_parent: Path) -> None:
        self.name = name
        self.default_parent = default_parent
        self.roots: dict[Path, Path] = {}  # parent -> its .dbrig-work-<pid> folder
        self.cwd: Path | None = None  # the current data set's folder

    @property
    def info(self) -> dict[str, Any]:
        return {}  # no server to describe in run.json

    @property
    def work_folder(self) -> Path | None:
        """The workload's working directory: the current data set's folder."""
        return self.cwd

    def died(self) -> str | None:
        return None

    def connect(self) -> Any:
        raise AssertionError("no server to connect to: capabilities.status is False")

    def endpoint(
        self, database: str, options_text: str | None = None, filename: str = "client.cnf"
    ) -> Endpoint:
        """Nothing to connect to: a socket in the work folder that does not exist and a
        closed port (a script that connects anyway fails instead of finding another server)."""
        return no_server_endpoint(self.cwd or self.default_parent, database)

    def credentials(self) -> Credentials | None:
        return None

    def address_from(self, host: str) -> str:
        return "<no server>"

    def effective(self, spec: Any) -> dict[str, Any]:
        return {}

    def apply_system(self, settings: SystemSettings, here: SystemState) -> dict[str, Any]:
        return here.apply(settings)

    def host_sampler(self, timing: Any, devices: list[str] | None) -> HostSampling | None:
        return None

    def profiler(self, timing: Any, frequency: int) -> None:
        return None  # no server to profile

    def finish_trial(self) -> dict[str, float]:
        return {}

    def data_set_folder(self, parent: str | None, digest: str) -> Path:
        return self._root(Path(parent) if parent else self.default_parent) / digest

    def prepare(
        self, folder: Path, steps: Callable[[Path], None], clock: Callable[[], float]
    ) -> dict[str, float]:
        """Make ``folder`` by running ``steps`` in a partial folder; {} when it exists."""
        self.cwd = folder
        if folder.is_dir():
            return {}
        started = clock()
        partial = folder.with_name(folder.name + PARTIAL)
        if partial.exists():
            shutil.rmtree(partial)  # inside our owned root: an earlier attempt's leftovers
        partial.mkdir()
        steps(partial)
        partial.rename(folder)
        return {"prepare_s": clock() - started}

    def close(self, keep_data: bool = False) -> None:
        """Remove every work folder (scratch files: kept by nothing, not even --resume)."""
        self.cwd = None
        for root in self.roots.values():
            ownership.remove_owned(root)
        self.roots.clear()

    def _root(self, parent: Path) -> Path:
        if parent not in self.roots:
            remove_abandoned(parent)
            root = parent / f"{WORK_PREFIX}{os.getpid()}"
            ownership.mark_owned(root, "work directory")
            self.roots[parent] = root
        return self.roots[parent]


def remove_abandoned(parent: Path) -> list[Path]:
    """Remove work folders of runs that were killed (their pid is gone); the removed ones."""
    removed = []
    if not parent.is_dir():
        return removed
    for path in parent.iterdir():
        match = _WORK_NAME.match(path.name)
        if match and path.is_dir() and ownership.is_owned(path) and not proc.alive(int(match[1])):
            ownership.remove_owned(path)
            removed.append(path)
    return removed


def check_work_parent(parent: Path, needed: int, key: str) -> None:
    """Before anything runs: ``parent`` exists (or can be made), is writable and has room.

    ``key`` names the scenario key the error is about. Creates nothing.
    """
    existing = parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{key}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{key}: {existing} is not writable")
    free = shutil.disk_usage(existing).free
    if needed > free:
        raise ConfigError(
            f"{key}: needs {needed / 2**20:.0f} MiB but {existing} has {free / 2**20:.0f} MiB free"
        )
