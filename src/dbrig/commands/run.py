"""``dbrig run``: run a scenario (or resume a saved run) and save every trial.

:func:`run_scenario` is the plain function behind the command: tests call it
with keyword arguments; the click command only adapts flags and exit codes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console
from rich.live import Live
from rich.text import Text

from dbrig import scenario, store
from dbrig.commands._common import (
    CI_JSON_HELP,
    load_run_input,
    print_warnings,
    write_ci_json,
)
from dbrig.commands.cache import check_cache_options, open_cache
from dbrig.commands.completion import complete_run_dir, complete_scenario
from dbrig.commands.console import closed_streams, err_console, out_console, print_line
from dbrig.commands.show import print_results
from dbrig.errors import EXIT_CELLS_FAILED, ConfigError, Interrupted
from dbrig.report import ci_json, run_warnings, write_report
from dbrig.run import dryrun, estimate, inputs, runner
from dbrig.run import plan as run_plan
from dbrig.run.progress import TERMINAL_EVERY_S, LiveLine
from dbrig.scenario import shipped
from dbrig.server.cache import ENV_DIR, ENV_MAX
from dbrig.server.workspace import clone_workspace
from dbrig.util.signals import stop_on_signals

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOutcome:
    """What ``dbrig run`` did: the run directory and how the whole run's trials ended (a
    resumed run's too, not only the trials this invocation ran)."""

    run_dir: Path
    total: int
    ok: int
    failed: int
    report: Path | None


def run_scenario(
    scenario_file: Path | str | None = None,
    *,
    out: Path | None = None,
    resume: Path | None = None,
    retry_failed: bool = False,
    keep_data: bool = False,
    report: bool = True,
    seed: int | None = None,
    shard: str | None = None,
    emit: Callable[[str], None] | None = None,
    snapshot_cache: Path | None = None,
    snapshot_cache_max: str | None = None,
    overrides: tuple[str, ...] = (),
    label: str | None = None,
) -> RunOutcome:
    """Run every pending trial of a scenario file or a saved run; raises DbrigError.

    ``shard`` (``"I/N"``) runs only shard I of N of the plan's cells (see
    :mod:`dbrig.scenario.shard`); a resumed shard run keeps its saved shard. ``overrides``
    are ``--set KEY=VALUE`` texts (:mod:`dbrig.scenario.overrides`). ``label`` names the
    run in ``dbrig publish``'s site (run.json ``environment.label``)."""
    plan, run_dir = _plan_and_run_dir(scenario_file, resume, retry_failed, seed, shard, overrides)
    stop_on_signals()  # Ctrl-C, SIGTERM and SIGHUP: stop everything started, keep the rest
    ours: store.RunDir | None = None  # the run directory, once this invocation runs it
    try:
        with contextlib.ExitStack() as held:
            # The lock first: a refused second --resume must not touch the run at all.
            if run_dir is not None:
                held.enter_context(run_dir.lock())
            say = emit or _emit
            resolved = plan_run(plan, run_dir, out, keep_data=keep_data, retry_failed=retry_failed)
            cache = open_cache(snapshot_cache, snapshot_cache_max, say)
            if run_dir is None:
                run_dir = ours = runner.start_run(resolved, dt.datetime.now().astimezone())
                held.enter_context(run_dir.lock())
            else:
                run_dir.update_saved(status="running")
                ours = run_dir
            if label:
                _record_label(run_dir, label)
            _log_to(run_dir.path / "dbrig.log")
            trials = list(resolved.trials)
            say(f"dbrig: {len(trials)} trials -> {run_dir.path}")
            data_root = held.enter_context(clone_workspace(run_dir.path, resolved.image_bytes))
            result = runner.Runner(
                resolved,
                run_dir,
                keep_data=keep_data,
                emit=say,
                snapshot_cache=cache,
                data_root=data_root,
                live_line=_terminal_live_line() if emit is None else None,
            ).execute(trials)
    except Interrupted:
        assert run_dir is not None
        if report:
            _report_after_run(run_dir)
        raise
    except KeyboardInterrupt as stopped:  # outside the trials: run.json must not stay running
        if ours is None:
            raise
        raise runner.stopped_before_trials(ours, plan, stopped) from None
    print_results(run_dir)
    print_line(out_console(), f"saved: {result.run_dir}")
    page = _report_after_run(run_dir) if report else None
    saved = run_dir.saved()
    failed = saved.trials_failed or 0
    return RunOutcome(
        result.run_dir, len(saved.trials), (saved.trials_saved or 0) - failed, failed, page
    )


