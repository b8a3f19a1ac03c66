"""Server internals' deltas, files and merge, on snapshots captured from a real MariaDB
10.11 (performance_schema=ON) under sysbench oltp_read_write: ``prepared`` with
sysbench's default prepared statements, ``text`` with ``--db-ps-mode=disable``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from dbrig.analysis.internals import TrialInternals, top_digests, top_waits
from dbrig.errors import ConfigError
from dbrig.run.plan_internals import check_internals, performance_schema_on
from dbrig.sampling import internals
from dbrig.sampling.registry import TrialFacts, sampler_entry, select
from dbrig.scenario import load

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mariadb"


def _snapshots(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    data = json.loads((FIXTURES / "10.11" / f"internals-{name}.json").read_text())
    return data["start"], data["end"]


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_wait_deltas_leave_out_idle_and_rank_by_time() -> None:
    start, end = _snapshots("text")
    deltas = internals.wait_deltas(start["waits"], end["waits"])
    names = [d.event for d in deltas]
    assert "idle" not in names
    assert all(d.count > 0 for d in deltas)
    assert [d.wait_ms for d in deltas] == sorted((d.wait_ms for d in deltas), reverse=True)
    # The wait instruments dbrig enables (off by default) are there.
    assert any(n.startswith("wait/synch/mutex/innodb/") for n in names)
    assert any(n.startswith("wait/synch/rwlock/") for n in names)
    assert "wait/io/socket/sql/client_connection" in names
    socket = next(d for d in deltas if d.event == "wait/io/socket/sql/client_connection")
    before = next(
        r for r in start["waits"] if r["EVENT_NAME"] == "wait/io/socket/sql/client_connection"
    )
    after = next(
        r for r in end["waits"] if r["EVENT_NAME"] == "wait/io/socket/sql/client_connection"
    )
    assert socket.count == after["COUNT_STAR"] - before["COUNT_STAR"]
    assert socket.wait_ms == pytest.approx(
        (after["SUM_TIMER_WAIT"] - before["SUM_TIMER_WAIT"]) / 1e9
    )


def test_digest_deltas_keep_the_top_statements_of_the_window() -> None:
    start, end = _snapshots("text")
    top = internals.digest_deltas(start["digests"], end["digests"], 5)
    assert len(top) == 5
    assert [d.total_ms for d in top] == sorted((d.total_ms for d in top), reverse=True)
    assert any("`sbtest1`" in d.text for d in top)
    select = next(d for d in top if d.text.startswith("SELECT `c` FROM `sbtest"))
    assert select.rows_examined == select.count  # a point select examines one row
    assert select.mean_us == pytest.approx(1000 * select.total_ms / select.count)
    # A statement run before the window only (the sysbench prepare) is not in it.
    everything = internals.digest_deltas(start["digests"], end["digests"], 1000)
    assert not any(d.text.startswith("CREATE TABLE") for d in everything)


def test_prepared_statements_show_as_one_row_without_a_digest() -> None:
    start, end = _snapshots("prepared")
    top = internals.digest_deltas(start["digests"], end["digests"], 5)
    assert top[0].digest == internals.EXECUTE and top[0].count > 1000
    assert "no digest" in top[0].text


def test_metric_deltas_hold_every_innodb_counter() -> None:
    start, end = _snapshots("text")
    deltas = {d.name: d for d in internals.metric_deltas(start["metrics"], end["metrics"])}
    assert len(deltas) == len(end["metrics"]) > 150
    assert deltas["lock_rec_lock_requests"].delta > 0
    assert deltas["lock_rec_lock_requests"].type == "counter"


def test_written_files_read_back_and_give_the_trial_its_wait_time(tmp_path: Path) -> None:
    start, end = _snapshots("text")
    status = [{"TYPE": "InnoDB", "NAME": "", "STATUS": "TRANSACTIONS\n---"}]
    internals.write_files(
        tmp_path, internals.Snapshot(**start), internals.Snapshot(**end), status, 3
    )
    waits = internals.read_waits(tmp_path / internals.WAITS)
    assert waits == [
        internals.WaitDelta(d.event, d.count, round(d.wait_ms, 3))
        for d in internals.wait_deltas(start["waits"], end["waits"])
    ]
    assert len(internals.read_digests(tmp_path / internals.DIGESTS)) == 3
    assert len(_csv_rows((tmp_path / internals.INNODB_METRICS).read_text())) > 150
    assert (tmp_path / internals.INNODB_STATUS).read_text().startswith("TRANSACTIONS")
    (tmp_path / internals.OUT).write_text("internals: could not read x\n")
    outcome = internals.finish(tmp_path)
    # Condition waits (the timer thread asleep: COND_timer) are not the workload's.
    assert any(w.event == "wait/synch/cond/mysys/COND_timer" for w in waits)
    counted = [w for w in waits if not w.event.startswith("wait/synch/cond/")]
    assert outcome.metrics["server_wait_s"] == pytest.approx(sum(w.wait_ms for w in counted) / 1000)
    assert outcome.warnings == ("internals: could not read x",)


def test_a_part_never_read_writes_no_file_and_is_a_warning(tmp_path: Path) -> None:
    start, end = _snapshots("text")
    # performance_schema off: INNODB_METRICS alone.
    only = internals.Snapshot(metrics=start["metrics"])
    internals.write_files(tmp_path, only, internals.Snapshot(metrics=end["metrics"]), None, 5)
    assert not (tmp_path / internals.WAITS).exists()
    assert not (tmp_path / internals.DIGESTS).exists()
    assert (tmp_path / internals.INNODB_METRICS).exists()
    assert internals.finish(tmp_path).metrics == {}


class _Denied:
    """A connection whose every statement is refused, as for an account without grants."""

    def cursor(self) -> _Denied:
        return self

    def __enter__(self) -> _Denied:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str) -> None:
        raise RuntimeError(1142, "SELECT command denied to user 'bench'@'localhost'")


def test_a_refused_read_is_one_clear_line() -> None:
    reader = internals._Reader(_Denied())
    assert internals.snapshot(reader, ps_on=True) == internals.Snapshot()
    assert len(reader.problems) == 3
    assert reader.problems[0] == (
        "internals: could not read performance_schema's wait events: (1142) SELECT command "
        "denied to user 'bench'@'localhost' (grant the account SELECT on performance_schema.*)"
    )


def test_a_cell_merges_its_trials_per_transaction() -> None:
    start, end = _snapshots("text")
    waits = _csv_rows(internals.waits_csv(internals.wait_deltas(start["waits"], end["waits"])))
    digests = _csv_rows(
        internals.digests_csv(internals.digest_deltas(start["digests"], end["digests"], 5))
    )
    one = TrialInternals(waits, digests, transactions=1000)
    merged = top_waits([one, one], n=3)
    alone = top_waits([one], n=3)
    assert [w.event for w in merged] == [w.event for w in alone]
    assert merged[0].count == 2 * alone[0].count
    assert merged[0].us_per_txn == pytest.approx(alone[0].us_per_txn)
    first = next(w for w in waits if not w["event"].startswith("wait/synch/cond/"))
    assert merged[0].event == first["event"]
    assert merged[0].us_per_txn == pytest.approx(float(first["wait_ms"]))
    assert sum(w.share for w in top_waits([one], n=1000)) == pytest.approx(1)
    assert not any(w.event.startswith("wait/synch/cond/") for w in top_waits([one], n=1000))
    statements = top_digests([one, TrialInternals(waits, digests, None)], n=2)
    assert statements[0].count == 2 * int(digests[0]["count"])
    assert statements[0].us_per_txn == pytest.approx(2 * float(digests[0]["total_ms"]))
    assert top_waits([TrialInternals(waits, digests, None)])[0].us_per_txn is None


def test_the_sampler_applies_only_when_asked_and_the_server_answers() -> None:
    entry = sampler_entry("internals")
    asked = TrialFacts(enabled=False, server_status=True, server_samples_its_host=False)
    assert entry not in select(asked)
    on = TrialFacts(False, True, False, internals=True)
    assert entry in select(on)
    assert entry not in select(TrialFacts(False, False, False, internals=True))


@pytest.mark.parametrize(
    ("value", "on"),
    [(True, True), ("ON", True), (1, True), ("off", False), (False, False), (None, False)],
)
def test_performance_schema_setting_read_as_mariadb_does(value: object, on: bool) -> None:
    assert performance_schema_on({"performance-schema": value}) is on
    assert performance_schema_on({}) is False


WORKLOAD = """
workload:
  sysbench: {test: oltp_read_only, tables: 1, table_size: 100, time: 5}
