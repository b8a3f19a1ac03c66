"""What every server handle is and declares: :class:`Handle` and its :class:`Capabilities`.

A trial holds one handle: a managed sandbox here (:class:`~dbrig.server.handles.
ManagedServerHandle`), a server dbrig only connects to (``ExternalServerHandle``), a
managed server on another host driven through its agent (``dbrig.remote.server.
RemoteServerHandle``), or the work folder of a workload that needs no server
(``dbrig.run.workdir.WorkDirHandle``). The run side never asks which of them it holds
(``tests/unit/test_architecture.py`` fails on an ``isinstance`` of a handle class): it
reads what the handle declares. A new kind of handle fills in :class:`Capabilities`
and the members of :class:`Handle`; nothing in ``run/`` changes.

================  ==========  ===========  ==========  ==========
capability        managed     external     remote      no server
================  ==========  ===========  ==========  ==========
data_sets         snapshots   in database  snapshots   folder
client_route      forwarded   direct       direct      none
faults            yes         no           no          no
status            yes         yes          yes         no
followed_here     yes         no           no          yes
samples_its_host  no          no           yes         no
================  ==========  ===========  ==========  ==========
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from dbrig.endpoint import Credentials, Endpoint
from dbrig.host.settings import SystemSettings, SystemState


class DataSets(Enum):
    """How a handle's data set is put in place before a trial."""

    SNAPSHOTS = "snapshots"  # prepared once, snapshotted, restored before every trial
    IN_DATABASE = "in database"  # loaded into its database, once or before every trial
    FOLDER = "folder"  # a work folder the workload runs in: no database at all


class ClientRoute(Enum):
    """How a client on another host (``workload.<tool>.host``) reaches the server."""

    FORWARDED = "forwarded"  # listens on this machine's 127.0.0.1: a port forwarded over ssh
    DIRECT = "direct"  # at an address (``address_from``) with ``credentials()``
    NONE = "none"  # nothing to connect to


@dataclass(frozen=True)
class Capabilities:
    """What a handle can do; the run side decides from these, never from its class."""

    data_sets: DataSets
    client_route: ClientRoute
    # A fault (docs/reliability.md) may kill, freeze and restart it: a sandbox dbrig runs
    # on this machine, whose process, datadir and error log it can reach.
    faults: bool
    status: bool  # SHOW GLOBAL STATUS can be read from it (a server, not a work folder)
    # Every process of it that takes this host's CPU is one the host sampler follows (its
    # ``pid``; no process at all counts too): not an external server, whose processes
    # dbrig cannot see, nor one on another host.
    followed_here: bool
    # Its host is sampled by a sampler of its own (``host_sampler``: the agent's), so
    # dbrig's host sampler samples the client's host (the trial's ``client/`` folder).
    samples_its_host: bool


class HostSampling(Protocol):
    """A handle's own sampler of its host (``sampling.registry.Sampler``, plus ``collect``)."""

    error: str | None
    failure: BaseException | None

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def collect(self, folder: Path) -> None:
        """Its files put in the trial's ``folder`` (after every sampler stopped)."""


class Handle(Protocol):
    """What the runner, the data sets and the trial use of a server handle."""

    name: str
    capabilities: Capabilities
    info: dict[str, Any]  # version, variables, where it is: for run.json ({} with no server)

    @property
    def pid(self) -> int | None:
        """Its process on this machine, which the host sampler follows (None: none here)."""

    @property
    def port(self) -> int | None:
        """The TCP port it listens on now (None: not started, or no server)."""

    @property
    def sampled_host(self) -> str | None:
        """The ``hosts:`` key of the host whose CPU and disks the trial's cpu.csv holds
        (its host when ``samples_its_host``); None: this machine."""

    @property
    def work_folder(self) -> Path | None:
        """The working directory of a workload with no server (its data set's folder)."""

    def died(self) -> str | None: ...

    def connect(self) -> Any: ...

    def endpoint(
        self, database: str, options_text: str | None = None, filename: str = "client.cnf"
    ) -> Endpoint:
        """Where a client here connects; ``options_text`` (the password, in the tool's
        option file format) goes to a 0600 file ``filename`` when it logs in with one."""

    def credentials(self) -> Credentials | None:
        """The account a tool logs in with (never logged); None: no password needed."""

    def address_from(self, host: str) -> str:
        """Where a client on ``hosts.<host>`` reaches it (``client_route`` DIRECT)."""

    def effective(self, spec: Any) -> dict[str, Any]: ...

    def apply_system(self, settings: SystemSettings, here: SystemState) -> dict[str, Any]:
        """The cell's ``system`` settings applied where they act (``here``, this machine's,
        or the server's host); the values read back, for the trial record."""

    def host_sampler(self, timing: Any, devices: list[str] | None) -> HostSampling | None:
        """The sampler of its host for one trial (``samples_its_host``), else None.
        ``timing`` is a :class:`dbrig.sampling.SampleTiming`."""

    def profiler(self, timing: Any, frequency: int) -> Any:
        """The CPU profile of its server for one trial, recorded on its own host
        (``samples_its_host``: by the agent there, ``remote/profiling.py``), else None:
        dbrig's own ``perf record`` profiles a server of this machine."""

    def finish_trial(self) -> dict[str, float]: ...

    def close(self, keep_data: bool) -> None: ...
