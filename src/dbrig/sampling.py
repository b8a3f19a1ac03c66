"""Host and server sampling while a cell runs, and the per-cell summary of it.

Two background threads sample on one clock while a cell runs (warm-up, then the
measured window): :class:`HostSampler` reads the host through psutil and
:class:`StatusSampler` reads ``SHOW GLOBAL STATUS`` through a function the
runner gives it. Each appends rows to CSV files in the cell directory as they
are taken (append, write, flush), so a crash keeps what was sampled.
:func:`summarize_cell` turns those files into per-cell means.

Timing
------
``t0`` is the monotonic time the measured window starts. Samples are taken on a
fixed grid ``t0 + k * interval`` (k may be negative during warm-up), so drift
does not accumulate and one tick falls on ``t0`` itself; the first sample is a
baseline taken at ``start()`` and writes no row (rates need two samples). The
next grid point is always at least half an interval away, except ``t0``, which
is never skipped. If a tick overruns, the missed grid points are skipped.
``stop()`` takes a last sample when at least a quarter of an interval has passed
since the previous one, so the tail of the window is not lost.

Every row describes the interval since the previous sample and starts with:

============  =================================================================
t_s           seconds, ``clock() - t0`` when the sample was taken (negative
              during warm-up)
phase         ``warmup`` or ``measure``: ``measure`` when the interval started
              at or after ``t0`` (by the schedule, so the row ending on the
              ``t0`` tick is still ``warmup``)
interval_s    seconds since the previous sample: the span the rates cover
============  =================================================================

Units: ``MB`` means MiB (2**20 bytes) everywhere, as in ``free -m`` and
``iostat -m``; ``_pct`` is a percentage; ``_per_s`` is a rate over the interval.
An empty value means "not known" (no previous value, a counter that went
backwards, a field this platform does not report).

cpu.csv (one row per core, from ``psutil.cpu_times(percpu=True)``)
--------------------------------------------------------------------
============  =================================================================
core          int, the core number (0-based)
user_pct      % of the core's time in user mode (includes guest time on Linux)
nice_pct      % in user mode at a positive nice value
system_pct    % in kernel mode
iowait_pct    % idle while waiting for I/O
irq_pct       % servicing hardware interrupts
softirq_pct   % servicing software interrupts
steal_pct     % taken by the hypervisor for other guests
idle_pct      % idle
busy_pct      100 - idle_pct - iowait_pct
============  =================================================================

Percentages are shares of the core's total time over the interval (guest and
guest_nice are not added again: Linux already counts them in user and nice).
A field that goes backwards counts as 0, as in psutil.

disk.csv (one row per device, from ``psutil.disk_io_counters(perdisk=True)``)
-------------------------------------------------------------------------------
==============  ===============================================================
device          the kernel's name, e.g. ``vda``
reads_per_s     completed reads per second
writes_per_s    completed writes per second
read_mb_per_s   MiB read per second
write_mb_per_s  MiB written per second
await_ms        milliseconds per completed I/O: delta(read_time + write_time) /
                delta(reads + writes), like iostat's await; empty with no I/O
util_pct        % of the interval the device was busy (delta busy_time), capped
                at 100; empty where psutil has no busy_time (non-Linux)
==============  ===============================================================

``devices=None`` records every whole block device listed in ``/sys/block``
(partitions are left out: they would count their disk's I/O twice; stacked
devices such as ``dm-0`` over ``vda`` still do). Pass the datadir's device.

memory.csv (one row per sample)
-------------------------------
==================  ===========================================================
used_mb             MiB used (psutil ``virtual_memory().used``)
cached_mb           MiB of page cache (psutil ``cached``)
available_mb        MiB available without swapping
swap_used_mb        MiB of swap in use
swap_in_mb_per_s    MiB per second swapped in (psutil ``swap_memory().sin``,
                    cumulative bytes)
swap_out_mb_per_s   MiB per second swapped out (``sout``)
==================  ===========================================================

procs.csv (one row per role, when the runner gives ``processes``)
------------------------------------------------------------------
==================  ===========================================================
role                the runner's name for the group (``server``, ``workload``,
                    ``stress-ng``)
pids                int, processes in the group now: the listed pids and all
                    their descendants
cpu_pct             user + system CPU of the group over the interval, 100 = one
                    full core
rss_mb              MiB resident, summed over the group
ctx_switches_per_s  voluntary + involuntary context switches per second
read_mb_per_s       MiB per second read from storage (``io_counters().read_bytes``);
                    empty if a process's counters are unreadable
write_mb_per_s      MiB per second written to storage (``write_bytes``)
==================  ===========================================================

Processes are identified by (pid, create time), so a reused pid is a new
process. A process seen for the first time contributes to ``pids`` and
``rss_mb`` but not to the rates of that row (like psutil's first
``cpu_percent()`` call); one that vanishes is dropped without error. CPU of a
child that exits between two samples is lost for its last interval.

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

sampler.csv (one row per sample per sampler: the samplers' own cost)
--------------------------------------------------------------------
========  =====================================================================
sampler   ``host`` or ``status``
cpu_s     CPU seconds the sampler thread used since its previous sample
          (``time.thread_time()``)
cpu_pct   cpu_s / interval_s * 100: share of one core
========  =====================================================================

Files are appended to; give each cell its own directory.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple, Self

import pandas as pd
import psutil

MIB = 1024 * 1024
WARMUP = "warmup"
MEASURE = "measure"
FINAL_SAMPLE_MIN = 0.25  # of an interval: a shorter tail is not worth a noisy row
DEFAULT_STOP_TIMEOUT_S = 5.0

STAMP_COLUMNS = ("t_s", "phase", "interval_s")
CPU_FIELDS = ("user", "nice", "system", "iowait", "irq", "softirq", "steal", "idle")
CPU_PCT_COLUMNS = (*(f"{name}_pct" for name in CPU_FIELDS), "busy_pct")
CPU_COLUMNS = (*STAMP_COLUMNS, "core", *CPU_PCT_COLUMNS)
DISK_VALUE_COLUMNS = (
    "reads_per_s",
    "writes_per_s",
    "read_mb_per_s",
    "write_mb_per_s",
    "await_ms",
    "util_pct",
)
DISK_COLUMNS = (*STAMP_COLUMNS, "device", *DISK_VALUE_COLUMNS)
MEMORY_VALUE_COLUMNS = (
    "used_mb",
    "cached_mb",
    "available_mb",
    "swap_used_mb",
    "swap_in_mb_per_s",
    "swap_out_mb_per_s",
)
MEMORY_COLUMNS = (*STAMP_COLUMNS, *MEMORY_VALUE_COLUMNS)
PROCS_VALUE_COLUMNS = (
    "pids",
    "cpu_pct",
    "rss_mb",
    "ctx_switches_per_s",
    "read_mb_per_s",
    "write_mb_per_s",
)
PROCS_COLUMNS = (*STAMP_COLUMNS, "role", *PROCS_VALUE_COLUMNS)
SAMPLER_COLUMNS = (*STAMP_COLUMNS, "sampler", "cpu_s", "cpu_pct")

# Linux counts guest time inside user and nice already (psutil does the same).
_GUEST_FIELDS = frozenset({"guest", "guest_nice"})

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

# Summary keys use these prefixes for the runner's role names; others are sanitised.
ROLE_KEYS = {"stress-ng": "stress"}

_WRITE_LOCK = threading.Lock()  # sampler.csv is shared by both threads


# --- timing -----------------------------------------------------------------------------------


def phase_for(interval_start_s: float) -> str:
    """The phase of a row whose interval started ``interval_start_s`` seconds after t0."""
    return MEASURE if interval_start_s >= 0 else WARMUP


def next_tick_s(now_s: float, interval: float) -> float:
    """The next grid point ``k * interval`` (seconds after t0) to sample at.

    It is at least half an interval after ``now_s`` (a shorter interval gives noisy
    rates), except that t0 itself (0.0) is never skipped: it separates the phases.
    """
    k = math.floor(now_s / interval + 0.5) + 1
    tick = k * interval
    if now_s < 0 < tick:
        return 0.0
    return tick


# --- pure delta functions ---------------------------------------------------------------------


def _fields(snapshot: Any) -> dict[str, Any]:
    """A psutil namedtuple or a plain mapping, as a dict."""
    if hasattr(snapshot, "_asdict"):
        return snapshot._asdict()
    return dict(snapshot)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _delta(before: Any, after: Any) -> float | None:
    """after - before for a cumulative counter; None if unknown or it went backwards."""
    b, a = _number(before), _number(after)
    if b is None or a is None or a < b:
        return None
    return a - b


def _per_s(delta: float | None, elapsed_s: float, scale: float = 1.0) -> float | None:
    if delta is None or elapsed_s <= 0:
        return None
    return delta / elapsed_s / scale


def _mib(value: Any) -> float | None:
    number = _number(value)
    return None if number is None else number / MIB


def cpu_percentages(before: Any, after: Any) -> dict[str, float | None]:
    """One core's time shares over an interval, from two ``scputimes`` (or dicts)."""
    b, a = _fields(before), _fields(after)
    deltas = {
        name: max(0.0, float(a[name]) - float(b.get(name, 0.0)))
        for name in a
        if name not in _GUEST_FIELDS
    }
    total = sum(deltas.values())
    if total <= 0:
        return dict.fromkeys(CPU_PCT_COLUMNS)
    shares: dict[str, float | None] = {
        f"{name}_pct": 100.0 * deltas.get(name, 0.0) / total for name in CPU_FIELDS
    }
    shares["busy_pct"] = max(0.0, 100.0 - shares["idle_pct"] - shares["iowait_pct"])
    return shares


