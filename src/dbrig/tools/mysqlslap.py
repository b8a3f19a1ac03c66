"""mariadb-slap (mysqlslap) driver: scenario block, argv, output parser.

``build_command`` makes the argv; ``parse`` reads what the tool printed. Both are
pure. The client's own CPU time (user and sys seconds of the mariadb-slap
process) is not in its output: the runner measures it (``os.wait4`` or psutil)
and stores it beside these rows.

What ``parse`` returns
======================

:class:`MysqlslapResult`

- ``rows``: one :class:`SlapRow` per engine x concurrency value, in the order
  printed (engines outer, concurrency values inner);
- ``errors``: the tool's error lines (stderr), in order;
- ``output_format``: ``"text"``, ``"csv"`` or ``None`` when no row was found.

:class:`SlapRow` (one ``Benchmark`` block, or one ``--csv`` line)

==================  =======  ================================================================
field               unit     meaning
==================  =======  ================================================================
engine              -        storage engine (``--engine``); ``None`` without ``--engine``
load_type           -        read, write, key, update, mixed, or query (own SQL); see below
concurrency         clients  number of client threads
avg_s               s        mean over ``--iterations`` of the time to run all queries
min_s               s        fastest iteration
max_s               s        slowest iteration
queries_per_client  queries  per-client limit: ``number_of_queries // concurrency``, or the
                             number of statements in the ``--query`` file without a limit;
                             0 when auto-generated SQL ran without ``--number-of-queries``
queries_per_s       1/s      derived, ``concurrency * queries_per_client / avg_s``: the
                             queries all clients ran together, per second of the mean
                             iteration; ``None`` when ``avg_s`` or ``queries_per_client`` is 0
==================  =======  ================================================================

Times are printed with millisecond resolution, so short runs (avg_s under 0.1 s)
give coarse throughput.

Load type: the text form does not print it, and the CSV form always prints the
``--auto-generate-sql-load-type`` value (``mixed`` by default), even for a
``--query`` run. So ``parse(text, load_type=...)`` takes it from the caller: when
given it is used for every row; when ``None`` rows keep the CSV column (or
``None`` in the text form). The runner passes ``effective_load_type(params)``.

Formats (MariaDB 10.11, mariadb-slap 1.0)
=========================================

Text, one block per engine x concurrency; the engine line only with ``--engine``::

    Benchmark
    \tRunning for engine innodb
    \tAverage number of seconds to run all queries: 0.686 seconds
    \tMinimum number of seconds to run all queries: 0.663 seconds
    \tMaximum number of seconds to run all queries: 0.728 seconds
    \tNumber of clients running queries: 1
    \tAverage number of queries per client: 1000

``--csv`` (no file) prints only CSV rows on stdout, engine empty without ``--engine``::

    engine,load_type,avg,min,max,clients,queries_per_client
    innodb,mixed,0.719,0.558,0.858,1,1000

``--csv=FILE`` appends to FILE and prints nothing: dbrig never uses it.

Errors go to stderr as ``mariadb-slap: ...``. Careful: a failed query in a
client thread and a client thread that cannot connect do not change the exit
code (the tool exits 0, in the second case still printing timings), so
:func:`failure_reason` looks at stderr whatever the exit code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import ClassVar, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dbrig.endpoint import Credentials, Endpoint
from dbrig.errors import ConfigError
from dbrig.metrics import Metric, produced_by
from dbrig.tools.base import (
    CLIENT_CPUS,
    CLIENT_HOST,
    ClientPlacement,
    MeanLatency,
    Outcome,
    ServerWorkload,
    ToolInfo,
)

INFO = ToolInfo(name="mysqlslap", binaries=("mariadb-slap", "mysqlslap"), package="mariadb-client")

SCENARIO_KEY = "workload.mysqlslap"

LoadType = Literal["read", "write", "key", "update", "mixed"]

# Without a primary key, `key` is refused by the tool and `update` rewrites every
# row of the table with each statement (no WHERE clause).
LOAD_TYPES_WANTING_KEY = frozenset({"key", "update"})

GUID_PRIMARY_OPTION = "--auto-generate-sql-guid-primary"

# The tool drops and re-creates create_schema; never let it touch these.
SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})

# Options dbrig sets itself (or must never appear in argv): refused in extra_args.
RESERVED_OPTIONS = frozenset(
    {
        "--defaults-file",
        "--defaults-extra-file",
        "--defaults-group-suffix",
        "--no-defaults",
        "--print-defaults",
        "--password",
        "--host",
        "--port",
        "--socket",
        "--user",
        "--protocol",
        "--csv",
        "--silent",
        "--auto-generate-sql",
        "--auto-generate-sql-load-type",
        "--auto-generate-sql-add-autoincrement",
        "--number-char-cols",
        "--number-int-cols",
        "--number-of-queries",
        "--concurrency",
        "--iterations",
        "--engine",
        "--create",
        "--query",
        "--create-schema",
        "--commit",
        "--detach",
    }
)


class MysqlslapParams(ClientPlacement):
    """The scenario's ``workload.mysqlslap`` block: what mariadb-slap runs.

    Field-level problems raise pydantic's ``ValidationError`` (with the key path);
    checks across fields raise :class:`ConfigError` naming the scenario key.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    auto_generate_sql: bool = Field(
        True,
        description="Let mariadb-slap generate the table and the SQL (--auto-generate-sql). "
        "Set to false to run your own create/query files.",
    )
    load_type: LoadType = Field(
        "mixed",
        description="Generated workload (--auto-generate-sql-load-type): read, write, "
        "key (primary-key lookups), update, or mixed (inserts and key lookups).",
    )
    add_autoincrement: bool | None = Field(
        None,
        description="Add an AUTO_INCREMENT primary key to the generated table "
        "(--auto-generate-sql-add-autoincrement). Unset: dbrig turns it on for the key "
        "and update load types (key refuses to run without it; update without it "
        "rewrites the whole table with each statement).",
    )
    number_char_cols: int = Field(
        1, ge=1, description="VARCHAR columns in the generated table (--number-char-cols)."
    )
    number_int_cols: int = Field(
        1, ge=1, description="INT columns in the generated table (--number-int-cols)."
    )
    number_of_queries: int | None = Field(
        None,
        ge=1,
        description="Total queries per iteration, shared among the clients "
        "(--number-of-queries; each client runs number_of_queries // concurrency). "
        "Required with auto_generate_sql.",
    )
    concurrency: int | tuple[int, ...] = Field(
        1,
        description="Client threads (--concurrency); a list runs one benchmark per value.",
    )
    iterations: int = Field(
        1, ge=1, description="Times each benchmark is repeated; timings are averaged."
    )
    engine: str | tuple[str, ...] | None = Field(
        None,
        description="Storage engine(s) for the test table (--engine); a list runs one "
        "benchmark per engine. 'memory:max_rows=1000' adds table options.",
    )
    create: Path | None = Field(
        None,
        description="SQL file that creates and fills the tables (--create); needs "
        "auto_generate_sql: false. One statement per line unless extra_args sets "
        "--delimiter. The file must exist: mariadb-slap runs a missing path as SQL text.",
    )
    query: Path | None = Field(
        None,
        description="SQL file with the statements each client runs (--query); needs "
        "auto_generate_sql: false. One statement per line unless extra_args sets "
        "--delimiter. Without create, create_schema must already exist.",
    )
    create_schema: str = Field(
        "mysqlslap",
        min_length=1,
        description="Schema the test runs in (--create-schema). mariadb-slap DROPS and "
        "re-creates it when it creates tables: never name a schema holding data.",
    )
    commit: int | None = Field(
        None,
        ge=0,
        description="Commit every N statements (--commit); unset: autocommit. Needs a "
        "single run (iterations 1, one concurrency value, at most one engine): the tool "
        "leaves autocommit off on its own connection afterwards, and its next table fill "
        "then blocks the clients.",
    )
    detach: int | None = Field(
        None, ge=0, description="Reconnect every N statements (--detach); unset: never."
    )
    extra_args: tuple[str, ...] = Field(
        (),
        description="More mariadb-slap options, long form (--option=value). Options "
        "dbrig sets itself, and any password, are refused.",
    )
    host: str | None = CLIENT_HOST
    cpus: tuple[int, ...] | None = CLIENT_CPUS

    @field_validator("concurrency")
    @classmethod
    def _concurrency_positive(cls, value: int | tuple[int, ...]) -> int | tuple[int, ...]:
        values = value if isinstance(value, tuple) else (value,)
        if not values:
            raise ValueError("concurrency needs at least one value")
        if any(v < 1 for v in values):
            raise ValueError(
                "concurrency must be at least 1 (mariadb-slap treats 0 as 'keep adding "
                "clients forever', and a 0 in a list silently ends the list)"
            )
        return value

    @field_validator("engine", mode="before")
    @classmethod
    def _split_engine_string(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(","))
        return value

    @field_validator("engine")
    @classmethod
    def _engine_names(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        if not value or any(not name or "," in name for name in value):
            raise ValueError("engine needs non-empty engine names, e.g. [innodb, memory]")
        return value

    @field_validator("create_schema")
    @classmethod
    def _not_a_system_schema(cls, value: str) -> str:
        if value.lower() in SYSTEM_SCHEMAS:
            raise ValueError(f"create_schema {value!r} is a system schema; mariadb-slap drops it")
        if "`" in value:
            raise ValueError("create_schema must not contain a backtick")
        return value

    @field_validator("extra_args")
    @classmethod
    def _extra_args_allowed(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arg in value:
            if not arg.startswith("--"):
                # no echo of the argument: it might be a password given as -pSECRET
                raise ValueError("extra_args: give every option in the long --option=value form")
            reserved = _reserved_option_named_by(arg)
            if reserved:
                raise ValueError(
                    f"extra_args: {reserved} is set by dbrig (use the matching key of "
                    f"{SCENARIO_KEY}, or the server/endpoint settings)"
                )
        return value

    @model_validator(mode="after")
    def _fields_agree(self) -> MysqlslapParams:
        if self.commit and self.runs_per_invocation > 1:
            raise ConfigError(
                f"{SCENARIO_KEY}.commit: needs iterations 1 and a single concurrency and "
                "engine (mariadb-slap leaves autocommit off on its own connection after the "
                "first run; its uncommitted INSERTs then block the clients until a lock "
                "wait timeout)",
                hint="vary concurrency or engine in the matrix, and repeat with repetitions",
            )
        if self.auto_generate_sql:
            self._check_generated_sql()
        elif self.query is None:
            raise ConfigError(
                f"{SCENARIO_KEY}.query: needed when auto_generate_sql is false",
                hint="give a --query SQL file, or set auto_generate_sql: true",
            )
        return self

    def _check_generated_sql(self) -> None:
        if self.create is not None or self.query is not None:
            key = "create" if self.create is not None else "query"
            raise ConfigError(
                f"{SCENARIO_KEY}.{key}: own SQL files need auto_generate_sql: false "
                "(mariadb-slap refuses --auto-generate-sql with --create/--query)",
            )
        if self.number_of_queries is None:
            raise ConfigError(
                f"{SCENARIO_KEY}.number_of_queries: needed with auto_generate_sql "
                "(without it mariadb-slap reports 0 queries per client and no "
                "throughput can be derived)",
            )
        guid = GUID_PRIMARY_OPTION in self.extra_args
        if self.load_type == "key" and self.add_autoincrement is False and not guid:
            raise ConfigError(
                f"{SCENARIO_KEY}.add_autoincrement: load_type 'key' needs a primary key; "
                "mariadb-slap refuses to run it with add_autoincrement false",
                hint="remove add_autoincrement (dbrig then turns it on) or set it to true",
            )
        if self.add_autoincrement and guid:
            raise ConfigError(
                f"{SCENARIO_KEY}.add_autoincrement: cannot be combined with "
                f"{GUID_PRIMARY_OPTION} in extra_args (mariadb-slap refuses both)",
            )

    @property
    def effective_add_autoincrement(self) -> bool:
        """Whether ``--auto-generate-sql-add-autoincrement`` is passed."""
        if not self.auto_generate_sql:
            return False
        if self.add_autoincrement is not None:
            return self.add_autoincrement
        guid = GUID_PRIMARY_OPTION in self.extra_args
        return self.load_type in LOAD_TYPES_WANTING_KEY and not guid

    @property
    def concurrency_values(self) -> tuple[int, ...]:
        return self.concurrency if isinstance(self.concurrency, tuple) else (self.concurrency,)

    @property
    def runs_per_invocation(self) -> int:
        """Timed runs one mariadb-slap call makes: engines x concurrency values x iterations."""
        engines = len(self.engine) if self.engine else 1
        return engines * len(self.concurrency_values) * self.iterations


def _reserved_option_named_by(arg: str) -> str | None:
    """The reserved option ``arg`` could set, the way MariaDB's option parser reads it.

    It accepts ``_`` for ``-``, a ``loose-``/``skip-``/``enable-``/``disable-``/
    ``maximum-`` prefix, and any unique prefix of a name (``--pass=x`` is
    ``--password=x``), so every prefix of a reserved name is refused.
    """
    name = arg.split("=", 1)[0].removeprefix("--").replace("_", "-")
    name = name.removeprefix("loose-")
    for modifier in ("skip-", "enable-", "disable-", "maximum-"):
        name = name.removeprefix(modifier)
    for option in sorted(RESERVED_OPTIONS):
        if option.removeprefix("--").startswith(name):
            return option
    return None


def effective_load_type(params: MysqlslapParams) -> str:
    """The load type to record: the generated one, or ``"query"`` for own SQL files."""
    return params.load_type if params.auto_generate_sql else "query"


# --- command -------------------------------------------------------------------------


def build_command(
    params: MysqlslapParams,
    endpoint: Endpoint,
    *,
    binary: str = "mariadb-slap",
    csv: bool = True,
) -> list[str]:
    """The mariadb-slap argv. The password is never in it (see ``Endpoint``).

    ``endpoint.database`` is not used: mariadb-slap works in ``params.create_schema``.
    """
    return [
        binary,
        _defaults_option(endpoint),  # MariaDB clients only accept it as the first option
        *_connection_options(endpoint),
        *_workload_options(params),
        *(["--csv"] if csv else []),  # bare --csv prints rows; --csv=FILE prints nothing
        *params.extra_args,
    ]


def _defaults_option(endpoint: Endpoint) -> str:
    if endpoint.client_options_file is not None:
        return f"--defaults-file={endpoint.client_options_file}"
    return "--no-defaults"


def _connection_options(endpoint: Endpoint) -> list[str]:
    if endpoint.socket:
        options = [f"--socket={endpoint.socket}"]
    else:
        options = [f"--host={endpoint.host}"]
        if endpoint.port is not None:
            options.append(f"--port={endpoint.port}")
    options.append(f"--user={endpoint.user}")
    return options


def _workload_options(params: MysqlslapParams) -> list[str]:
    options = _sql_options(params)
    if params.number_of_queries is not None:
        options.append(f"--number-of-queries={params.number_of_queries}")
    options.append(f"--concurrency={_join(params.concurrency_values)}")
    options.append(f"--iterations={params.iterations}")
    if params.engine:
        options.append(f"--engine={_join(params.engine)}")
    options.append(f"--create-schema={params.create_schema}")
    if params.commit is not None:
        options.append(f"--commit={params.commit}")
    if params.detach is not None:
        options.append(f"--detach={params.detach}")
    return options


def _sql_options(params: MysqlslapParams) -> list[str]:
    if not params.auto_generate_sql:
        options = [] if params.create is None else [f"--create={params.create}"]
        if params.query is not None:
            options.append(f"--query={params.query}")
        return options
    options = ["--auto-generate-sql", f"--auto-generate-sql-load-type={params.load_type}"]
    if params.effective_add_autoincrement:
        options.append("--auto-generate-sql-add-autoincrement")
    options.append(f"--number-char-cols={params.number_char_cols}")
    options.append(f"--number-int-cols={params.number_int_cols}")
    return options


def _join(values: Iterable[object]) -> str:
    return ",".join(str(v) for v in values)


def client_options_text(
    user: str,
    password: str,
    host: str | None = None,
    port: int | None = None,
    socket: str | None = None,
) -> str:
    """A ``[client]`` option file for ``--defaults-file`` (write it with mode 0600).

    Values are double-quoted and escaped the way MariaDB's option-file reader
    undoes it, so spaces, quotes, ``#``, ``;`` and backslashes survive.
    """
    lines = [
        "# written by dbrig for MariaDB clients; holds a password: keep mode 0600",
        "[client]",
        f"user={_option_value(user)}",
        f"password={_option_value(password)}",
    ]
    if host is not None:
        lines.append(f"host={_option_value(host)}")
    if port is not None:
        lines.append(f"port={int(port)}")
    if socket is not None:
        lines.append(f"socket={_option_value(socket)}")
    return "\n".join(lines) + "\n"


_OPTION_FILE_ESCAPES = str.maketrans(
    {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
)


def _option_value(value: str) -> str:
    if "\0" in value:
        raise ConfigError("a client option (user, password, host or socket) contains a NUL byte")
    return '"' + value.translate(_OPTION_FILE_ESCAPES) + '"'


# --- parsing -------------------------------------------------------------------------


@dataclass(frozen=True)
class SlapRow:
    """One benchmark: an engine x concurrency value. Units in the module docstring."""

    engine: str | None
    load_type: str | None
    concurrency: int
    avg_s: float
    min_s: float
    max_s: float
    queries_per_client: int
    queries_per_s: float | None


ROW_COLUMNS = tuple(f.name for f in fields(SlapRow))
_FRAME_DTYPES = {
    "engine": "object",
    "load_type": "object",
    "concurrency": "int64",
    "avg_s": "float64",
    "min_s": "float64",
    "max_s": "float64",
    "queries_per_client": "int64",
    "queries_per_s": "float64",  # None (not derivable) becomes NaN
}


@dataclass(frozen=True)
class MysqlslapResult:
    rows: tuple[SlapRow, ...] = ()
    errors: tuple[str, ...] = ()
    output_format: Literal["text", "csv"] | None = None


# Stage 1 keys: engine, load_type, avg, min, max, clients, queries_per_client.
_TEXT_LABELS = {
    "Average number of seconds to run all queries": "avg",
    "Minimum number of seconds to run all queries": "min",
    "Maximum number of seconds to run all queries": "max",
    "Number of clients running queries": "clients",
    "Average number of queries per client": "queries_per_client",
}
_RAW_KEYS = ("avg", "min", "max", "clients", "queries_per_client")

_ENGINE_LINE = re.compile(r"^\s*Running for engine (?P<engine>\S+)\s*$")
_LABEL_LINE = re.compile(r"^\s+(?P<label>[A-Za-z ]+):\s*(?P<value>[\d.]+)(?: seconds)?\s*$")
_CSV_LINE = re.compile(
    r"^(?P<engine>[^,\s]*),(?P<load_type>[^,\s]*),(?P<avg>\d+\.\d+),(?P<min>\d+\.\d+),"
    r"(?P<max>\d+\.\d+),(?P<clients>\d+),(?P<queries_per_client>\d+)\s*$"
)
# my_progname is argv[0], so the prefix may carry a directory.
_TOOL_PREFIX = re.compile(r"^\S*(?:mariadb-slap|mysqlslap): ")
_UNPREFIXED_ERRORS = re.compile(
    r"^(?:Could not open required defaults file|Fatal error in defaults handling|"
    r"Invalid value specified for the option|Warning: |\s*ERROR : )"
)


def parse(text: str, *, load_type: str | None = None, stderr: str | None = None) -> MysqlslapResult:
    """Rows from mariadb-slap's stdout (text or ``--csv`` form), errors from stderr.

    ``text`` may also be stdout and stderr combined. ``errors`` are the non-blank
    lines of ``stderr`` when given, else the error-looking lines of ``text``.
    ``load_type``, when given, is recorded in every row (see the module docstring).
    """
    raw_rows, output_format, text_errors = _raw_rows(text.splitlines())
    rows = tuple(_typed_row(raw, load_type) for raw in raw_rows)
    errors = _stderr_lines(stderr) if stderr is not None else tuple(text_errors)
    return MysqlslapResult(rows=rows, errors=errors, output_format=output_format)


def _raw_rows(lines: Sequence[str]) -> tuple[list[dict[str, str]], str | None, list[str]]:
    rows: list[dict[str, str]] = []
    errors: list[str] = []
    formats: set[str] = set()
    block: dict[str, str] | None = None
    for line in lines:
        if line.strip() == "Benchmark":
            _keep_if_complete(block, rows, formats)
            block = {}
        elif csv_match := _CSV_LINE.match(line):
            rows.append(csv_match.groupdict())
            formats.add("csv")
        elif _TOOL_PREFIX.match(line) or _UNPREFIXED_ERRORS.match(line):
            errors.append(line.rstrip())
        elif block is not None:
            _read_block_line(line, block)
    _keep_if_complete(block, rows, formats)
    output_format = "csv" if formats == {"csv"} else "text" if formats else None
    return rows, output_format, errors


def _read_block_line(line: str, block: dict[str, str]) -> None:
    if engine_match := _ENGINE_LINE.match(line):
        block["engine"] = engine_match["engine"]
    elif label_match := _LABEL_LINE.match(line):
        key = _TEXT_LABELS.get(label_match["label"].strip())
        if key:
            block[key] = label_match["value"]


def _keep_if_complete(
    block: dict[str, str] | None, rows: list[dict[str, str]], formats: set[str]
) -> None:
    # A block cut short (tool killed mid-print) is dropped rather than half-read.
    if block is not None and all(key in block for key in _RAW_KEYS):
        rows.append(block)
        formats.add("text")


def _typed_row(raw: dict[str, str], load_type: str | None) -> SlapRow:
    concurrency = int(raw["clients"])
    avg_s = float(raw["avg"])
    queries_per_client = int(raw["queries_per_client"])
    return SlapRow(
        engine=raw.get("engine") or None,
        load_type=load_type if load_type is not None else (raw.get("load_type") or None),
        concurrency=concurrency,
        avg_s=avg_s,
        min_s=float(raw["min"]),
        max_s=float(raw["max"]),
        queries_per_client=queries_per_client,
        queries_per_s=queries_per_second(concurrency, queries_per_client, avg_s),
    )


def queries_per_second(concurrency: int, queries_per_client: int, avg_s: float) -> float | None:
    """Total queries run by all clients in one mean iteration, per second."""
    if avg_s <= 0 or queries_per_client <= 0:
        return None
    return concurrency * queries_per_client / avg_s


def _stderr_lines(stderr: str) -> tuple[str, ...]:
    return tuple(line.rstrip() for line in stderr.splitlines() if line.strip())


def rows_frame(result: MysqlslapResult) -> pd.DataFrame:
    """The rows as a tidy frame, one row per engine x concurrency, columns ``ROW_COLUMNS``."""
    frame = pd.DataFrame([asdict(row) for row in result.rows], columns=list(ROW_COLUMNS))
    return frame.astype(_FRAME_DTYPES)


# --- failures ------------------------------------------------------------------------

_KNOWN_FAILURES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"Access denied for user (?P<who>'[^']*'@'[^']*')"),
        "access denied for {who}: wrong password, or no such account or grant",
    ),
    (
        re.compile(r"Unknown server host (?P<host>'[^']*')"),
        "cannot resolve server host {host}",
    ),
    (
        re.compile(r"Can't connect to (?:MySQL |MariaDB )?server on (?P<host>'[^']*')"),
        "cannot connect to server on {host}: nothing listening there, or unreachable",
    ),
    (
        re.compile(
            r"Can't connect to local (?:MySQL |MariaDB )?server through socket (?P<s>'[^']*')"
        ),
        "cannot connect through socket {s}: server not running, or wrong socket path",
    ),
    (
        re.compile(r"Can't perform key test without a primary key"),
        "load type 'key' needs a primary key: leave "
        f"{SCENARIO_KEY}.add_autoincrement unset or set it to true",
    ),
    (
        re.compile(r"Too many connections"),
        "the server refused clients (Too many connections): raise max_connections "
        "or lower concurrency",
    ),
    (
        re.compile(r"Unknown database (?P<db>'[^']*')"),
        f"schema {{db}} does not exist: give {SCENARIO_KEY}.create, or create it first",
    ),
    (
        # The query text may span lines; the server's message follows "ERROR : ".
        re.compile(r"(?:^|\s)ERROR : (?P<error>.+)$"),
        "a query failed: {error}",
    ),
    (
        re.compile(r"Could not open required defaults file: (?P<path>.*)$"),
        "cannot read the client options file {path}",
    ),
    (
        re.compile(r"(?P<what>unknown (?:option|variable) '[^']*')"),
        "mariadb-slap refused an option: {what}",
    ),
)

