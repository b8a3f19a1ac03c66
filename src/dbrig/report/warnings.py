"""Where the results of a run may lie (seed 004), as warnings for the report and the terminal.

Each check looks at the saved results only, names the cells it applies to and
the number that tripped it. A check yields one line however many cells trip it
(``cell`` None when several do): how many cells, then each cell worst first with
its repetitions and numbers (the first :data:`MAX_CELL_WARNINGS`), so six
``other_load`` boxes become one. The lines are ordered by :data:`THREAT_ORDER`:
how much each kind threatens the answer. The terminal, the report and dbrig.log
show the same lines.

========================  ==================================================================
code                      when
========================  ==================================================================
incomplete                run.json status is not ``complete`` (interrupted or still running,
                          or a ``partial`` merge: its missing trials named)
merged_env_diff           ``dbrig merge --allow-env-diff`` joined pieces whose environments
                          differ (run.json ``merged.environment_differences``)
failed                    a cell has failed repetitions (with their reasons)
short_window              measured window (``measured_time_s``; for mysqlslap the
                          workload's wall time) under 60 s
data_in_buffer_pool       sysbench ``tables * table_size * ~230 B`` fits in
                          ``innodb_buffer_pool_size``
errors                    ignored errors or reconnects above 0
high_cv                   CV of the throughput over repetitions above 5 %
few_repetitions           fewer than 3 successful repetitions
weak_interference         a repetition's ``stress_achieved_ratio`` under 0.8
swap                      swap-in or swap-out above 0 MiB/s
steal                     CPU steal above 5 % (mean over the cell's repetitions)
other_load                a repetition's ``other_cpu_pct`` above 10 %: processes dbrig did
                          not start took the host's CPU during the measured window
sampler_overhead          the samplers' own CPU (``sampler_cpu_pct``) above 1 % of a core
peak_not_reached          a concurrency sweep whose largest N is below the N* of its USL fit
                          (:mod:`dbrig.report.scaling`): the peak lies beyond the sweep
page_cache                sysbench fileio ``file_total_size`` under the host's RAM without
                          ``file_extra_flags: direct``
threads_over_cores        sysbench cpu or mutex with more threads than the host's cores
client_placement          a pinned server whose client is not pinned, or pinned to the same
                          cores (``workload.<tool>.cpus``): the client competes for them
soak_drift                a soak trial (measured window of 10 minutes or more) whose TPS or
                          latency drifts: the slope's 95 % interval
                          excludes zero and the slope exceeds ``soak.drift_threshold_pct_per_h``
                          (default 5 %/h)
soak_rss_growth           a soak trial's server RSS keeps growing over the window's second
                          half: the interval excludes zero and the slope exceeds
                          ``soak.rss_threshold_mib_per_h`` (default 40 MiB/h)
========================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from dbrig.analysis import drift
from dbrig.metrics import (
    SOAK_DRIFT_THRESHOLD_PCT_PER_H,
    SOAK_RSS_THRESHOLD_MIB_PER_H,
    throughput_metrics,
)
from dbrig.metrics import metric as registry_entry
from dbrig.report.data import RunData, load_run
from dbrig.report.scaling import find_sweeps
from dbrig.report.tables import CellStats, aggregate, cell_overview, metric_columns
from dbrig.tools.base import HostFacts, Setting
from dbrig.tools.registry import INTERFERENCE_TOOLS, WORKLOAD_TOOLS
from dbrig.util.units import parse_size, size_text, to_float

MIN_WINDOW_S = 60.0
MAX_CV = 0.05
MIN_REPETITIONS = 3
MIN_STRESS_RATIO = 0.8
MAX_STEAL_PCT = 5.0
# A quiet host runs 0-2 % of other work during a trial (measured: docs/sampling.md).
MAX_OTHER_CPU_PCT = 10.0
MIN_SAMPLER_WINDOW_S = 10.0
MAX_SAMPLER_PCT = 1.0
MAX_CELL_WARNINGS = 6
# A soak warning needs a window this long: over a few minutes a per-hour slope extrapolates
# start-up (the buffer pool filling, the first checkpoint), not a trend.
MIN_SOAK_WINDOW_S = 600.0


# The warnings about how the host disturbed a measurement, which ``compare`` repeats
# beside its verdicts: a regression in a run that competed for the CPU may be the host's.
MEASUREMENT_CODES = ("steal", "other_load", "swap", "weak_interference", "sampler_overhead")


@dataclass(frozen=True)
class RunWarning:
    """One reason to distrust part of a run: a stable ``code``, a sentence, the cell or None."""

    code: str
    message: str
    cell: str | None = None


@dataclass(frozen=True)
class _Hit:
    cell: str
    label: str
    text: str
    severity: float  # larger is worse, for picking the worst cells


def run_warnings(run_dir: Path) -> list[RunWarning]:
    """Every warning for the run saved in ``run_dir``."""
    data = load_run(Path(run_dir))
    overview = cell_overview(data.results, data.cells)
    metrics = metric_columns(data.results, data.factors)
    stats = aggregate(data.results, metrics, list(data.cells["cell"]))
    return compute_warnings(data, overview, stats)


def measurement_caveats(run_dir: Path) -> list[str]:
    """The run's warnings about how the host disturbed its measurement
    (:data:`MEASUREMENT_CODES`), one line each."""
    return [w.message for w in run_warnings(run_dir) if w.code in MEASUREMENT_CODES]


@dataclass(frozen=True)
class _Run:
    data: RunData
    overview: pd.DataFrame
    stats: CellStats
    labels: dict[str, str]

    @property
    def n_cells(self) -> int:
        return len(self.overview)

    def label(self, cell: str) -> str:
        return self.labels.get(cell, "")

    def means(self, metric: str) -> pd.Series:
        """Per-cell means of a metric over successful repetitions (cells without one left out)."""
        if metric not in self.stats.mean.columns:
            return pd.Series(dtype=float)
        return self.stats.mean[metric].dropna()


def compute_warnings(data: RunData, overview: pd.DataFrame, stats: CellStats) -> list[RunWarning]:
    """Every warning, from the loaded run, its cell overview and its per-cell statistics."""
    labels = dict(zip(overview["cell"], overview["label"], strict=True))
    run = _Run(data, overview, stats, labels)
    checks: list[Callable[[_Run], list[RunWarning]]] = [
        _incomplete,
        _merged_env_diff,
        _failed,
        _short_window,
        _data_in_buffer_pool,
        _errors,
        _high_cv,
        _few_repetitions,
        _weak_interference,
        _swap,
        _steal,
        _other_load,
        _sampler_overhead,
        _peak_not_reached,
        _tool_checks,
        _client_placement,
        _soak_drift,
        _soak_rss_growth,
    ]
    found: list[RunWarning] = []
    for check in checks:
        found += check(run)
    return _by_threat(_folded(found))


# Most threatening to the answer first: results missing or wrong, then results disturbed,
# then results that answer a narrower question than asked, then how sure they are.
THREAT_ORDER = (
    "incomplete",
    "failed",
    "merged_env_diff",
    "errors",
    "swap",
    "steal",
    "other_load",
    "weak_interference",
    "high_cv",
    "peak_not_reached",
    "soak_drift",
    "soak_rss_growth",
    "client_placement",
    "threads_over_cores",
    "page_cache",
    "data_in_buffer_pool",
    "short_window",
    "few_repetitions",
    "sampler_overhead",
)


def _folded(found: list[RunWarning]) -> list[RunWarning]:
    """One warning per code: several of one code (one per sweep) joined into one line."""
    by_code: dict[str, list[RunWarning]] = {}
    for warning in found:
        by_code.setdefault(warning.code, []).append(warning)
    return [
        group[0] if len(group) == 1 else RunWarning(code, "; ".join(w.message for w in group), None)
        for code, group in by_code.items()
    ]


def _by_threat(found: list[RunWarning]) -> list[RunWarning]:
    rank = {code: i for i, code in enumerate(THREAT_ORDER)}
    return sorted(found, key=lambda w: rank.get(w.code, len(rank)))


# --------------------------------------------------------------------------- checks


def _incomplete(run: _Run) -> list[RunWarning]:
    data = run.data
    if data.status == "complete":
        return []
    saved, planned = len(data.results), data.planned_trials
    hint = f"; continue it with: dbrig run --resume {data.path}" if data.status != "running" else ""
    missing = (data.saved.extra.get("merged") or {}).get("missing") or []
    if missing:
        hint = f"; merged without {_first_few([str(m) for m in missing])}"
    message = f"the run is {data.status}: {saved} of {planned} trials saved{hint}"
    return [RunWarning("incomplete", message)]


def _merged_env_diff(run: _Run) -> list[RunWarning]:
    differences = (run.data.saved.extra.get("merged") or {}).get("environment_differences") or []
    texts = [f"{d.get('piece')}: {d.get('text')}" for d in differences if isinstance(d, dict)]
    if not texts:
        return []
    message = (
        "merged from pieces run in different environments (dbrig merge --allow-env-diff): "
        + _first_few(texts, separator="; ")
    )
    return [RunWarning("merged_env_diff", message)]


def _first_few(items: list[str], shown: int = 6, separator: str = ", ") -> str:
    more = f"{separator}+{len(items) - shown} more" if len(items) > shown else ""
    return separator.join(items[:shown]) + more


def _failed(run: _Run) -> list[RunWarning]:
    rows = run.overview[run.overview["failed"] > 0]
    hits = [
        _Hit(
            r.cell,
            r.label,
            f"{r.failed} of {r.trials} repetitions failed: {r.failed_reasons}",
            r.failed / max(r.trials, 1),
        )
        for r in rows.itertuples()
    ]
    where = "every cell's reasons in the result table's 'failed' column"
    return _per_cell("failed", hits, run.n_cells, "repetitions failed", where=where)


def _short_window(run: _Run) -> list[RunWarning]:
    window, what = run.means("measured_time_s"), "measured window"
    if window.empty:  # mysqlslap: no separate measured window, the whole run counts
        window, what = run.means("time_workload_s"), "workload ran"
    short = window[window < MIN_WINDOW_S]
    hits = [
        _Hit(cell, run.label(cell), f"{what} {_seconds(seconds)}", -seconds)
        for cell, seconds in short.items()
    ]
    tail = f" (under {MIN_WINDOW_S:.0f} s: too short for a steady state; aim for minutes)"
    column = "measured_time_s" if what == "measured window" else "time_workload_s"
    return _uniform_or_per_cell(
        "short_window", hits, window.size, tail, "short measured windows", see(column)
    )


def _data_in_buffer_pool(run: _Run) -> list[RunWarning]:
    data = run.data
    tool = WORKLOAD_TOOLS.get(data.workload_tool or "")
    if tool is None:
        return []
    hits = []
    for cell in run.overview.to_dict("records"):
        estimate = tool.estimated_data(_settings(run, tool.key, cell))
        pool = buffer_pool_bytes(data, cell)
        if estimate is None or pool is None:
            continue
        if (size := estimate.bytes) < pool:
            text = (
                f"{estimate.how} = {size_text(size)} of data, "
                f"innodb_buffer_pool_size {size_text(pool)}"
            )
            hits.append(_Hit(cell["cell"], cell["label"], text, pool / max(size, 1)))
    head = "the data fits in the buffer pool: this measures CPU and locking, not disk"
    if hits and len(hits) == run.n_cells and len({h.text for h in hits}) == 1:
        return [RunWarning("data_in_buffer_pool", f"{head} ({hits[0].text}; every cell)")]
    summary = "the data fits in the buffer pool (this measures CPU and locking, not disk)"
    where = "the data-set settings of every cell in the report's matrix table"
    return _per_cell("data_in_buffer_pool", hits, run.n_cells, summary, head + ": ", where=where)


def _errors(run: _Run) -> list[RunWarning]:
    errors, reconnects = run.means("errors_per_s"), run.means("reconnects_per_s")
    hits = []
    for cell in errors.index.union(reconnects.index):
        err, rec = errors.get(cell, 0.0), reconnects.get(cell, 0.0)
        parts = []
        if err > 0:
            parts.append(f"{err:.2f} ignored errors/s")
        if rec > 0:
            parts.append(f"{rec:.2f} reconnects/s")
        if parts:
            text = " and ".join(parts) + " (mean over repetitions; above 0)"
            hits.append(_Hit(cell, run.label(cell), text, err + rec))
    where = f"{see('errors_per_s')}; reconnects_per_s in results.csv"
    return _per_cell("errors", hits, run.n_cells, "errors or reconnects", where=where)


def _high_cv(run: _Run) -> list[RunWarning]:
    metric = throughput_metric(run.stats)
    if metric is None:
        return []
    column, name = metric
    cv = run.stats.cv[column].dropna()
    hits = [
        _Hit(
            cell,
            run.label(cell),
            f"{name} CV {100 * value:.1f} % over {run.stats.n.at[cell, column]} repetitions "
            f"(above {100 * MAX_CV:.0f} %)",
            value,
        )
        for cell, value in cv[cv > MAX_CV].items()
    ]
    where = f"every cell's CV in the result table's {name} column"
    return _per_cell(
        "high_cv", hits, run.n_cells, f"{name} varying across repetitions", where=where
    )


def _few_repetitions(run: _Run) -> list[RunWarning]:
    done = run.overview[run.overview["trials"] > 0]
    few = done[done["ok"] < MIN_REPETITIONS]
    if few.empty:
        return []
    repeat = int(run.data.scenario.get("repeat") or 0)
    tail = f" (fewer than {MIN_REPETITIONS}: the spread is barely known)"
    if 0 < repeat < MIN_REPETITIONS:
        message = (
            f"repeat: {repeat} runs {repeat} repetition(s) per cell{tail}; "
            f"use repeat: {MIN_REPETITIONS} or more"
        )
        return [RunWarning("few_repetitions", message)]
    hits = [
        _Hit(r.cell, r.label, f"{r.ok} successful repetition(s)", -r.ok) for r in few.itertuples()
    ]
    where = "every cell's count in the result table's 'n' column"
    return _per_cell("few_repetitions", hits, run.n_cells, "too few repetitions", "", tail, where)


def _weak_interference(run: _Run) -> list[RunWarning]:
    found = []
    for key, tool in INTERFERENCE_TOOLS.items():
        if tool.achieved_ratio_metric is not None:
            found += _weak(run, key, tool.achieved_ratio_metric)
    return found


def _weak(run: _Run, tool: str, ratio: str) -> list[RunWarning]:
    """A repetition whose interference got under MIN_STRESS_RATIO of the CPU it asked for."""
    results = run.data.results
    if ratio not in results:
        return []
    ratios = results[["cell", "repetition", ratio]].dropna()
    ratios = ratios.assign(weak=ratios[ratio] < MIN_STRESS_RATIO)
    per_cell = ratios.groupby("cell", sort=True).agg(
        worst=(ratio, "min"),
        mean=(ratio, "mean"),
        count=(ratio, "size"),
        weak=("weak", "sum"),
    )
    weak_reps = (
        ratios[ratios["weak"]]
        .groupby("cell")["repetition"]
        .agg(lambda reps: ", ".join(f"r{int(r)}" for r in reps))
    )
    hits = []
    for cell, row in per_cell[per_cell["weak"] > 0].iterrows():
        text = (
            f"{tool} achieved only {100 * row['worst']:.0f} % of the CPU it asked for "
            f"({row['weak']:.0f} of {row['count']:.0f} repetitions under "
            f"{100 * MIN_STRESS_RATIO:.0f} %: {weak_reps[cell]}; mean {100 * row['mean']:.0f} %)"
        )
        hits.append(_Hit(str(cell), run.label(str(cell)), text, 1 - row["worst"]))
    summary = "interference below its target"
    where = see(ratio)
    return _per_cell("weak_interference", hits, run.n_cells, summary, where=where)


def _other_load(run: _Run) -> list[RunWarning]:
    """Processes dbrig did not start took the host's CPU during the measured window."""
    results = run.data.results
    if "other_cpu_pct" not in results:
        return []
    other = results[["cell", "repetition", "other_cpu_pct"]].dropna()
    busy = other[other["other_cpu_pct"] > MAX_OTHER_CPU_PCT]
    hits = []
    for cell, rows in busy.groupby("cell", sort=True):
        reps = ", ".join(f"r{int(r)}" for r in rows["repetition"])
        count = int((other["cell"] == cell).sum())
        worst = float(rows["other_cpu_pct"].max())
        text = (
            f"other processes took {worst:.0f} % of the host's CPU ({len(rows)} of {count} "
            f"repetitions above {MAX_OTHER_CPU_PCT:.0f} %: {reps})"
        )
        hits.append(_Hit(str(cell), run.label(str(cell)), text, worst))
    where = see("other_cpu_pct")
    suffix = " (the results competed with something dbrig did not start)"
    summary = "other load on the host"
    return _per_cell("other_load", hits, run.n_cells, summary, "", suffix, where)


