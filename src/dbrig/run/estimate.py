"""How long a run will take, before it starts: for ``--dry-run``.

A trial costs its warm-up and measured time (what the workload tool says it will
run) plus, on a managed server, the restore, start and stop around it. Those
set-up costs depend on the host and the data set, so they are taken from the
runs already saved on this host (the median over their trials), not guessed. A
tool that runs a fixed amount of work (mysqlslap) has no known duration: the
median of an earlier run of the same scenario stands in, or it is left out and
said so.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dbrig.scenario import ManagedServer, Plan, Trial
from dbrig.tools.registry import workload_for

SETUP_COLUMNS = ("time_restore_s", "time_server_start_s", "time_server_stop_s", "time_reset_s")
RECENT_RUNS = 10  # newest run directories read for set-up costs


@dataclass(frozen=True)
class History:
    """What earlier runs on this host measured: seconds per trial."""

    setup_s: float | None  # restore + start + stop (+ reset), median per trial
    setup_trials: int
    workload_s: float | None  # the workload's wall time, same scenario name only
    # init + prepare + snapshot of every data set in the newest run of the same scenario
    # that loaded any (not one that took them all from the snapshot cache)
    data_set_load_s: float | None = None


def read_history(out: Path, scenario_name: str) -> History:
    """Medians over the newest saved runs under ``out`` (nothing saved: all None)."""
    setups: list[float] = []
    workloads: list[float] = []
    loads: list[float] = []  # per run of this scenario, newest first
    for results in _recent_results(out):
        frame = pd.read_csv(results)
        ok = frame[frame.get("status", "ok") == "ok"] if "status" in frame else frame
        setup_columns = [c for c in SETUP_COLUMNS if c in ok]
        if setup_columns:
            setups += [float(v) for v in ok[setup_columns].sum(axis=1, min_count=1).dropna()]
        if not results.parent.name.startswith(f"{scenario_name}-"):
            continue
        if "time_workload_s" in ok:
            workloads += [float(v) for v in ok["time_workload_s"].dropna()]
        if "time_data_set_load_s" in frame and frame["time_data_set_load_s"].notna().any():
            loads.append(float(frame["time_data_set_load_s"].sum()))
    return History(
        statistics.median(setups) if setups else None,
        len(setups),
        statistics.median(workloads) if workloads else None,
        loads[0] if loads else None,
    )


def _recent_results(out: Path) -> Iterable[Path]:
    if not out.is_dir():
        return []
    found = [p for p in out.glob("*/results.csv") if p.stat().st_size > 0]
    found.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    return found[:RECENT_RUNS]


@dataclass(frozen=True)
class Estimate:
    total_s: float
    lines: tuple[str, ...]  # how it was reached, one line each


def estimate(plan: Plan, history: History, trials: Sequence[Trial] | None = None) -> Estimate:
    """The wall time of ``trials`` (default: all): every trial's load time plus, for a
    cell whose workload runs against a managed server, its set-up from ``history``."""
    trials = plan.trials if trials is None else trials
    load_s = 0.0
    unknown = 0
    managed = 0
    for trial in trials:
        cell = trial.cell
        workload = workload_for(cell.scenario.workload)
        expected = workload.expected_seconds(cell.scenario.warmup)
        if expected is None:
            expected = history.workload_s
        if expected is None:
            unknown += 1
        else:
            load_s += expected
        spec = cell.scenario.server_specs[cell.server]
        if workload.needs_server and isinstance(spec, ManagedServer):
            managed += 1
    lines = [f"{len(trials)} trials: {_duration(load_s)} of load (warm-up + measured)"]
    setup_s = 0.0
    if managed and history.setup_s is not None:
        setup_s = managed * history.setup_s
        lines.append(
            f"{managed} managed set-ups x {history.setup_s:.1f} s (restore, start, stop: median "
            f"of {history.setup_trials} earlier trials on this host) = {_duration(setup_s)}"
        )
    elif managed:
        lines.append(
            f"{managed} managed set-ups: not counted (no earlier run on this host to time "
            "restore, start and stop)"
        )
    if unknown:
        lines.append(
            f"{unknown} trials run a fixed amount of work and no earlier run of this scenario "
            "timed it: not counted"
        )
    if history.data_set_load_s is None:
        lines.append("plus the data set loads (prepare) and the report")
    else:
        lines.append(
            f"plus the data set loads ({_duration(history.data_set_load_s)} in the newest run "
            "of this scenario that loaded them; nothing for those a snapshot cache holds) and "
            "the report"
        )
    return Estimate(load_s + setup_s, tuple(lines))


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def describe(plan: Plan, out: Path, trials: Sequence[Trial] | None = None) -> list[str]:
    """The dry run's estimate lines, for ``trials`` (a resumed run's: what is left)."""
    history = read_history(out, plan.scenario.name)
    found = estimate(plan, history, trials)
    lines = [
        f"estimated wall time: at least {_duration(found.total_s)}",
        *(f"  {line}" for line in found.lines),
    ]
    design = plan.scenario.sequential
    if design is not None:
        chosen = plan.trials if trials is None else trials
        best = estimate(plan, history, [t for t in chosen if t.repetition <= design.min])
        lines[0] += f" if it runs to max ({design.max} rounds: the worst case)"
        lines.insert(1, f"  at least {_duration(best.total_s)} if it stops at min ({design.min})")
    return lines