def cpu_rows(before: Sequence[Any], after: Sequence[Any]) -> list[dict[str, Any]]:
    """Per-core rows from two ``psutil.cpu_times(percpu=True)`` lists."""
    return [
        {"core": core, **cpu_percentages(b, a)}
        for core, (b, a) in enumerate(zip(before, after, strict=False))
    ]


def disk_values(before: Any, after: Any, elapsed_s: float) -> dict[str, float | None]:
    """One device's rates over an interval, from two ``sdiskio`` (or dicts)."""
    b, a = _fields(before), _fields(after)

    def change(name: str) -> float | None:
        return _delta(b.get(name), a.get(name))

    reads, writes = change("read_count"), change("write_count")
    read_ms, write_ms = change("read_time"), change("write_time")
    busy_ms = change("busy_time")
    ios = None if reads is None or writes is None else reads + writes
    await_ms = None
    if ios and read_ms is not None and write_ms is not None:
        await_ms = (read_ms + write_ms) / ios
    util = _per_s(busy_ms, elapsed_s, scale=1000.0)
    return {
        "reads_per_s": _per_s(reads, elapsed_s),
        "writes_per_s": _per_s(writes, elapsed_s),
        "read_mb_per_s": _per_s(change("read_bytes"), elapsed_s, scale=MIB),
        "write_mb_per_s": _per_s(change("write_bytes"), elapsed_s, scale=MIB),
        "await_ms": await_ms,
        "util_pct": None if util is None else min(100.0, 100.0 * util),
    }