def _swap(run: _Run) -> list[RunWarning]:
    swap_in, swap_out = run.means("swap_in_mb_per_s"), run.means("swap_out_mb_per_s")
    hits = []
    for cell in swap_in.index.union(swap_out.index):
        rate_in, rate_out = swap_in.get(cell, 0.0), swap_out.get(cell, 0.0)
        if rate_in > 0 or rate_out > 0:
            text = f"swapping: {rate_in:.2f} MiB/s in, {rate_out:.2f} MiB/s out"
            hits.append(_Hit(cell, run.label(cell), text, rate_in + rate_out))
    where = see("swap_in_mb_per_s") + " (and swap_out_mb_per_s)"
    return _per_cell("swap", hits, run.n_cells, "swap activity", where=where)


def _steal(run: _Run) -> list[RunWarning]:
    steal = run.means("steal_pct")
    hits = [
        _Hit(
            cell,
            run.label(cell),
            f"CPU steal {value:.1f} % (above {MAX_STEAL_PCT:.0f} %: the hypervisor took the CPU)",
            value,
        )
        for cell, value in steal[steal > MAX_STEAL_PCT].items()
    ]
    return _per_cell("steal", hits, run.n_cells, "CPU steal", where=see("steal_pct"))


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.2g} s"


def _sampler_overhead(run: _Run) -> list[RunWarning]:
    cost = run.means("sampler_cpu_pct")
    # In a trial of a few seconds the samplers' start-up (the first snapshot of every
    # process and counter) dominates their cost: judge the steady rate on longer ones.
    window = run.means("measured_time_s")
    if window.empty:
        window = run.means("time_workload_s")
    if not window.empty:
        cost = cost[cost.index.isin(window[window >= MIN_SAMPLER_WINDOW_S].index)]
    hits = [
        _Hit(
            cell,
            run.label(cell),
            f"the samplers used {value:.1f} % of a core (above {MAX_SAMPLER_PCT:.0f} %)",
            value,
        )
        for cell, value in cost[cost > MAX_SAMPLER_PCT].items()
    ]
    where = see("sampler_cpu_pct")
    return _per_cell("sampler_overhead", hits, run.n_cells, "sampler overhead", where=where)


