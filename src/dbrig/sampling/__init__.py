"""Host and server sampling while a cell runs, and the per-cell summary of it.

Two background threads sample on one clock while a cell runs (warm-up, then the
measured window): :class:`HostSampler` reads the host through psutil and
:class:`StatusSampler` reads ``SHOW GLOBAL STATUS`` through a function the
runner gives it. Each appends rows to CSV files in the cell directory as they
are taken (append, write, flush), so a crash keeps what was sampled.
:func:`summarize_cell` turns those files into per-cell means.

Where things are (each module's docstring documents the columns of the files it writes):

=============  ===============================================================
schedule.py    the grid ticks, the phase of a row, the stamp columns
rates.py       counter deltas, per-second rates, MiB
base.py        the sampler thread's loop, the CSV log, sampler.csv
host.py        cpu.csv, disk.csv, memory.csv and :class:`HostSampler`
procs.py       procs.csv: process groups and their descendants, from /proc
status.py      status.csv: :data:`COUNTERS`, :data:`GAUGES`, :class:`StatusSampler`
summary.py     :func:`summarize_cell`, the per-cell means
registry.py    every sampler a trial may run, one entry each (``SAMPLERS``)
=============  ===============================================================

Timing
------
A :class:`SampleTiming` gives each sampler its interval, clock, ``t0`` and warm-up.
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

Files are appended to; give each cell its own directory.
"""

from dbrig.sampling.base import DEFAULT_STOP_TIMEOUT_S, SAMPLER_COLUMNS, SamplerFailure
from dbrig.sampling.host import (
    CPU_COLUMNS,
    CPU_FIELDS,
    CPU_PCT_COLUMNS,
    DISK_COLUMNS,
    DISK_VALUE_COLUMNS,
    MEMORY_COLUMNS,
    MEMORY_VALUE_COLUMNS,
    HostSampler,
    HostSnapshot,
    cpu_percentages,
    cpu_rows,
    disk_rows,
    disk_values,
    memory_row,
    whole_disks,
)
from dbrig.sampling.procs import (
    PROCS_COLUMNS,
    PROCS_VALUE_COLUMNS,
    ProcKey,
    ProcSample,
    ProcSnapshot,
    descendants,
    parent_map,
    proc_rows,
    snapshot_processes,
)
from dbrig.sampling.procs import _ctx_switches as _ctx_switches  # the unit tests use it
from dbrig.sampling.rates import MIB
from dbrig.sampling.schedule import (
    FINAL_SAMPLE_MIN,
    MEASURE,
    STAMP_COLUMNS,
    WARMUP,
    SampleTiming,
    next_tick_s,
    phase_for,
)
from dbrig.sampling.status import (
    COUNTERS,
    GAUGES,
    StatusSampler,
    status_column,
    status_row,
    status_variables,
)
from dbrig.sampling.summary import role_key, summarize_cell

__all__ = [
    "COUNTERS",
    "CPU_COLUMNS",
    "CPU_FIELDS",
    "CPU_PCT_COLUMNS",
    "DEFAULT_STOP_TIMEOUT_S",
    "DISK_COLUMNS",
    "DISK_VALUE_COLUMNS",
    "FINAL_SAMPLE_MIN",
    "GAUGES",
    "MEASURE",
    "MEMORY_COLUMNS",
    "MEMORY_VALUE_COLUMNS",
    "MIB",
    "PROCS_COLUMNS",
    "PROCS_VALUE_COLUMNS",
    "SAMPLER_COLUMNS",
    "STAMP_COLUMNS",
    "WARMUP",
    "HostSampler",
    "HostSnapshot",
    "ProcKey",
    "ProcSample",
    "ProcSnapshot",
    "SampleTiming",
    "SamplerFailure",
    "StatusSampler",
    "cpu_percentages",
    "cpu_rows",
    "descendants",
    "disk_rows",
    "disk_values",
    "memory_row",
    "next_tick_s",
    "parent_map",
    "phase_for",
    "proc_rows",
    "role_key",
    "snapshot_processes",
    "status_column",
    "status_row",
    "status_variables",
    "summarize_cell",
    "whole_disks",
]
