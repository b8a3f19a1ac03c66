"""``dbrig doctor``: what this machine offers a benchmark, checked without running one."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
from rich.table import Table

import dbrig
from dbrig.commands.console import out_console, print_line
from dbrig.errors import EXIT_BAD_INPUT, ConfigError, DbrigError
from dbrig.host import probe
from dbrig.host.perf import NOT_INSTALLED, perf_problem
from dbrig.proc import which
from dbrig.remote.ssh import SshError, SshHost, SshTarget
from dbrig.run.remote import target
from dbrig.run.remote_servers import PerfRefused, probe_server_host
from dbrig.scenario import load
from dbrig.server.binary import ServerBinary, find_server
from dbrig.server.sandbox import MAX_SOCKET_PATH
from dbrig.tools.base import ToolInfo
from dbrig.tools.registry import all_tools

SERVER_PACKAGE = "mariadb-server"
PERF_PACKAGE = "linux-perf"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True
    package: str | None = None  # the Debian package that provides what is missing


REFLINK_YES = (
    "yes: snapshots are copy-on-write clones, and a restore clones back only the files "
    "the trial changed"
)
REFLINK_NO = (
    "no: a snapshot is a full copy and a restore copies back the files the trial changed "
    "(the redo log and the tables written); for clones on any filesystem, run as root "
    "with workspace: {image: 20G} (docs/scenario.md, Snapshots and restores)"
)


def checks(workdir: Path) -> Iterator[Check]:
    yield _server()
    for info, required in all_tools():
        yield _tool(info, required)
    yield _profiler()
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


def _profiler() -> Check:
    """perf, for the CPU profiles a scenario may ask for (optional: off by default)."""
    problem = perf_problem()
    if problem is not None:
        package = PERF_PACKAGE if problem == NOT_INSTALLED else None
        return Check("perf", False, f"{problem}: no CPU profiles", False, package=package)
    version = probe.tool_version(Path(shutil.which("perf") or "perf")) or "version unknown"
    return Check("perf", True, f"{version}: CPU profiles can be recorded (sampling.profile)", False)


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
            REFLINK_YES if st["reflink"] else REFLINK_NO,
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


# One ssh round trip for the facts of a remote host, as ``key=value`` lines.
_REMOTE_FACTS = (
    'echo "user=$(id -un)"; echo "cpus=$(getconf _NPROCESSORS_ONLN)"'
    "; echo \"cpu_model=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)\""
    "; echo \"mem_kib=$(sed -n 's/^MemTotal: *\\([0-9]*\\).*/\\1/p' /proc/meminfo)\""
    '; echo "kernel=$(uname -sr)"'
)


def remote_target(host: str, scenario: Path | None, port: int | None) -> SshTarget:
    """``--host``: a key of the scenario's ``hosts:`` (with ``--scenario``), else an ssh
    destination as ``ssh`` takes it (``user@host`` or a Host alias of ~/.ssh/config)."""
    if scenario is None:
        return SshTarget(host, host, port)
    plan_scenario = load(scenario).scenario
    if host not in plan_scenario.hosts:
        known = ", ".join(sorted(plan_scenario.hosts)) or "none"
        raise ConfigError(f"--host: '{host}' is not a key of hosts: in {scenario} (known: {known})")
    return target(plan_scenario, host)


def remote_checks(host: SshHost, python: str = "python3") -> Iterator[Check]:
    """What a host offers: the connection, the tools, dbrig's agent and the server (for
    a managed server there), its CPUs and memory."""
    host.check_reachable()
    yield Check("ssh", True, f"{host.target.label}: connected, key accepted")
    for info, required in all_tools():
        yield _remote_tool(host, info, required)
    yield _remote_tool(host, TASKSET, required=False)
    yield from _remote_agent_and_perf(host, python)
    _, output = host.run(["sh", "-c", _REMOTE_FACTS], wrap=False)
    facts = dict(line.split("=", 1) for line in output.splitlines() if "=" in line)
    yield Check("user", True, facts.get("user") or "?")
    yield Check("cpu", True, f"{facts.get('cpus') or '?'} x {facts.get('cpu_model') or '?'}")
    kib = facts.get("mem_kib") or ""
    yield Check("memory", True, f"{int(kib) / 2**20:.1f} GiB" if kib.isdigit() else "?")
    yield Check("kernel", True, facts.get("kernel") or "?")


def _remote_agent_and_perf(host: SshHost, python: str) -> Iterator[Check]:
    """The agent's row, then perf's there (for a server there: optional), from one probe
    when perf can record (a second, without perf, when it cannot)."""
    try:
        binary = probe_server_host(host, python, None, perf=True)
    except PerfRefused as exc:
        yield _remote_agent(host, python)
        problem = exc.message.removeprefix(f"{host.target.label}: ")
        package = PERF_PACKAGE if problem == NOT_INSTALLED else None
        detail = f"{problem}: no CPU profiles of a server there"
        yield Check("perf", False, detail, False, package=package)
        return
    except ConfigError as exc:
        yield _agent_failed(host, exc)
        return  # perf is asked by the agent's probe: not there either
    yield _agent_check(python, binary)
    yield Check("perf", True, "CPU profiles of a server there can be recorded", False)


def _agent_check(python: str, binary: ServerBinary) -> Check:
    detail = f"dbrig {dbrig.__version__} ({python}), {binary.version_line}"
    return Check("server agent", True, detail, required=False)


def _agent_failed(host: SshHost, exc: ConfigError) -> Check:
    detail = exc.message.removeprefix(f"{host.target.label}: ")
    return Check("server agent", False, f"{detail} (for server.host)", required=False)


def _remote_agent(host: SshHost, python: str) -> Check:
    """What ``server.host`` needs there: this dbrig's agent and a server it finds."""
    try:
        binary = probe_server_host(host, python, None)
    except ConfigError as exc:
        return _agent_failed(host, exc)
    return _agent_check(python, binary)


