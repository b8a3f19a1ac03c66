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
from pathlib import Path

import pandas as pd

from dbrig.report.data import RunData, load_run
from dbrig.report.scaling import find_sweeps
from dbrig.report.tables import CellStats, aggregate, cell_overview, metric_columns
from dbrig.report.warning_base import (
    MAX_CELL_WARNINGS,
    MAX_CV,
    MAX_OTHER_CPU_PCT,
    MAX_SAMPLER_PCT,
    MAX_STEAL_PCT,
    MEASUREMENT_CODES,
    MIN_REPETITIONS,
    MIN_SAMPLER_WINDOW_S,
    MIN_STRESS_RATIO,
    MIN_WINDOW_S,
    CheckedRun,
    Hit,
    RunWarning,
    buffer_pool_bytes,
    cell_warnings,
    first_few,
    seconds_text,
    see,
    throughput_metric,
    uniform_or_cell_warnings,
)
from dbrig.report.warning_setup import (
    client_placement,
    soak_drift,
    soak_rss_growth,
    tool_checks,
    tool_settings,
)
from dbrig.tools.registry import INTERFERENCE_TOOLS, WORKLOAD_TOOLS
from dbrig.util.units import size_text

__all__ = [
    "MAX_CELL_WARNINGS",
    "MEASUREMENT_CODES",
    "THREAT_ORDER",
    "RunWarning",
    "compute_warnings",
    "measurement_caveats",
    "run_warnings",
    "see",
    "throughput_metric",
]


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


