"""Finding a server binary and telling MariaDB from MySQL."""

from __future__ import annotations

import os
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
    """The server under ``basedir`` (its bin/ and sbin/), else on PATH or in /usr/sbin.

    Under a basedir, every program comes from that basedir: an installed
    mariadb-install-db would otherwise initialise the datadir for another build.
    """
    if basedir is not None:
        if not basedir.is_dir():
            raise ToolMissing(f"server.basedir {basedir} is not a directory")
        # Absolute and without symlinks: mariadbd changes into its datadir, and run.json
        # should name the build that ran (.servers/10.11.18, not .servers/previous).
        basedir = basedir.resolve()
        mysqld = _under_basedir(basedir, ("mariadbd", "mysqld"), ("sbin", "bin"))
    else:
        mysqld = proc.which(("mariadbd", "mysqld"), package="mariadb-server")
    code, out = proc.capture([str(mysqld), "--version"])
    if code != 0:
        raise ServerError(f"{mysqld} --version failed (exit {code}): {out.strip()[:200]}")
    line = out.strip().splitlines()[0] if out.strip() else ""
    flavor, version = parse_version_line(line)
    install_db = None
    if flavor == "mariadb" and basedir is not None:
        install_db = _under_basedir(basedir, _INSTALL_DB, ("bin", "scripts"))
        _check_print_defaults(basedir)
    elif flavor == "mariadb":
        install_db = proc.which(_INSTALL_DB, package="mariadb-server")
    return ServerBinary(mysqld, flavor, version, line, install_db, basedir)


_INSTALL_DB = ("mariadb-install-db", "mysql_install_db")


def _under_basedir(basedir: Path, names: tuple[str, ...], subdirs: tuple[str, ...]) -> Path:
    """The first of ``names`` that is an executable file in one of ``basedir``'s ``subdirs``."""
    for name in names:
        for subdir in subdirs:
            path = basedir / subdir / name
            if path.is_file() and os.access(path, os.X_OK):
                return path
    where = ", ".join(f"{basedir / d}" for d in subdirs)
    raise ToolMissing(
        f"no {' or '.join(names)} under server.basedir {basedir} (looked in {where})",
        hint="an unpacked Debian build needs mariadb-server-core; "
        "scripts/fetch-old-mariadb.sh fetches every package it needs",
    )


def _check_print_defaults(basedir: Path) -> None:
    """mariadb-install-db --basedir runs <basedir>/bin/my_print_defaults and stops without it."""
    if any((basedir / d / "my_print_defaults").is_file() for d in ("bin", "extra")):
        return
    raise ToolMissing(
        f"no my_print_defaults under server.basedir {basedir} (bin/ or extra/): "
        "mariadb-install-db needs it to initialise a datadir",
        hint="an unpacked Debian build needs mariadb-client-core next to mariadb-server-core",
    )
