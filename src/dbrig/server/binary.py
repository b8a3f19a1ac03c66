"""Finding a server binary and telling MariaDB from MySQL."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dbrig import proc
from dbrig.errors import ServerError, ToolMissing

_VERSION = re.compile(r"Ver\s+(\d+\.\d+\.\d+)(\S*)")


@dataclass(frozen=True)
class ServerBinary:
    mysqld: Path
    flavor: str  # "mariadb" or "mysql"
    version: str  # "10.11.19"
    version_line: str
    install_db: Path | None  # mariadb-install-db; None for MySQL (mysqld --initialize-insecure)
    basedir: Path | None

    @property
    def major_minor(self) -> tuple[int, int]:
        major, minor, *_ = self.version.split(".")
        return int(major), int(minor)


def parse_version_line(text: str) -> tuple[str, str]:
    """(flavor, version) from ``mysqld --version`` output."""
    match = _VERSION.search(text)
    if not match:
        raise ServerError(f"cannot read a server version from: {text.strip()[:120]!r}")
    flavor = "mariadb" if "mariadb" in text.lower() else "mysql"
    return flavor, match.group(1)


def find_server(basedir: Path | None = None) -> ServerBinary:
    """The server under ``basedir`` (its bin/ and sbin/), else on PATH or in /usr/sbin."""
    dirs = [basedir / "bin", basedir / "sbin"] if basedir else []
    if basedir and not basedir.is_dir():
        raise ToolMissing(f"server.basedir {basedir} is not a directory")
    mysqld = proc.which(("mariadbd", "mysqld"), package="mariadb-server", extra_dirs=dirs)
    if basedir and basedir not in mysqld.parents:
        raise ToolMissing(f"no mariadbd or mysqld under server.basedir {basedir}")
    code, out = proc.capture([str(mysqld), "--version"])
    if code != 0:
        raise ServerError(f"{mysqld} --version failed (exit {code}): {out.strip()[:200]}")
    line = out.strip().splitlines()[0] if out.strip() else ""
    flavor, version = parse_version_line(line)
    install_db = None
    if flavor == "mariadb":
        install_db = proc.which(
            ("mariadb-install-db", "mysql_install_db"),
            package="mariadb-server",
            extra_dirs=[*dirs, *([basedir / "scripts"] if basedir else [])],
        )
    return ServerBinary(mysqld, flavor, version, line, install_db, basedir)
