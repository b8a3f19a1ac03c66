"""tpcc: dbrig's TPC-C-like workload, run by sysbench 1.0.20 from the packaged Lua script.

The script (``tools/lua/tpcc.lua``) was written for dbrig from the public TPC-C
specification, revision 5.11 (clauses 1, 2, 3.3.2 and 4.3); docs/tpcc.md says
what it does and what it leaves out. These are TPC-C-like results, not audited
TPC-C results.

Command line
------------
``build_command(params, endpoint, command)`` returns
``[binary, <path of tpcc.lua>, command, --db-driver=mysql, <connection>, <options>]``.
The password travels in sysbench's ``--config-file`` (see :mod:`dbrig.tools.sysbench`).
Warm-up works as for sysbench's own tests (``--report-checkpoints``) and the
script is told ``--measure_after=W`` so that its per-type counts skip the
warm-up too.

What ``parse(text)`` returns (:class:`TpccResult`)
--------------------------------------------------
- ``sysbench``: the :class:`~dbrig.tools.sysbench.SysbenchResult` of the same text
  (summary, intervals, checkpoints, FATAL lines).
- ``types``: per transaction type (``new_order``, ``payment``, ``order_status``,
  ``delivery``, ``stock_level``) a :class:`TypeStats`, summed over the threads'
  report lines::

    tpcc: thread=0 type=new_order count=613 rollbacks=5 retries=0 latency_us_sum=9120831
    buckets=43:1,45:2,...

  where bucket ``b`` counts transactions that took less than ``2**(b/4)`` µs
  (and at least ``2**((b-1)/4)`` µs).
- ``threads_reported``: how many threads printed their lines.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dbrig.endpoint import Endpoint
from dbrig.errors import ConfigError
from dbrig.metrics import Metric, WorkUnit, produced_by
from dbrig.tools import sysbench
from dbrig.tools.base import (
    CLIENT_CPUS,
    CLIENT_HOST,
    ClientPlacement,
    Outcome,
    ToolInfo,
)

INFO = ToolInfo(name="sysbench", binaries=("sysbench",), package="sysbench")
LUA_SCRIPT = Path(__file__).parent / "lua" / "tpcc.lua"

TYPES = ("new_order", "payment", "order_status", "delivery", "stock_level")
TERMINALS_PER_WAREHOUSE = 10  # clause 4.2.2: ten terminals per warehouse
# Deadlock, lock wait timeout, and MariaDB's "record has changed since last read" (its
# snapshot isolation, on by default from 11.6): the script rolls back and retries them.
RETRIED_ERRORS = (1213, 1205, 1020)

# Measured on this project's machine (MariaDB 10.11, InnoDB, 16 KiB pages; the schema
# folder's size with du after loading W = 1, 2, 4 by benchmarks/tpcc_load.py): 140 MiB
# at W=1, 389 MiB at W=4, so 83 MiB per warehouse plus 57 MiB (item and the tables'
# first extents). Rounded up: the disk check should not pass what then fails.
BYTES_PER_WAREHOUSE = 90 * 2**20
BASE_BYTES = 64 * 2**20


class TpccParams(ClientPlacement):
    """The scenario's ``workload.tpcc`` block."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    warehouses: int = Field(1, ge=1, description="Warehouses W (~83 MiB each on disk).")
    threads: int = Field(1, ge=1, description="Client threads (terminals), each on a home W.")
    time: int = Field(60, ge=1, description="Measured run time in seconds.")
    prepare_threads: int = Field(
        1, ge=1, description="Threads loading the data, by warehouse (capped at warehouses)."
    )
    engine: str = Field(
        "innodb", pattern=r"^[A-Za-z][A-Za-z0-9_]*$", description="Storage engine of the tables."
    )
    foreign_keys: bool = Field(False, description="Declare the spec's foreign keys.")
    strict: bool = Field(
        False, description="Refuse more threads than the spec's 10 terminals per warehouse."
    )
    report_interval: int = Field(1, ge=0, description="Seconds between interval lines; 0 = none.")
    percentile: int = Field(95, ge=1, le=100, description="Latency percentile to report.")
    db: str = Field("tpcc", pattern=r"^[A-Za-z0-9_]+$", description="Database of the tables.")
    host: str | None = CLIENT_HOST
    cpus: tuple[int, ...] | None = CLIENT_CPUS

    @model_validator(mode="after")
    def _terminals_per_warehouse(self) -> TpccParams:
        allowed = self.warehouses * TERMINALS_PER_WAREHOUSE
        if self.strict and self.threads > allowed:
            raise ValueError(
                f"threads: {self.threads} is more than the {allowed} terminals that "
                f"{self.warehouses} warehouse(s) allow under strict (10 per warehouse)"
            )
        return self


