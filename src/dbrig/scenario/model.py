"""The scenario's schema: pydantic models, frozen, every key documented.

The workload and interference blocks take their keys and schemas from the tool
registry (:mod:`dbrig.tools.registry`), so a new tool adds no line here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from dbrig.host.settings import SystemSettings
from dbrig.tools.base import ResumableWorkload
from dbrig.tools.registry import INTERFERENCE_TOOLS, WORKLOAD_TOOLS, field_name, workload_for
from dbrig.util.units import parse_size

Scalar = str | int | float | bool | None
RESERVED_SERVER_SETTINGS = frozenset(
    {
        "datadir",
        "socket",
        "port",
        "pid_file",
        "log_error",
        "bind_address",
        "basedir",
        "user",
        "innodb_data_home_dir",
        "innodb_log_group_home_dir",
        "innodb_undo_directory",
        "aria_log_dir_path",
        "tmpdir",
    }
)
DEFAULT_SERVER = "default"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class ManagedServer(_Frozen):
    """A private server that dbrig initialises, starts, stops and restores."""

    kind: Literal["managed"] = "managed"
    basedir: Path | None = Field(
        None, description="installation prefix holding bin/ or sbin/ mariadbd or mysqld"
    )
    config: dict[str, Scalar] = Field(
        default_factory=dict,
        description="my.cnf [mysqld] settings, passed through unchanged (null = bare option)",
    )
    cpus: list[Annotated[int, Field(ge=0)]] | None = Field(
        None, description="pin the server to these cores (emulates a smaller instance)"
    )
    port: int | None = Field(None, ge=1024, le=65535, description="fixed TCP port on 127.0.0.1")
    startup_timeout: float = Field(120.0, gt=0, description="seconds to wait for it to answer")
    host: str | None = Field(
        None,
        description="run it on this host (a key of hosts:), through dbrig's agent there; "
        "default: this machine",
    )

    @field_validator("config")
    @classmethod
    def _no_sandbox_paths(cls, config: dict[str, Scalar]) -> dict[str, Scalar]:
        """The sandbox's own files and addresses are dbrig's: a scenario that moved the datadir
        would have dbrig start, write to and restore a directory it did not create."""
        for key in config:
            if key.replace("-", "_").lower() in RESERVED_SERVER_SETTINGS:
                raise ValueError(
                    f"'{key}' is set by dbrig for its sandbox (use port: for a fixed port)"
                )
        return config


class ExternalServer(_Frozen):
    """A server dbrig only connects to; it cannot restore its data."""

    kind: Literal["external"]
    host: str = "127.0.0.1"
    port: int = Field(3306, ge=1, le=65535)
    socket: str | None = None
    user: str
    password_env: str | None = Field(None, description="environment variable holding the password")
    defaults_file: Path | None = Field(None, description="client defaults file with the password")
    reset: Literal["none", "reprepare"] = Field(
        description=(
            "between trials: 'none' prepares each data set once, 'reprepare' runs the "
            "workload's cleanup + prepare before every trial"
        )
    )
    prepare: bool = Field(
        True, description="false: the data is already there; dbrig never drops or loads it"
    )

    @model_validator(mode="after")
    def _one_password_source(self) -> ExternalServer:
        if self.password_env and self.defaults_file:
            raise ValueError("give password_env or defaults_file, not both")
        return self


# ssh options dbrig sets itself (the connection's lifecycle, no prompts): not the scenario's.
RESERVED_SSH_OPTIONS = frozenset({"batchmode", "controlmaster", "controlpath", "controlpersist"})


class HostSpec(_Frozen):
    """A machine dbrig reaches over ssh (the system client: ~/.ssh/config applies)."""

    ssh: str = Field(
        pattern=r"^[^\s-][^\s]*$",
        description="the ssh destination, [user@]host or a Host alias of ~/.ssh/config",
    )
    port: int | None = Field(None, ge=1, le=65535, description="ssh port (default: ssh's own)")
    options: dict[str, str | int] = Field(
        default_factory=dict,
        description="extra ssh -o options, e.g. {IdentityFile: ~/.ssh/bench, ProxyJump: bastion}",
    )
    address: str | None = Field(
        None,
        pattern=r"^[^\s]+$",
        description="where clients reach a managed server on this host (default: the host "
        "name of ssh, as ssh -G resolves it)",
    )
    python: str = Field(
        "python3",
        min_length=1,
        description="the command that runs the Python with dbrig installed there (split "
        "like a shell line, e.g. /opt/dbrig/bin/python)",
    )

    @field_validator("options")
    @classmethod
    def _not_dbrigs_own(cls, options: dict[str, str | int]) -> dict[str, str | int]:
        for key in options:
            if key.lower() in RESERVED_SSH_OPTIONS:
                raise ValueError(
                    f"'{key}' is set by dbrig (one multiplexed connection per host, no prompts)"
                )
        return options


ServerSpec = Annotated[ManagedServer | ExternalServer, Field(discriminator="kind")]


class _WorkloadBase(_Frozen):
    """Exactly one tool block, keyed by the tool (``workload.sysbench: {...}``)."""

    @model_validator(mode="after")
    def _exactly_one(self) -> _WorkloadBase:
        given = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(given) != 1:
            names = ", ".join(f.alias or n for n, f in type(self).model_fields.items())
            raise ValueError(f"name exactly one workload tool ({names}); got {len(given)}")
        return self

    @property
    def tool(self) -> str:
        """The YAML key of the tool this block names."""
        fields = type(self).model_fields
        return next(f.alias or n for n, f in fields.items() if getattr(self, n) is not None)

    @property
    def params(self) -> BaseModel:
        return getattr(self, field_name(self.tool))


def _tool_fields(tools: Mapping[str, type]) -> dict[str, Any]:
    """One optional field per registered tool, named by its YAML key."""
    return {
        field_name(key): (tool.params_model | None, Field(None, alias=key))
        for key, tool in tools.items()
    }


# Built from the tool registry, so a new tool is one registry line, not a schema edit.
WorkloadBlock = create_model(
    "WorkloadBlock", __base__=_WorkloadBase, **_tool_fields(WORKLOAD_TOOLS)
)
Interference = create_model("Interference", __base__=_Frozen, **_tool_fields(INTERFERENCE_TOOLS))


class CpuProfile(_Frozen):
    frequency: int = Field(
        0,
        ge=0,
        le=10_000,
        description="samples per second of the server's stacks during the measured window "
        "(perf record, docs/profiling.md); 0: off",
    )
    client: bool = Field(
        False,
        description="also record the workload's client process (it must run here, and the "
        "scenario needs a warm-up: perf starts when the window does)",
    )


class Profiles(_Frozen):
    cpu: CpuProfile = CpuProfile()


class Internals(_Frozen):
    enabled: bool = Field(
        False,
        description="the server's wait events, statement digests (performance_schema: "
        "server.config.performance_schema: ON), INNODB_METRICS and SHOW ENGINE INNODB STATUS "
        "over the measured window (docs/profiling.md)",
    )
    digests: int = Field(20, ge=1, le=1000, description="statements kept, by total time")


class Sampling(_Frozen):
    enabled: bool = True
    interval: float = Field(1.0, ge=0.05, le=60, description="seconds between samples")
    devices: list[str] | None = Field(
        None, description="block devices to sample (default: the datadir's device)"
    )
    profile: Profiles = Profiles()
    internals: Internals = Internals()


class Soak(_Frozen):
    """A soak: drift of the interval series over a long window, and warnings on a real trend.

    The thresholds' defaults live with the drift columns (dbrig.metrics: SOAK_*), read by the
    report's warnings; None here means that default."""

    drift_threshold_pct_per_h: float | None = Field(
        None, gt=0, description="warn on TPS or latency drift beyond this, % of the mean per hour"
    )
    rss_threshold_mib_per_h: float | None = Field(
        None, gt=0, description="warn on server RSS growth beyond this, MiB per hour"
    )