_PASSWORD_TEXT = re.compile(
    r"(password\s*[=:]\s*|IDENTIFIED\s+(?:BY|WITH\s+\S+\s+(?:AS|USING))\s+)"
    r"('[^']*'|\"[^\"]*\"|\S+)",
    re.IGNORECASE,
)


def failure_reason(
    result: MysqlslapResult,
    returncode: int,
    stderr: str,
    *,
    secrets: Sequence[str] = (),
) -> str | None:
    """One line saying why the run failed, or ``None`` when it succeeded.

    Failed when: the exit code is not 0, stderr has error lines (a client thread
    that fails exits 0), or no row was printed. The line never contains a password:
    known errors are rephrased from fixed text, others are redacted (``secrets``
    are masked wherever they appear, as are ``password=...`` and ``IDENTIFIED BY``).
    """
    error_lines = [
        line for line in (*_stderr_lines(stderr), *result.errors) if not _is_warning(line)
    ]
    if returncode == 0 and not error_lines and result.rows:
        return None
    reason = _known_failure(error_lines) or _generic_failure(result, returncode, error_lines)
    return _redact(reason, secrets)


def _is_warning(line: str) -> bool:
    # e.g. "Info: Using unique option prefix 'versi' is error-prone ..."
    return line.startswith(("Warning: ", "Info: "))


