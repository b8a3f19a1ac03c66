"""Run directories: versioned, self-describing, written so a crash loses at most one trial."""

from dbrig.store.model import FORMAT_VERSION, CellPlan, SavedRun, ShardRecord, TrialResult
from dbrig.store.results import parquet_safe, result_row, results_frame
from dbrig.store.results_log import ResultsLog
from dbrig.store.rundir import (
    RUN_JSON,
    TRIAL_JSON,
    RunDir,
    find_runs,
    read_json,
    read_trial,
)

__all__ = [
    "FORMAT_VERSION",
    "RUN_JSON",
    "TRIAL_JSON",
    "CellPlan",
    "ResultsLog",
    "RunDir",
    "SavedRun",
    "ShardRecord",
    "TrialResult",
    "find_runs",
    "parquet_safe",
    "read_json",
    "read_trial",
    "result_row",
    "results_frame",
]
