"""An external server: one dbrig only connects to, over TCP or a socket.

dbrig cannot restore an external server's datadir, so the scenario says what
happens between trials (``reset: none`` or ``reset: reprepare``) and the
report says which.

The password comes from an environment variable (``password_env``) or a
client defaults file (``defaults_file``). It never reaches argv, ``ps``, logs
or reports: each tool gets it through a 0600 option file in a private
temporary directory that is deleted when the run ends.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pymysql

from dbrig import proc
from dbrig.endpoint import Credentials, Endpoint
from dbrig.errors import ConfigError

ACCESS_DENIED = 1045


def read_password(name: str, password_env: str | None, defaults_file: Path | None) -> str:
    """The password from the environment or a defaults file ('' when neither is given)."""
    if password_env:
        proc.scrub_from_children(password_env)  # tools get it through a 0600 option file
        value = os.environ.get(password_env)
        if value is None:
            raise ConfigError(
                f"servers.{name}.password_env: the environment variable {password_env} is not set"
            )
        return value
    if defaults_file:
        return _password_from_defaults(name, defaults_file)
    return ""


def _password_from_defaults(name: str, path: Path) -> str:
    import configparser

    parser = configparser.ConfigParser(allow_no_value=True, strict=False, interpolation=None)
    try:
        parser.read_string(path.read_text())
    except (OSError, configparser.Error) as exc:
        raise ConfigError(f"servers.{name}.defaults_file: cannot read {path}: {exc}") from None
    for section in ("client", "mysql", "mariadb-client"):
        if parser.has_option(section, "password"):
            return (parser.get(section, "password") or "").strip("'\"")
    return ""


def write_secret(directory: Path, name: str, text: str) -> Path:
    """A 0600 file, created with that mode (never briefly world-readable)."""
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    return path


class ExternalConnection:
    """Connection facts and secrets for one external server."""

    def __init__(self, name: str, spec: Any) -> None:
        self.name = name
        self.spec = spec
        self.password = read_password(name, spec.password_env, spec.defaults_file)
        self._secrets = Path(tempfile.mkdtemp(prefix="dbrig-secrets-"))
        os.chmod(self._secrets, 0o700)

    @property
    def where(self) -> str:
        return self.spec.socket or f"{self.spec.host}:{self.spec.port}"

    def connect(self, database: str | None = None) -> pymysql.Connection:
        kwargs: dict[str, Any] = {
            "user": self.spec.user,
            "password": self.password,
            "database": database,
            "connect_timeout": 5,
            "autocommit": True,
        }
        if self.spec.socket:
            kwargs["unix_socket"] = self.spec.socket
        else:
            kwargs.update(host=self.spec.host, port=self.spec.port)
        return pymysql.connect(**kwargs)

    def check_reachable(self) -> None:
        """One-line error naming host and port (never the password) when it does not answer."""
        try:
            self.connect().close()
        except pymysql.err.Error as exc:  # not only OperationalError: a non-MySQL port
            # answers with garbage (InternalError: packet sequence number wrong)
            code = exc.args[0] if exc.args else None
            if code == ACCESS_DENIED:
                source = self.spec.password_env or self.spec.defaults_file or "no password given"
                raise ConfigError(
                    f"servers.{self.name}: access denied for user '{self.spec.user}' at "
                    f"{self.where} (wrong password? it came from {source})"
                ) from None
            raise ConfigError(
                f"servers.{self.name}: cannot connect to {self.where}: "
                f"{exc.args[1] if len(exc.args) > 1 else exc}"
            ) from None

    def endpoint(self, database: str, options_text: str | None, filename: str) -> Endpoint:
        """Where the tool connects; the password travels in a 0600 option file."""
        options = write_secret(self._secrets, filename, options_text) if options_text else None
        return Endpoint(
            user=self.spec.user,
            database=database,
            socket=self.spec.socket,
            host=None if self.spec.socket else self.spec.host,
            port=None if self.spec.socket else self.spec.port,
            client_options_file=options,
        )

    def options_for_tool(self) -> Credentials:
        return Credentials(
            user=self.spec.user,
            password=self.password,
            host=None if self.spec.socket else self.spec.host,
            port=None if self.spec.socket else self.spec.port,
            socket=self.spec.socket,
        )

    def describe(self) -> dict[str, Any]:
        """For run.json and reports: where it is and how its data is reset (no secrets)."""
        return {
            "where": self.where,
            "user": self.spec.user,
            "reset": self.spec.reset,
            "prepare": self.spec.prepare,
        }

    def close(self) -> None:
        shutil.rmtree(self._secrets, ignore_errors=True)