def disk_rows(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    elapsed_s: float,
    devices: Collection[str] | None = None,
) -> list[dict[str, Any]]:
    """Per-device rows from two ``psutil.disk_io_counters(perdisk=True)`` dicts.

    Only devices in both snapshots and in ``devices`` (None = all) get a row.
    """
    return [
        {"device": name, **disk_values(before[name], counters, elapsed_s)}
        for name, counters in after.items()
        if name in before and (devices is None or name in devices)
    ]


def memory_row(
    virtual: Any, swap_before: Any, swap_after: Any, elapsed_s: float
) -> dict[str, float | None]:
    """Memory and swap from ``virtual_memory()`` and two ``swap_memory()`` snapshots."""
    vm, sb, sa = _fields(virtual), _fields(swap_before), _fields(swap_after)
    return {
        "used_mb": _mib(vm.get("used")),
        "cached_mb": _mib(vm.get("cached")),
        "available_mb": _mib(vm.get("available")),
        "swap_used_mb": _mib(sa.get("used")),
        "swap_in_mb_per_s": _per_s(_delta(sb.get("sin"), sa.get("sin")), elapsed_s, MIB),
        "swap_out_mb_per_s": _per_s(_delta(sb.get("sout"), sa.get("sout")), elapsed_s, MIB),
    }


ProcKey = tuple[int, float]  # (pid, create_time): a reused pid is another process


class ProcSample(NamedTuple):
    """What one process had used so far, at one sample."""

    cpu_s: float  # user + system
    rss_bytes: int
    ctx_switches: int  # voluntary + involuntary
    read_bytes: int | None  # None where io_counters() is not readable
    write_bytes: int | None


ProcSnapshot = Mapping[str, Mapping[ProcKey, ProcSample]]  # role -> processes


def _io_delta(
    before: Mapping[ProcKey, ProcSample],
    after: Mapping[ProcKey, ProcSample],
    keys: Iterable[ProcKey],
    field: str,
) -> float | None:
    total = 0.0
    for key in keys:
        change = _delta(getattr(before[key], field), getattr(after[key], field))
        if change is None:
            return None  # a partial sum would understate the group
        total += change
    return total