class WorkspaceSpec(_Frozen):
    image: str | None = Field(
        None, description="size of an XFS (reflink) image for datadirs and snapshots, e.g. 20G"
    )

    @field_validator("image")
    @classmethod
    def _a_size(cls, value: str | None) -> str | None:
        if value is not None and parse_size(value) is None:
            raise ValueError(f"expected a size such as 20G, got {value!r}")
        return value

    @property
    def image_bytes(self) -> int | None:
        return None if self.image is None else parse_size(self.image)


AT = Field(ge=0, description="seconds into the measured window (after the warm-up)")


class KillServer(_Frozen):
    """Signal the managed server under load; after KILL or TERM dbrig restarts it on the
    same datadir (no restore) and measures its recovery; STOP freezes it for ``for`` s."""

    signal: Literal["KILL", "TERM", "STOP"] = Field(
        "KILL", description="KILL (a crash), TERM (a clean shutdown) or STOP (a freeze)"
    )
    at: float = AT
    for_: float | None = Field(
        None, alias="for", gt=0, description="STOP only: seconds frozen before SIGCONT (5)"
    )
    timeout: float = Field(
        120.0, gt=0, description="seconds the restarted server has to answer a query"
    )

    @model_validator(mode="after")
    def _for_only_with_stop(self) -> KillServer:
        if self.for_ is not None and self.signal != "STOP":
            raise ValueError(
                f"'for' is the length of a STOP (freeze); a {self.signal} has none: remove 'for'"
            )
        return self

    @property
    def frozen_s(self) -> float:
        return self.for_ if self.for_ is not None else 5.0

    @property
    def ends_client(self) -> bool:
        """KILL and TERM take the server away and end the workload's run with it."""
        return self.signal != "STOP"


