"""After the workload's runs: their output analysed, saved and judged.

The fault controller (run/fault_control.py) hands over every run of the client and why
the watch ended; the client (run/client.py) the last run's output, its CPU times and
a failure of its own. :class:`TrialOutcome` turns them into the trial's metrics,
``intervals.csv`` (every run's intervals on the measured window's clock:
run/intervals.py), the fault timeline (``faults.json``), the workload's own checks of the
database after the run, and the failure reason, which names the tool.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from dbrig import sampling
from dbrig.analysis import drift, recovery
from dbrig.run.client import ClientReport, ClientRun, named_reason
from dbrig.run.fault_control import Watched
from dbrig.run.faults import FaultInjector
from dbrig.run.intervals import RunSeries, joined_series, measured, on_window_clock
from dbrig.run.record import TrialRecord
from dbrig.tools.base import CheckedWorkload, ClientLogWorkload, Outcome, WorkloadTool

OUTPUT_TAIL_LINES = 20  # of the tool's output, kept in trial.json when a trial fails
# The working directory of a client that writes files (ClientLogWorkload), inside the trial's
# folder: removed once checked, or with the unfinished trial's folder.
CLIENT_LOG_DIR = "client-log"


@dataclass
class TrialOutcome:
    """Judges one trial's workload into its record."""

    workload: WorkloadTool
    folder: Path
    warmup: int
    faults: FaultInjector | None
    connect: Callable[[], Any]  # to the trial's server, for the after-run checks
    soak: bool
    record: TrialRecord
    derived: Callable[[dict[str, float]], dict[str, float]] = lambda metrics: {}

    @property
    def metrics(self) -> dict[str, float]:
        return self.record.metrics

    @property
    def timings(self) -> dict[str, float]:
        return self.record.timings

    def judge(self, watched: Watched, report: ClientReport, abort: str | None) -> None:
        """Metrics, intervals, faults and checks saved; the record failed with the reason
        (and the output's tail) when the workload did not measure what it should."""
        reason = self._reason(watched, report, abort)
        if reason:
            self.record.fail(reason)
        if self.record.status != "ok":
            self.record.output_tail = report.output.splitlines()[-OUTPUT_TAIL_LINES:]

    def _reason(self, watched: Watched, report: ClientReport, abort: str | None) -> str | None:
        finished = watched.last
        self.timings["workload_s"] = sum(
            r.finished.wall_s for r in watched.runs if r.finished is not None
        )
        if not watched.timed_out:
            abort = abort or report.failure
        if report.user_cpu_s is not None and report.sys_cpu_s is not None:
            self.metrics["client_user_cpu_s"] = report.user_cpu_s
            self.metrics["client_sys_cpu_s"] = report.sys_cpu_s
        outcome = self.workload.analyse(report.output, finished.returncode)
        self._save(outcome, watched)
        ran_well = not (abort or watched.timed_out or finished.reaped_elsewhere or outcome.reason)
        checks_failed = self._after_run_checks() if ran_well else None
        tool = self.workload.info.name
        after = " after the fault" if len(watched.runs) > 1 else ""
        reason = None
        if abort:
            reason = abort
        elif finished.reaped_elsewhere:
            reason = f"{tool}{after}: {finished.exit_text}"
        elif watched.timed_out:
            reason = f"{tool} did not finish within {watched.timeout_s:.0f} s"
        elif outcome.reason:
            reason = named_reason(tool, outcome.reason) + after
        elif checks_failed:
            reason = checks_failed
        return reason

    # -- what is saved -------------------------------------------------------------------

    def _save(self, outcome: Outcome, watched: Watched) -> None:
        self.metrics.update(outcome.metrics)
        first = watched.runs[0]
        if first.started:
            self.timings["workload_start_s"] = round(first.start_delay_s, 3)
        frame, counted = self._interval_series(outcome, watched)
        if frame is not None:
            frame.to_csv(self.folder / "intervals.csv", index=False)
        self._save_tables(outcome)
        self.metrics.update(self.derived(self.metrics))
        if self.faults is not None:
            self._save_faults(frame, counted, self._counted_window_s(watched, outcome))
        if self.soak:
            self.metrics.update(soak_drift(self.folder))

    def _save_tables(self, outcome: Outcome) -> None:
        for name, table in outcome.extra_tables.items():
            table.to_csv(self.folder / f"{name}.csv", index=False)

    def _interval_series(
        self, outcome: Outcome, watched: Watched
    ) -> tuple[pd.DataFrame | None, list[recovery.ClientRun]]:
        """Every run's intervals on the measured window's clock, and what each run counted
        in it (for the fault window's rate); the runs a fault ended explain, in the
        timeline, why they ended; each run started again notes when its clock started."""
        series = []
        counted = []
        for number, (run, launched_s) in enumerate(
            zip(watched.runs, watched.launched_s, strict=True)
        ):
            if run is watched.runs[-1]:
                analysed = outcome
            else:
                analysed = self._analysed(run)
                if self.faults is not None:
                    self.faults.explain_client_end(analysed.reason, number)
            if number > 0 and self.faults is not None and run.start_delay_s:
                self.faults.client_started(launched_s + run.start_delay_s)
            run_series = RunSeries(analysed.intervals, launched_s, run.start_delay_s)
            series.append(run_series)
            counted.append(self._counted_run(analysed, run_series))
        return joined_series(series), counted

    def _counted_run(self, analysed: Outcome, run: RunSeries) -> recovery.ClientRun:
        """What one run of the client completed in the measured window, by its own summary
        (its measured progress lines where it printed none)."""
        rates: list[float] = []
        if analysed.intervals is not None and "tps" in analysed.intervals:
            window = measured(on_window_clock(analysed.intervals, run.launched_s))
            if window is not None:
                rates = [float(r) for r in window["tps"]]
        interval = self.workload.interval_s or 1.0
        return recovery.client_run(analysed.metrics, rates, interval_s=interval)

    def _analysed(self, run: ClientRun) -> Outcome:
        returncode = run.finished.returncode if run.finished is not None else -1
        return self.workload.analyse(run.text(), returncode)

    def _counted_window_s(self, watched: Watched, last: Outcome) -> float | None:
        """The part of the measured window a client started again counted over: from the
        first run's clock start (the window's) to the end of the last run's own measured
        time; None for a client that ran once (it counted the whole window)."""
        time = last.metrics.get("measured_time_s")
        if len(watched.runs) < 2 or time is None:
            return None
        end = watched.launched_s[-1] + watched.runs[-1].start_delay_s + time
        return end - watched.runs[0].start_delay_s

    def _save_faults(
        self,
        frame: pd.DataFrame | None,
        counted: list[recovery.ClientRun],
        counted_window_s: float | None,
    ) -> None:
        assert self.faults is not None
        interval = self.workload.interval_s
        expected = self.workload.expected_seconds(self.warmup) or 0
        window = expected - self.warmup
        self.metrics.update(
            self.faults.analyse(measured(frame), interval, window, counted, counted_window_s)
        )
        self.faults.save(self.folder, self.metrics)

    # -- the workload's own checks after the run -----------------------------------------

    def _after_run_checks(self) -> str | None:
        """The workload's own checks of the database after the run (tpcc's consistency
        conditions, acked_writes' lost commits): their numbers saved as metrics, the failed
        one's name returned."""
        if isinstance(self.workload, ClientLogWorkload):
            return self._check_client_logs(self.workload)
        if not isinstance(self.workload, CheckedWorkload):
            return None
        counts: dict[str, int] = {}
        with contextlib.closing(self.connect()) as conn:
            conn.select_db(self.workload.database)
            with conn.cursor() as cur:
                for name, sql in self.workload.after_run_checks().items():
                    cur.execute(sql)
                    row = cur.fetchone()
                    counts[name] = int(row[0]) if row and row[0] is not None else 0
        metrics, reason = self.workload.evaluate_checks(counts)
        self.metrics.update(metrics)
        return reason

    def _check_client_logs(self, workload: ClientLogWorkload) -> str | None:
        with contextlib.closing(self.connect()) as conn:
            conn.select_db(self.workload.database)
            outcome = check_client_logs(workload, self.folder / CLIENT_LOG_DIR, conn)
        self.metrics.update(outcome.metrics)
        self._save_tables(outcome)
        return outcome.reason


