"""The server's ``SHOW GLOBAL STATUS``: which variables, as rates or values, status.csv.

status.csv (one row per sample, from the runner's ``fetch``)
-------------------------------------------------------------
One column per variable of :data:`COUNTERS` and :data:`GAUGES` present in the
first fetch, lower-cased. Counters are stored as rates, ``<name>_per_s`` (per
second; bytes per second for ``Bytes_*``, ``Innodb_data_read/written`` and
``Innodb_os_log_written``; milliseconds per second for
``Innodb_row_lock_time``); a counter that went backwards (server restart) is
empty. Gauges are stored as the value at the sample (``memory_used`` and
``innodb_buffer_pool_bytes_dirty`` in bytes, ``innodb_buffer_pool_pages_*`` in
pages). Other variables are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from dbrig.sampling.base import SamplerFailure, _CsvLog, _one_line, _Sampler
from dbrig.sampling.rates import _delta, _number, _per_s
from dbrig.sampling.schedule import DEFAULT_TIMING, STAMP_COLUMNS, SampleTiming

COUNTERS: tuple[str, ...] = (
    "Questions",
    "Queries",
    "Com_select",
    "Com_insert",
    "Com_update",
    "Com_delete",
    "Com_commit",
    "Com_rollback",
    "Connections",
    "Aborted_connects",
    "Slow_queries",
    "Select_scan",
    "Select_full_join",
    "Sort_merge_passes",
    "Created_tmp_tables",
    "Created_tmp_disk_tables",
    "Table_locks_waited",
    "Bytes_received",
    "Bytes_sent",
    "Handler_read_key",
    "Handler_read_next",
    "Handler_read_rnd_next",
    "Handler_write",
    "Handler_update",
    "Handler_delete",
    "Handler_commit",
    "Handler_rollback",
    "Innodb_rows_read",
    "Innodb_rows_inserted",
    "Innodb_rows_updated",
    "Innodb_rows_deleted",
    "Innodb_buffer_pool_read_requests",
    "Innodb_buffer_pool_reads",
    "Innodb_buffer_pool_write_requests",
    "Innodb_buffer_pool_pages_flushed",
    "Innodb_buffer_pool_wait_free",
    "Innodb_data_reads",
    "Innodb_data_writes",
    "Innodb_data_read",
    "Innodb_data_written",
    "Innodb_data_fsyncs",
    "Innodb_os_log_written",
    "Innodb_log_waits",
    "Innodb_row_lock_waits",
    "Innodb_row_lock_time",
    "Innodb_deadlocks",
)
GAUGES: tuple[str, ...] = (
    "Threads_running",
    "Threads_connected",
    "Innodb_buffer_pool_pages_dirty",
    "Innodb_buffer_pool_pages_free",
    "Innodb_buffer_pool_pages_data",
    "Innodb_buffer_pool_pages_total",
    "Innodb_buffer_pool_bytes_dirty",
    "Innodb_row_lock_current_waits",
    "Innodb_history_list_length",
    "Innodb_checkpoint_age",
    "Open_tables",
    "Open_files",
    "Memory_used",
)
_COUNTER_KEYS = frozenset(name.lower() for name in COUNTERS)


def status_variables(snapshot: Mapping[str, Any]) -> list[str]:
    """The :data:`COUNTERS` and :data:`GAUGES` present in a status snapshot, lower-cased."""
    present = {name.lower() for name in snapshot}
    return [name.lower() for name in (*COUNTERS, *GAUGES) if name.lower() in present]


def status_column(variable: str) -> str:
    key = variable.lower()
    return f"{key}_per_s" if key in _COUNTER_KEYS else key


def status_row(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    elapsed_s: float,
    variables: Iterable[str],
) -> dict[str, float | None]:
    """Counters as per-second rates, gauges as values, from two status snapshots."""
    b = {name.lower(): value for name, value in before.items()}
    a = {name.lower(): value for name, value in after.items()}
    row: dict[str, float | None] = {}
    for variable in variables:
        key = variable.lower()
        if key in _COUNTER_KEYS:
            row[status_column(key)] = _per_s(_delta(b.get(key), a.get(key)), elapsed_s)
        else:
            row[status_column(key)] = _number(a.get(key))
    return row


class StatusSampler(_Sampler):
    """The server's global status (counters as rates, gauges as values): status.csv.

    ``fetch`` returns ``SHOW GLOBAL STATUS`` as name -> value; if it raises, the thread
    ends with ``error`` set to "server status query failed: ...".
    """

    name = "status"

    def __init__(
        self,
        cell_dir: Path | str,
        *,
        timing: SampleTiming = DEFAULT_TIMING,
        fetch: Callable[[], Mapping[str, Any]],
    ) -> None:
        super().__init__(cell_dir, timing=timing)
        self._fetch = fetch
        self._variables: list[str] = []
        self._status_log = _CsvLog(self.cell_dir / "status.csv", STAMP_COLUMNS)

    def _take(self) -> Mapping[str, Any]:
        try:
            return dict(self._fetch())
        except Exception as exc:
            raise SamplerFailure(f"server status query failed: {_one_line(exc)}") from exc

    def _prepare(self, first: Mapping[str, Any]) -> None:
        self._variables = status_variables(first)
        columns = (*STAMP_COLUMNS, *map(status_column, self._variables))
        self._status_log = _CsvLog(self.cell_dir / "status.csv", columns)

    def _emit(
        self,
        stamp: Mapping[str, Any],
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        elapsed_s: float,
    ) -> None:
        row = status_row(before, after, elapsed_s, self._variables)
        self._status_log.write([{**stamp, **row}])

    def _logs(self) -> Iterable[_CsvLog]:
        return (self._status_log,)


def global_status(conn: Any) -> dict[str, str]:
    """``SHOW GLOBAL STATUS`` over an open DB-API connection, as name -> value."""
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS")
        return {str(k): str(v) for k, v in cur.fetchall()}
