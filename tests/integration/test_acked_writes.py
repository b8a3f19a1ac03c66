"""acked_writes against a real MariaDB: acknowledged commits counted, deleted ones found
lost, and a server killed with SIGKILL mid-run and restarted under the running client.

The lower-level tests run the packaged script with sysbench against a sandbox of their own
and check its ack files with the run side's own function (``check_client_logs``); one
test runs the whole trial through ``dbrig run``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
import yaml

from dbrig import proc
from dbrig.run.trial_outcome import check_client_logs
from dbrig.server.sandbox import Sandbox
from dbrig.tools import acked_writes as aw
from dbrig.tools.acked_writes import AckedWritesParams, AckedWritesTool, build_command
from tests.helpers.wait import wait_for
from tests.integration import helpers
from tests.integration.helpers import (
    TINY_CONFIG,
    only_run_dir,
    read_json,
    run_main,
    tiny_scenario,
    trial_dirs,
    write_scenario,
)

pytestmark = pytest.mark.integration

SCENARIOS = Path(__file__).parent.parent.parent / "scenarios"

DURABLE = {**TINY_CONFIG, "innodb_flush_log_at_trx_commit": 1}
PARAMS = AckedWritesParams(threads=2, time=3, report_interval=1, reconnect_timeout=60)
# Long enough that the client still runs after the restart: the kill comes after a few
# dozen commits (well under a second), the crash recovery and start take one to five
# seconds on a busy machine. With 6 s, a slow restart left the client no time to commit
# again, and "it went on" failed though it had reconnected.
KILLED_PARAMS = PARAMS.model_copy(update={"time": 10})
ACKED_BEFORE_KILL = 50


@pytest.fixture(scope="module")
def prepared_datadir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A datadir holding the empty table, made by the script's own prepare."""
    home = tmp_path_factory.mktemp("acked-template") / "server"
    return helpers.prepared_template(
        "acked-prep",
        home,
        TINY_CONFIG,
        PARAMS.db,
        lambda box: build_command(PARAMS, box.endpoint(PARAMS.db), "prepare"),
        timeout_s=120,
    )


def server_on_copy(template: Path, home: Path, config: dict) -> AbstractContextManager[Sandbox]:
    return helpers.server_on_copy("acked", template, home, config)


def start_client(
    sandbox: Sandbox, work: Path, out: Path, params: AckedWritesParams = PARAMS
) -> proc.Child:
    work.mkdir()
    argv = build_command(params, sandbox.endpoint(params.db), "run")
    return proc.spawn(argv, stdout=out, merge_stderr=True, cwd=work)


def finish(child: proc.Child, out: Path) -> None:
    done = child.wait(120)
    if done is None:
        child.stop(grace_s=5)
        pytest.fail(f"sysbench did not finish:\n{out.read_text()[-2000:]}")
    assert done.returncode == 0, out.read_text()[-2000:]


def check(sandbox: Sandbox, work: Path) -> tuple[dict[str, float], str | None]:
    with contextlib.closing(sandbox.connect(PARAMS.db)) as conn:
        outcome = check_client_logs(AckedWritesTool(PARAMS), work, conn)
    return outcome.metrics, outcome.reason


def acked_ids(work: Path) -> list[int]:
    return [
        i
        for path in sorted(work.glob(aw.ACK_FILE_GLOB))
        for i in aw.parse_ack_file(path.name, path.read_text()).ids
    ]


