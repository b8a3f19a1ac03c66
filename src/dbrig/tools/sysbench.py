"""sysbench 1.0.20 driver: OLTP Lua tests against MySQL/MariaDB.

Command line
------------
``build_command(params, endpoint, command)`` returns
``[binary, test, command, --db-driver=mysql, <connection>, <test options>, *extra_args]``.
sysbench finds its two positional words (test, command) anywhere in argv and a
later ``--opt=value`` overrides an earlier one, so ``extra_args`` come last and win.

The password never appears in argv. When ``endpoint.client_options_file`` is set
the command carries ``--config-file=<path>``; sysbench 1.0.20 reads ``name=value``
lines from it (verified against a live server: a wrong password in the file gives
``error 1045 ... (using password: YES)``, no file gives ``(using password: NO)``).
Its reader is strict: no spaces around ``=``, ``#`` starts a comment, a value ends at
whitespace or ``,`` unless quoted with ``'`` or ``"`` (no escapes), 255 characters per
line. :func:`client_options_text` writes a line that survives all of that. Per the
1.0.20 source a missing file is only a perror() and sysbench goes on without password,
so the runner must write the file before starting sysbench.

Warm-up with ``--report-checkpoints`` (verified on 1.0.20, fixtures
``oltp_read_write_checkpoint_run.txt`` and ``..._checkpoint_histogram_run.txt``):
sysbench 1.0.20 has no ``--warmup-time``. ``warmup=W`` runs ``--time=W+T
--report-checkpoints=W``. At W seconds sysbench prints ``[ Ws ] Checkpoint report:``
and a full statistics block, then resets its counters, so in the final summary

- transactions, queries, events, errors, reconnects and every per-second rate
  count only the measured window (rates are divided by the time since the checkpoint);
- latency min/avg/max/percentile/sum, thread fairness and the ``--histogram`` table
  cover only the measured window (the histogram rows add up to the final events);
- ``total time:`` still counts from the start of the run (W+T), so
  :func:`parse` adds ``measured_time_s`` = total time minus the checkpoint's own
  total time.

Interval timestamps keep counting from the start of the run. The interval line
printed right after a checkpoint (same second) belongs to the warm-up and shows
``lat (ms,95%): 0.00`` because the checkpoint drained the interval histogram;
``intervals_frame`` marks intervals at or before the last checkpoint ``measured=False``.
An ``events`` limit also counts warm-up events, and with ``time=0`` there is no
clock to put a checkpoint on, so warm-up needs a time limit.

What ``parse(text)`` returns (:class:`SysbenchResult`)
------------------------------------------------------
- ``version``: ``"1.0.20"`` from the banner, or None.
- ``started``: ``Threads started!`` was printed (a ``run`` got going).
- ``complete``: a final summary (``total time:``) was found.
- ``summary``: the final, measured-window summary, ``dict[str, float]``, only the
  keys that were printed:

  ===========================================  =====================================
  transactions, tps                            count, per second
  queries_read, queries_write, queries_other,  count of queries; qps per second
  queries_total, qps
  ignored_errors, ignored_errors_per_s         count, per second
  reconnects, reconnects_per_s                 count, per second
  total_time_s                                 seconds since the run started
  measured_time_s                              seconds since the last checkpoint
                                               (derived; = total_time_s without one)
  events                                       total number of events
  latency_min_ms, latency_avg_ms,              milliseconds
  latency_max_ms, latency_pct_ms,
  latency_sum_ms
  events_per_thread_avg, _stddev               events
  exec_time_per_thread_avg_s, _stddev_s        seconds
  events_per_s                                 cpu: ``events per second``
  operations, operations_per_s,                memory: ``Total operations`` and
  mib_transferred, mib_per_s                   ``MiB transferred (... MiB/sec)``
  reads_per_s, writes_per_s, fsyncs_per_s,     fileio: ``File operations`` and
  read_mib_per_s, written_mib_per_s            ``Throughput`` (MiB/s)
  ===========================================  =====================================

- ``percentile``: the percentile the ``latency_pct_*`` values are for (``95`` from
  ``95th percentile:`` or ``lat (ms,95%)``; 0 when disabled), or None.
- ``intervals``: one :class:`Interval` per ``[ Ns ]`` line (rates per second over that
  interval, latency in ms); a rate-mode ``queue length`` line is merged into the
  interval of the same second.
- ``checkpoints``: one :class:`Checkpoint` (``t_s`` and a summary dict as above)
  per ``--report-checkpoints`` report.
- ``histogram``: ``((value_ms, count), ...)`` from ``--histogram=on``.
- ``fatal``: the text after ``FATAL: `` of every FATAL line, in order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

import pandas as pd
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from dbrig.endpoint import Credentials, Endpoint
from dbrig.errors import ConfigError
from dbrig.metrics import Metric, WorkUnit, produced_by
from dbrig.tools import lua_script
from dbrig.tools import sysbench_hw as hw
from dbrig.tools.base import (
    CLIENT_CPUS,
    CLIENT_HOST,
    CellCheck,
    ClientPlacement,
    CommandsProbe,
    DataEstimate,
    InputFolder,
    MeanLatency,
    Outcome,
    ServerWorkload,
    Setting,
    ToolInfo,
    WorkloadBase,
)
from dbrig.tools.lua_script import ScriptFiles, read_script_files
from dbrig.util.units import parse_size, to_float

INFO = ToolInfo(name="sysbench", binaries=("sysbench",), package="sysbench")
# Printed when every thread has connected: sysbench's clock (intervals, --time) starts here.
STARTED_LINE = "Threads started!"

OltpTest = Literal[
    "oltp_read_write",
    "oltp_read_only",
    "oltp_write_only",
    "oltp_point_select",
    "oltp_insert",
    "oltp_update_index",
    "oltp_update_non_index",
    "oltp_delete",
]
Command = Literal["prepare", "run", "cleanup"]
ScriptCommand = Literal["prepare", "cleanup", "check"]
OptionValue = str | int | float | bool

# Options of oltp_common.lua that change what `prepare` writes, with their defaults.
SCHEMA_OPTIONS: Mapping[str, str] = {
    "auto_inc": "on",
    "secondary": "off",
    "create_secondary": "on",
    "mysql_storage_engine": "innodb",
}
# Boolean Lua options of oltp_common.lua. sysbench 1.0.20 takes on/off, true/false
# or 1/0 for them and fails (rc 1) on anything else; dbrig renders them as on/off.
BOOL_OPTIONS = frozenset({"auto_inc", "secondary", "create_secondary", "skip_trx", "range_selects"})
# Options that first-class fields or the Endpoint set; `options` may not repeat them.
RESERVED_OPTIONS = frozenset(
    {
        "tables",
        "table_size",
        "threads",
        "time",
        "events",
        "rate",
        "report_interval",
        "report_checkpoints",
        "percentile",
        "histogram",
        "db_driver",
        "db_ps_mode",
        "config_file",
        "mysql_ignore_errors",
        "mysql_db",
        "mysql_user",
        "mysql_password",
        "mysql_host",
        "mysql_port",
        "mysql_socket",
    }
)
# Fields of the OLTP scripts that a hardware test does not take.
OLTP_ONLY_FIELDS = frozenset(
    {"tables", "table_size", "db", "db_ps_mode", "mysql_ignore_errors", "options"}
)
SCRIPT_ONLY_FIELDS = frozenset({"files", "needs_server", "commands", "normal_errors"})
FORBIDDEN_EXTRA_ARGS = ("--mysql-password", "--mysql_password", "--config-file", "--config_file")
OPTION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
ERROR_CODE = re.compile(r"^[A-Za-z0-9_]+$")
CONFIG_LINE_MAX = 255  # sysbench reads its --config-file with fgets(buf, 256)


class SysbenchParams(ClientPlacement):
    """The scenario's ``workload.sysbench`` block."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    test: OltpTest | hw.HardwareTest = Field(
        "oltp_read_write", description="Bundled OLTP Lua test or hardware test to run."
    )
    tables: int = Field(1, ge=1, description="Number of sbtest tables (--tables).")
    table_size: int = Field(10000, ge=1, description="Rows per table (--table-size).")
    threads: int = Field(1, ge=1, description="Client threads (--threads).")
    time: int = Field(
        10, ge=0, description="Measured run time in seconds (--time); 0 means no time limit."
    )
    events: int = Field(0, ge=0, description="Stop after this many events (--events); 0 = none.")
    rate: int = Field(0, ge=0, description="Target transactions per second (--rate); 0 = max.")
    report_interval: int = Field(
        1, ge=0, description="Seconds between interval lines (--report-interval); 0 = none."
    )
    percentile: int = Field(
        95, ge=0, le=100, description="Latency percentile to report (--percentile); 0 = off."
    )
    histogram: bool = Field(False, description="Print the latency histogram (--histogram).")
    db_ps_mode: Literal["auto", "disable"] = Field(
        "auto", description="Prepared statements usage (--db-ps-mode)."
    )
    mysql_ignore_errors: Literal["all"] | tuple[int | str, ...] | None = Field(
        None,
        description=(
            "Server errors a thread survives (--mysql-ignore-errors): 'all', a list of "
            "error codes, or None for sysbench's default (1213,1020,1205)."
        ),
    )
    db: str = Field("sbtest", min_length=1, description="Database holding the tables (--mysql-db).")
    options: dict[str, OptionValue] = Field(
        default_factory=dict,
        description=(
            "Test-specific Lua options, e.g. point_selects, range_size, auto_inc, "
            "secondary, create_secondary, mysql_storage_engine, skip_trx; "
            "booleans are passed as on/off."
        ),
    )
    extra_args: tuple[str, ...] = Field(
        (), description="Arguments appended verbatim, after everything dbrig generates."
    )
    script: str | None = Field(
        None,
        description=(
            "Your own Lua script (relative to the scenario file); not with test. Its folder "
            "is the workload: every .lua file there is kept with the run and on LUA_PATH."
        ),
    )
    files: tuple[str, ...] | None = Field(
        None,
        description=(
            "script: the files of its folder that make the workload (relative to it; "
            "default: every .lua file under it)."
        ),
    )
    needs_server: bool | None = Field(
        None,
        description=(
            "script: false for a script that never connects (default: it gets a server, "
            "like any database workload)."
        ),
    )
    commands: tuple[ScriptCommand, ...] | None = Field(
        None,
        description=(
            "script: which of prepare, cleanup, check it defines (default: asked of "
            "sysbench when the run is planned)."
        ),
    )
    normal_errors: float | None = Field(
        None,
        ge=0,
        le=1,
        description=(
            "script: the share of events its authors end in an error on purpose (a "
            "deliberate rollback); errors up to it are not counted in errors_per_s."
        ),
    )
    # The hardware tests' options, by sysbench's names (sysbench_hw.TEST_OPTIONS); None
    # leaves sysbench's own default.
    cpu_max_prime: int | None = Field(None, ge=1, description="cpu: primes up to (10000).")
    memory_block_size: str | int | None = Field(None, description="memory: block size (1K).")
    memory_total_size: str | int | None = Field(
        None, description="memory: total to transfer (100G)."
    )
    memory_oper: Literal["read", "write", "none"] | None = Field(
        None, description="memory: operation (write)."
    )
    memory_access_mode: Literal["seq", "rnd"] | None = Field(
        None, description="memory: access pattern (seq)."
    )
    thread_yields: int | None = Field(None, ge=1, description="threads: yields per lock (1000).")
    thread_locks: int | None = Field(None, ge=1, description="threads: locks per thread (8).")
    mutex_num: int | None = Field(None, ge=1, description="mutex: mutexes in the array (4096).")
    mutex_locks: int | None = Field(None, ge=1, description="mutex: locks per thread (50000).")
    mutex_loops: int | None = Field(
        None, ge=0, description="mutex: empty loops outside the lock (10000)."
    )
    file_num: int | None = Field(None, ge=1, description="fileio: number of files (128).")
    file_total_size: str | int | None = Field(
        None, description="fileio: total size of the files (2G)."
    )
    file_test_mode: Literal["seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw"] | None = Field(
        None, description="fileio: the test (required)."
    )
    file_io_mode: Literal["sync", "async", "mmap"] | None = Field(
        None, description="fileio: I/O mode (sync)."
    )
    file_extra_flags: Literal["sync", "dsync", "direct"] | None = Field(
        None, description="fileio: extra open() flag; direct bypasses the page cache."
    )
    file_fsync_freq: int | None = Field(
        None, ge=0, description="fileio: fsync() after this many requests (100); 0 = never."
    )
    file_fsync_all: bool | None = Field(None, description="fileio: fsync() after every write.")
    file_rw_ratio: float | None = Field(
        None, gt=0, description="fileio: reads/writes ratio for rndrw (1.5)."
    )
    file_block_size: str | int | None = Field(
        None, description="fileio: block size of each request (16K)."
    )
    directory: str | None = Field(
        None, description="fileio: where its files go (default: beside the run directory)."
    )
    host: str | None = CLIENT_HOST
    cpus: tuple[int, ...] | None = CLIENT_CPUS
    _script: ScriptFiles | None = PrivateAttr(None)

    @field_validator(*hw.SIZE_OPTIONS, "file_block_size")
    @classmethod
    def _is_a_size(cls, value: str | int | None) -> str | int | None:
        if value is not None and not parse_size(value):
            raise ValueError(f"expected a size such as 64M or 4096, got {value!r}")
        return value

    @field_validator("script")
    @classmethod
    def _script_exists(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Relative to the scenario file (the loader passes its folder as ``base_dir``)."""
        if value is None:
            return None
        base = (info.context or {}).get("base_dir")
        path = Path(value).expanduser()  # a suite cloned into ~/src: ~ as a shell reads it
        path = path if base is None else Path(base) / path
        if not path.is_file():
            raise ValueError(f"no such Lua script: {path}")
        return str(path.resolve())

    @field_validator("directory")
    @classmethod
    def _directory_is_absolute_or_relative_to_file(
        cls, value: str | None, info: ValidationInfo
    ) -> str | None:
        if value is None:
            return None
        base = (info.context or {}).get("base_dir")
        return str(Path(value) if base is None else Path(base) / value)

    @model_validator(mode="after")
    def _test_and_its_options(self) -> SysbenchParams:
        given = {name: getattr(self, name) for name in hw.ALL_TEST_OPTIONS}
        if self.script is not None:
            if "test" in self.model_fields_set:
                raise ValueError("give test or script, not both")
            wrong = [n for n, v in given.items() if v is not None]
            if wrong:
                raise ValueError(f"{wrong[0]}: an option of a hardware test, not of a script")
            # Reading the script's files is validation, like reading the YAML: the tool
            # stays pure.
            self._script = read_script_files(Path(self.script), self.files)
            db_fields = sorted({"db", "db_ps_mode", "mysql_ignore_errors"} & self.model_fields_set)
            if db_fields and self.needs_server is False:
                raise ValueError(f"{db_fields[0]}: the script declares needs_server: false")
            return self
        script_only = sorted(SCRIPT_ONLY_FIELDS & self.model_fields_set)
        if script_only:
            raise ValueError(f"{script_only[0]}: a key of script:, not of test {self.test}")
        if self.test not in hw.TEST_OPTIONS:
            wrong = [n for n, v in given.items() if v is not None]
            if wrong:
                raise ValueError(f"{wrong[0]}: an option of a hardware test, not of {self.test}")
            return self
        wrong = hw.wrong_test_options(self.test, given)
        if wrong:
            takes = ", ".join(hw.TEST_OPTIONS[self.test])
            raise ValueError(f"{wrong[0]}: not an option of test {self.test} (it takes: {takes})")
        oltp_only = sorted(OLTP_ONLY_FIELDS & self.model_fields_set)
        if oltp_only:
            raise ValueError(f"{oltp_only[0]}: an OLTP option; test {self.test} does not take it")
        if self.test == "fileio" and self.file_test_mode is None:
            raise ValueError("test fileio needs file_test_mode (seqwr, seqrd, rndrd, rndwr, ...)")
        return self

    @field_validator("mysql_ignore_errors")
    @classmethod
    def _error_codes_are_plain(cls, value: object) -> object:
        if isinstance(value, tuple):
            for code in value:
                if isinstance(code, str) and not ERROR_CODE.match(code):
                    raise ValueError(f"error code {code!r} must be letters, digits or '_'")
        return value

    @field_validator("options")
    @classmethod
    def _options_are_lua_options(cls, value: dict[str, OptionValue]) -> dict[str, OptionValue]:
        for name, option in value.items():
            if not OPTION_NAME.match(name):
                raise ValueError(f"option name {name!r} must be snake_case, e.g. point_selects")
            if name in RESERVED_OPTIONS:
                raise ValueError(f"{name!r} is set by its own field or the server, not options")
            if name in BOOL_OPTIONS and _as_bool(option) is None:
                raise ValueError(f"{name} must be true/false or on/off, got {option!r}")
        return value

    @field_validator("extra_args")
    @classmethod
    def _no_secrets_in_extra_args(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arg in value:
            if arg.startswith(FORBIDDEN_EXTRA_ARGS):
                raise ValueError(f"{arg.split('=')[0]} is managed by dbrig (no passwords in argv)")
        return value

    @model_validator(mode="after")
    def _has_a_limit(self) -> SysbenchParams:
        if self.time == 0 and self.events == 0:
            raise ValueError("time: 0 and events: 0 together would make sysbench run forever")
        return self


TRUE_WORDS = ("on", "true", "1")
FALSE_WORDS = ("off", "false", "0")


def _as_bool(value: OptionValue) -> bool | None:
    if isinstance(value, bool):
        return value
    word = str(value).lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


def render_option(value: OptionValue, name: str = "") -> str:
    """How sysbench wants an option value: booleans (and boolean options) as on/off."""
    flag = _as_bool(value) if name in BOOL_OPTIONS or isinstance(value, bool) else None
    if flag is not None:
        return "on" if flag else "off"
    return str(value)


def prepare_key(params: SysbenchParams) -> tuple:
    """What `prepare` depends on: cells with equal keys can share one datadir snapshot.

    The test name is left out: all eight OLTP tests prepare through oltp_common.lua.
    Schema options are compared after defaults are filled in, so an explicit
    ``auto_inc: true`` equals leaving it out. ``extra_args`` are included because
    dbrig cannot tell what they change.
    """
    schema = {
        name: render_option(params.options.get(name, default), name)
        for name, default in SCHEMA_OPTIONS.items()
    }
    return (
        params.db,
        params.tables,
        params.table_size,
        tuple(sorted(schema.items())),
        params.extra_args,
    )


def client_options_text(password: str) -> str:
    """The content of the 0600 ``--config-file`` that gives sysbench the password."""
    if "\n" in password or "\r" in password or "\0" in password:
        raise ConfigError("the sysbench password cannot contain a line break or NUL")
    if re.search(r"[\s,#'\"]", password) is None:
        line = f"mysql-password={password}"
    elif "'" not in password:
        line = f"mysql-password='{password}'"
    elif '"' not in password:
        line = f'mysql-password="{password}"'
    else:
        raise ConfigError(
            "sysbench's --config-file cannot hold a password with both ' and \" in it",
            hint="choose a password without one of them",
        )
    if len(line) > CONFIG_LINE_MAX:
        raise ConfigError("the password is too long for sysbench's --config-file (255 chars)")
    return line + "\n"


def build_command(
    params: SysbenchParams,
    endpoint: Endpoint,
    command: Command,
    *,
    binary: str = "sysbench",
    warmup: int = 0,
) -> list[str]:
    """The argv for ``sysbench <test> <command>``; see the module docstring for warm-up."""
    if command not in ("prepare", "run", "cleanup"):
        raise ConfigError(f"unknown sysbench command {command!r}")
    if params.script is not None:
        return _script_command(params, endpoint, command, binary, warmup)
    if params.test in hw.TEST_OPTIONS:
        return _hardware_command(params, command, binary, warmup)
    if command == "prepare":
        options = _prepare_options(params)
    elif command == "run":
        options = _run_options(params, warmup)
    elif command == "cleanup":
        options = [f"--tables={params.tables}"]
    else:
        raise ConfigError(f"unknown sysbench command {command!r}")
    return [
        binary,
        params.test,
        command,
        *connection_options(params.db, endpoint),
        *options,
        *params.extra_args,
    ]


def _hardware_command(
    params: SysbenchParams, command: Command, binary: str, warmup: int
) -> list[str]:
    """``sysbench cpu run --threads=.. --cpu-max-prime=..``: no database options at all."""
    values = hardware_values(params)
    if params.test == "fileio":
        files = hw.fileio_file_flags(values)
        rest = {k: v for k, v in values.items() if k not in ("file_num", "file_total_size")}
        test_options = [*files, *hw.test_flags("fileio", rest)]
        if command != "run":
            test_options = files  # prepare and cleanup only need to know the files
    else:
        test_options = hw.test_flags(params.test, values)
    generic = _generic_run_options(params, warmup) if command == "run" else []
    return [binary, params.test, command, *generic, *test_options, *params.extra_args]


def hardware_values(params: SysbenchParams) -> dict[str, object]:
    """The hardware tests' options as set in the scenario (None when not given)."""
    return {name: getattr(params, name) for name in hw.ALL_TEST_OPTIONS}


def _script_command(
    params: SysbenchParams, endpoint: Endpoint, command: Command, binary: str, warmup: int
) -> list[str]:
    """``env LUA_PATH=<folder>/?.lua;... sysbench <folder>/my.lua run``: the script's folder
    on the search path, and connection options always (a script with no server gets the
    endpoint of none: nothing it could reach)."""
    assert params.script is not None
    script = Path(params.script)
    generic = (
        _generic_run_options(params, warmup)
        if command == "run"
        else [f"--threads={params.threads}"]
    )
    if command == "run":
        generic.append(f"--db-ps-mode={params.db_ps_mode}")
        if params.mysql_ignore_errors is not None:
            ignore = _ignore_errors_value(params.mysql_ignore_errors)
            generic.append(f"--mysql-ignore-errors={ignore}")
    # Scripts built on oltp_common.lua read --tables and --table-size: passed when given.
    sizes = [
        f"--{name.replace('_', '-')}={getattr(params, name)}"
        for name in ("tables", "table_size")
        if name in params.model_fields_set
    ]
    options = [f"--{name}={render_option(value, name)}" for name, value in params.options.items()]
    return [
        *lua_script.env_prefix(script.parent),
        binary,
        str(script),
        command,
        *connection_options(params.db, endpoint),
        *generic,
        *sizes,
        *options,
        *params.extra_args,
    ]


def _generic_run_options(params: SysbenchParams, warmup: int) -> list[str]:
    """sysbench's own run options, common to every test."""
    return [
        f"--threads={params.threads}",
        *_time_options(params, warmup),
        f"--events={params.events}",
        f"--rate={params.rate}",
        f"--report-interval={params.report_interval}",
        f"--percentile={params.percentile}",
        f"--histogram={render_option(params.histogram)}",
    ]


def connection_options(db: str, endpoint: Endpoint) -> list[str]:
    """sysbench's MySQL driver options: where to connect, as whom, which database, and the
    0600 option file holding the password (never the password itself)."""
    argv = ["--db-driver=mysql"]
    if endpoint.socket:
        argv.append(f"--mysql-socket={endpoint.socket}")
    if endpoint.host:
        # With a socket too only for the endpoint of no server (endpoint.py): a socket that
        # does not exist, and a closed port should a script choose TCP itself.
        argv.append(f"--mysql-host={endpoint.host}")
        if endpoint.port is not None:
            argv.append(f"--mysql-port={endpoint.port}")
    argv += [f"--mysql-user={endpoint.user}", f"--mysql-db={db}"]
    if endpoint.client_options_file is not None:
        argv.append(f"--config-file={endpoint.client_options_file}")
    return argv


def _prepare_options(params: SysbenchParams) -> list[str]:
    schema = [
        f"--{name}={render_option(value, name)}"
        for name, value in params.options.items()
        if name in SCHEMA_OPTIONS
    ]
    return [
        f"--tables={params.tables}",
        f"--table-size={params.table_size}",
        # prepare gives each thread whole tables, so more threads than tables idle
        f"--threads={min(params.threads, params.tables)}",
        *schema,
    ]


def _run_options(params: SysbenchParams, warmup: int) -> list[str]:
    argv = [
        f"--tables={params.tables}",
        f"--table-size={params.table_size}",
        *_generic_run_options(params, warmup),
        f"--db-ps-mode={params.db_ps_mode}",
    ]
    if params.mysql_ignore_errors is not None:
        argv.append(f"--mysql-ignore-errors={_ignore_errors_value(params.mysql_ignore_errors)}")
    argv += [f"--{name}={render_option(value, name)}" for name, value in params.options.items()]
    return argv


def _time_options(params: SysbenchParams, warmup: int) -> list[str]:
    if warmup < 0:
        raise ConfigError(f"warmup must be >= 0 seconds, got {warmup}")
    if warmup == 0:
        return [f"--time={params.time}"]
    if params.time == 0:
        raise ConfigError(
            "warmup needs a time limit: sysbench 1.0.20 warms up with --report-checkpoints",
            hint="set workload.sysbench.time > 0 or warmup: 0",
        )
    return [f"--time={warmup + params.time}", f"--report-checkpoints={warmup}"]


def _ignore_errors_value(value: str | tuple[int | str, ...]) -> str:
    if isinstance(value, str):
        return value
    return ",".join(str(code) for code in value)


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Interval:
    """One ``[ Ns ]`` line: rates per second over the interval, latency in ms."""

    t_s: float
    threads: int | None = None
    tps: float | None = None
    qps: float | None = None
    reads_per_s: float | None = None
    writes_per_s: float | None = None
    other_per_s: float | None = None
    latency_pct_ms: float | None = None
    errors_per_s: float | None = None
    reconnects_per_s: float | None = None
    events_per_s: float | None = None  # cpu
    read_mib_per_s: float | None = None  # fileio
    written_mib_per_s: float | None = None  # fileio
    fsyncs_per_s: float | None = None  # fileio
    mib_per_s: float | None = None  # memory
    queue_length: int | None = None  # --rate
    concurrency: int | None = None  # --rate


@dataclass(frozen=True)
class Checkpoint:
    """A ``--report-checkpoints`` report: ``t_s`` seconds into the run, then a reset."""

    t_s: float
    summary: dict[str, float]


@dataclass(frozen=True)
class SysbenchResult:
    version: str | None = None
    started: bool = False
    complete: bool = False
    summary: dict[str, float] = field(default_factory=dict)
    percentile: int | None = None
    intervals: tuple[Interval, ...] = ()
    checkpoints: tuple[Checkpoint, ...] = ()
    histogram: tuple[tuple[float, int], ...] = ()
    fatal: tuple[str, ...] = ()


NUM = r"[-+]?(?:\d+(?:\.\d*)?|inf|nan)"

VERSION_RE = re.compile(r"^sysbench (\d[\w.\-]*)")
FATAL_RE = re.compile(r"^FATAL: (.*)$")
STAMP_RE = re.compile(r"^\[\s*(\d+(?:\.\d+)?)s\s*\]\s+(.*)$")
CHECKPOINT_RE = re.compile(r"^Checkpoint report:")
HISTOGRAM_HEAD_RE = re.compile(r"^Latency histogram")
HISTOGRAM_ROW_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s+\|\**\s+(\d+)\s*$")
PERCENTILE_LABEL_RE = re.compile(r"\(ms,(\d+)%\)")
# The last line of every statistics block, checkpoint or final.
BLOCK_END_RE = re.compile(r"^\s+execution time \(avg/stddev\):")

# One pattern per summary line; group names are the raw keys (stage 1).
SUMMARY_PATTERNS = tuple(
    re.compile(p)
    for p in (
        rf"^\s+read:\s+(?P<queries_read>{NUM})\s*$",
        rf"^\s+write:\s+(?P<queries_write>{NUM})\s*$",
        rf"^\s+other:\s+(?P<queries_other>{NUM})\s*$",
        rf"^\s+total:\s+(?P<queries_total>{NUM})\s*$",
        rf"^\s+transactions:\s+(?P<transactions>{NUM})\s+\((?P<tps>{NUM}) per sec\.\)",
        rf"^\s+queries:\s+{NUM}\s+\((?P<qps>{NUM}) per sec\.\)",
        rf"^\s+ignored errors:\s+(?P<ignored_errors>{NUM})\s+"
        rf"\((?P<ignored_errors_per_s>{NUM}) per sec\.\)",
        rf"^\s+reconnects:\s+(?P<reconnects>{NUM})\s+\((?P<reconnects_per_s>{NUM}) per sec\.\)",
        rf"^\s+total time:\s+(?P<total_time_s>{NUM})s\s*$",
        rf"^\s+total number of events:\s+(?P<events>{NUM})\s*$",
        rf"^\s+min:\s+(?P<latency_min_ms>{NUM})\s*$",
        rf"^\s+avg:\s+(?P<latency_avg_ms>{NUM})\s*$",
        rf"^\s+max:\s+(?P<latency_max_ms>{NUM})\s*$",
        rf"^\s+(?P<percentile>\d+)th percentile:\s+(?P<latency_pct_ms>{NUM})\s*$",
        r"^\s+(?P<percentile_disabled>percentile stats):\s+disabled",
        rf"^\s+sum:\s+(?P<latency_sum_ms>{NUM})\s*$",
        rf"^\s+events \(avg/stddev\):\s+(?P<events_per_thread_avg>{NUM})/"
        rf"(?P<events_per_thread_stddev>{NUM})",
        rf"^\s+execution time \(avg/stddev\):\s+(?P<exec_time_per_thread_avg_s>{NUM})/"
        rf"(?P<exec_time_per_thread_stddev_s>{NUM})",
        rf"^\s+events per second:\s+(?P<events_per_s>{NUM})",
        rf"^Total operations:\s+(?P<operations>{NUM})\s+\((?P<operations_per_s>{NUM}) per second\)",
        rf"^(?P<mib_transferred>{NUM}) MiB transferred \((?P<mib_per_s>{NUM}) MiB/sec\)",
        rf"^\s+reads/s:\s+(?P<reads_per_s>{NUM})",
        rf"^\s+writes/s:\s+(?P<writes_per_s>{NUM})",
        rf"^\s+fsyncs/s:\s+(?P<fsyncs_per_s>{NUM})",
        rf"^\s+read, MiB/s:\s+(?P<read_mib_per_s>{NUM})",
        rf"^\s+written, MiB/s:\s+(?P<written_mib_per_s>{NUM})",
    )
)

# Fields an interval line may carry; group names are Interval field names.
INTERVAL_PATTERNS = tuple(
    re.compile(p)
    for p in (
        r"\bthds: (?P<threads>\d+)",
        rf"\btps: (?P<tps>{NUM})",
        rf"\bqps: (?P<qps>{NUM})",
        rf"\(r/w/o: (?P<reads_per_s>{NUM})/(?P<writes_per_s>{NUM})/(?P<other_per_s>{NUM})\)",
        rf"\blat(?:ency)? \(ms,\d+%\): (?P<latency_pct_ms>{NUM})",
        rf"\berr/s:? (?P<errors_per_s>{NUM})",
        rf"\breconn/s: (?P<reconnects_per_s>{NUM})",
        rf"\beps: (?P<events_per_s>{NUM})",
        rf"\breads: (?P<read_mib_per_s>{NUM}) MiB/s",
        rf"\bwrites: (?P<written_mib_per_s>{NUM}) MiB/s",
        rf"\bfsyncs: (?P<fsyncs_per_s>{NUM})/s",
        rf"^(?P<mib_per_s>{NUM}) MiB/sec\s*$",
        r"\bqueue length: (?P<queue_length>\d+), concurrency: (?P<concurrency>\d+)",
    )
)
INT_INTERVAL_FIELDS = frozenset({"threads", "queue_length", "concurrency"})


@dataclass
class _RawBlock:
    """Stage 1 of one statistics block: raw strings under normalised keys."""

    t_s: str | None = None
    values: dict[str, str] = field(default_factory=dict)


@dataclass
class _RawOutput:
    """Stage 1 of a whole output: every recognised line as raw strings."""

    version: str | None = None
    started: bool = False
    fatal: list[str] = field(default_factory=list)
    intervals: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    interval_percentile: str | None = None
    checkpoints: list[_RawBlock] = field(default_factory=list)
    final: _RawBlock = field(default_factory=_RawBlock)
    histogram: list[tuple[str, str]] = field(default_factory=list)


def parse(text: str) -> SysbenchResult:
    """Parse sysbench's combined stdout/stderr; never raises on odd or partial output."""
    return _convert(_scan(text))


def _scan(text: str) -> _RawOutput:
    raw = _RawOutput()
    open_checkpoint: _RawBlock | None = None
    in_histogram = False
    for line in text.splitlines():
        if raw.version is None and (m := VERSION_RE.match(line)):
            raw.version = m.group(1)
        elif m := FATAL_RE.match(line):
            raw.fatal.append(m.group(1).strip())
        elif line.startswith(STARTED_LINE):
            raw.started = True
        elif HISTOGRAM_HEAD_RE.match(line):
            in_histogram = True
        elif in_histogram and (m := HISTOGRAM_ROW_RE.match(line)):
            raw.histogram.append((m.group(1), m.group(2)))
        elif m := STAMP_RE.match(line):
            in_histogram = False
            if CHECKPOINT_RE.match(m.group(2)):
                open_checkpoint = _RawBlock(t_s=m.group(1))
                raw.checkpoints.append(open_checkpoint)
            else:
                _scan_interval(raw, m.group(1), m.group(2))
        else:
            if in_histogram and not line.strip().startswith("value"):
                in_histogram = False
            block = open_checkpoint or raw.final
            block.values.update(_summary_fields(line))
            if open_checkpoint is not None and BLOCK_END_RE.match(line):
                open_checkpoint = None
    return raw


def _scan_interval(raw: _RawOutput, t_s: str, body: str) -> None:
    values: dict[str, str] = {}
    for pattern in INTERVAL_PATTERNS:
        if m := pattern.search(body):
            values.update(m.groupdict())
    if not values:
        return
    if raw.interval_percentile is None and (m := PERCENTILE_LABEL_RE.search(body)):
        raw.interval_percentile = m.group(1)
    raw.intervals.append((t_s, values))


def _summary_fields(line: str) -> dict[str, str]:
    for pattern in SUMMARY_PATTERNS:
        if m := pattern.match(line):
            return m.groupdict()
    return {}


def _convert(raw: _RawOutput) -> SysbenchResult:
    checkpoints = tuple(
        Checkpoint(t_s=float(block.t_s or 0), summary=_summary(block.values))
        for block in raw.checkpoints
    )
    summary = _summary(raw.final.values)
    if "total_time_s" in summary:
        since = checkpoints[-1].summary.get("total_time_s", 0.0) if checkpoints else 0.0
        summary["measured_time_s"] = round(summary["total_time_s"] - since, 4)
    return SysbenchResult(
        version=raw.version,
        started=raw.started,
        complete="total_time_s" in summary,
        summary=summary,
        percentile=_percentile(raw),
        intervals=_intervals(raw.intervals),
        checkpoints=checkpoints,
        histogram=tuple((float(value), int(count)) for value, count in raw.histogram),
        fatal=tuple(raw.fatal),
    )


def _summary(values: Mapping[str, str]) -> dict[str, float]:
    return {
        key: float(value)
        for key, value in values.items()
        if key not in ("percentile", "percentile_disabled")
    }


def _percentile(raw: _RawOutput) -> int | None:
    final = raw.final.values
    if "percentile" in final:
        return int(final["percentile"])
    if "percentile_disabled" in final:
        return 0
    if raw.interval_percentile is not None:
        return int(raw.interval_percentile)
    for block in raw.checkpoints:
        if "percentile" in block.values:
            return int(block.values["percentile"])
    return None


def _intervals(lines: Iterable[tuple[str, dict[str, str]]]) -> tuple[Interval, ...]:
    result: list[Interval] = []
    for t_s, values in lines:
        typed = {
            key: int(value) if key in INT_INTERVAL_FIELDS else float(value)
            for key, value in values.items()
        }
        t = float(t_s)
        if result and result[-1].t_s == t and set(typed) <= {"queue_length", "concurrency"}:
            # --rate prints "[ 1s ] queue length: .." as a second line for the same second
            result[-1] = replace(result[-1], **typed)
        else:
            result.append(Interval(t_s=t, **typed))
    return tuple(result)


OLTP_INTERVAL_COLUMNS = (
    "t_s",
    "threads",
    "tps",
    "qps",
    "reads_per_s",
    "writes_per_s",
    "other_per_s",
    "latency_pct_ms",
    "errors_per_s",
    "reconnects_per_s",
)


def intervals_frame(result: SysbenchResult) -> pd.DataFrame:
    """One row per interval line.

    Columns: the OLTP ones (``t_s`` .. ``reconnects_per_s``) always, any other
    :class:`Interval` field that at least one line carries (cpu ``events_per_s``,
    fileio and memory MiB/s, ``--rate`` queue), and ``measured``: False for intervals
    at or before the last checkpoint (the warm-up).
    """
    extra = [
        f.name
        for f in fields(Interval)
        if f.name not in OLTP_INTERVAL_COLUMNS
        and any(getattr(i, f.name) is not None for i in result.intervals)
    ]
    columns = [*OLTP_INTERVAL_COLUMNS, *extra]
    rows = [{c: getattr(i, c) for c in columns} for i in result.intervals]
    frame = pd.DataFrame(rows, columns=columns)
    for column in columns:
        if column in INT_INTERVAL_FIELDS:
            frame[column] = frame[column].astype("Int64")
        else:
            frame[column] = frame[column].astype("float64")
    warmup_end = result.checkpoints[-1].t_s if result.checkpoints else None
    frame["measured"] = (
        frame["t_s"] > warmup_end if warmup_end is not None else pd.Series(True, index=frame.index)
    ).astype(bool)
    _blank_percentile_after_checkpoints(frame, [c.t_s for c in result.checkpoints])
    return frame


def _blank_percentile_after_checkpoints(frame: pd.DataFrame, checkpoints: list[float]) -> None:
    """A checkpoint resets the latency histogram, so the interval line printed right after
    it (same timestamp) reports its percentile from an empty histogram as 0.00: that is
    "unknown", not zero latency."""
    for t in checkpoints:
        after = frame.index[frame["t_s"] >= t]
        if len(after) and frame.at[after[0], "latency_pct_ms"] == 0:
            frame.at[after[0], "latency_pct_ms"] = float("nan")


# FATAL lines that only say "something above failed".
GENERIC_FATAL_RE = re.compile(
    r"function failed|initialization failed|\(\) failed$|unable to connect|aborting\.\.\.$"
)
# "`thread_run' function failed: ./bad.lua:3: attempt to index local 't' (a nil value)"
LUA_ERROR_RE = re.compile(r"function failed: (\S+\.lua:\d+: .+)$")
ERROR_FATAL_RE = re.compile(r"\berror:? \d+", re.IGNORECASE)


def failure_reason(result: SysbenchResult, returncode: int) -> str | None:
    """None for a good run, else a one-line reason for the report."""
    stalled = result.started and not result.complete
    if returncode == 0 and not stalled:
        return None
    if result.fatal:
        return _main_fatal(result.fatal)
    if returncode < 0 or returncode > 128:
        return f"killed by signal / no summary (rc={returncode})"
    if stalled:
        return f"no summary (rc={returncode})"
    return f"exit code {returncode}"


def _main_fatal(lines: tuple[str, ...]) -> str:
    for line in lines:
        if ERROR_FATAL_RE.search(line):
            return line.split(" for query ", 1)[0]
    for line in lines:
        if not GENERIC_FATAL_RE.search(line):
            return line
    for line in lines:
        if m := LUA_ERROR_RE.search(line):
            return m.group(1)  # the script's own error: "my.lua:3: attempt to index ..."
    return lines[0]


# --- the tool seam ---------------------------------------------------------------------------

# The units of work of its summary (and of the Lua scripts', which print the same one).
TRANSACTION = WorkUnit("txn", count="transactions")
QUERY = WorkUnit("query", count="queries_total", costs=("server_cpu_us",))
MEAN_LATENCY = MeanLatency(
    "latency_avg_ms",
    "avg latency (ms)",
    "sysbench ran without a percentile (percentile: 0): the knee uses the mean latency",
)
ROW_BYTES = 230  # an sbtest row with its primary and secondary index, roughly


def estimated_data(setting: Setting) -> DataEstimate | None:
    """An OLTP cell's sbtest tables: ``tables x table_size x ~230 B`` (as the cell saved
    them: no estimate when the block leaves a key out)."""
    if not str(hw.cell_test(setting) or "").startswith("oltp_"):
        return None  # a hardware test or a Lua script: no sbtest tables to size
    tables, rows = to_float(setting("tables")), to_float(setting("table_size"))
    if tables is None or rows is None:
        return None
    how = f"{tables:.0f} table{'s' if tables != 1 else ''} x {rows:,.0f} rows x ~{ROW_BYTES} B"
    return DataEstimate(tables * rows * ROW_BYTES, how)


@dataclass(frozen=True)
class SysbenchTool(WorkloadBase):
    """sysbench as a :class:`~dbrig.tools.base.WorkloadTool`."""

    params: SysbenchParams
    key: ClassVar[str] = "sysbench"
    info: ClassVar[ToolInfo] = INFO
    params_model: ClassVar[type[BaseModel]] = SysbenchParams
    required_by_doctor: ClassVar[bool] = True
    concurrency_key: ClassVar[str | None] = "threads"
    space_key: ClassVar[str | None] = "file_total_size"  # fileio's files (space_needed)
    size_key: ClassVar[str] = "table_size"  # the OLTP tests' data set (data_set_bytes)
    start_line: ClassVar[str | None] = STARTED_LINE  # where its clock starts (startwatch)
    units_of_work: ClassVar[tuple[WorkUnit, ...]] = (TRANSACTION, QUERY)
    mean_latency: ClassVar[MeanLatency | None] = MEAN_LATENCY
    cell_checks: ClassVar[tuple[CellCheck, ...]] = hw.CELL_CHECKS
    estimated_data = staticmethod(estimated_data)

    def metrics(self) -> tuple[Metric, ...]:
        return produced_by(self.key)

    @property
    def database(self) -> str:
        return self.params.db

    @property
    def title(self) -> str:
        """What runs, in a few words: ``sysbench cpu``, ``sysbench my_workload.lua``."""
        what = Path(self.params.script).name if self.params.script else self.params.test
        return f"sysbench {what}"

    @property
    def needs_server(self) -> bool:
        if self.params.script is not None:
            # Declared, never guessed: a script connects unless its scenario says not.
            return self.params.needs_server is not False
        return self.params.test not in hw.TEST_OPTIONS

    @property
    def work_root(self) -> str | None:
        return self.params.directory

    def space_needed(self) -> int:
        if self.params.test == "fileio" and self.params.script is None:
            return hw.fileio_total_bytes(hardware_values(self.params))
        return 0

    def data_set_bytes(self) -> int | None:
        """An OLTP test's sbtest tables, as the report sizes them (:func:`estimated_data`);
        None for a script (its tables are its own) and a hardware test (no tables)."""
        if self.params.script is not None or not self.params.test.startswith("oltp_"):
            return None
        return self.params.tables * self.params.table_size * ROW_BYTES

    def inputs(self) -> dict[str, Path]:
        return {"script": Path(self.params.script)} if self.params.script else {}

    def input_folder(self) -> InputFolder | None:
        files = self.params._script
        if files is None:
            return None
        return InputFolder(files.name, files.root, files.files, files.digest, files.main)

    def at_copy(self, root: Path) -> SysbenchParams:
        files = self.params._script
        assert files is not None, "at_copy of a block with no script"
        return self.params.model_copy(update={"script": str(files.main_at(root))})

    def search_path(self, root: Path) -> dict[str, str]:
        return {lua_script.SEARCH_PATH_VAR: lua_script.lua_path(root)}

    def commands_probe(self, binary: Path, root: Path, empty: Path) -> CommandsProbe | None:
        files = self.params._script
        if files is None or self.params.commands is not None:
            return None
        argv = lua_script.probe_argv(str(binary), root, empty)
        return CommandsProbe(argv, lua_script.probe_source(files.main_at(root)))

    def probed(self, output: str, root: Path) -> SysbenchParams:
        files = self.params._script
        assert files is not None, "probed of a block with no script"
        found = lua_script.parse_probe(output, files, root)
        if found.error is not None:
            raise ConfigError(
                f"workload.sysbench.script: {found.error}",
                hint="or declare its commands (commands: [prepare, cleanup]) to skip asking",
            )
        commands = tuple(c for c in lua_script.SCRIPT_COMMANDS if c in found.commands)
        return self.params.model_copy(update={"commands": commands})

    def data_set_key(self) -> tuple:
        if self.params._script is not None:
            digest = self.params._script.digest  # every file of its folder, not the main one
            options = tuple(sorted((k, str(v)) for k, v in self.params.options.items()))
            sizes = (self.params.tables, self.params.table_size, self.params.db)
            return ("sysbench", "script", digest, sizes, options, self.params.extra_args)
        if self.params.test == "fileio":
            values = hardware_values(self.params)
            size = hw.fileio_total_bytes(values)
            files = values.get("file_num") or hw.FILEIO_DEFAULT_NUM
            # seqwr truncates and rewrites the files (sysbench_hw docstring): its own folder.
            kind = "fileio-seqwr" if _creates_its_files(self.params) else "fileio"
            return ("sysbench", kind, files, size, self.params.directory)
        if self.params.test in hw.TEST_OPTIONS:
            return ("sysbench", self.params.test)  # nothing to prepare
        return ("sysbench", *prepare_key(self.params))

    def prepare_argv(self, endpoint: Endpoint, binary: Path) -> list[str] | None:
        if not self._has_command("prepare"):
            return None
        return build_command(self.params, endpoint, "prepare", binary=str(binary))

    def cleanup_argv(self, endpoint: Endpoint, binary: Path) -> list[str] | None:
        if not self._has_command("cleanup"):
            return None
        return build_command(self.params, endpoint, "cleanup", binary=str(binary))

    def check_argv(self, endpoint: Endpoint, binary: Path) -> list[str] | None:
        if self.params.script is None or not self._has_command("check"):
            return None
        argv = _script_command(self.params, endpoint, "prepare", str(binary), 0)
        return [*argv[:4], "check", *argv[5:]]  # env LUA_PATH=.. sysbench script check ...

    def _has_command(self, command: str) -> bool:
        if self.params.script is not None:  # declared, or asked of sysbench by the plan
            return command in (self.params.commands or ())
        if self.params.test in hw.TEST_OPTIONS:
            # fileio's files are removed with dbrig's own directory, so no cleanup runs.
            fileio = self.params.test == "fileio" and not _creates_its_files(self.params)
            return fileio and command == "prepare"
        return True

    def client_options(self, credentials: Credentials) -> str | None:
        return client_options_text(credentials.password) if credentials.password else None

    def run_argv(self, endpoint: Endpoint, binary: Path, warmup: int) -> list[str]:
        return build_command(self.params, endpoint, "run", binary=str(binary), warmup=warmup)

    def expected_seconds(self, warmup: int) -> float | None:
        return float(self.params.time + warmup) if self.params.time else None

    @property
    def interval_s(self) -> float | None:
        return float(self.params.report_interval) if self.params.report_interval else None

    def resumed_argv(self, endpoint: Endpoint, binary: Path, seconds: int) -> list[str]:
        rest = self.params.model_copy(update={"time": max(1, seconds), "events": 0})
        return build_command(rest, endpoint, "run", binary=str(binary), warmup=0)

    def analyse(self, output: str, returncode: int) -> Outcome:
        result = parse(output)
        metrics = dict(result.summary)
        if result.percentile is not None:
            metrics["percentile"] = float(result.percentile)
        if _derives_event_rate(self.params) and "events_per_s" not in metrics:
            events, window = metrics.get("events"), metrics.get("measured_time_s")
            if events is not None and window:
                metrics["events_per_s"] = events / window
        for per_s in ("ignored_errors_per_s", "reconnects_per_s"):
            if per_s in metrics:
                short = "errors_per_s" if per_s.startswith("ignored") else per_s
                metrics[short] = metrics[per_s]
        if self.params.normal_errors is not None:
            metrics.update(split_normal_errors(metrics, self.params.normal_errors))
        intervals = intervals_frame(result)
        extra = {}
        if result.histogram:
            extra["histogram"] = pd.DataFrame(result.histogram, columns=["value_ms", "count"])
        reason = failure_reason(result, returncode)
        if reason is not None and self.params._script is not None:
            reason = self._script_failure(output) or reason
        return Outcome(metrics, intervals if not intervals.empty else None, reason, extra)

    def live_interval(self, text_tail: str) -> dict[str, float] | None:
        return latest_interval(text_tail)

    def _script_failure(self, output: str) -> str | None:
        """A script's failure in its own words: a module it requires is missing, or it
        connects though its scenario declares it needs no server."""
        assert self.params._script is not None
        if self.params.needs_server is False and NO_CONNECTION in output:
            return (
                f"{Path(self.params.script or '').name} connects to a server, but its scenario "
                "declares needs_server: false (dbrig started none, and it reached none)"
            )
        return lua_script.missing_module(output, self.params._script)


NO_CONNECTION = "unable to connect to MySQL server"


def split_normal_errors(metrics: Mapping[str, float], share: float) -> dict[str, float]:
    """The errors a script's authors count as normal (``normal_errors``: up to that share of
    its events, e.g. a deliberate rollback) apart from the rest: ``errors_per_s`` keeps only
    the rest (real retries), ``normal_errors_per_s`` the normal ones."""
    errors, rate = metrics.get("ignored_errors"), metrics.get("ignored_errors_per_s")
    events = metrics.get("transactions", metrics.get("events"))
    if errors is None or rate is None or events is None:
        return {}
    normal = min(errors, share * events) / errors if errors else 0.0
    return {"normal_errors_per_s": rate * normal, "errors_per_s": rate * (1 - normal)}


def _derives_event_rate(params: SysbenchParams) -> bool:
    """Tests whose summary prints no rate of their own: threads, fileio (its events are
    its I/O operations, fsyncs included) and scripts. cpu prints one; memory's is MiB/s;
    mutex runs one event per thread, so its result is the time, not a rate."""
    return params.script is not None or params.test in ("threads", "fileio")


def _creates_its_files(params: SysbenchParams) -> bool:
    """seqwr is sysbench's "sequential write (creation) test": it needs no prepare."""
    return params.test == "fileio" and params.file_test_mode == "seqwr"


def latest_interval(text_tail: str) -> dict[str, float] | None:
    """The last complete ``[ Ns ]`` line of a running sysbench, as Interval fields
    (``t_s``, ``tps``, ``qps``, ``latency_pct_ms``...) plus ``percentile``."""
    result = parse(text_tail[: text_tail.rfind("\n") + 1])
    if not result.intervals:
        return None
    last = result.intervals[-1]
    values = {f.name: float(v) for f in fields(last) if (v := getattr(last, f.name)) is not None}
    drained = any(c.t_s == last.t_s for c in result.checkpoints)
    if not result.percentile or (drained and values.get("latency_pct_ms") == 0):
        values.pop("latency_pct_ms", None)  # percentile off, or reset by the checkpoint
    else:
        values["percentile"] = float(result.percentile)
    return values


def lua_script_argv(
    binary: str, script: Path, command: Command, db: str, endpoint: Endpoint, *options: str
) -> list[str]:
    """``sysbench SCRIPT COMMAND``, the connection to ``db``, then the script's own options."""
    return [binary, str(script), command, *connection_options(db, endpoint), *options]


class LuaScriptWorkload(ServerWorkload):
    """A workload written as a sysbench Lua script shipped in the package (tpcc,
    acked_writes): sysbench's interval lines, password file and ``time`` limit. A subclass
    gives its script's command line (:meth:`script_command`) and what is its own."""

    params: Any  # the tool's own model, with ``time``
    start_line: ClassVar[str | None] = STARTED_LINE  # where its clock starts (startwatch)
    units_of_work: ClassVar[tuple[WorkUnit, ...]] = (TRANSACTION, QUERY)
    mean_latency: ClassVar[MeanLatency | None] = MEAN_LATENCY

    def script_command(
        self, endpoint: Endpoint, command: Command, binary: Path, warmup: int = 0
    ) -> list[str]:
        raise NotImplementedError

    def live_interval(self, text_tail: str) -> dict[str, float] | None:
        return latest_interval(text_tail)  # the scripts print sysbench's interval lines

    def prepare_argv(self, endpoint: Endpoint, binary: Path) -> list[str]:
        return self.script_command(endpoint, "prepare", binary)

    def cleanup_argv(self, endpoint: Endpoint, binary: Path) -> list[str]:
        return self.script_command(endpoint, "cleanup", binary)

    def client_options(self, credentials: Credentials) -> str | None:
        return client_options_text(credentials.password) if credentials.password else None

    def run_argv(self, endpoint: Endpoint, binary: Path, warmup: int) -> list[str]:
        return self.script_command(endpoint, "run", binary, warmup)

    def expected_seconds(self, warmup: int) -> float | None:
        return float(self.params.time + warmup)
