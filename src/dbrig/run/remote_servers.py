"""Managed servers on other hosts, before the run: each server host answers over ssh,
has this dbrig and a server, can apply the ``system`` settings of its cells and,
when they ask for CPU profiles, lets perf record there (``python3 -m
dbrig.remote.probe`` there). Preflight and ``--dry-run`` ask; ``dbrig
doctor --host`` asks one host."""

from __future__ import annotations

import contextlib
import json
import shlex
from pathlib import Path

import dbrig
from dbrig.errors import ConfigError
from dbrig.remote.probe import PROBE_MODULE
from dbrig.remote.server import REMOTE_HOME_ROOT
from dbrig.remote.ssh import SSH_FAILED, SshError, SshHost, connection_error
from dbrig.run.plan_profile import KEY as PROFILE_KEY
from dbrig.run.remote import target
from dbrig.scenario import ManagedServer, Plan
from dbrig.server.binary import ServerBinary


def remote_servers(plan: Plan) -> dict[str, str]:
    """The cells' managed servers that run on another host: server name -> host name."""
    specs = plan.scenario.server_specs
    used = sorted({c.server for c in plan.cells})
    return {n: spec.host for n in used if isinstance(spec := specs[n], ManagedServer) and spec.host}


def server_key(plan: Plan, name: str, key: str) -> str:
    """``servers.<name>.<key>``, or ``server.<key>`` for the single ``server:`` block."""
    return f"servers.{name}.{key}" if plan.scenario.servers else f"server.{key}"


class SystemRefused(ConfigError):
    """The server's host cannot apply the cells' ``system`` settings."""


class PerfRefused(ConfigError):
    """perf cannot record CPU profiles on the server's host."""


def on_host(message: str, label: str) -> str:
    """A settings message naming the host after its key: ``system.io_scheduler: 'x' is
    not offered ...`` -> ``system.io_scheduler: hosts.db1 (...): 'x' is not offered ...``."""
    key, sep, rest = message.partition(": ")
    if not sep or not key.startswith("system"):
        return f"system: {label}: {message}"
    return f"{key}: {label}: {rest}"


def system_blocks(plan: Plan, server: str) -> list[dict]:
    """The ``system`` blocks of the cells on ``server`` that set something, as JSON."""
    blocks = [c.scenario.system for c in plan.cells if c.server == server]
    return [b.model_dump(mode="json") for b in blocks if b.active]


def profiled(plan: Plan, server: str) -> bool:
    """A cell on ``server`` asks for a CPU profile."""
    cells = [c for c in plan.cells if c.server == server]
    return any(c.scenario.sampling.profile.cpu.frequency > 0 for c in cells)


def _check_one_device_owner_per_host(plan: Plan) -> None:
    """Each remote server's agent keeps the original disk settings of its own cells: two
    servers on one host would each take the other's values for the originals, and one's
    cells would run with the other's settings. Refused when their cells set any."""
    by_host: dict[str, list[str]] = {}
    for name, host_name in remote_servers(plan).items():
        by_host.setdefault(host_name, []).append(name)
    for host_name, names in sorted(by_host.items()):
        if len(names) < 2:
            continue
        for cell in plan.cells:
            settings = cell.scenario.system
            key = settings.device_setting
            if cell.server in names and key is not None:
                others = ", ".join(f"'{n}'" for n in names)
                raise ConfigError(
                    f"{plan.source}: system.{key}: servers {others} all run on "
                    f"hosts.{host_name}, where one disk setting would be shared by their "
                    "agents",
                    hint="put the servers on different hosts, or leave io_scheduler and "
                    "read_ahead_kb out",
                )


