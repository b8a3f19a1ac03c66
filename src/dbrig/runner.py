"""The run loop: for every trial, restore -> start -> interfere -> sample -> run -> stop -> save.

The runner owns every lifecycle: servers, snapshots, interference, samplers
and the workload process. Drivers only build commands and parse output;
reports only read what the runner saved.

A trial that fails (the tool exits non-zero or prints FATAL, the server or
stress-ng dies, a sampler breaks, the run overruns its time limit) is saved as
failed with a one-line reason and the run goes on. Ctrl-C and SIGTERM stop
everything that was started, keep every finished trial, and leave the run
resumable with ``dbrig run --resume``.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from dbrig import environment, proc, store, system
from dbrig.errors import ConfigError, DbrigError, Interrupted
from dbrig.scenario import ExternalServer, ManagedServer, Plan, Trial
from dbrig.server import datadir as dd
from dbrig.server.binary import ServerBinary, find_server
from dbrig.server.external import ExternalConnection
from dbrig.server.handles import ExternalServerHandle, ManagedServerHandle, ServerHandle
from dbrig.tools import stress_ng
from dbrig.tools.base import Endpoint
from dbrig.trial import TrialContext, TrialExecutor, TrialRecord
from dbrig.workloads import workload_for

log = logging.getLogger(__name__)

_STATUS_SUFFIX = {"ok": "ok", "failed": "FAILED"}


# -- what the runner needs before it starts ------------------------------------------


@dataclass(frozen=True)
class Toolbox:
    """Every binary a run needs, found and versioned before anything starts."""

    workload: Path
    workload_version: str | None
    stress_ng: Path | None
    stress_ng_version: str | None
    servers: dict[str, ServerBinary]


def preflight(plan: Plan, out: Path | None = None) -> Toolbox:
    """Find every binary and check every cell against this host; raises before anything runs."""
    tool = workload_for(plan.scenario.workload)
    binary = proc.which(tool.info.binaries, package=tool.info.package)
    cpu_count = os.cpu_count() or 1
    needs_stress = False
    for cell in plan.cells:
        try:
            # Building the command is where a driver refuses what its tool cannot do.
            workload = workload_for(cell.scenario.workload)
            spec = cell.scenario.server_specs[cell.server]
            workload.run_argv(
                display_endpoint(spec, workload.database), binary, cell.scenario.warmup
            )
            params = cell.scenario.interference.stress_ng
            if params is not None and params.active:
                stress_ng.validate_for_host(params, cpu_count)
                needs_stress = True
        except ConfigError as exc:  # the drivers know the key, not the file
            raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None
    stress = (
        proc.which(stress_ng.INFO.binaries, package=stress_ng.INFO.package)
        if needs_stress
        else None
    )
    servers: dict[str, ServerBinary] = {}
    for name in sorted({c.server for c in plan.cells}):
        spec = plan.scenario.server_specs[name]
        if isinstance(spec, ManagedServer):
            servers[name] = find_server(spec.basedir)
        else:
            _check_reachable(plan, name, spec)
    _check_system(plan, out or Path(plan.scenario.out))
    return Toolbox(
        workload=binary,
        workload_version=environment.tool_version(binary),
        stress_ng=stress,
        stress_ng_version=environment.tool_version(stress) if stress else None,
        servers=servers,
    )


def _check_reachable(plan: Plan, name: str, spec: ExternalServer) -> None:
    """An external server that does not answer (or refuses the password) stops the run here."""
    try:
        connection = ExternalConnection(name, spec)
        try:
            connection.check_reachable()
        finally:
            connection.close()
    except ConfigError as exc:
        raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None


def _check_system(plan: Plan, out: Path) -> None:
    wanted = [c.scenario.system for c in plan.cells]
    if any(s.active for s in wanted):
        try:
            system.check(wanted, datadir_device(out))
        except ConfigError as exc:
            raise ConfigError(f"{plan.source}: {exc.message}", hint=exc.hint) from None


def datadir_device(where: Path) -> system.BlockDevice | None:
    """The block device holding ``where`` (the run directory, so every managed datadir).

    Read-only: ``where`` may not exist yet, and preflight must create nothing.
    """
    name = dd.block_device_of(where)
    return system.BlockDevice(name) if name else None


def display_endpoint(spec: ManagedServer | ExternalServer, database: str) -> Endpoint:
    """Where a cell's tool would connect, for checks and --dry-run (no secrets, no sockets)."""
    if isinstance(spec, ExternalServer):
        secret = spec.password_env or spec.defaults_file
        return Endpoint(
            user=spec.user,
            database=database,
            socket=spec.socket,
            host=None if spec.socket else spec.host,
            port=None if spec.socket else spec.port,
            client_options_file=Path("<0600 option file>") if secret else None,
        )
    return Endpoint(user="root", database=database, socket="<sandbox>/mysqld.sock")


