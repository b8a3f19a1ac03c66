"""The runner's process groups: one cheap scan of /proc per tick, and procs.csv rows.

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
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import psutil

from dbrig.sampling.rates import MIB, _delta, _per_s
from dbrig.sampling.schedule import STAMP_COLUMNS

PROCS_VALUE_COLUMNS = (
    "pids",
    "cpu_pct",
    "rss_mb",
    "ctx_switches_per_s",
    "read_mb_per_s",
    "write_mb_per_s",
)
PROCS_COLUMNS = (*STAMP_COLUMNS, "role", *PROCS_VALUE_COLUMNS)

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


# --- reading the processes -------------------------------------------------------------------


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


KTHREADD = 2  # the parent of every kernel thread
KERNEL_ROLE = "kernel"  # kernel threads: writeback, loop devices, journal, kworkers
_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def parent_map() -> dict[int, int]:
    """pid -> parent pid for every process, read straight from /proc/<pid>/stat."""
    return _scan_proc()[0]


def _scan_proc() -> tuple[dict[int, int], dict[ProcKey, ProcSample]]:
    """pid -> parent pid for every process, and every kernel thread's CPU, read straight
    from /proc/<pid>/stat (the kernel threads come free with the same read).

    About ten times cheaper than psutil.process_iter (which builds an object
    per process): this runs at every tick, and the sampler's own cost counts.
    """
    parents: dict[int, int] = {}
    kernel: dict[ProcKey, ProcSample] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        found = {p.pid: p.info["ppid"] for p in psutil.process_iter(["ppid"]) if p.info["ppid"]}
        return found, kernel
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: the fields follow the last ')',
        # from the state (field 3 of proc(5)): ppid is [1], utime [11], stime [12], start [19].
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 2:
            continue
        pid, ppid = int(entry), int(fields[1])
        parents[pid] = ppid
        if (ppid == KTHREADD or pid == KTHREADD) and len(fields) > 19:
            cpu_s = (int(fields[11]) + int(fields[12])) / _TICKS_PER_S
            kernel[(pid, float(fields[19]))] = ProcSample(cpu_s, 0, 0, None, None)
    return parents, kernel


def snapshot_processes(
    roles: Mapping[str, Iterable[int]], *, kernel_threads: bool = False
) -> dict[str, dict[ProcKey, ProcSample]]:
    """Sample each role's processes and all their descendants (one cheap scan of /proc);
    with ``kernel_threads``, every kernel thread too, as role :data:`KERNEL_ROLE`."""
    parents, kernel = _scan_proc()
    snapshot: dict[str, dict[ProcKey, ProcSample]] = {}
    if kernel_threads:
        snapshot[KERNEL_ROLE] = kernel
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
