"""``dbrig show``: the result table of a saved run, or one metric as a factor x factor pivot."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from dbrig import store
from dbrig.commands._common import out_console
from dbrig.errors import ConfigError
from dbrig.report import result_table, scaling
from dbrig.report.data import load_run
from dbrig.report.tables import run_percentile


def print_results(run_dir: store.RunDir, fmt: str = "table") -> None:
    """The per-cell table: each headline metric's mean ±95 % CI (CV) over repetitions."""
    saved = run_dir.saved()
    results = run_dir.results()
    table = result_table.cell_table(results, list(saved.factors), dict(saved.factor_labels))
    headings, rows = result_table.render(table, run_percentile(results))
    if not rows:
        out_console().print("no trials saved yet")
        return
    if fmt == "markdown":
        click.echo(result_table.markdown(headings, rows))
        return
    title = f"{_name(run_dir, saved)}: mean ±95% CI (CV) over repetitions"
    _print_table(title, headings, rows)
    for sweep in filter(scaling.drawable, scaling.find_sweeps(load_run(run_dir.path))):
        out_console().print(scaling.summary_line(sweep), markup=False, soft_wrap=True)


def print_pivot(run_dir: store.RunDir, rows: str, columns: str, metric: str, fmt: str) -> None:
    saved = run_dir.saved()
    labels = dict(saved.factor_labels)
    headings, body = result_table.pivot(run_dir.results(), rows, columns, metric, labels)
    if fmt == "markdown":
        click.echo(result_table.markdown(headings, body))
        return
    _print_table(f"{_name(run_dir, saved)}: {metric}, mean ±95% CI (CV)", headings, body)


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
def show_command(
    run_dir: Path, fmt: str, rows: str | None, columns: str | None, metric: str | None
) -> None:
    """Print the result table of a saved run, or one metric as a factor x factor pivot."""
    run = store.RunDir.open(run_dir)
    if rows is None and columns is None and metric is None:
        print_results(run, fmt)
        return
    if not (rows and columns and metric):
        raise ConfigError("show: a pivot needs --rows, --columns and --metric together")
    print_pivot(run, rows, columns, metric, fmt)