class KillClient(_Frozen):
    """SIGKILL the workload tool (a client crash); dbrig starts it again at once."""

    at: float = AT


class DeleteFile(_Frozen):
    """Delete a file of the datadir under load (the server keeps what it has open)."""

    path: str = Field(description="relative to the datadir, e.g. sbtest/sbtest1.ibd")
    at: float = AT

    @field_validator("path")
    @classmethod
    def _inside_the_datadir(cls, value: str) -> str:
        parts = Path(value).parts
        if not parts or Path(value).is_absolute() or ".." in parts:
            raise ValueError(f"expected a path relative to the datadir, got {value!r}")
        return value


class DiskFull(_Frozen):
    """Fill the filesystem holding the datadir (one dbrig made: a loop-mounted XFS image
    of ``size``) for ``for`` seconds, then free it."""

    at: float = AT
    for_: float = Field(5.0, alias="for", gt=0, description="seconds the disk stays full")
    size: str | None = Field(
        None, description="size of the filesystem dbrig makes for the datadirs (>= 512M)"
    )

    @field_validator("size")
    @classmethod
    def _a_size(cls, value: str | None) -> str | None:
        if value is not None and parse_size(value) is None:
            raise ValueError(f"expected a size such as 1G, got {value!r}")
        return value

    @property
    def size_bytes(self) -> int | None:
        return None if self.size is None else parse_size(self.size)

    @property
    def frozen_s(self) -> float:
        return self.for_


FAULT_KEYS = ("kill_server", "kill_client", "delete_file", "disk_full")


class Faults(_Frozen):
    """Faults injected into every trial of the cell, each at its own time."""

    kill_server: KillServer | None = None
    kill_client: KillClient | None = None
    delete_file: DeleteFile | None = None
    disk_full: DiskFull | None = None

    @property
    def given(self) -> dict[str, KillServer | KillClient | DeleteFile | DiskFull]:
        """The faults named, by key, in the order they fire."""
        named = {k: getattr(self, k) for k in FAULT_KEYS}
        chosen = {k: v for k, v in named.items() if v is not None}
        return dict(sorted(chosen.items(), key=lambda kv: kv[1].at))

    @property
    def ends_client(self) -> bool:
        server_ends_it = self.kill_server is not None and self.kill_server.ends_client
        return server_ends_it or self.kill_client is not None


def _check_disk_full(fault: DiskFull, workspace: WorkspaceSpec | None) -> None:
    """The filesystem to fill is the clone workspace dbrig makes: its size comes from
    ``size`` or ``workspace.image``, and they must agree."""
    image = workspace.image_bytes if workspace is not None else None
    if fault.size_bytes is None and image is None:
        raise ValueError(
            "disk_full: give its size (e.g. size: 1G): dbrig fills only a filesystem it makes"
        )
    if fault.size_bytes is not None and image is not None and fault.size_bytes != image:
        raise ValueError(
            f"disk_full.size {fault.size} differs from workspace.image {workspace.image}: "
            "the datadirs live on one filesystem; give one of them"
        )


