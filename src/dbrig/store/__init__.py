"""Run directories: versioned, self-describing, written so a crash loses at most one trial."""

from dbrig.store.rundir import (
    FORMAT_VERSION,
    RUN_JSON,
    TRIAL_JSON,
    RunDir,
    find_runs,
    parquet_safe,
    read_json,
    results_frame,
    write_json_atomic,
)

__all__ = [
    "FORMAT_VERSION",
    "RUN_JSON",
    "TRIAL_JSON",
    "RunDir",
    "find_runs",
    "parquet_safe",
    "read_json",
    "results_frame",
    "write_json_atomic",
]