def _peak_not_reached(run: _Run) -> list[RunWarning]:
    found = []
    for sweep in find_sweeps(run.data):
        fit = sweep.fit
        n_star, largest = fit.n_star, fit.max_n
        if n_star is None or largest is None or largest >= n_star:
            continue
        metric = sweep.throughput
        gain = (fit.predicted_peak or 0) / fit.predict(largest) - 1
        where = f"{sweep.group}: " if sweep.group else ""
        message = (
            f"{where}the peak was not reached: extend the sweep beyond {sweep.label}="
            f"{largest:g} (the USL fit puts the peak at N* = {n_star:.1f}, "
            f"{metric.format(fit.predicted_peak)} {metric.unit}, {100 * gain:.1f} % above "
            f"its value at {largest:g})"
        )
        found.append(RunWarning("peak_not_reached", message))
    return found


# --------------------------------------------------------------------------- soak


def _soak_threshold(run: _Run, key: str, default: float) -> float | None:
    """The soak block's threshold, its default when unset; None when the run is no soak."""
    soak = run.data.scenario.get("soak")
    if not isinstance(soak, dict):
        return None
    value = to_float(soak.get(key))
    return default if value is None else value


def _soak_trials(run: _Run, column: str) -> pd.DataFrame:
    results = run.data.results
    if column not in results.columns:
        return results.iloc[0:0]
    ok = results[(results["status"] == "ok") & results[column].notna()]
    if "measured_time_s" in ok.columns:
        ok = ok[pd.to_numeric(ok["measured_time_s"], errors="coerce") >= MIN_SOAK_WINDOW_S]
    return ok.sort_values(["cell", "repetition"], kind="stable")


