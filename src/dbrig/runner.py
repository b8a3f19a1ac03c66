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

import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from dbrig import environment, proc, sampling, store
from dbrig.errors import ConfigError, DbrigError, Interrupted, ToolError
from dbrig.scenario import Cell, ManagedServer, Plan, Trial
from dbrig.server import datadir as dd
from dbrig.server.binary import ServerBinary, find_server
from dbrig.server.sandbox import Sandbox
from dbrig.tools import stress_ng
from dbrig.tools.base import Endpoint
from dbrig.workloads import Outcome, Workload, workload_for

log = logging.getLogger(__name__)

_PREPARE_TIMEOUT_S = 3600
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


def preflight(plan: Plan) -> Toolbox:
    """Find every binary and check every cell against this host; raises before anything runs."""
    tool = workload_for(plan.scenario.workload)
    binary = proc.which(tool.info.binaries, package=tool.info.package)
    cpu_count = os.cpu_count() or 1
    needs_stress = False
    for cell in plan.cells:
        try:
            workload_for(cell.scenario.workload).run_argv(_placeholder_endpoint(), binary, 0)
            if cell.scenario.warmup:
                workload_for(cell.scenario.workload).run_argv(
                    _placeholder_endpoint(), binary, cell.scenario.warmup
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
        if not isinstance(spec, ManagedServer):
            raise DbrigError(
                f"servers.{name}: external servers are not supported by this dbrig yet "
                "(only kind: managed)"
            )
        servers[name] = find_server(spec.basedir)
    return Toolbox(
        workload=binary,
        workload_version=environment.tool_version(binary),
        stress_ng=stress,
        stress_ng_version=environment.tool_version(stress) if stress else None,
        servers=servers,
    )


def _placeholder_endpoint() -> Endpoint:
    return Endpoint(user="root", database="sbtest", socket="/tmp/dbrig-XXXX/mysqld.sock")


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


# -- managed servers and their snapshots --------------------------------------------------


class ManagedServerHandle:
    """A sandbox plus the snapshots of its prepared data, one per prepare key."""

    def __init__(self, name: str, spec: ManagedServer, binary: ServerBinary, home: Path) -> None:
        self.name = name
        self.spec = spec
        self.sandbox = Sandbox(
            name,
            binary,
            home,
            cpus=spec.cpus,
            port=spec.port,
            startup_timeout_s=spec.startup_timeout,
        )
        self.home = home
        self.snapshots = home / "snapshots"
        self.reflink = False
        self.info: dict[str, Any] = {}

    def snapshot_for(self, workload: Workload, config: dict, workload_binary: Path) -> Path:
        """The snapshot holding ``workload``'s prepared data, made on first use."""
        key = workload.prepare_key()
        digest = hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()[:12]
        target = self.snapshots / f"data-{digest}"
        if target.exists():
            return target
        self._use(self.spec)
        base = self._base_snapshot(workload.database, config)
        dd.restore(base, self.sandbox.datadir, reflink=self.reflink)
        argv = workload.prepare_argv(self.sandbox.endpoint(workload.database), workload_binary)
        if argv:
            self.sandbox.start(config)
            try:
                self.sandbox.prepare_accounts(workload.database)
                self._run_prepare(argv)
            finally:
                self.sandbox.stop()
        dd.snapshot(self.sandbox.datadir, target, reflink=self.reflink)
        (target.parent / f"{target.name}.json").write_text(json.dumps({"key": key}, default=str))
        return target

    def _base_snapshot(self, database: str, config: dict) -> Path:
        base = self.snapshots / "base"
        if base.exists():
            return base
        self.home.mkdir(parents=True, exist_ok=True)
        self.reflink = dd.supports_reflink(self.home)
        dd.remove_owned(self.sandbox.datadir)  # left by an attempt that failed or was interrupted
        self.sandbox.initialize()
        self.sandbox.start(config)
        try:
            self.sandbox.prepare_accounts(database)
            self.info = self._server_info()
        finally:
            self.sandbox.stop()
        dd.snapshot(self.sandbox.datadir, base, reflink=self.reflink)
        return base

    def _run_prepare(self, argv: list[str]) -> None:
        out = self.home / "prepare.out"
        done = proc.run(argv, timeout_s=_PREPARE_TIMEOUT_S, stdout=out, merge_stderr=True)
        if done.returncode != 0 or done.timed_out:
            text = out.read_text(errors="replace")
            fatal = [ln for ln in text.splitlines() if "FATAL" in ln or "error" in ln.lower()]
            detail = fatal[0] if fatal else f"exit {done.returncode}"
            raise ToolError(f"server '{self.name}': preparing the data failed: {detail}")

    def _server_info(self) -> dict[str, Any]:
        with contextlib.closing(self.sandbox.connect()) as conn, conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            version = cur.fetchone()[0]
            cur.execute("SHOW GLOBAL VARIABLES")
            variables = dict(cur.fetchall())
        return {
            "flavor": self.sandbox.binary.flavor,
            "version": version,
            "binary": str(self.sandbox.binary.mysqld),
            "variables": variables,
        }

    def restore_and_start(self, snapshot: Path, spec: ManagedServer) -> dict[str, float]:
        """Restore ``snapshot``; start with the cell's own server block (the matrix may vary it)."""
        self.sandbox.stop()
        restored = dd.restore(snapshot, self.sandbox.datadir, reflink=self.reflink)
        self._use(spec)
        started = self.sandbox.start(dict(spec.config))
        if not self.info:  # a resumed run made no base snapshot, so it has not asked yet
            self.info = self._server_info()
        return {"restore_s": restored.seconds, "server_start_s": started}

    def _use(self, spec: ManagedServer) -> None:
        """Start-up settings: the server's own for prepare, each cell's for its trials."""
        self.sandbox.cpus = spec.cpus
        self.sandbox.fixed_port = spec.port
        self.sandbox.startup_timeout_s = spec.startup_timeout

    def effective(self, config: dict) -> dict[str, Any]:
        """The values the server actually runs with, for the keys the scenario set."""
        names = [k.replace("-", "_") for k in config if k.replace("-", "_").isidentifier()]
        if not names:
            return {}
        with contextlib.closing(self.sandbox.connect()) as conn, conn.cursor() as cur:
            cur.execute(
                "SHOW GLOBAL VARIABLES WHERE Variable_name IN ("
                + ",".join(["%s"] * len(names))
                + ")",
                names,
            )
            return dict(cur.fetchall())

    def close(self, keep_data: bool) -> None:
        self.sandbox.close()
        if not keep_data:
            for path in (self.sandbox.datadir, *self._snapshot_dirs()):
                dd.remove_owned(path)

    def _snapshot_dirs(self) -> list[Path]:
        if not self.snapshots.is_dir():
            return []
        return [p for p in self.snapshots.iterdir() if p.is_dir()]


# -- one trial ------------------------------------------------------------------------------


@dataclass
class TrialRecord:
    trial: Trial
    status: str = "ok"
    reason: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    commands: list[list[str]] = field(default_factory=list)
    effective_config: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""

    def fail(self, reason: str) -> None:
        if self.status == "ok":
            self.status, self.reason = "failed", reason

    def to_json(self, short_names: dict[str, str]) -> dict[str, Any]:
        cell = self.trial.cell
        return {
            "format_version": store.FORMAT_VERSION,
            "trial": self.trial.id,
            "cell": cell.id,
            "repetition": self.trial.repetition,
            "server": cell.server,
            "label": cell.label(short_names),
            "factors": cell.factor_dict,
            "status": self.status,
            "reason": self.reason,
            "started_at": self.started_at,
            "timings": self.timings,
            "metrics": self.metrics,
            "effective_config": self.effective_config,
            "commands": [proc.redact(c) for c in self.commands],
        }


class TrialExecutor:
    """Runs one trial against a started server and records everything in ``folder``."""

    def __init__(self, runner: Runner, trial: Trial, folder: Path) -> None:
        self.runner = runner
        self.trial = trial
        self.cell: Cell = trial.cell
        self.scenario = trial.cell.scenario
        self.folder = folder
        self.workload = workload_for(self.scenario.workload)
        self.server = runner.servers[self.cell.server]
        self.record = TrialRecord(trial, started_at=dt.datetime.now(dt.UTC).isoformat())
        self._workload_pid: int | None = None
        self._stress: StressHandle | None = None

    def execute(self) -> TrialRecord:
        # Data is prepared under the server's own config, so cells can share a snapshot;
        # each trial then runs under its cell's server block.
        prepare_config = dict(self.server.spec.config)
        spec = self.scenario.server_specs[self.cell.server]
        assert isinstance(spec, ManagedServer)
        try:
            snapshot = self.server.snapshot_for(
                self.workload, prepare_config, self.runner.tools.workload
            )
            self.record.timings.update(self.server.restore_and_start(snapshot, spec))
            self.record.effective_config = self.server.effective(dict(spec.config))
            self._run_workload()
        except DbrigError as exc:
            self.record.fail(exc.message)
        finally:
            self.record.timings["server_stop_s"] = self.server.sandbox.stop()
        return self.record

    def _run_workload(self) -> None:
        warmup = self.scenario.warmup
        endpoint = self.server.sandbox.endpoint(self.workload.database)
        argv = self.workload.run_argv(endpoint, self.runner.tools.workload, warmup)
        self.record.commands.append(argv)
        expected = self.workload.expected_seconds(warmup)
        timeout = expected * 1.5 + 60 if expected else self.runner.events_timeout_s
        out = self.folder / "workload.out"
        with self._interference(expected) as stress, self._samplers(warmup) as samplers:
            child = proc.spawn(argv, stdout=out, merge_stderr=True)
            self._workload_pid = child.pid
            finished, abort = self._watch(child, timeout, stress, samplers)
        self.record.timings["workload_s"] = finished.wall_s
        self.record.metrics["client_user_cpu_s"] = finished.user_cpu_s
        self.record.metrics["client_sys_cpu_s"] = finished.sys_cpu_s
        outcome = self.workload.analyse(out.read_text(errors="replace"), finished.returncode)
        self._save_outcome(outcome, warmup)
        if abort:
            self.record.fail(abort)
        elif finished.timed_out:
            self.record.fail(f"{self.workload.info.name} did not finish within {timeout:.0f} s")
        elif outcome.reason:
            self.record.fail(outcome.reason)

    def _watch(
        self, child: proc.Child, timeout: float, stress: StressHandle | None, samplers: list
    ) -> tuple[proc.Finished, str | None]:
        deadline = time.monotonic() + timeout
        while True:
            done = child.wait(0.25)
            if done is not None:
                return done, None
            abort = self._abort_reason(stress, samplers)
            if abort or time.monotonic() >= deadline:
                finished = child.stop(grace_s=5)
                if not abort:
                    finished = proc.Finished(**{**finished.__dict__, "timed_out": True})
                return finished, abort

    def _abort_reason(self, stress: StressHandle | None, samplers: list) -> str | None:
        died = self.server.sandbox.died()
        if died:
            return died
        if stress is not None and (reason := stress.died()):
            return reason
        for sampler in samplers:
            if sampler.error:
                return sampler.error
        return None

    @contextlib.contextmanager
    def _interference(self, expected: float | None) -> Iterator[StressHandle | None]:
        params = self.scenario.interference.stress_ng
        if params is None or not params.active:
            yield None
            return
        assert self.runner.tools.stress_ng is not None
        limit = int((expected or self.runner.events_timeout_s) * 1.5 + 60)
        handle = StressHandle(params, self.runner.tools.stress_ng, self.folder, limit)
        self.record.commands.append(handle.argv)
        handle.start()
        self._stress = handle
        try:
            yield handle
        finally:
            self._stress = None
            self.record.metrics.update(handle.stop())

    @contextlib.contextmanager
    def _samplers(self, warmup: int) -> Iterator[list]:
        cfg = self.scenario.sampling
        if not cfg.enabled:
            yield []
            return
        t0 = time.monotonic() + warmup
        roles = self._process_roles
        host = sampling.HostSampler(
            self.folder,
            interval=cfg.interval,
            clock=time.monotonic,
            t0=t0,
            warmup_s=warmup,
            processes=roles,
            devices=cfg.devices or self.runner.datadir_devices,
        )
        conn = self.server.sandbox.connect()
        status = sampling.StatusSampler(
            self.folder,
            interval=cfg.interval,
            clock=time.monotonic,
            t0=t0,
            warmup_s=warmup,
            fetch=lambda: _global_status(conn),
        )
        host.start()
        status.start()
        try:
            yield [host, status]
        finally:
            host.stop()
            status.stop()
            with contextlib.suppress(Exception):
                conn.close()
        pinned = None
        params = self.scenario.interference.stress_ng
        if params is not None and params.active and params.taskset:
            pinned = list(params.taskset)
        self.record.metrics.update(sampling.summarize_cell(self.folder, pinned_cores=pinned))

    def _process_roles(self) -> dict[str, list[int]]:
        """The processes the host sampler follows, by role (read from the sampler thread)."""
        roles = {
            "server": self.server.sandbox.pid,
            "workload": self._workload_pid,
            "stress-ng": self._stress.pid if self._stress else None,
        }
        return {role: [pid] for role, pid in roles.items() if pid}

    def _save_outcome(self, outcome: Outcome, warmup: int) -> None:
        self.record.metrics.update(outcome.metrics)
        if outcome.intervals is not None:
            frame = outcome.intervals.copy()
            frame.insert(0, "phase", ["warmup" if t <= warmup else "measure" for t in frame["t_s"]])
            frame["t_s"] = frame["t_s"] - warmup
            frame.to_csv(self.folder / "intervals.csv", index=False)
        for name, table in outcome.extra_tables.items():
            table.to_csv(self.folder / f"{name}.csv", index=False)
        self.record.metrics.update(derived_costs(self.record.metrics))


def _global_status(conn: Any) -> dict[str, str]:
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS")
        return {str(k): str(v) for k, v in cur.fetchall()}


def derived_costs(metrics: dict[str, float]) -> dict[str, float]:
    """Cost per unit of work: steadier than throughput on a noisy host."""
    out: dict[str, float] = {}
    txns = metrics.get("transactions") or 0
    queries = metrics.get("queries_total") or 0
    if txns > 0 and "server_cpu_s" in metrics:
        out["server_cpu_us_per_txn"] = metrics["server_cpu_s"] * 1e6 / txns
    if queries > 0 and "server_cpu_s" in metrics:
        out["server_cpu_us_per_query"] = metrics["server_cpu_s"] * 1e6 / queries
    if txns > 0 and "server_ctx_switches" in metrics:
        out["ctx_switches_per_txn"] = metrics["server_ctx_switches"] / txns
    return out


class StressHandle:
    """stress-ng in the background for the length of one trial."""

    def __init__(self, params: Any, binary: Path, folder: Path, limit_s: int) -> None:
        self.params = params
        self.folder = folder
        self.argv = stress_ng.build_command(params, binary=str(binary), timeout_s=limit_s)
        self.child: proc.Child | None = None
        self.stderr = folder / "stress-ng.err"

    def start(self) -> None:
        self.child = proc.spawn(self.argv, stderr=self.stderr)

    @property
    def pid(self) -> int | None:
        return self.child.pid if self.child else None

    def died(self) -> str | None:
        if self.child is None:
            return None
        done = self.child.poll()
        if done is None:
            return None
        text = self.stderr.read_text(errors="replace") if self.stderr.exists() else ""
        reason = stress_ng.failure_reason(stress_ng.parse(text), done.returncode)
        return f"stress-ng exited early: {reason or f'exit {done.returncode}'}"

    def stop(self) -> dict[str, float]:
        if self.child is None:
            return {}
        started = self.child.started
        finished = self.child.stop(grace_s=10)
        self.child = None
        text = self.stderr.read_text(errors="replace") if self.stderr.exists() else ""
        result = stress_ng.parse(text)
        duration = finished.wall_s or (time.monotonic() - started)
        asked = stress_ng.requested_cpu_seconds(self.params, duration)
        achieved = finished.user_cpu_s + finished.sys_cpu_s
        return {
            "stress_cpu_s_requested": asked,
            "stress_cpu_s_achieved": achieved,
            "stress_achieved_ratio": achieved / asked if asked else float("nan"),
            "stress_bogo_ops": sum(r.bogo_ops for r in result.stressors),
        }


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
        self.events_timeout_s = events_timeout_s
        self.servers: dict[str, ManagedServerHandle] = {}
        self.datadir_devices: list[str] | None = None
        self.short_names = plan.short_names()

    def _server(self, name: str) -> ManagedServerHandle:
        if name not in self.servers:
            spec = self.plan.scenario.server_specs[name]
            assert isinstance(spec, ManagedServer)
            home = self.run.path / "servers" / name
            self.servers[name] = ManagedServerHandle(name, spec, self.tools.servers[name], home)
        return self.servers[name]

    def execute(self, trials: list[Trial]) -> RunSummary:
        progress = Progress(len(trials), self.emit)
        ok = failed = 0
        interrupted = False
        try:
            for trial in trials:
                self._server(trial.cell.server)
                progress.starting(trial, trial.cell.label(self.short_names))
                record = self._execute_one(trial)
                progress.finished(trial, record.status, self._detail(record))
                ok += record.status == "ok"
                failed += record.status != "ok"
        except KeyboardInterrupt:
            interrupted = True
        finally:
            self._finish(interrupted)
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
            if self.datadir_devices is None:
                self.datadir_devices = self._devices()
            record = TrialExecutor(self, trial, folder).execute()
            store.write_json_atomic(folder / store.TRIAL_JSON, record.to_json(self.short_names))
        self._write_results()
        self._record_servers()
        return record

    def _devices(self) -> list[str] | None:
        device = environment.storage(self.run.path).get("block_device")
        return [device] if device else None

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

    def _finish(self, interrupted: bool) -> None:
        for handle in self.servers.values():
            try:
                handle.close(keep_data=self.keep_data or interrupted)
            except DbrigError as exc:
                log.warning("closing server %s: %s", handle.name, exc)
        proc.stop_all()
        records = self.run.trial_records()
        failed = sum(r["status"] != "ok" for r in records.values())
        status = "interrupted" if interrupted else "complete"
        self.run.update_meta(
            status=status,
            finished_at=dt.datetime.now(dt.UTC).isoformat(),
            trials_saved=len(records),
            trials_failed=failed,
        )


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


def results_table(run: store.RunDir) -> pd.DataFrame:
    return run.results()


def describe_commands(plan: Plan, short_names: dict[str, str]) -> Iterator[str]:
    """For ``--dry-run``: each cell's factors and the exact commands it would run."""
    socket_hint = "<sandbox>/mysqld.sock"
    for cell in plan.cells:
        workload = workload_for(cell.scenario.workload)
        binary = Path(workload.info.binaries[0])
        endpoint = _endpoint_for_display(workload.database, socket_hint)
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


def _endpoint_for_display(database: str, socket_path: str) -> Endpoint:
    return Endpoint(user="root", database=database, socket=socket_path)
