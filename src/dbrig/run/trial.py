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
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from dbrig import proc, sampling, store
from dbrig.errors import DbrigError
from dbrig.host.settings import SystemState
from dbrig.scenario import Cell, Trial
from dbrig.server.handles import ServerHandle, setting_warnings
from dbrig.tools import stress_ng
from dbrig.tools.registry import Outcome, workload_for

OUTPUT_TAIL_LINES = 20  # of the tool's output, kept in trial.json when a trial fails


@dataclass(frozen=True)
class TrialContext:
    """What every trial of a run shares."""

    workload_binary: Path
    stress_ng_binary: Path | None
    devices: list[str] | None
    system: SystemState | None
    events_timeout_s: float = 3600.0


@dataclass
class TrialRecord:
    trial: Trial
    status: str = "ok"
    reason: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    commands: list[list[str]] = field(default_factory=list)
    effective_config: dict[str, Any] = field(default_factory=dict)
    system: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    output_tail: list[str] = field(default_factory=list)
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
            "system": self.system,
            "warnings": self.warnings,
            "output_tail": self.output_tail,
            "commands": [proc.redact(c) for c in self.commands],
        }


class TrialExecutor:
    """Runs one trial against a started server and records everything in ``folder``."""

    def __init__(
        self, context: TrialContext, server: ServerHandle, trial: Trial, folder: Path
    ) -> None:
        self.context = context
        self.server = server
        self.trial = trial
        self.cell: Cell = trial.cell
        self.scenario = trial.cell.scenario
        self.folder = folder
        self.workload = workload_for(self.scenario.workload)
        self.record = TrialRecord(trial, started_at=dt.datetime.now(dt.UTC).isoformat())
        self._workload_pid: int | None = None
        self._stress: StressHandle | None = None

    def execute(self) -> TrialRecord:
        spec = self.scenario.server_specs[self.cell.server]
        try:
            timings = self.server.prepare_trial(
                self.workload, spec, self.context.workload_binary, before_start=self._apply_system
            )
            self.record.timings.update(timings)
            self.record.effective_config = self.server.effective(spec)
            requested = dict(getattr(spec, "config", {}) or {})
            self.record.warnings.extend(setting_warnings(requested, self.record.effective_config))
            self._run_workload()
        except DbrigError as exc:
            self.record.fail(exc.message)
        except (pymysql.err.Error, OSError) as exc:
            # The server went away mid-query, a disk filled: this trial failed, the run goes on.
            self.record.fail(f"{type(exc).__name__}: {exc}")
        finally:
            self.record.timings.update(self.server.finish_trial())
        return self.record

    def _apply_system(self) -> None:
        """The cell's OS settings, after the restore (which fills the page cache) and before
        the server starts."""
        if self.context.system is not None:
            self.record.system = self.context.system.apply(self.scenario.system)

    def _run_workload(self) -> None:
        warmup = self.scenario.warmup
        endpoint = self.server.endpoint(self.workload)
        argv = self.workload.run_argv(endpoint, self.context.workload_binary, warmup)
        self.record.commands.append(argv)
        expected = self.workload.expected_seconds(warmup)
        timeout = expected * 1.5 + 60 if expected else self.context.events_timeout_s
        out = self.folder / "workload.out"
        with self._interference(expected) as stress, self._samplers(warmup) as samplers:
            child = proc.spawn(argv, stdout=out, merge_stderr=True)
            self._workload_pid = child.pid
            finished, abort = self._watch(child, timeout, stress, samplers)
            # The tool may notice first ("lost connection"); the cause is the server's death.
            abort = abort or self.server.died()
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
        if self.record.status != "ok":
            lines = out.read_text(errors="replace").splitlines()
            self.record.output_tail = lines[-OUTPUT_TAIL_LINES:]

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
                    finished = dataclasses.replace(finished, timed_out=True)
                return finished, abort

    def _abort_reason(self, stress: StressHandle | None, samplers: list) -> str | None:
        died = self.server.died()
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
        assert self.context.stress_ng_binary is not None
        # Only a safety net should dbrig die: longer than the workload's own deadline, so
        # an overrunning workload is reported as such, not as "stress-ng exited early".
        limit = int((expected or self.context.events_timeout_s) * 2 + 120)
        handle = StressHandle(params, self.context.stress_ng_binary, self.folder, limit)
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
        timing = sampling.SampleTiming(
            interval=cfg.interval,
            clock=time.monotonic,
            t0=time.monotonic() + warmup,
            warmup_s=warmup,
        )
        roles = self._process_roles
        host = sampling.HostSampler(
            self.folder,
            timing=timing,
            processes=roles,
            devices=cfg.devices or self.context.devices,
        )
        conn = self.server.connect()
        status = sampling.StatusSampler(
            self.folder, timing=timing, fetch=lambda: _global_status(conn)
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
            "server": self.server.pid,
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
            "stress_bogo_ops_per_s": sum(r.bogo_ops_per_s_real or 0 for r in result.stressors),
            "stress_usr_s": sum(r.usr_time_s or 0 for r in result.stressors),
            "stress_sys_s": sum(r.sys_time_s or 0 for r in result.stressors),
        }
