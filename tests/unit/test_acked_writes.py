"""acked_writes: its command, its ack files (captured from the real script), the lookups and
the lost-commit count."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from dbrig.endpoint import Endpoint
from dbrig.errors import ConfigError
from dbrig.scenario import plan_from_dict
from dbrig.tools import acked_writes as aw
from dbrig.tools.acked_writes import AckedWritesParams, AckFile, IdRange
from dbrig.tools.base import ClientLogWorkload
from dbrig.tools.registry import workload_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "acked_writes" / "1.0.20"
ENDPOINT = Endpoint(user="root", database="acked", socket="/tmp/s/mysqld.sock")
SPAN = aw.THREAD_SPAN


def _ack(name: str) -> AckFile:
    return aw.parse_ack_file(name, (FIXTURES / name).read_text())


# --- the command -----------------------------------------------------------------------------


def test_run_command_carries_the_scripts_options_and_warmup_checkpoint() -> None:
    params = AckedWritesParams(threads=3, time=5, rate=100, payload_bytes=10)
    argv = aw.build_command(params, ENDPOINT, "run", warmup=2)
    assert argv[:3] == ["sysbench", str(aw.LUA_SCRIPT), "run"]
    for option in (
        "--threads=3",
        "--time=7",
        "--rate=100",
        "--payload_bytes=10",
        "--reconnect_timeout=120",
        "--report-checkpoints=2",
        "--mysql-db=acked",
        "--engine=innodb",
    ):
        assert option in argv
    assert not any("ignore-errors" in a for a in argv)  # the script reconnects by itself


def test_prepare_and_cleanup_take_no_run_options() -> None:
    for command in ("prepare", "cleanup"):
        argv = aw.build_command(AckedWritesParams(), ENDPOINT, command)
        assert argv[2] == command
        assert not any(a.startswith(("--threads", "--time")) for a in argv)


def test_the_script_and_the_driver_agree_on_the_thread_span() -> None:
    lua = aw.LUA_SCRIPT.read_text()
    span = re.search(r"local SPAN = 2 \^ (\d+)", lua)
    assert span and 2 ** int(span[1]) == SPAN
    assert f'"{aw.TABLE}"' in lua
    assert '"acked-%d.ids"' in lua and aw.ACK_FILE_GLOB == "acked-*.ids"


def test_block_keys_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"workload\.acked_writes\.payload_bytes"):
        plan_from_dict({"name": "t", "workload": {"acked_writes": {"payload_bytes": 5000}}})


# --- ack files -------------------------------------------------------------------------------


def test_captured_ack_files_parse_to_their_thread_range() -> None:
    zero, one = _ack("acked-0.ids"), _ack("acked-1.ids")
    assert (zero.thread, zero.first, zero.torn) == (0, 1, False)
    assert zero.ids == tuple(range(1, len(zero.ids) + 1))
    assert (one.thread, one.first) == (1, SPAN + 1)
    assert one.ids[0] == SPAN + 1 and len(one.ids) == 32
    assert one.range_end == 2 * SPAN - 1


def test_a_torn_last_line_is_not_counted() -> None:
    ack = aw.parse_ack_file("acked-2.ids", f"# thread=2 first={2 * SPAN + 1}\n{2 * SPAN + 1}\n21")
    assert ack.ids == (2 * SPAN + 1,)
    assert ack.torn


def test_a_file_without_its_header_takes_the_thread_from_its_name() -> None:
    ack = aw.parse_ack_file("acked-3.ids", f"{3 * SPAN + 7}\n{3 * SPAN + 8}\n")
    assert (ack.thread, ack.first, ack.ids) == (3, 3 * SPAN + 7, (3 * SPAN + 7, 3 * SPAN + 8))
    empty = aw.parse_ack_file("acked-3.ids", "")
    assert (empty.first, empty.ids, empty.torn) == (3 * SPAN + 1, (), False)


# --- lookups ---------------------------------------------------------------------------------


def test_lookup_ranges_cover_the_thread_range_with_at_most_a_batch_of_acks_each() -> None:
    ack = AckFile(thread=1, first=SPAN + 5, ids=tuple(range(SPAN + 5, SPAN + 5 + 2500)))
    ranges = aw.lookup_ranges(ack, batch=1000)
    assert len(ranges) == 3
    assert ranges[0].low == ack.first and ranges[-1].high == ack.range_end
    for before, after in itertools.pairwise(ranges):
        assert after.low == before.high + 1  # contiguous: nothing in between is missed
    held = [sum(r.low <= i <= r.high for i in ack.ids) for r in ranges]
    assert held == [1000, 1000, 500]


def test_gaps_of_unacknowledged_ids_stay_inside_the_ranges() -> None:
    ack = AckFile(thread=0, first=1, ids=(1, 2, 5, 9))  # 3, 4, 6-8: never acknowledged
    assert aw.lookup_ranges(ack, batch=2) == [IdRange(1, 4), IdRange(5, SPAN - 1)]


def test_no_ack_still_looks_up_the_threads_range() -> None:
    ack = AckFile(thread=0, first=1, ids=())
    assert aw.lookup_ranges(ack) == [IdRange(1, SPAN - 1)]


def test_lookup_query_is_a_primary_key_range() -> None:
    sql = aw.lookup_query(IdRange(SPAN + 1, 2 * SPAN - 1))
    assert sql == f"SELECT id FROM acked_writes WHERE id BETWEEN {SPAN + 1} AND {2 * SPAN - 1}"


def test_captured_files_need_one_query_per_thread() -> None:
    queries = aw.lookup_queries([_ack("acked-0.ids"), _ack("acked-1.ids")])
    assert len(queries) == 2


# --- the count -------------------------------------------------------------------------------


def test_lost_is_acknowledged_and_missing() -> None:
    acks = [AckFile(0, 1, (1, 2, 3, 4)), AckFile(1, SPAN + 1, (SPAN + 1, SPAN + 2), torn=True)]
    present = [1, 3, 4, 5, SPAN + 1, SPAN + 2, SPAN + 3]  # 5 and SPAN + 3: in flight
    count = aw.count_losses(acks, present)
    assert count.acked == 6
    assert count.lost == (2,)
    assert count.unacked_present == 2
    assert count.torn_lines == 1
    metrics = aw.loss_metrics(count)
    assert metrics == {"acked_commits": 6.0, "lost_commits": 1.0, "unacked_present": 2.0}


def test_losses_fail_the_trial_only_when_asked() -> None:
    count = aw.count_losses([AckFile(0, 1, tuple(range(1, 10)))], [1, 2])
    assert aw.loss_reason(count, fail_on_loss=False, files=1) is None
    reason = aw.loss_reason(count, fail_on_loss=True, files=1)
    assert reason == "acked_writes: 7 acknowledged commit(s) lost (ids 3, 4, 5, 6, 7, ...)"
    nothing = aw.count_losses([], [])
    assert aw.loss_reason(nothing, fail_on_loss=False, files=0) == (
        "acked_writes: the client wrote no ack file"
    )


# --- the tool seam ---------------------------------------------------------------------------


def _tool(**block: object) -> aw.AckedWritesTool:
    plan = plan_from_dict({"name": "t", "workload": {"acked_writes": block}}, seed=1)
    tool = workload_for(plan.scenario.workload)
    assert isinstance(tool, aw.AckedWritesTool)
    return tool


def test_the_tool_is_a_client_log_workload_that_finds_losses() -> None:
    tool = _tool(threads=2)
    assert isinstance(tool, ClientLogWorkload)
    logs = {name: (FIXTURES / name).read_text() for name in ("acked-0.ids", "acked-1.ids")}
    acked = [i for ack in (_ack("acked-0.ids"), _ack("acked-1.ids")) for i in ack.ids]
    assert len(tool.client_log_queries(logs)) == 2
    outcome = tool.evaluate_client_logs(logs, acked[1:])
    assert (outcome.metrics["acked_commits"], outcome.metrics["lost_commits"]) == (len(acked), 1)
    assert outcome.reason is None and outcome.intervals is None
    assert outcome.extra_tables["lost_commits"].to_dict("records") == [{"id": 1, "thread": 0}]
    failing = _tool(fail_on_loss=True).evaluate_client_logs(logs, acked[1:])
    assert failing.reason and "1 acknowledged commit(s) lost" in failing.reason
    assert tool.evaluate_client_logs(logs, acked).extra_tables == {}  # nothing lost, no file


@pytest.mark.parametrize("fixture", ["run_t2_rate20_warmup.txt", "run_t2_server_killed.txt"])
def test_sysbench_output_gives_throughput(fixture: str) -> None:
    outcome = _tool().analyse((FIXTURES / fixture).read_text(), 0)
    assert outcome.reason is None
    assert outcome.metrics["tps"] > 0
    assert outcome.intervals is not None and len(outcome.intervals) >= 3


def test_the_server_killed_run_shows_the_outage_in_its_intervals() -> None:
    outcome = _tool().analyse((FIXTURES / "run_t2_server_killed.txt").read_text(), 0)
    assert outcome.intervals is not None
    assert (outcome.intervals["tps"] == 0).any()  # the second the server was down


def test_an_error_other_than_the_server_going_away_ends_the_run_with_its_reason() -> None:
    # captured: the table dropped mid-run; the script reconnects only when the server went away
    text = (FIXTURES / "run_t2_table_dropped_rc1.txt").read_text()
    outcome = _tool().analyse(text, 1)
    assert outcome.reason == (
        "mysql_drv_query() returned error 1146 (Table 'acked.acked_writes' doesn't exist)"
    )