def _check_faults(faults: Faults, data: Mapping[str, Any]) -> None:
    """Faults need a server dbrig owns and a time-limited workload that outlasts them."""
    if not faults.given or "workload" not in data:
        return
    specs = data.get("servers") or {DEFAULT_SERVER: data.get("server") or ManagedServer()}
    external = [name for name, spec in specs.items() if isinstance(spec, ExternalServer)]
    if external:
        raise ValueError(
            f"server '{external[0]}' is external: dbrig does not own it and will not kill, "
            "freeze or restart it (faults need a managed server)"
        )
    tool = workload_for(data["workload"])
    if not tool.needs_server:
        raise ValueError(f"{tool.title} runs no server to inject faults into")
    warmup = int(data.get("warmup") or 0)
    expected = tool.expected_seconds(warmup)
    if expected is None:
        raise ValueError(f"faults need a time-limited workload; {tool.title} has no time limit")
    window = expected - warmup
    for key, fault in faults.given.items():
        lasts = isinstance(fault, DiskFull) or (
            isinstance(fault, KillServer) and not fault.ends_client
        )
        ends = fault.at + (fault.frozen_s if lasts else 0)
        if ends >= window:
            what = f"at + for = {ends:g} s" if ends != fault.at else f"at = {fault.at:g} s"
            what = f"{key}.{what}"
            raise ValueError(
                f"{what} is not inside the {window:g} s measured window "
                "(faults count from the end of the warm-up)"
            )
    if faults.disk_full is not None:
        _check_disk_full(faults.disk_full, data.get("workspace"))
    if tool.client_host is not None:
        raise ValueError(
            f"faults need the client on this machine (a run resumed after a fault starts here), "
            f"not on host '{tool.client_host}'"
        )
    if isinstance(tool, ResumableWorkload):
        return
    if faults.kill_client is not None or (faults.ends_client and not tool.reconnects_itself):
        raise ValueError(f"{tool.title} cannot be started again after a fault ends its run")


