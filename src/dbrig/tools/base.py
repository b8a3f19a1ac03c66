"""What every tool driver shares: how to describe the tool and the server it talks to.

A driver module (``sysbench.py``, ``mysqlslap.py``, ``stress_ng.py``) exposes:

- ``INFO``: a :class:`ToolInfo` (binary names, Debian package, version flag);
- a frozen pydantic ``...Params`` model: the scenario's ``workload.<tool>`` or
  ``interference.<tool>`` block, validated;
- ``build_command(params, ...) -> list[str]``: pure, an argv list, never a shell string;
- ``parse(text) -> ...Result``: pure, survives empty, truncated and error output.

Drivers never start processes, read clocks or look at global state: the runner does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ToolInfo:
    """How to find a tool and what to tell the user when it is missing."""

    name: str
    binaries: tuple[str, ...]  # tried in order, e.g. ("mariadb-slap", "mysqlslap")
    package: str  # the Debian package that provides it
    version_args: tuple[str, ...] = ("--version",)


@dataclass(frozen=True)
class Endpoint:
    """Where a client connects, without the password.

    The password never travels in argv: ``client_options_file`` names a 0600
    file that holds it in the form the tool reads (sysbench ``--config-file``,
    a ``[client]`` defaults file for MariaDB clients), or is ``None`` when the
    account has no password (the managed sandbox's root over its socket).
    """

    user: str
    database: str
    socket: str | None = None
    host: str | None = None
    port: int | None = None
    client_options_file: Path | None = None

    def __post_init__(self) -> None:
        if not self.socket and not self.host:
            raise ValueError("an Endpoint needs a unix socket or a host")