def data_set_bytes(params: TpccParams) -> int:
    """About how many bytes the loaded data takes in InnoDB (measured, docs/tpcc.md)."""
    return params.warehouses * BYTES_PER_WAREHOUSE + BASE_BYTES


def build_command(
    params: TpccParams,
    endpoint: Endpoint,
    command: sysbench.Command,
    *,
    binary: str = "sysbench",
    warmup: int = 0,
    script: Path = LUA_SCRIPT,
) -> list[str]:
    """The argv for ``sysbench tpcc.lua <command>``; see the module docstring."""
    if command == "prepare":
        options = [f"--threads={min(params.prepare_threads, params.warehouses)}"]
    elif command == "run":
        options = _run_options(params, warmup)
    elif command == "cleanup":
        options = []
    else:
        raise ConfigError(f"unknown tpcc command {command!r}")
    return sysbench.lua_script_argv(
        binary, script, command, params.db, endpoint, *_schema_options(params), *options
    )


def _schema_options(params: TpccParams) -> list[str]:
    return [
        f"--warehouses={params.warehouses}",
        f"--engine={params.engine}",
        f"--foreign_keys={'on' if params.foreign_keys else 'off'}",
    ]


def _run_options(params: TpccParams, warmup: int) -> list[str]:
    argv = [
        f"--threads={params.threads}",
        f"--time={params.time + warmup}",
        f"--report-interval={params.report_interval}",
        f"--percentile={params.percentile}",
        f"--mysql-ignore-errors={','.join(str(e) for e in RETRIED_ERRORS)}",
        f"--measure_after={warmup}",
    ]
    if warmup:
        argv.append(f"--report-checkpoints={warmup}")
    return argv


# --- parsing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TypeStats:
    """One transaction type, summed over the threads."""

    count: int = 0
    rollbacks: int = 0
    retries: int = 0
    latency_us_sum: float = 0.0
    buckets: Mapping[int, int] = field(default_factory=dict)

    @property
    def latency_avg_ms(self) -> float | None:
        return self.latency_us_sum / self.count / 1000 if self.count else None

    def latency_pct_ms(self, percentile: float) -> float | None:
        """The upper edge of the bucket holding the percentile (within ~19 %)."""
        total = sum(self.buckets.values())
        if total == 0:
            return None
        wanted = math.ceil(total * percentile / 100)
        seen = 0
        for b in sorted(self.buckets):
            seen += self.buckets[b]
            if seen >= wanted:
                return 2 ** (b / 4) / 1000
        return None  # unreachable: seen ends at total


@dataclass(frozen=True)
class TpccResult:
    sysbench: sysbench.SysbenchResult
    types: Mapping[str, TypeStats]
    threads_reported: int


REPORT_RE = re.compile(
    r"^tpcc: thread=(?P<thread>\d+) type=(?P<type>\w+) count=(?P<count>\d+) "
    r"rollbacks=(?P<rollbacks>\d+) retries=(?P<retries>\d+) "
    r"latency_us_sum=(?P<latency>\d+(?:\.\d+)?) buckets=(?P<buckets>[\d:,]*)\s*$"
)


