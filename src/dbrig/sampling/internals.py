"""Server internals over the measured window: performance_schema's wait events and
statement digests, InnoDB's own counters, and ``SHOW ENGINE INNODB STATUS`` at its end.

At the trial's start the sampler connects, enables every InnoDB counter
(``SET GLOBAL innodb_monitor_enable = 'all'``) and every wait instrument
(mutexes, rw-locks and socket I/O are off by default), and takes its own connection
out of performance_schema. When the measured window starts (after the warm-up) it
reads the three tables (a *snapshot*); when the workload ends it reads them again,
then ``SHOW ENGINE INNODB STATUS``, and writes the deltas. The deltas are pure
functions of two snapshots (:func:`wait_deltas`, :func:`digest_deltas`,
:func:`metric_deltas`), tested on snapshots captured from a real server.

waits.csv (one row per wait event that waited in the window, most time first)
------------------------------------------------------------------------------
``event``: performance_schema's name (``wait/synch/mutex/innodb/...``,
``wait/io/file/innodb/innodb_log_file``, ``wait/io/socket/sql/client_connection``);
``count``: waits in the window; ``wait_ms``: their total time, milliseconds.
``idle`` (a connection waiting for its client) is left out: it is not the server's.

digests.csv (the top ``digests`` statements by total time in the window)
------------------------------------------------------------------------
``schema``, ``digest`` (its hash), ``count``, ``total_ms``, ``mean_us``,
``rows_examined``, ``rows_sent``, ``text`` (the normalised statement).

innodb_metrics.csv (every counter of information_schema.INNODB_METRICS)
-----------------------------------------------------------------------
``name``, ``subsystem``, ``type`` (``counter``, ``value``, ...), ``start`` and ``end``
(COUNT at the window's start and end) and ``delta`` (end - start; for a ``value``
such as the pages in use, the change).

innodb_status.txt: ``SHOW ENGINE INNODB STATUS`` at the window's end.
internals.out: one line per part that could not be read, and why (the trial's warnings).
"""

from __future__ import annotations

import contextlib
import csv
import io
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbrig.sampling.profile import ProfileOutcome
from dbrig.sampling.schedule import SampleTiming
from dbrig.util.files import write_text_atomic

WAITS = "waits.csv"
DIGESTS = "digests.csv"
INNODB_METRICS = "innodb_metrics.csv"
INNODB_STATUS = "innodb_status.txt"
OUT = "internals.out"
FILES = (WAITS, DIGESTS, INNODB_METRICS, INNODB_STATUS, OUT)
WARNING_PREFIX = "internals: "
PICO_PER_MS = 1e9
# A condition wait is a thread waiting to be signalled: mostly background threads asleep
# (the timer thread's COND_timer alone waits about 1 s per second). waits.csv keeps them;
# server_wait_s and the report's tables (analysis/internals.py) leave them out.
CONDITION = "wait/synch/cond/"

ENABLE = (
    "SET GLOBAL innodb_monitor_enable = 'all'",
    "UPDATE performance_schema.setup_instruments SET ENABLED = 'YES', TIMED = 'YES' "
    "WHERE NAME LIKE 'wait/%'",
)
# dbrig's own queries stay out of what it measures.
NOT_ME = (
    "UPDATE performance_schema.threads SET INSTRUMENTED = 'NO' "
    "WHERE PROCESSLIST_ID = CONNECTION_ID()"
)
PS_ON = (
    "SELECT @@global.performance_schema AS ps, (SELECT VARIABLE_VALUE FROM "
    "information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME') AS uptime"
)
WAITS_SQL = (
    "SELECT EVENT_NAME, COUNT_STAR, SUM_TIMER_WAIT "
    "FROM performance_schema.events_waits_summary_global_by_event_name WHERE COUNT_STAR > 0"
)
DIGESTS_SQL = (
    "SELECT SCHEMA_NAME, DIGEST, DIGEST_TEXT, COUNT_STAR, SUM_TIMER_WAIT, SUM_ROWS_EXAMINED, "
    "SUM_ROWS_SENT FROM performance_schema.events_statements_summary_by_digest"
)
# MariaDB gives prepared statements' executions no digest: their time is one row here,
# put beside the digests so that it is seen (sysbench's default; --db-ps-mode=disable).
EXECUTE = "statement/com/Execute"
EXECUTE_SQL = (
    "SELECT NULL AS SCHEMA_NAME, EVENT_NAME AS DIGEST, "
    "'(prepared statements: MariaDB gives their executions no digest)' AS DIGEST_TEXT, "
    "COUNT_STAR, SUM_TIMER_WAIT, SUM_ROWS_EXAMINED, SUM_ROWS_SENT "
    "FROM performance_schema.events_statements_summary_global_by_event_name "
    f"WHERE EVENT_NAME = '{EXECUTE}'"
)
METRICS_SQL = "SELECT NAME, SUBSYSTEM, TYPE, COUNT FROM information_schema.INNODB_METRICS"
STATUS_SQL = "SHOW ENGINE INNODB STATUS"

