"""acked_writes: commits the server acknowledged, then looked up after the run: how many it lost.

sysbench 1.0.20 runs the packaged script ``tools/lua/acked_writes.lua``: each event
is one autocommit INSERT of a new id into ``acked_writes``; once the server
answers OK the thread appends the id to its file ``acked-<tid>.ids`` in its
working directory and flushes it (the run side gives the workload an empty
folder, :class:`~dbrig.tools.base.ClientLogWorkload`). After the run every
acknowledged id is looked up: acknowledged but missing is a *lost* commit; an id
present but never acknowledged was in flight when the server went away (normal).

Why a sysbench script and not a Python client: it reuses sysbench's summary,
interval lines, warm-up checkpoints, ``--rate`` and its thread model, so the
throughput of this workload reads like every other sysbench run and the live
progress line, intervals.csv and the report need nothing new. The script
reconnects by itself when the server goes away (sysbench's own reconnect crashes
with the MariaDB client library, see the script).

Ack files (:func:`parse_ack_file`)
----------------------------------
::

    # thread=0 first=1
    1
    2

The header names the thread and the first id of this run: thread ``T`` owns
ids ``[T * 2**40, (T + 1) * 2**40)`` and starts above the largest id already in
its range. Ids count up in the client's memory, so a restarted server cannot
make them repeat (an AUTO_INCREMENT could hand out a lost id again after a crash,
and a lost commit would look present). A last line without its newline was
being written when the client stopped: it is not counted as acknowledged.

Lookups (:func:`lookup_ranges`, :func:`lookup_query`)
-----------------------------------------------------
Each thread's id range from its first id to the end of its range is cut into
consecutive ranges holding at most ``batch`` acknowledged ids each; one
``SELECT id ... WHERE id BETWEEN lo AND hi`` per range (a primary-key range scan)
returns every present id in it, acknowledged or not. :func:`evaluate` compares.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from dbrig.endpoint import Endpoint
from dbrig.errors import ConfigError
from dbrig.metrics import Metric, produced_by
from dbrig.tools import sysbench
from dbrig.tools.base import CLIENT_CPUS, ClientPlacement, Outcome, ToolInfo

INFO = ToolInfo(name="sysbench", binaries=("sysbench",), package="sysbench")
LUA_SCRIPT = Path(__file__).parent / "lua" / "acked_writes.lua"
TABLE = "acked_writes"
ACK_FILE_GLOB = "acked-*.ids"
THREAD_SPAN = 2**40  # ids per thread, as in the script
LOOKUP_BATCH = 1000  # acknowledged ids per lookup query
MAX_THREADS = 4095  # ids stay below 2**52: exact in the script's Lua doubles
MAX_PAYLOAD = 4096  # the payload column's VARCHAR length


class AckedWritesParams(ClientPlacement):
    """The scenario's ``workload.acked_writes`` block."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    threads: int = Field(1, ge=1, le=MAX_THREADS, description="Client threads writing.")
    time: int = Field(60, ge=1, description="Measured run time in seconds.")
    rate: int = Field(
        0, ge=0, description="Commits per second over all threads (--rate); 0 = as fast as it can."
    )
    payload_bytes: int = Field(
        100, ge=0, le=MAX_PAYLOAD, description="Filler bytes per row (the commit's size)."
    )
    engine: str = Field(
        "innodb", pattern=r"^[A-Za-z][A-Za-z0-9_]*$", description="Storage engine of the table."
    )
    reconnect_timeout: int = Field(
        120, ge=1, description="Seconds a thread keeps reconnecting to a server that went away."
    )
    fail_on_loss: bool = Field(
        False, description="Fail the trial when an acknowledged commit is missing."
    )
    report_interval: int = Field(1, ge=0, description="Seconds between interval lines; 0 = none.")
    percentile: int = Field(95, ge=1, le=100, description="Latency percentile to report.")
    db: str = Field("acked", pattern=r"^[A-Za-z0-9_]+$", description="Database of the table.")
    cpus: tuple[int, ...] | None = CLIENT_CPUS


