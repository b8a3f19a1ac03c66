"""sysbench driver: params, argv and the parser, against real sysbench 1.0.20 output."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from dbrig.endpoint import Endpoint
from dbrig.errors import ConfigError
from dbrig.tools.sysbench import (
    INFO,
    SysbenchParams,
    SysbenchResult,
    build_command,
    client_options_text,
    failure_reason,
    intervals_frame,
    parse,
    prepare_key,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sysbench" / "1.0.20"
ALL_FIXTURES = sorted(FIXTURES.glob("*.txt"))


def load(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text()


def result(name: str) -> SysbenchResult:
    return parse(load(name))


SOCKET = Endpoint(user="root", database="ignored", socket="/tmp/sandbox/mysql.sock")
TCP = Endpoint(
    user="bench",
    database="ignored",
    host="127.0.0.1",
    port=3307,
    client_options_file=Path("/run/dbrig/sysbench.cnf"),
)


# ----------------------------------------------------------------------------- parse


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.stem)
def test_every_fixture_parses(path: Path) -> None:
    text = path.read_text()
    res = parse(text)
    assert res.version == "1.0.20"
    # every checkpoint report has a statistics block of its own: complete means one more
    assert res.complete == (text.count("total time:") > text.count("Checkpoint report:"))
    assert len(res.fatal) == text.count("FATAL: ")


def test_empty_output_is_an_empty_result() -> None:
    res = parse("")
    assert res == SysbenchResult()
    assert not res.complete and res.summary == {} and res.intervals == ()
    frame = intervals_frame(res)
    assert len(frame) == 0
    assert list(frame.columns)[:3] == ["t_s", "threads", "tps"]


def test_truncated_output_does_not_crash() -> None:
    text = load("oltp_read_write_run")
    res = parse(text[: len(text) // 3])
    assert not res.complete
    assert res.started


def test_read_write_run_summary() -> None:
    res = result("oltp_read_write_run")
    s = res.summary
    assert res.complete and res.started and res.percentile == 95
    assert s["transactions"] == 3263 and s["tps"] == 326.16
    assert s["queries_read"] == 45682 and s["queries_write"] == 13052
    assert s["queries_other"] == 6526 and s["queries_total"] == 65260
    assert s["qps"] == 6523.14
    assert s["ignored_errors"] == 0 and s["reconnects_per_s"] == 0
    assert s["total_time_s"] == 10.0039 and s["measured_time_s"] == 10.0039
    assert s["events"] == 3263
    assert (s["latency_min_ms"], s["latency_avg_ms"], s["latency_max_ms"]) == (1.65, 6.13, 38.39)
    assert s["latency_pct_ms"] == 12.98 and s["latency_sum_ms"] == 19986.04
    assert (s["events_per_thread_avg"], s["events_per_thread_stddev"]) == (1631.5, 12.5)
    assert s["exec_time_per_thread_avg_s"] == 9.993
    assert s["exec_time_per_thread_stddev_s"] == 0.0
    assert res.fatal == () and res.checkpoints == ()
    assert failure_reason(res, 0) is None


def test_read_write_run_intervals() -> None:
    res = result("oltp_read_write_run")
    assert len(res.intervals) == 10
    first, last = res.intervals[0], res.intervals[-1]
    assert first.t_s == 1 and first.threads == 2 and first.tps == 235.70
    assert first.qps == 4734.96
    assert (first.reads_per_s, first.writes_per_s, first.other_per_s) == (3318.77, 942.80, 473.40)
    assert first.latency_pct_ms == 16.12 and first.errors_per_s == 0.0
    assert first.reconnects_per_s == 0.0
    assert last.t_s == 10 and last.threads == 1 and last.tps == 356.76


def test_read_write_run_histogram_adds_up_to_events() -> None:
    res = result("oltp_read_write_run")
    assert len(res.histogram) == 150
    assert res.histogram[0] == (1.667, 5)
    assert res.histogram[-1] == (38.247, 1)
    assert sum(count for _, count in res.histogram) == res.summary["events"] == 3263


def test_intervals_frame_columns_and_values() -> None:
    frame = intervals_frame(result("oltp_read_write_run"))
    assert list(frame.columns) == [
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
        "measured",
    ]
    assert len(frame) == 10
    assert frame["t_s"].tolist() == [float(t) for t in range(1, 11)]
    assert frame["threads"].iloc[-1] == 1
    assert frame["measured"].all()


@pytest.mark.parametrize(
    ("name", "transactions", "tps", "qps", "pct_ms", "n_intervals"),
    [
        ("oltp_read_only_run", 6053, 1209.79, 19356.60, 2.00, 5),
        ("oltp_write_only_run", 5409, 1081.08, 6486.49, 3.96, 5),
        ("oltp_point_select_run", 121710, 24331.87, 24331.87, 0.14, 5),
        ("oltp_insert_run", 12401, 2477.43, 2477.43, 1.52, 5),
        ("oltp_update_index_run", 10372, 2072.78, 2072.78, 2.22, 5),
        ("oltp_update_non_index_run", 21351, 7110.04, 7110.04, 0.40, 2),
        ("oltp_delete_run", 127762, 42543.84, 42543.84, 0.11, 2),
        ("oltp_socket_run", 4417, 1470.72, 23531.46, 1.70, 0),
        ("oltp_rw_baseline_1", 1615, 322.43, 6448.52, 12.98, 5),
        ("oltp_rw_baseline_2", 2137, 426.93, 8538.61, 6.21, 5),
        ("oltp_rw_baseline_3", 2136, 426.94, 8538.84, 6.43, 5),
        ("oltp_rw_under_stress_1", 1526, 304.85, 6096.96, 13.22, 5),
        ("oltp_rw_under_stress_2", 1753, 349.88, 6997.67, 12.30, 5),
        ("oltp_rw_under_stress_3", 1458, 291.32, 5826.42, 13.95, 5),
        ("oltp_rw_under_stress_taskset0", 1902, 380.15, 7603.05, 9.22, 4),
    ],
)
def test_oltp_runs(
    name: str, transactions: int, tps: float, qps: float, pct_ms: float, n_intervals: int
) -> None:
    res = result(name)
    assert res.complete
    assert res.summary["transactions"] == transactions
    assert res.summary["tps"] == tps  # one or several spaces before "(" both parse
    assert res.summary["qps"] == qps
    assert res.summary["latency_pct_ms"] == pct_ms
    assert len(res.intervals) == n_intervals
    assert failure_reason(res, 0) is None


def test_delete_run_counts_other_queries() -> None:
    s = result("oltp_delete_run").summary
    assert (s["queries_read"], s["queries_write"], s["queries_other"]) == (0, 1869, 125893)
    assert s["queries_total"] == 127762 and s["total_time_s"] == 3.0019


def test_checkpoint_run_summary_covers_only_the_measured_window() -> None:
    res = result("oltp_read_write_checkpoint_run")
    (cp,) = res.checkpoints
    assert cp.t_s == 2.0
    assert cp.summary["transactions"] == 1978 and cp.summary["tps"] == 988.36
    assert cp.summary["total_time_s"] == 2.0001 and cp.summary["latency_pct_ms"] == 3.62
    s = res.summary
    assert s["transactions"] == 2591 and s["tps"] == 862.68 and s["qps"] == 17254.60
    assert s["ignored_errors"] == 2 and s["ignored_errors_per_s"] == 0.67
    assert s["latency_pct_ms"] == 3.30 and s["latency_sum_ms"] == 6003.20
    assert s["exec_time_per_thread_avg_s"] == 3.0016
    # total time counts from the start of the run; rates are per post-checkpoint second
    assert s["total_time_s"] == 5.0035
    assert s["measured_time_s"] == pytest.approx(3.0034)
    assert s["transactions"] / s["measured_time_s"] == pytest.approx(s["tps"], rel=1e-4)


def test_checkpoint_run_intervals_continue_from_the_start() -> None:
    res = result("oltp_read_write_checkpoint_run")
    assert [i.t_s for i in res.intervals] == [1.0, 2.0, 3.0, 4.0, 5.0]
    # the interval printed just after the checkpoint lost its latency data to it
    assert res.intervals[1].latency_pct_ms == 0.0 and res.intervals[1].tps == 1028.14
    assert res.intervals[3].errors_per_s == 1.0
    frame = intervals_frame(res)
    assert frame["measured"].tolist() == [False, False, True, True, True]


def test_checkpoint_histogram_covers_only_the_measured_window() -> None:
    res = result("oltp_read_write_checkpoint_histogram_run")
    assert res.checkpoints[0].summary["events"] == 1758
    assert res.summary["events"] == 2456
    assert sum(count for _, count in res.histogram) == 2456
    assert res.histogram[0] == (0.741, 1)
    assert res.summary["measured_time_s"] == pytest.approx(5.0059 - 2.0001)
    assert len(res.intervals) == 5


def test_sigint_run_has_no_summary() -> None:
    res = result("oltp_read_write_sigint")
    assert res.started and not res.complete
    assert res.summary == {}
    assert len(res.intervals) == 2 and res.intervals[1].tps == 338.32
    reason = failure_reason(res, 130)
    assert reason == "killed by signal / no summary (rc=130)"
    assert "no summary" in failure_reason(res, -2)
    assert "no summary" in failure_reason(res, 0)


FATAL_CASES = [
    (
        "err_wrong_password",
        7,
        "error 1045: Access denied for user 'bench'@'localhost' (using password: YES)",
    ),
    ("err_conn_refused", 7, "error 2002: Can't connect to server on '127.0.0.1' (115)"),
    ("err_missing_tables", 6, "MySQL error: 1146 \"Table 'sbtest.sbtest3' doesn't exist\""),
    ("err_no_db", 3, "error 1049: Unknown database 'nosuchdb'"),
    (
        "err_prepare_exists",
        2,
        "mysql_drv_query() returned error 1050 (Table 'sbtest1' already exists)",
    ),
    (
        "err_bad_testname",
        1,
        "Cannot find benchmark 'oltp_nonexistent': no such built-in test, file or module",
    ),
]


@pytest.mark.parametrize(("name", "n_fatal", "reason"), FATAL_CASES)
def test_fatal_cases(name: str, n_fatal: int, reason: str) -> None:
    res = result(name)
    assert len(res.fatal) == n_fatal
    assert not res.complete and res.summary == {}
    assert not any(line.startswith("FATAL") for line in res.fatal)
    assert failure_reason(res, 1) == reason


def test_fatal_lines_keep_their_order() -> None:
    res = result("err_wrong_password")
    assert res.fatal[0] == (
        "unable to connect to MySQL server on host '127.0.0.1', port 13306, aborting..."
    )
    assert res.fatal[-1] == "Thread initialization failed!"
    assert not res.started


@pytest.mark.parametrize(
    "name",
    [
        "oltp_read_write_prepare",
        "oltp_read_write_prepare_small",
        "oltp_read_write_cleanup",
        "fileio_prepare",
        "fileio_cleanup",
    ],
)
def test_prepare_and_cleanup_are_good_without_summary(name: str) -> None:
    res = result(name)
    assert not res.started and not res.complete and res.fatal == ()
    assert failure_reason(res, 0) is None
    assert failure_reason(res, 1) == "exit code 1"


def test_complete_run_with_bad_exit_code() -> None:
    assert failure_reason(result("oltp_insert_run"), 2) == "exit code 2"


def test_cpu_run() -> None:
    res = result("cpu_run")
    s = res.summary
    assert s["events_per_s"] == 2596.66 and s["events"] == 12987
    assert s["total_time_s"] == 5.0009 and s["latency_pct_ms"] == 0.83
    assert "tps" not in s
    assert len(res.intervals) == 5
    assert res.intervals[0].events_per_s == 2611.16 and res.intervals[0].threads == 2
    assert res.intervals[0].latency_pct_ms == 0.81
    assert "events_per_s" in intervals_frame(res).columns


def test_memory_run() -> None:
    res = result("memory_run")
    s = res.summary
    assert s["operations"] == 100825 and s["operations_per_s"] == 20161.37
    assert s["mib_transferred"] == 100825.00 and s["mib_per_s"] == 20161.37
    assert s["events"] == 100825
    assert [i.mib_per_s for i in res.intervals] == [20875.72, 19933.65, 20187.55, 19626.84]


def test_fileio_run() -> None:
    res = result("fileio_run")
    s = res.summary
    assert (s["reads_per_s"], s["writes_per_s"], s["fsyncs_per_s"]) == (9342.68, 6228.45, 2495.17)
    assert (s["read_mib_per_s"], s["written_mib_per_s"]) == (145.98, 97.32)
    assert s["events"] == 90467 and s["latency_pct_ms"] == 0.62
    first = res.intervals[0]
    assert (first.read_mib_per_s, first.written_mib_per_s) == (148.42, 98.95)
    assert first.fsyncs_per_s == 2530.10 and first.latency_pct_ms == 0.619
    assert len(res.intervals) == 5


@pytest.mark.parametrize(
    ("name", "events", "total_time"), [("threads_run", 11288, 5.0002), ("mutex_run", 2, 0.3396)]
)
def test_runs_with_general_statistics_only(name: str, events: int, total_time: float) -> None:
    res = result(name)
    assert res.complete and res.intervals == ()
    assert res.summary["events"] == events and res.summary["total_time_s"] == total_time


def test_percentile_label_follows_the_option() -> None:
    res = result("oltp_point_select_rate_p99_run")
    assert res.percentile == 99
    assert res.summary["latency_pct_ms"] == 0.40
    (interval,) = res.intervals  # the "queue length" line merges into its second
    assert interval.latency_pct_ms == 0.46
    assert (interval.queue_length, interval.concurrency) == (0, 0)
    assert {"queue_length", "concurrency"} <= set(intervals_frame(res).columns)


def test_percentile_disabled() -> None:
    res = result("oltp_point_select_percentile_off_run")
    assert res.percentile == 0
    assert "latency_pct_ms" not in res.summary
    assert res.summary["latency_sum_ms"] == 3980.47


# ----------------------------------------------------------------------------- params


def test_info() -> None:
    assert INFO.name == "sysbench" and INFO.binaries == ("sysbench",)
    assert INFO.package == "sysbench"


def test_params_defaults() -> None:
    p = SysbenchParams()
    assert p.test == "oltp_read_write" and p.tables == 1 and p.table_size == 10000
    assert (p.threads, p.time, p.events, p.rate) == (1, 10, 0, 0)
    assert (p.report_interval, p.percentile, p.histogram) == (1, 95, False)
    assert p.db_ps_mode == "auto" and p.mysql_ignore_errors is None and p.db == "sbtest"
    assert p.options == {} and p.extra_args == ()


def test_every_field_is_described() -> None:
    assert all(f.description for f in SysbenchParams.model_fields.values())


def test_params_reject_unknown_keys() -> None:
    with pytest.raises(ValidationError) as err:
        SysbenchParams.model_validate({"threads": 2, "thread": 4})
    assert err.value.errors()[0]["loc"] == ("thread",)


def test_params_reject_endless_run() -> None:
    with pytest.raises(ValidationError, match="forever"):
        SysbenchParams(time=0, events=0)
    assert SysbenchParams(time=0, events=1000).events == 1000


@pytest.mark.parametrize(
    "bad",
    [
        {"test": "oltp_nonexistent"},
        {"tables": 0},
        {"percentile": 101},
        {"db_ps_mode": "on"},
        {"mysql_ignore_errors": "1213"},
        {"mysql_ignore_errors": ["1213,1205"]},
        {"options": {"auto_inc": "yes"}},
        {"options": {"tables": 4}},
        {"options": {"mysql_password": "x"}},
        {"options": {"Point-Selects": 4}},
        {"extra_args": ["--mysql-password=secret"]},
        {"extra_args": ["--config-file=/tmp/x"]},
    ],
)
def test_params_reject_bad_values(bad: dict) -> None:
    with pytest.raises(ValidationError):
        SysbenchParams.model_validate(bad)


def test_params_are_frozen() -> None:
    p = SysbenchParams()
    with pytest.raises(ValidationError):
        p.threads = 8  # type: ignore[misc]


def test_prepare_key_ignores_run_only_fields() -> None:
    base = SysbenchParams(tables=4, table_size=1000)
    same = SysbenchParams(
        test="oltp_point_select",
        tables=4,
        table_size=1000,
        threads=16,
        time=60,
        options={"point_selects": 4, "auto_inc": True},
    )
    assert prepare_key(base) == prepare_key(same)
    for changed in (
        {"tables": 5, "table_size": 1000},
        {"tables": 4, "table_size": 2000},
        {"tables": 4, "table_size": 1000, "db": "other"},
        {"tables": 4, "table_size": 1000, "options": {"auto_inc": "off"}},
        {"tables": 4, "table_size": 1000, "options": {"mysql_storage_engine": "aria"}},
    ):
        assert prepare_key(SysbenchParams(**changed)) != prepare_key(base)


# ----------------------------------------------------------------------------- argv


def test_run_command_over_socket() -> None:
    p = SysbenchParams(test="oltp_read_only", tables=2, table_size=2000, threads=4, time=30)
    argv = build_command(p, SOCKET, "run")
    assert argv[:3] == ["sysbench", "oltp_read_only", "run"]
    assert "--db-driver=mysql" in argv
    assert "--mysql-socket=/tmp/sandbox/mysql.sock" in argv
    assert not any(a.startswith(("--mysql-host", "--mysql-port", "--config-file")) for a in argv)
    assert "--mysql-user=root" in argv and "--mysql-db=sbtest" in argv
    for expected in (
        "--tables=2",
        "--table-size=2000",
        "--threads=4",
        "--time=30",
        "--events=0",
        "--rate=0",
        "--report-interval=1",
        "--percentile=95",
        "--histogram=off",
        "--db-ps-mode=auto",
    ):
        assert expected in argv
    assert not any(a.startswith(("--report-checkpoints", "--mysql-ignore-errors")) for a in argv)
    assert build_command(p, SOCKET, "run") == argv


def test_run_command_over_tcp_with_options_file() -> None:
    p = SysbenchParams(db="bench_db")
    argv = build_command(p, TCP, "run", binary="/usr/bin/sysbench")
    assert argv[0] == "/usr/bin/sysbench"
    assert "--mysql-host=127.0.0.1" in argv and "--mysql-port=3307" in argv
    assert not any(a.startswith("--mysql-socket") for a in argv)
    assert "--config-file=/run/dbrig/sysbench.cnf" in argv
    assert "--mysql-db=bench_db" in argv


def test_password_never_in_argv() -> None:
    password = "s3cret-pw"
    assert client_options_text(password) == f"mysql-password={password}\n"
    p = SysbenchParams()
    for command in ("prepare", "run", "cleanup"):
        argv = build_command(p, TCP, command)
        assert not any(password in a for a in argv)
        assert not any("password" in a for a in argv)


@pytest.mark.parametrize(
    ("password", "line"),
    [
        ("plain", "mysql-password=plain\n"),
        ("with space#,x", "mysql-password='with space#,x'\n"),
        ("it's", 'mysql-password="it\'s"\n'),
        ('a=b #c d"e\\', "mysql-password='a=b #c d\"e\\'\n"),
    ],
)
def test_client_options_text_quotes_for_sysbench(password: str, line: str) -> None:
    assert client_options_text(password) == line


@pytest.mark.parametrize("password", ["both ' and \"", "two\nlines", "x" * 250])
def test_client_options_text_rejects_what_sysbench_cannot_read(password: str) -> None:
    with pytest.raises(ConfigError):
        client_options_text(password)


def test_warmup_becomes_time_and_checkpoint() -> None:
    p = SysbenchParams(time=30)
    argv = build_command(p, SOCKET, "run", warmup=5)
    assert "--time=35" in argv and "--report-checkpoints=5" in argv
    assert "--time=30" not in argv


def test_warmup_with_events_only_is_an_error() -> None:
    p = SysbenchParams(time=0, events=5000)
    assert "--time=0" in build_command(p, SOCKET, "run")
    with pytest.raises(ConfigError, match="warmup"):
        build_command(p, SOCKET, "run", warmup=5)
    with pytest.raises(ConfigError, match="warmup"):
        build_command(SysbenchParams(), SOCKET, "run", warmup=-1)


def test_options_render_booleans_as_on_off() -> None:
    p = SysbenchParams(
        options={
            "skip_trx": True,
            "auto_inc": "off",
            "range_selects": 0,
            "point_selects": 4,
            "mysql_storage_engine": "aria",
        },
        histogram=True,
        mysql_ignore_errors=[1213, 1205],
    )
    argv = build_command(p, SOCKET, "run")
    for expected in (
        "--skip_trx=on",
        "--auto_inc=off",
        "--range_selects=off",
        "--point_selects=4",
        "--mysql_storage_engine=aria",
        "--histogram=on",
        "--mysql-ignore-errors=1213,1205",
    ):
        assert expected in argv
    all_errors = SysbenchParams(mysql_ignore_errors="all")
    assert "--mysql-ignore-errors=all" in build_command(all_errors, SOCKET, "run")


def test_extra_args_come_last() -> None:
    extra = ["--rand-type=uniform", "--time=99"]
    p = SysbenchParams(extra_args=extra)
    for command in ("prepare", "run", "cleanup"):
        assert build_command(p, SOCKET, command)[-2:] == extra


def test_prepare_command() -> None:
    p = SysbenchParams(
        tables=3,
        table_size=500,
        threads=8,
        time=60,
        options={"auto_inc": False, "point_selects": 4},
    )
    argv = build_command(p, SOCKET, "prepare")
    assert argv[:3] == ["sysbench", "oltp_read_write", "prepare"]
    assert "--tables=3" in argv and "--table-size=500" in argv
    assert "--threads=3" in argv  # one thread per table at most
    assert "--auto_inc=off" in argv
    assert not any(a.startswith(("--time", "--point_selects", "--report")) for a in argv)


def test_cleanup_command() -> None:
    p = SysbenchParams(tables=3, db="other")
    argv = build_command(p, SOCKET, "cleanup")
    assert argv[:3] == ["sysbench", "oltp_read_write", "cleanup"]
    assert "--tables=3" in argv and "--mysql-db=other" in argv
    assert not any(a.startswith(("--time", "--table-size", "--threads")) for a in argv)


def test_the_interval_after_a_checkpoint_has_no_percentile_rather_than_zero() -> None:
    checkpointed = result("oltp_read_write_checkpoint_run")
    frame = intervals_frame(checkpointed)
    at = checkpointed.checkpoints[-1].t_s
    # The line printed right after "[ 2s ] Checkpoint report" reads "lat (ms,95%): 0.00".
    assert frame[frame["t_s"] == at]["latency_pct_ms"].isna().all()
    assert (frame[frame["t_s"] != at]["latency_pct_ms"] > 0).all()
