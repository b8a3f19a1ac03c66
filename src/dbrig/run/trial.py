"""One trial: a repetition of one cell, from a ready server to a saved folder.

:class:`TrialExecutor` readies the server (restore and start, or reset), applies
the cell's system settings, starts the interference and the samplers, and runs the
workload through its parts: the client (run/client.py, run/ssh_client.py: here or
over ssh), the fault controller (run/fault_control.py: the client's runs under the
faults, watched with the server, the interference and the samplers) and the outcome
(run/trial_outcome.py: the output analysed, the intervals joined across runs, the
reason). It records metrics, timings, the settings in force and the commands in a
:class:`TrialRecord`. The runner decides the order and saves the record.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from dbrig.analysis.costs import derived_costs
from dbrig.endpoint import Endpoint
from dbrig.errors import DbrigError, DiskFull, ServerInitError
from dbrig.host.settings import SystemState
from dbrig.run.client import Client, ClientRun, LocalClient
from dbrig.run.commands import DEFAULT_EVENTS_TIMEOUT_S, TrialCommands, trial_commands
from dbrig.run.datasets import AnyHandle, client_endpoint, ready_for_trial
from dbrig.run.fault_control import ClientPlan, FaultController
from dbrig.run.faults import FaultInjector
from dbrig.run.interference import InterferenceOn, InterferenceRun
from dbrig.run.record import TrialRecord
from dbrig.run.remote import RemoteClients
from dbrig.run.samplers import (
    SampledTrial,
    process_roles,
    processes_here,
    sampled,
    sampled_pinned_cores,
)
from dbrig.run.ssh_client import SshClient, remote_run
from dbrig.run.trial_outcome import CLIENT_LOG_DIR, TrialOutcome
from dbrig.scenario import Cell, Trial
from dbrig.server.handles import setting_warnings
from dbrig.tools.base import (
    ClientLogWorkload,
    ResumableWorkload,
    WorkloadTool,
    column_prefixes,
)
from dbrig.tools.registry import interference_for, workload_for
from dbrig.util.files import disk_full, is_disk_full

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
        self._interference: list[InterferenceRun] = []
        self._faults = self._fault_injector()
        # The client's latest run: the host sampler follows its process, the live line its output.
        self._workload_pid: int | None = None
        self._output = folder / "workload.out"

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
    def _client(self) -> Iterator[Client]:
        """The workload's client: here, or on its host over that host's ssh connection."""
        tool, clock = self.workload.info.name, self.context.clock
        start_line = self.workload.start_line  # run/startwatch.py
        name = self.workload.client_host
        if name is None:
            endpoint = client_endpoint(self.server, self.workload)
            binary = self.context.workload_binary
            yield LocalClient(tool, endpoint, binary, clock, start_line)
            return
        assert self.context.remote is not None, "preflight opened no client hosts"
        with remote_run(self.context.remote.host(name), self.server, self.workload) as remote:
            binary = Path(self.context.remote.binaries[name])
            yield SshClient(tool, remote, binary, clock, start_line)

    def _fault_injector(self) -> FaultInjector | None:
        if not self.scenario.faults.given or not self.server.capabilities.faults:
            return None
        spec = self.scenario.server_specs[self.cell.server]
        return FaultInjector(self.scenario.faults, self.server, spec, self.context.clock)  # type: ignore[arg-type]

    def _run_workload(self) -> None:
        with self._client() as client:
            self._run_workload_with(client)

    def _run_workload_with(self, client: Client) -> None:
        warmup = self.scenario.warmup
        commands = self._commands(client.endpoint, client.binary)
        pinned = self._sampled_pinned_cores(commands)
        self.record.commands["workload"] = client.saved_argv(commands.argv)
        controller = self._controller(client, commands.timeout_s)
        samplers_on = self._samplers(warmup, pinned)
        try:
            with self._interfering(commands) as running, samplers_on as samplers:
                controller.abort = functools.partial(self._abort_reason, running, samplers)
                first = self._launch(client, commands.argv, self.folder / "workload.out")
                try:
                    with self._following(lambda: self._output, warmup) as poll:
                        controller.poll = poll
                        watched = controller.watch(first)
                finally:
                    first.stop()  # nothing to do once watched: every run ends finished
                # The tool may notice first ("lost connection"); the cause is the server's death.
                abort = watched.reason or self.server.died()
        finally:
            if self._faults is not None:
                self._faults.close()
        soak = self.scenario.soak is not None
        outcome = TrialOutcome(
            self.workload, self.folder, warmup, self._faults, self._connect, soak, self.record
        )
        outcome.derived = functools.partial(derived_costs, units=self.workload.units_of_work)
        outcome.judge(watched, client.report(watched.runs), abort)

    def _connect(self) -> Any:
        """The server, for the workload's checks after its run (only a server has them)."""
        return self.server.connect()  # type: ignore[union-attr]

    def _controller(self, client: Client, timeout_s: float) -> FaultController:
        relaunch = functools.partial(self._relaunch, client)
        plan = ClientPlan.of(self.workload, self.scenario.warmup, timeout_s, relaunch)
        return FaultController(plan, self._faults, clock=self.context.clock)

    def _launch(self, client: Client, argv: list[str], out: Path) -> ClientRun:
        run = client.launch(argv, out, self._cwd())
        self._output, self._workload_pid = out, run.pid
        return run

    def _relaunch(self, client: Client, seconds: int, number: int) -> ClientRun:
        """The workload started again for ``seconds`` after a fault ended its run."""
        assert isinstance(self.workload, ResumableWorkload)
        argv = self.workload.resumed_argv(client.endpoint, client.binary, seconds)
        self.record.commands["workload_resumed"] = client.saved_argv(argv)
        return self._launch(client, argv, self.folder / f"workload-{number}.out")

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

    def _following(
        self, out: Path | Callable[[], Path], warmup: int
    ) -> contextlib.AbstractContextManager[Callable[[], None]]:
        if self.follow is None:
            return contextlib.nullcontext(lambda: None)
        return self.follow(self.workload, warmup, out)

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

    def _interfering(
        self, commands: TrialCommands
    ) -> contextlib.AbstractContextManager[list[InterferenceRun]]:
        """Every interference tool of the cell, running for the length of the block."""
        hosts = self.context.remote.host if self.context.remote is not None else None
        on = InterferenceOn(self.folder, self.context.clock, hosts, self._interference)
        return on.running_for(commands.interference, self.record.commands, self.record.metrics)

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