# -- progress --------------------------------------------------------------------------


class Progress:
    """Prints one line per trial with an ETA; quiet enough for CI logs."""

    def __init__(self, total: int, emit: Callable[[str], None], clock=time.monotonic) -> None:
        self.total = total
        self.done = 0
        self.emit = emit
        self.clock = clock
        self.started = clock()

    def starting(self, trial: Trial, label: str) -> None:
        eta = self._eta()
        self.emit(f"[{self.done + 1}/{self.total}] {trial.id} {label}{eta}")

    def finished(self, trial: Trial, status: str, detail: str) -> None:
        self.done += 1
        self.emit(f"    {_STATUS_SUFFIX.get(status, status)}: {detail}")

    def _eta(self) -> str:
        if not self.done:
            return ""
        per_trial = (self.clock() - self.started) / self.done
        remaining = per_trial * (self.total - self.done)
        return f"  (ETA {_fmt_duration(remaining)})"


def _fmt_duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


# -- the whole run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSummary:
    run_dir: Path
    total: int
    ok: int
    failed: int
    skipped: int
    interrupted: bool


class Runner:
    def __init__(
        self,
        plan: Plan,
        run: store.RunDir,
        tools: Toolbox,
        *,
        keep_data: bool = False,
        emit: Callable[[str], None] = print,
        events_timeout_s: float = 3600.0,
    ) -> None:
        self.plan = plan
        self.run = run
        self.tools = tools
        self.keep_data = keep_data
        self.emit = emit
        self.servers: dict[str, ServerHandle] = {}
        self.short_names = plan.short_names()
        device = datadir_device(run.path)
        uses_system = any(c.scenario.system.active for c in plan.cells)
        self.context = TrialContext(
            workload_binary=tools.workload,
            stress_ng_binary=tools.stress_ng,
            devices=[device.name] if device else None,
            system=system.SystemState(device) if uses_system else None,
            events_timeout_s=events_timeout_s,
        )

    def _server(self, name: str) -> ServerHandle:
        if name not in self.servers:
            spec = self.plan.scenario.server_specs[name]
            home = self.run.path / "servers" / name
            if isinstance(spec, ExternalServer):
                self.servers[name] = ExternalServerHandle(name, spec, home)
            else:
                binary = self.tools.servers[name]
                self.servers[name] = ManagedServerHandle(name, spec, binary, home)
        return self.servers[name]

    def execute(self, trials: list[Trial]) -> RunSummary:
        progress = Progress(len(trials), self.emit)
        ok = failed = 0
        ended = "complete"
        try:
            for trial in trials:
                progress.starting(trial, trial.cell.label(self.short_names))
                record = self._execute_one(trial)
                progress.finished(trial, record.status, self._detail(record))
                ok += record.status == "ok"
                failed += record.status != "ok"
        except KeyboardInterrupt:
            ended = "interrupted"
        except BaseException:
            ended = "aborted"  # a bug or the environment: keep the data for --resume
            raise
        finally:
            self._finish(ended)
        interrupted = ended == "interrupted"
        summary = RunSummary(
            self.run.path, len(trials), ok, failed, len(trials) - ok - failed, interrupted
        )
        if interrupted:
            # Count from disk: the signal may land after a trial was saved, before it was counted.
            saved = self.run.trial_records()
            done = sum(t.id in saved for t in trials)
            raise Interrupted(
                f"interrupted: {done} of {len(trials)} trials saved in {self.run.path}",
                hint=f"continue with: dbrig run --resume {self.run.path}",
            )
        return summary

    def _execute_one(self, trial: Trial) -> TrialRecord:
        with self.run.writing_trial(trial.id) as folder:
            server = self._server(trial.cell.server)
            record = TrialExecutor(self.context, server, trial, folder).execute()
            store.write_json_atomic(folder / store.TRIAL_JSON, record.to_json(self.short_names))
        self._write_results()
        self._record_servers()
        return record

    def _detail(self, record: TrialRecord) -> str:
        if record.status != "ok":
            return record.reason or "failed"
        m = record.metrics
        parts = []
        for key, fmt in (
            ("tps", "{:.1f} tps"),
            ("qps", "{:.0f} qps"),
            ("latency_avg_ms", "avg {:.2f} ms"),
            ("avg_s", "avg {:.3f} s"),
            ("queries_per_s", "{:.0f} q/s"),
        ):
            if key in m:
                parts.append(fmt.format(m[key]))
        return ", ".join(parts) or "done"

    def _write_results(self) -> None:
        self.run.write_results(store.results_frame(self.run.trial_records().values()))

    def _record_servers(self) -> None:
        meta = self.run.meta()
        servers = meta.get("servers", {})
        changed = False
        for name, handle in self.servers.items():
            if handle.info and name not in servers:
                servers[name] = handle.info
                changed = True
        if changed:
            self.run.update_meta(servers=servers)

    def _finish(self, ended: str) -> None:
        """Stop and clean up everything, each step whatever happens to the others: a second
        Ctrl-C during a slow server shutdown must not skip the rest."""
        keep = self.keep_data or ended != "complete"
        if ended == "complete":
            # A resumed run may not have touched every managed server: clean them all up.
            for name, spec in self.plan.scenario.server_specs.items():
                if isinstance(spec, ManagedServer) and name in self.tools.servers:
                    self._server(name)
        steps = [
            *(lambda h=h: h.close(keep_data=keep) for h in self.servers.values()),
            proc.stop_all,
            self._write_results,
        ]
        if self.context.system is not None:
            steps.append(self.context.system.restore)  # last: never lose the original values
        pending_interrupt: BaseException | None = None
        for step in steps:
            try:
                step()
            except KeyboardInterrupt as exc:
                pending_interrupt = exc
            except (DbrigError, OSError) as exc:
                log.warning("cleaning up: %s", exc)
        records = self.run.trial_records()
        self.run.update_meta(
            status=ended,
            finished_at=dt.datetime.now(dt.UTC).isoformat(),
            trials_saved=len(records),
            trials_failed=sum(r["status"] != "ok" for r in records.values()),
        )
        if pending_interrupt is not None and ended == "complete":
            raise pending_interrupt


