"""The run loop: for every trial, restore -> start -> interfere -> sample -> run -> stop -> save.

The run side owns every lifecycle: this module the order of the trials, the
servers' handles, saving and the clean-up on every way out; ``trial.py`` one
trial (samplers, the workload process), ``datasets.py`` preparing and restoring
data, ``interference.py`` stress-ng and its kind. Tools only build commands and
parse output; reports only read what the run saved.

A trial that fails (the tool exits non-zero or prints FATAL, the server or
stress-ng dies, a sampler breaks, the run overruns its time limit) is saved as
failed with a one-line reason and the run goes on. Ctrl-C, SIGTERM and SIGHUP stop
everything that was started, keep every finished trial, and leave the run
resumable with ``dbrig run --resume``.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from dbrig import proc, store
from dbrig.errors import DbrigError, Interrupted
from dbrig.host import probe
from dbrig.host import settings as host_settings
from dbrig.metrics import progress_line
from dbrig.remote.server import RemoteServerHandle, agent_target
from dbrig.remote.ssh import SshHost
from dbrig.run import inputs, sequential_run
from dbrig.run.commands import DEFAULT_EVENTS_TIMEOUT_S
from dbrig.run.datasets import NO_SERVER, AnyHandle
from dbrig.run.plan import RunPlan
from dbrig.run.preflight import datadir_device
from dbrig.run.progress import LiveLine, Progress
from dbrig.run.remote import RemoteClients
from dbrig.run.trial import Follow, TrialContext, TrialExecutor, TrialRecord
from dbrig.run.workdir import WorkDirHandle, remove_abandoned
from dbrig.scenario import ExternalServer, ManagedServer, Plan, Trial
from dbrig.server.cache import SnapshotCache
from dbrig.server.handles import ExternalServerHandle, ManagedServerHandle
from dbrig.util.signals import interrupt_cause

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSummary:
    run_dir: Path
    total: int
    ok: int
    failed: int
    skipped: int
    interrupted: bool


class Runner:
    """Executes a resolved plan (``plan.py``): it decides nothing from the scenario again."""

    def __init__(
        self,
        resolved: RunPlan,
        run: store.RunDir,
        *,
        keep_data: bool = False,
        emit: Callable[[str], None] = print,
        snapshot_cache: SnapshotCache | None = None,
        data_root: Path | None = None,
        events_timeout_s: float = DEFAULT_EVENTS_TIMEOUT_S,
        live_line: Callable[[], LiveLine] | None = None,
    ) -> None:
        self.resolved = resolved
        self.plan = plan = resolved.plan
        self.live_line = live_line  # a terminal's live line; None: plain lines through emit
        self.run = run
        self.tools = tools = resolved.tools
        self.keep_data = keep_data
        self.snapshot_cache = snapshot_cache
        self.data_root = data_root  # a clone workspace's servers/ folder, if any
        self.emit = emit
        self.servers: dict[str, AnyHandle] = {}
        self._servers_saved = set(run.saved().servers)
        self.results: store.ResultsLog | None = None
        self.short_names = plan.short_names()
        device = datadir_device(resolved.data_location(run.path))
        # A clone workspace's datadirs are on its loop device: the disk sampler watches
        # that one (the loop's I/O is also the backing disk's: both would count it twice).
        sampled = datadir_device(data_root) if data_root is not None else device
        for line in host_settings.restore_orphaned():  # a SIGKILLed dbrig's, before ours
            self.emit(f"dbrig: warning: {line}")
        uses_system = any(c.scenario.system.active for c in plan.cells)
        self.context = TrialContext(
            workload_binary=tools.workload,
            interference_binaries=tools.interference,
            devices=[sampled.name] if sampled else None,
            system=host_settings.SystemState(device, memo=host_settings.run_memo())
            if uses_system
            else None,
            events_timeout_s=events_timeout_s,
            remote=RemoteClients(plan.scenario, tools.remote_workload)
            if tools.uses_other_hosts
            else None,
        )

    def _server_of(self, trial: Trial) -> AnyHandle:
        """The handle the plan chose for the trial's cell: its server, or a work folder."""
        name = self.resolved.of(trial).server
        if name is not None:
            return self._server(name)
        if NO_SERVER not in self.servers:
            self.servers[NO_SERVER] = WorkDirHandle(NO_SERVER, self.run.path.parent)
        return self.servers[NO_SERVER]

    def _server(self, name: str) -> AnyHandle:
        if name not in self.servers:
            spec = self.plan.scenario.server_specs[name]
            home = self.run.path / "servers" / name
            if isinstance(spec, ExternalServer):
                self.servers[name] = ExternalServerHandle(name, spec, home)
            elif target := agent_target(
                name, spec, self.run.path, self.plan.scenario.hosts, self.run.saved().run_id
            ):
                self.servers[name] = RemoteServerHandle(
                    name,
                    spec,
                    home,
                    prefix=target.prefix,
                    address=target.address,
                    remote_home=target.remote_home,
                    where=target.where,
                    python=target.python,
                    host=SshHost(target.ssh) if target.ssh is not None else None,
                )
            else:
                binary = self.tools.servers[name]
                cache, data_home = self.snapshot_cache, None
                if self.data_root is not None:
                    data_home = self.data_root / name
                self.servers[name] = ManagedServerHandle(name, spec, binary, home, cache, data_home)
        return self.servers[name]

    def execute(self, trials: list[Trial]) -> RunSummary:
        trials = inputs.at_copies(trials, self.run.path)  # a script runs from the run's copy
        progress = Progress(len(trials), self.emit, live_line=self.live_line)
        ok = failed = 0
        ended = "complete"
        looks = (
            sequential_run.Looks(self.plan, self.run, self.emit)
            if self.plan.scenario.sequential
            else None
        )
        try:
            self.results = store.ResultsLog.open(self.run)
            for trial in trials:
                progress.starting(trial, trial.cell.label(self.short_names))
                follow = functools.partial(progress.following, trial)
                record = self._execute_one(trial, follow, progress.note)
                progress.finished(trial, record.status, self._detail(record))
                ok += record.status == "ok"
                failed += record.status != "ok"
                if looks is not None and (why := looks.after(trial, self.results.results)):
                    self.emit(f"dbrig: stopped after round {trial.repetition}: {why}")
                    break
        except KeyboardInterrupt as stopped:
            ended = "interrupted"
            log.info("stopping: %s", interrupt_cause(stopped))
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
            raise interrupted_run(self.run, self.plan)
        return summary

    def _execute_one(
        self,
        trial: Trial,
        follow: Follow | None = None,
        say: Callable[[str], None] = lambda line: None,
    ) -> TrialRecord:
        with self.run.writing_trial(trial.id) as folder:
            server = self._server_of(trial)
            record = TrialExecutor(self.context, server, trial, folder, follow, say).execute()
            result = record.to_result(self.short_names)
            self.run.write_trial(folder, result)
        assert self.results is not None
        self.results.add(result)
        self._record_servers()
        return record

    def _detail(self, record: TrialRecord) -> str:
        if record.status != "ok":
            return record.reason or "failed"
        return progress_line(record.metrics) or "done"

    def _write_results(self) -> None:
        """The final results.csv and results.parquet, sorted, from every saved trial."""
        if self.results is None:  # stopped before the saved trials were even read
            self.results = store.ResultsLog(self.run)
        self.results.finish()

    def _record_servers(self) -> None:
        """Each server's version and variables into run.json, once, when it first started."""
        started = {n: h.info for n, h in self.servers.items() if h.info}
        new = {n: info for n, info in started.items() if n not in self._servers_saved}
        if not new:
            return
        saved = self.run.saved()
        self.run.write_saved(saved.replace(servers={**saved.servers, **new}))
        self._servers_saved.update(new)

    def _finish(self, ended: str) -> None:
        """Stop and clean up everything, each step whatever happens to the others: a second
        Ctrl-C during a slow server shutdown must not skip the rest."""
        keep = self.keep_data or ended != "complete"
        if ended == "complete":
            # A resumed run may not have touched every managed server: clean them all up.
            for name in self.resolved.servers:
                spec = self.plan.scenario.server_specs[name]
                if isinstance(spec, ManagedServer) and name in self.tools.servers:
                    self._server(name)
        steps = [
            *(lambda h=h: h.close(keep_data=keep) for h in self.servers.values()),
            *([self.context.remote.close] if self.context.remote is not None else []),
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
        results = self.results.results if self.results is not None else self.run.trials()
        self.run.update_saved(
            status=ended,
            finished_at=dt.datetime.now(dt.UTC).isoformat(),
            trials_saved=len(results),
            trials_failed=sum(not r.ok for r in results.values()),
        )
        if pending_interrupt is not None and ended == "complete":
            raise pending_interrupt


def interrupted_run(run: store.RunDir, plan: Plan) -> Interrupted:
    """The error an interrupted run ends with, counting the whole run's trials (a resumed
    run's earlier ones too) in run.json's order, from disk: the signal may land after a
    trial was saved, before it was counted."""
    order = run.saved().trials or tuple(t.id for t in plan.trials)
    saved = set(run.trial_ids())
    done = sum(trial_id in saved for trial_id in order)
    return Interrupted(
        f"interrupted: {done} of {len(order)} trials saved in {run.path}",
        hint=f"continue with: dbrig run --resume {run.path}",
    )


def stopped_before_trials(run: store.RunDir, plan: Plan, stopped: BaseException) -> Interrupted:
    """A stop signal after run.json said ``running`` but outside the trials (before the
    first, or while a complete run cleaned up): run.json must not stay ``running``."""
    log.info("stopping: %s", interrupt_cause(stopped))
    if run.saved().status == "running":  # not a run that ended complete just before
        run.update_saved(status="interrupted", finished_at=dt.datetime.now(dt.UTC).isoformat())
    return interrupted_run(run, plan)


def start_run(resolved: RunPlan, now: dt.datetime) -> store.RunDir:
    """Create the run directory and its run.json before the first trial (the plan built
    and every check passed: nothing is refused after this)."""
    plan = resolved.plan
    remove_abandoned(resolved.out)  # work folders of killed runs, whatever this run's workload
    run = store.RunDir.create(resolved.out, plan.scenario.name, now)
    (run.path / "scenario.yaml").write_text(yaml.safe_dump(plan.raw, sort_keys=False))
    saved = saved_run(resolved, run.path, now)
    kept = inputs.keep_inputs((c.cell for c in resolved.cells.values()), run.path)
    if kept:
        saved = saved.replace(environment={**saved.environment, "inputs": kept})
    run.write_saved(saved)
    return run


def saved_run(resolved: RunPlan, path: Path, now: dt.datetime) -> store.SavedRun:
    """run.json of a run about to start: the plan, the order and the environment."""
    plan, tools = resolved.plan, resolved.tools
    return store.SavedRun(
        status="running",
        created_at=now.isoformat(),
        run_id=secrets.token_hex(4),
        source=plan.source,
        digest=plan.digest,
        seed=plan.seed,
        scenario=plan.scenario.model_dump(mode="json", by_alias=True),
        raw_scenario=plan.raw,
        factors=tuple(plan.factor_names),
        factor_labels=plan.short_names(),
        cells=tuple(store.CellPlan(c.id, c.server, c.factor_dict) for c in plan.cells),
        trials=tuple(t.id for t in plan.trials),
        environment={
            **resolved.server_notes(),
            "host": probe.host(),
            "storage": probe.storage(path),
            "tools": tools.versions(),
            **({"git": git} if (git := probe.git_checkout(Path.cwd())) else {}),
        },
        shard=_shard_record(plan),
    )


def _shard_record(plan: Plan) -> store.ShardRecord | None:
    if plan.shard is None:
        return None
    return store.ShardRecord(plan.shard.index, plan.shard.count, tuple(c.id for c in plan.cells))


def pending_trials(plan: Plan, run: store.RunDir, *, retry_failed: bool) -> list[Trial]:
    """The trials of the saved order that have no saved result (or failed, if retrying)."""
    results = run.trials()
    order = run.saved().trials or [t.id for t in plan.trials]
    by_id = {t.id: t for t in plan.trials}
    last = sequential_run.stopped_round(run)  # a sequential run that stopped: no more rounds
    pending = []
    for trial_id in order:
        if last is not None and by_id[trial_id].repetition > last:
            continue
        result = results.get(trial_id)
        if result is None or (retry_failed and not result.ok):
            pending.append(by_id[trial_id])
    return pending
