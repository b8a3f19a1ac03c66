"""One trial: a repetition of one cell, from a ready server to a saved folder.

:class:`TrialExecutor` readies the server (restore and start, or reset), applies
the cell's system settings, starts stress-ng and the samplers, runs the
workload while watching the server, stress-ng and the samplers, stops them
all, and records metrics, timings, the settings in force and the commands in
a :class:`TrialRecord`. The runner decides the order and saves the record.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import math
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pymysql

from dbrig import proc, sampling, store
from dbrig.analysis import drift
from dbrig.analysis.costs import derived_costs
from dbrig.endpoint import Endpoint
from dbrig.errors import DbrigError, DiskFull, ServerInitError
from dbrig.host.settings import SystemState
from dbrig.remote.ssh import client_times
from dbrig.run.commands import (
    DEFAULT_EVENTS_TIMEOUT_S,
    InterferenceCommand,
    TrialCommands,
    trial_commands,
)
from dbrig.run.datasets import AnyHandle, client_endpoint, ready_for_trial
from dbrig.run.faults import FaultInjector
from dbrig.run.interference import InterferenceRun
from dbrig.run.remote import RemoteClients, RemoteRun, lost_connection, remote_run, saved_argv
from dbrig.run.samplers import (
    SampledTrial,
    process_roles,
    processes_here,
    sampled,
    sampled_pinned_cores,
)
from dbrig.run.startwatch import StartWatch
from dbrig.scenario import Cell, Trial
from dbrig.server.handles import setting_warnings
from dbrig.tools.base import (
    CheckedWorkload,
    ClientLogWorkload,
    Outcome,
    ResumableWorkload,
    WorkloadTool,
    client_host,
    column_prefixes,
    reconnects_itself,
)
from dbrig.tools.registry import interference_for, workload_for
from dbrig.util.files import disk_full, is_disk_full

OUTPUT_TAIL_LINES = 20  # of the tool's output, kept in trial.json when a trial fails
# The working directory of a client that writes files (ClientLogWorkload), inside the trial's
# folder: removed once checked, or with the unfinished trial's folder.
CLIENT_LOG_DIR = "client-log"

# Follows the running workload for the live progress line (Progress.following): given the
# tool, the warm-up and the output file, a block that yields a poll to call while it runs.
# The output may be a function: after a fault the workload writes a new file.
Follow = Callable[
    [WorkloadTool, int, Path | Callable[[], Path]],
    contextlib.AbstractContextManager[Callable[[], None]],
]


@dataclass(frozen=True)
class TrialContext:
    """What every trial of a run shares."""

    workload_binary: Path
    interference_binaries: dict[str, Path]  # by the tool's YAML key
    devices: list[str] | None
    system: SystemState | None  # this machine's; None: no cell sets any
    events_timeout_s: float = DEFAULT_EVENTS_TIMEOUT_S
    remote: RemoteClients | None = None  # the run's ssh connections to client hosts
    clock: Callable[[], float] = time.monotonic  # seconds, for deadlines and sample times
    now: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))


@dataclass
class TrialRecord:
    trial: Trial
    status: str = "ok"
    reason: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    commands: dict[str, list[str]] = field(default_factory=dict)  # role -> argv
    effective_config: dict[str, Any] = field(default_factory=dict)
    system: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    output_tail: list[str] = field(default_factory=list)
    started_at: str = ""

    def fail(self, reason: str) -> None:
        if self.status == "ok":
            self.status, self.reason = "failed", reason

    def to_result(self, short_names: dict[str, str]) -> store.TrialResult:
        """What trial.json saves (passwords in the commands masked)."""
        cell = self.trial.cell
        return store.TrialResult(
            trial=self.trial.id,
            cell=cell.id,
            repetition=self.trial.repetition,
            server=cell.server,
            label=cell.label(short_names),
            factors=dict(cell.factor_dict),
            status=self.status,
            reason=self.reason,
            started_at=self.started_at,
            timings=dict(self.timings),
            metrics=dict(self.metrics),
            effective_config=dict(self.effective_config),
            system=dict(self.system),
            warnings=tuple(self.warnings),
            output_tail=tuple(self.output_tail),
            commands={role: tuple(proc.redact(argv)) for role, argv in self.commands.items()},
        )


class TrialExecutor:
    """Runs one trial against a started server and records everything in ``folder``."""

    def __init__(
        self,
        context: TrialContext,
        server: AnyHandle,
        trial: Trial,
        folder: Path,
        follow: Follow | None = None,
        say: Callable[[str], None] = lambda line: None,
    ) -> None:
        """``follow`` gets the workload's live status; ``say``, a line of progress outside
        the workload (a data set load can take many minutes)."""
        self.context = context
        self.follow = follow
        self.say = say
        self.server = server
        self.trial = trial
        self.cell: Cell = trial.cell
        self.scenario = trial.cell.scenario
        self.folder = folder
        self.workload = workload_for(self.scenario.workload)
        self.record = TrialRecord(trial, started_at=context.now().isoformat())
        self._workload_pid: int | None = None
        self._interference: list[InterferenceRun] = []
        self._faults = self._fault_injector()
        # Each run of the workload: a fault that ends one makes the trial start another.
        self._outputs: list[Path] = []
        self._finished: list[proc.Finished] = []
        self._resumed_at_s: float | None = None
        # Each run's launch on the clock and the watch for its start line (sysbench's
        # clock starts at "Threads started!", not at the launch: run/startwatch.py).
        self._launches: list[float] = []
        self._start_watches: list[StartWatch | None] = []

    def execute(self) -> TrialRecord:
        spec = self.scenario.server_specs[self.cell.server]
        try:
            timings = ready_for_trial(
                self.server,
                self.workload,
                spec,
                self.context.workload_binary,
                before_start=self._apply_system,
                clock=self.context.clock,
                say=self.say,
            )
            self.record.timings.update(timings)
            self.record.effective_config = self.server.effective(spec)
            requested = dict(getattr(spec, "config", {}) or {})
            self.record.warnings.extend(setting_warnings(requested, self.record.effective_config))
            self._run_workload()
        except (ServerInitError, DiskFull):
            raise  # every trial after it would fail alike: the run stops
        except DbrigError as exc:
            self.record.fail(exc.message)
        except OSError as exc:
            if is_disk_full(exc):  # the trial's folder: nothing more can be saved
                raise disk_full(self.folder) from exc
            self.record.fail(f"{type(exc).__name__}: {exc}")
        except pymysql.err.Error as exc:
            # The server went away mid-query: this trial failed, the run goes on.
            self.record.fail(f"{type(exc).__name__}: {exc}")
        finally:
            shutil.rmtree(self.folder / CLIENT_LOG_DIR, ignore_errors=True)
            self.record.timings.update(self.server.finish_trial())
        return self.record

    def _apply_system(self) -> None:
        """The cell's OS settings, after the restore (which fills the page cache) and before
        the server starts."""
        if self.context.system is not None:  # acts where the handle says (its host, or here)
            self.record.system = self.server.apply_system(self.scenario.system, self.context.system)

    def _commands(self, endpoint: Endpoint, binary: Path) -> TrialCommands:
        return trial_commands(
            self.scenario,
            endpoint,
            binary,
            self.context.interference_binaries,
            self.context.events_timeout_s,
        )

    @contextlib.contextmanager
    def _client(self) -> Iterator[RemoteRun | None]:
        """The client host's connection and way to the server, or None for a local client."""
        name = client_host(self.workload)
        if name is None:
            yield None
            return
        assert self.context.remote is not None, "preflight opened no client hosts"
        with remote_run(self.context.remote.host(name), self.server, self.workload) as remote:
            yield remote

    def _fault_injector(self) -> FaultInjector | None:
        if not self.scenario.faults.given or not self.server.capabilities.faults:
            return None
        spec = self.scenario.server_specs[self.cell.server]
        return FaultInjector(self.scenario.faults, self.server, spec, self.context.clock)  # type: ignore[arg-type]

    def _run_workload(self) -> None:
        with self._client() as remote:
            self._run_workload_with(remote)

    def _run_workload_with(self, remote: RemoteRun | None) -> None:
        warmup = self.scenario.warmup
        if remote is None:
            endpoint = client_endpoint(self.server, self.workload)
            commands = self._commands(endpoint, self.context.workload_binary)
        else:
            assert self.context.remote is not None
            binary = self.context.remote.binaries[remote.host.name]
            commands = self._commands(remote.endpoint, Path(binary))
        pinned = self._sampled_pinned_cores(commands)
        self.record.commands["workload"] = (
            commands.argv if remote is None else remote.saved_argv(commands.argv)
        )
        timeout = commands.timeout_s
        out = self.folder / "workload.out"
        samplers_on = self._samplers(warmup, pinned)
        try:
            with self._interfering(commands) as running, samplers_on as samplers:
                launched = self.context.clock()
                if remote is None:
                    child = proc.spawn(
                        commands.argv, stdout=out, merge_stderr=True, cwd=self._cwd()
                    )
                    self._workload_pid = child.pid
                else:  # the host sampler follows no process: the client is elsewhere
                    child = remote.host.spawn(
                        commands.argv, stdout=out, secret=remote.secret, report_times=True
                    )
                self._outputs.append(out)
                self._watch_start(out, launched)
                if self._faults is not None:
                    self._faults.start(launched + warmup)
                with self._following(self._current_output, warmup) as poll:
                    finished, abort = self._watch(child, timeout, running, samplers, poll)
                # The tool may notice first ("lost connection"); the cause is the server's death.
                abort = abort or self.server.died()
        finally:
            self._stop_start_watches()
            if self._faults is not None:
                self._faults.close()
        self._finished.append(finished)
        self.record.timings["workload_s"] = sum(f.wall_s for f in self._finished)
        output = self._outputs[-1].read_text(errors="replace")
        if remote is None:
            user_cpu = sum(f.user_cpu_s for f in self._finished)
            sys_cpu = sum(f.sys_cpu_s for f in self._finished)
        else:
            output, user_cpu, sys_cpu = client_times(output)
            lost = lost_connection(remote.host, finished.returncode, output)
            abort = abort or (None if finished.timed_out else lost)
        if user_cpu is not None and sys_cpu is not None:
            self.record.metrics["client_user_cpu_s"] = user_cpu
            self.record.metrics["client_sys_cpu_s"] = sys_cpu
        outcome = self.workload.analyse(output, finished.returncode)
        self._save_outcome(outcome, warmup)
        ran_well = not (abort or finished.timed_out or finished.reaped_elsewhere or outcome.reason)
        checks_failed = self._after_run_checks() if ran_well else None
        after = " after the fault" if len(self._outputs) > 1 else ""
        if abort:
            self.record.fail(abort)
        elif finished.reaped_elsewhere:
            self.record.fail(f"{self.workload.info.name}{after}: {finished.exit_text}")
        elif finished.timed_out:
            self.record.fail(f"{self.workload.info.name} did not finish within {timeout:.0f} s")
        elif outcome.reason:
            self.record.fail(f"{outcome.reason}{after}" if after else outcome.reason)
        elif checks_failed:
            self.record.fail(checks_failed)
        if self.record.status != "ok":
            self.record.output_tail = output.splitlines()[-OUTPUT_TAIL_LINES:]

    def _cwd(self) -> Path | None:
        """sysbench fileio reads and writes its files in its working directory; acked_writes
        writes its ack files in an empty folder of the trial."""
        if (folder := self.server.work_folder) is not None:
            return folder
        if isinstance(self.workload, ClientLogWorkload):
            folder = self.folder / CLIENT_LOG_DIR
            folder.mkdir(exist_ok=True)  # a run resumed after a fault appends to the same logs
            return folder
        return None

    def _current_output(self) -> Path:
        return self._outputs[-1]

    def _following(
        self, out: Path | Callable[[], Path], warmup: int
    ) -> contextlib.AbstractContextManager[Callable[[], None]]:
        if self.follow is None:
            return contextlib.nullcontext(lambda: None)
        return self.follow(self.workload, warmup, out)

    def _watch(
        self,
        child: proc.Child,
        timeout: float,
        running: list[InterferenceRun],
        samplers: list,
        poll: Callable[[], None],
    ) -> tuple[proc.Finished, str | None]:
        deadline = self.context.clock() + timeout
        while True:
            done = child.wait(0.25)
            if done is not None and self._client_held_back(done):
                # A full disk ended the run (sysbench: error 1114): again once it is freed.
                began, ended_s = self.context.clock(), self._faults.now_s()
                self._faults.wait_until_freed()
                deadline += self.context.clock() - began
                resumed = self._resume(child, ended_s)
                if isinstance(resumed, str):
                    return self._finished.pop(), resumed
                child = resumed
                continue
            if done is not None:
                return done, None
            poll()
            if self._faults is not None:
                began = self.context.clock()
                try:
                    ended = self._faults.tick(functools.partial(_kill, child))
                except DbrigError as exc:  # FaultFailed, or the server was not running
                    return child.stop(grace_s=5), exc.message
                except OSError as exc:  # deleting or filling a file
                    return child.stop(grace_s=5), f"faults: {exc}"
                deadline += self.context.clock() - began  # the restart is not the tool's time
                if ended:
                    resumed = self._resume(child)
                    if isinstance(resumed, str):
                        return self._finished.pop(), resumed
                    child = resumed
                    continue
            abort = self._abort_reason(running, samplers)
            if abort or self.context.clock() >= deadline:
                finished = child.stop(grace_s=5)
                if not abort:
                    finished = dataclasses.replace(finished, timed_out=True)
                return finished, abort

    def _client_held_back(self, done: proc.Finished) -> bool:
        """The workload's run failed inside the window after a disk_full fault."""
        if self._faults is None or done.returncode == 0:
            return False
        expected = self.workload.expected_seconds(self.scenario.warmup) or 0
        left = expected - self.scenario.warmup - self._faults.now_s()
        return left >= 1 and self._faults.holds_client_back()

    def _resume(self, child: proc.Child, ended_s: float | None = None) -> proc.Child | str:
        """The fault ended the workload's run: start it again for the rest of the window
        (or the reason there is no rest to measure)."""
        assert self._faults is not None
        if not isinstance(self.workload, ResumableWorkload):
            if reconnects_itself(self.workload) and child.wait(0) is None:
                return child  # it rides through the restart
            return f"{self.workload.info.name} ended with the fault and cannot be started again"
        self._finished.append(child.stop(grace_s=5))
        self._faults.client_ended(self._faults.now_s() if ended_s is None else ended_s)
        expected = self.workload.expected_seconds(self.scenario.warmup) or 0
        rest = math.floor(expected - self.scenario.warmup - self._faults.now_s())
        if rest < 1:
            return "the fault's recovery outlasted the measured window: nothing left to measure"
        endpoint = client_endpoint(self.server, self.workload)
        argv = self.workload.resumed_argv(endpoint, self.context.workload_binary, rest)
        out = self.folder / f"workload-{len(self._outputs) + 1}.out"
        self._stop_start_watches()
        launched = self.context.clock()
        self._resumed_at_s = self._faults.client_resumed()
        resumed = proc.spawn(argv, stdout=out, merge_stderr=True, cwd=self._cwd())
        self.record.commands["workload_resumed"] = argv
        self._outputs.append(out)
        self._watch_start(out, launched)
        self._workload_pid = resumed.pid
        return resumed

    def _watch_start(self, out: Path, launched: float) -> None:
        line = getattr(self.workload, "start_line", None)
        watch = StartWatch(out, line, self.context.clock) if line else None
        if watch is not None:
            watch.start()
        self._launches.append(launched)
        self._start_watches.append(watch)

    def _stop_start_watches(self) -> None:
        for watch in self._start_watches:
            if watch is not None:
                watch.stop()

    def _start_delay_s(self, run: int) -> float:
        """Run ``run``'s launch until the tool said it started (0 when it never did, or
        has no such line): its own clock is that much behind the trial's."""
        watch = self._start_watches[run] if run < len(self._start_watches) else None
        if watch is None or watch.seen_at is None:
            return 0.0
        return max(0.0, watch.seen_at - self._launches[run])

    def _after_run_checks(self) -> str | None:
        """The workload's own checks of the database after the run (tpcc's consistency
        conditions, acked_writes' lost commits): their numbers saved as metrics, the failed
        one's name returned."""
        if isinstance(self.workload, ClientLogWorkload):
            return self._check_client_logs(self.workload)
        if not isinstance(self.workload, CheckedWorkload):
            return None
        counts: dict[str, int] = {}
        with contextlib.closing(self.server.connect()) as conn:
            conn.select_db(self.workload.database)
            with conn.cursor() as cur:
                for name, sql in self.workload.after_run_checks().items():
                    cur.execute(sql)
                    row = cur.fetchone()
                    counts[name] = int(row[0]) if row and row[0] is not None else 0
        metrics, reason = self.workload.evaluate_checks(counts)
        self.record.metrics.update(metrics)
        return reason

    def _check_client_logs(self, workload: ClientLogWorkload) -> str | None:
        with contextlib.closing(self.server.connect()) as conn:
            conn.select_db(self.workload.database)
            outcome = check_client_logs(workload, self.folder / CLIENT_LOG_DIR, conn)
        self.record.metrics.update(outcome.metrics)
        self._save_tables(outcome)
        return outcome.reason

    def _abort_reason(self, running: list[InterferenceRun], samplers: list) -> str | None:
        died = self.server.died()
        if died:
            return died
        for interference in running:
            if reason := interference.died():
                return reason
        for sampler in samplers:
            if sampler.error:
                return sampler.error
        return None

    def _sampled_pinned_cores(self, commands: TrialCommands) -> list[int] | None:
        return sampled_pinned_cores(self.server, commands)

    @contextlib.contextmanager
    def _interfering(self, commands: TrialCommands) -> Iterator[list[InterferenceRun]]:
        """Every interference tool of the cell, running for the length of the block."""
        with contextlib.ExitStack() as stack:
            for command in commands.interference:
                stack.enter_context(self._one_interference(command))
            yield self._interference

    @contextlib.contextmanager
    def _one_interference(self, command: InterferenceCommand) -> Iterator[None]:
        host = None
        if command.host is not None:
            assert self.context.remote is not None, "preflight opened no interference hosts"
            host = self.context.remote.host(command.host)
            host.connect()  # reconnected after a loss; SshError names the host
        clock = self.context.clock
        running = InterferenceRun(command.tool, command.argv, self.folder, clock, host)
        self.record.commands[command.role] = (
            command.argv if host is None else saved_argv(host, command.argv)
        )
        running.start()
        self._interference.append(running)
        try:
            yield
        finally:
            self._interference.remove(running)
            self.record.metrics.update(running.stop())

    def _samplers(
        self, warmup: int, pinned_cores: list[int] | None
    ) -> contextlib.AbstractContextManager[list]:
        """Every sampler that applies to this trial (run/samplers.py), as one unit."""
        trial = SampledTrial(
            self.folder,
            self.server,
            self.scenario.sampling,
            warmup,
            self.context.clock,
            self.context.devices,
            faults=self._faults is not None,
            processes=self._process_roles,
            pinned_cores=pinned_cores,
            processes_here=self._all_followed_here(),
            role_prefixes=column_prefixes(interference_for(self.scenario.interference)),
            warnings=self.record.warnings,
        )
        return sampled(trial, self.record.metrics)

    def _all_followed_here(self) -> bool:
        tools = interference_for(self.scenario.interference)
        return processes_here(self.server, self.workload, tools)

    def _process_roles(self) -> dict[str, list[int]]:
        """The processes the host sampler follows, by role (read from the sampler thread)."""
        running = {run.tool.key: run.pid for run in self._interference}
        return process_roles(self.server.pid, self._workload_pid, running)

    def _save_outcome(self, outcome: Outcome, warmup: int) -> None:
        self.record.metrics.update(outcome.metrics)
        watch = self._start_watches[0] if self._start_watches else None
        if watch is not None and watch.seen_at is not None:
            self.record.timings["workload_start_s"] = round(self._start_delay_s(0), 3)
        frame = self._interval_series(outcome, warmup)
        if frame is not None:
            frame.to_csv(self.folder / "intervals.csv", index=False)
        self._save_tables(outcome)
        self.record.metrics.update(derived_costs(self.record.metrics, self.workload.units_of_work))
        if self._faults is not None:
            self._save_faults(frame, warmup)
        if self.scenario.soak is not None:
            self.record.metrics.update(soak_drift(self.folder))

    def _save_tables(self, outcome: Outcome) -> None:
        for name, table in outcome.extra_tables.items():
            table.to_csv(self.folder / f"{name}.csv", index=False)

    def _interval_series(self, outcome: Outcome, warmup: int) -> pd.DataFrame | None:
        """The intervals on the measured window's clock (each run's moved by its start
        delay); after a fault that ended the workload's run, the first run's intervals,
        then the resumed run's."""
        frames = []
        first_delay = self._start_delay_s(0)
        if len(self._outputs) > 1:
            first = self._outputs[0].read_text(errors="replace")
            earlier = self.workload.analyse(first, self._finished[0].returncode)
            if self._faults is not None:
                self._faults.explain_client_end(earlier.reason)
            if earlier.intervals is not None:
                frames.append(_on_measured_clock(earlier.intervals, warmup, first_delay))
        if outcome.intervals is not None:
            if self._resumed_at_s is None:
                frames.append(_on_measured_clock(outcome.intervals, warmup, first_delay))
            else:
                delay = self._start_delay_s(len(self._outputs) - 1)
                if self._faults is not None and delay:
                    self._faults.client_started(self._resumed_at_s + delay)
                frames.append(_on_measured_clock(outcome.intervals, -self._resumed_at_s, delay))
        return pd.concat(frames, ignore_index=True) if frames else None

    def _save_faults(self, frame: pd.DataFrame | None, warmup: int) -> None:
        assert self._faults is not None
        interval = getattr(self.workload, "interval_s", None)  # sysbench's, acked_writes'
        expected = self.workload.expected_seconds(warmup) or 0
        window = expected - warmup
        measured = frame[frame["phase"] == sampling.MEASURE] if frame is not None else None
        self.record.metrics.update(self._faults.analyse(measured, interval, window))
        self._faults.save(self.folder, self.record.metrics)


def _kill(child: proc.Child) -> None:
    child.signal_group(signal.SIGKILL)


def _on_measured_clock(
    intervals: pd.DataFrame, warmup: float, start_delay_s: float = 0.0
) -> pd.DataFrame:
    """``t_s`` moved from the tool's clock to the measured window's: ``warmup`` s
    subtracted, and the ``start_delay_s`` its clock started after its launch added. The
    ``phase`` column goes by the tool's clock: warm-up intervals end at or before its
    warm-up's end (the checkpoint)."""
    frame = intervals.copy()
    tool_t = frame["t_s"] - warmup
    frame["t_s"] = (tool_t + start_delay_s).round(3)
    frame.insert(0, "phase", ["warmup" if t <= 0 else "measure" for t in tool_t])
    return frame


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