def build_command(
    params: AckedWritesParams,
    endpoint: Endpoint,
    command: sysbench.Command,
    *,
    binary: str = "sysbench",
    warmup: int = 0,
    script: Path = LUA_SCRIPT,
) -> list[str]:
    """The argv for ``sysbench acked_writes.lua <command>``; warm-up as for sysbench's tests."""
    if command == "run":
        options = _run_options(params, warmup)
    elif command in ("prepare", "cleanup"):
        options = []
    else:
        raise ConfigError(f"unknown acked_writes command {command!r}")
    return sysbench.lua_script_argv(
        binary, script, command, params.db, endpoint, f"--engine={params.engine}", *options
    )


def _run_options(params: AckedWritesParams, warmup: int) -> list[str]:
    argv = [
        f"--threads={params.threads}",
        f"--time={params.time + warmup}",
        f"--rate={params.rate}",
        f"--report-interval={params.report_interval}",
        f"--percentile={params.percentile}",
        f"--payload_bytes={params.payload_bytes}",
        f"--reconnect_timeout={params.reconnect_timeout}",
    ]
    if warmup:
        argv.append(f"--report-checkpoints={warmup}")
    return argv


# --- ack files -------------------------------------------------------------------------------

HEADER_RE = re.compile(r"^# thread=(?P<thread>\d+) first=(?P<first>\d+)$")
ACK_NAME_RE = re.compile(r"^acked-(?P<thread>\d+)\.ids$")


@dataclass(frozen=True)
class AckFile:
    """One thread's acknowledged ids."""

    thread: int
    first: int  # the first id this run used (acknowledged or not)
    ids: tuple[int, ...]  # in the order acknowledged (ascending)
    torn: bool = False  # the last line had no newline: not counted

    @property
    def range_end(self) -> int:
        """The last id the thread could ever use."""
        return (self.thread + 1) * THREAD_SPAN - 1


def parse_ack_file(name: str, text: str) -> AckFile:
    """The ids of one ``acked-<tid>.ids`` file; a torn last line is left out.

    Without a header (the client stopped before writing it), the thread comes from
    the file's name and the first id is the lowest one acknowledged.
    """
    lines = text.split("\n")
    torn = lines[-1] != ""
    complete = lines[:-1]  # the text after the last newline is a torn line, or ""
    thread = _thread_of(name)
    first: int | None = None
    ids: list[int] = []
    for line in complete:
        if m := HEADER_RE.match(line):
            thread, first = int(m["thread"]), int(m["first"])
        elif line.isdigit():
            ids.append(int(line))
    if first is None:
        first = min(ids, default=thread * THREAD_SPAN + 1)
    return AckFile(thread, first, tuple(ids), torn)


def _thread_of(name: str) -> int:
    m = ACK_NAME_RE.match(Path(name).name)
    return int(m["thread"]) if m else 0


# --- lookups ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class IdRange:
    low: int
    high: int  # inclusive


def lookup_ranges(ack: AckFile, batch: int = LOOKUP_BATCH) -> list[IdRange]:
    """Consecutive ranges covering the thread's ids from its first to the end of its range,
    each holding at most ``batch`` acknowledged ids (the last one also what came after)."""
    ids = sorted(ack.ids)
    ranges = []
    low = ack.first
    for start in range(batch, len(ids), batch):
        high = ids[start] - 1  # the next batch begins at its first acknowledged id
        ranges.append(IdRange(low, high))
        low = high + 1
    ranges.append(IdRange(low, ack.range_end))
    return ranges


def lookup_query(span: IdRange) -> str:
    """The present ids of one range (a primary-key range scan)."""
    return f"SELECT id FROM {TABLE} WHERE id BETWEEN {span.low} AND {span.high}"


def lookup_queries(acks: Iterable[AckFile], batch: int = LOOKUP_BATCH) -> list[str]:
    return [lookup_query(span) for ack in acks for span in lookup_ranges(ack, batch)]


@dataclass(frozen=True)
class LossCount:
    acked: int
    lost: tuple[int, ...]  # acknowledged ids not found, ascending
    unacked_present: int  # found, never acknowledged: in flight when the server went away
    torn_lines: int