def check_client_logs(workload: ClientLogWorkload, folder: Path, conn: Any) -> Outcome:
    """The files the client wrote in ``folder``, checked through ``conn`` (its database
    selected): the workload's lookups run, its metrics, tables and failure reason returned."""
    logs = {
        path.name: path.read_text(errors="replace")
        for path in sorted(folder.glob(workload.client_log_glob))
    }
    found: list[int] = []
    with conn.cursor() as cur:
        for sql in workload.client_log_queries(logs):
            cur.execute(sql)
            found.extend(int(row[0]) for row in cur.fetchall())
    return workload.evaluate_client_logs(logs, found)


def soak_drift(folder: Path) -> dict[str, float]:
    """The drift columns of a soak trial from its saved measured rows (analysis/drift.py)."""
    intervals = _measured_rows(folder / "intervals.csv")
    procs = _measured_rows(folder / "procs.csv")
    server = procs[procs["role"] == "server"] if procs is not None else None
    return drift.soak_metrics(intervals, server)


def _measured_rows(path: Path) -> pd.DataFrame | None:
    if not path.is_file() or path.stat().st_size == 0:
        return None
    frame = pd.read_csv(path, on_bad_lines="skip")  # a torn last line: as summarize_cell does
    return frame[frame["phase"] == sampling.MEASURE] if "phase" in frame.columns else None
