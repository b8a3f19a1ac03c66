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

from dbrig import sampling
from dbrig.endpoint import Endpoint
from dbrig.errors import DbrigError, DiskFull, ServerInitError
from dbrig.host.settings import SystemState
from dbrig.remote.samples import CLIENT_FOLDER, merge_remote_samples
from dbrig.remote.server import RemoteServerHandle
from dbrig.run.client import Client, ClientRun, LocalClient
from dbrig.run.commands import DEFAULT_EVENTS_TIMEOUT_S, TrialCommands, trial_commands
from dbrig.run.datasets import AnyHandle, client_endpoint, ready_for_trial
from dbrig.run.fault_control import ClientPlan, FaultController
from dbrig.run.faults import FaultInjector
from dbrig.run.interference import InterferenceOn, InterferenceRun
from dbrig.run.record import TrialRecord
from dbrig.run.remote import RemoteClients
from dbrig.run.server_status import global_status as _global_status
from dbrig.run.server_status import resilient_status
from dbrig.run.ssh_client import SshClient, remote_run
from dbrig.run.trial_outcome import CLIENT_LOG_DIR, TrialOutcome
from dbrig.run.workdir import WorkDirHandle
from dbrig.scenario import Cell, Trial
from dbrig.server.handles import ExternalServerHandle, ManagedServerHandle, setting_warnings
from dbrig.tools.base import (
    ClientLogWorkload,
    ResumableWorkload,
    WorkloadTool,
    client_host,
    interference_host,
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
        if self.context.system is None:
            return
        if isinstance(self.server, RemoteServerHandle):  # the device under its datadir there
            self.record.system = self.server.apply_system(self.scenario.system)
        else:
            self.record.system = self.context.system.apply(self.scenario.system)

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
        start_line = getattr(self.workload, "start_line", None)  # run/startwatch.py
        name = client_host(self.workload)
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
        if not self.scenario.faults.given or not isinstance(self.server, ManagedServerHandle):
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
        outcome.derived = derived_costs
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
        if isinstance(self.server, WorkDirHandle):
            return self.server.cwd
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
        """The cores interference is pinned to on the host whose cores the trial's cpu.csv
        holds (the server's host, sampled by its agent, when the server is elsewhere)."""
        sampled = None
        if isinstance(self.server, RemoteServerHandle) and self.server.host is not None:
            sampled = self.server.host.target.name
        here = [c for c in commands.interference if c.host == sampled]
        return next((p for c in here if (p := c.tool.pinned_cores())), None)

    def _interfering(
        self, commands: TrialCommands
    ) -> contextlib.AbstractContextManager[list[InterferenceRun]]:
        """Every interference tool of the cell, running for the length of the block."""
        hosts = self.context.remote.host if self.context.remote is not None else None
        on = InterferenceOn(self.folder, self.context.clock, hosts, self._interference)
        return on.running_for(commands.interference, self.record.commands, self.record.metrics)

    @contextlib.contextmanager
    def _samplers(self, warmup: int, pinned_cores: list[int] | None) -> Iterator[list]:
        cfg = self.scenario.sampling
        if not cfg.enabled:
            yield []
            return
        timing = sampling.SampleTiming(
            interval=cfg.interval,
            clock=self.context.clock,
            t0=self.context.clock() + warmup,
            warmup_s=warmup,
        )
        roles = self._process_roles
        remote = None
        if isinstance(self.server, RemoteServerHandle):  # its host sampled by its agent
            remote = self.server.sampling(timing, cfg.devices)
        host = sampling.HostSampler(
            self.folder / CLIENT_FOLDER if remote else self.folder,
            timing=timing,
            processes=roles,
            devices=cfg.devices or self.context.devices,
        )
        samplers: list = [host, remote] if remote else [host]
        conn = None
        if self._faults is not None:  # the server may be away: reconnect, or repeat the last
            fetch = resilient_status(self.server.connect, _global_status)
            conn = fetch
            samplers.append(sampling.StatusSampler(self.folder, timing=timing, fetch=fetch))
        elif not isinstance(self.server, WorkDirHandle):  # no server, no SHOW GLOBAL STATUS
            conn = self.server.connect()
            status_conn = conn
            samplers.append(
                sampling.StatusSampler(
                    self.folder, timing=timing, fetch=lambda: _global_status(status_conn)
                )
            )
        try:
            for sampler in samplers:  # a remote one may fail to start: stop those that did
                sampler.start()
            yield samplers
        finally:
            for sampler in samplers:
                sampler.stop()
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
        for sampler in samplers:
            if sampler.failure is not None and is_disk_full(sampler.failure):
                raise disk_full(self.folder) from sampler.failure
        if remote is not None:
            merge_remote_samples(self.folder, remote.files)
        self.record.metrics.update(
            sampling.summarize_cell(
                self.folder, pinned_cores=pinned_cores, processes_here=self._all_followed_here()
            )
        )

    def _all_followed_here(self) -> bool:
        """Every process of the trial that takes this host's CPU is one the host sampler
        follows: not so with an external server (no pid), a server on another host
        (cpu.csv is its host's), or a client or stress-ng over ssh (the local ssh
        connection carries their traffic and is not followed)."""
        if isinstance(self.server, ExternalServerHandle | RemoteServerHandle):
            return False
        if client_host(self.workload) is not None:
            return False
        tools = interference_for(self.scenario.interference)
        return all(interference_host(tool) is None for tool in tools)

    def _process_roles(self) -> dict[str, list[int]]:
        """The processes the host sampler follows, by role (read from the sampler thread)."""
        roles = {"server": self.server.pid, "workload": self._workload_pid}
        roles.update({run.tool.key: run.pid for run in self._interference})
        return {role: [pid] for role, pid in roles.items() if pid}


def derived_costs(metrics: dict[str, float]) -> dict[str, float]:
    """Cost per unit of work: what a transaction costs the server, whatever the throughput.

    CPU µs, context switches and KiB read and written by the server process per
    transaction (and CPU per query), all over the measured window.
    """
    out: dict[str, float] = {}
    txns = metrics.get("transactions") or 0
    queries = metrics.get("queries_total") or 0
    window = metrics.get("measured_time_s") or 0
    if txns > 0 and "server_cpu_s" in metrics:
        out["server_cpu_us_per_txn"] = metrics["server_cpu_s"] * 1e6 / txns
    if queries > 0 and "server_cpu_s" in metrics:
        out["server_cpu_us_per_query"] = metrics["server_cpu_s"] * 1e6 / queries
    if txns > 0 and "server_ctx_switches" in metrics:
        out["ctx_switches_per_txn"] = metrics["server_ctx_switches"] / txns
    for direction in ("read", "write"):
        rate = metrics.get(f"server_{direction}_mb_per_s")
        if txns > 0 and window > 0 and rate is not None:
            name = "kb_read_per_txn" if direction == "read" else "kb_written_per_txn"
            out[name] = rate * window * 1024 / txns
    out.update(_costs_per_new_order(metrics, window))
    return out


def _costs_per_new_order(metrics: dict[str, float], window: float) -> dict[str, float]:
    """A TPC-C-like run's unit of work is the committed New-Order (its NOPM)."""
    new_orders = (metrics.get("nopm") or 0) * window / 60
    if new_orders <= 0:
        return {}
    out = {}
    if "server_cpu_s" in metrics:
        out["server_cpu_us_per_new_order"] = metrics["server_cpu_s"] * 1e6 / new_orders
    if (rate := metrics.get("server_write_mb_per_s")) is not None:
        out["kb_written_per_new_order"] = rate * window * 1024 / new_orders
    return out