def proc_rows(before: ProcSnapshot, after: ProcSnapshot, elapsed_s: float) -> list[dict[str, Any]]:
    """One row per role of ``after``; rates count processes present in both snapshots."""
    rows = []
    for role, now in after.items():
        prev = before.get(role, {})
        common = [key for key in now if key in prev]
        cpu_s = sum(max(0.0, now[k].cpu_s - prev[k].cpu_s) for k in common)
        switches = sum(max(0, now[k].ctx_switches - prev[k].ctx_switches) for k in common)
        cpu_per_s = _per_s(cpu_s, elapsed_s)
        rows.append(
            {
                "role": role,
                "pids": len(now),
                "cpu_pct": None if cpu_per_s is None else 100.0 * cpu_per_s,
                "rss_mb": sum(sample.rss_bytes for sample in now.values()) / MIB,
                "ctx_switches_per_s": _per_s(switches, elapsed_s),
                "read_mb_per_s": _per_s(_io_delta(prev, now, common, "read_bytes"), elapsed_s, MIB),
                "write_mb_per_s": _per_s(
                    _io_delta(prev, now, common, "write_bytes"), elapsed_s, MIB
                ),
            }
        )
    return rows


def descendants(roots: Iterable[int], parent_of: Mapping[int, int]) -> list[int]:
    """All descendants of ``roots`` (not the roots), given each pid's parent pid."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parent_of.items():
        if pid != ppid:
            children.setdefault(ppid, []).append(pid)
    seen = set(roots)
    found: list[int] = []
    stack = list(seen)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in seen:
                seen.add(child)
                found.append(child)
                stack.append(child)
    return found


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


# --- CSV output -------------------------------------------------------------------------------


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else ""
    return value


class _CsvLog:
    """Appends rows to one CSV file, header first, flushed after every batch."""

    def __init__(self, path: Path, columns: Sequence[str]) -> None:
        self.path = path
        self.columns = tuple(columns)
        self._file: IO[str] | None = None
        self._writer: Any = None

    def write(self, rows: Iterable[Mapping[str, Any]]) -> None:
        rows = list(rows)
        if not rows:
            return
        with _WRITE_LOCK:
            if self._file is None:
                self._file = self.path.open("a", newline="", encoding="utf-8")
                self._writer = csv.DictWriter(self._file, fieldnames=self.columns)
            if os.fstat(self._file.fileno()).st_size == 0:
                self._writer.writeheader()
            self._writer.writerows({k: _cell(v) for k, v in row.items()} for row in rows)
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


# --- samplers ---------------------------------------------------------------------------------


class SamplerFailure(Exception):
    """A sampler cannot go on; the message is the one-line reason."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