def _soak_drift(run: _Run) -> list[RunWarning]:
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
            hits.append(_Hit(row["cell"], run.label(row["cell"]), text, abs(found.pct_per_h)))
    where = see("tps_drift_pct_per_h") + " (and latency_pct_drift_pct_per_h)"
    return _per_cell("soak_drift", hits, run.n_cells, "drift over the soak", where=where)


def _soak_rss_growth(run: _Run) -> list[RunWarning]:
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
        hits.append(_Hit(row["cell"], run.label(row["cell"]), text, slope))
    where = see("server_rss_slope_mib_per_h")
    return _per_cell("soak_rss_growth", hits, run.n_cells, "server RSS growth", where=where)


# --------------------------------------------------------------------------- helpers


def throughput_metric(stats: CellStats) -> tuple[str, str] | None:
    """The throughput column this run has (TPS for sysbench), with its display name."""
    for metric in throughput_metrics():
        column = metric.name
        if column in stats.mean.columns and stats.mean[column].notna().any():
            return column, metric.terminal_heading
    return None


def buffer_pool_bytes(data: RunData, cell: dict[str, Any]) -> int | None:
    """The cell's innodb_buffer_pool_size in bytes: its factor if varied, else the server's."""
    server = str(cell.get("server") or "default")
    for key in (
        "server.config.innodb_buffer_pool_size",
        f"servers.{server}.config.innodb_buffer_pool_size",
    ):
        if key in cell:
            return parse_size(cell[key])
    variables = (data.saved.servers.get(server) or {}).get("variables") or {}
    return parse_size(variables.get("innodb_buffer_pool_size"))


