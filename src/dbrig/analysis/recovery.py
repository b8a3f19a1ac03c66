"""How a server recovered from a fault: its crash-recovery log, and the workload's throughput.

Pure functions over text and numbers; :mod:`dbrig.run.faults` feeds them the
error log written since the restart and the workload's interval series.

**Crash recovery** (:func:`parse_recovery_log`): the InnoDB lines of one server
start, read from MariaDB's error log (``2026-11-24  1:07:42 0 [Note] InnoDB: ...``,
one-second timestamps) and MySQL's (ISO timestamps, ``[InnoDB]`` tags). What it
finds:

- ``crash_recovery``: the start recovered from a crash (``Starting crash recovery``);
  a clean start after a shutdown has none of the lines below;
- ``redo_bytes``: how much redo the scan read (end-of-log LSN minus checkpoint LSN);
- ``pages_to_recover``: pages the redo apply touched (``To recover: N pages``);
- ``trx_to_roll_back`` and ``rows_to_undo``: the transactions left incomplete by
  the crash (``N transaction(s) which must be rolled back ... M row operations``);
- timestamps of the phases: ``recovery_start`` (the redo scan begins), ``redo_done``
  (the last redo line: apply finished), ``rollback_start`` / ``rollback_done`` (the
  background rollback of incomplete transactions) and ``ready`` (ready for
  connections). The log's timestamps have one-second resolution, so so do the
  phase lengths :func:`recovery_phases` derives from them.

**The window's throughput with the fault** (:func:`window_rate`): the events the
tool's own summaries counted (one per client run) over the measured window.

**Throughput recovery** (:func:`throughput_recovery`): the pre-fault level is the
mean rate of the intervals that ended before the fault; the throughput is back
when an interval that started at or after the fault's end (a freeze or a full
disk lasts; a kill ends when it is sent) reaches ``fraction`` (90 %) of it. Its
resolution is the workload's report interval.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

RECOVERED_FRACTION = 0.9

_MARIADB_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2})\s+(\d{1,2}:\d{2}:\d{2})\s")
_MYSQL_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2}(?:\.\d+)?)")

# (phase, pattern): the first match of a phase stamps its start, later ones move
# "redo_done" forward (the last redo line).
_PHASES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("recovery_start", re.compile(r"Starting crash recovery")),
    ("redo_done", re.compile(r"End of log at LSN|To recover: \d+ pages|Apply batch completed")),
    ("rollback_start", re.compile(r"Starting in background the rollback")),
    ("rollback_done", re.compile(r"Rollback of non-prepared transactions completed")),
    ("ready", re.compile(r"ready for connections")),
)
_CHECKPOINT_LSN = re.compile(r"crash recovery from checkpoint LSN=(\d+)")
_END_LSN = re.compile(r"End of log at LSN=(\d+)")
_PAGES = re.compile(r"To recover: (\d+) pages")
_TO_ROLL_BACK = re.compile(
    r"(\d+) transaction\(s\) which must be rolled back or cleaned up in total (\d+) row"
)


@dataclass(frozen=True)
class RecoveryLog:
    """What one server start's error log says about its crash recovery."""

    crash_recovery: bool = False
    redo_bytes: int | None = None
    pages_to_recover: int | None = None
    trx_to_roll_back: int = 0
    rows_to_undo: int = 0
    stamps: dict[str, dt.datetime] = field(default_factory=dict)  # phase -> when


def _stamp(line: str) -> dt.datetime | None:
    for pattern, fmt in ((_MARIADB_STAMP, "%Y-%m-%d %H:%M:%S"), (_MYSQL_STAMP, None)):
        found = pattern.match(line)
        if found is None:
            continue
        if fmt is None:
            return dt.datetime.fromisoformat(f"{found.group(1)}T{found.group(2)}")
        return dt.datetime.strptime(f"{found.group(1)} {found.group(2)}", fmt)
    return None


def parse_recovery_log(text: str) -> RecoveryLog:
    """The crash-recovery facts of one server start (its part of the error log)."""
    stamps: dict[str, dt.datetime] = {}
    numbers: dict[str, int] = {}
    for line in text.splitlines():
        when = _stamp(line)
        if when is None:
            continue
        for phase, pattern in _PHASES:
            if pattern.search(line) and (phase == "redo_done" or phase not in stamps):
                stamps[phase] = when
        for name, pattern in (("checkpoint", _CHECKPOINT_LSN), ("end", _END_LSN)):
            if found := pattern.search(line):
                numbers[name] = int(found.group(1))
        if found := _PAGES.search(line):
            numbers["pages"] = numbers.get("pages", 0) + int(found.group(1))
        if found := _TO_ROLL_BACK.search(line):
            numbers["trx"], numbers["rows"] = int(found.group(1)), int(found.group(2))
    crashed = "recovery_start" in stamps
    if not crashed:  # a clean start also prints "End of log": no redo was applied
        stamps.pop("redo_done", None)
    redo = None
    if crashed and "checkpoint" in numbers and "end" in numbers:
        redo = numbers["end"] - numbers["checkpoint"]
    return RecoveryLog(
        crash_recovery=crashed,
        redo_bytes=redo,
        pages_to_recover=numbers.get("pages") if crashed else None,
        trx_to_roll_back=numbers.get("trx", 0),
        rows_to_undo=numbers.get("rows", 0),
        stamps=stamps,
    )