def _record_label(run_dir: store.RunDir, label: str) -> None:
    saved = run_dir.saved()
    run_dir.update_saved(environment={**saved.environment, "label": label})


def plan_run(
    plan: scenario.Plan,
    run_dir: store.RunDir | None,
    out: Path | None,
    *,
    keep_data: bool = False,
    retry_failed: bool = False,
    strict: bool = True,
) -> run_plan.RunPlan:
    """The resolved plan of this invocation, every check made (raises DbrigError before a
    run directory exists): a new run's every trial, a resumed one's that are left.
    ``strict=False`` is ``--dry-run``'s (a tool not installed here is named)."""
    trials = None
    if run_dir is not None:
        out = run_dir.path.parent
        trials = runner.pending_trials(plan, run_dir, retry_failed=retry_failed)
    resolved = run_plan.build(plan, out, keep_data=keep_data, strict=strict, trials=trials)
    if run_dir is not None:  # a script's files: the copies the run kept, unchanged
        inputs.check_copies((c.cell for c in resolved.cells.values()), run_dir.path)
    return resolved


def planned(
    scenario_file: Path | str | None = None,
    *,
    out: Path | None = None,
    resume: Path | None = None,
    retry_failed: bool = False,
    keep_data: bool = False,
    seed: int | None = None,
    shard: str | None = None,
    overrides: tuple[str, ...] = (),
    strict: bool = True,
) -> run_plan.RunPlan:
    """What ``dbrig run`` (``strict``) or ``--dry-run`` would do, up to (not including)
    creating the run directory: the scenario read, every check made, the plan resolved."""
    plan, run_dir = _plan_and_run_dir(scenario_file, resume, retry_failed, seed, shard, overrides)
    return plan_run(
        plan, run_dir, out, keep_data=keep_data, retry_failed=retry_failed, strict=strict
    )


def _plan_and_run_dir(
    scenario_file: Path | str | None,
    resume: Path | None,
    retry_failed: bool,
    seed: int | None,
    shard: str | None = None,
    overrides: tuple[str, ...] = (),
) -> tuple[scenario.Plan, store.RunDir | None]:
    if (scenario_file is None) == (resume is None):
        raise ConfigError("run: give a SCENARIO_FILE or --resume RUN_DIR (one of them)")
    if retry_failed and resume is None:
        raise ConfigError("--retry-failed: only with --resume RUN_DIR")
    if resume is not None:
        if seed is not None:
            raise ConfigError("--seed: a resumed run keeps its saved seed; drop --seed")
        if shard is not None:
            raise ConfigError("--shard: a resumed run keeps its saved shard; drop --shard")
        if overrides:
            raise ConfigError("--set: a resumed run keeps its saved scenario; drop --set")
        run_dir, plan = resume_plan(resume)
        return plan, run_dir
    assert scenario_file is not None
    index_count = scenario.parse_shard(shard) if shard is not None else None
    changes = [scenario.parse_override(text) for text in overrides]
    plan = scenario.load(shipped.resolve(scenario_file).path, seed=seed, overrides=changes)
    if index_count is None:
        return plan, None
    if seed is None and plan.scenario.seed is None:
        raise ConfigError(
            f"--shard {shard}: give every shard the same --seed N (or seed: in "
            f"{scenario_file}), so that they share one trial order and can be merged"
        )
    return scenario.shard_plan(plan, *index_count), None


def _say_which_scenario(scenario_file: str | None, resume: Path | None) -> None:
    """A shipped scenario, or a file that hides one of the same name, is named on stderr."""
    if scenario_file is None or resume is not None:  # _plan_and_run_dir refuses both
        return
    source = shipped.resolve(scenario_file)
    if source.shipped:
        print_line(
            err_console(),
            f"dbrig: running the shipped scenario {source.path.stem} "
            f"({source.path}; no file {scenario_file} here)",
        )
    elif "/" not in scenario_file and shipped.shipped_path(scenario_file) is not None:
        print_line(
            err_console(),
            f"dbrig: running the file {scenario_file} (not the shipped scenario of that name)",
        )