def _where(hit: _Hit) -> str:
    return hit.cell if hit.label in ("", "(single cell)") else f"{hit.cell} ({hit.label})"


def see(column: str) -> str:
    """Where every cell's value of ``column`` can be read: a result table column if it
    is one (headline or context metric), else results.csv."""
    entry = registry_entry(column)
    if entry is not None and (entry.headline or entry.detail):
        return f"every cell in the result table's {entry.terminal_heading!r} column"
    return f"every trial in column {column} of results.csv"


def _per_cell(
    code: str,
    hits: list[_Hit],
    n_cells: int,
    summary: str,
    prefix: str = "",
    suffix: str = "",
    where: str = "every cell in the result table",
) -> list[RunWarning]:
    """One line per check: the cell itself when one cell tripped it, else how many cells
    and each of them, worst first (the first :data:`MAX_CELL_WARNINGS`, then where the
    rest can be read)."""
    if not hits:
        return []
    if len(hits) == 1:
        h = hits[0]
        return [RunWarning(code, f"{_where(h)}: {prefix}{h.text}{suffix}", h.cell)]
    worst = sorted(hits, key=lambda h: h.severity, reverse=True)
    shown = "; ".join(f"{_where(h)}: {h.text}" for h in worst[:MAX_CELL_WARNINGS])
    more = len(hits) - MAX_CELL_WARNINGS
    rest = f"; +{more} more: {where}" if more > 0 else ""
    message = f"{summary} in {len(hits)} of {n_cells} cells{suffix}: {shown}{rest}"
    return [RunWarning(code, message)]


