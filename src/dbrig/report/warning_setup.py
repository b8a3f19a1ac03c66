"""The checks of a soak's drift and of how the run was set up (the workload tool's own checks,
the client's placement beside a pinned server): part of :mod:`dbrig.report.warnings`."""

from __future__ import annotations

from typing import Any

import pandas as pd

from dbrig.analysis import drift
from dbrig.metrics import (
    SOAK_DRIFT_THRESHOLD_PCT_PER_H,
    SOAK_RSS_THRESHOLD_MIB_PER_H,
)
from dbrig.report.warning_base import (
    MIN_SOAK_WINDOW_S,
    CheckedRun,
    Hit,
    RunWarning,
    cell_warnings,
    see,
    uniform_or_cell_warnings,
)
from dbrig.tools.base import HostFacts, Setting
from dbrig.tools.registry import WORKLOAD_TOOLS
from dbrig.util.units import to_float

# --------------------------------------------------------------------------- soak


def _soak_threshold(run: CheckedRun, key: str, default: float) -> float | None:
    """The soak block's threshold, its default when unset; None when the run is no soak."""
    soak = run.data.scenario.get("soak")
    if not isinstance(soak, dict):
        return None
    value = to_float(soak.get(key))
    return default if value is None else value


def _soak_trials(run: CheckedRun, column: str) -> pd.DataFrame:
    results = run.data.results
    if column not in results.columns:
        return results.iloc[0:0]
    ok = results[(results["status"] == "ok") & results[column].notna()]
    if "measured_time_s" in ok.columns:
        ok = ok[pd.to_numeric(ok["measured_time_s"], errors="coerce") >= MIN_SOAK_WINDOW_S]
    return ok.sort_values(["cell", "repetition"], kind="stable")


def soak_drift(run: CheckedRun) -> list[RunWarning]:
    threshold = _soak_threshold(run, "drift_threshold_pct_per_h", SOAK_DRIFT_THRESHOLD_PCT_PER_H)
    if threshold is None:
        return []
    pct = run.data.workload_params.get("percentile") or 95
    hits = []
    for prefix, name in (("tps", "TPS"), ("latency_pct", f"p{pct} latency")):
        for row in _soak_trials(run, f"{prefix}_drift_pct_per_h").to_dict("records"):
            found = drift.Drift.from_bounds(
                row[f"{prefix}_drift_pct_per_h"],
                row[f"{prefix}_drift_ci_low_pct_per_h"],
                row[f"{prefix}_drift_ci_high_pct_per_h"],
            )
            if not drift.is_real_trend(found, threshold):
                continue
            text = (
                f"r{row['repetition']}: {name} {found.direction} {found.pct_per_h:+.1f} %/h "
                f"(95 % CI {found.ci_low_pct_per_h:+.1f} to {found.ci_high_pct_per_h:+.1f}; "
                f"beyond {threshold:g} %/h): no steady state over the soak"
            )
            hits.append(Hit(row["cell"], run.label(row["cell"]), text, abs(found.pct_per_h)))
    where = see("tps_drift_pct_per_h") + " (and latency_pct_drift_pct_per_h)"
    return cell_warnings("soak_drift", hits, run.n_cells, "drift over the soak", where=where)


def soak_rss_growth(run: CheckedRun) -> list[RunWarning]:
    threshold = _soak_threshold(run, "rss_threshold_mib_per_h", SOAK_RSS_THRESHOLD_MIB_PER_H)
    if threshold is None:
        return []
    hits = []
    for row in _soak_trials(run, "server_rss_slope_mib_per_h").to_dict("records"):
        slope, low = row["server_rss_slope_mib_per_h"], row["server_rss_slope_ci_low_mib_per_h"]
        if not (low > 0 and slope >= threshold):
            continue
        text = (
            f"r{row['repetition']}: server RSS still growing {slope:+.1f} MiB/h over the "
            f"window's second half (95 % CI from {low:+.1f}; beyond {threshold:g} MiB/h), "
            f"{row.get('server_rss_growth_mib', float('nan')):+.0f} MiB over the window: "
            "a leak or a cache still filling"
        )
        hits.append(Hit(row["cell"], run.label(row["cell"]), text, slope))
    where = see("server_rss_slope_mib_per_h")
    return cell_warnings("soak_rss_growth", hits, run.n_cells, "server RSS growth", where=where)


# --------------------------------------------------------------------------- the tool's own


def tool_checks(run: CheckedRun) -> list[RunWarning]:
    """The workload tool's own traps, from each cell's settings and the host (its
    ``cell_checks``: sysbench fileio measuring the page cache, cpu with more threads
    than cores)."""
    tool = WORKLOAD_TOOLS.get(run.data.workload_tool or "")
    if tool is None:
        return []
    host = run.data.saved.environment.get("host") or {}
    memory_gib = to_float(host.get("memory_gib"))
    facts = HostFacts(memory_gib * 2**30 if memory_gib else None, to_float(host.get("cpu_count")))
    found = []
    for check in tool.cell_checks:
        hits = []
        for cell in run.overview.to_dict("records"):
            if (hit := check.check(tool_settings(run, tool.key, cell), facts)) is not None:
                hits.append(Hit(cell["cell"], cell["label"], *hit))
        found += uniform_or_cell_warnings(
            check.code, hits, run.n_cells, check.suffix, check.summary, check.where
        )
    return found


def tool_settings(run: CheckedRun, tool: str, cell: dict[str, Any]) -> Setting:
    """A cell's values of the keys of the workload tool's block."""
    return lambda key: run.data.setting(cell, f"workload.{tool}.{key}")


def client_placement(run: CheckedRun) -> list[RunWarning]:
    """The client runs on the host it measures: on a pinned server's cores it steals them."""
    tool = run.data.workload_tool
    if not tool:
        return []
    hits = []
    for cell in run.overview.to_dict("records"):
        server = str(cell.get("server") or "default")
        server_cpus = _cores(
            run.data.setting(cell, "server.cpus")
            or run.data.setting(cell, f"servers.{server}.cpus")
        )
        if not server_cpus:
            continue
        client = _cores(run.data.setting(cell, f"workload.{tool}.cpus"))
        shown = ",".join(map(str, sorted(server_cpus)))
        if not client:
            text = f"the server is pinned to cores {shown} and the client is not"
        elif shared := client & server_cpus:
            text = f"client and server both pinned to cores {','.join(map(str, sorted(shared)))}"
        else:
            continue
        hits.append(Hit(cell["cell"], cell["label"], text, len(server_cpus)))
    suffix = (
        f": the client competes with the server for its cores; pin it apart with "
        f"workload.{tool}.cpus"
    )
    where = "the cpus settings of every cell in the report's matrix table"
    return uniform_or_cell_warnings(
        "client_placement", hits, run.n_cells, suffix, "client on the server's cores", where
    )


def _cores(value: Any) -> set[int]:
    if isinstance(value, list | tuple):
        return {int(v) for v in value}
    return set()
