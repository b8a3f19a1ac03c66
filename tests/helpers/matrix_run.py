"""Synthetic runs of a matrix as written (run.json raw_scenario), saved through the store API."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dbrig.store import CellPlan, RunDir, SavedRun, TrialResult, results_frame


def make_run(
    out: Path,
    matrix: Any,
    cells: Sequence[Mapping[str, Any]],
    *,
    repeat: int = 2,
    scenario: Mapping[str, Any] | None = None,
    cpu_count: int = 2,
    systems: Sequence[Mapping[str, Any]] | None = None,
    servers: Mapping[str, Any] | None = None,
) -> Path:
    """A complete run of ``cells`` (in matrix order) whose matrix was written as ``matrix``."""
    run = RunDir.create(out, "charts", dt.datetime(2026, 11, 23, 12, 0, 0))
    plans = [CellPlan(f"c{i:03d}", "default", dict(f)) for i, f in enumerate(cells)]
    results = []
    for number, cell in enumerate(plans):
        for rep in range(1, repeat + 1):
            result = TrialResult(
                trial=f"{cell.cell}-r{rep}",
                cell=cell.cell,
                repetition=rep,
                server="default",
                status="ok",
                factors=dict(cell.factors),
                system=dict(systems[number]) if systems else {},
                metrics={"tps": 100.0 + 10 * number + rep, "latency_avg_ms": 5.0 + rep},
            )
            with run.writing_trial(result.trial) as folder:
                run.write_trial(folder, result)
            results.append(result)
    factors = tuple(dict.fromkeys(p for c in cells for p in c))
    base = {"name": "charts", "workload": {"sysbench": {"test": "oltp_read_write"}}}
    run.write_saved(
        SavedRun(
            status="complete",
            created_at="2026-11-23T12:00:00+00:00",
            scenario={**base, **(scenario or {}), "repeat": repeat},
            raw_scenario={"name": "charts", "matrix": matrix},
            factors=factors,
            factor_labels={p: p.rsplit(".", 1)[-1] for p in factors},
            cells=tuple(plans),
            trials=tuple(r.trial for r in results),
            environment={"host": {"cpu_count": cpu_count}},
            servers=dict(servers or {}),
            trials_saved=len(results),
            trials_failed=0,
        )
    )
    run.write_results(results_frame(results))
    return run.path
