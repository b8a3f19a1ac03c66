"""Command line: turns flags into function calls and results into output and exit codes.

The one error boundary is :func:`main`: a :class:`DbrigError` prints one line
(``dbrig: error: ...``) and exits with its code; anything else is a bug and
shows its traceback with ``--debug``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from dbrig import __version__, doctor, proc, runner, scenario, store, summary
from dbrig.commands import compare_command, history_command
from dbrig.errors import (
    EXIT_BAD_INPUT,
    EXIT_BUG,
    EXIT_CELLS_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    ConfigError,
    DbrigError,
    Interrupted,
)
from dbrig.report import RunWarning, run_warnings, write_report

# Off a terminal (CI logs, pipes) rich would wrap tables at 80 columns.
_WIDTH = None if sys.stdout.isatty() else 200
err_console = Console(stderr=True, highlight=False, width=_WIDTH)
out_console = Console(highlight=False, width=_WIDTH)


def _line(console: Console, text: str) -> None:
    """One line as is: no rich markup, never wrapped, so paths in it stay whole."""
    console.print(text, markup=False, soft_wrap=True)


def _sigterm_as_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dbrig")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Benchmark MySQL and MariaDB from one YAML scenario."""
    ctx.obj = {"debug": debug}
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


@cli.command()
@click.argument("scenario_file", required=False, type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), help="Parent folder for the run directory.")
@click.option("--dry-run", is_flag=True, help="Print the cells and exact commands; run nothing.")
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(path_type=Path),
    help="Continue a saved run: only its missing trials run.",
)
@click.option("--retry-failed", is_flag=True, help="With --resume, also rerun failed trials.")
@click.option("--keep-data", is_flag=True, help="Keep datadirs and snapshots after the run.")
@click.option(
    "--report/--no-report", default=True, show_default=True, help="Write report.html at the end."
)
def run(
    scenario_file: Path | None,
    out: Path | None,
    dry_run: bool,
    resume_dir: Path | None,
    retry_failed: bool,
    keep_data: bool,
    report: bool,
) -> None:
    """Run every cell of SCENARIO_FILE and save the results."""
    if (scenario_file is None) == (resume_dir is None):
        raise ConfigError("run: give a SCENARIO_FILE or --resume RUN_DIR (one of them)")
    if retry_failed and resume_dir is None:
        raise ConfigError("--retry-failed: only with --resume RUN_DIR")
    if resume_dir is not None:
        run_dir, plan = _resume_plan(resume_dir)
    else:
        assert scenario_file is not None
        plan = scenario.load(scenario_file)
        run_dir = None
    if dry_run:
        _print_dry_run(plan)
        return
    tools = runner.preflight(plan, out if run_dir is None else run_dir.path)
    if run_dir is None:
        run_dir = runner.start_run(plan, out, tools, dt.datetime.now().astimezone())
    else:
        run_dir.update_meta(status="running")
    _log_to(run_dir.path / "dbrig.log")
    trials = runner.pending_trials(plan, run_dir, retry_failed=retry_failed)
    _line(err_console, f"dbrig: {len(trials)} trials -> {run_dir.path}")
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        with run_dir.lock():
            result = runner.Runner(plan, run_dir, tools, keep_data=keep_data, emit=_emit).execute(
                trials
            )
    except Interrupted:
        if report:
            _report_after_run(run_dir)
        raise
    _print_results(run_dir)
    _line(out_console, f"saved: {result.run_dir}")
    if report:
        _report_after_run(run_dir)
    if result.failed:
        err_console.print(f"dbrig: {result.failed} of {result.total} trials failed")
        raise SystemExit(EXIT_CELLS_FAILED)


def _report_after_run(run_dir: store.RunDir) -> None:
    """The report and its warnings; a report that fails does not fail the run."""
    try:
        page = write_report(run_dir.path)
        warnings = run_warnings(run_dir.path)
    except Exception as exc:  # the trials are saved: say so and how to retry
        logging.getLogger(__name__).exception("writing the report failed")
        _line(
            err_console,
            f"dbrig: warning: the report could not be written ({exc}); "
            f"retry with: dbrig report {run_dir.path}",
        )
        return
    _print_warnings(warnings)
    _line(out_console, f"report: {page}")


def _print_warnings(warnings: list[RunWarning]) -> None:
    for warning in warnings:
        _line(err_console, f"warning: {warning.message}")


def _resume_plan(resume_dir: Path) -> tuple[store.RunDir, scenario.Plan]:
    """The saved scenario and shuffle seed: a resumed run is the run it was, whatever the
    scenario file says now."""
    run_dir = store.RunDir.open(resume_dir)
    meta = run_dir.meta()
    source = str(resume_dir / "scenario.yaml")
    cores = ((meta.get("environment") or {}).get("host") or {}).get("cpu_count")
    plan = scenario.plan_from_dict(
        meta["raw_scenario"], source=source, seed=meta.get("seed"), cpu_count=cores
    )
    saved = {c["cell"]: c["factors"] for c in meta.get("cells", [])}
    now = {c.id: c.factor_dict for c in plan.cells}
    if json.loads(json.dumps(now)) != saved:
        raise ConfigError(
            f"--resume {resume_dir}: the saved scenario no longer expands to the saved cells "
            "(was it written by another dbrig version?); start a new run instead"
        )
    return run_dir, plan