TASKSET = ToolInfo(name="taskset", binaries=("taskset",), package="util-linux")


def _remote_tool(host: SshHost, info: ToolInfo, required: bool) -> Check:
    path = host.which(info.binaries)
    if path is None:
        detail = f"{' or '.join(info.binaries)} not found on {host.target.destination}"
        return Check(info.name, False, detail, required, package=info.package)
    code, output = host.run([path, *info.version_args], wrap=False)
    lines = output.strip().splitlines()
    version = lines[0] if code == 0 and lines else None
    return Check(info.name, True, f"{version or 'version unknown'} ({path})", required)


@click.command("doctor")
@click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="Where runs will be written (checked for filesystem and reflink support).",
)
@click.option(
    "--host",
    "host_name",
    metavar="HOST",
    help="Check a remote host over ssh instead (for clients, or a managed server with "
    "server.host): a key of --scenario's hosts:, or an ssh destination (user@host, or a "
    "Host alias of ~/.ssh/config).",
)
@click.option(
    "--scenario",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="The scenario whose hosts: block names --host.",
)
@click.option("--port", type=click.IntRange(1, 65535), help="ssh port for a --host destination.")
def doctor_command(
    workdir: Path, host_name: str | None, scenario: Path | None, port: int | None
) -> None:
    """Which servers and tools are found, their versions, and what this host supports."""
    if host_name is None and (scenario is not None or port is not None):
        raise ConfigError("--scenario and --port go with --host")
    t = Table(title="dbrig doctor", show_header=True)
    t.add_column("check")
    t.add_column("result", overflow="fold")
    if host_name is not None:
        remote = SshHost(remote_target(host_name, scenario, port))
        python = "python3"
        if scenario is not None:
            python = load(scenario).scenario.hosts[host_name].python
        try:
            found = list(remote_checks(remote, python))
        except SshError as exc:
            raise ConfigError(f"--host: {exc.message}") from None
        finally:
            remote.close()
        t.title = f"dbrig doctor --host {host_name}"
    else:
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
