"""Build the run report from a saved run directory.

:func:`write_report` reads only the run directory (run.json, results.csv and
the trial folders) and writes, into it:

- ``report.html``: one self-contained page (charts as data URIs, inline CSS,
  flame graphs as inline SVG, no network);
- ``plots/*.png``: the same charts as files (``factor_<n>.png``,
  ``timeseries_throughput.png``, ``cell_<cell>.png``, ``scaling_<n>.png`` for a
  concurrency sweep: :mod:`dbrig.report.scaling`);
- ``results_by_cell.csv``: the per-cell aggregate (columns in
  :mod:`dbrig.report.tables`).

It renders complete, interrupted and still-running runs, and failed trials.
To stay fast on large matrices, per-cell time series are drawn for the first
:data:`MAX_CELL_FIGURES` cells that have saved trials and the throughput
overview for the first :data:`MAX_GRID_CELLS` (the page says so), and factor
charts draw at most :data:`MAX_SERIES` lines or bar groups each. The time-series
figures are drawn in a forked child (:mod:`dbrig.util.background`) while this
process computes the rest: on 2 cores that halves the time of a large report.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import gc
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

import dbrig
from dbrig.metrics import DEFAULT_PERCENTILE, HEADLINE, Metric, throughput_metrics
from dbrig.report import charts, flamegraph, html, scaling, soak
from dbrig.report.data import RunData, load_run, plain_value, read_samples, read_trial
from dbrig.report.experiments import EffectJudge, Experiment, FactorGroup, group_rows
from dbrig.report.tables import (
    CellStats,
    aggregate,
    by_cell_frame,
    cell_overview,
    detail_metrics,
    headline_metrics,
    metric_columns,
)
from dbrig.report.warnings import RunWarning, compute_warnings, throughput_metric
from dbrig.tools.registry import INTERFERENCE_TOOLS
from dbrig.util.background import can_fork, shared_jobs
from dbrig.util.files import replacing, write_text_atomic
from dbrig.util.units import parse_size, to_float

REPORT_HTML = "report.html"
RESULTS_BY_CELL = "results_by_cell.csv"
PLOTS_DIR = "plots"
MAX_CELL_FIGURES = 8  # one figure of nine panels per cell: about 0.5 s each
MAX_GRID_CELLS = 16  # panels of the throughput overview
MAX_FACTOR_CHARTS = 6
MAX_SERIES = 8
MAX_PANELS = 4  # small multiples: panels across
MAX_FACET_SERIES = 4  # small multiples: colours per panel
MAX_FACET_METRICS = 3  # small multiples: rows
_OUR_PLOTS = re.compile(r"^(factor_\d+|timeseries_\w+|cell_[\w.-]+|scaling_\d+)\.png$")


@dataclass(frozen=True)
class Plot:
    file: str  # name under plots/
    title: str
    caption: str
    png: bytes
    spread: str = ""  # factor charts: points, interval or mixed (charts.spread_kind)


def write_report(run_dir: Path, *, max_cell_figures: int = MAX_CELL_FIGURES) -> Path:
    """Write report.html, plots/*.png and results_by_cell.csv into ``run_dir``; return the page."""
    with _fewer_collections():
        return _write_report(Path(run_dir), max_cell_figures)


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """Python's garbage collector every 20,000 allocations instead of 700 while drawing.

    matplotlib makes hundreds of thousands of small objects, and each collection
    walks them: on the 1000-cell benchmark the collector took 1.9 s of the report's
    12 s of CPU with the default thresholds, 0.5 s with these, for about 80 MiB more
    at the peak (figures are cycles: they wait a little longer to be freed).
    """
    before = gc.get_threshold()
    gc.set_threshold(20_000, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _write_report(run_dir: Path, max_cell_figures: int) -> Path:
    data = load_run(run_dir)
    overview = cell_overview(data.results, data.cells)
    stats = aggregate(
        data.results, metric_columns(data.results, data.factors), list(overview["cell"])
    )
    headline = headline_metrics(data.results)
    grid_cells = _cells_with_trials(overview, max(MAX_GRID_CELLS, max_cell_figures))
    detail_cells = grid_cells[:max_cell_figures]
    # The time-series figures (more than half the drawing) start on a second core while
    # this one computes the warnings, the factor charts and the tables, then takes
    # whichever of them are still left.
    jobs = _timeseries_jobs(data, grid_cells, detail_cells, headline)
    with shared_jobs(jobs, fork=bool(jobs) and can_fork()) as drawing:
        warnings = compute_warnings(data, overview, stats)
        with replacing(data.path / RESULTS_BY_CELL) as tmp:
            by_cell_frame(overview, stats).to_csv(tmp, index=False)
        plots = _factor_plots(data, overview, stats, headline)
        scalability = _scalability(data)
        context = report_context(data, overview, stats, warnings, headline)
        html.template()  # compiled now, not after the join, when nothing else runs
        timeseries = [plot for plot in drawing.results() if plot is not None]
    _write_plots(data.path / PLOTS_DIR, [*plots, *timeseries, *scalability["plots"]])
    context.update(
        factor_plots=plots,
        timeseries_plots=timeseries,
        cells_in_grid=len(grid_cells),
        cells_drawn=len(detail_cells),
        cells_with_trials=int((overview["trials"] > 0).sum()),
        scalability=scalability,
        soak=soak.section_rows(data),
        soak_percentile=data.workload_params.get("percentile") or DEFAULT_PERCENTILE,
        profiles=flamegraph.profiles_section(data),
    )
    page = data.path / REPORT_HTML
    write_text_atomic(page, html.render(context))
    return page


# --------------------------------------------------------------------------- context


def report_context(
    data: RunData,
    overview: pd.DataFrame,
    stats: CellStats,
    warnings: list[RunWarning],
    headline: list[Metric],
) -> dict[str, Any]:
    """Everything the template shows except the charts."""
    saved = data.saved
    configs = _effective_configs(data)
    return {
        "name": data.name,
        "description": data.scenario.get("description") or "",
        "run": {
            "dir": data.path.name,
            "status": data.status,
            "created_at": _when(saved.created_at),
            "finished_at": _when(saved.finished_at),
            "trials_saved": len(data.results),
            "trials_planned": data.planned_trials,
            "trials_failed": int((data.results["status"] != "ok").sum()),
            "cells": len(overview),
        },
        "generated": f"dbrig {dbrig.__version__}",
        "warnings": warnings,
        "scenario_facts": _scenario_facts(data),
        "matrix": _matrix(data, overview),
        "environment_facts": _environment_facts(data),
        "servers": _servers(data),
        "server_table": _server_table(data),
        "settings": _settings(overview, configs),
        "table": _result_table(data, overview, stats, [*headline, *detail_metrics(data.results)]),
        "repetitions": _repetition_rows(data, overview, headline),
        "failed_trials": _failed_trials(data, overview),
        "scenario_yaml": _read_text(data.path / "scenario.yaml"),
        "files": {"csv": RESULTS_BY_CELL, "plots": PLOTS_DIR},
    }


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
            f"{s.get('repeat', '?')} per cell, order {s.get('order', '?')}, seed "
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
        levels = dict.fromkeys(plain_value(v) for v in values)  # values may be lists: unhashable
        rows.append({"label": data.labels[factor], "path": factor, "levels": ", ".join(levels)})
    return rows


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


def _servers(data: RunData) -> list[dict[str, Any]]:
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


# --------------------------------------------------------------------------- result table


def _result_table(
    data: RunData, overview: pd.DataFrame, stats: CellStats, headline: list[Metric]
) -> dict[str, Any]:
    throughput = throughput_metric(stats)
    cells = list(overview["cell"])
    columns = [_metric_column(stats, cells, m) for m in headline]
    cvs = (
        stats.cv[throughput[0]].reindex(cells).to_numpy() if throughput else [math.nan] * len(cells)
    )
    rows = []
    for i, cell in enumerate(overview.to_dict("records")):
        cv = float(cvs[i])
        rows.append(
            {
                "cell": cell["cell"],
                "factors": [plain_value(cell[f]) for f in data.factors],
                "runs": f"{cell['ok']}/{cell['planned'] or cell['trials']}",
                "state": cell["state"],
                "values": [column[i] for column in columns],
                "cv": "" if math.isnan(cv) else f"{100 * cv:.1f} %",
                "cv_high": not math.isnan(cv) and cv > 0.05,
                "note": _cell_note(cell),
            }
        )
    return {
        "factor_headings": [data.labels[f] for f in data.factors],
        "numeric_factors": [_is_numeric(overview[f]) for f in data.factors],
        "metrics": headline,
        "cv_heading": f"{throughput[1]} CV" if throughput else "",
        "rows": rows,
        "has_notes": any(r["note"] for r in rows),
    }


def _metric_column(stats: CellStats, cells: list[str], metric: Metric) -> list[dict[str, str]]:
    """One metric's table cells: mean, ± half-width, and a tooltip with n, interval and CV."""

    def values(stat: str) -> list[float]:
        frame: pd.DataFrame = getattr(stats, stat)
        if metric.column not in frame.columns:
            return [math.nan] * len(cells)
        return frame[metric.column].reindex(cells).astype(float).tolist()

    out = []
    for mean, half, n, cv, low, high in zip(
        values("mean"),
        values("half"),
        values("n"),
        values("cv"),
        values("ci_low"),
        values("ci_high"),
        strict=True,
    ):
        if math.isnan(mean):
            out.append({"mean": "", "half": "", "title": ""})
            continue
        title = f"n={n:.0f}"
        if not math.isnan(half):
            title += f", 95 % CI {metric.format(low)} .. {metric.format(high)}"
        if not math.isnan(cv):
            title += f", CV {100 * cv:.1f} %"
        out.append(
            {
                "mean": metric.format(mean),
                "half": "" if math.isnan(half) else "± " + metric.format(half),
                "title": title,
            }
        )
    return out


def _cell_note(cell: dict[str, Any]) -> str:
    state = cell["state"]
    if state == "pending":
        return "not run yet"
    if state == "failed":
        return f"every repetition failed: {cell['failed_reasons']}"
    if state == "partial":
        return f"{cell['failed']} failed: {cell['failed_reasons']}"
    if state == "incomplete":
        return f"{cell['trials']} of {cell['planned']} repetitions saved"
    return ""


def _repetition_rows(
    data: RunData, overview: pd.DataFrame, headline: list[Metric]
) -> list[dict[str, Any]]:
    if data.results.empty:
        return []
    factors: dict[str, list[Any]] = {}
    if data.factors:  # each cell's values once: .loc per trial took most of the table's time
        by_cell = overview.set_index("cell")[list(data.factors)]
        factors = {
            str(cell): [plain_value(v) for v in values]
            for cell, values in zip(by_cell.index, by_cell.itertuples(index=False), strict=True)
        }
    ordered = data.results.sort_values(["cell", "repetition"], kind="stable")
    columns = [m.column for m in headline]
    rows = []
    for rec in ordered[["trial", "cell", "repetition", "status", "reason", *columns]].itertuples(
        index=False
    ):
        values = rec[5:]
        cell = str(rec.cell)
        rows.append(
            {
                "trial": rec.trial,
                "cell": cell,
                "factors": factors.get(cell, []),
                "repetition": int(rec.repetition),
                "ok": rec.status == "ok",
                "status": rec.status,
                "reason": rec.reason or "",
                "values": [m.format(to_float(v)) for m, v in zip(headline, values, strict=True)],
            }
        )
    return rows


def _failed_trials(data: RunData, overview: pd.DataFrame) -> list[dict[str, str]]:
    failed = data.results[data.results["status"] != "ok"]
    labels = dict(zip(overview["cell"], overview["label"], strict=True))
    return [
        {
            "trial": str(r.trial),
            "cell": str(r.cell),
            "label": f"{r.cell} {labels.get(str(r.cell), '')}",
            "status": str(r.status),
            "reason": str(r.reason or "no reason recorded"),
        }
        for r in failed.itertuples()
    ]


# --------------------------------------------------------------------------- factor charts


def _factor_plots(
    data: RunData, overview: pd.DataFrame, stats: CellStats, headline: list[Metric]
) -> list[Plot]:
    """Per block of the matrix, one chart per factor that varies in it."""
    drawable = overview[overview["ok"] > 0]
    if drawable.empty or not headline:
        return []
    factors = _cell_factors(data, drawable)
    judge = EffectJudge(data.scenario)
    several = len([e for e in data.experiments if any(c in factors for c in e.cells)]) > 1
    plots: list[Plot] = []
    for experiment in data.experiments:
        cells = [c for c in experiment.cells if c in factors]
        varying = [g for g in experiment.groups if len({g.value(factors[c]) for c in cells}) > 1]
        for group in varying:
            if len(plots) == MAX_FACTOR_CHARTS:
                return plots
            chart = _FactorChart(data, experiment, group, varying, cells, factors, several)
            plot = chart.plot(judge, overview, stats, headline, len(plots) + 1)
            if plot is not None:
                plots.append(plot)
    return plots


def _cell_factors(data: RunData, cells: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Each drawable cell's factor values, as planned (absent when its block does not set it)."""
    planned = {c.cell: dict(c.factors) for c in data.saved.cells}
    out = {}
    for row in cells.to_dict("records"):
        cell = str(row["cell"])
        out[cell] = planned.get(cell) or {f: row[f] for f in data.factors if _present(row[f])}
    return out


def _present(value: Any) -> bool:
    return isinstance(value, list | dict) or not pd.isna(value)


@dataclass(frozen=True)
class _FactorChart:
    """One factor of one block: which cells, which panels and colours, and the caption."""

    data: RunData
    experiment: Experiment
    group: FactorGroup
    varying: list[FactorGroup]
    cells: list[str]
    factors: dict[str, dict[str, Any]]
    several_blocks: bool

    def plot(
        self,
        judge: EffectJudge,
        overview: pd.DataFrame,
        stats: CellStats,
        headline: list[Metric],
        number: int,
    ) -> Plot | None:
        values = group_rows(self.group, [self.factors[c] for c in self.cells])
        kept = [c for c in self.cells if judge.has_effect(self.group, self.factors[c], values)]
        if len({self.group.value(self.factors[c]) for c in kept}) < 2:
            return None
        numeric = not self.group.joint and _is_numeric(
            pd.Series([self.factors[c].get(self.group.paths[0]) for c in kept], dtype=object)
        )
        ok = overview.set_index("cell")["ok"]
        means = self._frame(kept, numeric)
        means["n"] = [int(ok.get(c, 0)) for c in kept]
        for metric in headline:
            means[metric.column] = _stat(stats.mean, metric.column, kept)
            means[f"{metric.column}_half"] = _stat(stats.half, metric.column, kept)
        means = self._capped(means)
        metrics = _drawn_metrics(means, headline)
        if not metrics:
            return None
        facets = means["panel"].nunique() > 1
        if facets:
            metrics = _facet_metrics(metrics)
        reps = self._reps(means, metrics, numeric)
        categories = list(dict.fromkeys(means["x"].astype(str)))
        fig = charts.factor_chart(
            charts.FactorPoints(means, reps, categories),
            x_label=self.group.label,
            series_label=self._series_group.label if self._series_group else "",
            metrics=metrics,
            numeric=numeric,
        )
        spread = charts.spread_kind(means["n"])
        caption = self._caption(numeric, spread, facets, len(metrics) < len(headline), kept)
        return Plot(f"factor_{number}.png", self._title(numeric), caption, _png(fig), spread=spread)

    @property
    def _others(self) -> list[FactorGroup]:
        return [g for g in self.varying if g is not self.group]

    @property
    def _panel_groups(self) -> list[FactorGroup]:
        """The other factors that get a panel each: all of them, or all but the colour one."""
        others = self._others
        return others if len(others) < 2 else others[:-1]

    @property
    def _series_group(self) -> FactorGroup | None:
        others = self._others
        return others[-1] if len(others) >= 2 else None

    def _frame(self, cells: list[str], numeric: bool) -> pd.DataFrame:
        rows = [self.factors[c] for c in cells]
        x: list[Any] = [
            float(r[self.group.paths[0]]) if numeric else self.group.value(r) for r in rows
        ]
        panel = [_labelled(self._panel_groups, r) for r in rows]
        series_group = self._series_group
        series = [series_group.value(r) if series_group else "all" for r in rows]
        return pd.DataFrame({"cell": cells, "x": x, "panel": panel, "series": series})

    def _capped(self, means: pd.DataFrame) -> pd.DataFrame:
        panels = list(dict.fromkeys(means["panel"]))[:MAX_PANELS]
        limit = MAX_FACET_SERIES if len(panels) > 1 else MAX_SERIES
        series = list(dict.fromkeys(means["series"]))[:limit]
        keep = means["panel"].isin(panels) & means["series"].isin(series)
        return means[keep].reset_index(drop=True)

    def _reps(self, means: pd.DataFrame, metrics: list[Metric], numeric: bool) -> pd.DataFrame:
        """Every successful repetition of the cells drawn as points (too few for an interval)."""
        few = means[means["n"] < charts.MIN_INTERVAL_N].set_index("cell")
        results = self.data.results
        ok = results[(results["status"] == "ok") & results["cell"].isin(few.index)]
        columns = [m.column for m in metrics if m.column in ok]
        reps = ok[["cell", *columns]].reset_index(drop=True)
        for column in ("x", "panel", "series"):
            reps[column] = reps["cell"].map(few[column])
        for metric in metrics:
            if metric.column not in reps:
                reps[metric.column] = float("nan")
        return reps

    def _title(self, numeric: bool) -> str:
        kind = "line" if numeric else "bar"
        title = f"Headline metrics by {self.group.label} ({kind})"
        if self.several_blocks:
            fixed = self._fixed()
            where = f" ({fixed})" if fixed else ""
            block = f"Block {self.experiment.number} of the matrix{where}"
            title = f"{block}: {title[0].lower()}{title[1:]}"
        return title

    def _fixed(self) -> str:
        """What one block holds constant, ``cpu_load=90``."""
        constant = [g for g in self.experiment.groups if g not in self.varying]
        first = self.factors[self.cells[0]]
        return " ".join(f"{g.label}={g.value(first)}" for g in constant)

    def _caption(
        self, numeric: bool, spread: str, facets: bool, fewer_metrics: bool, kept: list[str]
    ) -> str:
        paths = ", ".join(self.group.paths)
        parts = [
            f"Mean of the successful repetitions of each cell against {self.group.label} ({paths})."
        ]
        if self.group.joint:
            parts.append("These keys vary together in the matrix, so they are one factor.")
        if self.several_blocks:
            parts.append(
                f"Only the cells of block {self.experiment.number} of the matrix"
                + (f", where {self._fixed()}" if self._fixed() else "")
                + "; each block is its own experiment."
            )
        parts.append(_spread_sentence(spread, numeric))
        panel_groups = self._panel_groups
        if facets:
            names = ", ".join(g.label for g in panel_groups)
            parts.append(
                f"One panel per value of {names}, a row per metric, same y axis along a row."
            )
            if fewer_metrics:
                parts.append("The other headline metrics are in the result table.")
        elif panel_groups:
            parts.append(f"{', '.join(g.label for g in panel_groups)} has one value here.")
        if self._series_group:
            parts.append(
                f"One {'line' if numeric else 'colour'} per value of {self._series_group.label}."
            )
        dropped = [c for c in self.cells if c not in kept]
        if dropped:
            parts.append(
                f"Left out: {len(dropped)} cell{'s' if len(dropped) > 1 else ''} where "
                f"{self.group.label} has no effect (the interference it sets does not run): "
                + ", ".join(dropped[:8])
                + (" …" if len(dropped) > 8 else "")
                + "."
            )
        panels = {_labelled(panel_groups, self.factors[c]) for c in kept}
        series = (
            {self._series_group.value(self.factors[c]) for c in kept}
            if self._series_group
            else set()
        )
        if len(panels) > MAX_PANELS:
            parts.append(f"The first {MAX_PANELS} of {len(panels)} panels are drawn.")
        limit = MAX_FACET_SERIES if facets else MAX_SERIES
        if len(series) > limit:
            parts.append(f"The first {limit} of {len(series)} colours are drawn.")
        return " ".join(parts)


def _stat(frame: pd.DataFrame, column: str, cells: list[str]) -> list[float]:
    if column not in frame.columns:
        return [math.nan] * len(cells)
    return frame[column].reindex(cells).astype(float).tolist()


def _labelled(groups: list[FactorGroup], factors: dict[str, Any]) -> str:
    return " ".join(f"{g.label}={g.value(factors)}" for g in groups)


def _spread_sentence(spread: str, numeric: bool) -> str:
    points = (
        f"Cells with fewer than {charts.MIN_INTERVAL_N} successful repetitions show every "
        "repetition as a hollow dot beside the mean and no interval (with 2 repetitions a "
        "95 % t-interval is ±12.7 standard errors wide and says nothing)."
    )
    interval = (
        f"{'Error bars' if numeric else 'Whiskers'} are the 95 % confidence interval of the "
        f"mean (Student's t) of cells with {charts.MIN_INTERVAL_N} or more repetitions."
    )
    return {"points": points, "interval": interval}.get(spread, f"{interval} {points}")


def _drawn_metrics(means: pd.DataFrame, headline: list[Metric]) -> list[Metric]:
    """The headline metrics with a non-zero mean somewhere (an all-zero error rate says
    nothing a chart needs to show)."""
    out = []
    for metric in headline:
        values = pd.to_numeric(means[metric.column], errors="coerce")
        if values.fillna(0).ne(0).any():
            out.append(metric)
    return out


def _facet_metrics(metrics: list[Metric]) -> list[Metric]:
    """Small multiples draw a row per metric: the first (the throughput), the latencies,
    then the rest, at most :data:`MAX_FACET_METRICS`."""
    latency = [m for m in metrics[1:] if "latency" in m.column]
    rest = [m for m in metrics[1:] if m not in latency]
    return [*metrics[:1], *latency, *rest][:MAX_FACET_METRICS]


def _is_numeric(values: pd.Series) -> bool:
    def numeric(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and not pd.isna(v)

    return bool(len(values)) and all(numeric(v) for v in values)


# --------------------------------------------------------------------------- scalability


def _scalability(data: RunData) -> dict[str, Any]:
    """The Scalability section: the fits' table and charts (empty without a sweep)."""
    sweeps = scaling.find_sweeps(data)
    plots = []
    for number, sweep in enumerate(
        [s for s in sweeps if scaling.drawable(s)][: scaling.MAX_SWEEP_CHARTS], start=1
    ):
        fig = scaling.scaling_chart(sweep)
        title = f"Where throughput stops scaling: {sweep.title}"
        plots.append(Plot(f"scaling_{number}.png", title, scaling.chart_caption(sweep), _png(fig)))
    return {
        "rows": scaling.section_rows(sweeps),
        "plots": plots,
        "factor": sweeps[0].label if sweeps else "",
        "throughput": sweeps[0].throughput.heading if sweeps else "",
        "charts_left_out": max(0, sum(map(scaling.drawable, sweeps)) - len(plots)),
    }


# --------------------------------------------------------------------------- time series


def _cells_with_trials(overview: pd.DataFrame, limit: int) -> list[dict[str, Any]]:
    with_trials = overview[overview["trials"] > 0]
    return with_trials.head(max(limit, 0)).to_dict("records")


@dataclass(frozen=True)
class _SeriesColumns:
    throughput: str  # intervals.csv column
    throughput_label: str
    latency: tuple[str, str]  # column, axis label


def _series_columns(data: RunData, headline: list[Metric]) -> _SeriesColumns:
    throughput = _interval_column(data, throughput_metrics(per_interval=True))
    # The run's percentile when it measured one, else the default's heading.
    latency = next(m for m in (*headline, *HEADLINE) if m.name == "latency_pct_ms")
    return _SeriesColumns(throughput.name, throughput.heading, (latency.name, latency.heading))


def _timeseries_jobs(
    data: RunData,
    grid_cells: list[dict[str, Any]],
    detail_cells: list[dict[str, Any]],
    headline: list[Metric],
) -> list[Callable[[], Plot | None]]:
    """The throughput overview of ``grid_cells``, then one figure per cell of ``detail_cells``:
    one job per figure. A cell's intervals files are read once in whichever process
    draws both the overview and that cell's figure (each process has its own cache)."""
    columns = _series_columns(data, headline)

    @functools.cache
    def series(cell: str) -> list[charts.Series]:
        return _interval_series(data, data.trials_by_cell.get(cell, []))

    jobs: list[Callable[[], Plot | None]] = []
    if len(grid_cells) > 1:
        jobs.append(lambda: _grid_plot(data, grid_cells, columns, series))
    jobs += [functools.partial(_cell_plot, data, cell, columns, series) for cell in detail_cells]
    return jobs


def _grid_plot(
    data: RunData,
    grid_cells: list[dict[str, Any]],
    columns: _SeriesColumns,
    series: Callable[[str], list[charts.Series]],
) -> Plot | None:
    panels = [(f"{c['cell']} {c['label']}", series(c["cell"])) for c in grid_cells]
    if not any(s for _, s in panels):
        return None
    fig = charts.timeseries_grid(
        panels,
        column=columns.throughput,
        ylabel=columns.throughput_label,
        warmup_s=max(_warmup(data, c) for c in grid_cells),
    )
    caption = (
        "Per-interval throughput of every repetition (one line each), same axes in every "
        "panel. Grey: warm-up, discarded."
    )
    return Plot("timeseries_throughput.png", "Throughput over time, per cell", caption, _png(fig))


def _cell_plot(
    data: RunData,
    cell: dict[str, Any],
    columns: _SeriesColumns,
    series: Callable[[str], list[charts.Series]],
) -> Plot | None:
    sample_trial = _representative_trial(data, cell["cell"], columns.throughput)
    sample_dir = data.trial_dir(sample_trial)
    samples = charts.CellSamples(
        intervals=series(cell["cell"]),
        sample_label=_rep_label(data, sample_trial),
        cpu=read_samples(sample_dir, "cpu"),
        disk=read_samples(sample_dir, "disk"),
        status=read_samples(sample_dir, "status"),
        procs=read_samples(sample_dir, "procs"),
        role_labels=_role_labels(data),
        memory=isinstance(data.scenario.get("soak"), dict),
    )
    title = f"{cell['cell']} {cell['label']}"
    fig = charts.cell_figure(
        samples,
        title=title,
        throughput=(columns.throughput, columns.throughput_label),
        latency=columns.latency,
        warmup_s=_warmup(data, cell),
    )
    if fig is None:
        return None
    caption = _cell_caption(fig, samples, columns)
    return Plot(f"cell_{cell['cell']}.png", title, caption, _png(fig))


def _role_labels(data: RunData) -> dict[str, str]:
    tool = data.workload_tool
    return {"workload": f"client ({tool})" if tool else "client", "server": "server"}


def _cell_caption(fig: Any, samples: charts.CellSamples, columns: _SeriesColumns) -> str:
    """What the figure has: its panels' titles, not a list of panels it might have had."""
    titles = [t for ax in fig.axes if (t := ax.get_title(loc="left"))]
    per_rep = [t for t in titles if t.endswith("every repetition")]
    sampled = [t for t in titles if t not in per_rep]
    parts = []
    if per_rep:
        names = [t.split(",")[0].lower() for t in per_rep]
        parts.append(f"{' and '.join(names).capitalize()} of every repetition")
    if sampled:
        parts.append(
            f"{', '.join(sampled)} of {samples.sample_label} (the successful repetition with "
            f"the median {columns.throughput})"
        )
    if not per_rep:
        parts.append("no per-interval throughput: the workload tool reports only a final summary")
    return "; ".join(parts) + ". Grey: warm-up, discarded."


def _interval_column(data: RunData, candidates: tuple[Metric, ...]) -> Metric:
    for candidate in candidates:
        column = candidate.name
        if column in data.results and data.results[column].notna().any():
            return candidate
    return candidates[0]


def _interval_series(data: RunData, trials: list[str]) -> list[charts.Series]:
    series = []
    for trial in trials:
        frame = read_samples(data.trial_dir(trial), "intervals")
        if frame is not None:
            series.append(charts.Series(_rep_label(data, trial), frame))
    return series


def _representative_trial(data: RunData, cell: str, metric: str) -> str:
    """The successful repetition with the median throughput, else the first saved one."""
    rows = data.results[data.results["cell"] == cell]
    ok = rows[rows["status"] == "ok"]
    if metric in ok and ok[metric].notna().any():
        values = ok[metric].dropna()
        nearest = (values - values.median()).abs().sort_values(kind="stable").index[0]
        return str(ok.at[nearest, "trial"])
    return str((ok if not ok.empty else rows)["trial"].iloc[0])


def _rep_label(data: RunData, trial: str) -> str:
    return "r" + trial.rsplit("-r", 1)[-1] if "-r" in trial else trial


def _warmup(data: RunData, cell: dict[str, Any]) -> float:
    value = data.setting(cell, "warmup")
    return float(value) if isinstance(value, int | float) else 0.0


# --------------------------------------------------------------------------- files


def _png(fig: Any) -> bytes:
    return charts.png_bytes(fig)


def _write_plots(folder: Path, plots: list[Plot]) -> None:
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        if _OUR_PLOTS.match(old.name):
            old.unlink()
    for plot in plots:
        (folder / plot.file).write_bytes(plot.png)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _when(value: Any) -> str:
    if not value:
        return ""
    try:
        stamp = dt.datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    zone = " UTC" if stamp.utcoffset() == dt.timedelta(0) else ""
    return stamp.strftime("%Y-%m-%d %H:%M:%S") + zone


def _size_text(size: float) -> str:
    if size >= 2**30:
        return f"{size / 2**30:g} GiB"
    return f"{size / 2**20:g} MiB"
