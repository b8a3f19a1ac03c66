"""Synthetic concurrency sweeps saved through the store API, for the Scalability tests."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dbrig.store import CellPlan, RunDir, SavedRun, TrialResult, results_frame

THREADS = "workload.sysbench.threads"

Metrics = Callable[[dict[str, Any], int], Mapping[str, float]]


def make_sweep_run(
    out: Path,
    factors: Mapping[str, Sequence[Any]],
    metrics: Metrics,
    *,
    repeat: int = 2,
    tool: str = "sysbench",
) -> Path:
    """A complete run of every combination of ``factors``; ``metrics(factors, rep)``
    gives each trial's metrics."""
    run = RunDir.create(out, "sweep", dt.datetime(2026, 11, 23, 12, 0, 0))
    paths = list(factors)
    combos = [
        dict(zip(paths, values, strict=True)) for values in itertools.product(*factors.values())
    ]
    cells = [CellPlan(f"c{i:03d}", "default", combo) for i, combo in enumerate(combos)]
    trials = [f"{c.cell}-r{r}" for r in range(1, repeat + 1) for c in cells]
    results = []
    for cell in cells:
        for rep in range(1, repeat + 1):
            result = TrialResult(
                trial=f"{cell.cell}-r{rep}",
                cell=cell.cell,
                repetition=rep,
                server="default",
                status="ok",
                factors=dict(cell.factors),
                metrics=dict(metrics(dict(cell.factors), rep)),
            )
            with run.writing_trial(result.trial) as folder:
                run.write_trial(folder, result)
            results.append(result)
    scenario = {
        "name": "sweep",
        "workload": {tool: {"test": "oltp_read_write"} if tool == "sysbench" else {}},
        "repeat": repeat,
        "order": "shuffled",
    }
    run.write_saved(
        SavedRun(
            status="complete",
            created_at="2026-11-23T12:00:00+00:00",
            scenario=scenario,
            factors=tuple(paths),
            factor_labels={p: p.rsplit(".", 1)[-1] for p in paths},
            cells=tuple(cells),
            trials=tuple(trials),
            trials_saved=len(results),
            trials_failed=0,
        )
    )
    run.write_results(results_frame(results))
    return run.path