class _Sampler:
    """The shared loop: a baseline at start, then one sample per grid tick until stop."""

    name = "sampler"

    def __init__(
        self,
        cell_dir: Path | str,
        *,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        t0: float | None = None,
        warmup_s: float = 0.0,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"sampling interval must be positive, got {interval}")
        self.cell_dir = Path(cell_dir)
        self.interval = float(interval)
        self.error: str | None = None
        self._clock = clock
        self._t0 = t0
        self._warmup_s = float(warmup_s)
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._prev: Any = None
        self._prev_time = 0.0
        self._prev_mark = 0.0  # where the next row's interval starts, in s after t0
        self._prev_cpu = 0.0
        self._sampler_log = _CsvLog(self.cell_dir / "sampler.csv", SAMPLER_COLUMNS)

    @property
    def t0(self) -> float | None:
        """The measured window's start; without one, ``start()`` sets it to now + warmup_s."""
        return self._t0

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"the {self.name} sampler was already started")
        self.cell_dir.mkdir(parents=True, exist_ok=True)
        if self._t0 is None:
            self._t0 = self._clock() + self._warmup_s
        self._thread = threading.Thread(
            target=self._run, name=f"dbrig-{self.name}-sampler", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        """Stop the thread (after a last sample) and wait for it, at most ``timeout`` s."""
        if self._thread is None:
            return
        self._stop_event.set()
        self._thread.join(timeout)
        if self._thread.is_alive() and self.error is None:
            self.error = f"{self.name} sampler did not stop within {timeout:g} s"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # The step API: the thread calls these; tests call them directly with a fake clock.

    def open(self) -> None:
        """Take the baseline sample (no row)."""
        if self._t0 is None:
            self._t0 = self._clock() + self._warmup_s
        self._prev_cpu = time.thread_time()
        now = self._clock()
        self._prev = self._take()
        self._prepare(self._prev)
        self._prev_time = now
        self._prev_mark = now - self._t0

    def sample(self, scheduled_s: float | None = None) -> None:
        """Take one sample and append its rows; ``scheduled_s`` is its grid point after t0."""
        assert self._t0 is not None, "open() first"
        now = self._clock()
        snapshot = self._take()
        elapsed = now - self._prev_time
        stamp = {"t_s": now - self._t0, "phase": phase_for(self._prev_mark), "interval_s": elapsed}
        self._emit(stamp, self._prev, snapshot, elapsed)
        cpu_now = time.thread_time()
        cpu_s = max(0.0, cpu_now - self._prev_cpu)
        cpu_per_s = _per_s(cpu_s, elapsed)
        self._sampler_log.write(
            [
                {
                    **stamp,
                    "sampler": self.name,
                    "cpu_s": cpu_s,
                    "cpu_pct": None if cpu_per_s is None else 100.0 * cpu_per_s,
                }
            ]
        )
        self._prev, self._prev_time, self._prev_cpu = snapshot, now, cpu_now
        self._prev_mark = stamp["t_s"] if scheduled_s is None else scheduled_s

    def close(self) -> None:
        for log in self._logs():
            log.close()
        self._sampler_log.close()

    def _run(self) -> None:
        try:
            self.open()
            while True:
                assert self._t0 is not None
                tick = next_tick_s(self._clock() - self._t0, self.interval)
                if self._stop_event.wait(max(0.0, self._t0 + tick - self._clock())):
                    break
                self.sample(tick)
            if self._clock() - self._prev_time >= FINAL_SAMPLE_MIN * self.interval:
                self.sample()
        except SamplerFailure as exc:
            self.error = str(exc)
        except Exception as exc:
            self.error = f"{self.name} sampler failed: {type(exc).__name__}: {_one_line(exc)}"
        finally:
            with contextlib.suppress(OSError):
                self.close()

    # Subclasses fill these in.

    def _take(self) -> Any:
        raise NotImplementedError

    def _prepare(self, first: Any) -> None:
        """Decide what to record from the baseline snapshot."""

    def _emit(self, stamp: Mapping[str, Any], before: Any, after: Any, elapsed_s: float) -> None:
        raise NotImplementedError

    def _logs(self) -> Iterable[_CsvLog]:
        return ()


class HostSnapshot(NamedTuple):
    cpu: Sequence[Any]
    disks: Mapping[str, Any]
    memory: Any
    swap: Any
    procs: ProcSnapshot | None


def _device_name(device: str) -> str:
    return device.removeprefix("/dev/")


def whole_disks(sys_block: Path = Path("/sys/block")) -> frozenset[str] | None:
    """Whole block devices (not partitions) by name, or None where /sys/block is missing."""
    try:
        return frozenset(entry.name.replace("!", "/") for entry in sys_block.iterdir())
    except OSError:
        return None


_PROCESS_ERRORS = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess)


def _ctx_switches(process: psutil.Process) -> int:
    """Voluntary + involuntary context switches of every thread of ``process``.

    psutil (and /proc/<pid>/status) count the main thread only, which for a
    thread-per-connection server such as mariadbd is nearly nothing; each
    thread's own counts are in /proc/<pid>/task/<tid>/status.
    """
    total = 0
    try:
        tasks = os.listdir(f"/proc/{process.pid}/task")
    except OSError:
        switches = process.num_ctx_switches()
        return switches.voluntary + switches.involuntary
    for tid in tasks:
        try:
            with open(f"/proc/{process.pid}/task/{tid}/status", "rb") as handle:
                for line in handle:
                    if line.startswith((b"voluntary_ctxt_switches", b"nonvoluntary_ctxt")):
                        total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total


def _sample_process(process: psutil.Process) -> tuple[ProcKey, ProcSample] | None:
    try:
        with process.oneshot():
            key = (process.pid, process.create_time())
            cpu = process.cpu_times()
            rss = process.memory_info().rss
            switches = _ctx_switches(process)
            try:
                io = process.io_counters()
                read_bytes, write_bytes = io.read_bytes, io.write_bytes
            except (psutil.AccessDenied, AttributeError):
                read_bytes = write_bytes = None
    except _PROCESS_ERRORS:
        return None
    sample = ProcSample(
        cpu_s=cpu.user + cpu.system,
        rss_bytes=rss,
        ctx_switches=switches,
        read_bytes=read_bytes,
        write_bytes=write_bytes,
    )
    return key, sample