def start_run(plan: Plan, out: Path | None, tools: Toolbox, now: dt.datetime) -> store.RunDir:
    """Create the run directory and its run.json before the first trial."""
    root = out or Path(plan.scenario.out)
    run = store.RunDir.create(root, plan.scenario.name, now)
    (run.path / "scenario.yaml").write_text(yaml.safe_dump(plan.raw, sort_keys=False))
    run.write_meta(
        {
            "status": "running",
            "created_at": now.isoformat(),
            "source": plan.source,
            "digest": plan.digest,
            "seed": plan.seed,
            "scenario": plan.scenario.model_dump(mode="json", by_alias=True),
            "raw_scenario": plan.raw,
            "factors": list(plan.factor_names),
            "factor_labels": plan.short_names(),
            "cells": [
                {"cell": c.id, "server": c.server, "factors": c.factor_dict} for c in plan.cells
            ],
            "trials": [t.id for t in plan.trials],
            "environment": {
                "host": environment.host(),
                "storage": environment.storage(run.path),
                "tools": {
                    "workload": tools.workload_version,
                    "stress-ng": tools.stress_ng_version,
                    **{f"server:{n}": b.version_line for n, b in tools.servers.items()},
                },
            },
        }
    )
    return run


def pending_trials(plan: Plan, run: store.RunDir, *, retry_failed: bool) -> list[Trial]:
    """The trials of the saved order that have no saved result (or failed, if retrying)."""
    records = run.trial_records()
    order = run.meta().get("trials") or [t.id for t in plan.trials]
    by_id = {t.id: t for t in plan.trials}
    pending = []
    for trial_id in order:
        rec = records.get(trial_id)
        if rec is None or (retry_failed and rec["status"] != "ok"):
            pending.append(by_id[trial_id])
    return pending


def describe_commands(plan: Plan, short_names: dict[str, str]) -> Iterator[str]:
    """For ``--dry-run``: each cell's factors and the exact commands it would run."""
    for cell in plan.cells:
        workload = workload_for(cell.scenario.workload)
        binary = Path(workload.info.binaries[0])
        endpoint = display_endpoint(cell.scenario.server_specs[cell.server], workload.database)
        yield f"{cell.id} [{cell.server}] {cell.label(short_names)}"
        prepare = workload.prepare_argv(endpoint, binary)
        if prepare:
            yield "  prepare (once per data set): " + " ".join(proc.redact(prepare))
        yield "  run: " + " ".join(
            proc.redact(workload.run_argv(endpoint, binary, cell.scenario.warmup))
        )
        params = cell.scenario.interference.stress_ng
        if params is not None and params.active:
            expected = workload.expected_seconds(cell.scenario.warmup) or 3600
            argv = stress_ng.build_command(params, timeout_s=int(expected * 1.5 + 60))
            yield "  interference: " + " ".join(argv)
        config = cell.scenario.server_specs[cell.server]
        if isinstance(config, ManagedServer) and config.config:
            yield "  my.cnf: " + ", ".join(f"{k}={v}" for k, v in config.config.items())
        if isinstance(config, ManagedServer) and config.cpus:
            yield "  server pinned to cores: " + ",".join(map(str, config.cpus))
        settings = cell.scenario.system
        if settings.active:
            yield "  system: " + ", ".join(
                f"{k}={v}" for k, v in settings.model_dump(exclude_defaults=True).items()
            )