sampling: {internals: {enabled: true}}
"""


@pytest.mark.parametrize(
    ("server", "refused"),
    [
        ("server: {config: {innodb_buffer_pool_size: 64M}}", True),
        ("server: {config: {performance_schema: ON}}", False),  # YAML's ON is true
        ("server: {kind: external, host: 127.0.0.1, port: 3306, user: u, reset: none}", False),
    ],
)
def test_internals_of_a_managed_server_without_performance_schema_are_refused(
    tmp_path: Path, server: str, refused: bool
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"name: p\n{server}\n{WORKLOAD}")
    plan = load(path)
    if not refused:
        check_internals(plan)
        return
    with pytest.raises(ConfigError) as error:
        check_internals(plan)
    line = str(error.value)
    assert "sampling.internals.enabled: server 'default' runs with performance_schema OFF" in line
    assert "performance_schema: ON" in error.value.hint


@pytest.mark.parametrize(
    ("start", "end", "elapsed", "again"),
    [
        # one server: whole-second clocks make the reads differ by more than elapsed - 1
        (10, 13, 3.9, False),
        (10, 14, 3.1, False),
        (0, 0, 0.5, False),
        # killed at 1 s into a 3.5 s window after 2 s up, up again 0.2 s later: 2.3 s up,
        # read as 3 in the worst case (the seen failure: uptime 3 in a 3.5 s window)
        (2, 3, 3.5, True),
        (100, 1, 5.2, True),
    ],
)
def test_a_server_restarted_between_the_two_reads_of_its_uptime(
    start: float, end: float, elapsed: float, again: bool
) -> None:
    assert internals.restarted(start, end, elapsed) is again


def test_a_trial_without_waits_csv_is_left_out_of_the_cells_tables() -> None:
    start, end = _snapshots("text")
    waits = _csv_rows(internals.waits_csv(internals.wait_deltas(start["waits"], end["waits"])))
    one = TrialInternals(waits, [], transactions=1000)
    blind = TrialInternals(None, None, transactions=1000)  # no waits.csv, no digests.csv
    merged, alone = top_waits([one, blind], n=3), top_waits([one], n=3)
    # its transactions are not counted against the other trial's waits
    assert [w.us_per_txn for w in merged] == [w.us_per_txn for w in alone]
    assert top_waits([blind]) == [] and top_digests([blind]) == []
