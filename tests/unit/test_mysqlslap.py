"""mariadb-slap driver: parameters, argv, parsing and failure reasons, on real output."""

from __future__ import annotations

import math
import shlex
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest
from pydantic import ValidationError

from dbrig.endpoint import Endpoint
from dbrig.errors import ConfigError
from dbrig.tools.mysqlslap import (
    INFO,
    ROW_COLUMNS,
    MysqlslapParams,
    MysqlslapResult,
    SlapRow,
    build_command,
    client_options_text,
    effective_load_type,
    failure_reason,
    parse,
    rows_frame,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "mysqlslap" / "mariadb-slap-1.0"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def stderr_of(name: str) -> str:
    path = FIXTURES / f"{name}.stderr"
    return path.read_text() if path.exists() else ""


def keys(result: MysqlslapResult) -> list[tuple[str | None, int]]:
    return [(row.engine, row.concurrency) for row in result.rows]


# --- parse: text form -----------------------------------------------------------------


def test_text_single_block() -> None:
    result = parse(fixture("slap_read.txt"))

    assert result.output_format == "text"
    assert result.errors == ()
    assert result.rows == (
        SlapRow(
            engine=None,
            load_type=None,
            concurrency=3,
            avg_s=0.136,
            min_s=0.128,
            max_s=0.154,
            queries_per_client=333,
            queries_per_s=pytest.approx(3 * 333 / 0.136),
        ),
    )


@pytest.mark.parametrize(
    ("name", "avg_s"),
    [
        ("slap_read.txt", 0.136),
        ("slap_write.txt", 0.429),
        ("slap_key.txt", 0.089),
        ("slap_update.txt", 0.746),
        ("slap_update_autoinc.txt", 0.217),
        ("slap_mixed.txt", 0.423),
    ],
)
def test_text_each_load_type(name: str, avg_s: float) -> None:
    (row,) = parse(fixture(name)).rows

    assert (row.concurrency, row.queries_per_client, row.avg_s) == (3, 333, avg_s)
    assert row.min_s <= row.avg_s <= row.max_s


def test_text_load_type_comes_from_the_caller() -> None:
    (row,) = parse(fixture("slap_key.txt"), load_type="key").rows

    assert row.load_type == "key"


def test_text_engines_and_concurrencies() -> None:
    result = parse(fixture("slap_multi_concurrency_engine_text.txt"), load_type="mixed")

    assert keys(result) == [("innodb", 1), ("innodb", 4), ("memory", 1), ("memory", 4)]
    assert [row.queries_per_client for row in result.rows] == [1000, 250, 1000, 250]
    assert [row.avg_s for row in result.rows] == [0.686, 0.289, 0.305, 0.147]
    assert {row.load_type for row in result.rows} == {"mixed"}


def test_text_three_engines() -> None:
    result = parse(fixture("slap_engines3_text.txt"))

    assert keys(result) == [
        ("innodb", 1),
        ("innodb", 2),
        ("myisam", 1),
        ("myisam", 2),
        ("aria", 1),
        ("aria", 2),
    ]
    assert result.rows[3].avg_s == 0.006


def test_text_engine_with_table_options_reports_the_engine_name() -> None:
    (row,) = parse(fixture("slap_engine_option_text.txt")).rows

    assert (row.engine, row.concurrency, row.queries_per_client) == ("memory", 2, 100)


def test_text_own_query_file() -> None:
    result = parse(fixture("slap_query_file_text.txt"), load_type="query")

    assert keys(result) == [(None, 1), (None, 3)]
    assert [row.queries_per_client for row in result.rows] == [300, 100]
    assert {row.load_type for row in result.rows} == {"query"}


def test_text_cut_short_keeps_only_complete_blocks() -> None:
    lines = fixture("slap_multi_concurrency_engine_text.txt").splitlines(keepends=True)
    cut = "".join(lines[:12])  # second block ends before its queries-per-client line

    result = parse(cut)

    assert keys(result) == [("innodb", 1)]


# --- parse: CSV form ------------------------------------------------------------------


def test_csv_stdout_without_engine() -> None:
    result = parse(fixture("slap_csv_stdout.txt"))

    assert result.output_format == "csv"
    assert keys(result) == [(None, 1), (None, 2)]
    first, second = result.rows
    assert (first.load_type, first.avg_s, first.min_s, first.max_s) == ("read", 0.041, 0.033, 0.049)
    assert first.queries_per_client == 200
    assert second.queries_per_s == pytest.approx(2 * 100 / 0.023)


def test_csv_file_form() -> None:
    result = parse(fixture("slap_multi.csv"))

    assert keys(result) == [(None, 1), (None, 4)]
    assert [row.queries_per_client for row in result.rows] == [1000, 250]
    assert {row.load_type for row in result.rows} == {"mixed"}


@pytest.mark.parametrize(
    ("name", "engines", "concurrencies"),
    [
        ("slap_multi_engine_csv_stdout.txt", ["innodb", "memory"], [1, 4]),
        ("slap_engines3_csv_stdout.txt", ["innodb", "myisam", "aria"], [1, 2]),
    ],
)
def test_csv_several_engines(name: str, engines: list[str], concurrencies: list[int]) -> None:
    result = parse(fixture(name))

    assert keys(result) == [(e, c) for e in engines for c in concurrencies]


def test_csv_and_text_forms_give_the_same_rows_shape() -> None:
    text = parse(fixture("slap_engines3_text.txt"), load_type="mixed")
    csv = parse(fixture("slap_engines3_csv_stdout.txt"), load_type="mixed")

    assert keys(text) == keys(csv)
    assert rows_frame(text).columns.tolist() == rows_frame(csv).columns.tolist()


def test_csv_load_type_of_own_query_is_the_tools_default_unless_given() -> None:
    # mariadb-slap prints its --auto-generate-sql-load-type default even for --query runs.
    raw = parse(fixture("slap_query_file_csv_stdout.txt"))
    given = parse(fixture("slap_query_file_csv_stdout.txt"), load_type="query")

    assert {row.load_type for row in raw.rows} == {"mixed"}
    assert {row.load_type for row in given.rows} == {"query"}


@pytest.mark.parametrize(
    "name",
    ["slap_defaults_file_socket.txt", "slap_defaults_file_tcp.txt", "slap_guid_key_csv_stdout.txt"],
)
def test_csv_one_row(name: str) -> None:
    (row,) = parse(fixture(name)).rows

    assert (row.concurrency, row.queries_per_client) == (2, 100)


def test_queries_per_s_is_none_when_not_derivable() -> None:
    (no_limit,) = parse(fixture("slap_auto_no_number_of_queries_csv_stdout.txt")).rows
    (too_fast,) = parse(fixture("slap_query_file_no_limit_csv_stdout.txt")).rows

    assert (no_limit.queries_per_client, no_limit.queries_per_s) == (0, None)
    assert (too_fast.avg_s, too_fast.queries_per_client, too_fast.queries_per_s) == (0.0, 3, None)


def test_csv_to_file_prints_nothing() -> None:
    result = parse(fixture("slap_multi_concurrency_csv.txt"))

    assert result == MysqlslapResult()


# --- parse: empty, errors, frame ------------------------------------------------------


def test_parse_empty() -> None:
    result = parse("")

    assert result == MysqlslapResult(rows=(), errors=(), output_format=None)
    assert result.rows == ()


def test_version_line_is_not_an_error() -> None:
    assert parse(fixture("slap_version.txt")) == MysqlslapResult()


ERROR_CASES = [
    "slap_err_bad_host",
    "slap_err_conn_refused",
    "slap_err_wrong_password",
    "slap_err_wrong_password_defaults_file",
    "slap_err_key_no_pk",
    "slap_err_socket_missing",
    "slap_err_defaults_file_missing",
    "slap_err_defaults_file_not_first",
    "slap_err_unknown_option",
    "slap_err_auto_with_query",
    "slap_err_bad_engine",
    "slap_err_query_bad_sql",
    "slap_err_create_wrong_delimiter",
    "slap_err_main_too_many_connections",
    "slap_err_query_no_schema",
    "slap_err_thread_too_many_connections",
    "slap_err_commit_second_iteration",
    "slap_err_commit_second_concurrency",
]


@pytest.mark.parametrize("name", ERROR_CASES)
def test_errors_come_from_stderr(name: str) -> None:
    stderr = stderr_of(name)
    stdout = fixture(f"{name}.txt").replace(stderr, "")

    result = parse(stdout, stderr=stderr)

    assert result.errors == tuple(line for line in stderr.splitlines() if line.strip())


@pytest.mark.parametrize("name", ERROR_CASES)
def test_errors_are_found_in_combined_output(name: str) -> None:
    result = parse(fixture(f"{name}.txt"))

    assert result.errors
    assert set(result.errors) <= set(stderr_of(name).splitlines())


def test_errors_and_rows_together() -> None:
    name = "slap_err_query_no_schema"
    result = parse(fixture(f"{name}.txt"))

    assert keys(result) == [(None, 2)]
    assert (
        result.errors
        == ("mariadb-slap: Error when connecting to server: 1049 Unknown database 'mysqlslap'",) * 2
    )


def test_rows_printed_before_a_client_failed() -> None:
    # the first concurrency value ran; the second one's client hit a lock wait timeout
    name = "slap_err_commit_second_concurrency"
    stderr = stderr_of(name)

    result = parse(fixture(f"{name}.txt").replace(stderr, ""), stderr=stderr)

    assert keys(result) == [(None, 1)]
    assert failure_reason(result, 0, stderr) is not None


def test_rows_frame() -> None:
    frame = rows_frame(parse(fixture("slap_multi_engine_csv_stdout.txt")))

    assert frame.columns.tolist() == list(ROW_COLUMNS)
    assert frame["engine"].tolist() == ["innodb", "innodb", "memory", "memory"]
    assert frame["concurrency"].tolist() == [1, 4, 1, 4]
    assert frame["queries_per_s"].iloc[0] == pytest.approx(1 * 1000 / 0.719)
    assert str(frame["concurrency"].dtype) == "int64"


def test_rows_frame_empty_and_missing_throughput() -> None:
    empty = rows_frame(parse(""))
    no_limit = rows_frame(parse(fixture("slap_auto_no_number_of_queries_csv_stdout.txt")))

    assert empty.empty
    assert empty.columns.tolist() == list(ROW_COLUMNS)
    assert math.isnan(no_limit["queries_per_s"].iloc[0])


def test_result_is_frozen() -> None:
    result = parse(fixture("slap_read.txt"))

    with pytest.raises(FrozenInstanceError):
        result.rows[0].avg_s = 1.0  # type: ignore[misc]


# --- failure_reason -------------------------------------------------------------------

# exit codes from the fixtures' README.md
FAILURES = [
    ("slap_err_bad_host", 1, "cannot resolve server host 'nonexistent.invalid'"),
    ("slap_err_conn_refused", 1, "cannot connect to server on '127.0.0.1'"),
    ("slap_err_socket_missing", 1, "cannot connect through socket '/tmp/h3/nosuch.sock'"),
    ("slap_err_wrong_password", 1, "access denied for 'bench'@'localhost'"),
    ("slap_err_wrong_password_defaults_file", 1, "access denied for 'bench'@'localhost'"),
    ("slap_err_key_no_pk", 1, "workload.mysqlslap.add_autoincrement"),
    ("slap_err_defaults_file_missing", 1, "cannot read the client options file"),
    ("slap_err_defaults_file_not_first", 7, "unknown variable 'defaults-file="),
    ("slap_err_unknown_option", 7, "unknown variable 'bogus-option=1'"),
    ("slap_err_auto_with_query", 1, "exited with code 1: Can't use --auto-generate-sql"),
    ("slap_err_bad_engine", 1, "a query failed: Unknown storage engine 'nosuchengine'"),
    ("slap_err_create_wrong_delimiter", 1, "a query failed: You have an error in your SQL"),
    ("slap_err_main_too_many_connections", 1, "Too many connections"),
    # exit 0, yet failed: a client thread's error does not change the exit code
    ("slap_err_query_bad_sql", 0, "a query failed: You have an error in your SQL"),
    ("slap_err_query_no_schema", 0, "schema 'mysqlslap' does not exist"),
    ("slap_err_thread_too_many_connections", 0, "Too many connections"),
    ("slap_err_commit_second_iteration", 0, "a query failed: Lock wait timeout exceeded"),
    ("slap_err_commit_second_concurrency", 0, "a query failed: Lock wait timeout exceeded"),
]


@pytest.mark.parametrize(("name", "returncode", "expected"), FAILURES)
def test_failure_reason(name: str, returncode: int, expected: str) -> None:
    stderr = stderr_of(name)
    stdout = fixture(f"{name}.txt").replace(stderr, "")

    reason = failure_reason(parse(stdout, stderr=stderr), returncode, stderr)

    assert reason is not None
    assert expected in reason
    assert "\n" not in reason


def test_failure_reason_covers_every_error_fixture() -> None:
    on_disk = {path.stem for path in FIXTURES.glob("slap_err_*.txt")}

    assert on_disk == {name for name, _, _ in FAILURES}


@pytest.mark.parametrize(
    "name", ["slap_err_wrong_password", "slap_err_wrong_password_defaults_file"]
)
def test_wrong_password_reason_has_no_password(name: str) -> None:
    stderr = stderr_of(name)
    reason = failure_reason(parse("", stderr=stderr), 1, stderr, secrets=("benchpw", "WRONG"))

    assert reason is not None
    for password in ("benchpw", "WRONG", "WRONG#pw"):
        assert password not in reason


def test_failure_reason_masks_given_secrets() -> None:
    stderr = stderr_of("slap_err_wrong_password")

    reason = failure_reason(parse("", stderr=stderr), 1, stderr, secrets=("bench",))

    assert reason is not None
    assert "bench" not in reason
    assert "'***'@'localhost'" in reason


@pytest.mark.parametrize(
    "name",
    [
        "slap_read.txt",
        "slap_multi_concurrency_engine_text.txt",
        "slap_csv_stdout.txt",
        "slap_engines3_csv_stdout.txt",
        "slap_query_file_csv_stdout.txt",
    ],
)
def test_success_has_no_failure_reason(name: str) -> None:
    assert failure_reason(parse(fixture(name)), 0, "") is None


def test_info_lines_are_not_errors() -> None:
    name = "slap_info_option_prefix"
    stderr = stderr_of(name)
    stdout = fixture(f"{name}.txt").replace(stderr, "")

    reason = failure_reason(parse(stdout, stderr=stderr), 0, stderr)

    assert stderr.startswith("Info: ")
    assert reason == "mariadb-slap printed no results and no error"


def test_exit_zero_without_rows_is_a_failure() -> None:
    reason = failure_reason(parse(fixture("slap_multi_concurrency_csv.txt")), 0, "")

    assert reason == "mariadb-slap printed no results and no error"


def test_killed_by_signal() -> None:
    cut = "".join(fixture("slap_multi_concurrency_engine_text.txt").splitlines(True)[:12])

    reason = failure_reason(parse(cut), -9, "")

    assert reason == "mariadb-slap was killed by signal 9: nothing on stderr"


# --- parameters -----------------------------------------------------------------------


def params(**values: object) -> MysqlslapParams:
    return MysqlslapParams.model_validate({"number_of_queries": 1000, **values})


def test_defaults() -> None:
    p = params()

    assert (p.auto_generate_sql, p.load_type, p.add_autoincrement) == (True, "mixed", None)
    assert (p.concurrency, p.iterations, p.create_schema, p.extra_args) == (1, 1, "mysqlslap", ())
    assert effective_load_type(p) == "mixed"


def test_params_are_frozen_and_hashable() -> None:
    p = params(concurrency=[1, 4], engine=["innodb", "memory"])

    with pytest.raises(ValidationError):
        p.iterations = 2  # type: ignore[misc]
    assert hash(p) == hash(params(concurrency=[1, 4], engine=["innodb", "memory"]))


@pytest.mark.parametrize("concurrency", [0, [1, 0], [], -1])
def test_concurrency_must_be_positive(concurrency: object) -> None:
    with pytest.raises(ValidationError) as caught:
        params(concurrency=concurrency)

    error = caught.value.errors()[0]
    assert error["loc"][0] == "concurrency"
    assert "at least" in error["msg"]


def test_concurrency_zero_message_says_why() -> None:
    with pytest.raises(ValidationError, match="forever"):
        params(concurrency=0)


def test_key_with_explicit_no_autoincrement_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"workload\.mysqlslap\.add_autoincrement"):
        params(load_type="key", add_autoincrement=False)