Rows = list[dict[str, Any]]


@dataclass
class Snapshot:
    """The three tables' rows at one moment (a part that could not be read is None)."""

    waits: Rows | None = None
    digests: Rows | None = None
    metrics: Rows | None = None
    uptime: float | None = None


@dataclass(frozen=True)
class WaitDelta:
    event: str
    count: int
    wait_ms: float


def wait_deltas(start: Rows, end: Rows) -> list[WaitDelta]:
    """Each wait event's waits and time between the two snapshots (``idle`` and events
    that did not wait left out), most time first."""
    before = {str(r["EVENT_NAME"]): r for r in start}
    out = []
    for row in end:
        name = str(row["EVENT_NAME"])
        if name == "idle":
            continue
        old = before.get(name, {})
        count = int(row["COUNT_STAR"]) - int(old.get("COUNT_STAR", 0))
        pico = int(row["SUM_TIMER_WAIT"] or 0) - int(old.get("SUM_TIMER_WAIT") or 0)
        if count > 0:
            out.append(WaitDelta(name, count, pico / PICO_PER_MS))
    return sorted(out, key=lambda d: (-d.wait_ms, -d.count, d.event))


@dataclass(frozen=True)
class DigestDelta:
    schema: str
    digest: str
    count: int
    total_ms: float
    rows_examined: int
    rows_sent: int
    text: str

    @property
    def mean_us(self) -> float:
        return 1000 * self.total_ms / self.count if self.count else 0.0


def _digest_key(row: Mapping[str, Any]) -> tuple[str, str]:
    return (str(row["SCHEMA_NAME"] or ""), str(row["DIGEST"] or ""))


def digest_deltas(start: Rows, end: Rows, top: int) -> list[DigestDelta]:
    """The ``top`` statements by total time between the two snapshots."""
    before = {_digest_key(r): r for r in start}
    out = []
    for row in end:
        old = before.get(_digest_key(row), {})

        def grew(column: str, row: Mapping[str, Any] = row, old: Mapping[str, Any] = old) -> int:
            return int(row[column] or 0) - int(old.get(column) or 0)

        if (count := grew("COUNT_STAR")) > 0:
            schema, digest = _digest_key(row)
            out.append(
                DigestDelta(
                    schema,
                    digest,
                    count,
                    grew("SUM_TIMER_WAIT") / PICO_PER_MS,
                    grew("SUM_ROWS_EXAMINED"),
                    grew("SUM_ROWS_SENT"),
                    " ".join(str(row["DIGEST_TEXT"] or "").split()),
                )
            )
    return sorted(out, key=lambda d: (-d.total_ms, d.digest))[:top]


@dataclass(frozen=True)
class MetricDelta:
    name: str
    subsystem: str
    type: str
    start: int
    end: int

    @property
    def delta(self) -> int:
        return self.end - self.start


def metric_deltas(start: Rows, end: Rows) -> list[MetricDelta]:
    """Every InnoDB counter at both ends of the window, in the server's order."""
    before = {str(r["NAME"]): int(r["COUNT"] or 0) for r in start}
    return [
        MetricDelta(
            str(r["NAME"]),
            str(r["SUBSYSTEM"]),
            str(r["TYPE"]),
            before.get(str(r["NAME"]), 0),
            int(r["COUNT"] or 0),
        )
        for r in end
    ]