def parse(text: str) -> TpccResult:
    """Parse the combined output of a tpcc run; never raises on odd or partial output."""
    raw: dict[str, list[dict[str, str]]] = {}
    threads: set[str] = set()
    for line in text.splitlines():
        if m := REPORT_RE.match(line):
            raw.setdefault(m["type"], []).append(m.groupdict())
            threads.add(m["thread"])
    types = {name: _sum_type(raw.get(name, [])) for name in TYPES}
    return TpccResult(sysbench.parse(text), types, len(threads))


def _sum_type(lines: list[dict[str, str]]) -> TypeStats:
    buckets: dict[int, int] = {}
    for line in lines:
        for pair in filter(None, line["buckets"].split(",")):
            b, n = pair.split(":")
            buckets[int(b)] = buckets.get(int(b), 0) + int(n)
    return TypeStats(
        count=sum(int(x["count"]) for x in lines),
        rollbacks=sum(int(x["rollbacks"]) for x in lines),
        retries=sum(int(x["retries"]) for x in lines),
        latency_us_sum=sum(float(x["latency"]) for x in lines),
        buckets=buckets,
    )


def tpcc_metrics(result: TpccResult, percentile: int) -> dict[str, float]:
    """NOPM, TPM, the count, rollbacks and latency of each type, retries: see metrics.py."""
    minutes = result.sysbench.summary.get("measured_time_s", 0.0) / 60
    out: dict[str, float] = {}
    total = 0
    for name, stats in result.types.items():
        total += stats.count
        out[f"{name}_count"] = float(stats.count)
        out[f"{name}_retries"] = float(stats.retries)
        if (avg := stats.latency_avg_ms) is not None:
            out[f"latency_{name}_avg_ms"] = avg
        if (pct := stats.latency_pct_ms(percentile)) is not None:
            out[f"latency_{name}_pct_ms"] = pct
    new_order = result.types["new_order"]
    out["new_order_rollbacks"] = float(new_order.rollbacks)
    out["tpcc_retries"] = float(sum(s.retries for s in result.types.values()))
    if minutes > 0:
        out["nopm"] = (new_order.count - new_order.rollbacks) / minutes
        out["tpm"] = total / minutes
    return out


def failure_reason(result: TpccResult, returncode: int) -> str | None:
    """sysbench's own reason, or the script's silence (no per-type lines)."""
    reason = sysbench.failure_reason(result.sysbench, returncode)
    if reason is None and result.threads_reported == 0:
        return "tpcc: the script printed no per-type report"
    return reason


# --- consistency (clause 3.3.2) --------------------------------------------------------------

# Each query counts the warehouses or districts where the condition does not hold.
CONSISTENCY_CHECKS: Mapping[str, tuple[str, str]] = {
    "consistency_1_violations": (
        "condition 1 (W_YTD = sum(D_YTD))",
        "SELECT COUNT(*) FROM warehouse w JOIN (SELECT d_w_id, SUM(d_ytd) AS ytd FROM district "
        "GROUP BY d_w_id) d ON d.d_w_id = w.w_id WHERE w.w_ytd <> d.ytd",
    ),
    "consistency_2_violations": (
        "condition 2 (D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID))",
        "SELECT COUNT(*) FROM district d "
        "LEFT JOIN (SELECT o_w_id, o_d_id, MAX(o_id) AS m FROM orders GROUP BY o_w_id, o_d_id) o "
        "ON o.o_w_id = d.d_w_id AND o.o_d_id = d.d_id "
        "LEFT JOIN (SELECT no_w_id, no_d_id, MAX(no_o_id) AS m FROM new_order "
        "GROUP BY no_w_id, no_d_id) n ON n.no_w_id = d.d_w_id AND n.no_d_id = d.d_id "
        "WHERE NOT (d.d_next_o_id - 1 <=> o.m) OR (n.m IS NOT NULL AND n.m <> o.m)",
    ),
    "consistency_3_violations": (
        "condition 3 (max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER)",
        "SELECT COUNT(*) FROM (SELECT no_w_id, no_d_id FROM new_order GROUP BY no_w_id, no_d_id "
        "HAVING MAX(no_o_id) - MIN(no_o_id) + 1 <> COUNT(*)) bad",
    ),
    "consistency_4_violations": (
        "condition 4 (sum(O_OL_CNT) = rows in ORDER-LINE)",
        "SELECT COUNT(*) FROM (SELECT o_w_id, o_d_id, SUM(o_ol_cnt) AS n_lines FROM orders "
        "GROUP BY o_w_id, o_d_id) o LEFT JOIN (SELECT ol_w_id, ol_d_id, COUNT(*) AS n_lines "
        "FROM order_line GROUP BY ol_w_id, ol_d_id) l ON l.ol_w_id = o.o_w_id "
        "AND l.ol_d_id = o.o_d_id WHERE NOT (o.n_lines <=> l.n_lines)",
    ),
}