class Until(_Frozen):
    """What a sequential run waits for: one ``decided_by`` factor or a ``ci_width``."""

    decided_by: str | None = Field(
        None, description="a factor (as for compare --by) whose comparisons must be decided"
    )
    ci_width: float | None = Field(
        None, description="every cell's headline interval half width, relative (5% or 0.05)"
    )
    metrics: list[str] = Field(
        default_factory=list, description="the metrics looked at; default: the headline ones"
    )

    @field_validator("ci_width", mode="before")
    @classmethod
    def _percent(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().endswith("%"):
            try:
                return float(value.strip()[:-1]) / 100
            except ValueError:
                raise ValueError(f"expected a width such as 5%, got {value!r}") from None
        return value

    @model_validator(mode="after")
    def _one_rule(self) -> Until:
        if (self.decided_by is None) == (self.ci_width is None):
            raise ValueError("give one of decided_by (a factor) or ci_width (such as 5%)")
        if self.ci_width is not None and not 0 < self.ci_width < 1:
            raise ValueError(f"ci_width must be between 0 % and 100 %, got {self.ci_width:g}")
        return self

    @property
    def rule(self) -> str:
        return "decided_by" if self.decided_by is not None else "ci_width"


class SequentialRepeat(_Frozen):
    """Rounds of every cell from ``min`` to ``max``, stopping after a look that decides."""

    min: int = Field(3, ge=2, le=1000)
    max: int = Field(ge=2, le=1000)
    until: Until
    spending: Literal["obrien-fleming", "pocock"] = "obrien-fleming"
    alpha: float = Field(0.05, gt=0, lt=1)

    @model_validator(mode="after")
    def _ordered(self) -> SequentialRepeat:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is more than max ({self.max})")
        return self


def _repeat_kind(value: Any) -> str:
    return "SequentialRepeat" if isinstance(value, Mapping | SequentialRepeat) else "int"


# One error per spelling: a mapping is read as a design, anything else as a count.
Repeat = Annotated[
    Annotated[Annotated[int, Field(ge=1, le=1000)], Tag("int")]
    | Annotated[SequentialRepeat, Tag("SequentialRepeat")],
    Discriminator(_repeat_kind),
]


class Scenario(_Frozen):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    server: ServerSpec | None = None
    servers: dict[str, ServerSpec] | None = None
    hosts: dict[str, HostSpec] = Field(
        default_factory=dict, description="machines reached over ssh, by name"
    )
    workload: WorkloadBlock
    interference: Interference = Interference()
    sampling: Sampling = Sampling()
    system: SystemSettings = SystemSettings()
    workspace: WorkspaceSpec = WorkspaceSpec()
    soak: Soak | None = None
    matrix: dict[str, list[Any]] | list[dict[str, list[Any]]] = Field(default_factory=dict)
    repeat: Repeat = 1
    warmup: int = Field(0, ge=0, description="seconds of load run and discarded before measuring")
    order: Literal["shuffled", "sequential"] = "shuffled"
    seed: int | None = None
    out: str = "runs"
    faults: Faults = Faults()

    @property
    def rounds(self) -> int:
        """Repetitions planned per cell: ``repeat``, or a sequential design's ``max``."""
        return self.repeat if isinstance(self.repeat, int) else self.repeat.max

    @property
    def sequential(self) -> SequentialRepeat | None:
        return None if isinstance(self.repeat, int) else self.repeat

    @model_validator(mode="after")
    def _sequential_is_interleaved(self) -> Scenario:
        if self.sequential is not None and self.order == "sequential":
            raise ValueError(
                "repeat.until needs rounds of every cell: use order: shuffled, not sequential"
            )
        return self

    @field_validator("faults")
    @classmethod
    def _faults_fit(cls, faults: Faults, info: ValidationInfo) -> Faults:
        _check_faults(faults, info.data)
        return faults

    @model_validator(mode="after")
    def _server_or_servers(self) -> Scenario:
        if self.server is not None and self.servers is not None:
            raise ValueError("give 'server' or 'servers', not both")
        if self.servers is not None and not self.servers:
            raise ValueError("'servers' names no server")
        tool = workload_for(self.workload)
        if not tool.needs_server and (self.server is not None or self.servers is not None):
            # Refused rather than ignored: settings the user wrote would silently do nothing.
            key = "server" if self.server is not None else "servers"
            raise ValueError(f"{key}: {tool.title} needs no server; remove the {key} block")
        return self

    @model_validator(mode="after")
    def _client_host_is_named(self) -> Scenario:
        tool = workload_for(self.workload)
        host = tool.client_host
        if host is not None and host not in self.hosts:
            known = ", ".join(sorted(self.hosts)) or "none: add a hosts: block"
            raise ValueError(
                f"workload.{tool.key}.host: '{host}' is not a key of hosts: (known: {known})"
            )
        return self

    @model_validator(mode="after")
    def _interference_host_is_named(self) -> Scenario:
        for key in INTERFERENCE_TOOLS:
            host = getattr(getattr(self.interference, field_name(key)), "host", None)
            if host is not None and host not in self.hosts:
                known = ", ".join(sorted(self.hosts)) or "none: add a hosts: block"
                raise ValueError(
                    f"interference.{key}.host: '{host}' is not a key of hosts: (known: {known})"
                )
        return self

    @model_validator(mode="after")
    def _server_host_is_named(self) -> Scenario:
        named = self.servers or ({"": self.server} if self.server is not None else {})
        for name, spec in named.items():
            host = getattr(spec, "host", None) if isinstance(spec, ManagedServer) else None
            if host is not None and host not in self.hosts:
                key = f"servers.{name}.host" if name else "server.host"
                known = ", ".join(sorted(self.hosts)) or "none: add a hosts: block"
                raise ValueError(f"{key}: '{host}' is not a key of hosts: (known: {known})")
        return self

    @property
    def server_specs(self) -> dict[str, ManagedServer | ExternalServer]:
        if self.servers:
            return dict(self.servers)
        return {DEFAULT_SERVER: self.server or ManagedServer()}