def test_key_without_autoincrement_is_allowed_with_guid_primary() -> None:
    p = params(
        load_type="key", add_autoincrement=False, extra_args=["--auto-generate-sql-guid-primary"]
    )

    assert not p.effective_add_autoincrement


def test_autoincrement_and_guid_primary_are_exclusive() -> None:
    with pytest.raises(ConfigError, match="add_autoincrement"):
        params(add_autoincrement=True, extra_args=["--auto-generate-sql-guid-primary"])


@pytest.mark.parametrize(
    "values",
    [{"iterations": 2}, {"concurrency": [1, 2]}, {"engine": ["innodb", "aria"]}],
)
def test_commit_needs_a_single_run(values: dict[str, object]) -> None:
    # fixtures slap_err_commit_second_iteration and slap_err_commit_second_concurrency
    with pytest.raises(ConfigError, match=r"workload\.mysqlslap\.commit"):
        params(commit=10, **values)


def test_commit_in_a_single_run() -> None:
    # fixture slap_commit_one_run_csv_stdout
    p = params(load_type="update", commit=10, concurrency=2, number_of_queries=100)

    (row,) = parse(fixture("slap_commit_one_run_csv_stdout.txt")).rows

    assert "--commit=10" in build_command(p, SOCKET)
    assert (row.load_type, row.concurrency, row.queries_per_client) == ("update", 2, 50)
    assert params(commit=0, iterations=3).commit == 0