def test_rows_deleted_after_their_ack_are_exactly_the_lost_ones(
    tmp_path: Path, prepared_datadir: Path
) -> None:
    work, out = tmp_path / "work", tmp_path / "run.out"
    with server_on_copy(prepared_datadir, tmp_path / "s", DURABLE) as sandbox:
        finish(start_client(sandbox, work, out), out)
        metrics, reason = check(sandbox, work)
        assert metrics["acked_commits"] > 0
        assert metrics["lost_commits"] == 0 and metrics["unacked_present"] == 0
        assert reason is None

        acked = acked_ids(work)
        assert len(acked) == metrics["acked_commits"]
        removed = acked[:: max(1, len(acked) // 7)][:7]  # both threads' files, spread out
        sandbox.execute(
            f"USE {PARAMS.db}",
            f"DELETE FROM {aw.TABLE} WHERE id IN ({', '.join(map(str, removed))})",
        )
        metrics, reason = check(sandbox, work)
        assert metrics["lost_commits"] == len(removed) == 7
        assert metrics["acked_commits"] == len(acked)
        assert reason is None  # fail_on_loss is off: a loss is a measurement

        tool = AckedWritesTool(PARAMS.model_copy(update={"fail_on_loss": True}))
        with contextlib.closing(sandbox.connect(PARAMS.db)) as conn:
            outcome = check_client_logs(tool, work, conn)
        assert outcome.reason is not None and str(min(removed)) in outcome.reason
        assert sorted(outcome.extra_tables["lost_commits"]["id"]) == sorted(removed)


def test_a_server_killed_mid_run_and_restarted_loses_nothing_at_flush_1(
    tmp_path: Path, prepared_datadir: Path
) -> None:
    work, out = tmp_path / "work", tmp_path / "run.out"
    with server_on_copy(prepared_datadir, tmp_path / "s", DURABLE) as sandbox:
        child = start_client(sandbox, work, out, KILLED_PARAMS)
        try:
            wait_for(
                "acknowledged commits",
                lambda: len(acked_ids(work)) >= ACKED_BEFORE_KILL,
                timeout=60,
            )
            assert sandbox.pid is not None
            os.kill(sandbox.pid, signal.SIGKILL)
            wait_for("the server to die", sandbox.died, timeout=30)
            before_restart = len(acked_ids(work))
            sandbox.stop()  # reaps the killed server
            sandbox.start(DURABLE)  # crash recovery on the same datadir
        except BaseException:
            child.stop(grace_s=5)
            raise
        finish(child, out)
        assert len(acked_ids(work)) > before_restart  # the client reconnected and went on
        metrics, reason = check(sandbox, work)
    assert metrics["acked_commits"] == len(acked_ids(work))
    assert metrics["lost_commits"] == 0
    assert metrics["unacked_present"] <= PARAMS.threads  # at most one in flight per thread
    assert reason is None


def test_a_trial_killed_by_its_fault_saves_acked_and_lost_commits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The durability-loss scenario in small: dbrig's own kill_server fault, the client
    riding through the restart, and the loss check against the recovered server."""
    scenario = tiny_scenario(
        name="acked",
        server={"config": DURABLE},
        workload={"acked_writes": {"threads": 2, "time": 6}},
        faults={"kill_server": {"signal": "KILL", "at": 2}},
    )
    path = write_scenario(tmp_path / "acked.yaml", scenario)
    started = time.monotonic()
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 0, result.err
    assert time.monotonic() - started < 300
    (trial,) = trial_dirs(only_run_dir(tmp_path / "runs"))
    saved = read_json(trial / "trial.json")
    assert saved["status"] == "ok", saved["reason"]
    assert saved["metrics"]["acked_commits"] > 0
    assert saved["metrics"]["lost_commits"] == 0
    assert saved["metrics"]["tps"] > 0
    assert saved["metrics"]["restart_to_query_s"] > 0  # the fault fired and was recovered from
    assert saved["metrics"]["fault_window_tps"] > 0  # its intervals read on the fault's clock
    assert "workload_resumed" not in saved["commands"]  # the same client rode through it
    assert not (trial / "client-log").exists()  # the ack files are removed once counted


def test_durability_loss_cut_short_with_the_kill_in_the_last_seconds_measures_both_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped durability-loss scenario cut as the issue did (no warm-up, a KILL near
    the end, flush 0 and 1): the client's time ran out while the server restarted, and the
    run ended with ``internal error: IndexError: pop from empty list`` before the second
    cell. The kill is put in the window's last second here (the issue's kill at 10 s of 12
    passed whenever the restart took under 2 s): the client surely ends first. The issue's
    window was 12 s; what matters is only where the kill lands in it, so 5 s do."""
    shipped = yaml.safe_load((SCENARIOS / "durability-loss.yaml").read_text())
    shipped["workload"]["acked_writes"]["time"] = 5
    shipped["faults"] = {"kill_server": {"signal": "KILL", "at": 4.5}}
    shipped["matrix"] = {"server.config.innodb_flush_log_at_trx_commit": [0, 1]}
    shipped.update(warmup=0, repeat=1, order="sequential")
    path = write_scenario(tmp_path / "durability-loss.yaml", shipped)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs"), "--no-report"], capsys)
    assert "internal error" not in result.err
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    assert read_json(run / "run.json")["status"] == "complete"
    trials = [read_json(t / "trial.json") for t in trial_dirs(run)]
    assert [t["factors"]["server.config.innodb_flush_log_at_trx_commit"] for t in trials] == [0, 1]
    for trial in trials:
        assert trial["status"] == "ok", trial["reason"]
        assert trial["metrics"]["acked_commits"] > 0 and "lost_commits" in trial["metrics"]
        assert trial["metrics"]["restart_to_query_s"] > 0  # the kill fired, the server came back
    assert trials[1]["metrics"]["lost_commits"] == 0  # flush 1: a crash loses no commit