def recovery_phases(log: RecoveryLog) -> dict[str, float]:
    """Seconds of each phase found (whole seconds on MariaDB):

    ``innodb_recovery_s`` (crash recovery began -> ready for connections),
    ``innodb_redo_s`` (began -> last redo line: scan and apply) and
    ``innodb_rollback_s`` (background rollback of incomplete transactions).
    """
    s = log.stamps
    out: dict[str, float] = {}
    for name, start, end in (
        ("innodb_recovery_s", "recovery_start", "ready"),
        ("innodb_redo_s", "recovery_start", "redo_done"),
        ("innodb_rollback_s", "rollback_start", "rollback_done"),
    ):
        if start in s and end in s:
            out[name] = max(0.0, (s[end] - s[start]).total_seconds())
    return out


def recovery_metrics(log: RecoveryLog) -> dict[str, float]:
    """The per-trial metrics of one crash recovery (nothing for a clean start)."""
    if not log.crash_recovery:
        return {}
    out = recovery_phases(log)
    if log.redo_bytes is not None:
        out["innodb_redo_mb"] = log.redo_bytes / 2**20
    if log.pages_to_recover is not None:
        out["innodb_pages_recovered"] = float(log.pages_to_recover)
    out["innodb_trx_rolled_back"] = float(log.trx_to_roll_back)
    return out


@dataclass(frozen=True)
class ThroughputRecovery:
    """The workload's throughput around a fault, on the measured window's clock (s)."""

    baseline: float | None  # mean rate before the fault; None without a full interval
    recovered_at_s: float | None  # end of the first interval back at the fraction
    errors: float  # client errors counted from the fault until then (or the end)

    def recovered_after(self, fault_s: float) -> float | None:
        return None if self.recovered_at_s is None else self.recovered_at_s - fault_s


def throughput_recovery(
    ends_s: Sequence[float],
    rates: Sequence[float],
    fault_s: float,
    *,
    interval_s: float,
    errors_per_s: Sequence[float] | None = None,
    fraction: float = RECOVERED_FRACTION,
    fault_end_s: float | None = None,
) -> ThroughputRecovery:
    """When the throughput came back to ``fraction`` of its pre-fault level.

    ``ends_s[i]`` is where interval i (of ``interval_s`` seconds) ends and ``rates[i]``
    its throughput; intervals missing (the client was not running) count as nothing.
    Intervals ending at or before 0 (the warm-up) are ignored. A fault that lasts (a
    freeze, a full disk) ends at ``fault_end_s``: only intervals that start after it
    count as recovered, however little the fault slowed the ones before.
    """
    rows = [(e, r) for e, r in zip(ends_s, rates, strict=True) if e > 0 and _finite(r)]
    before = [r for e, r in rows if e <= fault_s]
    baseline = sum(before) / len(before) if before else None
    recovered = None
    if baseline is not None:
        target = fraction * baseline
        after = max(fault_s, fault_end_s or fault_s)
        recovered = next((e for e, r in rows if e - interval_s >= after and r >= target), None)
    errors = 0.0
    if errors_per_s is not None:
        until = recovered if recovered is not None else math.inf
        for end, rate in zip(ends_s, errors_per_s, strict=True):
            if end > fault_s and end - interval_s < until and _finite(rate):
                errors += rate * interval_s
    return ThroughputRecovery(baseline=baseline, recovered_at_s=recovered, errors=errors)


@dataclass(frozen=True)
class ClientRun:
    """One run of the workload's client inside the measured window, as its tool counted it.

    ``total``: the events (transactions) its own final summary counted over its measured
    window; None when it printed none (a run the fault killed). ``from_intervals``: the
    events its measured progress lines account for (rate x interval length), used only
    without a summary: up to its last line, which is all that run left.
    """

    total: float | None
    from_intervals: float = 0.0

    @property
    def events(self) -> float:
        return self.total if self.total is not None else self.from_intervals


# The tool's count behind each rate the fault window is measured in (metric names).
RATE_COUNTS: dict[str, str] = {"tps": "transactions", "events_per_s": "events"}


def client_run(
    summary: Mapping[str, float],
    measured_rates: Sequence[float],
    *,
    interval_s: float,
    rate: str = "tps",
) -> ClientRun:
    """A :class:`ClientRun` from a tool's parsed output: ``summary`` is its metrics (the
    final summary's counts, e.g. ``transactions``), ``measured_rates`` its measured
    interval rates (after the warm-up)."""
    count = summary.get(RATE_COUNTS.get(rate, ""))
    total = float(count) if count is not None and _finite(float(count)) else None
    lines = sum(r * interval_s for r in measured_rates if _finite(r))
    return ClientRun(total=total, from_intervals=lines)


def window_rate(runs: Sequence[ClientRun], window_s: float) -> float | None:
    """The rate over a whole measured window from the tool's own counters: the events
    every client run completed in it, divided by the window (the outage counts as time
    with no events). A client that rode through the fault is one run with one summary;
    one started again is two (the first, killed, without a summary: its progress lines
    stand in). Unlike the progress lines alone, a second without one (sysbench
    prints none for the window's last second, nor while a server is gone) or a line
    printed twice changes nothing: the summary counts every event once."""
    if window_s <= 0 or not runs:
        return None
    return sum(run.events for run in runs) / window_s


def _finite(value: float | None) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))