def test_unknown_key_is_refused() -> None:
    with pytest.raises(ValidationError) as caught:
        params(concurrancy=4)

    error = caught.value.errors()[0]
    assert (error["loc"], error["type"]) == (("concurrancy",), "extra_forbidden")


def test_unknown_load_type_is_refused() -> None:
    with pytest.raises(ValidationError) as caught:
        params(load_type="scan")

    assert caught.value.errors()[0]["loc"] == ("load_type",)


@pytest.mark.parametrize("key", ["create", "query"])
def test_own_sql_needs_auto_generate_off(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"workload\.mysqlslap\.{key}.*auto_generate_sql: false"):
        params(**{key: "q.sql"})


def test_own_sql_needs_a_query_file() -> None:
    with pytest.raises(ConfigError, match=r"workload\.mysqlslap\.query"):
        params(auto_generate_sql=False, create="c.sql")


def test_generated_sql_needs_number_of_queries() -> None:
    with pytest.raises(ConfigError, match=r"workload\.mysqlslap\.number_of_queries"):
        MysqlslapParams()


@pytest.mark.parametrize(
    "arg",
    [
        "--password=secret",
        "-psecret",
        "--pass=secret",  # mariadb-slap takes unique prefixes (fixture slap_info_option_prefix)
        "--loose-password=secret",
        "--csv=out.csv",
        "--defaults-file=x",
        "--host=h",
        "--create_schema=mysql",
        "--skip-auto-generate-sql",
    ],
)
def test_extra_args_cannot_override_dbrig(arg: str) -> None:
    with pytest.raises(ValidationError) as caught:
        params(extra_args=[arg])

    error = caught.value.errors()[0]
    assert error["loc"] == ("extra_args",)
    assert "secret" not in error["msg"]