def _known_failure(error_lines: Sequence[str]) -> str | None:
    for pattern, template in _KNOWN_FAILURES:
        for line in error_lines:
            if match := pattern.search(line):
                return template.format(**match.groupdict())
    return None


def _generic_failure(result: MysqlslapResult, returncode: int, error_lines: Sequence[str]) -> str:
    detail = _TOOL_PREFIX.sub("", error_lines[-1]) if error_lines else "nothing on stderr"
    if returncode < 0:
        return f"mariadb-slap was killed by signal {-returncode}: {detail}"
    if returncode != 0:
        return f"mariadb-slap exited with code {returncode}: {detail}"
    if error_lines:
        return f"mariadb-slap reported an error: {detail}"
    return "mariadb-slap printed no results and no error"


def _redact(line: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            line = line.replace(secret, "***")
    return _PASSWORD_TEXT.sub(lambda m: m.group(1) + "***", line)


# --- the tool seam ---------------------------------------------------------------------------

# It reports no latency percentile: the mean time a client spends per query instead.
MEAN_TIME_PER_QUERY = MeanLatency(
    "avg_s",
    "mean time per query (ms)",
    "mysqlslap reports no latency percentile: the knee uses the mean time a client "
    "spends per query, avg_s / queries_per_client",
    scale=1000,
    per="queries_per_client",
)


@dataclass(frozen=True)
class MysqlslapTool(ServerWorkload):
    """mysqlslap (mariadb-slap) as a :class:`~dbrig.tools.base.WorkloadTool`."""

    params: MysqlslapParams
    key: ClassVar[str] = "mysqlslap"
    info: ClassVar[ToolInfo] = INFO
    params_model: ClassVar[type[BaseModel]] = MysqlslapParams
    required_by_doctor: ClassVar[bool] = False
    concurrency_key: ClassVar[str | None] = "concurrency"
    mean_latency: ClassVar[MeanLatency | None] = MEAN_TIME_PER_QUERY

    def metrics(self) -> tuple[Metric, ...]:
        return produced_by(self.key)

    @property
    def database(self) -> str:
        return self.params.create_schema

    def data_set_key(self) -> tuple:
        return ("mysqlslap",)  # it creates and drops its own schema every iteration

    def prepare_argv(self, endpoint: Endpoint, binary: Path) -> None:
        return None

    def cleanup_argv(self, endpoint: Endpoint, binary: Path) -> None:
        return None

    def client_options(self, credentials: Credentials) -> str | None:
        if not credentials.password:
            return None
        return client_options_text(
            credentials.user,
            credentials.password,
            host=credentials.host,
            port=credentials.port,
            socket=credentials.socket,
        )

    def run_argv(self, endpoint: Endpoint, binary: Path, warmup: int) -> list[str]:
        if warmup:
            raise ConfigError(
                "warmup: mysqlslap runs a fixed number of queries and has no warm-up phase; "
                "set warmup: 0 (its --iterations already repeat the work)"
            )
        return build_command(self.params, endpoint, binary=str(binary), csv=False)

    def expected_seconds(self, warmup: int) -> float | None:
        return None

    def analyse(self, output: str, returncode: int) -> Outcome:
        result = parse(output, load_type=effective_load_type(self.params))
        rows = rows_frame(result)
        metrics: dict[str, float] = {}
        if len(result.rows) == 1:
            metrics = {
                k: float(v)
                for k, v in vars(result.rows[0]).items()
                if isinstance(v, int | float) and not isinstance(v, bool)
            }
        reason = failure_reason(result, returncode, "")
        return Outcome(metrics, None, reason, {"slap_rows": rows} if not rows.empty else {})

    def live_interval(self, text_tail: str) -> dict[str, float] | None:
        return None  # it prints nothing until every iteration is done