def _emit(line: str) -> None:
    _line(err_console, line)


def _log_to(path: Path) -> None:
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(min(root.level or logging.INFO, logging.INFO))
    for h in root.handlers:
        if h is not handler and isinstance(h, logging.StreamHandler):
            h.setLevel(max(h.level, logging.WARNING))


def _print_dry_run(plan: scenario.Plan) -> None:
    names = plan.short_names()
    trials = plan.trials
    out_console.print(
        f"scenario {plan.scenario.name}: {len(plan.cells)} cells x {plan.scenario.repeat} "
        f"repetitions = {len(trials)} trials, order {plan.scenario.order} (seed {plan.seed})"
    )
    for line in runner.describe_commands(plan, names):
        click.echo(line)
    click.echo("order: " + " ".join(t.id for t in trials))


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "markdown"]),
    default="table",
    show_default=True,
    help="markdown: a table to paste into a blog post, an issue or a doc page.",
)
@click.option("--rows", help="Pivot: the factor down the side (e.g. server).")
@click.option("--columns", help="Pivot: the factor across the top (e.g. load_type).")
@click.option("--metric", help="Pivot: the metric in each cell (e.g. avg_s, tps).")
def show(
    run_dir: Path, fmt: str, rows: str | None, columns: str | None, metric: str | None
) -> None:
    """Print the result table of a saved run, or one metric as a factor x factor pivot."""
    run = store.RunDir.open(run_dir)
    if rows is None and columns is None and metric is None:
        _print_results(run, fmt)
        return
    if not (rows and columns and metric):
        raise ConfigError("show: a pivot needs --rows, --columns and --metric together")
    meta = run.meta()
    labels = meta.get("factor_labels", {})
    headings, body = summary.pivot(run.results(), rows, columns, metric, labels)
    if fmt == "markdown":
        click.echo(summary.markdown(headings, body))
        return
    table = Table(title=f"{meta['scenario']['name']}: {metric}, mean ±95% CI (CV)")
    for heading in headings:
        table.add_column(heading, overflow="fold")
    for row in body:
        table.add_row(*row)
    out_console.print(table)


def _print_results(run_dir: store.RunDir, fmt: str = "table") -> None:
    meta = run_dir.meta()
    results = run_dir.results()
    table = summary.cell_table(results, meta.get("factors", []), meta.get("factor_labels", {}))
    pct = meta.get("scenario", {}).get("workload", {}).get("sysbench", {}) or {}
    headings, rows = summary.render(table, pct.get("percentile"))
    if not rows:
        out_console.print("no trials saved yet")
        return
    title = f"{meta['scenario']['name']}: mean ±95% CI (CV) over repetitions"
    if fmt == "markdown":
        click.echo(summary.markdown(headings, rows))
        return
    t = Table(title=title)
    for h in headings:
        t.add_column(h, overflow="fold")
    for row in rows:
        t.add_row(*row)
    out_console.print(t)


@cli.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--cell-figures",
    type=click.IntRange(0, 1000),
    default=8,
    show_default=True,
    help="Per-cell time-series figures to draw (the first N cells).",
)
def report_cmd(run_dir: Path, cell_figures: int) -> None:
    """Write report.html, plots/*.png and results_by_cell.csv for a saved run."""
    page = write_report(store.RunDir.open(run_dir).path, max_cell_figures=cell_figures)
    _print_warnings(run_warnings(run_dir))
    _line(out_console, f"report: {page}")


@cli.command("doctor")
@click.option(
    "--workdir",
    type=click.Path(path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="Where runs will be written (checked for filesystem and reflink support).",
)
def doctor_cmd(workdir: Path) -> None:
    """Which servers and tools are found, their versions, and what this host supports."""
    t = Table(title="dbrig doctor", show_header=True)
    t.add_column("check")
    t.add_column("result", overflow="fold")
    problems = 0
    for check in doctor.checks(workdir):
        t.add_row(check.name, ("" if check.ok else "[red]MISSING[/red] ") + check.detail)
        problems += not check.ok and check.required
    out_console.print(t)
    if problems:
        raise SystemExit(2)


cli.add_command(compare_command)
cli.add_command(history_command)


def main(argv: list[str] | None = None) -> None:
    """The one error boundary: every way out stops every child first, then sets the code."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        code = _run_cli(argv, debug)
    finally:
        proc.stop_all()
    sys.exit(code)


def _run_cli(argv: list[str] | None, debug: bool) -> int:
    try:
        cli.main(args=argv, prog_name="dbrig", standalone_mode=False)
    except DbrigError as exc:
        if debug:
            traceback.print_exc()
        _line(err_console, f"dbrig: error: {exc}")
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        err_console.print("dbrig: interrupted")
        return EXIT_INTERRUPTED
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "dbrig"
        _line(err_console, f"dbrig: error: {exc.format_message()} (see: {command} --help)")
        return EXIT_BAD_INPUT
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except Exception:
        if debug:
            raise
        _line(
            err_console,
            "dbrig: internal error (a bug): "
            f"{traceback.format_exc().strip().splitlines()[-1]}; rerun with --debug",
        )
        return EXIT_BUG
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    main()
    os._exit(0)
