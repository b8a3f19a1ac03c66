"""The host through psutil: CPU per core, disks, memory (and the runner's processes).

:class:`HostSampler` writes cpu.csv, disk.csv, memory.csv and, when the runner
gives ``processes``, procs.csv (see :mod:`dbrig.sampling.procs`).

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
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import psutil

from dbrig.sampling.base import _CsvLog, _Sampler
from dbrig.sampling.procs import PROCS_COLUMNS, ProcSnapshot, proc_rows, snapshot_processes
from dbrig.sampling.rates import MIB, _delta, _fields, _mib, _per_s
from dbrig.sampling.schedule import DEFAULT_TIMING, STAMP_COLUMNS, SampleTiming

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


# Linux counts guest time inside user and nice already (psutil does the same).
_GUEST_FIELDS = frozenset({"guest", "guest_nice"})


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
        timing: SampleTiming = DEFAULT_TIMING,
        processes: Callable[[], Mapping[str, Iterable[int]]] | None = None,
        devices: Iterable[str] | None = None,
    ) -> None:
        super().__init__(cell_dir, timing=timing)
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
            procs=None
            if self._processes is None
            else snapshot_processes(self._processes(), kernel_threads=True),
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
