"""The trial's outcome (run/trial_outcome.py): the workload's output judged into the
record, from a fake client run, on captured sysbench output."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dbrig import proc
from dbrig.run.client import ClientReport
from dbrig.run.fault_control import State, Watched
from dbrig.run.record import TrialRecord
from dbrig.run.trial_outcome import TrialOutcome
from dbrig.scenario import plan_from_dict
from dbrig.tools.registry import workload_for

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sysbench" / "1.0.20"


class Ended:
    """A client run that has ended, its output in a file."""

    def __init__(self, output: Path, returncode: int, delay_s: float = 0.0) -> None:
        self.output = output
        self.finished = proc.Finished(("sysbench",), returncode, 5.0, 1.0, 0.5)
        self.start_delay_s = delay_s
        self.started = delay_s > 0

    def text(self) -> str:
        return self.output.read_text()


def outcome(tmp_path: Path) -> tuple[TrialOutcome, TrialRecord]:
    plan = plan_from_dict({"name": "t", "workload": {"sysbench": {"time": 5}}}, seed=1)
    trial = plan.trials[0]
    record = TrialRecord(trial)
    workload = workload_for(trial.cell.scenario.workload)
    judge = TrialOutcome(workload, tmp_path, 0, None, lambda: None, False, record)
    return judge, record


def judged(
    tmp_path: Path,
    text: str,
    returncode: int,
    abort: str | None = None,
    state: State = State.ENDED,
    lost: str | None = None,
) -> TrialRecord:
    out = tmp_path / "workload.out"
    out.write_text(text)
    judge, record = outcome(tmp_path)
    run = Ended(out, returncode, delay_s=0.05)
    done = Watched([run], [0.0], 30.0, state=state)  # type: ignore[list-item]
    judge.judge(done, ClientReport(text, 1.0, 0.5, lost), abort)
    return record


def test_a_good_run_is_measured_with_its_intervals_on_the_windows_clock(tmp_path: Path) -> None:
    record = judged(tmp_path, (FIXTURES / "oltp_read_write_run.txt").read_text(), 0)
    assert record.status == "ok" and record.metrics["tps"] > 0
    assert record.metrics["client_user_cpu_s"] == 1.0
    assert record.timings["workload_start_s"] == 0.05
    frame = pd.read_csv(tmp_path / "intervals.csv")
    assert frame["t_s"].iloc[0] == 1.05


def test_a_run_killed_by_a_signal_fails_naming_the_tool(tmp_path: Path) -> None:
    started = (FIXTURES / "oltp_read_write_sigint.txt").read_text()
    cut = started[: started.index("SQL statistics")] if "SQL statistics" in started else started
    record = judged(tmp_path, cut, -9)
    assert record.status == "failed"
    assert record.reason == "sysbench: killed by signal / no summary (rc=-9)"
    assert record.output_tail


def test_an_abort_comes_first_then_a_lost_client_then_the_time_limit(tmp_path: Path) -> None:
    text = (FIXTURES / "oltp_read_write_run.txt").read_text()
    died = "server 'default' died (killed by SIGKILL)"
    lost = "sysbench on hosts.load1 (root@load1): the ssh connection was lost: x"
    assert judged(tmp_path, text, 0, abort=died, lost=lost).reason == died
    assert judged(tmp_path, text, 0, lost=lost).reason == lost
    timed_out = judged(tmp_path, text, 0, state=State.TIMED_OUT, lost=lost)
    assert timed_out.reason == "sysbench did not finish within 30 s"