@pytest.mark.parametrize("schema", ["mysql", "SYS", "information_schema", "a`b"])
def test_create_schema_cannot_be_a_system_schema(schema: str) -> None:
    with pytest.raises(ValidationError):
        params(create_schema=schema)


@pytest.mark.parametrize(
    "field", ["number_char_cols", "number_int_cols", "number_of_queries", "iterations"]
)
def test_counts_must_be_positive(field: str) -> None:
    with pytest.raises(ValidationError):
        params(**{field: 0})


def test_extra_args_other_options_pass() -> None:
    p = params(extra_args=["--auto-generate-sql-secondary-indexes=2", "--no-drop"])

    assert p.extra_args == ("--auto-generate-sql-secondary-indexes=2", "--no-drop")


def test_engine_string_with_commas_becomes_a_list() -> None:
    assert params(engine="innodb, memory").engine == ("innodb", "memory")


# --- build_command --------------------------------------------------------------------

SOCKET = Endpoint(user="root", database="sbtest", socket="/tmp/h3/s.sock")
TCP_WITH_FILE = Endpoint(
    user="bench",
    database="sbtest",
    host="127.0.0.1",
    port=13313,
    client_options_file=Path("/run/dbrig/client.cnf"),
)


def test_info() -> None:
    assert INFO.binaries == ("mariadb-slap", "mysqlslap")
    assert INFO.package == "mariadb-client"