def check_server_hosts(plan: Plan) -> dict[str, ServerBinary]:
    """Every managed server's host answers over ssh and has python3, this dbrig's version
    and the server binaries (what the agent will find there), and can apply the ``system``
    settings of the server's cells; each server's binary, by server name. One line naming
    the key and the host otherwise (nothing has started)."""
    _check_one_device_owner_per_host(plan)
    found: dict[str, ServerBinary] = {}
    for name, host_name in remote_servers(plan).items():
        spec = plan.scenario.server_specs[name]
        assert isinstance(spec, ManagedServer)
        host_spec = plan.scenario.hosts[host_name]
        host = SshHost(target(plan.scenario, host_name))
        system = system_blocks(plan, name)
        try:
            host.check_reachable()
            found[name] = probe_server_host(
                host, host_spec.python, spec.basedir, system, perf=profiled(plan, name)
            )
        except PerfRefused as exc:
            raise ConfigError(
                f"{plan.source}: {PROFILE_KEY}: {exc.message}", hint=exc.hint
            ) from None
        except SystemRefused as exc:
            raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None
        except SshError as exc:
            key = server_key(plan, name, "host")
            raise ConfigError(f"{plan.source}: {key}: {exc.message}", hint=exc.hint) from None
        except ConfigError as exc:
            key = server_key(plan, name, "host")
            raise ConfigError(f"{plan.source}: {key}: {exc.message}", hint=exc.hint) from None
        finally:
            host.close()
    return found


def probe_server_host(
    host: SshHost,
    python: str,
    basedir: Path | None,
    system: list[dict] | None = None,
    *,
    perf: bool = False,
) -> ServerBinary:
    """``python3 -m dbrig.remote.probe`` there: dbrig's version and the server; with
    ``system`` (blocks that set something), whether that host can apply them under
    ``~/.dbrig`` (:class:`SystemRefused` otherwise); with ``perf``, whether perf can
    record the server there (:class:`PerfRefused` otherwise)."""
    label = host.target.label
    argv = [*shlex.split(python), "-m", PROBE_MODULE, *([str(basedir)] if basedir else [])]
    if system:
        argv += ["--system", json.dumps(system), "--home", REMOTE_HOME_ROOT]
    if perf:
        argv.append("--perf")
    code, output = host.run(argv, wrap=False)
    install = f"pip install dbrig=={dbrig.__version__} there"
    if code == SSH_FAILED:
        raise SshError(f"{label}: lost the connection: {connection_error(output)}")
    if code == 127:
        raise ConfigError(
            f"{label}: '{python}' not found there",
            hint=f"install python3 and dbrig {dbrig.__version__} there, or set "
            f"hosts.{host.name}.python to the Python that has it",
        )
    if "No module named 'dbrig'" in output:
        raise ConfigError(f"{label}: dbrig is not installed for '{python}' there", hint=install)
    if f"No module named {PROBE_MODULE}" in output:
        raise ConfigError(
            f"{label}: the dbrig there is older than {dbrig.__version__} (it has no "
            f"{PROBE_MODULE}): the agent must be the same version",
            hint=install,
        )
    answer = _last_json_line(output)
    if answer is None:
        raise ConfigError(
            f"{label}: '{python} -m {PROBE_MODULE}' failed: {connection_error(output)}"
        )
    if answer.get("version") != dbrig.__version__:
        raise ConfigError(
            f"{label}: dbrig {answer.get('version')} there, {dbrig.__version__} here "
            "(the agent must be the same version)",
            hint=install,
        )
    if "error" in answer:
        raise ConfigError(f"{label}: {answer['error']}", hint=answer.get("hint"))
    refused = answer.get("system", {}).get("error")
    if refused:
        raise SystemRefused(on_host(refused, label), hint=answer["system"].get("hint"))
    if problem := answer.get("perf", {}).get("error"):
        raise PerfRefused(
            f"{label}: {problem}",
            hint=f"install Debian's linux-perf on {host.target.destination} (or let its "
            f"user record: kernel.perf_event_paranoid), or set {PROFILE_KEY} to 0",
        )
    server = answer["server"]
    return ServerBinary(
        mysqld=Path(server["mysqld"]),
        flavor=server["flavor"],
        version=server["version"],
        version_line=server["version_line"],
        install_db=Path(server["install_db"]) if server["install_db"] else None,
        basedir=Path(server["basedir"]) if server["basedir"] else None,
    )


def _last_json_line(output: str) -> dict | None:
    for line in reversed(output.strip().splitlines()):
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    return None
