"""The tpcc tool: argv building, parsing the script's real output, consistency, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbrig.cli import main
from dbrig.endpoint import Credentials, Endpoint
from dbrig.tools import tpcc
from dbrig.tools.base import CheckedWorkload, SizedDataSet
from dbrig.tools.sysbench import SysbenchParams, SysbenchTool
from dbrig.tools.tpcc import TpccParams, TpccTool, build_command, parse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "tpcc" / "1.0.20"
SOCKET = Endpoint(user="root", database="tpcc", socket="/tmp/x/mysqld.sock")
TCP = Endpoint(
    user="bench",
    database="tpcc",
    host="db1",
    port=3307,
    client_options_file=Path("/tmp/x/sysbench.cnf"),
)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# --------------------------------------------------------------------------- argv


def test_run_argv_points_sysbench_at_the_packaged_script() -> None:
    argv = build_command(TpccParams(warehouses=2, threads=8, time=30), SOCKET, "run", warmup=5)
    assert argv[:3] == ["sysbench", str(tpcc.LUA_SCRIPT), "run"]
    assert tpcc.LUA_SCRIPT.is_file()
    assert argv[3:] == [
        "--db-driver=mysql",
        "--mysql-socket=/tmp/x/mysqld.sock",
        "--mysql-user=root",
        "--mysql-db=tpcc",
        "--warehouses=2",
        "--engine=innodb",
        "--foreign_keys=off",
        "--threads=8",
        "--time=35",
        "--report-interval=1",
        "--percentile=95",
        "--mysql-ignore-errors=1213,1205,1020",
        "--measure_after=5",
        "--report-checkpoints=5",
    ]


def test_run_without_warmup_has_no_checkpoint() -> None:
    argv = build_command(TpccParams(time=10), SOCKET, "run")
    assert "--time=10" in argv and "--measure_after=0" in argv
    assert not any(a.startswith("--report-checkpoints") for a in argv)


def test_prepare_loads_by_warehouse_with_at_most_one_thread_per_warehouse() -> None:
    params = TpccParams(warehouses=2, prepare_threads=4, engine="MyISAM", foreign_keys=True)
    argv = build_command(params, TCP, "prepare", binary="/usr/bin/sysbench")
    assert argv[0] == "/usr/bin/sysbench" and argv[2] == "prepare"
    assert "--threads=2" in argv
    assert {"--engine=MyISAM", "--foreign_keys=on", "--warehouses=2"} <= set(argv)
    assert {"--mysql-host=db1", "--mysql-port=3307", "--mysql-user=bench"} <= set(argv)
    assert "--config-file=/tmp/x/sysbench.cnf" in argv
    assert not any("password" in a for a in argv)


def test_cleanup_argv() -> None:
    argv = build_command(TpccParams(), SOCKET, "cleanup")
    assert argv[2] == "cleanup" and not any(a.startswith("--threads") for a in argv)


def test_the_data_set_key_holds_what_prepare_writes_and_nothing_else() -> None:
    base = TpccTool(TpccParams(warehouses=2)).data_set_key()
    assert TpccTool(TpccParams(warehouses=2, threads=9, time=5)).data_set_key() == base
    assert TpccTool(TpccParams(warehouses=2, prepare_threads=2)).data_set_key() == base
    assert TpccTool(TpccParams(warehouses=2, engine="InnoDB")).data_set_key() == base
    for other in ({"warehouses": 3}, {"foreign_keys": True}, {"engine": "aria"}, {"db": "t2"}):
        assert TpccTool(TpccParams(**{"warehouses": 2, **other})).data_set_key() != base


def test_the_tool_offers_checks_and_a_size() -> None:
    tool = TpccTool(TpccParams(warehouses=3))
    assert isinstance(tool, CheckedWorkload) and isinstance(tool, SizedDataSet)
    assert tool.data_set_bytes() == 3 * tpcc.BYTES_PER_WAREHOUSE + tpcc.BASE_BYTES
    assert tool.client_options(Credentials("u", "", None, None, "/s")) is None
    with_password = Credentials("u", "s3cret", None, None, "/s")
    assert tool.client_options(with_password) == "mysql-password=s3cret\n"
    other = SysbenchTool(SysbenchParams())
    assert not isinstance(other, CheckedWorkload)
    assert isinstance(other, SizedDataSet)  # its OLTP tables (tests/unit/test_dryrun.py)


# --------------------------------------------------------------------------- parsing


def test_parse_sums_the_threads_report_lines() -> None:
    result = parse(fixture("run_w1_t16.txt"))
    assert result.threads_reported == 16
    assert result.sysbench.complete
    counts = {name: s.count for name, s in result.types.items()}
    assert sum(counts.values()) == pytest.approx(result.sysbench.summary["transactions"], abs=16)
    assert counts["new_order"] > counts["order_status"] > 0
    no = result.types["new_order"]
    assert 0 < no.rollbacks < no.count
    assert sum(no.buckets.values()) == no.count


def test_warmup_is_left_out_of_the_per_type_counts() -> None:
    result = parse(fixture("run_w1_t4_warmup.txt"))
    assert len(result.sysbench.checkpoints) == 1
    total = sum(s.count for s in result.types.values())
    # sysbench's own counters restart at the checkpoint; the script skips the same warm-up
    assert total == pytest.approx(result.sysbench.summary["transactions"], rel=0.02)


def test_metrics_of_a_real_run() -> None:
    tool = TpccTool(TpccParams(threads=4, time=10))
    outcome = tool.analyse(fixture("run_w1_t4_warmup.txt"), 0)
    m = outcome.metrics
    assert outcome.reason is None
    minutes = m["measured_time_s"] / 60
    assert m["nopm"] == pytest.approx((m["new_order_count"] - m["new_order_rollbacks"]) / minutes)
    counted = sum(m[f"{t}_count"] for t in tpcc.TYPES)
    assert m["tpm"] == pytest.approx(counted / minutes)
    for t in tpcc.TYPES:
        assert 0 < m[f"latency_{t}_avg_ms"] <= m[f"latency_{t}_pct_ms"] * 1.2
    assert m["percentile"] == 95
    assert outcome.intervals is not None and not outcome.intervals["measured"].all()


def test_retried_lock_waits_are_counted() -> None:
    m = TpccTool(TpccParams()).analyse(fixture("run_lock_wait_retries.txt"), 0).metrics
    assert m["tpcc_retries"] == m["ignored_errors"] == 2
    assert m["payment_retries"] == 2  # one on each thread
    assert sum(m[f"{t}_retries"] for t in tpcc.TYPES) == m["tpcc_retries"]


def test_missing_tables_fail_with_the_server_error() -> None:
    outcome = TpccTool(TpccParams()).analyse(fixture("run_err_missing_tables.txt"), 1)
    assert outcome.reason is not None and "1146" in outcome.reason


def test_a_run_whose_script_printed_no_report_failed() -> None:
    text = fixture("run_w1_t16.txt")
    silent = "\n".join(ln for ln in text.splitlines() if not ln.startswith("tpcc:"))
    assert "no per-type report" in (TpccTool(TpccParams()).analyse(silent, 0).reason or "")


def test_parse_survives_empty_and_truncated_output() -> None:
    assert parse("").threads_reported == 0
    half = fixture("run_w1_t16.txt")[:3000]
    assert parse(half).types["new_order"].count >= 0


def test_percentile_is_the_upper_edge_of_its_bucket() -> None:
    stats = tpcc.TypeStats(count=4, buckets={40: 3, 48: 1})
    assert stats.latency_pct_ms(50) == pytest.approx(2**10 / 1000)
    assert stats.latency_pct_ms(95) == pytest.approx(2**12 / 1000)
    assert tpcc.TypeStats().latency_pct_ms(95) is None


# --------------------------------------------------------------------------- consistency


def test_consistency_passes_when_every_count_is_zero() -> None:
    counts = dict.fromkeys(tpcc.consistency_queries(), 0)
    metrics, reason = tpcc.evaluate_consistency(counts)
    assert reason is None and set(metrics) == set(counts)


def test_a_failed_condition_is_named() -> None:
    counts = dict.fromkeys(tpcc.consistency_queries(), 0) | {"consistency_3_violations": 2}
    metrics, reason = tpcc.evaluate_consistency(counts)
    assert metrics["consistency_3_violations"] == 2
    assert reason is not None and "condition 3" in reason and "2 " in reason
    assert "condition 1" not in reason


def test_an_unchecked_condition_is_not_a_pass() -> None:
    _, reason = tpcc.evaluate_consistency({"consistency_1_violations": 0})
    assert reason is not None and "not checked" in reason


# --------------------------------------------------------------------------- bad input

VALID = """\
name: tpcc-bad
workload:
  tpcc: {warehouses: 1, threads: 2, time: 2}
