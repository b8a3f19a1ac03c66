"""Where a client connects and how it logs in: shared by tools, servers and the run.

Neutral on purpose: a tool builds its command from an :class:`Endpoint`, a
server hands one out, and neither needs the other's module.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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


@dataclass(frozen=True)
class Credentials:
    """What a tool's option file needs to log in; never logged or saved."""

    user: str
    password: str
    host: str | None
    port: int | None
    socket: str | None

    def __repr__(self) -> str:
        return f"Credentials(user={self.user!r}, password=***)"


def is_loopback(host: str) -> bool:
    """``host`` names this machine: localhost, ::1 or an address of 127.0.0.0/8."""
    return host in ("localhost", "::1") or host.startswith("127.")


NO_SERVER_USER = "dbrig-no-server"
NO_SERVER_HOST = "127.0.0.1"
NO_SERVER_PORT = 1  # tcpmux: nothing a database listens on
NO_SERVER_SOCKET = "no-server/mysqld.sock"


def no_server_endpoint(folder: str | Path, database: str) -> Endpoint:
    """Where a workload with no server "connects": a socket inside its work ``folder``
    that never exists and a closed port on loopback, so a script that connects anyway
    fails at once instead of reaching a server dbrig did not start (the system's
    ``/run/mysqld/mysqld.sock``, which a client falls back to when given nothing)."""
    return Endpoint(
        user=NO_SERVER_USER,
        database=database,
        socket=f"{folder}/{NO_SERVER_SOCKET}",
        host=NO_SERVER_HOST,
        port=NO_SERVER_PORT,
    )