def _report_after_run(run_dir: store.RunDir) -> Path | None:
    """The report and its warnings; a report that fails does not fail the run."""
    try:
        page = write_report(run_dir.path)
        warnings = run_warnings(run_dir.path)
    except Exception as exc:  # the trials are saved: say so and how to retry
        logging.getLogger(__name__).exception("writing the report failed")
        print_line(
            err_console(),
            f"dbrig: warning: the report could not be written ({exc}); "
            f"retry with: dbrig report {run_dir.path}",
        )
        return None
    print_warnings(warnings)
    for warning in warnings:  # dbrig.log keeps every warning the terminal showed
        logging.getLogger(__name__).info("warning: %s", warning.message)
    print_line(out_console(), f"report: {page}")
    return page


def resume_plan(resume_dir: Path) -> tuple[store.RunDir, scenario.Plan]:
    """The saved scenario, shuffle seed and shard: a resumed run is the run it was, whatever
    the scenario file says now."""
    run_dir = store.RunDir.open(resume_dir)
    saved_run = run_dir.saved()
    if saved_run.raw_scenario is None:
        raise ConfigError(f"--resume {resume_dir}: run.json has no raw_scenario to resume from")
    source = str(resume_dir / "scenario.yaml")
    cores = (saved_run.environment.get("host") or {}).get("cpu_count")
    # Paths in it (a Lua script) are relative to the scenario file the run started from.
    first = Path(saved_run.source).parent if saved_run.source else None
    plan = scenario.plan_from_dict(
        dict(saved_run.raw_scenario),
        source=source,
        seed=saved_run.seed,
        cpu_count=cores,
        base_dir=first if first is not None and first.is_dir() else None,
    )
    if saved_run.shard is not None:
        shard = saved_run.shard
        plan = plan.sharded(shard.index, shard.count, shard.cells)
    saved = {c.cell: dict(c.factors) for c in saved_run.cells}
    now = {c.id: c.factor_dict for c in plan.cells}
    if json.loads(json.dumps(now)) != saved:
        raise ConfigError(
            f"--resume {resume_dir}: the saved scenario no longer expands to the saved cells "
            "(was it written by another dbrig version?); start a new run instead"
        )
    return run_dir, plan


def _emit(line: str) -> None:
    print_line(err_console(), line)
    if "stderr" in closed_streams():
        log.info("%s", line)  # nobody reads stderr any more: dbrig.log keeps the progress