def _uniform_or_per_cell(
    code: str, hits: list[_Hit], n_cells: int, suffix: str, summary: str, where: str
) -> list[RunWarning]:
    """One run-wide warning when every cell trips the check with the same number."""
    if hits and len(hits) == n_cells and len({h.text for h in hits}) == 1:
        return [RunWarning(code, f"{hits[0].text} in every cell{suffix}")]
    return _per_cell(code, hits, n_cells, summary, "", suffix, where)


# --------------------------------------------------------------------------- the tool's own


def _tool_checks(run: _Run) -> list[RunWarning]:
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
            if (hit := check.check(_settings(run, tool.key, cell), facts)) is not None:
                hits.append(_Hit(cell["cell"], cell["label"], *hit))
        found += _uniform_or_per_cell(
            check.code, hits, run.n_cells, check.suffix, check.summary, check.where
        )
    return found


def _settings(run: _Run, tool: str, cell: dict[str, Any]) -> Setting:
    """A cell's values of the keys of the workload tool's block."""
    return lambda key: run.data.setting(cell, f"workload.{tool}.{key}")


def _client_placement(run: _Run) -> list[RunWarning]:
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
        hits.append(_Hit(cell["cell"], cell["label"], text, len(server_cpus)))
    suffix = (
        f": the client competes with the server for its cores; pin it apart with "
        f"workload.{tool}.cpus"
    )
    where = "the cpus settings of every cell in the report's matrix table"
    return _uniform_or_per_cell(
        "client_placement", hits, run.n_cells, suffix, "client on the server's cores", where
    )


def _cores(value: Any) -> set[int]:
    if isinstance(value, list | tuple):
        return {int(v) for v in value}
    return set()