def consistency_queries() -> dict[str, str]:
    """By metric name, the query counting where each of conditions 1-4 fails."""
    return {name: sql for name, (_, sql) in CONSISTENCY_CHECKS.items()}


def evaluate_consistency(counts: Mapping[str, int]) -> tuple[dict[str, float], str | None]:
    """The violation counts as metrics, and the first failed condition named (or None)."""
    metrics = {name: float(counts[name]) for name in CONSISTENCY_CHECKS if name in counts}
    failed = [
        f"{label} fails in {counts[name]} warehouse(s)/district(s)"
        for name, (label, _) in CONSISTENCY_CHECKS.items()
        if counts.get(name, 0) > 0
    ]
    missing = [name for name in CONSISTENCY_CHECKS if name not in counts]
    if missing:
        failed.append(f"consistency not checked: {', '.join(missing)}")
    reason = "tpcc consistency " + "; ".join(failed) if failed else None
    return metrics, reason


# --- the tool seam ---------------------------------------------------------------------------

# Its unit of work is the committed New-Order (its NOPM, a rate per minute).
NEW_ORDER = WorkUnit(
    "new_order", count="nopm", per_minute=True, costs=("server_cpu_us", "kb_written")
)


@dataclass(frozen=True)
class TpccTool(sysbench.LuaScriptWorkload):
    """The TPC-C-like workload as a :class:`~dbrig.tools.base.WorkloadTool`."""

    params: TpccParams
    key: ClassVar[str] = "tpcc"
    info: ClassVar[ToolInfo] = INFO
    params_model: ClassVar[type[BaseModel]] = TpccParams
    required_by_doctor: ClassVar[bool] = False  # sysbench's own entry already requires it
    concurrency_key: ClassVar[str | None] = "threads"
    size_key: ClassVar[str] = "warehouses"
    units_of_work: ClassVar[tuple[WorkUnit, ...]] = (
        *sysbench.LuaScriptWorkload.units_of_work,
        NEW_ORDER,
    )

    def metrics(self) -> tuple[Metric, ...]:
        return produced_by(self.key) + produced_by(sysbench.SysbenchTool.key)

    @property
    def database(self) -> str:
        return self.params.db

    def data_set_key(self) -> tuple:
        p = self.params
        return ("tpcc", p.db, p.warehouses, p.engine.lower(), p.foreign_keys)

    def script_command(
        self, endpoint: Endpoint, command: sysbench.Command, binary: Path, warmup: int = 0
    ) -> list[str]:
        return build_command(self.params, endpoint, command, binary=str(binary), warmup=warmup)

    def data_set_bytes(self) -> int:
        return data_set_bytes(self.params)

    def analyse(self, output: str, returncode: int) -> Outcome:
        result = parse(output)
        metrics = dict(result.sysbench.summary)
        metrics["percentile"] = float(self.params.percentile)
        if "ignored_errors_per_s" in metrics:
            metrics["errors_per_s"] = metrics["ignored_errors_per_s"]
        metrics.update(tpcc_metrics(result, self.params.percentile))
        intervals = sysbench.intervals_frame(result.sysbench)
        return Outcome(
            metrics,
            intervals if not intervals.empty else None,
            failure_reason(result, returncode),
            {},
        )

    def after_run_checks(self) -> dict[str, str]:
        return consistency_queries()

    def evaluate_checks(self, counts: Mapping[str, int]) -> tuple[dict[str, float], str | None]:
        return evaluate_consistency(counts)
