"""Finding a server under a basedir, and the command lines built from it.

The basedirs are Debian-shaped trees (usr/sbin/mariadbd, usr/bin/mariadb-install-db,
usr/bin/my_print_defaults) of symlinks to the installed MariaDB's real programs, so
``mariadbd --version`` really runs; nothing is started.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from dbrig.errors import ToolMissing
from dbrig.server import sandbox as sandbox_module
from dbrig.server.binary import ServerBinary, find_server, parse_version_line
from dbrig.server.sandbox import Sandbox

INSTALLED = {
    "sbin/mariadbd": shutil.which("mariadbd", path="/usr/sbin:/usr/bin"),
    "bin/mariadb-install-db": shutil.which("mariadb-install-db", path="/usr/bin"),
    "bin/my_print_defaults": shutil.which("my_print_defaults", path="/usr/bin"),
}
needs_mariadb = pytest.mark.skipif(
    not all(INSTALLED.values()),
    reason="needs the installed MariaDB's mariadbd, mariadb-install-db and my_print_defaults",
)


def debian_tree(root: Path, *, leave_out: tuple[str, ...] = ()) -> Path:
    """``root``/usr shaped like an unpacked mariadb-server-core + mariadb-client-core."""
    usr = root / "usr"
    for relative, real in INSTALLED.items():
        if relative in leave_out:
            continue
        link = usr / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(str(real))
    (usr / "bin").mkdir(parents=True, exist_ok=True)
    return usr


@needs_mariadb
def test_everything_comes_from_the_basedir(tmp_path: Path) -> None:
    usr = debian_tree(tmp_path / "10.11.18")
    found = find_server(usr)
    assert found.flavor == "mariadb"
    assert found.basedir == usr
    assert found.mysqld == usr / "sbin" / "mariadbd"
    assert found.install_db == usr / "bin" / "mariadb-install-db"
    assert parse_version_line(found.version_line)[1] == found.version


@needs_mariadb
def test_a_relative_or_symlinked_basedir_is_made_absolute_and_real(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    usr = debian_tree(tmp_path / "10.11.18")
    (tmp_path / "previous").symlink_to("10.11.18")
    monkeypatch.chdir(tmp_path)
    found = find_server(Path("previous/usr"))
    # mariadbd changes into its datadir, so a relative basedir would stop meaning anything;
    # and run.json names the build, not the link that pointed at it that day.
    assert found.basedir == usr
    assert found.basedir.is_absolute()
    assert found.mysqld == usr / "sbin" / "mariadbd"


@needs_mariadb
def test_no_install_db_in_the_basedir_is_refused_not_taken_from_path(tmp_path: Path) -> None:
    usr = debian_tree(tmp_path / "old", leave_out=("bin/mariadb-install-db",))
    with pytest.raises(ToolMissing, match=r"no mariadb-install-db or mysql_install_db under"):
        find_server(usr)


@needs_mariadb
def test_no_my_print_defaults_names_the_missing_package(tmp_path: Path) -> None:
    usr = debian_tree(tmp_path / "old", leave_out=("bin/my_print_defaults",))
    with pytest.raises(ToolMissing) as caught:
        find_server(usr)
    assert "my_print_defaults" in caught.value.message
    assert "mariadb-client-core" in str(caught.value)


def test_no_server_in_the_basedir(tmp_path: Path) -> None:
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    with pytest.raises(ToolMissing, match=r"no mariadbd or mysqld under server.basedir"):
        find_server(tmp_path / "usr")


def test_a_basedir_that_is_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ToolMissing, match=r"server.basedir .*missing is not a directory"):
        find_server(tmp_path / "missing")


def basedir_binary(usr: Path) -> ServerBinary:
    return ServerBinary(
        mysqld=usr / "sbin" / "mariadbd",
        flavor="mariadb",
        version="10.11.18",
        version_line="mariadbd  Ver 10.11.18-MariaDB-0+deb12u1",
        install_db=usr / "bin" / "mariadb-install-db",
        basedir=usr,
    )


def test_the_installer_and_the_server_both_get_the_basedir(tmp_path: Path) -> None:
    usr = tmp_path / "10.11.18" / "usr"
    sandbox = Sandbox("old", basedir_binary(usr), tmp_path / "home")
    try:
        argv = sandbox._initialize_argv()
        assert argv[0] == str(usr / "bin" / "mariadb-install-db")
        assert f"--basedir={usr}" in argv
        # mariadbd derives plugin_dir, character_sets_dir and its messages from basedir.
        assert sandbox._base_settings()["basedir"] == str(usr)
    finally:
        sandbox.close()


@pytest.mark.parametrize("root", [True, False])
def test_either_flavor_initialises_with_its_own_options_then_basedir_and_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root: bool
) -> None:
    usr = tmp_path / "usr"
    monkeypatch.setattr(sandbox_module, "_is_root", lambda: root)
    user = ["--user=root"] if root else []
    mariadb = Sandbox("m", basedir_binary(usr), tmp_path / "m")
    mysql = Sandbox("y", replace(basedir_binary(usr), flavor="mysql"), tmp_path / "y")
    try:
        assert mariadb._initialize_argv() == [
            str(usr / "bin" / "mariadb-install-db"),
            "--no-defaults",
            f"--datadir={mariadb.datadir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            f"--basedir={usr}",
            *user,
        ]
        assert mysql._initialize_argv() == [
            str(usr / "sbin" / "mariadbd"),
            "--no-defaults",
            "--initialize-insecure",
            f"--datadir={mysql.datadir}",
            f"--basedir={usr}",
            *user,
        ]
    finally:
        mariadb.close()
        mysql.close()