def test_command_matches_a_captured_run() -> None:
    # the exact command of fixture slap_defaults_file_socket (see README.md)
    endpoint = Endpoint(
        user="tricky",
        database="sbtest",
        socket="/tmp/h3/s.sock",
        client_options_file=Path("/tmp/h3/tricky.cnf"),
    )

    argv = build_command(params(load_type="key", number_of_queries=200, concurrency=2), endpoint)

    assert argv == shlex.split(
        "mariadb-slap --defaults-file=/tmp/h3/tricky.cnf --socket=/tmp/h3/s.sock --user=tricky "
        "--auto-generate-sql --auto-generate-sql-load-type=key "
        "--auto-generate-sql-add-autoincrement --number-char-cols=1 --number-int-cols=1 "
        "--number-of-queries=200 --concurrency=2 --iterations=1 --create-schema=mysqlslap --csv"
    )


def test_defaults_file_comes_first_and_no_password_in_argv() -> None:
    argv = build_command(params(), TCP_WITH_FILE)

    assert argv[:2] == ["mariadb-slap", "--defaults-file=/run/dbrig/client.cnf"]
    assert not any("password" in arg or arg.startswith("-p") for arg in argv)
    assert argv[2:5] == ["--host=127.0.0.1", "--port=13313", "--user=bench"]