def parent_map() -> dict[int, int]:
    """pid -> parent pid for every process, read straight from /proc/<pid>/stat.

    About ten times cheaper than psutil.process_iter (which builds an object
    per process): this runs at every tick, and the sampler's own cost counts.
    """
    parents: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {p.pid: p.info["ppid"] for p in psutil.process_iter(["ppid"]) if p.info["ppid"]}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: state and ppid follow the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            parents[int(entry)] = int(fields[1])
    return parents


def snapshot_processes(roles: Mapping[str, Iterable[int]]) -> dict[str, dict[ProcKey, ProcSample]]:
    """Sample each role's processes and all their descendants (one cheap scan of /proc)."""
    parents = parent_map()
    snapshot: dict[str, dict[ProcKey, ProcSample]] = {}
    for role, pids in roles.items():
        roots = [pid for pid in pids if pid and pid > 0]
        samples: dict[ProcKey, ProcSample] = {}
        for pid in dict.fromkeys([*roots, *descendants(roots, parents)]):
            try:
                process = psutil.Process(pid)
            except _PROCESS_ERRORS:
                continue
            sampled = _sample_process(process)
            if sampled is not None:
                samples[sampled[0]] = sampled[1]
        snapshot[role] = samples
    return snapshot


class HostSampler(_Sampler):
    """CPU per core, disks, memory and the runner's processes: cpu/disk/memory/procs.csv.

    ``processes`` is called at every sample and returns role -> pids (its descendants are
    included); ``devices`` names the block devices to record (None = all whole disks).
    """

    name = "host"

    def __init__(
        self,
        cell_dir: Path | str,
        *,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        t0: float | None = None,
        warmup_s: float = 0.0,
        processes: Callable[[], Mapping[str, Iterable[int]]] | None = None,
        devices: Iterable[str] | None = None,
    ) -> None:
        super().__init__(cell_dir, interval=interval, clock=clock, t0=t0, warmup_s=warmup_s)
        self._processes = processes
        self._devices = None if devices is None else frozenset(map(_device_name, devices))
        self._cpu_log = _CsvLog(self.cell_dir / "cpu.csv", CPU_COLUMNS)
        self._disk_log = _CsvLog(self.cell_dir / "disk.csv", DISK_COLUMNS)
        self._memory_log = _CsvLog(self.cell_dir / "memory.csv", MEMORY_COLUMNS)
        self._procs_log = _CsvLog(self.cell_dir / "procs.csv", PROCS_COLUMNS)

    def _take(self) -> HostSnapshot:
        return HostSnapshot(
            cpu=psutil.cpu_times(percpu=True),
            disks=psutil.disk_io_counters(perdisk=True) or {},
            memory=psutil.virtual_memory(),
            swap=psutil.swap_memory(),
            procs=None if self._processes is None else snapshot_processes(self._processes()),
        )

    def _prepare(self, first: HostSnapshot) -> None:
        if self._devices is None:
            self._devices = whole_disks()

    def _emit(
        self,
        stamp: Mapping[str, Any],
        before: HostSnapshot,
        after: HostSnapshot,
        elapsed_s: float,
    ) -> None:
        self._cpu_log.write({**stamp, **row} for row in cpu_rows(before.cpu, after.cpu))
        disks = disk_rows(before.disks, after.disks, elapsed_s, self._devices)
        self._disk_log.write({**stamp, **row} for row in disks)
        self._memory_log.write(
            [{**stamp, **memory_row(after.memory, before.swap, after.swap, elapsed_s)}]
        )
        if after.procs is not None:
            procs = proc_rows(before.procs or {}, after.procs, elapsed_s)
            self._procs_log.write({**stamp, **row} for row in procs)

    def _logs(self) -> Iterable[_CsvLog]:
        return (self._cpu_log, self._disk_log, self._memory_log, self._procs_log)


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
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        t0: float | None = None,
        warmup_s: float = 0.0,
        fetch: Callable[[], Mapping[str, Any]],
    ) -> None:
        super().__init__(cell_dir, interval=interval, clock=clock, t0=t0, warmup_s=warmup_s)
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


# --- summary ----------------------------------------------------------------------------------


