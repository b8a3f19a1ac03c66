"""``dbrig show``: the result table of a saved run, or one metric as a factor x factor pivot."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import click
from rich.table import Table

from dbrig import store
from dbrig.commands.completion import complete_run_dir
from dbrig.commands.console import err_console, out_console, print_line
from dbrig.errors import ConfigError
from dbrig.report import findings, result_table
from dbrig.report.data import load_run
from dbrig.report.tables import run_percentile


def print_results(
    run_dir: store.RunDir, fmt: str = "table", conditions: Sequence[str] = ()
) -> None:
    """The per-cell table: each headline metric's mean ±95 % CI (CV) over repetitions."""
    saved = run_dir.saved()
    results = result_table.where(run_dir.results(), conditions, dict(saved.factor_labels))
    table = result_table.cell_table(results, list(saved.factors), dict(saved.factor_labels))
    headings, rows = result_table.render(table, run_percentile(results))
    if not rows:
        out_console().print("no trials saved yet")
        return
    if fmt in ("markdown", "csv"):
        writer = result_table.markdown if fmt == "markdown" else result_table.csv_text
        click.echo(writer(headings, rows))
        _print_findings(run_dir, fmt)
        return
    title = f"{_name(run_dir, saved)}: mean ±95% CI (CV) over repetitions"
    headings, rows, dropped = result_table.fit_width(headings, rows, out_console().width)
    _print_table(title, headings, rows)
    if dropped:
        out_console().print(
            f"(too wide for this terminal, left out: {', '.join(dropped)}; "
            "all columns: --format markdown, or the report)",
            markup=False,
            soft_wrap=True,
        )
    _print_findings(run_dir, fmt)


def _print_findings(run_dir: store.RunDir, fmt: str) -> None:
    """The run's findings, the same sentences in every format (report/findings.py).
    Findings that cannot be computed are a warning line: the table is printed, and a
    run that printed it has succeeded."""
    try:
        found = findings.run_findings(load_run(run_dir.path))
    except Exception as exc:  # a bug in the findings must not fail the run
        logging.getLogger(__name__).exception("computing the findings failed")
        print_line(err_console(), f"dbrig: warning: no findings ({exc}); see dbrig.log")
        return
    for line in findings.lines(found, fmt):
        click.echo(line)


def print_pivot(
    run_dir: store.RunDir,
    rows: Sequence[str],
    columns: Sequence[str],
    metric: str,
    fmt: str,
    conditions: Sequence[str] = (),
    pool: bool = False,
) -> None:
    saved = run_dir.saved()
    labels = dict(saved.factor_labels)
    results = result_table.where(run_dir.results(), conditions, labels)
    table = result_table.pivot(
        results, rows, columns, metric, labels, factors=list(saved.factors), pool=pool
    )
    if fmt in ("markdown", "csv"):
        writer = result_table.markdown if fmt == "markdown" else result_table.csv_text
        click.echo(writer(table.headings, table.rows))
    else:
        title = f"{_name(run_dir, saved)}: {metric}, mean ±95% CI (CV)"
        _print_table(title, table.headings, table.rows)
    scope = [f"fixed: {', '.join(conditions)}"] if conditions else []
    if table.pooled_over:
        pooled = ", ".join(f"{labels.get(f, f)} ({n} values)" for f, n in table.pooled_over.items())
        scope.append(
            f"averaged over {pooled} (--pool): the ± and CV include the differences "
            "between those cells, not only repetition noise"
        )
    for line in scope:
        click.echo(line)


def _name(run_dir: store.RunDir, saved: store.SavedRun) -> str:
    return saved.name or run_dir.path.name


def _print_table(title: str, headings: list[str], rows: list[list[str]]) -> None:
    table = Table(title=title)
    for heading in headings:
        table.add_column(heading, overflow="fold")
    for row in rows:
        table.add_row(*row)
    out_console().print(table)


@click.command("show")
@click.argument("run_dir", type=click.Path(path_type=Path), shell_complete=complete_run_dir)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "markdown", "csv"]),
    default="table",
    show_default=True,
    help="markdown: a table to paste into a blog post, an issue or a doc page; csv: the "
    "same rows as CSV, the findings after them as # lines.",
)
@click.option(
    "--rows", multiple=True, help="Pivot: the factor(s) down the side (e.g. server; repeatable)."
)
@click.option(
    "--columns",
    multiple=True,
    help="Pivot: the factor(s) across the top (e.g. engine,concurrency; repeatable).",
)
@click.option("--metric", help="Pivot: the metric in each cell (e.g. avg_s, tps).")
@click.option(
    "--where",
    "conditions",
    multiple=True,
    metavar="FACTOR=VALUE",
    help="Only trials with this factor value (repeatable).",
)
@click.option(
    "--pool",
    is_flag=True,
    help="Pivot: average over factors on neither side (refused without it).",
)
def show_command(
    run_dir: Path,
    fmt: str,
    rows: tuple[str, ...],
    columns: tuple[str, ...],
    metric: str | None,
    conditions: tuple[str, ...],
    pool: bool,
) -> None:
    """Print the result table of a saved run, or one metric as a factor x factor pivot."""
    run = store.RunDir.open(run_dir)
    if not rows and not columns and metric is None:
        if pool:
            raise ConfigError("show: --pool only applies to a pivot (--rows, --columns, --metric)")
        print_results(run, fmt, conditions)
        return
    if not (rows and columns and metric):
        raise ConfigError("show: a pivot needs --rows, --columns and --metric together")
    print_pivot(run, rows, columns, metric, fmt, conditions, pool)
