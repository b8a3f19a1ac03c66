"""Reading a crash recovery from MariaDB's error log, the throughput's way back, and the
fault injector's pure helpers."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from dbrig.analysis.recovery import (
    parse_recovery_log,
    recovery_metrics,
    throughput_recovery,
)
from dbrig.run.disk_fault import error_lines
from dbrig.run.fault_timeline import Event, client_out_s, client_window_s
from dbrig.run.faults import describe
from dbrig.scenario.model import Faults
from dbrig.tools.sysbench import intervals_frame, parse

MARIADB = Path(__file__).parent.parent / "fixtures" / "mariadb" / "10.11"
SYSBENCH = Path(__file__).parent.parent / "fixtures" / "sysbench" / "1.0.20"


def log(name: str) -> str:
    return (MARIADB / f"{name}.err").read_text()


def test_kill9_recovery_with_a_rollback() -> None:
    found = parse_recovery_log(log("crash_recovery_kill9"))
    assert found.crash_recovery
    assert found.redo_bytes == 6189913 - 44894
    assert found.pages_to_recover == 280
    assert (found.trx_to_roll_back, found.rows_to_undo) == (1, 2)
    assert found.stamps["recovery_start"] == dt.datetime(2026, 11, 24, 1, 7, 42)
    assert set(found.stamps) == {
        "recovery_start",
        "redo_done",
        "rollback_start",
        "rollback_done",
        "ready",
    }
    metrics = recovery_metrics(found)
    assert metrics["innodb_recovery_s"] == 0.0  # all within one second of the log's clock
    assert metrics["innodb_rollback_s"] == 0.0
    assert metrics["innodb_pages_recovered"] == 280
    assert metrics["innodb_trx_rolled_back"] == 1
    assert metrics["innodb_redo_mb"] == pytest.approx((6189913 - 44894) / 2**20)


def test_kill9_recovery_without_incomplete_transactions() -> None:
    found = parse_recovery_log(log("crash_recovery_kill9_no_rollback"))
    assert found.crash_recovery and found.pages_to_recover == 151
    assert found.trx_to_roll_back == 0
    assert "rollback_start" not in found.stamps
    assert "innodb_rollback_s" not in recovery_metrics(found)


def test_a_clean_start_after_a_shutdown_is_no_recovery() -> None:
    found = parse_recovery_log(log("clean_start_after_term"))
    assert not found.crash_recovery
    assert found.redo_bytes is None and found.pages_to_recover is None
    assert recovery_metrics(found) == {}
    assert "ready" in found.stamps


def test_phase_lengths_follow_the_timestamps() -> None:
    text = "\n".join(
        [
            "2026-11-24  1:00:00 0 [Note] InnoDB: Starting crash recovery from checkpoint LSN=100",
            "2026-11-24  1:00:03 0 [Note] InnoDB: End of log at LSN=2097252",
            "2026-11-24  1:00:07 0 [Note] InnoDB: To recover: 9 pages",
            "2026-11-24  1:00:08 0 [Note] InnoDB: Starting in background the rollback of "
            "recovered transactions",
            "2026-11-24  1:00:09 0 [Note] mariadbd: ready for connections.",
            "2026-11-24  1:00:20 0 [Note] InnoDB: Rollback of non-prepared transactions completed",
        ]
    )
    metrics = recovery_metrics(parse_recovery_log(text))
    assert metrics["innodb_recovery_s"] == 9
    assert metrics["innodb_redo_s"] == 7
    assert metrics["innodb_rollback_s"] == 12
    assert metrics["innodb_redo_mb"] == 2.0


def test_mysql_iso_timestamps() -> None:
    text = (
        "2026-11-24T01:00:00.100000Z 1 [System] [MY-013576] [InnoDB] Starting crash recovery.\n"
        "2026-11-24T01:00:02.600000Z 0 [System] [MY-010931] [Server] /usr/sbin/mysqld: "
        "ready for connections.\n"
    )
    metrics = recovery_metrics(parse_recovery_log(text))
    assert metrics["innodb_recovery_s"] == pytest.approx(2.5)


def test_empty_log() -> None:
    assert not parse_recovery_log("").crash_recovery


# -- throughput -----------------------------------------------------------------------


def test_a_freeze_from_real_sysbench_intervals() -> None:
    """SIGSTOP after 2 s, SIGCONT 2 s later (captured): back at the interval ending at 5."""
    frame = intervals_frame(parse((SYSBENCH / "fault_server_stop_cont.txt").read_text()))
    back = throughput_recovery(
        list(frame["t_s"]),
        list(frame["tps"]),
        2.0,
        interval_s=1.0,
        errors_per_s=list(frame["errors_per_s"]),
    )
    assert back.baseline == pytest.approx((2118.56 + 1731.43) / 2)
    assert back.recovered_at_s == 5.0
    assert back.recovered_after(2.0) == 3.0
    assert back.errors == pytest.approx(0 + 0 + 11.00)  # the intervals ending at 3, 4 and 5


def test_a_lasting_fault_recovers_only_after_its_end() -> None:
    ends = [1, 2, 3, 4, 5, 6]
    rates = [100, 100, 95, 20, 0, 100]
    back = throughput_recovery(ends, rates, 2.0, interval_s=1.0, fault_end_s=4.5)
    assert back.recovered_at_s == 6
    assert throughput_recovery(ends, rates, 2.0, interval_s=1.0).recovered_at_s == 3


def test_a_gap_while_the_client_was_restarted() -> None:
    ends = [1, 2, 3, 6.5, 7.5]
    rates = [100, 100, 100, 50, 95]
    back = throughput_recovery(ends, rates, 3.2, interval_s=1.0)
    assert back.baseline == 100
    assert back.recovered_after(3.2) == pytest.approx(4.3)


def test_never_recovered() -> None:
    back = throughput_recovery([1, 2, 3, 4], [100, 100, 10, 20], 2.0, interval_s=1.0)
    assert back.recovered_at_s is None and back.recovered_after(2.0) is None


def test_no_interval_before_the_fault_has_no_baseline() -> None:
    back = throughput_recovery([-1, 0, 1], [5, 5, 5], 0.5, interval_s=1.0)
    assert back.baseline is None and back.recovered_at_s is None


def test_the_warmup_intervals_do_not_count() -> None:
    back = throughput_recovery([-1, 0, 1, 2, 3], [1000, 1000, 100, 100, 95], 2.0, interval_s=1.0)
    assert back.baseline == 100 and back.recovered_at_s == 3


# -- the injector's pure helpers --------------------------------------------------------


def test_the_dry_run_names_every_fault_in_time_order() -> None:
    faults = Faults.model_validate(
        {
            "kill_server": {"signal": "STOP", "at": 4, "for": 2},
            "delete_file": {"path": "ib_logfile0", "at": 1},
            "kill_client": {"at": 3},
            "disk_full": {"at": 5, "for": 1, "size": "1G"},
        }
    )
    assert describe(faults) == [
        "delete_file: delete <datadir>/ib_logfile0 at 1 s",
        "kill_client: SIGKILL to the workload at 3 s, started again at once",
        "kill_server: SIGSTOP at 4 s, SIGCONT 2 s later",
        "disk_full: the datadir's filesystem filled at 5 s, freed 1 s later",
    ]


def test_the_client_is_out_from_the_fault_to_its_restart() -> None:
    events = [
        Event(3.2, "signal sent", {"signal": "KILL"}),
        Event(3.6, "first query"),
        Event(3.7, "client run ended"),
        Event(3.7, "client restarted"),
    ]
    assert client_out_s(events) == pytest.approx(0.5)
    assert client_out_s(events[:2]) is None


def test_a_client_started_again_ran_the_window_up_to_its_last_interval() -> None:
    # Killed at 2.0, started again at 2.01 for the rest rounded down (3 s): its last
    # interval ends at 5.01, and the 0.99 s after it were never run, not an outage.
    resumed = [Event(2.0, "client killed"), Event(2.01, "client restarted")]
    assert client_window_s(resumed, [1.0, 3.01, 4.01, 5.01], 6.0, 1.0) == 5.01
    frozen = [Event(2.0, "signal sent", {"signal": "STOP"})]
    assert client_window_s(frozen, [1.0, 2.0, 5.0], 6.0, 1.0) == 6.0
    assert client_window_s(resumed, [], 6.0, 1.0) == 6.0


def test_a_client_window_starts_and_ends_where_its_delayed_intervals_do() -> None:
    # Both runs' clocks started after their launches (0.09 s, then 0.3 s after 2.01):
    # the intervals cover 0.09 .. 5.31, and that is the window the client ran over.
    resumed = [Event(2.0, "client killed"), Event(2.01, "client restarted")]
    ends = [1.09, 2.09, 3.31, 4.31, 5.31]
    assert client_window_s(resumed, ends, 6.0, 1.0) == pytest.approx(5.22)
    assert client_window_s(resumed, [1.0, 6.3], 6.0, 1.0) == pytest.approx(6.3)


def test_server_errors_lose_their_timestamps() -> None:
    text = (
        "2026-11-24  1:29:42 6 [ERROR] mariadbd: The table 'sbtest1' is full\n"
        "2026-11-24  1:29:42 6 [Warning] Aborted connection 6\n"
    )
    assert error_lines(text) == ["[ERROR] mariadbd: The table 'sbtest1' is full"]