class _TerminalLine:
    """A running trial's live line on a terminal: redrawn in place, gone when it ends."""

    every_s = TERMINAL_EVERY_S

    def __init__(self, console: Console) -> None:
        # No auto-refresh thread, no stdout/stderr redirection: the trial's watch loop
        # redraws it, and nothing global changes while it is up.
        self.live = Live(
            console=console,
            transient=True,
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.live.start()

    def show(self, text: str) -> None:
        self.live.update(Text(text, no_wrap=True, overflow="ellipsis"), refresh=True)

    def close(self) -> None:
        self.live.stop()


def _terminal_live_line() -> Callable[[], LiveLine] | None:
    """A live line redrawn in place when the progress lines go to a terminal; None (plain
    lines, at most one every PLAIN_EVERY_S) for logs and pipes."""
    console = err_console()
    if not console.is_terminal or console.is_dumb_terminal:
        return None
    return lambda: _TerminalLine(console)


def _log_to(path: Path) -> None:
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(min(root.level or logging.INFO, logging.INFO))
    for h in root.handlers:
        if h is not handler and isinstance(h, logging.StreamHandler):
            h.setLevel(max(h.level, logging.WARNING))
    for name, why in closed_streams().items():  # closed before there was a log to say so
        log.info("%s is closed (%s): dbrig goes on without it", name, why)


def print_dry_run(resolved: run_plan.RunPlan, snapshot_cache: Path | None = None) -> None:
    """The plan: the cells, the exact commands each would run, the seed, the trial order
    (of a resumed run: what is left), and an estimate of their wall time from the runs
    already saved where this one goes. With ``snapshot_cache``, which data sets the run
    would take from it."""
    cache = dryrun.CacheView(snapshot_cache, resolved.tools.servers) if snapshot_cache else None
    for line in dryrun.describe(resolved, cache):
        click.echo(line)
    for line in estimate.describe(resolved.plan, resolved.out, resolved.trials):
        click.echo(line)
    click.echo(dryrun.describe_disk(resolved))
    if (memory := dryrun.describe_memory(resolved)) is not None:
        click.echo(memory)


@click.command("run")
@click.argument(
    "scenario_file", required=False, type=click.Path(), shell_complete=complete_scenario
)
@click.option("--out", type=click.Path(path_type=Path), help="Parent folder for the run directory.")
@click.option("--dry-run", is_flag=True, help="Print the cells and exact commands; run nothing.")
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(path_type=Path),
    shell_complete=complete_run_dir,
    help="Continue a saved run: only its missing trials run.",
)
@click.option("--retry-failed", is_flag=True, help="With --resume, also rerun failed trials.")
@click.option("--keep-data", is_flag=True, help="Keep datadirs and snapshots after the run.")
@click.option(
    "--report/--no-report", default=True, show_default=True, help="Write report.html at the end."
)
@click.option(
    "--seed",
    type=click.IntRange(0, 2**31 - 1),
    help="Shuffle seed, over the scenario's own: reruns the order a --dry-run printed.",
)
@click.option(
    "--shard",
    metavar="I/N",
    help="Run only shard I of N (1-based): whole cells, never a cell's repetitions split "
    "over machines (that would mix machine differences into its spread), and cells that "
    "differ only in server kept together; the unsharded seeded order minus other shards' "
    "cells. Needs the same --seed on every shard. Join the pieces with dbrig merge.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set one scenario key for this run (repeatable), KEY a dotted path as in the "
    "matrix, VALUE read as YAML: --set server.config.innodb_buffer_pool_size=1G. Saved with "
    "the run.",
)
@click.option(
    "--snapshot-cache",
    type=click.Path(path_type=Path),
    envvar=ENV_DIR,
    show_envvar=True,
    help="Keep prepared snapshots here across runs: a later run with the same key skips prepare.",
)
@click.option(
    "--snapshot-cache-max",
    envvar=ENV_MAX,
    show_envvar=True,
    help="The snapshot cache's maximum size (default 50G); least recently used entries go first.",
)
@click.option(
    "--label",
    metavar="TEXT",
    help="Name this run in dbrig publish's site (a version, a build); saved in run.json. "
    "Inside a git checkout the commit and branch are saved anyway.",
)
@click.option("--ci-json", "ci_targets", multiple=True, metavar="FORMAT=PATH", help=CI_JSON_HELP)
def run_command(
    scenario_file: str | None,
    out: Path | None,
    dry_run: bool,
    resume_dir: Path | None,
    retry_failed: bool,
    keep_data: bool,
    report: bool,
    seed: int | None,
    shard: str | None,
    snapshot_cache: Path | None,
    snapshot_cache_max: str | None,
    overrides: tuple[str, ...],
    label: str | None = None,
    ci_targets: tuple[str, ...] = (),
) -> None:
    """Run every cell of SCENARIO_FILE (or a shipped scenario by name) and save the results.

    SCENARIO_FILE is a path; when no file of that name exists, the shipped scenario of
    that name runs (see: dbrig examples).
    """
    _say_which_scenario(scenario_file, resume_dir)
    targets = ci_json.parse_targets(ci_targets)
    max_source = click.get_current_context().get_parameter_source("snapshot_cache_max")
    check_cache_options(
        snapshot_cache,
        snapshot_cache_max,
        max_given=max_source == click.core.ParameterSource.COMMANDLINE,
        max_name=ENV_MAX
        if max_source == click.core.ParameterSource.ENVIRONMENT
        else "--snapshot-cache-max",
    )
    if dry_run:
        resolved = planned(
            scenario_file,
            out=out,
            resume=resume_dir,
            retry_failed=retry_failed,
            keep_data=keep_data,
            seed=seed,
            shard=shard,
            overrides=overrides,
            strict=False,
        )
        print_dry_run(resolved, snapshot_cache)
        return
    outcome = run_scenario(
        scenario_file,
        out=out,
        resume=resume_dir,
        retry_failed=retry_failed,
        keep_data=keep_data,
        report=report,
        seed=seed,
        shard=shard,
        snapshot_cache=snapshot_cache,
        snapshot_cache_max=snapshot_cache_max,
        overrides=overrides,
        label=label,
    )
    if targets:
        write_ci_json(targets, load_run_input(outcome.run_dir))
    log.info("run ended: %d of %d trials ok, %d failed", outcome.ok, outcome.total, outcome.failed)
    if outcome.failed:
        line = (
            f"dbrig: {outcome.failed} of {outcome.total} trials failed "
            f"(rerun them with: dbrig run --resume {outcome.run_dir} --retry-failed)"
        )
        print_line(err_console(), line)
        log.info("%s (exit %d)", line, EXIT_CELLS_FAILED)
        raise SystemExit(EXIT_CELLS_FAILED)
