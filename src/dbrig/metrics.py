"""Every metric column dbrig writes to results.csv, described once.

One :class:`Metric` per column: its label and unit, how to format a value, which
way is better, whether it is a headline metric, and which tool or sampler
produces it. The terminal table, the report, ``dbrig compare``, the warnings and
the per-trial progress line all read this registry; a new metric is one entry in
:data:`REGISTRY`.

Orders that callers rely on come from the registry order: the headline metrics
(:func:`headline`), the metrics compared by default (:func:`compared`) and the
parts of the progress line. The throughput measure of a run is picked by
``throughput`` rank instead (:func:`throughput_metrics`).

A leaf module: it imports nothing from dbrig, so every layer may read it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

# Who produces a column.
SYSBENCH = "sysbench"  # the tool's final summary (dbrig.tools.sysbench)
MYSQLSLAP = "mysqlslap"  # the tool's benchmark row (dbrig.tools.mysqlslap)
TPCC = "tpcc"  # the TPC-C-like script's per-type report and consistency checks (dbrig.tools.tpcc)
ACKED_WRITES = (
    "acked_writes"  # the ack files and their lookup after the run (dbrig.tools.acked_writes)
)
STRESS_NG = "stress-ng"  # the interference process and its --metrics-brief report
RUNNER = "runner"  # measured by the runner around the workload (wait4, clocks)
HOST_SAMPLER = "host sampler"  # cpu.csv, disk.csv, memory.csv, procs.csv (docs/sampling.md)
STATUS_SAMPLER = "status sampler"  # status.csv: SHOW GLOBAL STATUS
SAMPLERS = "samplers"  # sampler.csv: the samplers' own cost
PROFILER = "profiler"  # profile.folded: perf record of the server (docs/profiling.md)
INTERNALS = "internals"  # waits.csv: performance_schema over the window (docs/profiling.md)
DERIVED = "derived"  # computed from other columns after the trial (cost per unit of work)
FAULTS = "faults"  # the fault injector's timeline and recovery (dbrig.run.faults)
SOAK = "soak"  # a soak's trend over its interval series (dbrig.analysis.drift, docs/reliability.md)
SOURCES = frozenset(
    {
        SYSBENCH,
        MYSQLSLAP,
        TPCC,
        ACKED_WRITES,
        STRESS_NG,
        RUNNER,
        HOST_SAMPLER,
        STATUS_SAMPLER,
        SAMPLERS,
        PROFILER,
        INTERNALS,
        DERIVED,
        FAULTS,
        SOAK,
    }
)

UNITS = frozenset(
    {
        "",  # a bare number: a count or a setting
        "s",
        "ms",
        "µs",
        "txn/s",
        "1/min",
        "queries/s",
        "errors/s",
        "events/s",
        "ops/s",
        "1/s",
        "%",
        "% of one core",
        "MiB",
        "MiB/s",
        "MiB/h",
        "%/h",
        "KiB",
        "0..1",
    }
)

DEFAULT_FORMAT = ".4g"  # non-headline metrics span magnitudes: four significant digits
DEFAULT_PERCENTILE = 95  # sysbench's --percentile default
_NUMBER = "<N>"  # in a name: any non-negative integer (cpu_busy_pct_core<N>)


class Direction(Enum):
    """Which way a metric improves."""

    HIGHER_IS_BETTER = "higher"
    LOWER_IS_BETTER = "lower"


HIGHER = Direction.HIGHER_IS_BETTER
LOWER = Direction.LOWER_IS_BETTER


@dataclass(frozen=True)
class Metric:
    """One column of results.csv."""

    name: str  # the column; "<N>" stands for a number
    label: str  # report heading without the unit; "{pct}" is the latency percentile
    unit: str  # one of UNITS
    source: str  # one of SOURCES
    description: str = ""
    fmt: str = DEFAULT_FORMAT  # format spec of one value, without thousands separators
    # None: dbrig states no direction (direction_of still applies its naming rules).
    direction: Direction | None = None
    headline: bool = False  # a column of the result tables, in registry order
    # A context column of the result tables where the run has it, after the headline
    # ones, mean only: how much interference happened, who used the CPU.
    detail: bool = False
    compared: bool = False  # compared by `dbrig compare` without --metric, in registry order
    short: str = ""  # terminal table heading; the label when empty
    progress: str | None = None  # its part of the per-trial progress line: "{} tps"
    throughput: int | None = None  # rank when picking the run's throughput measure, 0 first
    per_interval: bool = False  # sysbench also reports it per interval (intervals.csv)
    # A count of failures whose usual value is 0 (errors, lost commits): an interval
    # relative to its mean means nothing, so `until: {ci_width}` leaves it out.
    near_zero: bool = False

    @property
    def column(self) -> str:
        """The results.csv column (the report code's word for :attr:`name`)."""
        return self.name

    @property
    def shown_unit(self) -> str:
        """The unit a value is shown in: ``%`` for a 0..1 fraction formatted as a
        percentage (stress-ng's achieved share), so a heading and its values agree."""
        return "%" if self.fmt.endswith("%") else self.unit

    @property
    def heading(self) -> str:
        """Label and unit, as the report and its charts show them: ``TPS (txn/s)``."""
        return f"{self.label} ({self.shown_unit})" if self.shown_unit else self.label

    @property
    def terminal_heading(self) -> str:
        return self.short or self.label

    @property
    def report_format(self) -> str:
        return "{:," + self.fmt + "}"

    @property
    def terminal_format(self) -> str:
        return "{:" + self.fmt + "}"

    def format(self, value: float | None, *, grouped: bool = True) -> str:
        """One value; empty for None or NaN. ``grouped``: with thousands separators."""
        return _format(value, self.fmt, grouped)

    def progress_text(self, value: float) -> str:
        assert self.progress is not None
        return self.progress.format(format(value, self.fmt))

    def at_percentile(self, pct: object) -> Metric:
        """This metric with ``{pct}`` in its headings filled in (p95, p99)."""
        if "{pct}" not in self.label + self.short:
            return self
        return dataclasses.replace(
            self, label=self.label.format(pct=pct), short=self.short.format(pct=pct)
        )


# What a cost per unit of work puts per unit (the DERIVED columns ``<cost>_per_<unit>``):
# the server's CPU (µs), its context switches, and KiB it read and wrote over the window.
COSTS = ("server_cpu_us", "ctx_switches", "kb_read", "kb_written", "wait_us")


@dataclass(frozen=True)
class WorkUnit:
    """A unit of work a workload tool counts (a transaction, a New-Order): the trial puts
    the server's costs per unit in the columns ``<cost>_per_<name>`` (dbrig.analysis.costs).

    Each column it yields is an entry of :data:`REGISTRY` (a unit test checks it).
    """

    name: str  # the columns' suffix: txn, query, new_order
    count: str  # the metric counting units over the measured window
    per_minute: bool = False  # ``count`` is a rate per minute (NOPM), not a count
    costs: tuple[str, ...] = COSTS  # which of COSTS are put per unit

    def columns(self) -> tuple[str, ...]:
        return tuple(f"{cost}_per_{self.name}" for cost in self.costs)


def _sysbench() -> Iterator[Metric]:
    s = SYSBENCH
    yield Metric(
        "tps",
        "TPS",
        "txn/s",
        s,
        "transactions per second over the measured window",
        fmt=".1f",
        direction=HIGHER,
        headline=True,
        compared=True,
        short="TPS",
        progress="{} tps",
        throughput=1,
        per_interval=True,
    )
    yield Metric(
        "qps",
        "QPS",
        "queries/s",
        s,
        "queries per second",
        fmt=".0f",
        direction=HIGHER,
        headline=True,
        compared=True,
        short="QPS",
        progress="{} qps",
        throughput=4,
        per_interval=True,
    )
    yield Metric(
        "latency_avg_ms",
        "avg latency",
        "ms",
        s,
        "mean latency of an event (a transaction)",
        fmt=".2f",
        direction=LOWER,
        headline=True,
        compared=True,
        short="avg ms",
        progress="avg {} ms",
    )
    yield Metric(
        "latency_pct_ms",
        "p{pct} latency",
        "ms",
        s,
        "latency at the run's percentile (column percentile)",
        fmt=".2f",
        direction=LOWER,
        headline=True,
        compared=True,
        short="p{pct} ms",
        per_interval=True,
    )
    yield Metric(
        "errors_per_s",
        "error rate",
        "errors/s",
        s,
        "ignored errors per second (a Lua script's normal_errors not counted)",
        fmt=".2f",
        direction=LOWER,
        headline=True,
        compared=True,
        short="err/s",
        per_interval=True,
        near_zero=True,
    )
    # Compared by default since the hardware tests (issue 9); OLTP runs do not have it.
    yield Metric(
        "events_per_s",
        "event rate",
        "events/s",
        s,
        "cpu: its own events per second; threads, fileio (I/O operations) and Lua "
        "scripts: events over the measured window",
        fmt=".1f",
        direction=HIGHER,
        headline=True,
        compared=True,
        short="events/s",
        progress="{} events/s",
        throughput=3,
        per_interval=True,
    )
    yield Metric("latency_min_ms", "min latency", "ms", s, "fastest event")
    yield Metric("latency_max_ms", "max latency", "ms", s, "slowest event", direction=LOWER)
    yield Metric("latency_sum_ms", "latency sum", "ms", s, "sum of all event latencies")
    yield Metric(
        "percentile", "latency percentile", "", s, "what latency_pct_ms is for; 0 when disabled"
    )
    yield Metric("transactions", "transactions", "", s, "count in the measured window")
    for kind in ("read", "write", "other", "total"):
        yield Metric(f"queries_{kind}", f"{kind} queries", "", s, f"count of {kind} queries")
    yield Metric("ignored_errors", "ignored errors", "", s, "count (--mysql-ignore-errors)")
    yield Metric(
        "ignored_errors_per_s",
        "ignored errors",
        "errors/s",
        s,
        "every error sysbench counted; errors_per_s less a script's normal_errors_per_s",
        near_zero=True,
    )
    yield Metric(
        "normal_errors_per_s",
        "normal errors",
        "errors/s",
        s,
        "errors a Lua script's authors count as normal (its normal_errors share of events)",
    )
    yield Metric("reconnects", "reconnects", "", s, "count")
    yield Metric(
        "reconnects_per_s",
        "reconnect rate",
        "1/s",
        s,
        "reconnects per second",
        direction=LOWER,
        per_interval=True,
    )
    yield Metric("total_time_s", "total time", "s", s, "since the run started, warm-up included")
    yield Metric("measured_time_s", "measured window", "s", s, "since the last checkpoint")
    yield Metric("events", "events", "", s, "total number of events")
    yield Metric("events_per_thread_avg", "events per thread", "", s, "mean over threads")
    yield Metric("events_per_thread_stddev", "events per thread, stddev", "", s)
    yield Metric("exec_time_per_thread_avg_s", "time per thread", "s", s, "mean over threads")
    yield Metric("exec_time_per_thread_stddev_s", "time per thread, stddev", "s", s)
    yield Metric("operations", "operations", "", s, "memory test: total operations")
    yield Metric("operations_per_s", "operation rate", "ops/s", s, "memory test")
    yield Metric("mib_transferred", "transferred", "MiB", s, "memory test")
    yield from _sysbench_hardware()


def _sysbench_hardware() -> Iterator[Metric]:
    """The hardware tests' own throughputs: headline, so a run that has them shows them."""
    s = SYSBENCH
    yield Metric(
        "mib_per_s",
        "transfer rate",
        "MiB/s",
        s,
        "memory test",
        fmt=".1f",
        direction=HIGHER,
        headline=True,
        compared=True,
        short="MiB/s",
        progress="{} MiB/s",
        throughput=5,
        per_interval=True,
    )
    for op in ("reads", "writes", "fsyncs"):
        yield Metric(
            f"{op}_per_s",
            f"{op}",
            "1/s",
            s,
            f"fileio test: {op} per second",
            fmt=".1f",
            direction=HIGHER,
            headline=True,
            compared=True,
            short=f"{op}/s",
            per_interval=True,
        )
    for op in ("read", "written"):
        yield Metric(
            f"{op}_mib_per_s",
            op,
            "MiB/s",
            s,
            f"fileio test: MiB {op} per second",
            fmt=".2f",
            direction=HIGHER,
            headline=True,
            compared=True,
            short=f"{op} MiB/s",
            progress=f"{{}} MiB/s {op}",
            per_interval=True,
        )


def _derived() -> Iterator[Metric]:
    d = DERIVED
    for name, label, unit, what in (
        ("server_cpu_us_per_txn", "server CPU per txn", "µs", "server_cpu_s / transactions"),
        ("server_cpu_us_per_query", "server CPU per query", "µs", "server_cpu_s / queries_total"),
        ("ctx_switches_per_txn", "context switches per txn", "", "server_ctx_switches / txn"),
        ("kb_read_per_txn", "read per txn", "KiB", "server storage reads / transactions"),
        ("kb_written_per_txn", "written per txn", "KiB", "server storage writes / transactions"),
        ("wait_us_per_txn", "server waits per txn", "µs", "server_wait_s / transactions"),
    ):
        yield Metric(name, label, unit, d, what, direction=LOWER, compared=True)


TPCC_TYPES = ("new_order", "payment", "order_status", "delivery", "stock_level")


def _tpcc() -> Iterator[Metric]:
    t = TPCC
    yield Metric(
        "nopm",
        "NOPM",
        "1/min",
        t,
        "committed New-Order transactions per minute (HammerDB's figure)",
        fmt=".0f",
        direction=HIGHER,
        headline=True,
        compared=True,
        short="NOPM",
        progress="{} NOPM",
        throughput=0,
    )
    yield Metric(
        "tpm",
        "TPM",
        "1/min",
        t,
        "transactions of all five types per minute",
        fmt=".0f",
        direction=HIGHER,
        compared=True,
        short="TPM",
    )
    for name in TPCC_TYPES:
        label = name.replace("_", "-")
        yield Metric(f"{name}_count", f"{label} count", "", t, "in the measured window")
        yield Metric(
            f"{name}_retries",
            f"{label} retries",
            "",
            t,
            "deadlocks and conflicts retried, in the measured window",
        )
        yield Metric(
            f"latency_{name}_avg_ms",
            f"{label} avg latency",
            "ms",
            t,
            "retries included",
            direction=LOWER,
        )
        yield Metric(
            f"latency_{name}_pct_ms",
            f"{label} p{{pct}} latency",
            "ms",
            t,
            "upper edge of a ~19 % wide bucket",
            direction=LOWER,
        )
    yield Metric(
        "server_cpu_us_per_new_order",
        "server CPU per New-Order",
        "µs",
        DERIVED,
        "server_cpu_s / committed New-Orders",
        direction=LOWER,
    )
    yield Metric(
        "kb_written_per_new_order",
        "written per New-Order",
        "KiB",
        DERIVED,
        "server storage writes / committed New-Orders",
        direction=LOWER,
    )
    yield Metric("new_order_rollbacks", "New-Order rollbacks", "", t, "the 1 % on an unused item")
    yield Metric("tpcc_retries", "retries", "", t, "deadlocks and lock wait timeouts retried")
    for n in range(1, 5):
        yield Metric(
            f"consistency_{n}_violations",
            f"consistency {n} violations",
            "",
            t,
            f"districts or warehouses failing clause 3.3.2.{n}",
            direction=LOWER,
        )


def _acked_writes() -> Iterator[Metric]:
    a = ACKED_WRITES
    yield Metric(
        "lost_commits",
        "lost commits",
        "",
        a,
        "commits the server acknowledged that are missing after the run",
        fmt=".0f",
        direction=LOWER,
        headline=True,
        short="lost",
        progress="{} lost",
        near_zero=True,
    )
    yield Metric(
        "acked_commits",
        "acked commits",
        "",
        a,
        "commits the server acknowledged to the client (warm-up included)",
        fmt=".0f",
        detail=True,
        short="acked",
    )
    yield Metric(
        "unacked_present",
        "unacked present",
        "",
        a,
        "rows committed whose acknowledgement never reached the client (in flight at a crash)",
        fmt=".0f",
    )


def _mysqlslap() -> Iterator[Metric]:
    m = MYSQLSLAP
    yield Metric(
        "avg_s",
        "avg run time",
        "s",
        m,
        "mean over --iterations of the time to run all queries",
        fmt=".3f",
        direction=LOWER,
        headline=True,
        compared=True,
        short="avg s",
        progress="avg {} s",
    )
    yield Metric(
        "min_s", "min run time", "s", m, "fastest iteration", fmt=".3f", detail=True, short="min s"
    )
    yield Metric(
        "max_s", "max run time", "s", m, "slowest iteration", fmt=".3f", detail=True, short="max s"
    )
    yield Metric(
        "queries_per_s",
        "query rate",
        "queries/s",
        m,
        "concurrency * queries_per_client / avg_s",
        fmt=".0f",
        direction=HIGHER,
        headline=True,
        compared=True,
        short="queries/s",
        progress="{} q/s",
        throughput=2,
    )
    yield Metric("concurrency", "clients", "", m, "client threads")
    yield Metric("queries_per_client", "queries per client", "", m)


def _runner() -> Iterator[Metric]:
    r = RUNNER
    for mode, word in (("user", "usr"), ("sys", "sys")):
        yield Metric(
            f"client_{mode}_cpu_s",
            f"client {'user' if mode == 'user' else 'system'} CPU",
            "s",
            r,
            "the workload tool's, from wait4",
            fmt=".2f",
            detail=True,
            short=f"client {word} s",
        )
    for step, label in (
        ("restore", "restore"),
        ("server_start", "server start"),
        ("server_stop", "server stop"),
        ("reset", "reset"),
        ("workload", "workload"),
        ("prepare", "prepare in the work folder"),  # a workload with no server (run/workdir.py)
    ):
        yield Metric(f"time_{step}_s", f"{label} time", "s", r, "wall-clock time of the step")
    yield Metric(
        "time_data_set_load_s",
        "data set load time",
        "s",
        r,
        "a managed server's init, prepare and snapshot of the data set, in the trial that "
        "first used it (empty in the others)",
    )
    yield Metric(
        "time_data_set_cache_s",
        "data set from cache time",
        "s",
        r,
        "the data set taken from the snapshot cache instead (copy or clone, digest check), "
        "in the trial that first used it",
    )
    yield Metric(
        "time_workload_start_s",
        "workload start delay",
        "s",
        r,
        "sysbench's launch until its `Threads started!` (every thread connected), where its "
        "clock starts; intervals.csv's `t_s` includes it",
        fmt=".3f",
    )


def _faults() -> Iterator[Metric]:
    """A scenario's ``faults:`` (docs/reliability.md): all on the measured window's clock."""
    f = FAULTS
    yield Metric(
        "downtime_s",
        "downtime",
        "s",
        f,
        "kill_server: signal to the restarted server's first query; STOP: frozen time",
        fmt=".2f",
        direction=LOWER,
        headline=True,
        compared=True,
        short="down s",
    )
    yield Metric(
        "throughput_recovered_s",
        "throughput recovery",
        "s",
        f,
        "from the fault until an interval's throughput is back at 90 % of its pre-fault mean",
        fmt=".1f",
        direction=LOWER,
        headline=True,
        compared=True,
        short="recover s",
    )
    yield Metric("fault_at_s", "fault at", "s", f, "when the first fault fired, after the warm-up")
    yield Metric(
        "server_exit_s", "server exit", "s", f, "kill_server: signal until the process was gone"
    )
    yield Metric(
        "restart_to_query_s",
        "restart to first query",
        "s",
        f,
        "kill_server: the restart until its first successful query",
        direction=LOWER,
    )
    yield Metric(
        "client_out_s",
        "client out",
        "s",
        f,
        "the fault until dbrig started the workload again (it ended the workload's run)",
        direction=LOWER,
    )
    yield Metric(
        "client_errors",
        "client errors",
        "",
        f,
        "errors the workload reported from the fault until the throughput recovered",
        direction=LOWER,
    )
    yield Metric(
        "fault_window_tps",
        "TPS with the fault",
        "txn/s",
        f,
        "over the whole measured window, the outage counted as zero",
        fmt=".1f",
        direction=HIGHER,
    )
    yield Metric(
        "innodb_recovery_s",
        "InnoDB crash recovery",
        "s",
        f,
        "error log: crash recovery began -> ready for connections (1 s resolution)",
        direction=LOWER,
    )
    yield Metric("innodb_redo_s", "InnoDB redo scan and apply", "s", f, "error log, 1 s resolution")
    yield Metric(
        "innodb_rollback_s",
        "InnoDB rollback",
        "s",
        f,
        "error log: background rollback of incomplete transactions, 1 s resolution",
    )
    yield Metric("innodb_redo_mb", "redo scanned", "MiB", f, "end-of-log LSN - checkpoint LSN")
    yield Metric("innodb_pages_recovered", "pages recovered", "", f, "error log: To recover")
    yield Metric(
        "innodb_trx_rolled_back", "transactions rolled back", "", f, "left incomplete by the crash"
    )
    yield Metric("disk_full_s", "disk full", "s", f, "disk_full: filled until freed")
    yield Metric("disk_fill_mb", "disk filled", "MiB", f, "disk_full: what the filler took")
    yield Metric(
        "server_log_errors",
        "server errors logged",
        "",
        f,
        "disk_full: [ERROR] lines in the error log while the disk was full",
    )


def _stress_ng() -> Iterator[Metric]:
    n = STRESS_NG
    yield Metric("stress_cpu_s_requested", "stress CPU asked", "s", n, "workers x load x time")
    yield Metric(
        "stress_cpu_s_achieved",
        "stress CPU got",
        "s",
        n,
        "usr + sys, from wait4",
        fmt=".1f",
        detail=True,
        short="stress CPU s",
    )
    yield Metric(
        "stress_achieved_ratio",
        "stress achieved",
        "0..1",
        n,
        "got / asked",
        fmt=".0%",
        detail=True,
        short="stress got %",
    )
    yield Metric("stress_bogo_ops", "bogo ops", "", n, "--metrics-brief")
    yield Metric("stress_bogo_ops_per_s", "bogo ops rate", "ops/s", n, "--metrics-brief, real time")
    yield Metric("stress_usr_s", "stress user time", "s", n, "--metrics-brief")
    yield Metric("stress_sys_s", "stress system time", "s", n, "--metrics-brief")


def _process(key: str, who: str, short: str) -> Iterator[Metric]:
    """procs.csv summaries of one role (sampling.summary.role_key)."""
    h = HOST_SAMPLER
    yield Metric(
        f"{key}_cpu_pct",
        f"{who} CPU",
        "% of one core",
        h,
        "mean share",
        fmt=".0f",
        detail=True,
        short=f"{short} CPU %",
    )
    yield Metric(f"{key}_cpu_s", f"{who} CPU time", "s", h, "CPU seconds in the window")
    yield Metric(f"{key}_rss_mb_max", f"{who} peak RSS", "MiB", h)
    yield Metric(f"{key}_ctx_switches", f"{who} context switches", "", h, "count in the window")
    yield Metric(f"{key}_read_mb_per_s", f"{who} reads", "MiB/s", h, "storage I/O")
    yield Metric(f"{key}_write_mb_per_s", f"{who} writes", "MiB/s", h, "storage I/O")


def _samplers() -> Iterator[Metric]:
    h = HOST_SAMPLER
    yield Metric("cpu_busy_pct", "CPU busy", "%", h, "mean over cores")
    yield Metric(f"cpu_busy_pct_core{_NUMBER}", "core busy", "%", h, "one core")
    yield Metric(
        "pinned_cores_busy_pct", "pinned cores busy", "%", h, "cores interference is pinned to"
    )
    yield Metric("iowait_pct", "iowait", "%", h, "mean over cores")
    yield Metric("steal_pct", "steal", "%", h, "mean over cores: the hypervisor took it")
    yield Metric("disk_iops", "disk IOPS", "1/s", h, "reads + writes, sampled devices")
    yield Metric("disk_read_mb_per_s", "disk reads", "MiB/s", h, "sampled devices")
    yield Metric("disk_write_mb_per_s", "disk writes", "MiB/s", h, "sampled devices")
    yield Metric("disk_await_ms", "disk await", "ms", h, "per completed I/O")
    yield Metric("disk_util_pct", "disk utilisation", "%", h, "mean over devices")
    yield Metric("swap_in_mb_per_s", "swap in", "MiB/s", h)
    yield Metric("swap_out_mb_per_s", "swap out", "MiB/s", h)
    yield Metric("mem_available_mb_min", "min available memory", "MiB", h)
    yield from _process("server", "server", "server")
    yield from _process("workload", "workload", "client")
    yield from _process("stress", "stress-ng", "stress")
    yield Metric(
        "kernel_cpu_pct",
        "kernel threads' CPU",
        "% of one core",
        h,
        "writeback, loop devices, journals, kworkers: mostly I/O done for the server",
        fmt=".0f",
    )
    yield Metric("kernel_cpu_s", "kernel threads' CPU time", "s", h, "CPU seconds in the window")
    yield Metric("questions_per_s", "questions", "1/s", STATUS_SAMPLER, "the server's counter")
    yield Metric(
        "buffer_pool_hit_ratio",
        "buffer pool hits",
        "0..1",
        STATUS_SAMPLER,
        "1 - Innodb_buffer_pool_reads / Innodb_buffer_pool_read_requests",
    )
    yield Metric(
        "profile_samples",
        "CPU profile samples",
        "",
        PROFILER,
        "stacks perf record took of the server in the measured window (profile.folded)",
        fmt=".0f",
    )
    yield Metric(
        "server_wait_s",
        "server wait time",
        "s",
        INTERNALS,
        "performance_schema's timed waits in the measured window, summed over threads "
        "(waits.csv; idle and condition waits left out)",
        fmt=".3f",
    )
    yield Metric("sampler_cpu_pct", "sampler CPU", "% of one core", SAMPLERS, "both samplers")
    yield Metric(
        "other_cpu_pct",
        "other processes' CPU",
        "%",
        HOST_SAMPLER,
        "of the host, mean over cores: busy CPU not taken by the server, the client, "
        "stress-ng, kernel threads, the samplers, steal or interrupts: something else on the "
        "host (absent when a process of the trial is not followed here)",
        fmt=".0f",
    )


# A soak's warnings fire when the slope's interval excludes zero AND it exceeds these (the
# scenario's soak block overrides them; why these values: docs/reliability.md).
SOAK_DRIFT_THRESHOLD_PCT_PER_H = 5.0  # compare's default threshold: 5 % is a regression
SOAK_RSS_THRESHOLD_MIB_PER_H = 40.0  # about 1 GiB a day


def _soak() -> Iterator[Metric]:
    """A soak's drift (scenario key ``soak``): slopes with batch-means 95 % bounds."""
    for prefix, what in (("tps", "TPS"), ("latency_pct", "p{pct} latency")):
        name = f"{prefix}_drift_pct_per_h"
        yield Metric(name, f"{what} drift", "%/h", SOAK, "slope over the window, % of its mean")
        for bound in ("low", "high"):
            yield Metric(
                f"{prefix}_drift_ci_{bound}_pct_per_h",
                f"{what} drift, 95 % CI {bound}",
                "%/h",
                SOAK,
                "batch-means interval of the slope",
            )
    yield Metric(
        "server_rss_growth_mib",
        "server RSS growth",
        "MiB",
        SOAK,
        "mean of the window's last tenth minus its first tenth",
    )
    yield Metric(
        "server_rss_slope_mib_per_h",
        "server RSS slope",
        "MiB/h",
        SOAK,
        "over the window's second half (after the buffer pool filled)",
    )
    for bound in ("low", "high"):
        yield Metric(
            f"server_rss_slope_ci_{bound}_mib_per_h",
            f"server RSS slope, 95 % CI {bound}",
            "MiB/h",
            SOAK,
            "batch-means interval of the slope",
        )


REGISTRY: tuple[Metric, ...] = (
    *_sysbench(),
    *_derived(),  # costs per transaction: after sysbench, before mysqlslap in compare's order
    *_mysqlslap(),
    *_tpcc(),
    *_acked_writes(),
    *_runner(),
    *_faults(),
    *_stress_ng(),
    *_samplers(),
    *_soak(),
)

_BY_NAME = MappingProxyType({m.name: m for m in REGISTRY if _NUMBER not in m.name})
_PATTERNS = tuple(
    (re.compile(re.escape(m.name).replace(re.escape(_NUMBER), r"\d+")), m)
    for m in REGISTRY
    if _NUMBER in m.name
)

# The directions dbrig states; direction_of adds its naming rules.
METRIC_DIRECTIONS: Mapping[str, Direction] = MappingProxyType(
    {m.name: m.direction for m in REGISTRY if m.direction is not None}
)


def metric(name: str) -> Metric | None:
    """The registry entry of a results.csv column, or None when dbrig does not know it."""
    found = _BY_NAME.get(name)
    if found is not None:
        return found
    return next((m for pattern, m in _PATTERNS if pattern.fullmatch(name)), None)


def produced_by(source: str) -> tuple[Metric, ...]:
    """Every metric ``source`` (a tool's YAML key, or a sampler) writes, in registry order."""
    return tuple(m for m in REGISTRY if m.source == source)


def compared(source: str | None = None) -> tuple[str, ...]:
    """What ``dbrig compare`` compares without --metric, in order (only ``source``'s if given)."""
    return tuple(m.name for m in REGISTRY if m.compared and source in (None, m.source))


def headline(
    measured: Collection[str] | None = None, percentile: object = DEFAULT_PERCENTILE
) -> tuple[Metric, ...]:
    """The headline metrics in order (only those in ``measured`` if given), with the
    latency percentile filled into their headings."""
    return tuple(
        m.at_percentile(percentile)
        for m in REGISTRY
        if m.headline and (measured is None or m.name in measured)
    )


HEADLINE: tuple[Metric, ...] = headline()


def detail(measured: Collection[str] | None = None) -> tuple[Metric, ...]:
    """The context columns of the result tables (only those in ``measured`` if given)."""
    return tuple(m for m in REGISTRY if m.detail and (measured is None or m.name in measured))


def throughput_metrics(*, per_interval: bool = False) -> tuple[Metric, ...]:
    """The throughput measures, in the order a run's is picked (TPS first).

    ``per_interval``: only those sysbench also reports per interval.
    """
    chosen = [
        m for m in REGISTRY if m.throughput is not None and (m.per_interval or not per_interval)
    ]
    return tuple(sorted(chosen, key=lambda m: m.throughput or 0))


def direction_of(name: str) -> Direction | None:
    """The direction of a metric, or None when unknown.

    A stated direction wins; otherwise any ``latency_*`` metric and any ``*_per_txn``
    or ``*_per_query`` cost is lower-is-better. Unknown metrics return None: the caller
    should mark them incomparable or report a two-sided change, never better/worse.
    """
    key = name.strip().lower()
    if key in METRIC_DIRECTIONS:
        return METRIC_DIRECTIONS[key]
    if key.startswith("latency_") or key.endswith(("_per_txn", "_per_query")):
        return LOWER
    return None


def format_value(name: str, value: float | None, *, grouped: bool = False) -> str:
    """A value of any column in its metric's format (four significant digits if unknown)."""
    return _format(value, format_spec(name), grouped)


def format_spec(name: str) -> str:
    """The format spec of a column's values: ``.1f`` for tps, ``.4g`` when unknown."""
    known = metric(name)
    return known.fmt if known else DEFAULT_FORMAT


def _format(value: float | None, spec: str, grouped: bool) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return format(value, "," + spec if grouped else spec)


def progress_line(values: Mapping[str, float]) -> str:
    """The per-trial progress line's numbers: ``812.3 tps, 16246 qps, avg 9.84 ms``."""
    return ", ".join(
        m.progress_text(values[m.name]) for m in REGISTRY if m.progress and m.name in values
    )
