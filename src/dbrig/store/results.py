"""The tidy results table: one row per trial, a column per factor, metric and timing.

trial.json is the record. results.csv and results.parquet are views of every
trial.json, as :func:`results_frame` builds them: sorted by cell and
repetition. Pure: frames in and out; :mod:`dbrig.store.results_log` keeps the
files current while a run goes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from dbrig.store.model import TrialResult

RESULTS_CSV = "results.csv"


def result_row(result: TrialResult) -> dict[str, Any]:
    """A trial's row: identity, factors, status, metrics, timings."""
    row: dict[str, Any] = {
        "trial": result.trial,
        "cell": result.cell,
        "repetition": result.repetition,
        "server": result.server,
        "status": result.status,
        "reason": result.reason,
    }
    row.update(result.factors)
    row.update(result.metrics)
    row.update({f"time_{k}": v for k, v in result.timings.items()})
    return row


def results_frame(results: Iterable[TrialResult]) -> pd.DataFrame:
    """One row per trial, sorted by cell and repetition."""
    frame = pd.DataFrame([result_row(r) for r in results])
    if not frame.empty:
        frame = frame.sort_values(["cell", "repetition"], kind="stable").reset_index(drop=True)
    return frame


def parquet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Parquet columns have one type: a factor mixing 128M and 1073741824 becomes text."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object:
            kinds = {type(v) for v in out[column].dropna()}
            if len(kinds) > 1:
                out[column] = out[column].map(lambda v: v if v is None or v != v else str(v))
    return out