def compute_warnings(data: RunData, overview: pd.DataFrame, stats: CellStats) -> list[RunWarning]:
    """Every warning, from the loaded run, its cell overview and its per-cell statistics."""
    labels = dict(zip(overview["cell"], overview["label"], strict=True))
    run = CheckedRun(data, overview, stats, labels)
    checks: list[Callable[[CheckedRun], list[RunWarning]]] = [
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
        tool_checks,
        client_placement,
        soak_drift,
        soak_rss_growth,
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


def _incomplete(run: CheckedRun) -> list[RunWarning]:
    data = run.data
    if data.status == "complete":
        return []
    saved, planned = len(data.results), data.planned_trials
    hint = f"; continue it with: dbrig run --resume {data.path}" if data.status != "running" else ""
    missing = (data.saved.extra.get("merged") or {}).get("missing") or []
    if missing:
        hint = f"; merged without {first_few([str(m) for m in missing])}"
    message = f"the run is {data.status}: {saved} of {planned} trials saved{hint}"
    return [RunWarning("incomplete", message)]


def _merged_env_diff(run: CheckedRun) -> list[RunWarning]:
    differences = (run.data.saved.extra.get("merged") or {}).get("environment_differences") or []
    texts = [f"{d.get('piece')}: {d.get('text')}" for d in differences if isinstance(d, dict)]
    if not texts:
        return []
    message = (
        "merged from pieces run in different environments (dbrig merge --allow-env-diff): "
        + first_few(texts, separator="; ")
    )
    return [RunWarning("merged_env_diff", message)]


def _failed(run: CheckedRun) -> list[RunWarning]:
    rows = run.overview[run.overview["failed"] > 0]
    hits = [
        Hit(
            r.cell,
            r.label,
            f"{r.failed} of {r.trials} repetitions failed: {r.failed_reasons}",
            r.failed / max(r.trials, 1),
        )
        for r in rows.itertuples()
    ]
    where = "every cell's reasons in the result table's 'failed' column"
    return cell_warnings("failed", hits, run.n_cells, "repetitions failed", where=where)


def _short_window(run: CheckedRun) -> list[RunWarning]:
    window, what = run.means("measured_time_s"), "measured window"
    if window.empty:  # mysqlslap: no separate measured window, the whole run counts
        window, what = run.means("time_workload_s"), "workload ran"
    short = window[window < MIN_WINDOW_S]
    hits = [
        Hit(cell, run.label(cell), f"{what} {seconds_text(seconds)}", -seconds)
        for cell, seconds in short.items()
    ]
    tail = f" (under {MIN_WINDOW_S:.0f} s: too short for a steady state; aim for minutes)"
    column = "measured_time_s" if what == "measured window" else "time_workload_s"
    return uniform_or_cell_warnings(
        "short_window", hits, window.size, tail, "short measured windows", see(column)
    )


def _data_in_buffer_pool(run: CheckedRun) -> list[RunWarning]:
    data = run.data
    tool = WORKLOAD_TOOLS.get(data.workload_tool or "")
    if tool is None:
        return []
    hits = []
    for cell in run.overview.to_dict("records"):
        estimate = tool.estimated_data(tool_settings(run, tool.key, cell))
        pool = buffer_pool_bytes(data, cell)
        if estimate is None or pool is None:
            continue
        if (size := estimate.bytes) < pool:
            text = (
                f"{estimate.how} = {size_text(size)} of data, "
                f"innodb_buffer_pool_size {size_text(pool)}"
            )
            hits.append(Hit(cell["cell"], cell["label"], text, pool / max(size, 1)))
    head = "the data fits in the buffer pool: this measures CPU and locking, not disk"
    if hits and len(hits) == run.n_cells and len({h.text for h in hits}) == 1:
        return [RunWarning("data_in_buffer_pool", f"{head} ({hits[0].text}; every cell)")]
    summary = "the data fits in the buffer pool (this measures CPU and locking, not disk)"
    where = "the data-set settings of every cell in the report's matrix table"
    return cell_warnings(
        "data_in_buffer_pool", hits, run.n_cells, summary, head + ": ", where=where
    )


def _errors(run: CheckedRun) -> list[RunWarning]:
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
            hits.append(Hit(cell, run.label(cell), text, err + rec))
    where = f"{see('errors_per_s')}; reconnects_per_s in results.csv"
    return cell_warnings("errors", hits, run.n_cells, "errors or reconnects", where=where)


def _high_cv(run: CheckedRun) -> list[RunWarning]:
    metric = throughput_metric(run.stats)
    if metric is None:
        return []
    column, name = metric
    cv = run.stats.cv[column].dropna()
    hits = [
        Hit(
            cell,
            run.label(cell),
            f"{name} CV {100 * value:.1f} % over {run.stats.n.at[cell, column]} repetitions "
            f"(above {100 * MAX_CV:.0f} %)",
            value,
        )
        for cell, value in cv[cv > MAX_CV].items()
    ]
    where = f"every cell's CV in the result table's {name} column"
    return cell_warnings(
        "high_cv", hits, run.n_cells, f"{name} varying across repetitions", where=where
    )


def _few_repetitions(run: CheckedRun) -> list[RunWarning]:
    done = run.overview[run.overview["trials"] > 0]
    few = done[done["ok"] < MIN_REPETITIONS]
    if few.empty:
        return []
    planned = run.data.scenario.get("repeat")  # a count, or a sequential design's mapping
    repeat = int(planned.get("min") or 0) if isinstance(planned, dict) else int(planned or 0)
    tail = f" (fewer than {MIN_REPETITIONS}: the spread is barely known)"
    if 0 < repeat < MIN_REPETITIONS:
        message = (
            f"repeat: {repeat} runs {repeat} repetition(s) per cell{tail}; "
            f"use repeat: {MIN_REPETITIONS} or more"
        )
        return [RunWarning("few_repetitions", message)]
    hits = [
        Hit(r.cell, r.label, f"{r.ok} successful repetition(s)", -r.ok) for r in few.itertuples()
    ]
    where = "every cell's count in the result table's 'n' column"
    return cell_warnings(
        "few_repetitions", hits, run.n_cells, "too few repetitions", "", tail, where
    )


def _weak_interference(run: CheckedRun) -> list[RunWarning]:
    found = []
    for key, tool in INTERFERENCE_TOOLS.items():
        if tool.achieved_ratio_metric is not None:
            found += _weak(run, key, tool.achieved_ratio_metric)
    return found


def _weak(run: CheckedRun, tool: str, ratio: str) -> list[RunWarning]:
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
        hits.append(Hit(str(cell), run.label(str(cell)), text, 1 - row["worst"]))
    summary = "interference below its target"
    where = see(ratio)
    return cell_warnings("weak_interference", hits, run.n_cells, summary, where=where)


def _other_load(run: CheckedRun) -> list[RunWarning]:
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
        hits.append(Hit(str(cell), run.label(str(cell)), text, worst))
    where = see("other_cpu_pct")
    suffix = " (the results competed with something dbrig did not start)"
    summary = "other load on the host"
    return cell_warnings("other_load", hits, run.n_cells, summary, "", suffix, where)


def _swap(run: CheckedRun) -> list[RunWarning]:
    swap_in, swap_out = run.means("swap_in_mb_per_s"), run.means("swap_out_mb_per_s")
    hits = []
    for cell in swap_in.index.union(swap_out.index):
        rate_in, rate_out = swap_in.get(cell, 0.0), swap_out.get(cell, 0.0)
        if rate_in > 0 or rate_out > 0:
            text = f"swapping: {rate_in:.2f} MiB/s in, {rate_out:.2f} MiB/s out"
            hits.append(Hit(cell, run.label(cell), text, rate_in + rate_out))
    where = see("swap_in_mb_per_s") + " (and swap_out_mb_per_s)"
    return cell_warnings("swap", hits, run.n_cells, "swap activity", where=where)


def _steal(run: CheckedRun) -> list[RunWarning]:
    steal = run.means("steal_pct")
    hits = [
        Hit(
            cell,
            run.label(cell),
            f"CPU steal {value:.1f} % (above {MAX_STEAL_PCT:.0f} %: the hypervisor took the CPU)",
            value,
        )
        for cell, value in steal[steal > MAX_STEAL_PCT].items()
    ]
    return cell_warnings("steal", hits, run.n_cells, "CPU steal", where=see("steal_pct"))


def _sampler_overhead(run: CheckedRun) -> list[RunWarning]:
    cost = run.means("sampler_cpu_pct")
    # In a trial of a few seconds the samplers' start-up (the first snapshot of every
    # process and counter) dominates their cost: judge the steady rate on longer ones.
    window = run.means("measured_time_s")
    if window.empty:
        window = run.means("time_workload_s")
    if not window.empty:
        cost = cost[cost.index.isin(window[window >= MIN_SAMPLER_WINDOW_S].index)]
    hits = [
        Hit(
            cell,
            run.label(cell),
            f"the samplers used {value:.1f} % of a core (above {MAX_SAMPLER_PCT:.0f} %)",
            value,
        )
        for cell, value in cost[cost > MAX_SAMPLER_PCT].items()
    ]
    where = see("sampler_cpu_pct")
    return cell_warnings("sampler_overhead", hits, run.n_cells, "sampler overhead", where=where)


def _peak_not_reached(run: CheckedRun) -> list[RunWarning]:
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
