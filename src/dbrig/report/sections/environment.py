"""The Scenario and environment section: what ran, where, with which settings."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from dbrig.report.data import RunData, plain_value, read_trial
from dbrig.report.sections import LoadedRun, Part, render
from dbrig.tools.registry import INTERFERENCE_TOOLS
from dbrig.util.units import parse_size


def section(run: LoadedRun) -> Part:
    """What ran where: the scenario, the matrix, the host, the servers and their settings."""
    data = run.data
    page = render(
        "environment.html.j2",
        scenario_facts=_scenario_facts(data),
        matrix=_matrix(data, run.overview),
        environment_facts=_environment_facts(data),
        servers=servers(data),
        server_table=_server_table(data),
        settings=_settings(run.overview, _effective_configs(data)),
    )
    return Part("scenario", page, links=(("scenario", "Scenario and environment"),))


def _scenario_facts(data: RunData) -> list[tuple[str, str]]:
    s = data.scenario
    facts = []
    tool = data.workload_tool
    if tool:
        facts.append(("Workload", f"{tool} " + _params_text(data.workload_params, data.factors)))
        facts.append(("Client placement", _client_placement_text(data, tool)))
    for key, params in (data.scenario.get("interference") or {}).items():
        if params is not None:
            facts.append(("Interference", _interference_text(key, params, data.factors)))
    server = s.get("server") or {}
    if server.get("kind") == "external":
        facts.append(("Server", _external_text(server)))
    elif server.get("config"):
        config = _unvaried(server["config"], "server.config.", data.factors)
        facts.append(("Server config", _mapping_text(config)))
    for name, spec in (s.get("servers") or {}).items():
        if (spec or {}).get("kind") == "external":
            facts.append((f"Server {name}", _external_text(spec)))
            continue
        named = (spec or {}).get("config") or {}
        config = _unvaried(named, f"servers.{name}.config.", data.factors)
        facts.append((f"Server {name}", _mapping_text(config)))
    facts.append(
        (
            "Repetitions",
            f"{_repetitions(s.get('repeat', '?'), data.saved.extra.get('sequential'))} per cell, "
            f"order {s.get('order', '?')}, seed "
            f"{data.saved.seed if data.saved.seed is not None else s.get('seed', '?')}",
        )
    )
    facts.append(("Warm-up", f"{s.get('warmup', 0)} s (discarded, shaded in the time series)"))
    sampling = s.get("sampling") or {}
    if sampling:
        state = f"every {sampling.get('interval', 1)} s" if sampling.get("enabled") else "off"
        facts.append(("Sampling", state))
    if data.saved.source:
        facts.append(("Scenario file", f"{data.saved.source} (digest {data.saved.digest})"))
    return facts


def _client_placement_text(data: RunData, tool: str) -> str:
    """Where the workload tool ran: pinned cores (or the factor that varies them)."""
    path = f"workload.{tool}.cpus"
    if path in data.factors:
        return f"pinned per cell ({data.labels.get(path, path)} in the matrix table)"
    cpus = data.workload_params.get("cpus")
    if cpus:
        return "pinned to cores " + ",".join(map(str, cpus)) + " (taskset)"
    return "not pinned (the kernel schedules it on any core)"


def _params_text(params: dict[str, Any], factors: tuple[str, ...], skip_zero: bool = False) -> str:
    """``key=value`` for the settings every cell shares (factors are in the matrix table)."""
    varied = {f.rsplit(".", 1)[-1] for f in factors}
    parts = []
    for key, value in params.items():
        empty = value in (None, [], {}, "") or (skip_zero and value == 0 and value is not False)
        if empty or key in varied:
            continue
        parts.append(f"{key}={_value_text(value)}")
    return ", ".join(parts)


def _interference_text(key: str, params: dict[str, Any], factors: tuple[str, ...]) -> str:
    """The tool and its settings, or why it did not run (the tool itself judges: a report
    must not re-implement which settings make a tool do nothing)."""
    varied = any(f.startswith(f"interference.{key}.") for f in factors)
    tool = INTERFERENCE_TOOLS.get(key)
    if tool is not None and not varied:
        try:
            active = tool(tool.params_model.model_validate(params)).active
        except ValueError:  # a block an older dbrig accepted: show it as it was saved
            active = True
        if not active:
            return f"none ({tool.inactive_note})"
    return f"{key} " + _params_text(params, factors, skip_zero=True)


def _unvaried(config: dict[str, Any], prefix: str, factors: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if f"{prefix}{k}" not in factors}


def _mapping_text(mapping: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_value_text(v)}" for k, v in mapping.items()) or "(defaults)"


def _value_text(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(_value_text(v) for v in value)
    if isinstance(value, dict):
        return "{" + _mapping_text(value) + "}"
    if isinstance(value, bool):
        return "on" if value else "off"
    return plain_value(value)


def _matrix(data: RunData, overview: pd.DataFrame) -> list[dict[str, str]]:
    rows = []
    for factor in data.factors:
        values = overview[factor].tolist() if factor in overview else []
        # values may be lists (unhashable); NaN: a cell whose block does not set the factor
        levels = dict.fromkeys(plain_value(v) for v in values if not _is_nan(v))
        rows.append({"label": data.labels[factor], "path": factor, "levels": ", ".join(levels)})
    return rows


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _external_text(spec: dict[str, Any]) -> str:
    """Where an external server is and what happened to its data between trials."""
    where = spec.get("socket") or f"{spec.get('host', '?')}:{spec.get('port', '?')}"
    if not spec.get("prepare", True):
        data = "data left as it was (prepare: false)"
    elif spec.get("reset") == "reprepare":
        data = "data dropped and loaded again before every trial (reset: reprepare)"
    else:
        data = "data loaded once per data set, not restored between trials (reset: none)"
    return f"external, not managed by dbrig: {where} as {spec.get('user', '?')}; {data}"


def _environment_facts(data: RunData) -> list[tuple[str, str]]:
    env = data.saved.environment
    host, storage, tools = env.get("host") or {}, env.get("storage") or {}, env.get("tools") or {}
    facts = []
    if env.get("server"):  # "no server: sysbench cpu needs none"
        facts.append(("Server", str(env["server"])))
    if host:
        facts += [
            ("Host", str(host.get("hostname", "?"))),
            ("OS", str(host.get("os", "?"))),
            ("Kernel", str(host.get("kernel", "?"))),
            ("CPU", f"{host.get('cpu_model', '?')}, {host.get('cpu_count', '?')} logical cores"),
            ("Memory", f"{host.get('memory_gib', '?')} GiB"),
        ]
    if storage:
        reflink = "yes" if storage.get("reflink") else "no"
        facts.append(
            (
                "Storage",
                f"{storage.get('fstype', '?')} on {storage.get('device', '?')} "
                f"(mounted at {storage.get('mount', '?')}), block device "
                f"{storage.get('block_device', '?')}, I/O scheduler "
                f"{storage.get('io_scheduler', '?')}{_scheduler_note(data)}, "
                f"reflink copies {reflink}",
            )
        )
    servers = data.saved.servers
    for name, version in tools.items():
        if not version or (name.startswith("server:") and name[7:] in servers):
            continue
        title = {"workload": data.workload_tool or "workload tool"}.get(name, name)
        facts.append((title, str(version)))
    if host.get("python") or host.get("dbrig"):
        facts.append(
            ("Recorded by", f"dbrig {host.get('dbrig', '?')}, Python {host.get('python')}")
        )
    return facts


def _scheduler_note(data: RunData) -> str:
    """The scheduler probed at the start is not what a cell ran with if the run set one."""
    system = data.scenario.get("system") or {}
    if system.get("io_scheduler") or any(f == "system.io_scheduler" for f in data.factors):
        return " before the run (each cell's is under Server settings, system.io_scheduler)"
    return ""


def servers(data: RunData) -> list[dict[str, Any]]:
    servers = []
    for name, info in data.saved.servers.items():
        variables = info.get("variables") or {}
        pool = parse_size(variables.get("innodb_buffer_pool_size"))
        if any(f.endswith(".innodb_buffer_pool_size") for f in data.factors):
            pool = None  # varied by the matrix: the value at the first start says little
        servers.append(
            {
                "name": name,
                "version": f"{info.get('flavor', '')} {info.get('version', '')}".strip(),
                "binary": info.get("binary", ""),
                "buffer_pool": _size_text(pool) if pool else "",
                "variables": sorted(variables.items()),
            }
        )
    return servers


def _server_table(data: RunData) -> dict[str, Any]:
    """Every server side by side: one column per server, one row per property."""
    specs = _server_specs(data)
    names = list(dict.fromkeys([*specs, *data.saved.servers]))
    if not names:
        return {"names": [], "rows": []}
    rows: list[tuple[str, list[str]]] = []

    def row(title: str, values: list[str]) -> None:
        if any(values):
            rows.append((title, values))

    saved = {n: data.saved.servers.get(n) or {} for n in names}
    spec = {n: specs.get(n) or {} for n in names}
    row("kind", [str(spec[n].get("kind") or saved[n].get("kind") or "managed") for n in names])
    row(
        "version",
        [f"{saved[n].get('flavor', '')} {saved[n].get('version', '')}".strip() for n in names],
    )
    row("binary", [str(saved[n].get("binary") or "") for n in names])
    row("basedir", [_basedir_text(spec[n]) for n in names])
    row("cpus (pinning)", [_cpus_text(data, n, spec[n]) for n in names])
    row("where", [_external_where(spec[n]) for n in names])
    configs = [
        _mapping_text(_unvaried(spec[n].get("config") or {}, _config_prefix(data, n), data.factors))
        if spec[n].get("kind") != "external"
        else ""
        for n in names
    ]
    row("config", configs)
    return {"names": names, "rows": rows}


def _server_specs(data: RunData) -> dict[str, dict[str, Any]]:
    servers = data.scenario.get("servers") or {}
    if servers:
        return {str(k): dict(v or {}) for k, v in servers.items()}
    server = data.scenario.get("server")
    return {"default": dict(server)} if isinstance(server, dict) else {}


def _config_prefix(data: RunData, name: str) -> str:
    return f"servers.{name}.config." if data.scenario.get("servers") else "server.config."


def _basedir_text(spec: dict[str, Any]) -> str:
    if spec.get("kind") == "external":
        return ""
    return str(spec.get("basedir") or "(the installed server)")


def _cpus_text(data: RunData, name: str, spec: dict[str, Any]) -> str:
    if spec.get("kind") == "external":
        return "not managed"
    paths = (f"servers.{name}.cpus", "server.cpus")
    if any(p in data.factors for p in paths):
        return "varied by the matrix"
    cpus = spec.get("cpus")
    return ",".join(str(c) for c in cpus) if cpus else "not pinned (every core)"


def _external_where(spec: dict[str, Any]) -> str:
    if spec.get("kind") != "external":
        return ""
    return str(spec.get("socket") or f"{spec.get('host', '?')}:{spec.get('port', '?')}")


def _effective_configs(data: RunData) -> dict[str, dict[str, Any]]:
    """effective_config and the OS settings (``system.*``) of each cell's first saved trial."""
    configs = {}
    for cell, trials in data.trials_by_cell.items():
        record = read_trial(data.trial_dir(trials[0]))
        if record is None:
            configs[cell] = {}
            continue
        system = {f"system.{k}": _value_text(v) for k, v in record.system.items()}
        configs[cell] = {**record.effective_config, **system}
    return configs