def _measured(path: Path) -> pd.DataFrame | None:
    """The measure-phase rows of one sampler CSV, or None if there are none."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    frame = pd.read_csv(path, on_bad_lines="skip")
    if "phase" not in frame.columns:
        return None
    frame = frame[frame["phase"] == MEASURE]
    return frame if len(frame) else None


def _weighted_mean(values: pd.Series, weights: pd.Series) -> float | None:
    """Time-weighted mean: rows covering longer intervals count more; empty rows are left out."""
    values = pd.to_numeric(values, errors="coerce")
    weights = pd.to_numeric(weights, errors="coerce")
    keep = values.notna() & weights.notna() & (weights > 0)
    if not keep.any():
        return None
    return float((values[keep] * weights[keep]).sum() / weights[keep].sum())


def _integral(rates: pd.Series, weights: pd.Series) -> float | None:
    """Sum of rate * interval over the rows with a value: the total over the window."""
    rates = pd.to_numeric(rates, errors="coerce")
    weights = pd.to_numeric(weights, errors="coerce")
    keep = rates.notna() & weights.notna()
    if not keep.any():
        return None
    return float((rates[keep] * weights[keep]).sum())


def _mean(values: Iterable[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return sum(known) / len(known) if known else None


def _put(summary: dict[str, float], key: str, value: float | None) -> None:
    if value is not None and math.isfinite(value):
        summary[key] = float(value)


def _summarize_cpu(frame: pd.DataFrame, pinned_cores: Collection[int] | None) -> dict[str, float]:
    summary: dict[str, float] = {}
    busy: dict[int, float | None] = {}
    iowait, steal = [], []
    for core, rows in frame.groupby("core"):
        busy[int(core)] = _weighted_mean(rows["busy_pct"], rows["interval_s"])
        iowait.append(_weighted_mean(rows["iowait_pct"], rows["interval_s"]))
        steal.append(_weighted_mean(rows["steal_pct"], rows["interval_s"]))
    _put(summary, "cpu_busy_pct", _mean(busy.values()))
    for core, value in sorted(busy.items()):
        _put(summary, f"cpu_busy_pct_core{core}", value)
    if pinned_cores is not None:
        _put(summary, "pinned_cores_busy_pct", _mean(busy.get(core) for core in pinned_cores))
    _put(summary, "iowait_pct", _mean(iowait))
    _put(summary, "steal_pct", _mean(steal))
    return summary


def _summarize_disk(frame: pd.DataFrame) -> dict[str, float]:
    summary: dict[str, float] = {}
    weights = frame["interval_s"]
    ios_per_s = frame["reads_per_s"] + frame["writes_per_s"]
    devices = [rows for _, rows in frame.groupby("device")]

    def total(column: pd.Series) -> float | None:
        per_device = [_weighted_mean(column[rows.index], weights[rows.index]) for rows in devices]
        known = [value for value in per_device if value is not None]
        return sum(known) if known else None

    _put(summary, "disk_iops", total(ios_per_s))
    _put(summary, "disk_read_mb_per_s", total(frame["read_mb_per_s"]))
    _put(summary, "disk_write_mb_per_s", total(frame["write_mb_per_s"]))
    ios = ios_per_s * weights
    with_await = frame["await_ms"].notna() & ios.notna() & (ios > 0)
    if with_await.any():
        _put(
            summary,
            "disk_await_ms",
            float((frame["await_ms"][with_await] * ios[with_await]).sum() / ios[with_await].sum()),
        )
    utils = [_weighted_mean(rows["util_pct"], rows["interval_s"]) for rows in devices]
    _put(summary, "disk_util_pct", _mean(utils))
    return summary


def _summarize_memory(frame: pd.DataFrame) -> dict[str, float]:
    summary: dict[str, float] = {}
    for column in ("swap_in_mb_per_s", "swap_out_mb_per_s"):
        _put(summary, column, _weighted_mean(frame[column], frame["interval_s"]))
    available = pd.to_numeric(frame["available_mb"], errors="coerce")
    if available.notna().any():
        _put(summary, "mem_available_mb_min", float(available.min()))
    return summary


def role_key(role: str) -> str:
    """The prefix of a role's summary keys: ``stress-ng`` -> ``stress``."""
    return ROLE_KEYS.get(role) or re.sub(r"\W+", "_", role).strip("_").lower()