def test_no_defaults_without_a_file() -> None:
    argv = build_command(params(), SOCKET)

    assert argv[1] == "--no-defaults"
    assert argv[2:4] == ["--socket=/tmp/h3/s.sock", "--user=root"]
    assert not any(arg.startswith(("--host", "--port")) for arg in argv)


def test_lists_are_joined_with_commas() -> None:
    argv = build_command(params(concurrency=[1, 4], engine=["innodb", "memory"]), SOCKET)

    assert "--concurrency=1,4" in argv
    assert "--engine=innodb,memory" in argv


@pytest.mark.parametrize(
    ("load_type", "add_autoincrement", "expected"),
    [
        ("key", None, True),
        ("update", None, True),
        ("read", None, False),
        ("write", None, False),
        ("mixed", None, False),
        ("update", False, False),
        ("read", True, True),
    ],
)
def test_autoincrement_decided_by_load_type(
    load_type: str, add_autoincrement: bool | None, expected: bool
) -> None:
    p = params(load_type=load_type, add_autoincrement=add_autoincrement)

    argv = build_command(p, SOCKET)

    assert ("--auto-generate-sql-add-autoincrement" in argv) is expected
    assert f"--auto-generate-sql-load-type={load_type}" in argv


def test_csv_flag() -> None:
    with_csv = build_command(params(), SOCKET)
    without = build_command(params(), SOCKET, csv=False)

    assert "--csv" in with_csv
    assert not any(arg.startswith("--csv") for arg in without)
    assert not any(arg.startswith("--csv=") for arg in with_csv)


def test_own_sql_files() -> None:
    p = MysqlslapParams(
        auto_generate_sql=False,
        create=Path("sql/create.sql"),
        query=Path("sql/query.sql"),
        number_of_queries=300,
        concurrency=[1, 3],
        iterations=2,
    )

    argv = build_command(p, SOCKET)

    assert effective_load_type(p) == "query"
    assert "--create=sql/create.sql" in argv
    assert "--query=sql/query.sql" in argv
    assert not any(
        arg.startswith(("--auto-generate-sql", "--number-char", "--number-int")) for arg in argv
    )


def test_optional_options_and_extra_args_last() -> None:
    p = params(
        commit=10,
        detach=50,
        create_schema="slaptest",
        extra_args=["--auto-generate-sql-secondary-indexes=2"],
    )

    argv = build_command(p, SOCKET, binary="mysqlslap")

    assert argv[0] == "mysqlslap"
    assert {"--commit=10", "--detach=50", "--create-schema=slaptest"} <= set(argv)
    assert argv[-1] == "--auto-generate-sql-secondary-indexes=2"


def test_build_command_is_pure() -> None:
    p = params(concurrency=[1, 2])

    assert build_command(p, SOCKET) == build_command(p, SOCKET)


# --- client options file --------------------------------------------------------------


def test_client_options_text_matches_the_file_used_live() -> None:
    # client_options_tricky.cnf logged in as `tricky` (fixture slap_defaults_file_socket)
    password = " p a\"ss#w\\o'rd;x\\ "

    text = client_options_text("tricky", password, socket="/tmp/h3/s.sock")

    assert text == fixture("client_options_tricky.cnf")


def test_client_options_text_tcp() -> None:
    text = client_options_text("bench", "benchpw", host="127.0.0.1", port=13313)

    assert text.splitlines()[1:] == [
        "[client]",
        'user="bench"',
        'password="benchpw"',
        'host="127.0.0.1"',
        "port=13313",
    ]


def test_client_options_text_escapes_control_characters() -> None:
    # this password logged in through such a file on the capture sandbox
    text = client_options_text("u", 'a\tb\nc"\\')

    assert 'password="a\\tb\\nc\\"\\\\"' in text.splitlines()
    assert len(text.splitlines()) == 4