def _settings(overview: pd.DataFrame, configs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if not configs:
        return {"common": [], "varying": [], "rows": []}
    frame = pd.DataFrame.from_dict(configs, orient="index").astype(str)
    varying = [k for k in frame.columns if frame[k].nunique(dropna=False) > 1]
    common = [(k, frame[k].iloc[0]) for k in frame.columns if k not in varying]
    labels = dict(zip(overview["cell"], overview["label"], strict=True))
    rows = [
        {"cell": cell, "label": labels.get(cell, ""), "values": list(values)}
        for cell, values in frame[varying].iterrows()
    ]
    return {"common": common, "varying": varying, "rows": rows if varying else []}


def _size_text(size: float) -> str:
    if size >= 2**30:
        return f"{size / 2**30:g} GiB"
    return f"{size / 2**20:g} MiB"


def _repetitions(planned: Any, sequential: Any) -> str:
    """``repeat`` as planned: a count, or a sequential design and where it stopped."""
    if not isinstance(planned, dict):
        return str(planned)
    until = planned.get("until") or {}
    rule = ", ".join(f"{k} {v}" for k, v in until.items() if v not in (None, [], ""))
    text = f"{planned.get('min')} to {planned.get('max')} (until {rule})"
    stopped = (sequential or {}).get("stopped") if isinstance(sequential, dict) else None
    if stopped:
        text += f", stopped after round {stopped.get('round')}: {stopped.get('reason')}"
    return text