def _summarize_procs(frame: pd.DataFrame) -> dict[str, float]:
    summary: dict[str, float] = {}
    for role, rows in frame.groupby("role"):
        key, weights = role_key(str(role)), rows["interval_s"]
        cpu_s = _integral(rows["cpu_pct"], weights)
        _put(summary, f"{key}_cpu_pct", _weighted_mean(rows["cpu_pct"], weights))
        _put(summary, f"{key}_cpu_s", None if cpu_s is None else cpu_s / 100.0)
        rss = pd.to_numeric(rows["rss_mb"], errors="coerce")
        if rss.notna().any():
            _put(summary, f"{key}_rss_mb_max", float(rss.max()))
        _put(summary, f"{key}_ctx_switches", _integral(rows["ctx_switches_per_s"], weights))
        _put(summary, f"{key}_read_mb_per_s", _weighted_mean(rows["read_mb_per_s"], weights))
        _put(summary, f"{key}_write_mb_per_s", _weighted_mean(rows["write_mb_per_s"], weights))
    return summary


def _summarize_status(frame: pd.DataFrame) -> dict[str, float]:
    summary: dict[str, float] = {}
    if "questions_per_s" in frame.columns:
        _put(
            summary,
            "questions_per_s",
            _weighted_mean(frame["questions_per_s"], frame["interval_s"]),
        )
    reads_col, requests_col = (
        "innodb_buffer_pool_reads_per_s",
        "innodb_buffer_pool_read_requests_per_s",
    )
    if reads_col in frame.columns and requests_col in frame.columns:
        both = frame[frame[reads_col].notna() & frame[requests_col].notna()]
        reads = _integral(both[reads_col], both["interval_s"])
        requests = _integral(both[requests_col], both["interval_s"])
        if reads is not None and requests:
            _put(summary, "buffer_pool_hit_ratio", 1.0 - reads / requests)
    return summary


def _summarize_sampler(frame: pd.DataFrame) -> dict[str, float]:
    shares = []
    for _, rows in frame.groupby("sampler"):
        keep = rows["cpu_s"].notna() & rows["interval_s"].notna()
        seconds = rows["interval_s"][keep].sum()
        if seconds > 0:
            shares.append(100.0 * float(rows["cpu_s"][keep].sum()) / float(seconds))
    summary: dict[str, float] = {}
    if shares:
        _put(summary, "sampler_cpu_pct", sum(shares))
    return summary


def summarize_cell(
    cell_dir: Path | str, *, pinned_cores: Collection[int] | None = None
) -> dict[str, float]:
    """Per-cell means over the measure phase of the sampler CSVs in ``cell_dir``.

    Keys (absent when their file is missing, has no measure rows, or the value is undefined):

    - cpu.csv: ``cpu_busy_pct`` (mean over cores), ``cpu_busy_pct_core<N>``,
      ``pinned_cores_busy_pct`` (mean over ``pinned_cores``), ``iowait_pct``, ``steal_pct``;
    - disk.csv: ``disk_iops``, ``disk_read_mb_per_s``, ``disk_write_mb_per_s`` (summed over
      devices), ``disk_await_ms`` (weighted by I/O count), ``disk_util_pct`` (mean over devices);
    - memory.csv: ``swap_in_mb_per_s``, ``swap_out_mb_per_s``, ``mem_available_mb_min``;
    - procs.csv, per role (``server``, ``workload``, ``stress`` for stress-ng):
      ``<role>_cpu_pct`` (100 = one core), ``<role>_cpu_s`` (CPU seconds in the window),
      ``<role>_rss_mb_max``, ``<role>_ctx_switches`` (count in the window),
      ``<role>_read_mb_per_s``, ``<role>_write_mb_per_s``;
    - status.csv: ``questions_per_s``, ``buffer_pool_hit_ratio`` (1 - reads / read requests
      over the window);
    - sampler.csv: ``sampler_cpu_pct`` (both samplers' own CPU, % of one core).

    Means are weighted by each row's ``interval_s``.
    """
    cell = Path(cell_dir)
    summarizers: list[tuple[str, Callable[[pd.DataFrame], dict[str, float]]]] = [
        ("cpu.csv", lambda frame: _summarize_cpu(frame, pinned_cores)),
        ("disk.csv", _summarize_disk),
        ("memory.csv", _summarize_memory),
        ("procs.csv", _summarize_procs),
        ("status.csv", _summarize_status),
        ("sampler.csv", _summarize_sampler),
    ]
    summary: dict[str, float] = {}
    for filename, summarize in summarizers:
        frame = _measured(cell / filename)
        if frame is not None:
            summary.update(summarize(frame))
    return summary
