"""The scenario's schema: pydantic models, frozen, every key documented.

The workload and interference blocks take their keys and schemas from the tool
registry (:mod:`dbrig.tools.registry`), so a new tool adds no line here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from dbrig.host.settings import SystemSettings
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


class Sampling(_Frozen):
    enabled: bool = True
    interval: float = Field(1.0, ge=0.05, le=60, description="seconds between samples")
    devices: list[str] | None = Field(
        None, description="block devices to sample (default: the datadir's device)"
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
    matrix: dict[str, list[Any]] | list[dict[str, list[Any]]] = Field(default_factory=dict)
    repeat: int = Field(1, ge=1, le=1000)
    warmup: int = Field(0, ge=0, description="seconds of load run and discarded before measuring")
    order: Literal["shuffled", "sequential"] = "shuffled"
    seed: int | None = None
    out: str = "runs"

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
        host = getattr(tool.params, "host", None)
        if host is not None and host not in self.hosts:
            known = ", ".join(sorted(self.hosts)) or "none: add a hosts: block"
            raise ValueError(
                f"workload.{tool.key}.host: '{host}' is not a key of hosts: (known: {known})"
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