def _csv(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def waits_csv(deltas: Iterable[WaitDelta]) -> str:
    return _csv(
        ("event", "count", "wait_ms"), ((d.event, d.count, f"{d.wait_ms:.3f}") for d in deltas)
    )


def digests_csv(deltas: Iterable[DigestDelta]) -> str:
    header = (
        "schema",
        "digest",
        "count",
        "total_ms",
        "mean_us",
        "rows_examined",
        "rows_sent",
        "text",
    )
    return _csv(header, (_digest_row(d) for d in deltas))


def _digest_row(d: DigestDelta) -> list[Any]:
    timing = [d.count, f"{d.total_ms:.3f}", f"{d.mean_us:.1f}"]
    return [d.schema, d.digest, *timing, d.rows_examined, d.rows_sent, d.text]


def metrics_csv(deltas: Iterable[MetricDelta]) -> str:
    header = ("name", "subsystem", "type", "start", "end", "delta")
    return _csv(header, ((d.name, d.subsystem, d.type, d.start, d.end, d.delta) for d in deltas))


# --- talking to the server -------------------------------------------------------------------


def unmeasured(connect: Callable[[], Any]) -> Callable[[], Any]:
    """``connect``, whose connections performance_schema leaves out: dbrig's other
    samplers (SHOW GLOBAL STATUS every second) would else be among the trial's
    statements and waits. A server that refuses (no UPDATE on performance_schema)
    still gives the connection."""

    def connect_unmeasured() -> Any:
        conn = connect()
        with contextlib.suppress(Exception):
            query(conn, NOT_ME)
        return conn

    return connect_unmeasured


def query(conn: Any, sql: str) -> Rows:
    """A statement's rows as dicts keyed by column name (upper-cased)."""
    with conn.cursor() as cur:
        cur.execute(sql)
        if cur.description is None:
            return []
        names = [str(d[0]).upper() for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _why(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    if len(args) == 2 and isinstance(args[0], int):  # pymysql: (errno, message)
        return f"({args[0]}) {args[1]}"
    return " ".join(str(exc).split()) or type(exc).__name__


@dataclass
class _Reader:
    """Reads the parts it can; each part it cannot is one line in ``problems``."""

    conn: Any
    problems: list[str] = field(default_factory=list)

    def rows(self, sql: str, what: str, hint: str) -> Rows | None:
        try:
            return query(self.conn, sql)
        except Exception as exc:
            self.problems.append(f"{WARNING_PREFIX}could not read {what}: {_why(exc)} ({hint})")
            return None

    def run(self, sql: str, what: str, hint: str) -> bool:
        try:
            query(self.conn, sql)
            return True
        except Exception as exc:
            self.problems.append(f"{WARNING_PREFIX}could not {what}: {_why(exc)} ({hint})")
            return False


PS_HINT = "grant the account SELECT on performance_schema.*"
PS_UPDATE_HINT = "grant the account SELECT, UPDATE on performance_schema.*"
PROCESS_HINT = "grant the account PROCESS"
SUPER_HINT = "the account needs SUPER (or SYSTEM VARIABLES ADMIN) for SET GLOBAL"
PS_OFF = (
    f"{WARNING_PREFIX}performance_schema is OFF on the server: no wait events or statement "
    "digests, INNODB_METRICS only (turn it on with server.config.performance_schema: ON, "
    "or performance_schema=ON in an external server's my.cnf, and restart it)"
)


def _digests(reader: _Reader) -> Rows | None:
    rows = reader.rows(DIGESTS_SQL, "performance_schema's statement digests", PS_HINT)
    if rows is None:
        return None
    return rows + (reader.rows(EXECUTE_SQL, "performance_schema's statements", PS_HINT) or [])


def snapshot(reader: _Reader, ps_on: bool) -> Snapshot:
    """The three tables now (performance_schema's only when it is on)."""
    found = Snapshot()
    if ps_on:
        found.waits = reader.rows(WAITS_SQL, "performance_schema's wait events", PS_HINT)
        found.digests = _digests(reader)
    found.metrics = reader.rows(METRICS_SQL, "information_schema.INNODB_METRICS", PROCESS_HINT)
    return found


class InternalsSampler:
    """One connection, a thread that waits for the measured window to start and takes the
    first snapshot, and the second one (and the files) when stopped.

    A part the server will not give (privileges, performance_schema off, a lost
    connection) is a line of internals.out, never a silent empty file: the trial is
    still measured (its ``error`` stays None)."""

    error: str | None = None
    failure: BaseException | None = None

    def __init__(
        self, folder: Path, timing: SampleTiming, connect: Callable[[], Any], digests: int
    ) -> None:
        self._folder, self._timing, self._connect, self._top = folder, timing, connect, digests
        self._stopping = threading.Event()
        self._problems: list[str] = []
        self._start: Snapshot | None = None
        self._conn: Any = None
        self._ps_on = False
        self._started_at = 0.0  # the clock after the first snapshot's uptime was read
        self._thread = threading.Thread(target=self._window, name="internals sampler", daemon=True)

    def start(self) -> None:
        try:
            self._conn = self._connect()
        except Exception as exc:
            self._problems.append(f"{WARNING_PREFIX}could not connect: {_why(exc)}")
            return
        reader = _Reader(self._conn, self._problems)
        state = reader.rows(PS_ON, "@@performance_schema", "")
        self._ps_on = bool(state) and str(state[0]["PS"]) in ("1", "ON")
        if state and not self._ps_on:
            self._problems.append(PS_OFF)
        reader.run(ENABLE[0], "enable every InnoDB counter", SUPER_HINT)
        if self._ps_on:
            reader.run(ENABLE[1], "enable performance_schema's wait instruments", PS_UPDATE_HINT)
            reader.run(NOT_ME, "leave dbrig's own connection out", PS_UPDATE_HINT)
        self._thread.start()

    def _window(self) -> None:
        if self._stopping.wait(max(0.0, self._timing.t0 - self._timing.clock())):
            return  # the trial ended during its warm-up
        reader = _Reader(self._conn, self._problems)
        self._start = snapshot(reader, self._ps_on)
        self._start.uptime = _uptime(reader)
        self._started_at = self._timing.clock()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.ident is not None:  # started
            self._thread.join()
        try:
            self._write()
        finally:
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
        write_text_atomic(self._folder / OUT, "".join(f"{p}\n" for p in self._problems))

    def _write(self) -> None:
        if self._conn is None:
            return
        if self._start is None:
            self._problems.append(
                f"{WARNING_PREFIX}the workload ended before its warm-up did: nothing measured"
            )
            return
        self._reconnect()
        reader = _Reader(self._conn, self._problems)
        elapsed = self._timing.clock() - self._started_at
        uptime = _uptime(reader)
        if None not in (uptime, self._start.uptime) and restarted(
            self._start.uptime, uptime, elapsed
        ):
            self._problems.append(
                f"{WARNING_PREFIX}the server restarted during the window: its counters started "
                "again, no deltas"
            )
            return
        end = Snapshot(
            digests=None if self._start.digests is None else _digests(reader),
        )
        end.waits = self._end_rows(reader, self._start.waits, WAITS_SQL, "wait events", PS_HINT)
        end.metrics = self._end_rows(
            reader, self._start.metrics, METRICS_SQL, "INNODB_METRICS", PROCESS_HINT
        )
        status = reader.rows(STATUS_SQL, "SHOW ENGINE INNODB STATUS", PROCESS_HINT)
        write_files(self._folder, self._start, end, status, self._top)

    def _reconnect(self) -> None:
        """A connection a fault broke is opened again (and left out of performance_schema
        again); the uptime then tells whether the server restarted."""
        try:
            self._conn.ping(False)
            return
        except Exception:
            with contextlib.suppress(Exception):
                self._conn.close()
        with contextlib.suppress(Exception):
            self._conn = self._connect()
            if self._ps_on:
                query(self._conn, NOT_ME)

    @staticmethod
    def _end_rows(reader: _Reader, had: Rows | None, sql: str, what: str, hint: str) -> Rows | None:
        return None if had is None else reader.rows(sql, what, hint)


def restarted(start_uptime_s: float, end_uptime_s: float, elapsed_s: float) -> bool:
    """Whether the server started again between two reads of its uptime taken at least
    ``elapsed_s`` apart: its counters then began again, and the deltas mean nothing.

    Uptime is the difference of two whole-second clocks, so one server's two reads
    differ by more than ``elapsed_s - 1``; a server killed after at least two seconds
    up, and restarted, always falls short of that."""
    return end_uptime_s - start_uptime_s <= elapsed_s - 1


def _uptime(reader: _Reader) -> float | None:
    state = reader.rows(PS_ON, "the server's uptime", "")
    return float(state[0]["UPTIME"]) if state else None


def write_files(
    folder: Path, start: Snapshot, end: Snapshot, status: Rows | None, top: int
) -> None:
    """The deltas of every part read at both ends, and the status text."""
    if start.waits is not None and end.waits is not None:
        write_text_atomic(folder / WAITS, waits_csv(wait_deltas(start.waits, end.waits)))
    if start.digests is not None and end.digests is not None:
        deltas = digest_deltas(start.digests, end.digests, top)
        write_text_atomic(folder / DIGESTS, digests_csv(deltas))
    if start.metrics is not None and end.metrics is not None:
        write_text_atomic(
            folder / INNODB_METRICS, metrics_csv(metric_deltas(start.metrics, end.metrics))
        )
    if status:
        write_text_atomic(folder / INNODB_STATUS, str(status[0].get("STATUS", "")))


def read_waits(path: Path) -> list[WaitDelta]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [
            WaitDelta(r["event"], int(r["count"]), float(r["wait_ms"])) for r in csv.DictReader(f)
        ]


def read_digests(path: Path) -> list[DigestDelta]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [
            DigestDelta(
                r["schema"],
                r["digest"],
                int(r["count"]),
                float(r["total_ms"]),
                int(r["rows_examined"]),
                int(r["rows_sent"]),
                r["text"],
            )
            for r in csv.DictReader(f)
        ]


def finish(folder: Path) -> ProfileOutcome:
    """The trial's ``server_wait_s`` (every timed wait in the window but condition waits,
    summed over threads) and its internals warnings."""
    out = folder / OUT
    warnings = tuple(out.read_text().splitlines()) if out.exists() else ()
    waits = folder / WAITS
    if not waits.exists():
        return ProfileOutcome({}, warnings)
    total_ms = sum(d.wait_ms for d in read_waits(waits) if not d.event.startswith(CONDITION))
    return ProfileOutcome({"server_wait_s": total_ms / 1000}, warnings)
