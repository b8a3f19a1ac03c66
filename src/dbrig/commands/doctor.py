"""``dbrig doctor``: what this machine offers a benchmark, checked without running one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
from rich.table import Table

from dbrig.commands.console import out_console, print_line
from dbrig.errors import EXIT_BAD_INPUT, DbrigError
from dbrig.host import probe
from dbrig.proc import which
from dbrig.server.binary import find_server
from dbrig.server.sandbox import MAX_SOCKET_PATH
from dbrig.tools.base import ToolInfo
from dbrig.tools.registry import all_tools

SERVER_PACKAGE = "mariadb-server"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True
    package: str | None = None  # the Debian package that provides what is missing


def checks(workdir: Path) -> Iterator[Check]:
    yield _server()
    for info, required in all_tools():
        yield _tool(info, required)
    yield from _host(workdir)


def _server() -> Check:
    try:
        b = find_server()
    except DbrigError as exc:
        return Check("server", False, str(exc), package=SERVER_PACKAGE)
    init = f", init: {b.install_db}" if b.install_db else ", init: mysqld --initialize-insecure"
    return Check("server", True, f"{b.flavor} {b.version} ({b.mysqld}{init})")


def _tool(info: ToolInfo, required: bool) -> Check:
    try:
        path = which(info.binaries, package=info.package)
    except DbrigError as exc:
        return Check(info.name, False, str(exc), required, package=info.package)
    version = probe.tool_version(path, info.version_args) or "version unknown"
    return Check(info.name, True, f"{version} ({path})", required)


def _host(workdir: Path) -> Iterator[Check]:
    host = probe.host()
    yield Check("user", True, "root" if host["is_root"] else f"uid {os.geteuid()} (not root)")
    yield Check("cpu", True, f"{host['cpu_count']} x {host['cpu_model']}")
    yield Check("memory", True, f"{host['memory_gib']} GiB")
    yield Check("kernel", True, f"{host['kernel']} ({host['os']})")
    target = workdir if workdir.exists() else _existing_parent(workdir)
    writable = os.access(target, os.W_OK)
    yield Check(
        "work dir", writable, f"{workdir.resolve()} ({'writable' if writable else 'NOT writable'})"
    )
    if writable:
        st = probe.storage(target)
        yield Check(
            "filesystem",
            True,
            f"{st.get('fstype', '?')} on {st.get('device', '?')} (block device "
            f"{st.get('block_device') or '?'}, I/O scheduler {st.get('io_scheduler') or '?'})",
        )
        yield Check(
            "reflink",
            True,
            "yes: snapshots and restores are copy-on-write clones"
            if st["reflink"]
            else "no: snapshots and restores are full copies (XFS or btrfs would clone)",
        )
    tmp = tempfile.gettempdir()
    room = MAX_SOCKET_PATH - len(os.path.join(tmp, "dbrig-xxxxxxxx", "mysqld.sock"))
    yield Check("socket dir", room >= 0, f"{tmp} ({room} bytes to spare under {MAX_SOCKET_PATH})")


def install_line(found: list[Check], is_root: bool) -> str | None:
    """The one apt-get command that installs every missing server and tool, if any is."""
    packages = dict.fromkeys(c.package for c in found if not c.ok and c.package)
    if not packages:
        return None
    sudo = "" if is_root else "sudo "
    return f"{sudo}apt-get install -y {' '.join(packages)}"


def _existing_parent(path: Path) -> Path:
    path = path.resolve()
    while not path.exists():
        path = path.parent
    return path


@click.command("doctor")
@click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="Where runs will be written (checked for filesystem and reflink support).",
)
def doctor_command(workdir: Path) -> None:
    """Which servers and tools are found, their versions, and what this host supports."""
    t = Table(title="dbrig doctor", show_header=True)
    t.add_column("check")
    t.add_column("result", overflow="fold")
    found = list(checks(workdir))
    for check in found:
        t.add_row(check.name, ("" if check.ok else "[red]MISSING[/red] ") + check.detail)
    console = out_console()
    console.print(t)
    line = install_line(found, is_root=os.geteuid() == 0)
    if line:
        print_line(console, f"install what is missing with: {line}")
    if any(not c.ok and c.required for c in found):
        raise SystemExit(EXIT_BAD_INPUT)