def count_losses(acks: Iterable[AckFile], present: Iterable[int]) -> LossCount:
    """Acknowledged versus present: lost = acknowledged and missing."""
    acks = list(acks)
    acked = {i for ack in acks for i in ack.ids}
    found = set(present)
    return LossCount(
        acked=len(acked),
        lost=tuple(sorted(acked - found)),
        unacked_present=len(found - acked),
        torn_lines=sum(ack.torn for ack in acks),
    )


def loss_metrics(count: LossCount) -> dict[str, float]:
    return {
        "acked_commits": float(count.acked),
        "lost_commits": float(len(count.lost)),
        "unacked_present": float(count.unacked_present),
    }


def lost_table(count: LossCount) -> pd.DataFrame:
    """The lost ids and their threads, saved as the trial's lost_commits.csv (to look them
    up elsewhere: the binary log, a replica)."""
    return pd.DataFrame(
        {"id": list(count.lost), "thread": [i // THREAD_SPAN for i in count.lost]},
        dtype="int64",
    )


def loss_reason(count: LossCount, fail_on_loss: bool, files: int) -> str | None:
    """Why the trial fails: no ack file at all, or (when asked) a lost commit."""
    if files == 0:
        return "acked_writes: the client wrote no ack file"
    if fail_on_loss and count.lost:
        shown = ", ".join(map(str, count.lost[:5]))
        more = ", ..." if len(count.lost) > 5 else ""
        return f"acked_writes: {len(count.lost)} acknowledged commit(s) lost (ids {shown}{more})"
    return None


# --- the tool seam ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AckedWritesTool(sysbench.LuaScriptWorkload):
    """The acknowledged-writes workload as a :class:`~dbrig.tools.base.WorkloadTool` and a
    :class:`~dbrig.tools.base.ClientLogWorkload`."""

    params: AckedWritesParams
    key: ClassVar[str] = "acked_writes"
    info: ClassVar[ToolInfo] = INFO
    reconnects_itself: ClassVar[bool] = True  # the script's own reconnect (see reconnect())
    params_model: ClassVar[type[BaseModel]] = AckedWritesParams
    required_by_doctor: ClassVar[bool] = False  # sysbench's own entry already requires it
    concurrency_key: ClassVar[str | None] = "threads"
    client_log_glob: ClassVar[str] = ACK_FILE_GLOB

    def metrics(self) -> tuple[Metric, ...]:
        return produced_by(self.key) + produced_by(sysbench.SysbenchTool.key)

    @property
    def database(self) -> str:
        return self.params.db

    def inputs(self) -> dict[str, Path]:
        return {}

    @property
    def client_host(self) -> str | None:
        return None  # no host key: dbrig reads the client's ack files where it runs

    @property
    def interval_s(self) -> float | None:
        """Seconds between interval lines: the faults' throughput recovery reads them."""
        return float(self.params.report_interval) if self.params.report_interval else None

    def data_set_key(self) -> tuple:
        return ("acked_writes", self.params.db, self.params.engine.lower())

    def script_command(
        self, endpoint: Endpoint, command: sysbench.Command, binary: Path, warmup: int = 0
    ) -> list[str]:
        return build_command(self.params, endpoint, command, binary=str(binary), warmup=warmup)

    def analyse(self, output: str, returncode: int) -> Outcome:
        result = sysbench.parse(output)
        metrics = dict(result.summary)
        metrics["percentile"] = float(self.params.percentile)
        intervals = sysbench.intervals_frame(result)
        return Outcome(
            metrics,
            intervals if not intervals.empty else None,
            sysbench.failure_reason(result, returncode),
            {},
        )

    def client_log_queries(self, logs: Mapping[str, str]) -> list[str]:
        return lookup_queries(parse_ack_file(name, text) for name, text in logs.items())

    def evaluate_client_logs(self, logs: Mapping[str, str], found: Iterable[int]) -> Outcome:
        count = count_losses((parse_ack_file(n, t) for n, t in logs.items()), found)
        tables = {"lost_commits": lost_table(count)} if count.lost else {}
        reason = loss_reason(count, self.params.fail_on_loss, len(logs))
        return Outcome(loss_metrics(count), None, reason, tables)