"""


def refused(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> str:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    out = tmp_path / "runs"
    with pytest.raises(SystemExit) as exited:
        main(["run", str(path), "--out", str(out)])
    err = capsys.readouterr().err.strip("\n").splitlines()
    assert exited.value.code == 2, err
    assert len(err) == 1, err
    assert not out.exists()
    return err[0]


@pytest.mark.parametrize(
    "text, expected",
    [
        (VALID.replace("warehouses: 1", "warehouses: 0"), "workload.tpcc.warehouses"),
        (
            VALID.replace("threads: 2", "threads: 11, strict: true"),
            "threads: 11 is more than the 10 terminals",
        ),
        (
            VALID + "matrix:\n  workload.tpcc.threads: [10, 21]\n"
            "  workload.tpcc.warehouses: [2]\n  workload.tpcc.strict: [true]\n",
            "threads: 21 is more than the 20 terminals",
        ),
        (VALID.replace("warehouses: 1", "warehouses: 10000000"), "workload.tpcc.warehouses: "),
    ],
    ids=["no-warehouse", "strict", "strict-in-matrix", "does-not-fit-the-disk"],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, text: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused(tmp_path, text, capsys)
    assert expected in line
    assert str(tmp_path / "scenario.yaml") in line


def test_more_threads_than_terminals_is_fine_without_strict() -> None:
    assert TpccParams(warehouses=1, threads=64).threads == 64
